//! Prompt assembly: the system message (definition, protocol, peers), then the thread as chat
//! messages — or, in capsule mode, one canonical description of the thread's state.

use rust_decimal::Decimal;
use serde::Serialize;

use super::PeerDoc;
use crate::envelope::GOVERNOR_NS;
use crate::governor::{BudgetName, GovernorMessage};
use crate::history::{Record, RecordKind};
use crate::listener::{Context, Delivery};
use crate::listeners::capsule::{Capsule, CapsuleState, PlanState, RemainingBudget};
use crate::listeners::phuc_loop::is_capsule;
use crate::todo::{Mark, Plan};
use crate::{Limits, Payload};

/// What the model sees of the thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ContextMode {
    /// The listener's view of the history, message by message (its own outputs as `assistant`).
    #[default]
    Full,
    /// phuc-loop's capsule (seed 002 §4.1, [`Capsule`]) instead of the history: the loop
    /// controller's for a loop role, else built from the thread's goal, criteria, residual,
    /// learnings and remaining budget; then the message at hand. Same state, same bytes.
    Capsule,
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    fn new(role: &'static str, content: String) -> Self {
        Self { role, content }
    }
}

const PROTOCOL: &str = "You act only by writing XML payload elements; prose around them is ignored, and one \
answer may hold several payloads. Every payload names its namespace (xmlns).
- To think another step, emit your own root element: it comes back to you as the next turn.
- To use a peer, emit one of the payloads shown below; its answer comes back to you.
- To answer the sender of the message you are handling, wrap the payload: <reply>…payload…</reply>. \
To address one listener by name — a peer, yourself, or `client` (whoever started this thread from outside) — \
wrap it: <send to=\"NAME\">…payload…</send>. Unwrapped payloads are routed by their root element.
- Tell the governor how you are doing: <residual xmlns=\"urn:agentpump:governor:v1\" value=\"0.01\"/> \
(an exact decimal), <criterion xmlns=\"urn:agentpump:governor:v1\" id=\"…\" met=\"true\" evidence=\"…\"/>, \
<learning xmlns=\"urn:agentpump:governor:v1\" lane=\"C\">…</learning>.
- To declare what done means: <goal xmlns=\"urn:agentpump:governor:v1\" certificates=\"EXACT\"><text>…</text>\
<criterion id=\"…\">…</criterion></goal> — certificates lists how the goal may end (EXACT, CONVERGED, DIVERGED); \
a goal that lists none halts the thread at once.
- When the goal is met: <loop xmlns=\"urn:agentpump:governor:v1\" control=\"done\"/>; to give up: control=\"abort\".
- To keep a plan you and others can read: <todo-until xmlns=\"urn:agentpump:todo:v1\" condition=\"…\">\
<step done=\"false\">…</step></todo-until>; write it again as it changes, each step done=\"true\", or \
done=\"abandoned\" to give it up. While a step of your latest plan is open, `done` is refused.
- To branch: <spawn-thread xmlns=\"urn:agentpump:system:v1\" suggested-sub-id=\"…\"><initial-payload>…</initial-payload></spawn-thread>.
- A tool call may wait for a person's approval: <error type=\"denied\"> carries their reason; do not repeat the call unchanged.
- Messages from `system` (huh, system-error) say what went wrong: correct it and go on. A `done` written beside a payload that was refused does not stand: correct the payload, then say `done` again.
- <<<NSENVELOPE_MAGIC_9E3B6F2D:V2:HALT:{\"reason\":…,\"class\":…}>>> from `system` means the governor halted \
this thread; if you are asked again, it was resumed: finish what is left within the budget.";

/// The inbox's tool (`pump::inbox::ASK_TOOL`, above this layer; tests/llm.rs holds them equal).
const ASK_PEER: &str = "ask";

/// How to ask a person, told to an agent that has the `ask` tool among its peers.
const ASKING: &str = "\nTo ask a person — a decision that is theirs, a fact only they know, a confirmation before \
something that cannot be undone — call the `ask` peer: <call xmlns=\"urn:agentpump:tool:v1\" tool=\"ask\">\
<arg name=\"question\">…</arg></call> (optional args: choices, default, timeout_seconds). The thread waits, \
taking no turns, until the answer comes back as <result tool=\"ask\"> with fields `answer` and `by`. Ask \
rarely: questions have a budget of their own.\n";

/// The chat messages for one call.
pub(crate) fn messages(
    definition: &str,
    peers: &[PeerDoc],
    cx: &Context,
    current: &Delivery,
    history: &[Record],
    mode: ContextMode,
) -> Vec<ChatMessage> {
    let me = cx.me();
    let mut system = format!(
        "{definition}\n\nYou are the agent `{me}` in an agentpump organism. {PROTOCOL}\n\
        The message you are handling now is from `{}`; <reply> goes there.\n",
        current.from()
    );
    if !peers.is_empty() {
        system.push_str("\nPeers you may address:\n");
        for p in peers {
            system.push_str(&format!(
                "- {}: {}\n  Example: {}\n",
                p.name, p.description, p.example
            ));
        }
        if peers.iter().any(|p| p.name == ASK_PEER) {
            system.push_str(ASKING);
        }
    }
    if let Some(plan) = plan_note(history) {
        system.push_str(&plan);
    }
    let mut out = vec![ChatMessage::new("system", system)];
    match mode {
        ContextMode::Full => out.extend(conversation(me, history)),
        ContextMode::Capsule => {
            let capsule = capsule_text(me, history, &cx.remaining());
            out.push(ChatMessage::new(
                "user",
                format!("Your capsule (phuc-loop CNF, seed 002 §4.1):\n{capsule}"),
            ));
            // The capsule is the whole state; the message at hand is what to act on now,
            // unless it is the capsule itself.
            if !is_capsule(current.qname()) {
                out.push(ChatMessage::new(
                    "user",
                    format!("from {}:\n{}", current.from(), current.payload().as_str()),
                ));
            }
        }
    }
    out
}

/// The thread's latest plan as the capsule carries it (seed 003: "Enables self-reading").
fn plan_state(history: &[Record]) -> Option<PlanState> {
    let plan = Plan::latest(history).ok()??;
    let steps = plan
        .steps()
        .iter()
        .map(|s| (s.text.clone(), mark_word(s.mark)));
    Some(PlanState {
        condition: plan.condition().to_owned(),
        steps: steps.collect(),
    })
}

/// How a step's mark reads in a capsule.
fn mark_word(mark: Mark) -> &'static str {
    match mark {
        Mark::Open => "open",
        Mark::Done => "done",
        Mark::Abandoned => "abandoned",
    }
}

