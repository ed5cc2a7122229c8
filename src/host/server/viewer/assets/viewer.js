// agentpump history viewer: sign-in, the list of root threads, one thread (tree, transcript,
// residuals, budgets, halting report, integrity, plan, process timeline; live records and stop/resume
// on a running host), and the tasks view.
import { el, time, duration, parseRoot, stateBadge, classBadge } from "/dom.js";
import { showOrganism, compose } from "/organism.js";
import { recordItem, drawPlot, drawBudgets, drawReport, drawTree, drawPlan } from "/panels.js";
import { followCall, timelineItems } from "/process.js";
import { drawTasks } from "/tasks.js";
import { drawThreadTotals, drawTotals } from "/totals.js";
import { drawTiming } from "/timing.js";
import { drawLoop } from "/loop.js";
import { followInbox, showInbox, stopFollowing, stopInbox } from "/inbox.js";
import { initFork, onRecordsClick, showCompare } from "/fork.js";

// Every error the page meets is kept here too, so a test (or a person in the console) can read it.
window.viewerErrors = [];
const consoleError = console.error.bind(console);
console.error = (...args) => { window.viewerErrors.push(args.map(String).join(" ")); consoleError(...args); };
window.addEventListener("error", (e) => window.viewerErrors.push(`error: ${e.message}`));
window.addEventListener("unhandledrejection", (e) => window.viewerErrors.push(`unhandled: ${e.reason}`));

const $ = (id) => document.getElementById(id);
const state = { routed: false, routeSeq: 0, live: false, thread: null, last: 0, more: false, events: null, refresh: null, closed: false, tasks: null, listPoll: null };

class SignedOut extends Error {}

// The status line; a passing word (`fade`) clears itself after a few seconds.
function say(text, fade = false) {
  $("status").textContent = text;
  clearTimeout(state.sayTimer);
  if (fade) state.sayTimer = setTimeout(() => { if ($("status").textContent === text) $("status").textContent = ""; }, 4000);
}

// A JSON call; 401 shows the sign-in form, any other failure is thrown with the problem's detail.
async function api(path, options = {}) {
  const { headers, ...rest } = options;
  const response = await fetch(path, { credentials: "same-origin", ...rest, headers: { Accept: "application/json", ...(headers || {}) } });
  if (response.status === 401) { showOnly("login"); throw new SignedOut("sign in first"); }
  const text = await response.text();
  if (!response.ok) {
    let detail = text;
    try { detail = JSON.parse(text).detail || text; } catch (_) { /* not problem JSON */ }
    throw Object.assign(new Error(`${path}: ${response.status} ${detail}`), { status: response.status, detail });
  }
  return text ? JSON.parse(text) : null;
}

function failed(e) {
  if (e instanceof SignedOut) return;
  console.error(e.message || String(e));
  say(`Error: ${e.message || e}`);
}

function showOnly(id) {
  for (const s of ["login", "list", "thread", "tasks", "inbox", "compare", "totals", "organism"]) $(s).hidden = s !== id;
  $("signout").hidden = id === "login";
  for (const [nav, view] of [["nav-threads", "list"], ["nav-tasks", "tasks"], ["nav-inbox", "inbox"], ["nav-totals", "totals"], ["nav-organism", "organism"]]) {
    if (view === id) $(nav).setAttribute("aria-current", "page"); else $(nav).removeAttribute("aria-current");
  }
  if (id !== "tasks") stopTaskEvents();
  if (id !== "list") stopListPoll();
  if (id !== "inbox") stopInbox();
  if (id === "login") { stopEvents(); stopFollowing(); $("inbox-count").hidden = true; $("token").focus(); }
}

