// Replay from any record (issue 33): a "Replay from here" form on each message record of a
// running host (POST /threads/{id}/fork), and the compare view (#/compare/FORK): the fork's
// source and the fork side by side from the fork point, records that differ marked.
import { el, parseRoot, GOV } from "/dom.js";
import { recordItem } from "/panels.js";
import { listeners } from "/organism.js";

const $ = (id) => document.getElementById(id);
let ctx = null; // { api, live, thread(), failed }

// Hooks the transcript: on a live host each message record gets its control; a fork decision
// gets a link to its comparison.
export function initFork(options) {
  ctx = options;
  new MutationObserver(() => decorate($("t-records"))).observe($("t-records"), { childList: true });
}

function decorate(list) {
  for (const li of list.querySelectorAll("li.rec:not([data-fork])")) {
    li.dataset.fork = "";
    const header = li.querySelector("header");
    if (ctx.live && li.classList.contains("kind-message")) {
      header.append(el("button", { type: "button", class: "replay", "aria-expanded": "false", text: "Replay from here" }));
    }
    const raw = li.querySelector("pre.raw");
    if (li.dataset.root === "decision" && raw && raw.textContent.includes('action="fork"')) {
      header.append(el("a", { class: "compare-link", href: `#/compare/${ctx.thread()}`, text: "Compare with its source" }));
    }
  }
}

// The message record `seq` of the open thread delivers again (context mode), or its first
// message (first-message mode), as the API reads it.
async function message(seq, mode) {
  const after = mode === "first-message" ? 0 : seq - 1;
  const records = await ctx.api(`/view/threads/${ctx.thread()}/records?after=${after}&limit=${mode === "first-message" ? 50 : 1}`);
  return records.find((r) => r.kind === "message") || records[0];
}

// The one replay form, moved under the record whose button was pressed: where to start, the
// listener (one of the organism's, the record's preselected), the message delivered again
// (editable), a budget; a refusal's problem shown in the form.
async function form(li) {
  const seq = Number(li.dataset.seq);
  const [known, record] = await Promise.all([listeners(ctx.api), message(seq, "context")]);
  const pick = el("select", { name: "listener" }, ...known.map((l) => el("option", { value: l.name, text: l.name })));
  pick.value = record.to || "";
  const payload = el("textarea", { name: "payload", rows: "4", cols: "60", spellcheck: "false" });
  payload.value = record.payload;
  const mode = el("select", { name: "mode" },
    el("option", { value: "context", text: "this record, with the history before it" }),
    el("option", { value: "first-message", text: "the thread's first message" }));
  mode.addEventListener("change", () => message(seq, mode.value).then((r) => { payload.value = r.payload; if (r.to) pick.value = r.to; }).catch(ctx.failed));
  const f = el("form", { class: "replay-form", "aria-label": `Replay from record ${seq}` },
    el("label", {}, "Start from ", mode),
    el("label", {}, "Listener ", pick),
    el("label", { class: "replay-message" }, "Message delivered again (edit it to try another input) ", payload),
    el("label", {}, "Max turns ", el("input", { name: "turns", type: "number", min: "1", size: "6" })),
    el("label", {}, "Max tokens ", el("input", { name: "tokens", type: "number", min: "1", size: "8" })),
    el("button", { type: "submit", text: "Replay" }),
    el("button", { type: "button", class: "cancel", text: "Cancel" }),
    el("p", { class: "error replay-error", role: "alert" }));
  f.addEventListener("submit", (e) => {
    e.preventDefault();
    f.querySelector(".replay-error").textContent = "";
    replay(f, seq).catch((error) => { f.querySelector(".replay-error").textContent = error.detail || error.message; });
  });
  f.querySelector(".cancel").addEventListener("click", () => close(li));
  return f;
}

function close(li) {
  li.querySelector(".replay-form")?.remove();
  li.querySelector("button.replay").setAttribute("aria-expanded", "false");
  li.querySelector("button.replay").focus();
}

export function onRecordsClick(event) {
  const button = event.target.closest("button.replay");
  if (!button) return;
  const li = button.closest("li.rec");
  if (li.querySelector(".replay-form")) { close(li); return; }
  document.querySelectorAll(".replay-form").forEach((f) => close(f.closest("li.rec")));
  form(li).then((f) => {
    li.querySelector("header").after(f);
    button.setAttribute("aria-expanded", "true");
    f.querySelector("select").focus();
  }).catch(ctx.failed);
}

