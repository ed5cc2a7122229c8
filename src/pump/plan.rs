//! Planning a delivery's outputs: each output text is parsed again (zero trust), checked, and
//! turned into a [`Step`] — before any thread is locked.

use smallvec::{SmallVec, smallvec};

use super::Shared;
use super::route::{Refusal, Route, Sender, Targets, huh_code, smuggled, tool_checked};
use crate::Limits;
use crate::Payload;
use crate::envelope::PROCESS_NS;
use crate::extract::{ExtractError, addressed};
use crate::governor::{Budget, GovernorMessage};
use crate::listener::Role;
use crate::listener::{Delivery, Output, Outputs, Target};
use crate::system::{ErrorCode, GOVERNOR_NS};
use crate::system::{HuhCode, Request, SYSTEM_NS, attempt};
use crate::todo::{self, Plan};
use crate::tool::{written_fits, written_payload};

/// A delivery's steps, in order (usually one or two: kept inline).
pub(crate) type Steps = SmallVec<[Step; 2]>;

/// One effect of a delivery, decided and waiting to be applied.
#[derive(Debug)]
pub(crate) enum Step {
    /// Deliver to these listeners in this thread.
    Deliver {
        payload: Payload,
        targets: Targets,
        reply: bool,
    },
    /// Send out of the pump to the outside sender.
    Egress { payload: Payload },
    /// Tell the listener its output was refused (`huh` / `system-error`); `count` outputs
    /// (more than one for the outputs past `max_outputs`, refused together).
    Refused {
        refusal: Refusal,
        original: String,
        count: usize,
    },
    /// Start a child thread.
    Spawn {
        request: Payload,
        sub_id: Option<String>,
        initial: Payload,
        targets: Targets,
        budget: Budget,
    },
    /// Tell the governor something.
    Govern {
        payload: Payload,
        message: GovernorMessage,
    },
    /// Record a process event (`urn:agentpump:process:v1`); nobody receives it.
    Note { payload: Payload },
    /// Record the listener's plan (`todo-until`, checked) as the thread's latest.
    Plan { payload: Payload },
    /// Narrow the listener's view of history.
    ClearContext { request: Payload, keep: usize },
    /// Hold a tool call for a person: record the request (`pump/inbox/hold.rs`).
    Ask { held: Box<super::inbox::hold::Held> },
    /// End the thread.
    Done {
        request: Payload,
        payload: Option<Payload>,
    },
}

impl Shared {
    /// Turns the outputs of listener `me`, handling `delivery`, into steps.
    pub(crate) fn plan(&self, me: usize, delivery: &Delivery, outputs: Outputs) -> Steps {
        let sender = Sender::Listener {
            index: me,
            caller: delivery.from(),
        };
        let limits = &self.config.limits;
        let mut steps = Steps::new();
        let mut payloads = 0usize;
        // What went past `max_outputs`: the first of it (a sample) and how many; one refusal.
        let mut over: Option<(String, usize)> = None;
        let mut past_limit = |sample: &str| match &mut over {
            Some((_, n)) => *n += 1,
            None => over = Some((attempt(sample.as_bytes()), 1)),
        };
        for output in outputs {
            // Past the limit an output is refused unread: a flood costs no parsing.
            if payloads >= limits.max_outputs {
                past_limit(output.text());
                continue;
            }
            // Written and read by the crate (`Call::into_payload`): only its limits are
            // checked; past one, it is text like any other, parsed and refused naming the limit.
            let output = match output {
                Output::Read(target, payload) if !written_fits(payload.as_str(), limits) => {
                    Output::Payload(target, payload.as_str().to_owned())
                }
                other => other,
            };
            let found: SmallVec<[(Target, Payload); 1]> = match output {
                // A tool call or answer in the crate's written form is checked and read in one
                // walk; any other text is parsed, then checked.
                Output::Payload(target, text) => match written_payload(&text, limits)
                    .map_or_else(|| Payload::parse(&text, limits), Ok)
                {
                    Ok(p) => smallvec![(target, p)],
                    Err(e) => {
                        steps.push(refused(Refusal::unparsed(&e), text));
                        continue;
                    }
                },
                Output::Read(target, payload) => smallvec![(target, payload)],
                Output::Text(text) => match addressed(&text, limits) {
                    Ok(found) if found.is_empty() => {
                        let message = "no payload element in the output".to_owned();
                        steps.push(refused(Refusal::Huh(HuhCode::NoPayload, message), text));
                        continue;
                    }
                    Ok(found) => found
                        .into_iter()
                        .map(|a| (a.address.into(), a.payload))
                        .collect(),
                    Err(e) => {
                        let code = match &e {
                            ExtractError::Payload(p) => huh_code(p),
                            ExtractError::TooMany { .. } => HuhCode::LimitExceeded,
                            ExtractError::Unterminated { .. } => HuhCode::MalformedXml,
                            ExtractError::Magic { .. } | ExtractError::Address { .. } => {
                                HuhCode::InvalidRequest
                            }
                        };
                        steps.push(refused(Refusal::Huh(code, e.to_string()), text));
                        continue;
                    }
                },
            };
            for (target, payload) in found {
                payloads += 1;
                if payloads > limits.max_outputs {
                    past_limit(payload.as_str());
                    continue;
                }
                self.plan_payload(sender, &target, payload, &mut steps);
            }
        }
        if let Some((original, count)) = over {
            let message = format!("more than {} payloads in one delivery", limits.max_outputs);
            steps.push(Step::Refused {
                refusal: Refusal::Huh(HuhCode::LimitExceeded, message),
                original,
                count,
            });
        }
        steps
    }

