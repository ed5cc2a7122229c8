// agentpump history viewer: sign-in, the list of root threads, and one thread (tree, transcript,
// residuals, budgets, halting report, integrity; live records and stop/resume on a running host).
import { pretty } from "/xml.js";
import { residualPlot } from "/plot.js";

// Every error the page meets is kept here too, so a test (or a person in the console) can read it.
window.viewerErrors = [];
const consoleError = console.error.bind(console);
console.error = (...args) => { window.viewerErrors.push(args.map(String).join(" ")); consoleError(...args); };
window.addEventListener("error", (e) => window.viewerErrors.push(`error: ${e.message}`));
window.addEventListener("unhandledrejection", (e) => window.viewerErrors.push(`unhandled: ${e.reason}`));

const SYS = "urn:agentpump:system:v1";
const GOV = "urn:agentpump:governor:v1";
const $ = (id) => document.getElementById(id);
const state = { live: false, thread: null, last: 0, more: false, events: null, refresh: null, closed: false };

class SignedOut extends Error {}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v === true ? "" : v);
  }
  e.append(...children.filter((c) => c !== null && c !== undefined));
  return e;
}

function say(text) { $("status").textContent = text; }

// A JSON call; 401 shows the sign-in form, any other failure is thrown with the problem's detail.
async function api(path, options = {}) {
  const { headers, ...rest } = options;
  const response = await fetch(path, { credentials: "same-origin", ...rest, headers: { Accept: "application/json", ...(headers || {}) } });
  if (response.status === 401) { showOnly("login"); throw new SignedOut("sign in first"); }
  const text = await response.text();
  if (!response.ok) {
    let detail = text;
    try { detail = JSON.parse(text).detail || text; } catch (_) { /* not problem JSON */ }
    throw new Error(`${path}: ${response.status} ${detail}`);
  }
  return text ? JSON.parse(text) : null;
}

function failed(e) {
  if (e instanceof SignedOut) return;
  console.error(e.message || String(e));
  say(`Error: ${e.message || e}`);
}

function showOnly(id) {
  for (const s of ["login", "list", "thread"]) $(s).hidden = s !== id;
  $("signout").hidden = id === "login";
  if (id === "login") { stopEvents(); $("token").focus(); }
}

async function signIn(token) {
  const r = await fetch("/session", { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token }) });
  return r.status === 204;
}

function parseRoot(root) {
  const m = /^\{([^}]*)\}(.*)$/.exec(root);
  return m ? { ns: m[1], local: m[2] } : { ns: "", local: root };
}

function time(us) {
  const d = new Date(us / 1000);
  return el("time", { datetime: d.toISOString(), title: d.toISOString() }, d.toISOString().replace("T", " ").slice(0, 23));
}

function stateBadge(s) { return el("span", { class: `badge state-${s}`, text: s }); }

// ---- list ----

function listQuery() {
  const q = new URLSearchParams(location.hash.split("?")[1] || "");
  for (const k of [...q.keys()]) if (!q.get(k)) q.delete(k);
  return q;
}

async function showList() {
  const q = listQuery();
  $("f-state").value = q.get("state") || "";
  $("f-class").value = q.get("class") || "";
  $("f-q").value = q.get("q") || "";
  const page = await api(`/view/threads?${q}`);
  const body = $("threads").tBodies[0];
  body.replaceChildren(...page.threads.map((t) => el("tr", { "data-thread": t.id },
    el("td", {}, el("a", { href: `#/thread/${t.id}` }, t.path)),
    el("td", {}, stateBadge(t.state)),
    el("td", { text: t.class || "" }),
    el("td", {}, t.certificate ? el("span", { class: "badge ok", text: t.certificate }) : ""),
    el("td", { class: "num", text: String(t.counters.deliveries) }),
    el("td", { class: "num", text: String(t.counters.tokens_in + t.counters.tokens_out) }),
    el("td", { class: "num", text: t.counters.cost }),
    el("td", { class: "num", text: String(t.children.length) }),
    el("td", {}, t.started_us ? time(t.started_us) : ""))));
  $("threads-caption").textContent = page.threads.length ? `Root threads, newest first (${page.threads.length} on this page)` : "No thread matches";
  const older = new URLSearchParams(q);
  if (page.next) older.set("before", page.next);
  $("older").hidden = !page.next;
  $("older").href = `#/?${older}`;
  const first = new URLSearchParams(q); first.delete("before");
  $("first").href = `#/?${first}`;
  showOnly("list");
  say("");
}

