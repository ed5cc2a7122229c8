// Process events and tool calls read as what they are: a TELL with its message and its `why`, a
// MILESTONE as a marker, a SNAP as a small table (redacted values shown as redacted), PAR and
// JOIN, RETURN's fields, FAILED with its type and line; a tool call as `tool(arg=value, …)` with
// its id, and a result or error linked to its call. Payloads are parsed with DOMParser into a
// detached document and only their text is copied into the page.
import { el, SYS } from "/dom.js";

export const PROC = "urn:agentpump:process:v1";
export const TOOL = "urn:agentpump:tool:v1";

function parse(payload) {
  const doc = new DOMParser().parseFromString(payload, "application/xml");
  if (doc.getElementsByTagName("parsererror").length) return null;
  return doc.documentElement;
}

const named = (e, local) => [...e.children].filter((c) => c.localName === local);
const at = (e, name) => e.getAttribute(name);
const line = (e) => (at(e, "line") ? el("span", { class: "ev-line", text: `line ${at(e, "line")}` }) : null);

// A typed value (`<arg>`, `<field>`, `<why>`, `<symbol>`): strings quoted, others as written.
function value(n) {
  if (at(n, "redacted") === "true") return el("span", { class: "redacted", text: "redacted" });
  const type = at(n, "type") || "string";
  return el("code", { class: `val val-${type}`, text: type === "string" ? JSON.stringify(n.textContent) : n.textContent });
}

// `name=value, …`
function assignments(nodes) {
  const out = [];
  nodes.forEach((n, i) => {
    if (i) out.push(", ");
    out.push(el("span", { class: "arg-name", text: at(n, "name") }), "=", value(n));
  });
  return out;
}

function table(nodes, caption) {
  return el("table", { class: "ev-table" },
    el("caption", { text: caption }),
    el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "name" }), el("th", { scope: "col", text: "value" }), el("th", { scope: "col", text: "type" }))),
    el("tbody", {}, ...nodes.map((n) => el("tr", {},
      el("th", { scope: "row", text: at(n, "name") }), el("td", {}, value(n)),
      el("td", { text: at(n, "redacted") === "true" ? "" : at(n, "type") || "string" })))));
}

function processEvent(e) {
  const who = el("span", { class: "ev-who", text: `${at(e, "process")} #${at(e, "seq") || ""}` });
  switch (e.localName) {
    case "tell": {
      const message = [...e.childNodes].filter((c) => c.nodeType === Node.TEXT_NODE).map((c) => c.textContent).join("").trim();
      const why = named(e, "why")[0];
      return el("div", { class: "ev ev-tell" }, el("strong", { text: "TELL " }), el("q", { class: "ev-message", text: message }),
        why ? el("span", { class: "ev-why" }, " why: ", ...assignments([why])) : null,
        at(e, "level") ? el("span", { class: "ev-tag", text: at(e, "level") }) : null,
        at(e, "outcome") ? el("span", { class: "ev-tag", text: `outcome ${at(e, "outcome")}` }) : null, " ", who, " ", line(e));
    }
    case "milestone":
      return el("div", { class: "ev ev-milestone", role: "separator", "aria-label": `milestone ${e.textContent}` },
        el("span", { class: "ev-mark", "aria-hidden": "true", text: "◆" }), el("strong", { text: e.textContent }), " ", who, " ", line(e));
    case "snap": {
      const symbols = named(e, "symbol");
      const caption = `SNAP${at(e, "delta") === "true" ? " (changed since the last)" : ""}`;
      return el("div", { class: "ev ev-snap" }, symbols.length ? table(symbols, caption) : el("strong", { text: `${caption}: nothing` }), who, " ", line(e));
    }
    case "par":
      return el("div", { class: "ev ev-par" }, el("strong", { text: "PAR " }), `launched ${at(e, "tools").split(/\s+/).join(", ")}, each in a child thread `, who, " ", line(e));
    case "join":
      return el("div", { class: "ev ev-join" }, el("strong", { text: "JOIN " }), `${at(e, "children")} children answered `, who, " ", line(e));
    case "return": {
      const fields = named(e, "field");
      return el("div", { class: "ev ev-return" }, fields.length ? table(fields, "RETURN") : el("strong", { text: "RETURN (no fields)" }), who);
    }
    case "failed":
      return el("div", { class: "ev ev-failed" }, el("strong", { text: "FAILED " }), el("code", { class: "ev-type", text: at(e, "type") }), " ",
        line(e), " ", el("span", { class: "ev-message", text: e.textContent }), " ", who);
    case "continue":
      return el("div", { class: "ev ev-continue" }, `continue (${at(e, "steps")} steps so far) `, el("span", { class: "ev-who", text: at(e, "process") }));
    default:
      return null;
  }
}