/// The thread's latest plan as a checklist, for the system message: what the agent wrote last,
/// read back (seed 003: "Enables self-reading").
fn plan_note(history: &[Record]) -> Option<String> {
    let plan = Plan::latest(history).ok()??;
    let mut note = format!(
        "\nThe thread's plan (its latest <todo-until>), until {:?}:\n",
        plan.condition()
    );
    for step in plan.steps() {
        let mark = match step.mark {
            Mark::Open => "[ ]",
            Mark::Done => "[x]",
            Mark::Abandoned => "[abandoned]",
        };
        note.push_str(&format!("- {mark} {}\n", step.text));
    }
    Some(note)
}

/// The thread as chat messages: own outputs as `assistant` (consecutive ones merged), the rest as
/// `user`, each prefixed with its sender.
fn conversation(me: &str, history: &[Record]) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::new();
    for r in history {
        if r.kind == RecordKind::Decision {
            continue;
        }
        if &*r.from == me {
            if r.to.as_deref() == Some(me) && r.root.namespace() == GOVERNOR_NS {
                continue; // a `continue`'s wake-up: the same `<loop>` it sent the governor
            }
            match out.last_mut() {
                Some(last) if last.role == "assistant" => {
                    last.content.push('\n');
                    last.content.push_str(&r.payload);
                }
                _ => out.push(ChatMessage::new("assistant", r.payload.to_string())),
            }
        } else {
            // A halt reads as Ask-Loop's HALT signal, which the protocol teaches.
            let halt = (r.kind == RecordKind::System)
                .then(|| crate::governor::halt_magic_of(&r.payload))
                .flatten();
            let text = halt.as_deref().unwrap_or(&r.payload);
            out.push(ChatMessage::new(
                "user",
                format!("from {}:\n{text}", r.from),
            ));
        }
    }
    out
}