// Posts the fork with the message as the form holds it: the host delivers it as it was when
// unchanged, and records an edit as one.
async function replay(f, at) {
  const v = (name) => f.elements[name].value.trim();
  const body = { at, mode: v("mode") };
  if (v("listener")) body.listener = v("listener");
  body.payload = f.elements.payload.value;
  const budget = {};
  for (const k of ["turns", "tokens"]) if (v(k)) budget[k] = Number(v(k));
  if (Object.keys(budget).length) body.budget = budget;
  const made = await ctx.api(`/threads/${ctx.thread()}/fork`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  location.hash = `#/compare/${made.thread}`;
}

// ---- the compare view ----

const LIMIT = 500;

function attr(payload, name) { return (new RegExp(`\\s${name}="([^"]*)"`).exec(payload) || [])[1]; }

// What a record is for comparison: addressee, root and payload (not its id, time or seq).
const sameness = (r) => r && `${r.to}\u0000${r.root}\u0000${r.payload}`;

export async function showCompare(fork) {
  const [decision] = await ctx.api(`/view/threads/${fork}/records?after=0&limit=1`);
  if (!decision || parseRoot(decision.root).ns !== GOV || attr(decision.payload, "action") !== "fork") {
    throw new Error(`thread ${fork} is not a fork`);
  }
  const source = attr(decision.payload, "source");
  const at = Number(attr(decision.payload, "at"));
  const carried = (attr(decision.payload, "carried") || "").split(" ").filter(Boolean).length;
  const mode = attr(decision.payload, "mode");
  // Context: both from the record replayed; first message: both from the start.
  const from = mode === "first-message" ? 0 : at - 1;
  const before = await ctx.api(`/view/threads/${source}/records?after=${from}&limit=${LIMIT}`);
  // The fork's decision and its carried records were committed at once, in consecutive seqs.
  const after = await ctx.api(`/view/threads/${fork}/records?after=${decision.seq + carried}&limit=${LIMIT}`);
  $("c-title").textContent = `Replay of record #${at}`;
  $("c-summary").replaceChildren(
    el("a", { href: `#/thread/${source}`, text: `source ${source.slice(0, 8)}` }), " forked at ",
    el("span", { text: `#${at}` }), ` (${mode}, ${carried} records carried, digest ${attr(decision.payload, "digest").slice(0, 12)}…${attr(decision.payload, "edited") ? "; the message delivered again was edited" : ""}) into `,
    el("a", { href: `#/thread/${fork}`, text: `fork ${fork.slice(0, 8)}` }));
  const rows = align(before, after);
  const differ = rows.filter(([a, b]) => !a || !b || sameness(a) !== sameness(b)).length;
  const cell = (r, other) => {
    if (!r) return el("li", { class: "rec gap differs", text: "nothing here in this thread" });
    const li = recordItem(r);
    if (sameness(r) !== sameness(other)) { li.classList.add("differs"); li.querySelector("header").append(el("strong", { class: "diff-mark", text: "differs" })); }
    return li;
  };
  $("c-source").replaceChildren(...rows.map(([a, b]) => cell(a, b)));
  $("c-fork").replaceChildren(...rows.map(([a, b]) => cell(b, a)));
  $("c-count").textContent = `${rows.length} rows from the fork point; ${differ} differ`;
}

// The two lists aligned on their longest common run of same records (addressee, root, payload):
// rows [a, b], a gap (null) where one thread has a record the other does not.
function align(a, b) {
  const n = a.length, m = b.length;
  const keep = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) {
    keep[i][j] = sameness(a[i]) === sameness(b[j]) ? keep[i + 1][j + 1] + 1 : Math.max(keep[i + 1][j], keep[i][j + 1]);
  }
  const rows = [];
  let i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && sameness(a[i]) === sameness(b[j])) rows.push([a[i++], b[j++]]);
    else if (j < m && (i === n || keep[i][j + 1] >= keep[i + 1][j])) rows.push([null, b[j++]]);
    else rows.push([a[i++], null]);
  }
  return rows;
}
