// The organism (issue 33): its listeners, the routes messages took between them (a graph and
// the same as a list), the listener holding a live thread's next delivery highlighted; and the
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

// Nodes on a circle, in name order (the same drawing for the same organism), edges as arrows
// with their counts, a message to oneself as a loop. For one thread, only who took part; for
// the organism, every listener. The circle grows with the number of nodes.
function graph(data) {
  const taking = data.routes.flatMap((r) => [r.from, r.to]).concat(data.current ? [data.current] : []);
  const names = [...new Set(data.thread ? taking : [...data.listeners.map((l) => l.name), ...taking])].sort();
  const R = Math.max(110, (names.length * (2 * NODE + 30)) / (2 * Math.PI));
  const W = 2 * R + 200, H = 2 * R + 110;
  const at = new Map(names.map((n, i) => {
    const a = (2 * Math.PI * i) / Math.max(names.length, 1) - Math.PI / 2;
    return [n, [W / 2 + R * Math.cos(a), H / 2 + R * Math.sin(a)]];
  }));
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, class: "org-graph", id: "org-svg", role: "img", "aria-labelledby": "org-svg-title" });
  root.append(svg("title", { id: "org-svg-title" }, `The organism: ${names.length} participants, ${data.routes.length} routes taken${data.current ? `; ${data.current} holds the next delivery` : ""}`));
  const defs = svg("defs", {});
  const marker = svg("marker", { id: "org-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
  marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "org-head" }));
  defs.append(marker);
  root.append(defs);
  for (const r of data.routes) {
    const [x1, y1] = at.get(r.from), [x2, y2] = at.get(r.to);
    const g = svg("g", { class: "org-edge", "data-from": r.from, "data-to": r.to, "data-count": r.count });
    if (r.from === r.to) {
      g.append(svg("circle", { cx: x1, cy: y1 - NODE - 10, r: 10, class: "org-line" }));
      g.append(svg("text", { x: x1 + 14, y: y1 - NODE - 14, class: "org-count" }, String(r.count)));
    } else {
      const d = Math.hypot(x2 - x1, y2 - y1) || 1, ux = (x2 - x1) / d, uy = (y2 - y1) / d;
      // A little to the side, so a → b and b → a are two lines.
      const ox = -uy * 4, oy = ux * 4;
      g.append(svg("line", { x1: x1 + ux * NODE + ox, y1: y1 + uy * NODE + oy, x2: x2 - ux * NODE + ox, y2: y2 - uy * NODE + oy, class: "org-line", "marker-end": "url(#org-arrow)" }));
      g.append(svg("text", { x: (x1 + x2) / 2 + ox * 3, y: (y1 + y2) / 2 + oy * 3, class: "org-count", "text-anchor": "middle" }, String(r.count)));
    }
    root.append(g);
  }
  for (const n of names) {
    const [x, y] = at.get(n);
    const current = n === data.current;
    const g = svg("g", { class: `org-node${current ? " current" : ""}`, "data-name": n });
    g.append(svg("circle", { cx: x, cy: y, r: NODE }));
    g.append(svg("text", { x, y: y + NODE + 14, "text-anchor": "middle" }, n));
    root.append(g);
  }
  return root;
}

// GET /view/organism[?thread=ID], drawn into the Organism view.
export async function showOrganism(thread, api, $) {
  const data = await api(`/view/organism${thread ? `?thread=${thread}` : ""}`);
  $("org-title").textContent = thread ? "Organism: the routes of one thread" : "Organism";
  $("org-note").replaceChildren(thread
    ? el("span", {}, "Routes counted over ", el("a", { href: `#/thread/${thread}` }, "this thread"), " and the threads below it", data.current ? `; ${data.current} holds its next delivery.` : ".")
    : `Routes counted over the newest root threads and their children.`);
  $("org-graph").replaceChildren(graph(data));
  $("org-routes").replaceChildren(...data.routes.map((r) => el("li", { "data-from": r.from, "data-to": r.to, "data-count": String(r.count) }, `${r.from} → ${r.to}: ${r.count}`)));
  $("org-listeners").tBodies[0].replaceChildren(...data.listeners.map((l) => el("tr", { "data-name": l.name, class: l.name === data.current ? "current" : null },
    el("th", { scope: "row" }, l.name, l.name === data.current ? el("span", { class: "badge warn", "aria-current": "step", text: "next delivery" }) : null),
    el("td", { text: l.role }), el("td", { text: l.accepts.join(" ") }), el("td", { text: l.description }))));
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
