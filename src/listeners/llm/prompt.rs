//! Prompt assembly: the system message (definition, protocol, peers), then the thread as chat
//! messages — or, in capsule mode, one canonical description of the thread's state.

use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{Value, json};

use super::PeerDoc;
use crate::envelope::GOVERNOR_NS;
use crate::governor::{BudgetName, GovernorMessage};
use crate::history::{Record, RecordKind};
use crate::listener::{Context, Delivery};
use crate::todo::{Mark, Plan};
use crate::{Limits, Payload};

/// What the model sees of the thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ContextMode {
    /// The listener's view of the history, message by message (its own outputs as `assistant`).
    #[default]
    Full,
    /// A canonical capsule of the thread's state (phuc-loop's context normal form): goal,
    /// criteria, iteration, residuals, learnings, remaining budget, links to artifacts — built
    /// from records only, sorted, without timestamps, so the same state gives the same bytes.
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
- Messages from `system` (huh, system-error) say what went wrong: correct it and go on. A `done` written beside a payload that was refused does not stand: correct the payload, then say `done` again.
- <<<NSENVELOPE_MAGIC_9E3B6F2D:V2:HALT:{\"reason\":…,\"class\":…}>>> from `system` means the governor halted \
this thread; if you are asked again, it was resumed: finish what is left within the budget.";

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
    }
    if let Some(plan) = plan_note(history) {
        system.push_str(&plan);
    }
    let mut out = vec![ChatMessage::new("system", system)];
    match mode {
        ContextMode::Full => out.extend(conversation(me, history)),
        ContextMode::Capsule => {
            let capsule = Capsule::build(me, history, current, &cx.remaining());
            out.push(ChatMessage::new(
                "user",
                format!("Thread state (capsule):\n{}", capsule.to_json()),
            ));
        }
    }
    out
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

/// The canonical state of a thread for one agent (see [`ContextMode::Capsule`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capsule(Value);

impl Capsule {
    /// Builds the capsule for agent `me` from the thread's records, the delivery at hand and what
    /// is left of its budgets.
    pub fn build(
        me: &str,
        history: &[Record],
        current: &Delivery,
        remaining: &[(BudgetName, Decimal)],
    ) -> Self {
        let limits = Limits::default();
        let mut goal = Value::Null;
        let mut criteria: std::collections::BTreeMap<String, Value> = Default::default();
        let mut residuals: Vec<String> = Vec::new();
        let mut learnings: Vec<Value> = Vec::new();
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
                    for (id, description) in &g.criteria {
                        criteria.insert(id.clone(), json!({ "id": id, "description": description, "met": false, "evidence": null }));
                    }
                    let certificates: Vec<&str> =
                        g.certificates.iter().map(|c| c.as_str()).collect();
                    goal = json!({ "text": g.text, "certificates": certificates, "r_p": g.r_p.map(|d| d.to_string()) });
                }
                GovernorMessage::Criterion { id, met, evidence } => {
                    let entry = criteria
                        .entry(id.clone())
                        .or_insert_with(|| json!({ "id": id, "description": "" }));
                    entry["met"] = json!(met);
                    entry["evidence"] = json!(evidence);
                }
                GovernorMessage::Residual(v) => residuals.push(v.to_string()),
                GovernorMessage::Learning { lane, text } => {
                    learnings.push(json!({ "lane": lane.to_string(), "text": text }))
                }
                GovernorMessage::Loop(_) => {}
            }
        }
        let artifacts: Vec<Value> = history
            .iter()
            .filter(|r| r.kind != RecordKind::Decision && r.to.as_deref() != Some("governor"))
            .rev()
            .take(5)
            .map(|r| json!({ "id": r.id, "digest": hex::encode(r.digest), "from": r.from, "root": r.root.to_string() }))
            .collect();
        let budget: serde_json::Map<String, Value> = remaining
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), json!(v.to_string())))
            .collect();
        Self(json!({
            "agent": me,
            "goal": goal,
            "acceptance_criteria": criteria.into_values().collect::<Vec<_>>(),
            "iteration": history.iter().filter(|r| &*r.from == me).count(),
            "residual": residuals.last(),
            "residual_history": residuals,
            "learnings": learnings,
            "budget_remaining": budget,
            "artifacts": artifacts,
            "now": { "from": current.from(), "root": current.qname().to_string(), "payload": current.payload().as_str() },
        }))
    }

    /// The capsule as canonical JSON (keys sorted, no whitespace).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).expect("a capsule serializes")
    }
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
        let delivery = Delivery::new(current);
        let remaining = [(BudgetName::Turns, Decimal::from(7))];
        let one = Capsule::build("a", &history, &delivery, &remaining).to_json();
        let two = Capsule::build("a", &history, &delivery, &remaining).to_json();
        assert_eq!(one, two);
        assert!(one.contains(r#""acceptance_criteria":[{"description":"first","evidence":null,"id":"b","met":false},{"#), "{one}");
        assert!(!one.contains("time"), "no timestamps: {one}");
        let other = Capsule::build(
            "a",
            &history,
            &delivery,
            &[(BudgetName::Turns, Decimal::from(6))],
        )
        .to_json();
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
