// A phuc-loop thread (seed 002, urn:agentpump:loop:v1) as its iterations: per iteration the
// Scout, Solver and Skeptic child threads (links, with their states), the residual, its
// direction, the criteria and the certificate the controller judged. Read from the thread tree
// and the controller's journal (`<progress>` records, one JSON step each); the payloads are
// parsed with DOMParser into detached documents and only text is copied into the page.
import { el, stateBadge } from "/dom.js";

export const LOOP = "urn:agentpump:loop:v1";
const ROLES = ["scout", "solver", "skeptic"];
const SUB = /^iter(\d+)-(scout|solver|skeptic)$/;
const PAGE = 500;

const $ = (id) => document.getElementById(id);

// The role threads of loop thread `id`: Map "N role" → tree node.
function roleThreads(id, tree) {
  const roles = new Map();
  for (const t of tree) {
    const m = t.parent === id ? SUB.exec(t.path.split(".").pop()) : null;
    if (m) roles.set(`${m[1]} ${m[2]}`, t);
  }
  return roles;
}

// The JSON of a `<progress>` payload, or null.
function step(payload) {
  const doc = new DOMParser().parseFromString(payload, "application/xml");
  if (doc.getElementsByTagName("parsererror").length) return null;
  try { return JSON.parse(doc.documentElement.textContent); } catch { return null; }
}

// Every judged iteration's entry and criteria, by iteration.
async function judged(api, id) {
  const out = new Map();
  for (let after = 0; ;) {
    const page = await api(`/view/threads/${id}/records?after=${after}&limit=${PAGE}`);
    for (const r of page) {
      const s = r.root === `{${LOOP}}progress` ? step(r.payload) : null;
      if (s && s.step === "judged" && s.entry) out.set(s.entry.iteration, s);
    }
    if (page.length < PAGE) return out;
    after = page[page.length - 1].seq;
  }
}

function roleCell(t, role) {
  if (!t) return el("td", { class: "muted", text: "—" });
  return el("td", { "data-role": role },
    el("a", { href: `#/thread/${t.id}`, "data-thread": t.id, text: role }), " ", stateBadge(t.state));
}

function iterationRow(n, roles, s) {
  const e = s ? s.entry : null;
  const criteria = s ? s.criteria.map((c) => `${c.met ? "✔" : "✘"} ${c.id}`).join(", ") : "";
  return el("tr", { "data-iteration": String(n) },
    el("th", { scope: "row", text: `iteration ${n}` }),
    ...ROLES.map((r) => roleCell(roles.get(`${n} ${r}`), r)),
    el("td", { class: "residual", text: e && e.residual ? e.residual : "—" }),
    el("td", { class: "direction", text: e ? e.direction : "running" }),
    el("td", { class: "criteria", text: criteria }),
    el("td", { class: "certificate", text: e ? e.certificate : "" }));
}

// Draws the loop panel of thread `id`, hidden unless the thread spawned loop roles.
export async function drawLoop(id, tree, api, current) {
  const roles = roleThreads(id, tree);
  $("t-loop").hidden = roles.size === 0;
  if (!roles.size) return;
  const entries = await judged(api, id);
  if (current() !== id) return;
  const last = Math.max(...[...roles.keys()].map((k) => Number(k.split(" ")[0])));
  const rows = [];
  for (let n = 0; n <= last; n++) rows.push(iterationRow(n, roles, entries.get(n)));
  const head = el("tr", {}, ...["", "Scout", "Solver", "Skeptic", "residual", "direction", "criteria", "certificate"]
    .map((h) => el("th", { scope: "col", text: h })));
  $("t-loop-body").replaceChildren(el("table", { class: "loop" }, el("thead", {}, head), el("tbody", {}, ...rows)));
}