/// The §4.1 capsule of agent `me`'s thread (see [`ContextMode::Capsule`]): the loop
/// controller's, when the thread is a loop role's (its first message is a role's capsule), else one
/// built from the thread's governor records and what is left of its budgets.
pub fn capsule_text(me: &str, history: &[Record], remaining: &[(BudgetName, Decimal)]) -> String {
    if let Some(first) = history.first().filter(|r| is_capsule(&r.root)) {
        return crate::listeners::phuc_loop::capsule_of(&first.payload);
    }
    let state = thread_state(me, history, remaining);
    Capsule::new(&state)
        .map(|c| c.to_json())
        .expect("a thread capsule has no artifact links to refuse")
}

/// What the thread's records say, as capsule fields: the goal, its criteria (met with
/// evidence, or open), the residual, the learnings as AGENTS.md-style lines, the budget left.
fn thread_state(me: &str, history: &[Record], remaining: &[(BudgetName, Decimal)]) -> CapsuleState {
    let limits = Limits::default();
    let mut state = CapsuleState {
        subagent_role: me.to_owned(),
        plan: plan_state(history),
        ..CapsuleState::default()
    };
    let mut criteria: std::collections::BTreeMap<String, (String, bool)> = Default::default();
    for r in history
        .iter()
        .filter(|r| r.to.as_deref() == Some("governor"))
    {
        let Some(message) = Payload::parse(&r.payload, &limits)
            .ok()
            .and_then(|p| GovernorMessage::parse(&p).ok())
        else {
            continue;
        };
        match message {
            GovernorMessage::Goal(g) => {
                state.goal_statement = g.text;
                for (id, description) in g.criteria {
                    criteria.entry(id).or_insert((description, false));
                }
                state.halting_certificates_applicable = g
                    .certificates
                    .iter()
                    .map(|c| c.as_str().to_owned())
                    .collect();
            }
            GovernorMessage::Criterion {
                id, met, evidence, ..
            } => {
                criteria.entry(id).or_default().1 = met && evidence.is_some();
            }
            GovernorMessage::Residual(v) => state.current_state_summary.residual_current = Some(v),
            GovernorMessage::Learning { lane, text } => state
                .accumulated_learnings
                .push_str(&format!("- [{lane}] {text}\n")),
            GovernorMessage::Loop(_) => {}
        }
    }
    for (id, (description, met)) in criteria {
        let line = format!("{id}: {description}");
        state.acceptance_criteria.push(line.clone());
        let s = &mut state.current_state_summary;
        if met {
            &mut s.criteria_met_so_far
        } else {
            &mut s.criteria_still_open
        }
        .push(line);
    }
    state.current_state_summary.iteration_number =
        history.iter().filter(|r| &*r.from == me).count() as u64;
    let left = |name| {
        use rust_decimal::prelude::ToPrimitive as _;
        remaining
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.floor().to_u64())
    };
    state.remaining_budget = RemainingBudget {
        iterations_remaining: left(BudgetName::Turns),
        tool_calls_remaining: left(BudgetName::ToolCalls),
        seconds_remaining: None,
    };
    state
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::history::{HistoryStore, MemoryHistory, NewRecord};
    use crate::{Envelope, ThreadId};

    fn record(
        store: &MemoryHistory,
        thread: ThreadId,
        from: &str,
        to: Option<&str>,
        xml: &str,
    ) -> Envelope {
        let payload = Payload::parse(xml, &Limits::default()).unwrap();
        let env = Envelope::new(Arc::from(from), thread, payload).with_to(to.map(Arc::from));
        let batch = crate::history::Batch {
            records: vec![NewRecord {
                envelope: env.clone(),
                kind: RecordKind::Message,
                pending: false,
            }],
            ..Default::default()
        };
        store.append(batch).unwrap();
        env
    }

    /// Issue 36: a plan is "recorded and read back by the agent that wrote it (in its context
    /// and capsule)"; seed 003: "Enables self-reading".
    #[tokio::test]
    async fn a_capsule_carries_the_threads_latest_plan_and_none_without_one() {
        let store = MemoryHistory::new();
        let thread = ThreadId::new();
        let todo = crate::todo::TODO_NS;
        record(
            &store,
            thread,
            "client",
            Some("a"),
            r#"<ask xmlns="urn:t">?</ask>"#,
        );
        let before = store.thread(thread, 0).await.unwrap();
        assert!(!capsule_text("a", &before, &[]).contains("\"plan\""));
        record(
            &store,
            thread,
            "a",
            Some("governor"),
            &format!(
                r#"<todo-until xmlns="{todo}" condition="tests pass"><step done="true">read</step><step done="false">fix</step></todo-until>"#
            ),
        );
        let after = store.thread(thread, 0).await.unwrap();
        let capsule: serde_json::Value =
            serde_json::from_str(&capsule_text("a", &after, &[])).unwrap();
        assert_eq!(
            capsule["plan"],
            serde_json::json!({
                "condition": "tests pass",
                "steps": [{"status": "done", "text": "read"}, {"status": "open", "text": "fix"}]
            })
        );
    }

    #[tokio::test]
    async fn the_same_state_gives_the_same_capsule_bytes() {
        let store = MemoryHistory::new();
        let thread = ThreadId::new();
        let gov = "urn:agentpump:governor:v1";
        record(
            &store,
            thread,
            "a",
            Some("governor"),
            &format!(
                r#"<goal xmlns="{gov}"><text>t</text><criterion id="z">last</criterion><criterion id="b">first</criterion></goal>"#
            ),
        );
        record(
            &store,
            thread,
            "a",
            Some("governor"),
            &format!(r#"<residual xmlns="{gov}" value="0.5"/>"#),
        );
        let current = record(
            &store,
            thread,
            "client",
            Some("a"),
            r#"<ask xmlns="urn:t">?</ask>"#,
        );
        let history = store.thread(thread, 0).await.unwrap();
        let _ = current;
        let remaining = [(BudgetName::Turns, Decimal::from(7))];
        let one = capsule_text("a", &history, &remaining);
        let two = capsule_text("a", &history, &remaining);
        assert_eq!(one, two);
        assert!(
            one.contains("\"acceptance_criteria\": [\n    \"b: first\",\n    \"z: last\"\n  ]"),
            "{one}"
        );
        assert!(one.contains("\"residual_current\": \"0.5\""), "{one}");
        assert!(one.contains("\"iterations_remaining\": 7"), "{one}");
        assert!(!one.contains("time"), "no timestamps: {one}");
        let other = capsule_text("a", &history, &[(BudgetName::Turns, Decimal::from(6))]);
        assert_ne!(one, other, "a different state gives different bytes");
    }

    /// A lone `continue` comes back to the agent as its next turn (issue 37): its prompt shows
    /// the `<loop>` once, as what it sent the governor, not again as the wake-up.
    #[tokio::test]
    async fn a_continue_wake_up_is_not_shown_twice() {
        let store = MemoryHistory::new();
        let thread = ThreadId::new();
        let go = r#"<loop xmlns="urn:agentpump:governor:v1" control="continue"/>"#;
        record(
            &store,
            thread,
            "client",
            Some("a"),
            r#"<ask xmlns="urn:t">?</ask>"#,
        );
        record(&store, thread, "a", Some("governor"), go);
        record(&store, thread, "a", Some("a"), go);
        let history = store.thread(thread, 0).await.unwrap();
        let chat = conversation("a", &history);
        let roles: Vec<&str> = chat.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["user", "assistant"]);
        assert_eq!(chat[1].content, go);
    }
}
