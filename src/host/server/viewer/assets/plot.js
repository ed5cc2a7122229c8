// Residuals per iteration as an inline SVG on a log scale, with the convergence threshold.

const NS = "http://www.w3.org/2000/svg";
const W = 480, H = 220, L = 56, R = 12, T = 12, B = 34;

function svg(name, attrs, text) {
  const e = document.createElementNS(NS, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

// `values`: decimal strings in report order; `rp`: the threshold as a decimal string, or null.
// A residual of exactly zero cannot sit on a log axis: it is drawn on the bottom edge, marked.
export function residualPlot(values, rp) {
  const nums = values.map(Number).filter((v) => Number.isFinite(v) && v >= 0);
  const positive = nums.filter((v) => v > 0);
  const threshold = rp !== null && rp !== undefined && Number(rp) > 0 ? Number(rp) : null;
  const logs = positive.map(Math.log10).concat(threshold ? [Math.log10(threshold)] : []);
  let lo = Math.floor(Math.min(...logs, 0));
  let hi = Math.ceil(Math.max(...logs, 0));
  if (hi === lo) hi = lo + 1;
  const x = (i) => L + (nums.length > 1 ? (i * (W - L - R)) / (nums.length - 1) : (W - L - R) / 2);
  const y = (v) => (v > 0 ? T + ((hi - Math.log10(v)) * (H - T - B)) / (hi - lo) : H - B);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "plot", role: "img", id: "residual-plot", "aria-labelledby": "plot-desc" });
  root.append(svg("title", { id: "plot-desc" }, `Residual per iteration, log scale: ${values.join(", ")}`));
  const step = Math.max(1, Math.ceil((hi - lo) / 8));
  for (let d = lo; d <= hi; d += step) {
    const yy = y(10 ** d);
    root.append(svg("line", { x1: L, x2: W - R, y1: yy, y2: yy, class: "grid-line" }));
    root.append(svg("text", { x: L - 6, y: yy + 4, "text-anchor": "end" }, `1e${d}`));
  }
  root.append(svg("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
  root.append(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  root.append(svg("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, "iteration (n-th residual reported)"));
  if (threshold) {
    const yy = y(threshold);
    root.append(svg("line", { x1: L, x2: W - R, y1: yy, y2: yy, class: "rp" }));
    root.append(svg("text", { x: W - R, y: yy - 4, "text-anchor": "end" }, `r-p ${rp}`));
  }
  root.append(svg("polyline", { class: "line", points: nums.map((v, i) => `${x(i)},${y(v)}`).join(" ") }));
  nums.forEach((v, i) => {
    const c = svg("circle", { cx: x(i), cy: y(v), r: 4, class: v > 0 ? "pt" : "pt zero" });
    c.append(svg("title", {}, `iteration ${i + 1}: ${values[i]}`));
    root.append(c);
  });
  for (const i of [0, nums.length - 1]) {
    if (nums.length) root.append(svg("text", { x: x(i), y: H - B + 14, "text-anchor": "middle" }, String(i + 1)));
  }
  return root;
}