async function signIn(token) {
  const r = await fetch("/session", { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ token }) });
  return r.status === 204;
}

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
  const seq = state.routeSeq;
  const page = await api(`/view/threads?${q}`);
  // A refresh of the list answered after the page moved on to another view is dropped.
  if (seq !== state.routeSeq) return;
  const body = $("threads").tBodies[0];
  const cell = (label, attrs, ...children) => el("td", { "data-label": label, ...attrs }, ...children);
  body.replaceChildren(...page.threads.map((t) => el("tr", { "data-thread": t.id },
    cell("Thread", {}, el("a", { href: `#/thread/${t.id}` }, t.path)),
    cell("First message", { class: "opening" }, opening(t.opening)),
    cell("State", {}, stateBadge(t.state, t.class)),
    cell("Halt", {}, t.class ? classBadge(t.class) : ""),
    cell("Certificate", {}, t.certificate ? classBadge(t.certificate) : ""),
    cell("Deliveries", { class: "num", text: String(t.counters.deliveries) }),
    cell("Tokens", { class: "num", text: String(t.counters.tokens_in + t.counters.tokens_out) }),
    cell("Cost", { class: "num", text: t.counters.cost }),
    cell("Children", { class: "num", text: String(t.children.length) }),
    cell("Started", {}, t.started_us ? time(t.started_us) : ""),
    cell("Duration", { class: "num", text: t.started_us && t.last_us ? duration(t.last_us - t.started_us) : "" }))));
  $("threads-caption").textContent = page.threads.length ? `Root threads, newest first (${page.threads.length} on this page)` : "No thread matches";
  const older = new URLSearchParams(q);
  if (page.next) older.set("before", page.next);
  $("older").hidden = !page.next;
  $("older").href = `#/?${older}`;
  const first = new URLSearchParams(q); first.delete("before");
  $("first").href = `#/?${first}`;
  showOnly("list");
  say("");
  // A way in: start a thread from the page (a running host only).
  if (state.live && !$("start-box").firstChild) {
    $("start").hidden = !(await compose($("start-box"), null, api, (a) => { location.hash = `#/thread/${a.thread}`; }));
  }
  if (state.live && !q.get("before")) startListPoll();
}

// What a thread is: its first message's root (the full name on hover), the listener it went to
// and the start of its text (one piece: a card's cell on a narrow screen keeps it together).
function opening(o) {
  if (!o) return el("span", { class: "muted", text: "no message yet" });
  return el("span", {},
    el("code", { class: "opening-root", title: o.root, text: parseRoot(o.root).local }),
    o.to ? el("span", { class: "opening-to", text: ` → ${o.to}` }) : null,
    o.text ? el("span", { class: "opening-text", text: o.text }) : null);
}

// On a live host the first page of the list follows the host: it is read again every few
// seconds while it is shown (new threads appear, states and halts change).
const LIST_POLL_MS = 3000;
function startListPoll() {
  if (state.listPoll) return;
  state.listPoll = setInterval(() => {
    if ($("list").hidden || document.activeElement?.closest?.("#filters")) return;
    showList().catch(failed);
  }, LIST_POLL_MS);
}

function stopListPoll() {
  clearInterval(state.listPoll);
  state.listPoll = null;
}

function applyFilters(event) {
  event.preventDefault();
  const q = new URLSearchParams();
  for (const [k, id] of [["state", "f-state"], ["class", "f-class"], ["q", "f-q"]]) if ($(id).value) q.set(k, $(id).value);
  location.hash = `#/?${q}`;
}

// ---- one thread ----