function applyFilters(event) {
  event.preventDefault();
  const q = new URLSearchParams();
  for (const [k, id] of [["state", "f-state"], ["class", "f-class"], ["q", "f-q"]]) if ($(id).value) q.set(k, $(id).value);
  location.hash = `#/?${q}`;
}

// ---- one thread ----

function recordItem(r) {
  const root = parseRoot(r.root);
  const cls = ["rec", `kind-${r.kind}`];
  if (root.ns === SYS) cls.push("sys", `sys-${root.local}`);
  if (root.ns === GOV) cls.push("gov", `gov-${root.local}`);
  const label = root.ns === SYS ? "system" : root.ns === GOV ? "governor" : r.kind;
  return el("li", { class: cls.join(" "), "data-seq": String(r.seq), "data-id": r.id, "data-root": root.local },
    el("header", {},
      el("span", { text: `#${r.seq}` }), time(r.time_us),
      el("span", { class: "route", text: `${r.from} → ${r.to || "*"}` }),
      el("span", { class: "kind", text: label }),
      el("span", { text: root.local })),
    pretty(r.payload),
    el("details", {}, el("summary", { text: "Exact bytes" }), el("pre", { class: "raw", text: r.payload })));
}

function residualsOf(records) {
  return records.filter((r) => r.root === `{${GOV}}residual`)
    .map((r) => (/\svalue="([^"]*)"/.exec(r.payload) || [])[1]).filter((v) => v !== undefined);
}

function drawPlot(report) {
  const cert = report && report.halting_certificate;
  let values = cert ? cert.residual_history_decimal_strings : [];
  if (!values.length) values = residualsOf(state.records);
  const box = $("t-plot");
  if (!values.length) { box.replaceChildren(el("p", { class: "muted", text: "No residuals reported." })); return; }
  box.replaceChildren(residualPlot(values, cert ? cert.R_p_decimal_string : null));
}

function drawBudgets(report) {
  const box = $("t-budgets");
  if (!report) { box.replaceChildren(el("p", { class: "muted", text: "Spend against limits is reported when the thread halts." })); return; }
  box.replaceChildren(...Object.entries(report.budget).map(([name, b]) => {
    const spent = Number(b.spent), limit = b.limit === null ? null : Number(b.limit);
    const id = `budget-${name}`;
    return el("div", { class: "budget" },
      el("label", { for: id, text: name }),
      limit === null ? el("span", { id, class: "muted", text: "no limit" }) : el("meter", { id, min: "0", max: String(limit || 1), value: String(spent), high: String(0.8 * limit), optimum: "0" }),
      el("span", { text: `${b.spent} spent${limit === null ? "" : ` of ${b.limit}, ${b.remaining} left`}` }));
  }));
}

