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

// A span of time given in µs, in the unit a person reads it in: `850 ms`, `12.3 s`, `4 min 5 s`,
// `2 h 3 min`.
export function duration(us) {
  const ms = us / 1000;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)} s`;
  const whole = Math.round(s);
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${whole % 60} s`;
  return `${Math.floor(whole / 3600)} h ${Math.floor((whole % 3600) / 60)} min`;
}

// How a halt class reads: a certified answer (EXACT, CONVERGED) is good news, a budget or
// back-pressure stop (TIMEOUT, BACKPRESSURE, done-uncertified) a warning, the rest a failure.
export function tone(cls) {
  if (!cls) return "";
  if (cls === "EXACT" || cls === "CONVERGED") return "ok";
  if (cls === "TIMEOUT" || cls === "BACKPRESSURE" || cls === "done-uncertified") return "warn";
  return "bad";
}

// A thread's state; a halted one takes the tone of its halt class (a CONVERGED halt is not red).
export function stateBadge(s, cls) {
  const t = s === "halted" && cls ? ` ${tone(cls)}` : "";
  return el("span", { class: `badge state-${s}${t}`, text: s });
}

// A halt class or certificate type as a badge in its tone.
export function classBadge(cls, attrs = {}) { return el("span", { ...attrs, class: `badge ${tone(cls)}`, text: cls }); }

// `child` in a region that scrolls sideways when it is wider than the page (a wide table on a
// phone), reachable and scrollable from the keyboard, named `label`.
export function scrollable(label, child) {
  return el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": label }, child);
}
