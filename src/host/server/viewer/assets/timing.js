// Time: a waterfall of a thread's and its descendants' handled deliveries (GET
// /view/threads/{id}/timing). Each bar runs from the message's acceptance to its commit, in
// three segments: queue wait (accepted → handler started), handler (started → ended), commit
// (ended → committed) — and, inside the handler, the time it waited for a model (LLM), from its
// start. Children sit indented under their parent. A delivery recorded before
// timings were kept says "not recorded" instead of a bar. A table below says the same in text.
import { el, scrollable } from "/dom.js";

const NS = "http://www.w3.org/2000/svg";
const W = 760, LABEL = 230, RIGHT = 10, ROW = 20;
export const SEGMENTS = [["queue", "Queue wait", "accepted_us", "started_us"], ["handler", "Handler", "started_us", "handled_us"], ["commit", "Commit", "handled_us", "committed_us"]];

function svg(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

const timed = (d) => d.started_us !== null && d.handled_us !== null && d.committed_us !== null;
const ms = (us) => `${(us / 1000).toFixed(us < 10000 ? 2 : 1)} ms`;

function rows(data) {
  return data.lanes.flatMap((lane) => lane.deliveries.map((d) => ({ lane, d })));
}

function chart(all) {
  const t0 = Math.min(...all.map(({ d }) => d.accepted_us));
  const t1 = Math.max(...all.map(({ d }) => d.committed_us ?? d.accepted_us), t0 + 1);
  const x = (us) => LABEL + ((us - t0) / (t1 - t0)) * (W - LABEL - RIGHT);
  const g = svg("svg", { viewBox: `0 0 ${W} ${all.length * ROW + 22}`, class: "waterfall", role: "img", "aria-label": `Waterfall of ${all.length} deliveries over ${ms(t1 - t0)}; the table below lists them` });
  all.forEach(({ lane, d }, i) => {
    const y = i * ROW;
    const row = svg("g", { class: "wf-row", "data-seq": d.seq, "data-thread": lane.id });
    row.append(svg("text", { x: 4 + lane.depth * 14, y: y + 14, class: "wf-label" }, `${lane.depth ? "└ " : ""}${d.listener || "(none)"} #${d.seq}`));
    if (!timed(d)) {
      row.append(svg("text", { x: x(d.accepted_us) + 2, y: y + 14, class: "wf-none" }, "not recorded"));
    } else {
      for (const [name, label, from, to] of SEGMENTS) {
        const w = Math.max(x(d[to]) - x(d[from]), 1);
        const rect = svg("rect", { x: x(d[from]), y: y + 3, width: w, height: ROW - 6, class: `wf-${name}`, "data-segment": name, "data-us": d[to] - d[from] });
        rect.append(svg("title", {}, `${label}: ${ms(d[to] - d[from])}`));
        row.append(rect);
      }
      if (d.llm_us) {
        const llm = svg("rect", { x: x(d.started_us), y: y + 7, width: Math.max(x(d.started_us + d.llm_us) - x(d.started_us), 1), height: ROW - 14, class: "wf-llm", "data-segment": "llm", "data-us": d.llm_us });
        llm.append(svg("title", {}, `LLM: ${ms(d.llm_us)}`));
        row.append(llm);
      }
    }
    g.append(row);
  });
  g.append(svg("text", { x: LABEL, y: all.length * ROW + 16, class: "wf-axis" }, "0"), svg("text", { x: W - RIGHT, y: all.length * ROW + 16, class: "wf-axis", "text-anchor": "end" }, ms(t1 - t0)));
  return g;
}

function table(all) {
  const cell = (d, from, to) => el("td", { class: "num" }, timed(d) ? ms(d[to] - d[from]) : "not recorded");
  return scrollable("Deliveries, timed", el("table", { class: "totals wf-table" },
    el("caption", { text: "Deliveries, timed (queue wait, handler, commit, of the handler the LLM's part, accepted to committed)" }),
    el("thead", {}, el("tr", {}, ...["Thread", "Listener", "Seq", ...SEGMENTS.map((s) => s[1]), "LLM", "Total"].map((h) => el("th", { scope: "col", text: h })))),
    el("tbody", {}, ...all.map(({ lane, d }) => el("tr", { "data-seq": d.seq },
      el("td", { text: lane.path }), el("th", { scope: "row", text: d.listener || "(none)" }), el("td", { class: "num", text: String(d.seq) }),
      ...SEGMENTS.map(([, , from, to]) => cell(d, from, to)), el("td", { class: "num" }, timed(d) ? ms(d.llm_us) : "not recorded"), cell(d, "accepted_us", "committed_us"))))));
}

// Draws `data` (GET /view/threads/{id}/timing) into #t-timing.
export function drawTiming(data, $) {
  const all = rows(data);
  if (!all.length) {
    $("t-timing").replaceChildren(el("p", { class: "muted", text: "No handled deliveries yet." }));
    return;
  }
  const legend = el("ul", { class: "wf-legend", "aria-label": "Legend" }, ...[...SEGMENTS, ["llm", "LLM (inside the handler)"]].map(([name, label]) => el("li", {}, el("span", { class: `wf-swatch wf-${name}` }), label)));
  $("t-timing").replaceChildren(legend, el("div", { class: "wf-scroll", tabindex: "0", role: "region", "aria-label": "Waterfall, scrollable" }, chart(all)), el("details", {}, el("summary", { text: "As a table" }), table(all)));
}