function drawReport(id, report) {
  const box = $("t-report");
  if (!report) { box.replaceChildren(el("p", { class: "muted", text: "The thread has not halted." })); return; }
  const cert = report.halting_certificate;
  const rows = [["Class", report.class], ["Status", report.status], ["Stop reason", report.stop_reason],
    ["Certificate", cert ? `${cert.type} (lane ${cert.lane})` : "none"], ["Goal", report.goal],
    ["Final residual", cert && cert.final_residual_decimal_string], ["r-p", cert && cert.R_p_decimal_string],
    ["Iterations", String(report.iterations_completed)], ["Elapsed (s)", report.total_seconds_elapsed], ["Idle (s)", report.total_seconds_idle]];
  const dl = el("dl", { class: "report", id: "report-fields" });
  for (const [k, v] of rows) if (v) dl.append(el("dt", { text: k }), el("dd", { text: v }));
  const criteria = cert ? cert.acceptance_criteria_checklist : [];
  const list = criteria.length ? el("ul", {}, ...criteria.map((c) => el("li", { text: `${c.met ? "✔" : "✘"} ${c.criterion} — ${c.reported_by || "unreported"}` }))) : null;
  const json = el("p", {}, el("a", { href: `/view/threads/${id}/report`, id: "report-json" }, "Report as JSON"));
  box.replaceChildren(...(list ? [dl, list, json] : [dl, json]));
}

function drawTree(tree) {
  const byParent = new Map();
  for (const t of tree) { const k = t.parent || "root"; if (!byParent.has(k)) byParent.set(k, []); byParent.get(k).push(t); }
  const item = (t, depth) => {
    const cert = t.report && t.report.halting_certificate;
    const halt = t.report ? `${t.report.class}${cert && cert.type !== t.report.class ? ` · ${cert.type}` : ""}` : "";
    const kids = byParent.get(t.id) || [];
    return el("li", { class: "tree-node", "data-depth": String(depth), "data-thread": t.id },
      t.id === state.thread ? el("strong", { text: t.path }) : el("a", { href: `#/thread/${t.id}` }, t.path), " ",
      stateBadge(t.state), halt ? el("span", { class: "badge", text: halt }) : null,
      el("span", { class: "muted", text: ` ${t.counters.deliveries} deliveries` }),
      t.carve_out ? el("span", { class: "carve", title: "budget carved out by the spawner", text: ` carve-out ${t.carve_out}` }) : null,
      kids.length ? el("ul", {}, ...kids.map((k) => item(k, depth + 1))) : null);
  };
  $("t-tree").replaceChildren(item(tree[0], 0));
}

async function loadDetail() {
  const id = state.thread;
  const d = await api(`/view/threads/${id}`);
  if (id !== state.thread) return;
  const top = d.tree[0];
  state.closed = top.state === "done" || top.state === "halted";
  state.report = top.report;
  $("t-title").textContent = `Thread ${top.path}`;
  const integrity = d.integrity.verified
    ? el("span", { class: "badge ok", id: "integrity", title: "hash chain recomputed", text: `chain verified (${d.integrity.records} records)` })
    : el("span", { class: "badge bad", id: "integrity", title: d.integrity.detail, text: `chain broken at #${d.integrity.broken_at}` });
  const cert = top.report && top.report.halting_certificate;
  const badges = [stateBadge(top.state), integrity];
  if (top.report) badges.splice(1, 0, el("span", { class: "badge", id: "halt-class", title: `halt class (${top.report.stop_reason})`, text: top.report.class }));
  if (cert) badges.splice(2, 0, el("span", { class: "badge ok", id: "certificate", title: `certificate, lane ${cert.lane}`, text: cert.type }));
  $("t-badges").replaceChildren(...badges);
  $("t-actions").hidden = !d.live;
  $("stop").hidden = state.closed;
  $("resume-open").hidden = top.state !== "halted";
  if (top.state !== "halted") $("resume-form").hidden = true;
  drawTree(d.tree); drawReport(id, top.report); drawBudgets(top.report); drawPlot(top.report);
  if (d.live && !state.closed) startEvents(); else if (state.closed) stopEvents();
}

function append(records) {
  const list = $("t-records");
  for (const r of records) {
    if (r.seq <= state.last) continue;
    state.records.push(r);
    list.append(recordItem(r));
    state.last = r.seq;
  }
}

async function loadRecords() {
  const page = await api(`/view/threads/${state.thread}/records?after=${state.last}&limit=200`);
  append(page);
  state.more = page.length === 200;
  $("more").hidden = !state.more;
}

