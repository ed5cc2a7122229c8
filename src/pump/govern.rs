//! The governor at work in the pump: the gate before every delivery (withdraw a turn, check
//! deadlines, budgets, stop requests and repeats), governor messages after it, the precedence
//! that decides a halt, the halt itself (report, `halt` message, descendants, parent), and the
//! handle's `stop`, `resume` and `reports`.

use std::sync::Arc;

use rust_decimal::Decimal;
use sha2::{Digest as _, Sha256};
use tokio::time::Instant;

use super::apply::Applying;
use super::tx::Tx;
use super::{PumpHandle, Shared};
use crate::governor::budget::{Account, Amount, BudgetName};
use crate::governor::ledger::{Absorbed, Ledger};
use crate::governor::report::{self, HaltingReport};
use crate::governor::{Budget, Decision, GovernorMessage, HaltClass, Verdict};
use crate::history::{HistoryError, RecordKind};
use crate::listener::{Registration, Role, Usage};
use crate::system::{
    CLIENT_SENDER, ErrorCode, GOVERNOR_NS, SYSTEM_SENDER, SystemMessage, ThreadStatus,
};
use crate::thread::registry::{Queued, ThreadEntry, ThreadInner};
use crate::{Envelope, Payload, ThreadId, ThreadState};

/// The gate's answer for one delivery.
pub(crate) enum Admission {
    /// Deliver, within this deadline, sending these warnings first.
    Go {
        view: Option<(u64, usize)>,
        deadline: Option<Instant>,
        warnings: Vec<SystemMessage>,
        account: Arc<Account>,
        /// What the gate withdrew (a turn, a tool call), to record with the delivery.
        cost: Cost,
    },
    /// Do not deliver: halt the thread.
    Halt(Verdict),
}

/// Why a thread cannot be stopped or resumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// No such thread.
    #[error("no thread {0}")]
    UnknownThread(ThreadId),
    /// The thread is not in a state that allows it.
    #[error("thread {thread} is {state}; {action} needs a {needed} thread")]
    WrongState {
        /// The thread.
        thread: ThreadId,
        /// Its state.
        state: ThreadState,
        /// `stop` or `resume`.
        action: &'static str,
        /// What it needs (`running or idle`, `halted`).
        needed: &'static str,
    },
}

impl Shared {
    /// The ledger of a new root thread, from the policy.
    pub(crate) fn root_ledger(&self) -> Ledger {
        let budget = &self.config.governor.budget;
        let deadline = budget.wall_clock.map(|w| Instant::now() + w);
        Ledger::new(
            crate::governor::budget::Account::root(budget),
            deadline,
            budget.depth,
        )
    }

    /// The governor's gate before a delivery: control before data, then budgets, then repeats.
    pub(crate) fn gate(&self, entry: &ThreadEntry, item: &Queued) -> Admission {
        let policy = &self.config.governor;
        let mut inner = entry.lock();
        let listener = &self.listeners[item.target].name;
        let view = inner.view_of(listener);
        let l = &mut inner.ledger;
        if !policy.enabled {
            let account = Arc::clone(&l.account);
            return Admission::Go {
                view,
                deadline: None,
                warnings: Vec::new(),
                account,
                cost: Cost::default(),
            };
        }
        if l.stop_requested {
            return Admission::Halt(Verdict::backpressure("stop-request"));
        }
        if policy
            .stop_file
            .as_deref()
            .is_some_and(std::path::Path::exists)
        {
            return Admission::Halt(Verdict::backpressure("stop-file"));
        }
        if l.queue_full_streak >= policy.queue_full_limit {
            return Admission::Halt(Verdict::backpressure("queue-full"));
        }
        if l.deadline.is_some_and(|d| Instant::now() >= d) {
            return Admission::Halt(Verdict::timeout(BudgetName::WallClock));
        }
        if let Some(verdict) = Verdict::breach(&l.account.breached()) {
            return Admission::Halt(verdict);
        }
        let env = &item.envelope;
        let cost = Cost::of(env, &self.listeners[item.target]);
        // Outside input is the caller's choice, and the governor's own notices are not part of
        // a conversation; loops are made of what listeners and the pump emit.
        if env.from() != CLIENT_SENDER
            && !cost.free
            && l.cycles(
                env.from(),
                listener,
                env.payload().as_str(),
                policy.no_progress_window,
                policy.cycle_max_period,
            )
        {
            return Admission::Halt(Verdict::new(HaltClass::NoProgress, "repeated-message"));
        }
        if let Err(e) = l.account.withdraw(cost.amount()) {
            return Admission::Halt(Verdict::timeout(e.budget));
        }
        let warnings = warnings(l, policy.warning_fraction);
        Admission::Go {
            view,
            deadline: l.deadline,
            warnings,
            account: Arc::clone(&l.account),
            cost,
        }
    }

