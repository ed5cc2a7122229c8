//! What the pump does with plans: the seed's spelling in no namespace taken into [`TODO_NS`],
//! and a `done` held back while the thread's latest plan has open steps.

use super::{PLAN_ELEMENT, Plan, TODO_NS};
use crate::{EnvelopeError, Limits, Payload};

/// Open steps named one by one in a refusal; past it, counted.
const NAMED_STEPS: usize = 10;

/// Whether `payload` is a plan: in [`TODO_NS`], or the seed's `<todo-until>` in no namespace.
pub(crate) fn is_plan(payload: &Payload) -> bool {
    let root = payload.qname();
    root.namespace() == TODO_NS || (root.namespace().is_empty() && root.local() == PLAN_ELEMENT)
}

/// Takes the seed's `<todo-until>` in no namespace into [`TODO_NS`] (as an AgentServer payload
/// is taken into the organism's namespace); any other payload is unchanged.
///
/// # Errors
///
/// The payload, with the namespace declared on its root, no longer fits `limits`.
pub(crate) fn adopt(payload: Payload, limits: &Limits) -> Result<Payload, EnvelopeError> {
    let root = payload.qname();
    if root.namespace().is_empty() && root.local() == PLAN_ELEMENT {
        payload.with_default_namespace(TODO_NS, limits)
    } else {
        Ok(payload)
    }
}

/// Why `signal` (`done`, `thread-done`) does not stand while `plan` (the thread's latest) has
/// open steps, naming them; `None` when there is no plan or every step is closed (done or
/// abandoned).
pub(crate) fn refuses_done(plan: Option<&Payload>, signal: &str) -> Option<String> {
    let plan = match Plan::parse(plan?) {
        Ok(plan) => plan,
        // Checked when it was written: only a plan recorded past the pump can get here.
        Err(e) => {
            return Some(format!(
                "`{signal}` refused: the thread's plan does not read: {e}"
            ));
        }
    };
    let open: Vec<String> = plan
        .open()
        .take(NAMED_STEPS)
        .map(|(n, s)| format!("{n} {:?}", s.text))
        .collect();
    let count = plan.open().count();
    if count == 0 {
        return None;
    }
    let more = count - open.len();
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let steps = if count == 1 { "step" } else { "steps" };
    Some(format!(
        "`{signal}` refused: the plan until {:?} has {count} open {steps}: {}{more}; write the \
         plan again with each step done=\"true\" (or done=\"abandoned\" to give it up), then \
         say `{signal}` again",
        plan.condition(),
        open.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(xml: &str) -> Payload {
        Payload::parse(xml, &Limits::default()).unwrap()
    }

    #[test]
    fn open_steps_are_named_and_closed_ones_are_not() {
        let plan = Plan::new("all sources checked")
            .step("Search web", super::super::Mark::Done)
            .step("Analyze results", super::super::Mark::Open)
            .step("Ask a friend", super::super::Mark::Abandoned);
        let why = refuses_done(Some(&payload(&plan.to_xml())), "done").unwrap();
        assert!(
            why.contains(r#"1 open step: 2 "Analyze results";"#),
            "{why}"
        );
        assert!(
            !why.contains("Search web") && !why.contains("Ask a friend"),
            "{why}"
        );
        let closed = Plan::new("c").step("x", super::super::Mark::Abandoned);
        assert_eq!(refuses_done(Some(&payload(&closed.to_xml())), "done"), None);
        assert_eq!(refuses_done(None, "done"), None);
    }

    #[test]
    fn only_the_seed_spelling_moves_into_the_namespace() {
        let limits = Limits::default();
        let seed = payload(r#"<todo-until condition="c"><step done="false">x</step></todo-until>"#);
        let adopted = adopt(seed, &limits).unwrap();
        assert!(adopted.qname().is(TODO_NS, PLAN_ELEMENT));
        assert!(Plan::parse(&adopted).is_ok());
        let other = payload("<answer>42</answer>");
        assert_eq!(adopt(other.clone(), &limits).unwrap(), other);
    }
}
