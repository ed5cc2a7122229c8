// Totals: tokens, cost and tool calls summed from the handled deliveries history keeps — a
// thread's and its tree's on the thread page (GET /view/threads/{id}/totals), and across threads
// by listener or by day on the Totals page (GET /view/totals?by=). Costs are the exact decimal
// strings the server sends, shown as they are.
import { el, scrollable } from "/dom.js";

const COLUMNS = [["deliveries", "Deliveries"], ["tokens_in", "Tokens in"], ["tokens_out", "Tokens out"], ["tool_calls", "Tool calls"], ["cost", "Cost"]];

function table(caption, keyHeader, rows) {
  return scrollable(caption, el("table", { class: "totals" },
    el("caption", { text: caption }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: keyHeader }), ...COLUMNS.map(([, h]) => el("th", { scope: "col", class: "num", text: h })))),
    el("tbody", {}, ...rows.map(([key, t]) => el("tr", { "data-key": key },
      el("th", { scope: "row", text: key }),
      ...COLUMNS.map(([k]) => el("td", { class: "num", "data-col": k, text: String(t[k]) + (k === "deliveries" && t.estimated ? ` (${t.estimated} estimated)` : "") })))))));
}

// Draws a thread's totals (`data` from GET /view/threads/{id}/totals) into #t-totals.
export function drawThreadTotals(data, $) {
  const rows = [["This thread", data.thread]];
  if (data.threads > 1) rows.push([`Tree (${data.threads} threads)`, data.tree]);
  $("t-totals").replaceChildren(table("Usage reported by this thread's handlers", "Scope", rows));
}

// Draws the Totals page: `data` from GET /view/totals?by=listener|day.
export function drawTotals(data, $) {
  const byDay = data.by === "day";
  for (const [id, on] of [["totals-by-listener", !byDay], ["totals-by-day", byDay]]) {
    if (on) $(id).setAttribute("aria-current", "page"); else $(id).removeAttribute("aria-current");
  }
  if (!data.groups.length) {
    $("totals-body").replaceChildren(el("p", { class: "muted", text: "No handled deliveries yet." }));
    return;
  }
  const caption = byDay ? "Usage across threads by UTC day, newest first" : "Usage across threads by listener";
  $("totals-body").replaceChildren(table(caption, byDay ? "Day (UTC)" : "Listener", data.groups.map((g) => [g.key, g])));
}