    /// Halts a thread at the gate: the message goes back to the front of the queue, so a resume
    /// continues exactly there.
    pub(crate) async fn halt_before(
        self: &Arc<Self>,
        entry: &Arc<ThreadEntry>,
        item: Queued,
        verdict: Verdict,
    ) {
        let committed = {
            let parent = entry.parent.and_then(|p| self.registry.get(p));
            let mut parent_inner = parent.as_ref().map(|p| p.lock());
            let mut inner = entry.lock();
            let to = Arc::clone(&self.listeners[item.target].name);
            inner.queue.push_front(item);
            if inner.state.is_closed() {
                return;
            }
            let mut tx = Tx::new();
            let pair = parent.as_ref().zip(parent_inner.as_deref_mut());
            let mut parent_view = pair.map(|(e, i)| (&**e, i));
            self.halt_locked(
                &mut tx,
                entry,
                &mut inner,
                parent_view.as_mut().map(|(e, i)| (*e, &mut **i)),
                verdict,
                Some(&to),
            );
            let pair = parent.as_ref().zip(parent_inner.as_deref_mut());
            tx.commit(self, (entry, &mut inner), pair)
        };
        self.finish_commit(entry.id, committed).await;
    }

    /// Records a governor decision in the thread.
    pub(crate) fn decide(
        &self,
        tx: &mut Tx,
        entry: &ThreadEntry,
        inner: &mut ThreadInner,
        decision: &Decision,
    ) {
        let xml = decision.to_xml();
        let payload = Payload::from_trusted(crate::QName::new(GOVERNOR_NS, "decision"), xml, true);
        let env = Envelope::new(Arc::clone(&self.governor_name), entry.id, payload);
        tx.record(inner, env, RecordKind::Decision);
    }

    /// Halts a locked thread: report, decision, `halt` message, descendants, parent.
    pub(crate) fn halt_locked(
        &self,
        tx: &mut Tx,
        entry: &ThreadEntry,
        inner: &mut ThreadInner,
        parent: Option<(&ThreadEntry, &mut ThreadInner)>,
        verdict: Verdict,
        to: Option<&str>,
    ) {
        inner.state = ThreadState::Halted;
        let halt_id = crate::MessageId::new();
        let r_p = self.r_p(&inner.ledger);
        let report = report::build(
            entry.id,
            &entry.path,
            halt_id,
            &verdict,
            &inner.ledger,
            &inner.counters,
            r_p,
        );
        let json = serde_json::to_string(&report).expect("a report serializes");
        let certificate = verdict
            .class
            .certificate()
            .map_or("none", |c| c.as_str())
            .to_owned();
        self.decide(tx, entry, inner, &Decision::halt(&verdict));
        let halt = SystemMessage::Halt {
            reason: verdict.reason.clone(),
            class: verdict.class.as_str().to_owned(),
            certificate,
            report_digest: hex::encode(Sha256::digest(json.as_bytes())),
        };
        let env = Envelope::new(Arc::clone(&self.system_name), entry.id, halt.to_payload())
            .with_id(halt_id)
            .with_to(to.map(Arc::from));
        tx.record(inner, env, RecordKind::System);
        tx.report(report);
        tracing::info!(thread = %entry.id, class = %verdict.class, reason = %verdict.reason, "thread halted");
        tx.snapshot(entry, inner);
        for child_id in inner.children.clone() {
            let Some(child) = self.registry.get(child_id) else {
                continue;
            };
            let mut child_inner = child.lock();
            if !child_inner.state.is_closed() {
                let cascade = Verdict::backpressure("parent-halted");
                self.halt_locked(
                    tx,
                    &child,
                    &mut child_inner,
                    Some((entry, inner)),
                    cascade,
                    None,
                );
            }
        }
        let halt_info = Some((verdict.class.as_str().to_owned(), verdict.reason));
        let last = inner.last_payload.clone();
        match parent {
            Some((parent, parent_inner)) => self.report_to_parent(
                tx,
                (entry, inner),
                (parent, parent_inner),
                ThreadStatus::Halted,
                halt_info,
                last,
            ),
            None => inner.ledger.account.close(),
        }
    }

