// The inbox view (a person in the loop, docs/inbox.md): the open requests, oldest first, each
// in its thread's context (a link to the thread, who asks, what) with the forms its kind takes —
// approve / deny / edit for a held tool call, an answer for a question. Answers go to
// POST /inbox/{id}; a refusal (409 answered already, 410 expired, 422 invalid) is shown on the
// request. Live on a running host, with the count of open requests on the header's Inbox link.
import { el, time } from "/dom.js";

let events = null; // the stream of GET /inbox/events, while followed
let following = false; // from followInbox to stopFollowing (sign-out)

async function send(id, body, item) {
  const r = await fetch(`/inbox/${id}`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ ...body, by: "viewer" }),
  });
  if (r.ok) { open.delete(id); item.remove(); if (shown) changed(shown); return; }
  let detail = await r.text();
  try { detail = JSON.parse(detail).detail || detail; } catch (_) { /* not problem JSON */ }
  item.querySelector(".inbox-error").textContent = `${r.status}: ${detail}`;
}

function button(text, cls, onClick) {
  const b = el("button", { type: "button", class: cls, text });
  b.addEventListener("click", onClick);
  return b;
}

function approvalForms(r, item) {
  const reason = el("input", { class: "inbox-reason", "aria-label": "Reason for denying", placeholder: "reason" });
  const args = el("textarea", { class: "inbox-args", rows: "3", "aria-label": "Arguments to run instead" });
  args.value = JSON.stringify(r.request.arguments || {});
  const edit = () => {
    let parsed;
    try { parsed = JSON.parse(args.value); } catch (e) { item.querySelector(".inbox-error").textContent = `not JSON: ${e.message}`; return; }
    send(r.id, { decision: "edit", arguments: parsed }, item);
  };
  return [
    el("p", {}, button("Approve", "inbox-approve", () => send(r.id, { decision: "approve" }, item))),
    el("p", {}, reason, " ", button("Deny", "inbox-deny", () => send(r.id, { decision: "deny", reason: reason.value }, item))),
    el("p", {}, args, " ", button("Edit and run", "inbox-edit", edit)),
  ];
}

function askForms(r, item) {
  const q = r.request;
  const value = q.choices && q.choices.length
    ? el("select", { class: "inbox-value", "aria-label": "Answer" }, ...q.choices.map((c) => el("option", { text: c })))
    : el("input", { class: "inbox-value", "aria-label": "Answer", placeholder: q.default || "answer" });
  return [el("p", {}, value, " ", button("Answer", "inbox-answer", () => send(r.id, { decision: "answer", value: value.value }, item)))];
}

function item(r) {
  const q = r.request;
  const li = el("li", { class: "inbox-item", "data-request": r.id, "data-kind": q.kind },
    el("p", { class: "muted" },
      el("a", { href: `#/thread/${r.thread}`, class: "inbox-thread" }, `thread ${r.thread.slice(0, 8)}`),
      ` · ${q.listener} ${q.kind === "ask" ? "asks" : `calls ${q.tool}`} · `, time(r.asked_at_ms * 1000)),
    el("p", { class: "inbox-question", text: q.question }),
    q.default ? el("p", { class: "muted", text: `default ${q.default}${q.expires_at_ms ? ` at ${new Date(q.expires_at_ms).toISOString()}` : ""}` }) : null,
    el("p", { class: "inbox-error error", role: "alert" }));
  li.append(...(q.kind === "ask" ? askForms(r, li) : approvalForms(r, li)));
  return li;
}

// Every open request of a running host by id, followed from GET /inbox/events for as long as
// the page is signed in (each open request `listed` first, then `listed` / `answered` /
// `expired` as they happen), without polling: the header's Inbox link counts them, and the
// Inbox view lists them while it is shown.
const open = new Map();
let shown = null; // the page's `$` while the Inbox view is shown

// The list as `open` says: gone requests removed, new ones in their place (oldest first: ids
// are UUID v7).
function sync($) {
  const list = $("inbox-list");
  for (const li of [...list.children]) if (!open.has(li.dataset.request)) li.remove();
  for (const r of [...open.values()].sort((a, b) => (a.id < b.id ? -1 : 1))) {
    if (list.querySelector(`[data-request="${r.id}"]`)) continue;
    const later = [...list.children].find((li) => li.dataset.request > r.id);
    list.insertBefore(item(r), later || null);
  }
  note($);
}

function changed($) {
  const n = open.size;
  $("inbox-count").hidden = !n;
  $("inbox-count-n").textContent = String(n);
  if (shown) sync(shown);
}

function note($) {
  const n = $("inbox-list").children.length;
  $("inbox-note").textContent = n ? `${n} open, oldest first` : "Nothing waits for a person.";
}

// Follows the inbox of a running host until stopFollowing (sign-out). A refused (re)connection
// closes the stream for good (a partition changing hands answers 503 for a moment): it is said
// (on the Inbox view, and on the link's count) and followed again a little later.
export function followInbox($, failed) {
  following = true;
  if (events) return;
  const es = new EventSource("/inbox/events", { withCredentials: true });
  events = es;
  $("nav-inbox").removeAttribute("title");
  // Each (re)connection lists every open request first: start from none.
  const reset = () => { open.clear(); changed($); };
  es.addEventListener("open", reset);
  es.addEventListener("reset", reset);
  es.addEventListener("listed", (e) => { const r = JSON.parse(e.data); open.set(r.id, r); changed($); });
  for (const name of ["answered", "expired"]) {
    es.addEventListener(name, (e) => { open.delete(JSON.parse(e.data).answer.request); changed($); });
  }
  es.addEventListener("error", () => {
    if (es.readyState !== EventSource.CLOSED || events !== es) return;
    events = null;
    const why = "/inbox/events: the stream closed; trying again in 3 s";
    $("nav-inbox").title = why;
    if (shown) failed(new Error(why));
    setTimeout(() => { if (following && !events) followInbox($, failed); }, 3000);
  });
}

export function stopFollowing() {
  following = false;
  if (events) events.close();
  events = null;
  open.clear();
}

// Shows the inbox: on a running host, the requests followed, kept in step until stopInbox.
export function showInbox($, live, failed) {
  shown = null;
  $("inbox-list").replaceChildren();
  if (!live) {
    $("inbox-note").textContent = "The inbox needs a running host (agentpump run): a history file is read-only.";
    return;
  }
  shown = $;
  followInbox($, failed);
  sync($);
}

export function stopInbox() {
  shown = null;
}