function toolMessage(e, thread) {
  const tool = at(e, "tool") || "";
  switch (e.localName) {
    case "call":
      return el("div", { class: "ev ev-call" },
        el("code", { class: "call-sig" }, el("span", { class: "call-tool", text: tool }), "(", ...assignments(named(e, "arg")), ")"),
        at(e, "id") ? el("span", { class: "ev-tag", text: `id ${at(e, "id")}` }) : null);
    case "result":
    case "error": {
      const call = at(e, "call");
      const link = call
        ? el("a", { class: "call-link", href: `#/thread/${thread}`, "data-call": call, title: "show the call" }, `answers ${tool} call ${call}`)
        : el("span", { text: `answers ${tool}` });
      const body = e.localName === "result"
        ? el("code", { class: "call-sig" }, "→ ", ...assignments(named(e, "field")))
        : el("span", {}, el("strong", { text: "error " }), el("code", { class: "ev-type", text: at(e, "type") }), at(e, "retry") === "true" ? " (may retry) " : " ", el("span", { class: "ev-message", text: e.textContent }));
      return el("div", { class: `ev ev-${e.localName}` }, body, " ", link);
    }
    default:
      return null;
  }
}

// A child's `thread-result` carrying a tool answer (a PAR child's RETURN): the answer, and a
// link to the child thread where its call is.
function childAnswer(e) {
  const answer = [...e.children].find((c) => c.namespaceURI === TOOL && (c.localName === "result" || c.localName === "error"));
  const child = at(e, "thread");
  if (!answer || !child) return null;
  const view = toolMessage(answer, child);
  view.querySelector("a.call-link")?.classList.replace("call-link", "child-link");
  return view;
}

// The readable view of a process event or a tool message, or null for any other payload.
export function eventView(root, record) {
  const childResult = root.ns === SYS && root.local === "thread-result";
  if (root.ns !== PROC && root.ns !== TOOL && !childResult) return null;
  const e = parse(record.payload);
  if (!e) return null;
  if (childResult) return childAnswer(e);
  return root.ns === PROC ? processEvent(e) : toolMessage(e, record.thread);
}

// The id a tool call carries (`<call id="…">`), to link its answer to it.
export function callId(root, payload) {
  if (root.ns !== TOOL || root.local !== "call") return null;
  const e = parse(payload);
  return e ? at(e, "id") : null;
}

// A click on "answers … call X": the latest call X before the answer, scrolled to and focused.
export function followCall(event) {
  const link = event.target.closest("a.call-link");
  if (!link) return;
  event.preventDefault();
  const answer = link.closest("li.rec");
  const seq = Number(answer.dataset.seq);
  const calls = [...document.querySelectorAll("li.rec[data-call-id]")]
    .filter((c) => c.dataset.callId === link.dataset.call && Number(c.dataset.seq) < seq);
  const call = calls[calls.length - 1];
  if (!call) { link.title = "the call is not on this page of the transcript"; return; }
  call.scrollIntoView({ block: "center" });
  call.focus({ preventScroll: true });
}

// The TELL and MILESTONE events (and a FAILED or RETURN) of `records`, in order: a process
// thread's timeline. Each entry links to its record.
export function timelineItems(records) {
  const items = [];
  for (const r of records) {
    if (!r.root.startsWith(`{${PROC}}`)) continue;
    const local = r.root.slice(PROC.length + 2);
    if (!["tell", "milestone", "failed", "return"].includes(local)) continue;
    const e = parse(r.payload);
    if (!e) continue;
    let text;
    if (local === "milestone") text = `◆ ${e.textContent}`;
    else if (local === "tell") {
      const why = named(e, "why")[0];
      const message = [...e.childNodes].filter((c) => c.nodeType === Node.TEXT_NODE).map((c) => c.textContent).join("").trim();
      text = `TELL ${message}${why ? ` (${at(why, "name")}=${at(why, "redacted") === "true" ? "redacted" : why.textContent})` : ""}`;
    } else if (local === "failed") text = `FAILED ${at(e, "type")} at line ${at(e, "line")}`;
    else text = `RETURN ${named(e, "field").map((f) => at(f, "name")).join(", ")}`;
    items.push(el("li", { class: `tl tl-${local}`, "data-seq": String(r.seq) },
      el("a", { href: `#/thread/${r.thread}`, class: "tl-link", "data-seq": String(r.seq) }, el("span", { class: "muted", text: `#${r.seq} ` }), text)));
  }
  return items;
}