    fn r_p(&self, ledger: &Ledger) -> Decimal {
        ledger
            .progress
            .as_ref()
            .and_then(|p| p.goal.as_ref())
            .and_then(|g| g.r_p)
            .unwrap_or(self.config.governor.r_p)
    }
}

/// What the gate withdraws for one delivery.
///
/// Every delivery costs a turn, except a notice the governor sends on its own initiative (a
/// budget warning must not spend the budget it warns about). A call delivered to a listener
/// registered with the tool role also costs a tool call, charged to the caller's thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cost {
    /// The delivery costs no turn.
    pub free: bool,
    /// The delivery is a tool call.
    pub tool_call: bool,
}

impl Cost {
    fn of(env: &Envelope, to: &Registration) -> Self {
        let from_pump = env.from() == SYSTEM_SENDER;
        Self {
            free: from_pump && SystemMessage::is_budget_warning(env.payload()),
            tool_call: !from_pump && to.role == Role::Tool,
        }
    }

    fn amount(self) -> Amount {
        let mut amount = Amount::default();
        if !self.free {
            amount = Amount::of(BudgetName::Turns, Decimal::ONE);
        }
        if self.tool_call {
            amount.add(BudgetName::ToolCalls, Decimal::ONE);
        }
        amount
    }

    /// The usage to record with the delivery for what the gate withdrew (turns are counted
    /// by the delivery itself).
    pub fn usage(self) -> Usage {
        Usage {
            tool_calls: u64::from(self.tool_call),
            ..Usage::default()
        }
    }
}

/// One `budget-warning` per budget that crossed the warning fraction and was not warned about.
fn warnings(ledger: &mut Ledger, fraction: Decimal) -> Vec<SystemMessage> {
    let mut out = Vec::new();
    for line in ledger.account.snapshot() {
        let (name, spent) = (line.name, line.spent);
        let (Some(limit), Some(left)) = (line.limit, line.remaining()) else {
            continue;
        };
        if limit > Decimal::ZERO && spent >= limit * fraction && ledger.first_warning(name) {
            let message = format!("budget {name}: {spent} of {limit} used, {left} remain; wrap up");
            out.push(SystemMessage::Error {
                code: ErrorCode::BudgetWarning,
                message,
            });
        }
    }
    if let Some(deadline) = ledger.deadline {
        let total = deadline.saturating_duration_since(ledger.started);
        let used = ledger.started.elapsed();
        let crossed = Decimal::from(used.as_millis() as u64)
            >= Decimal::from(total.as_millis() as u64) * fraction;
        if !total.is_zero() && crossed && ledger.first_warning(BudgetName::WallClock) {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = format!(
                "budget max-wall-clock: {} ms remain; wrap up",
                left.as_millis()
            );
            out.push(SystemMessage::Error {
                code: ErrorCode::BudgetWarning,
                message,
            });
        }
    }
    out
}

impl Applying<'_> {
    /// Takes in one governor message.
    pub fn govern(&mut self, payload: Payload, message: GovernorMessage) {
        let env = Envelope::new(
            Arc::clone(&self.shared.listeners[self.me].name),
            self.entry.id,
            payload.clone(),
        )
        .with_to(Some(Arc::clone(&self.shared.governor_name)));
        self.tx.record(self.inner, env, RecordKind::Message);
        let me = Arc::clone(&self.shared.listeners[self.me].name);
        let window = self.shared.config.governor.no_progress_window;
        match self.inner.ledger.absorb(message, &me, self.entry.depth) {
            Absorbed::Goal {
                criteria,
                budget,
                certified,
            } => {
                let decision = Decision::Goal { criteria, budget };
                self.shared
                    .decide(&mut self.tx, self.entry, self.inner, &decision);
                if !certified {
                    // phuc-loop: "If `halting_certificates_applicable` is missing or empty:
                    // `EXIT_NEED_INFO` immediately."
                    let verdict = Verdict::new(HaltClass::NeedInfo, "no-certificates-declared");
                    self.signals.halt.get_or_insert(verdict);
                }
            }
            Absorbed::Loop(signal) => {
                if self.inner.ledger.same_control(payload.as_str(), window) {
                    self.signals.stuck = true;
                }
                self.signals.control(signal.control, signal.reason);
            }
            Absorbed::Residual => self.signals.residual = true,
            Absorbed::Noted => {}
        }
    }

    /// Decides, by precedence, whether this delivery halts the thread.
    pub fn conclude(&mut self) {
        if !self.shared.config.governor.enabled || self.inner.state.is_closed() {
            return;
        }
        if self.inner.ledger.stop_requested {
            self.signals
                .halt
                .get_or_insert(Verdict::backpressure("stop-request"));
        }
        let r_p = self.shared.r_p(&self.inner.ledger);
        let window = self.shared.config.governor.divergence_window;
        let me = &self.shared.listeners[self.me].name;
        let signals = std::mem::take(&mut self.signals);
        let Some(verdict) = signals.resolve(self.inner.ledger.progress.as_deref(), r_p, window, me)
        else {
            return;
        };
        let to = Arc::clone(me);
        let parent = self.parent.as_mut().map(|(e, i)| (&***e, &mut **i));
        self.shared.halt_locked(
            &mut self.tx,
            self.entry,
            self.inner,
            parent,
            verdict,
            Some(&to),
        );
    }
}

