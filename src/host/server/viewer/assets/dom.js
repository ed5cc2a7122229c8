// Small DOM helpers shared by the viewer's modules: elements from data (never from HTML strings),
// times, state badges, Clark-notation roots.

export const SYS = "urn:agentpump:system:v1";
export const GOV = "urn:agentpump:governor:v1";

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v === true ? "" : v);
  }
  e.append(...children.filter((c) => c !== null && c !== undefined));
  return e;
}

export function parseRoot(root) {
  const m = /^\{([^}]*)\}(.*)$/.exec(root);
  return m ? { ns: m[1], local: m[2] } : { ns: "", local: root };
}

export function time(us) {
  const d = new Date(us / 1000);
  return el("time", { datetime: d.toISOString(), title: d.toISOString() }, d.toISOString().replace("T", " ").slice(0, 23));
}

export function stateBadge(s) { return el("span", { class: `badge state-${s}`, text: s }); }
