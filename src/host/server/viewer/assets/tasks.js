// The tasks view: the task ledger's latest line per task (status, when, why) and a link to the
// thread of each attempt. The server finds a task's threads in the history (the first record
// of a task thread is the `<task>` naming the task and the attempt). A host with no ledger says
// so and why.
import { el } from "/dom.js";

function when(text) {
  const d = new Date(text);
  return Number.isNaN(d.getTime()) ? el("span", { text }) : el("time", { datetime: d.toISOString(), title: text }, text.replace("T", " ").replace("Z", " UTC"));
}

function threads(task) {
  if (!task.attempts.length) return el("span", { class: "muted", text: "no thread" });
  const last = task.attempts[task.attempts.length - 1];
  const earlier = task.attempts.slice(0, -1);
  return el("span", {},
    el("a", { class: "task-thread", href: `#/thread/${last.thread}`, "aria-label": `${task.id}, attempt ${last.attempt}: open its thread` }, `attempt ${last.attempt}`),
    ...earlier.flatMap((a) => [" · ", el("a", { class: "task-earlier", href: `#/thread/${a.thread}`, "aria-label": `${task.id}, attempt ${a.attempt}: open its thread` }, `attempt ${a.attempt}`)]));
}

function row(task) {
  const line = task.line;
  const status = line ? line.status : "no line";
  return el("tr", { "data-task": task.id },
    el("th", { scope: "row", text: task.id }),
    el("td", { text: task.title || "" }),
    el("td", {}, el("span", { class: `badge task-status status-${status.replace(" ", "-")}`, text: status })),
    el("td", {}, line ? when(line.updated_at) : ""),
    el("td", { class: "task-summary", text: line ? line.summary : "not in the ledger yet" }),
    el("td", {}, threads(task)));
}

// Draws `data` (GET /view/tasks) into the tasks section.
export function drawTasks(data, $) {
  $("tasks-ledger").textContent = data.ledger ? `Ledger ${data.ledger}` : "";
  $("tasks-note").textContent = data.note || "";
  $("tasks-note").hidden = !data.note;
  $("tasks-table").hidden = !data.tasks.length;
  $("tasks-table").tBodies[0].replaceChildren(...data.tasks.map(row));
  const counts = {};
  for (const t of data.tasks) { const s = t.line ? t.line.status : "no line"; counts[s] = (counts[s] || 0) + 1; }
  $("tasks-caption").textContent = `Latest ledger line per task: ${Object.entries(counts).map(([s, n]) => `${n} ${s}`).join(", ")}`;
}