impl PumpHandle {
    /// The entry of a thread users may stop and resume: any but the system thread.
    fn controllable(&self, thread: ThreadId) -> Result<Arc<ThreadEntry>, ControlError> {
        self.shared
            .registry
            .get(thread)
            .filter(|e| !e.is_system)
            .ok_or(ControlError::UnknownThread(thread))
    }

    /// Stops a thread: halts it with BACKPRESSURE (`stop-request`) — at once when it is idle,
    /// after the delivery in progress otherwise. Its descendants halt with it.
    ///
    /// # Errors
    ///
    /// [`ControlError`] for an unknown thread or one that is already done or halted.
    pub async fn stop(&self, thread: ThreadId) -> Result<(), ControlError> {
        let shared = &self.shared;
        let entry = self.controllable(thread)?;
        let committed = {
            let parent = entry.parent.and_then(|p| shared.registry.get(p));
            let mut parent_inner = parent.as_ref().map(|p| p.lock());
            let mut inner = entry.lock();
            if inner.state.is_closed() {
                let state = inner.state;
                return Err(ControlError::WrongState {
                    thread,
                    state,
                    action: "stop",
                    needed: "running or idle",
                });
            }
            if inner.running {
                inner.ledger.stop_requested = true;
                return Ok(());
            }
            let mut tx = Tx::new();
            let mut view = parent
                .as_ref()
                .zip(parent_inner.as_deref_mut())
                .map(|(e, i)| (&**e, i));
            let verdict = Verdict::backpressure("stop-request");
            shared.halt_locked(
                &mut tx,
                &entry,
                &mut inner,
                view.as_mut().map(|(e, i)| (*e, &mut **i)),
                verdict,
                None,
            );
            let pair = parent.as_ref().zip(parent_inner.as_deref_mut());
            tx.commit(shared, (&entry, &mut inner), pair)
        };
        shared.finish_commit(thread, committed).await;
        Ok(())
    }

    /// Resumes a halted thread with `extra` added to its budget (limits that were unlimited stay
    /// so; `wall_clock` extends the deadline from now). The decision is recorded; the thread
    /// continues with the message it was about to deliver when it halted. Its descendants stay
    /// halted.
    ///
    /// # Errors
    ///
    /// [`ControlError`] for an unknown thread or one that is not halted.
    pub async fn resume(&self, thread: ThreadId, extra: &Budget) -> Result<(), ControlError> {
        let shared = &self.shared;
        let entry = self.controllable(thread)?;
        let committed = {
            let parent = entry.parent.and_then(|p| shared.registry.get(p));
            let mut parent_inner = parent.as_ref().map(|p| p.lock());
            let mut inner = entry.lock();
            if inner.state != ThreadState::Halted {
                let state = inner.state;
                return Err(ControlError::WrongState {
                    thread,
                    state,
                    action: "resume",
                    needed: "halted",
                });
            }
            inner.ledger.resume(extra);
            inner.state = ThreadState::Idle;
            if let Some(p) = parent_inner.as_deref_mut() {
                p.live_children += 1;
            }
            let mut tx = Tx::new();
            let decision = Decision::Resume {
                added: extra.clone(),
            };
            shared.decide(&mut tx, &entry, &mut inner, &decision);
            tx.snapshot(&entry, &inner);
            let committed = tx.commit(shared, (&entry, &mut inner), None);
            shared.wake(&entry, &mut inner);
            committed
        };
        shared.finish_commit(thread, committed).await;
        Ok(())
    }

    /// The halting reports of a thread, oldest first.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
    pub async fn reports(&self, thread: ThreadId) -> Result<Vec<HaltingReport>, HistoryError> {
        self.shared.store.reports(thread).await
    }
}