async function showThread(id) {
  stopEvents();
  Object.assign(state, { thread: id, last: 0, more: false, records: [], report: null });
  $("t-records").replaceChildren();
  $("t-title").textContent = "Thread";
  showOnly("thread");
  await loadRecords();
  await loadDetail();
  say("");
}

// Live: the API's event stream sends the thread's records after the last one shown (a record
// that arrives twice is skipped). The stream ends when the thread closes; a later resume opens it again.
function startEvents() {
  if (state.events || !state.live) return;
  const es = new EventSource(`/threads/${state.thread}/events?after=${state.last}`, { withCredentials: true });
  state.events = es;
  $("t-live").hidden = false;
  es.addEventListener("record", (e) => {
    const r = JSON.parse(e.data);
    if (r.thread !== state.thread || state.more) return;
    append([r]);
    clearTimeout(state.refresh);
    state.refresh = setTimeout(() => loadDetail().catch(failed), 250);
  });
  es.addEventListener("error", () => {
    if (es.readyState !== EventSource.CLOSED && !state.closed) return;
    stopEvents();
  });
  es.addEventListener("open", () => { if (state.closed) stopEvents(); });
}

function stopEvents() {
  if (state.events) state.events.close();
  state.events = null;
  $("t-live").hidden = true;
}

async function act(path, body) {
  say("Working…");
  await api(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: body === undefined ? "" : JSON.stringify(body) });
  stopEvents();
  await loadDetail();
  await loadRecords();
  say("Done.");
}

function resumeBudget() {
  const budget = {};
  for (const [k, id] of [["turns", "r-turns"], ["tokens", "r-tokens"], ["wall-clock", "r-wall"]]) {
    if ($(id).value !== "") budget[k] = Number($(id).value);
  }
  return budget;
}

// ---- routing ----

async function route() {
  const m = /^#\/thread\/([0-9a-f-]{36})/.exec(location.hash);
  try {
    if (m) await showThread(m[1]); else { stopEvents(); state.thread = null; await showList(); }
    const h = document.querySelector("section:not([hidden]) h1");
    if (h) h.focus({ preventScroll: true });
  } catch (e) { failed(e); }
}

async function start() {
  const params = new URLSearchParams(location.search);
  if (params.has("token")) {
    const ok = await signIn(params.get("token"));
    history.replaceState(null, "", location.pathname + location.hash);
    if (!ok) { showOnly("login"); $("login-error").textContent = "The token in the address was not accepted."; return; }
  }
  try {
    const info = await api("/view/info");
    state.live = info.live;
    $("mode").textContent = info.live ? "live host" : "history file (read-only)";
    await route();
  } catch (e) { failed(e); }
}

$("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("login-error").textContent = "";
  if (await signIn($("token").value)) { $("token").value = ""; await start(); } else {
    $("login-error").textContent = "Wrong token: nothing is shown without the right one.";
  }
});
$("signout").addEventListener("click", async () => { await fetch("/session", { method: "DELETE", credentials: "same-origin" }); showOnly("login"); });
$("filters").addEventListener("submit", applyFilters);
$("refresh").addEventListener("click", () => showList().catch(failed));
$("more").addEventListener("click", () => loadRecords().catch(failed));
$("stop").addEventListener("click", () => act(`/threads/${state.thread}/stop`).catch(failed));
$("resume-open").addEventListener("click", () => {
  const form = $("resume-form");
  form.hidden = !form.hidden;
  $("resume-open").setAttribute("aria-expanded", String(!form.hidden));
  if (!form.hidden) $("r-turns").focus();
});
$("resume-cancel").addEventListener("click", () => { $("resume-form").hidden = true; $("resume-open").focus(); });
$("resume-form").addEventListener("submit", (event) => {
  event.preventDefault();
  $("resume-form").hidden = true;
  act(`/threads/${state.thread}/resume`, resumeBudget()).catch(failed);
});
window.addEventListener("hashchange", route);
start();
