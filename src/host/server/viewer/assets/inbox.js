// The inbox view (a person in the loop, docs/inbox.md): the open requests, oldest first, each
// in its thread's context (a link to the thread, who asks, what) with the forms its kind takes —
// approve / deny / edit for a held tool call, an answer for a question. Answers go to
// POST /inbox/{id}; a refusal (409 answered already, 410 expired, 422 invalid) is shown on the
// request. Live on a running host: the list reloads every second while shown.
import { el, time } from "/dom.js";

const POLL_MS = 1000;
let timer = null;
let shown = "";

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

async function load($) {
  const r = await fetch("/inbox", { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!r.ok) throw new Error(`/inbox: ${r.status}`);
  const open = await r.json();
  const ids = open.map((o) => o.id).join(" ");
  if (ids === shown) return;
  shown = ids;
  $("inbox-list").replaceChildren(...open.map(item));
  $("inbox-note").textContent = open.length ? `${open.length} open, oldest first` : "Nothing waits for a person.";
}

// Shows the inbox; on a running host, follows it until stopInbox.
export async function showInbox($, live, failed) {
  stopInbox();
  shown = null;
  if (!live) {
    $("inbox-list").replaceChildren();
    $("inbox-note").textContent = "The inbox needs a running host (agentpump run): a history file is read-only.";
    return;
  }
  await load($);
  timer = setInterval(() => load($).catch(failed), POLL_MS);
}

export function stopInbox() {
  if (timer) clearInterval(timer);
  timer = null;
}