    fn plan_payload(
        &self,
        sender: Sender<'_>,
        target: &Target,
        payload: Payload,
        steps: &mut Steps,
    ) {
        let namespace = payload.qname().namespace();
        if namespace == SYSTEM_NS {
            return steps.push(self.plan_request(sender, payload));
        }
        if namespace == GOVERNOR_NS {
            // Read by the governor, never re-emitted: its own elements inside are its schema.
            return steps.push(match GovernorMessage::parse(&payload) {
                Ok(message) => Step::Govern { payload, message },
                Err(m) => refused(
                    Refusal::Huh(HuhCode::InvalidRequest, m.to_string()),
                    payload.as_str().to_owned(),
                ),
            });
        }
        if namespace == PROCESS_NS {
            return steps.push(self.plan_process_event(sender, payload));
        }
        if todo::is_plan(&payload) {
            return steps.push(plan_todo(payload, &self.config.limits));
        }
        if let Some(refusal) = smuggled(&payload) {
            return steps.push(refused(refusal, payload.as_str().to_owned()));
        }
        let by_tool;
        let target = match tool_checked(&payload, target) {
            Ok(Some(t)) => {
                by_tool = t;
                &by_tool
            }
            Ok(None) => target,
            Err(refusal) => return steps.push(refused(refusal, payload.as_str().to_owned())),
        };
        let mut targets = match self.routes.route(sender, target, payload.qname()) {
            Ok(Route::Listeners(targets)) => targets,
            Ok(Route::Client) => return steps.push(Step::Egress { payload }),
            Err(refusal) => return steps.push(refused(refusal, payload.as_str().to_owned())),
        };
        if let Sender::Listener { index, .. } = sender
            && !self.routes[index].loops()
            && targets.contains(&index)
        {
            targets.retain(|t| *t != index);
            let message = format!(
                "`{}` may not message itself: it is registered without loop permission",
                self.routes[index].name
            );
            steps.push(refused(
                Refusal::Error(ErrorCode::LoopNotPermitted, message),
                payload.as_str().to_owned(),
            ));
            if targets.is_empty() {
                return;
            }
        }
        steps.push(Step::Deliver {
            payload,
            targets,
            reply: *target == Target::Reply,
        });
    }

    /// A process's event is recorded; its `continue` is its next turn. Only a listener with
    /// the process role speaks this namespace.
    fn plan_process_event(&self, sender: Sender<'_>, payload: Payload) -> Step {
        let index = match sender {
            Sender::Listener { index, .. } if self.routes[index].role == Role::Process => index,
            _ => {
                let message = format!(
                    "{} is a process event; only a listener with the process role emits one",
                    payload.qname()
                );
                return refused(
                    Refusal::Huh(HuhCode::ReservedNamespace, message),
                    payload.as_str().to_owned(),
                );
            }
        };
        if payload.qname().local() == "continue" {
            return Step::Deliver {
                payload,
                targets: smallvec![index],
                reply: false,
            };
        }
        Step::Note { payload }
    }

    fn plan_request(&self, sender: Sender<'_>, payload: Payload) -> Step {
        let request = match Request::parse(&payload, &self.config.limits) {
            Ok(r) => r,
            Err((code, message)) => {
                return refused(Refusal::Huh(code, message), payload.as_str().to_owned());
            }
        };
        match request {
            Request::Spawn {
                suggested_sub_id,
                to,
                initial,
                budget,
            } => {
                let Sender::Listener { index, .. } = sender else {
                    unreachable!("only listeners plan outputs");
                };
                // In the child the spawner has no caller: it may address itself and its peers.
                let child_sender = Sender::Listener { index, caller: "" };
                let target = to.map_or(Target::Route, Target::Listener);
                match self.routes.route(child_sender, &target, initial.qname()) {
                    Ok(Route::Listeners(targets)) => Step::Spawn {
                        request: payload,
                        sub_id: suggested_sub_id,
                        initial,
                        targets,
                        budget,
                    },
                    Ok(Route::Client) => refused(
                        Refusal::Error(
                            ErrorCode::NoRoute,
                            "a child thread has no outside sender to address".into(),
                        ),
                        payload.as_str().to_owned(),
                    ),
                    Err(refusal) => refused(refusal, payload.as_str().to_owned()),
                }
            }
            Request::ClearContext { keep } => Step::ClearContext {
                request: payload,
                keep,
            },
            Request::ThreadDone { payload: result } => Step::Done {
                request: payload,
                payload: result,
            },
        }
    }
}

/// A plan, in the seed's spelling or ours, checked and taken into [`todo::TODO_NS`]; refused
/// (`huh`) naming what does not fit.
fn plan_todo(payload: Payload, limits: &Limits) -> Step {
    let original = payload.as_str().to_owned();
    let checked = todo::adopt(payload, limits)
        .map_err(|e| Refusal::unparsed(&e))
        .and_then(|p| match Plan::parse(&p) {
            Ok(_) => Ok(p),
            Err(e) => Err(Refusal::Huh(HuhCode::InvalidRequest, e.to_string())),
        });
    match checked {
        Ok(payload) => Step::Plan { payload },
        Err(refusal) => refused(refusal, original),
    }
}

fn refused(refusal: Refusal, original: String) -> Step {
    Step::Refused {
        refusal,
        original,
        count: 1,
    }
}
