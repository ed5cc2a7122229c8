// The panels of one thread: a transcript entry, the residual plot, budgets, the halting report,
// the latest plan and the tree of child threads.
import { el, time, stateBadge, tone, parseRoot, SYS, GOV } from "/dom.js";
import { pretty } from "/xml.js";
import { residualPlot } from "/plot.js";
import { eventView, callId, PROC, TOOL } from "/process.js";
import { planView, TODO } from "/plan.js";
import { requestView, INBOX } from "/request.js";

const $ = (id) => document.getElementById(id);

export function recordItem(r) {
  const root = parseRoot(r.root);
  const cls = ["rec", `kind-${r.kind}`];
  if (root.ns === SYS) cls.push("sys", `sys-${root.local}`);
  if (root.ns === GOV) cls.push("gov", `gov-${root.local}`);
  if (root.ns === PROC) cls.push("proc", `proc-${root.local}`);
  if (root.ns === TOOL) cls.push("tool", `tool-${root.local}`);
  if (root.ns === TODO) cls.push("plan");
  if (root.ns === INBOX) cls.push("inbox", `inbox-${root.local}`);
  const label = { [SYS]: "system", [GOV]: "governor", [PROC]: "process", [TOOL]: "tool", [TODO]: "plan", [INBOX]: "inbox" }[root.ns] || r.kind;
  const view = root.ns === TODO ? planView(r.payload) : root.ns === INBOX ? requestView(root, r.payload) : eventView(root, r);
  const call = callId(root, r.payload);
  // A process event, tool message, plan or inbox record reads as itself; its XML is one click away.
  const xml = view ? el("details", { class: "xml" }, el("summary", { text: "XML" }), pretty(r.payload)) : pretty(r.payload);
  return el("li", { class: cls.join(" "), "data-seq": String(r.seq), "data-id": r.id, "data-root": root.local, "data-call-id": call, tabindex: call ? "-1" : null },
    el("header", {},
      el("span", { text: `#${r.seq}` }), time(r.time_us),
      el("span", { class: "route", text: `${r.from} → ${r.to || "*"}` }),
      el("span", { class: "kind", text: label }),
      el("span", { text: root.local })),
    view, xml,
    el("details", {}, el("summary", { text: "Exact bytes" }), el("pre", { class: "raw", tabindex: "0", "aria-label": "Exact bytes", text: r.payload })));
}

function residualsOf(records) {
  return records.filter((r) => r.root === `{${GOV}}residual`)
    .map((r) => (/\svalue="([^"]*)"/.exec(r.payload) || [])[1]).filter((v) => v !== undefined);
}

export function drawPlot(report, records) {
  const cert = report && report.halting_certificate;
  let values = cert ? cert.residual_history_decimal_strings : [];
  if (!values.length) values = residualsOf(records);
  const box = $("t-plot");
  if (!values.length) { box.replaceChildren(el("p", { class: "muted", text: "No residuals reported." })); return; }
  box.replaceChildren(residualPlot(values, cert ? cert.R_p_decimal_string : null));
}

// Budgets as bars: spent and reserved (held for carved children) against the limit. `live` is the
// governor's ledger now (a running host); otherwise the lines of the halting report.
export function drawBudgets(report, live) {
  const box = $("t-budgets");
  const lines = live || (report && report.budget);
  $("budget-title").textContent = live ? "Budgets (live)" : lines ? "Budgets (at the halt)" : "Budgets";
  if (!lines) { box.replaceChildren(el("p", { class: "muted", text: "Spend against limits is reported when the thread halts." })); return; }
  box.replaceChildren(...Object.entries(lines).map(([name, b]) => {
    const spent = Number(b.spent), reserved = Number(b.reserved || 0), limit = b.limit === null ? null : Number(b.limit);
    const text = `${b.spent} spent${reserved ? `, ${b.reserved} reserved` : ""}${limit === null ? ", no limit" : ` of ${b.limit}, ${b.remaining} left`}`;
    const bar = el("div", { class: "budget-bar", role: "meter", "aria-label": name, "aria-valuemin": "0", "aria-valuemax": String(limit === null ? spent : limit),
      "aria-valuenow": String(spent), "aria-valuetext": text, "data-budget": name, "data-spent": b.spent, "data-reserved": b.reserved || "0", "data-limit": b.limit === null ? "" : b.limit });
    if (limit !== null) {
      const share = (v) => `${Math.min(100, (100 * v) / (limit || 1))}%`;
      const used = el("span", { class: "spent" }), held = el("span", { class: "reserved" });
      used.style.width = share(spent); held.style.width = share(Math.min(reserved, Math.max(0, limit - spent)));
      if (spent >= 0.8 * limit) used.classList.add("high");
      bar.append(used, held);
    } else bar.classList.add("unlimited");
    const label = name === "max-wall-clock" || name === "max-wall-clock-per-iteration" ? `${name} (ms)` : name;
    return el("div", { class: "budget" }, el("span", { class: "budget-name", text: label }), bar, el("span", { text }));
  }));
}

