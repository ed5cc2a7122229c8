// A person in the loop in a transcript (docs/inbox.md): a `<request>` record reads as what it
// asks — a question (its choices, the schema its answer must fit) or a held tool call as
// `tool(arg=value, …)` — with its default and deadline; an `<answer>` record as what was
// decided (approved, denied and why, edited and the arguments run, the value answered, or the
// default on a timeout), by whom and when. The records carry their fields as JSON inside their
// element; only their text is copied into the page, wrapped, never scrolling sideways.
import { el, time } from "/dom.js";

export const INBOX = "urn:agentpump:inbox:v1";

// The JSON fields of an inbox record, or null when the payload is not one.
function fields(payload) {
  const doc = new DOMParser().parseFromString(payload, "application/xml");
  if (doc.getElementsByTagName("parsererror").length) return null;
  try { return JSON.parse(doc.documentElement.textContent); } catch (_) { return null; }
}

// `name=value, …` of a JSON object of arguments, each value as JSON.
function args(object) {
  const out = [];
  Object.entries(object || {}).forEach(([name, value], i) => {
    if (i) out.push(", ");
    out.push(el("span", { class: "arg-name", text: name }), "=", el("code", { class: "val", text: JSON.stringify(value) }));
  });
  return out;
}

const call = (tool, arguments_) => el("code", { class: "call-sig" }, el("span", { class: "call-tool", text: tool }), "(", ...args(arguments_), ")");
const line = (label, ...content) => el("p", { class: "inbox-line" }, el("span", { class: "muted", text: `${label} ` }), ...content);

function request(q) {
  const approval = q.kind === "approval";
  return el("div", { class: "inbox-rec inbox-request" },
    el("p", { class: "inbox-line" }, el("strong", { text: approval ? "Approval asked " : "Question " }),
      el("span", { text: approval ? `${q.listener} calls ` : `${q.listener} asks` }), approval ? call(q.tool, q.arguments) : null,
      q.call ? " " : null, q.call ? el("span", { class: "ev-tag", text: `id ${q.call}` }) : null),
    el("p", { class: "inbox-question", text: q.question }),
    q.choices && q.choices.length ? line("choices", ...q.choices.flatMap((c, i) => [i ? " " : null, el("code", { class: "ev-tag", text: c })])) : null,
    q.schema ? line("the answer fits", el("code", { text: JSON.stringify(q.schema) })) : null,
    q.default ? line("if nobody answers", el("code", { text: q.default }), q.expires_at_ms ? " at " : null, q.expires_at_ms ? time(q.expires_at_ms * 1000) : null) : null);
}

function decided(a) {
  switch (a.decision) {
    case "approve": return [el("strong", { text: "Approved" })];
    case "deny": return [el("strong", { text: "Denied" }), a.reason ? `: ${a.reason}` : " (no reason given)"];
    case "edit": return [el("strong", { text: "Edited" }), " and run with ", el("code", { class: "call-sig" }, "(", ...args(a.arguments), ")")];
    case "answer": return [el("strong", { text: "Answered " }), el("q", { class: "inbox-value", text: a.value })];
    case "timeout": return [el("strong", { text: "Timed out" }), ": nobody answered in time, the default applied"];
    default: return [el("strong", { text: String(a.decision) })];
  }
}

function answer(a) {
  return el("div", { class: "inbox-rec inbox-answer" },
    el("p", { class: "inbox-line" }, ...decided(a)),
    line("by", el("span", { class: "inbox-by", text: a.by }), " at ", time(a.at_ms * 1000)));
}

// The readable view of an inbox record, or null for any other payload.
export function requestView(root, payload) {
  if (root.ns !== INBOX) return null;
  const f = fields(payload);
  if (!f) return null;
  if (root.local === "request") return request(f);
  if (root.local === "answer") return answer(f);
  return null;
}
