// Plans (seed 003's `<todo-until>`, urn:agentpump:todo:v1) as checklists: what the plan runs
// until, how many steps are open, and each step ticked, open or abandoned. The payload is
// parsed with DOMParser into a detached document and only its text is copied into the page.
import { el } from "/dom.js";

export const TODO = "urn:agentpump:todo:v1";

// The `done` attribute: the step's state (also what a screen reader says) and its box.
const MARKS = { true: ["done", "☑"], false: ["open", "☐"], abandoned: ["abandoned", "☒"] };

// The checklist of a plan payload, or null when it does not read.
export function planView(payload) {
  const doc = new DOMParser().parseFromString(payload, "application/xml");
  if (doc.getElementsByTagName("parsererror").length) return null;
  const plan = doc.documentElement;
  const steps = [...plan.children].filter((c) => c.localName === "step");
  const marks = steps.map((s) => MARKS[s.getAttribute("done")] || MARKS.false);
  const open = marks.filter(([state]) => state === "open").length;
  return el("div", { class: "plan" },
    el("p", { class: "plan-head" }, el("strong", { text: "until " }), el("q", { class: "plan-condition", text: plan.getAttribute("condition") || "" }),
      el("span", { class: "muted plan-open", text: ` ${open} of ${steps.length} open` })),
    el("ul", { class: "checklist" }, ...steps.map((s, i) => {
      const [state, box] = marks[i];
      const text = s.textContent.trim();
      return el("li", { class: `step step-${state}`, "data-state": state, "aria-label": `${state}: ${text}` },
        el("span", { class: "box", "aria-hidden": "true", text: box }), " ", el("span", { class: "step-text", text }),
        state === "abandoned" ? el("span", { class: "ev-tag", "aria-hidden": "true", text: "abandoned" }) : null);
    })));
}