export function drawReport(id, report) {
  const box = $("t-report");
  if (!report) { box.replaceChildren(el("p", { class: "muted", text: "The thread has not halted." })); return; }
  const cert = report.halting_certificate;
  const rows = [["Class", report.class], ["Status", report.status], ["Stop reason", report.stop_reason],
    ["Certificate", cert ? `${cert.type} (lane ${cert.lane})` : "none"], ["Goal", report.goal],
    ["Final residual", cert && cert.final_residual_decimal_string], ["r-p", cert && cert.R_p_decimal_string],
    ["Deliveries", String(report.iterations_completed)],
    ["Residuals reported", cert && cert.residual_history_decimal_strings.length ? String(cert.residual_history_decimal_strings.length) : null], ["Elapsed (s)", report.total_seconds_elapsed], ["Idle (s)", report.total_seconds_idle]];
  const dl = el("dl", { class: "report", id: "report-fields" });
  for (const [k, v] of rows) if (v) dl.append(el("dt", { text: k }), el("dd", { text: v }));
  const criteria = cert ? cert.acceptance_criteria_checklist : [];
  const list = criteria.length ? el("ul", {}, ...criteria.map((c) => el("li", { text: `${c.met ? "✔" : "✘"} ${c.criterion} — ${c.reported_by || "unreported"}` }))) : null;
  const json = el("p", {}, el("a", { href: `/view/threads/${id}/report`, id: "report-json" }, "Report as JSON"));
  box.replaceChildren(...(list ? [dl, list, json] : [dl, json]));
}

// The thread's latest plan as a checklist, with who wrote it and where; hidden without one.
export function drawPlan(record) {
  $("t-plan").hidden = !record;
  if (!record) return;
  const view = planView(record.payload) || el("p", { class: "muted", text: "The plan does not read as XML." });
  $("t-plan-body").replaceChildren(view, el("p", { class: "muted", text: `written by ${record.from}, record #${record.seq}` }));
}

export function drawTree(tree, current) {
  const byParent = new Map();
  for (const t of tree) { const k = t.parent || "root"; if (!byParent.has(k)) byParent.set(k, []); byParent.get(k).push(t); }
  const drawn = new Set(tree.map((t) => t.id));
  // A child on another pump that could not be read now (its partition has no writer): named, linked.
  const away = (id, depth) => el("li", { class: "tree-node", "data-depth": String(depth), "data-thread": id },
    el("a", { href: `#/thread/${id}` }, id.slice(0, 8)), el("span", { class: "muted", text: " on another pump, not readable now" }));
  const item = (t, depth) => {
    const cert = t.report && t.report.halting_certificate;
    const halt = t.report ? `${t.report.class}${cert && cert.type !== t.report.class ? ` · ${cert.type}` : ""}` : "";
    const kids = byParent.get(t.id) || [];
    const elsewhere = (t.children || []).filter((c) => !drawn.has(c));
    return el("li", { class: "tree-node", "data-depth": String(depth), "data-thread": t.id },
      t.id === current ? el("strong", { text: t.path }) : el("a", { href: `#/thread/${t.id}` }, t.path), " ",
      stateBadge(t.state, t.report && t.report.class), halt ? el("span", { class: `badge ${tone(t.report.class)}`, text: halt }) : null,
      el("span", { class: "muted", text: ` ${t.counters.deliveries} deliveries` }),
      t.carve_out ? el("span", { class: "carve", title: "budget carved out by the spawner", text: ` carve-out ${t.carve_out}` }) : null,
      kids.length || elsewhere.length
        ? el("ul", {}, ...kids.map((k) => item(k, depth + 1)), ...elsewhere.map((c) => away(c, depth + 1))) : null);
  };
  $("t-tree").replaceChildren(item(tree[0], 0));
}