async function loadDetail() {
  const id = state.thread;
  if (!id) return; // a refresh due after the page moved on to another view
  const d = await api(`/view/threads/${id}`);
  if (id !== state.thread) return;
  const top = d.tree[0];
  state.closed = top.state === "done" || top.state === "halted";
  state.report = top.report;
  $("t-title").textContent = `Thread ${top.path}`;
  const integrity = d.integrity.verified
    ? el("span", { class: "badge ok", id: "integrity", title: "hash chain recomputed", text: `chain verified (${d.integrity.records} records)` })
    : el("span", { class: "badge bad", id: "integrity", title: d.integrity.detail, text: `chain broken at #${d.integrity.broken_at}` });
  // A halt's class and certificate describe the thread only while it stays halted: after a
  // resume the last report is history, said as such.
  const halted = state.closed && top.report;
  const cert = halted && top.report.halting_certificate;
  const badges = [stateBadge(top.state, halted ? top.report.class : null), integrity];
  if (halted) badges.splice(1, 0, classBadge(top.report.class, { id: "halt-class", title: `halt class (${top.report.stop_reason})` }));
  if (cert) badges.splice(2, 0, classBadge(cert.type, { id: "certificate", title: `certificate, lane ${cert.lane}` }));
  $("t-badges").replaceChildren(...badges);
  $("t-waiting").hidden = top.state !== "waiting";
  $("report-title").textContent = top.report && !state.closed ? "Last halting report (the thread was resumed since)" : "Halting report";
  $("t-parent").replaceChildren(...(top.parent ? [el("a", { href: `#/thread/${top.parent}`, id: "parent-link" }, "↑ Parent thread"), ` (spawned this one)`] : []));
  $("t-actions").hidden = !d.live;
  $("stop").hidden = state.closed;
  $("resume-open").hidden = top.state !== "halted";
  if (top.state !== "halted") $("resume-form").hidden = true;
  drawTree(d.tree, state.thread); drawReport(id, top.report); drawBudgets(top.report, d.budget); drawPlot(top.report, state.records);
  drawPlan(d.plan);
  drawLoop(id, d.tree, api, () => state.thread).catch(failed);
  Promise.all([api(`/view/threads/${id}/totals`), api(`/view/threads/${id}/timing`)]).then(([t, w]) => { if (id === state.thread) { drawThreadTotals(t, $); drawTiming(w, $); } }).catch(failed);
  if (d.live && !state.closed) startEvents(); else if (state.closed) stopEvents();
}

// The transcript is a window of at most SHOWN records: "Later" appends a page and drops the
// oldest past the window, "Earlier" prepends one and drops the newest, "First" and "Latest" jump
// to either end. A thread of 100 000 records costs the page no more than one of 500.
const PAGE = 200;
const SHOWN = 600;

function setWindow() {
  const list = $("t-records");
  state.first = list.firstElementChild ? Number(list.firstElementChild.dataset.seq) : 0;
  state.last = list.lastElementChild ? Number(list.lastElementChild.dataset.seq) : state.last;
  state.records = state.records.filter((r) => r.seq >= state.first && r.seq <= state.last);
  $("more").hidden = !state.more;
  $("rec-latest").hidden = !state.more;
  $("rec-latest-top").hidden = !state.more;
  $("rec-earlier").hidden = !state.earlier;
  $("rec-first").hidden = !state.earlier;
  const n = list.childElementCount;
  $("rec-window").textContent = n ? `${n} records shown, #${state.first} to #${state.last}${state.earlier ? "; earlier ones above" : ""}${state.more ? "; later ones below" : ""}` : "no records";
}

function append(records) {
  const list = $("t-records");
  for (const r of records) {
    if (r.seq <= state.last) continue;
    state.records.push(r);
    list.append(recordItem(r));
    state.last = r.seq;
  }
  while (list.childElementCount > SHOWN) { list.firstElementChild.remove(); state.earlier = true; }
}

function prepend(records) {
  const list = $("t-records");
  const older = records.filter((r) => !state.first || r.seq < state.first);
  list.prepend(...older.map(recordItem));
  state.records.unshift(...older);
  while (list.childElementCount > SHOWN) { list.lastElementChild.remove(); state.more = true; }
}

async function loadRecords() {
  const page = await api(`/view/threads/${state.thread}/records?after=${state.last}&limit=${PAGE}`);
  append(page);
  state.more = page.length === PAGE;
  setWindow();
}

async function loadEarlier() {
  const page = await api(`/view/threads/${state.thread}/records?before=${state.first}&limit=${PAGE}`);
  prepend(page);
  state.earlier = page.length === PAGE;
  setWindow();
}

