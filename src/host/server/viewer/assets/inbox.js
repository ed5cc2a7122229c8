// The inbox view (a person in the loop, docs/inbox.md): the open requests, oldest first, each
// in its thread's context (a link to the thread, who asks, what) with the forms its kind takes —
// approve / deny / edit for a held tool call, an answer for a question. Answers go to
// POST /inbox/{id}; a refusal (409 answered already, 410 expired, 422 invalid) is shown on the
// request. Live on a running host: it follows GET /inbox/events while shown (each open request
// `listed` first, then `listed` / `answered` / `expired` as they happen), without polling.
import { el, time } from "/dom.js";

let events = null;

async function send(id, body, item) {
  const r = await fetch(`/inbox/${id}`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify({ ...body, by: "viewer" }),
  });
  if (r.ok) { item.remove(); return; }
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

// Shows request `r` in its place (oldest first: ids are UUID v7), unless it is shown already.
function listed($, r) {
  const list = $("inbox-list");
  if (list.querySelector(`[data-request="${r.id}"]`)) return;
  const later = [...list.children].find((li) => li.dataset.request > r.id);
  list.insertBefore(item(r), later || null);
  note($);
}

function closed($, id) {
  const li = $("inbox-list").querySelector(`[data-request="${id}"]`);
  if (li) li.remove();
  note($);
}

function note($) {
  const n = $("inbox-list").children.length;
  $("inbox-note").textContent = n ? `${n} open, oldest first` : "Nothing waits for a person.";
}

// Shows the inbox; on a running host, follows it until stopInbox.
export async function showInbox($, live, failed) {
  stopInbox();
  $("inbox-list").replaceChildren();
  if (!live) {
    $("inbox-note").textContent = "The inbox needs a running host (agentpump run): a history file is read-only.";
    return;
  }
  note($);
  const es = new EventSource("/inbox/events", { withCredentials: true });
  events = es;
  // Each (re)connection lists every open request first: start from an empty list.
  es.addEventListener("open", () => { $("inbox-list").replaceChildren(); note($); });
  es.addEventListener("reset", () => { $("inbox-list").replaceChildren(); note($); });
  es.addEventListener("listed", (e) => listed($, JSON.parse(e.data)));
  for (const name of ["answered", "expired"]) {
    es.addEventListener(name, (e) => closed($, JSON.parse(e.data).answer.request));
  }
  // A refused (re)connection closes the stream for good (a partition changing hands answers
  // 503 for a moment): say so, and follow again a little later while the inbox is shown.
  es.addEventListener("error", () => {
    if (es.readyState !== EventSource.CLOSED) return;
    failed(new Error("/inbox/events: the stream closed; trying again in 3 s"));
    setTimeout(() => { if (events === es) showInbox($, live, failed); }, 3000);
  });
}

export function stopInbox() {
  if (events) events.close();
  events = null;
}
