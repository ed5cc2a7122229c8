// The organism (issue 33): its listeners, the routes messages took between them and the routes
// they declare (a graph, layered by depth from the client, and the same as a list), the listener holding a live thread's next delivery highlighted; and the
// compose forms that start a thread or send into one, a listener's example to start from.
import { el } from "/dom.js";

const NS = "http://www.w3.org/2000/svg";
const NODE = 24;

function svg(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// Columns by route depth from the client, left to right: the client (and the pump's own
// senders) first, then the listeners nobody else sends to, then each listener one column
// right of the nearest that sends to it, along the routes taken and the routes declared (the
// listeners' peers). Within a column, nodes are ordered by the mean row of their neighbours
// (a few sweeps), which keeps arrows from crossing. A column is as wide as its longest label,
// a row as tall as a node and its label: no two labels overlap.
const ROW = 2 * NODE + 30;
const CHAR = 8; // px per character at the labels' 12px, generously

function layers(names, edges) {
  const into = new Map(names.map((n) => [n, []])), out = new Map(names.map((n) => [n, []]));
  for (const [a, b] of edges) if (a !== b) { out.get(a).push(b); into.get(b).push(a); }
  const outer = new Set(["client", "system", "governor"]);
  const depth = new Map();
  const queue = [];
  for (const n of names) {
    const d = outer.has(n) ? 0 : into.get(n).every((a) => outer.has(a)) ? 1 : null;
    if (d !== null) { depth.set(n, d); queue.push(n); }
  }
  while (queue.length) {
    const n = queue.shift();
    for (const m of out.get(n)) if (!depth.has(m)) { depth.set(m, depth.get(n) + 1); queue.push(m); }
  }
  for (const n of names) if (!depth.has(n)) depth.set(n, 1); // only in a cycle nobody starts
  // Then one column right of every listener that sends to it (the longest way in), so that an
  // arrow never runs within a column: a reply (the other way of a pair) does not count, and a
  // longer cycle stops moving after as many rounds as there are names.
  const pair = new Set(edges.map(([a, b]) => `${a}\u0000${b}`));
  for (let round = 0; round < names.length; round++) {
    let moved = false;
    for (const [a, b] of edges) {
      if (a === b || outer.has(b) || (pair.has(`${b}\u0000${a}`) && depth.get(b) < depth.get(a))) continue;
      if (depth.get(b) <= depth.get(a)) { depth.set(b, depth.get(a) + 1); moved = true; }
    }
    if (!moved) break;
  }
  const columns = [];
  for (const n of names) (columns[depth.get(n)] ||= []).push(n);
  const placed = columns.filter(Boolean);
  // A node's place in its column, centred as drawn (columns are centred vertically).
  const tallest = Math.max(...placed.map((c) => c.length));
  const row = new Map();
  const number = () => placed.forEach((c) => c.forEach((n, i) => row.set(n, i + (tallest - c.length) / 2)));
  number();
  const near = new Map(names.map((n) => [n, [...new Set([...into.get(n), ...out.get(n)])].filter((m) => m !== n)]));
  const mean = (n) => {
    const ys = near.get(n).map((m) => row.get(m));
    return ys.length ? ys.reduce((s, y) => s + y, 0) / ys.length : row.get(n);
  };
  for (let sweep = 0; sweep < 8; sweep++) {
    for (const c of sweep % 2 ? [...placed].reverse() : placed) {
      const key = new Map(c.map((n) => [n, mean(n)]));
      c.sort((a, b) => key.get(a) - key.get(b) || a.localeCompare(b));
      number();
    }
  }
  return placed;
}

// The pump's own participants: the whole organism's graph leaves them out (they speak with
// every listener, and their arrows would cross every other); the list of routes below the
// graph counts them.
const PUMP_OWN = new Set(["system", "governor", "(any)"]);

function graph(data) {
  const drawn = (r) => data.thread || (!PUMP_OWN.has(r.from) && !PUMP_OWN.has(r.to));
  const declared = data.thread ? [] : (data.declared || []).filter(drawn);
  const routes = data.routes.filter(drawn);
  const taking = routes.flatMap((r) => [r.from, r.to]).concat(data.current ? [data.current] : []);
  const names = [...new Set(data.thread ? taking : [...data.listeners.map((l) => l.name), ...taking, ...declared.flatMap((d) => [d.from, d.to])])].sort();
  const edges = [...routes.map((r) => [r.from, r.to]), ...declared.map((d) => [d.from, d.to])];
  const columns = layers(names, edges);
  const widths = columns.map((c) => Math.max(2 * NODE, ...c.map((n) => n.length * CHAR)) + 40);
  const tallest = Math.max(1, ...columns.map((c) => c.length));
  const W = widths.reduce((s, w) => s + w, 0) + 20, H = tallest * ROW + 40;
  const at = new Map();
  let x = 10;
  columns.forEach((c, i) => {
    const top = 20 + ((tallest - c.length) * ROW) / 2;
    c.forEach((n, j) => at.set(n, [x + widths[i] / 2, top + j * ROW + NODE]));
    x += widths[i];
  });
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, class: "org-graph", id: "org-svg", role: "img", "aria-labelledby": "org-svg-title" });
  const own = data.thread ? "" : "; the pump's own messages (system, governor) are in the list of routes";
  root.append(svg("title", { id: "org-svg-title" }, `The organism: ${names.length} participants, ${routes.length} routes taken, ${declared.length} declared${data.current ? `; ${data.current} holds the next delivery` : ""}${own}`));
  const defs = svg("defs", {});
  const marker = svg("marker", { id: "org-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "org-head" }));
  defs.append(marker);
  root.append(defs);
  const taken = new Set(routes.map((r) => `${r.from}\u0000${r.to}`));
  const untaken = declared.filter((d) => !taken.has(`${d.from}\u0000${d.to}`));
  // Both ways between two listeners: one line, a head at each end.
  const pairs = new Set([...routes, ...untaken].map((r) => `${r.from}\u0000${r.to}`));
  const both = (r) => pairs.has(`${r.to}\u0000${r.from}`);
  // A declared route not (yet) taken: dashed, no count.
  for (const d of untaken) root.append(edge(at, d.from, d.to, null, "org-edge declared", both(d)));
  for (const r of routes) root.append(edge(at, r.from, r.to, r.count, "org-edge", both(r)));
  for (const n of names) {
    const [cx, cy] = at.get(n);
    const current = n === data.current;
    const g = svg("g", { class: `org-node${current ? " current" : ""}`, "data-name": n });
    g.append(svg("circle", { cx, cy, r: NODE }));
    g.append(svg("text", { x: cx, y: cy + NODE + 14, "text-anchor": "middle", class: "org-label" }, n));
    root.append(g);
  }
  return root;
}

// An arrow from `a` to `b`, its count beside it: a straight line between columns (when `b`
// also sends to `a`, the two arrows share it, each count near its own head), a curve within a
// column; a message to oneself is a loop above the node.
function edge(at, a, b, count, cls, both) {
  const [x1, y1] = at.get(a), [x2, y2] = at.get(b);
  const g = svg("g", { class: cls, "data-from": a, "data-to": b, ...(count === null ? {} : { "data-count": count }) });
  if (a === b) {
    // To the node's right, clear of the labels above and below it.
    g.append(svg("circle", { cx: x1 + NODE + 6, cy: y1 - NODE / 2, r: 8, class: "org-line" }));
    if (count !== null) g.append(svg("text", { x: x1 + NODE + 18, y: y1 - NODE / 2 - 6, class: "org-count" }, String(count)));
    return g;
  }
  const d = Math.hypot(x2 - x1, y2 - y1) || 1, ux = (x2 - x1) / d, uy = (y2 - y1) / d;
  const bow = x1 === x2 ? 40 : 0;
  const ox = -uy * bow, oy = ux * bow;
  const [sx, sy, ex, ey] = [x1 + ux * NODE, y1 + uy * NODE, x2 - ux * NODE, y2 - uy * NODE];
  const [mx, my] = [(sx + ex) / 2 + ox, (sy + ey) / 2 + oy];
  g.append(svg("path", { d: `M ${sx} ${sy} Q ${mx} ${my} ${ex} ${ey}`, class: "org-line", "marker-end": "url(#org-arrow)" }));
  // Shared by both ways: each count a quarter of the way back from its head, above the line.
  const [cx, cy] = both && !bow ? [ex - (ex - sx) / 4, ey - (ey - sy) / 4] : [mx, my];
  if (count !== null) g.append(svg("text", { x: cx - uy * 8, y: cy + ux * 8 - 3, class: "org-count", "text-anchor": "middle" }, String(count)));
  return g;
}

// GET /view/organism[?thread=ID], drawn into the Organism view.
export async function showOrganism(thread, api, $) {
  const data = await api(`/view/organism${thread ? `?thread=${thread}` : ""}`);
  $("org-title").textContent = thread ? "Organism: the routes of one thread" : "Organism";
  $("org-note").replaceChildren(thread
    ? el("span", {}, "Routes counted over ", el("a", { href: `#/thread/${thread}` }, "this thread"), " and the threads below it", data.current ? `; ${data.current} holds its next delivery.` : ".")
    : "Routes counted over the newest root threads and their children, in columns by depth from the client; dashed: a route a listener declares (its peers) that none of them took.");
  $("org-graph").replaceChildren(graph(data));
  $("org-routes").replaceChildren(...data.routes.map((r) => el("li", { "data-from": r.from, "data-to": r.to, "data-count": String(r.count) }, `${r.from} → ${r.to}: ${r.count}`)));
  // A column nobody has a value in (over a history file: role and what it does) is left out.
  const columns = [["role", (l) => l.role], ["accepts", (l) => l.accepts.join(" ")], ["description", (l) => l.description]]
    .filter(([, value]) => data.listeners.some((l) => value(l)));
  const head = $("org-listeners").tHead.rows[0];
  for (const th of head.querySelectorAll("th[data-column]")) th.hidden = !columns.some(([key]) => key === th.dataset.column);
  $("org-listeners").tBodies[0].replaceChildren(...data.listeners.map((l) => el("tr", { "data-name": l.name, class: l.name === data.current ? "current" : null },
    el("th", { scope: "row" }, l.name, l.name === data.current ? el("span", { class: "badge warn", "aria-current": "step", text: "next delivery" }) : null),
    ...columns.map(([key, value]) => el("td", { "data-column": key, text: value(l) })))));
}

// A compose form in `box`: a listener to pick (its example fills the payload), the payload,
// and Send; into `thread`, or a new thread when it is null. `sent(answer)` runs after a 2xx.
let listing = null;

// GET /view/organism, read once per page load: the listeners and their examples do not change
// while it is open.
async function organism(api) {
  return listing || (listing = await api("/view/organism"));
}

// The organism's listeners (name, role, accepted roots, example).
export async function listeners(api) {
  return (await organism(api)).listeners;
}

export async function compose(box, thread, api, sent) {
  const data = await organism(api);
  if (!data.live) { box.replaceChildren(); return false; }
  const id = thread ? "send" : "start";
  const pick = el("select", { id: `${id}-to`, name: "to" }, ...data.listeners.map((l) => el("option", { value: l.name, text: l.name })));
  const payload = el("textarea", { id: `${id}-payload`, name: "payload", rows: "4", cols: "60", spellcheck: "false" });
  const error = el("p", { id: `${id}-error`, class: "error", role: "alert" });
  const fill = () => { payload.value = (data.listeners.find((l) => l.name === pick.value) || {}).example || ""; };
  pick.addEventListener("change", fill);
  fill();
  const form = el("form", { id: `${id}-form`, class: "compose", "aria-label": thread ? "Send a message into this thread" : "Start a thread" },
    el("label", { for: pick.id, text: "Listener" }), pick,
    el("label", { for: payload.id, text: "Payload (XML)" }), payload,
    el("button", { type: "submit", id: `${id}-submit`, text: thread ? "Send" : "Start" }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.textContent = "";
    const path = thread ? `/threads/${thread}/messages` : "/threads";
    try {
      const answer = await api(`${path}?to=${encodeURIComponent(pick.value)}`, { method: "POST", headers: { "Content-Type": "application/xml" }, body: payload.value });
      sent(answer);
    } catch (e) {
      error.textContent = e.detail || e.message;
    }
  });
  box.replaceChildren(form, error);
  return true;
}