// Jumps to an end of the transcript: the first page, or the last one.
async function jump(end) {
  const query = end === "first" ? `after=0` : `before=${Number.MAX_SAFE_INTEGER}`;
  const page = await api(`/view/threads/${state.thread}/records?${query}&limit=${PAGE}`);
  $("t-records").replaceChildren(...page.map(recordItem));
  state.records = page;
  state.last = page.length ? page[page.length - 1].seq : 0;
  state.more = end === "first" && page.length === PAGE;
  state.earlier = end !== "first" && page.length === PAGE;
  setWindow();
  const target = end === "first" ? $("t-records").firstElementChild : $("t-records").lastElementChild;
  if (target) target.scrollIntoView({ block: end === "first" ? "start" : "end" });
}

async function showThread(id) {
  stopEvents();
  $("t-missing").hidden = true;
  $("t-waiting").hidden = true;
  Object.assign(state, { thread: id, first: 0, last: 0, more: false, earlier: false, records: [], report: null, timeline: { last: 0, more: false, count: 0 } });
  $("t-records").replaceChildren();
  $("t-timeline").replaceChildren();
  $("t-title").textContent = "Thread";
  showOnly("thread");
  try {
    await api(`/view/threads/${id}`);
  } catch (e) {
    if (e.status !== 404) throw e;
    // An unknown thread says so, instead of an empty page.
    $("t-title").textContent = "No such thread";
    $("t-missing").hidden = false;
    $("t-missing-detail").textContent = e.detail;
    for (const part of ["t-badges", "t-parent", "t-tree", "t-plot", "t-budgets", "t-report"]) $(part).replaceChildren();
    $("t-body").hidden = true;
    say("");
    return;
  }
  $("t-body").hidden = false;
  $("t-organism").href = `#/organism/${id}`;
  $("send").hidden = !state.live;
  if (state.live) await compose($("send-box"), id, api, () => { say("Sent.", true); startEvents(); });
  await loadRecords();
  await loadTimeline();
  await loadDetail();
  say("");
}

// ---- the process timeline: every TELL, MILESTONE, FAILED and RETURN of the thread, read from
// the API a page of process events at a time (not only those in the transcript's window) ----

const EVENTS = 500;

function addToTimeline(records) {
  const items = timelineItems(records);
  $("t-timeline").append(...items);
  state.timeline.count += items.length;
  if (records.length) state.timeline.last = records[records.length - 1].seq;
  $("t-process").hidden = !state.timeline.count;
  $("tl-more").hidden = !state.timeline.more;
  $("tl-count").textContent = `${state.timeline.count} events${state.timeline.more ? ", more below" : ""}`;
}

async function loadTimeline() {
  const id = state.thread;
  const page = await api(`/view/threads/${id}/process?after=${state.timeline.last}&limit=${EVENTS}`);
  if (id !== state.thread) return;
  state.timeline.more = page.length === EVENTS;
  addToTimeline(page);
}

// A click on a timeline entry: its record, scrolled to and focused — the transcript's window
// moves to it first when it is not shown.
async function followTimeline(event) {
  const link = event.target.closest("a.tl-link");
  if (!link) return;
  event.preventDefault();
  const seq = Number(link.dataset.seq);
  const shown = () => document.querySelector(`li.rec[data-seq="${seq}"]`);
  if (!shown()) {
    const page = await api(`/view/threads/${state.thread}/records?after=${seq - 1}&limit=${PAGE}`);
    $("t-records").replaceChildren(...page.map(recordItem));
    state.records = page;
    state.last = page.length ? page[page.length - 1].seq : 0;
    state.more = page.length === PAGE;
    state.earlier = true;
    setWindow();
  }
  const rec = shown();
  if (!rec) return;
  rec.setAttribute("tabindex", "-1");
  rec.scrollIntoView({ block: "center" });
  rec.focus({ preventScroll: true });
}

// ---- tasks ----

async function showTasks() {
  stopEvents();
  state.thread = null;
  const data = await api("/view/tasks");
  drawTasks(data, $);
  showOnly("tasks");
  if (state.live && data.ledger && !data.note) startTaskEvents();
  say("");
}

// On a running host the view follows the ledger: each new line (GET /tasks/events) reloads it.
function startTaskEvents() {
  if (state.tasks) return;
  const es = new EventSource("/tasks/events", { withCredentials: true });
  state.tasks = es;
  $("tasks-live").hidden = false;
  es.addEventListener("task", () => {
    clearTimeout(state.taskRefresh);
    state.taskRefresh = setTimeout(() => api("/view/tasks").then((d) => drawTasks(d, $)).catch(failed), 200);
  });
  es.addEventListener("error", () => { if (es.readyState === EventSource.CLOSED) stopTaskEvents(); });
}

function stopTaskEvents() {
  if (state.tasks) state.tasks.close();
  state.tasks = null;
  $("tasks-live").hidden = true;
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
    if (r.thread !== state.thread) return;
    if (r.root.startsWith("{urn:agentpump:process:v1}") && !state.timeline.more && r.seq > state.timeline.last) addToTimeline([r]);
    if (state.more) return;
    append([r]);
    setWindow();
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
  say("Done.", true);
}

function resumeBudget() {
  const budget = {};
  for (const [k, id] of [["turns", "r-turns"], ["tokens", "r-tokens"], ["wall_clock_ms", "r-wall"]]) {
    if ($(id).value !== "") budget[k] = Number($(id).value);
  }
  return budget;
}

// ---- routing ----

async function route() {
  // An in-page anchor (the skip link's `#main`) is no view: the browser goes to it.
  if (state.routed && location.hash && !location.hash.startsWith("#/")) return;
  state.routed = true;
  state.routeSeq++;
  const m = /^#\/thread\/([0-9a-f-]{36})/.exec(location.hash);
  const c = /^#\/compare\/([0-9a-f-]{36})/.exec(location.hash);
  try {
    if (m) await showThread(m[1]);
    else if (c) { stopEvents(); state.thread = null; showOnly("compare"); await showCompare(c[1]); say(""); }
    else if (/^#\/tasks\b/.test(location.hash)) await showTasks();
    else if (/^#\/organism\b/.test(location.hash)) { stopEvents(); state.thread = null; const t = /^#\/organism\/([0-9a-f-]{36})/.exec(location.hash); await showOrganism(t && t[1], api, $); showOnly("organism"); say(""); }
    else if (/^#\/totals\b/.test(location.hash)) { stopEvents(); state.thread = null; const by = /^#\/totals\/day\b/.test(location.hash) ? "day" : "listener"; drawTotals(await api(`/view/totals?by=${by}`), $); showOnly("totals"); }
    else if (/^#\/inbox\b/.test(location.hash)) { stopEvents(); showOnly("inbox"); showInbox($, state.live, failed); }
    else { stopEvents(); state.thread = null; await showList(); }
    // Each view opens at its top, wherever the last one was scrolled to.
    window.scrollTo(0, 0);
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
    initFork({ api, live: info.live, thread: () => state.thread, failed });
    $("mode").textContent = info.live ? "live host" : "history file (read-only)";
    if (info.live) followInbox($, failed);
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
$("rec-earlier").addEventListener("click", () => loadEarlier().catch(failed));
$("rec-first").addEventListener("click", () => jump("first").catch(failed));
$("rec-latest").addEventListener("click", () => jump("latest").catch(failed));
$("rec-latest-top").addEventListener("click", () => jump("latest").catch(failed));
$("t-records").addEventListener("click", followCall);
$("t-records").addEventListener("click", onRecordsClick);
$("t-timeline").addEventListener("click", (e) => followTimeline(e).catch(failed));
$("tl-more").addEventListener("click", () => loadTimeline().catch(failed));
$("tasks-refresh").addEventListener("click", () => api("/view/tasks").then((d) => drawTasks(d, $)).catch(failed));
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
