//! [`Ledger`]: what the governor keeps per thread besides its budget account — goal, residuals,
//! criteria, learnings, self-iterations, the no-progress window and the warnings already given.

use std::collections::VecDeque;
use std::hash::BuildHasher as _;
use std::sync::Arc;

use rust_decimal::Decimal;
use tokio::time::Instant;

use foldhash::fast::FixedState;

use super::Budget;
use super::budget::{Account, BudgetName};
use super::messages::{Goal, GovernorMessage, Lane, Signal};
use crate::ThreadId;

/// The hash of what repeats: fixed, so a ledger rebuilt from history hashes alike, and fast
/// (it runs on every delivery). It guards against accidents, not adversaries: a sender who
/// wants a no-progress halt can repeat itself.
const FAST: FixedState = FixedState::with_seed(0x6167_656e_7470_756d);

/// A criterion's status as reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CriterionStatus {
    pub id: String,
    pub description: String,
    pub met: bool,
    pub evidence: Option<String>,
    /// The listener credited with its last report: the reporter, or the listener of the child
    /// thread the report named ([`Ledger::credit`]).
    pub reported_by: Option<Arc<str>>,
}

impl CriterionStatus {
    /// Whether it came with a non-blank evidence link.
    pub fn has_evidence(&self) -> bool {
        self.evidence
            .as_deref()
            .is_some_and(|e| !e.trim().is_empty())
    }
}

/// The goal-related part, allocated only once a thread declares a goal or reports progress.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    pub goal: Option<Goal>,
    pub residuals: Vec<Decimal>,
    pub criteria: Vec<CriterionStatus>,
    pub learnings: Vec<(Lane, String, Arc<str>)>,
}

/// A thread's wall clock as a budget: see [`Ledger::wall_clock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WallClock {
    pub limit: std::time::Duration,
    pub remaining: std::time::Duration,
}

/// Per-thread governor state.
#[derive(Debug)]
pub(crate) struct Ledger {
    pub account: Arc<Account>,
    pub started: Instant,
    pub deadline: Option<Instant>,
    pub max_depth: Option<u32>,
    pub progress: Option<Box<Progress>>,
    /// Self-iterations per listener.
    pub iterations: Vec<(Arc<str>, u64)>,
    /// The most any one self-iteration spent: tool calls, and handler time.
    pub iteration_peak: (u64, std::time::Duration),
    /// Hashes of the last deliveries' (from, to, payload), newest last.
    recent: VecDeque<u64>,
    /// Hash of the last loop-control payload and how many times in a row it came.
    last_control: (u64, usize),
    /// Budgets already warned about.
    warned: Vec<BudgetName>,
    /// Queue-full refusals in a row.
    pub queue_full_streak: u32,
    /// A stop was requested while a delivery ran: the halt's reason (`stop-request`, or
    /// `parent-halted` for a child whose parent on another pump halted).
    pub stop_requested: Option<&'static str>,
    /// Idle time before the current idle spell.
    idle: std::time::Duration,
    /// When the thread last went idle, while it is idle.
    idle_since: Option<Instant>,
    /// Time spent waiting for a person before the current spell.
    waited: std::time::Duration,
    /// When the thread began waiting for a person, while it waits.
    waiting_since: Option<Instant>,
    /// The children this thread spawned, each with the listeners its first message was
    /// addressed to (the carve decision records them): whom a `<criterion thread="…">` credits.
    spawned: Vec<(ThreadId, Box<[Arc<str>]>)>,
    /// Children on other pumps not yet returned, each with the grant withdrawn for it
    /// (`pump/spread.rs`).
    pub remote_children: Vec<RemoteChild>,
    /// For a child adopted from another pump: its parent there, which its result goes to.
    pub remote_parent: Option<ThreadId>,
}

/// A child on another pump, and what its parent's account holds for it until it returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RemoteChild {
    pub thread: ThreadId,
    /// The grant, withdrawn from the parent's account (given back, less what the child
    /// spent, when it returns).
    pub held: super::budget::Amount,
    /// Its result, applied and being made durable: what settling it did, undone if the
    /// commit fails.
    pub returning: Option<super::budget::Settled>,
}

impl Ledger {
    pub fn new(account: Arc<Account>, deadline: Option<Instant>, max_depth: Option<u32>) -> Self {
        Self {
            account,
            started: Instant::now(),
            deadline,
            max_depth,
            progress: None,
            iterations: Vec::new(),
            iteration_peak: (0, std::time::Duration::ZERO),
            recent: VecDeque::new(),
            last_control: (0, 0),
            warned: Vec::new(),
            queue_full_streak: 0,
            stop_requested: None,
            idle: std::time::Duration::ZERO,
            idle_since: None,
            waited: std::time::Duration::ZERO,
            waiting_since: None,
            spawned: Vec::new(),
            remote_children: Vec::new(),
            remote_parent: None,
        }
    }

    /// The ledger of a root thread that started at `started`, under the organism's `budget`:
    /// its own account, its deadline `started + wall_clock`.
    pub fn root(budget: &Budget, started: Instant) -> Self {
        let deadline = budget.wall_clock.map(|w| started + w);
        Self::new(Account::root(budget), deadline, budget.depth).started_at(started)
    }

    /// The ledger of a child thread started at `started`, spawned by a thread at depth
    /// `parent_depth` whose ledger is `parent`, with `account` carved by `budget`: its deadline is
    /// the parent's or `budget`'s wall clock from `started`, whichever comes first, its depth
    /// limit the parent's or `budget`'s below the child, whichever is lower.
    pub fn child(
        parent: &Ledger,
        parent_depth: u32,
        account: Arc<Account>,
        budget: &Budget,
        started: Instant,
    ) -> Self {
        let (deadline, max_depth) = parent.child_limits(parent_depth, budget, started);
        Self::new(account, deadline, max_depth).started_at(started)
    }

    /// A child's deadline and depth limit (see [`Ledger::child`]): this ledger's, or
    /// `budget`'s from `started` and below the child, whichever comes first.
    pub fn child_limits(
        &self,
        parent_depth: u32,
        budget: &Budget,
        started: Instant,
    ) -> (Option<Instant>, Option<u32>) {
        let deadline = match (self.deadline, budget.wall_clock) {
            (Some(d), Some(w)) => Some(d.min(started + w)),
            (d, w) => d.or(w.map(|w| started + w)),
        };
        let max_depth = match (self.max_depth, budget.depth) {
            (Some(m), Some(d)) => Some(m.min(parent_depth + 1 + d)),
            (m, d) => m.or(d.map(|d| parent_depth + 1 + d)),
        };
        (deadline, max_depth)
    }

    /// This ledger, for a thread that started at `started` (its wall clock runs from then).
    pub fn started_at(mut self, started: Instant) -> Self {
        self.started = started;
        self
    }

    /// The thread ran out of work.
    pub fn went_idle(&mut self) {
        self.idle_since.get_or_insert_with(Instant::now);
    }

    /// The thread has work again.
    pub fn woke(&mut self) {
        if let Some(since) = self.idle_since.take() {
            self.idle += since.elapsed();
        }
    }

    /// A person was asked and the thread had no other open request: a waiting spell begins.
    pub fn began_waiting(&mut self) {
        self.waiting_since.get_or_insert_with(Instant::now);
    }

    /// The thread's last open request was answered: the spell ends and, unless waiting
    /// counts against the wall clock, the deadline moves by its length.
    pub fn ended_waiting(&mut self, waiting_counts: bool) {
        if let Some(since) = self.waiting_since.take() {
            let spell = since.elapsed();
            self.waited += spell;
            if !waiting_counts && let Some(deadline) = self.deadline.as_mut() {
                *deadline += spell;
            }
        }
    }

    /// Time spent waiting for a person so far, the current spell included.
    pub fn waited(&self) -> std::time::Duration {
        self.waited
            + self
                .waiting_since
                .map_or(std::time::Duration::ZERO, |s| s.elapsed())
    }

    /// Time spent idle so far, the current spell included.
    pub fn idle_time(&self) -> std::time::Duration {
        self.idle
            + self
                .idle_since
                .map_or(std::time::Duration::ZERO, |s| s.elapsed())
    }

    /// The wall clock at `now`, when the thread has a deadline: the allowance in effect
    /// (`limit`: the budget, plus what resumes added and the waits for a person that do not
    /// count) and what is left of it; the time since the thread started is the difference.
    pub fn wall_clock(&self, now: Instant) -> Option<WallClock> {
        let deadline = self.deadline?;
        Some(WallClock {
            limit: deadline.saturating_duration_since(self.started),
            remaining: deadline.saturating_duration_since(now),
        })
    }

    /// The goal the thread declared (tightened by later ones), if any.
    pub fn goal(&self) -> Option<&Goal> {
        self.progress.as_deref().and_then(|p| p.goal.as_ref())
    }

    pub fn progress(&mut self) -> &mut Progress {
        self.progress.get_or_insert_with(Box::default)
    }

    /// Records one delivery of `(from, to, payload)`; true when the deliveries so far end with
    /// one round of `p` deliveries repeated `window` times in a row, for a period `p` of 1 to
    /// `max_period`: a self-loop (1), an A↔B ping-pong (2), A→B→C→A (3), … — each with
    /// identical bytes every round. A rally whose payloads change is never a cycle.
    pub fn cycles(
        &mut self,
        from: &str,
        to: &str,
        payload: &str,
        window: usize,
        max_period: usize,
    ) -> bool {
        if window == 0 || max_period == 0 {
            return false;
        }
        let digest = FAST.hash_one((from, to, payload));
        if self.recent.len() == window * max_period {
            self.recent.pop_front();
        }
        self.recent.push_back(digest);
        let (recent, n) = (&self.recent, self.recent.len());
        (1..=max_period).any(|p| {
            let span = window * p;
            span <= n && (0..span - p).all(|j| recent[n - 1 - j] == recent[n - 1 - j - p])
        })
    }

    /// Records a loop-control payload; true when the same one came `window` times in a row.
    pub fn same_control(&mut self, payload: &str, window: usize) -> bool {
        let digest = FAST.hash_one(payload);
        self.last_control = if self.last_control.0 == digest {
            (digest, self.last_control.1 + 1)
        } else {
            (digest, 1)
        };
        window > 0 && self.last_control.1 >= window
    }

    /// Resumes after a halt: `extra` is added to the limits (a wall clock extends the deadline
    /// from now), and the stop request, the queue-full streak and the no-progress history are
    /// forgotten.
    pub fn resume(&mut self, extra: &Budget) {
        self.resume_at(extra, Instant::now());
    }

    /// [`Ledger::resume`] as it happened at `at` (a restart replays a recorded resume).
    pub fn resume_at(&mut self, extra: &Budget, at: Instant) {
        self.account.extend(extra);
        if let Some(w) = extra.wall_clock {
            let from = self.deadline.map_or(at, |d| d.max(at));
            self.deadline = Some(from + w);
        }
        self.stop_requested = None;
        self.queue_full_streak = 0;
        self.recent.clear();
        self.last_control = (0, 0);
    }

    /// True the first time it is asked about `budget`.
    pub fn first_warning(&mut self, budget: BudgetName) -> bool {
        if self.warned.contains(&budget) {
            return false;
        }
        self.warned.push(budget);
        true
    }

    /// Notes that this thread spawned `child` with its first message addressed to `to`.
    pub fn spawned(&mut self, child: ThreadId, to: &[Arc<str>]) {
        self.spawned.push((child, to.into()));
    }

    /// Whether `thread` is a child this thread spawned.
    pub fn is_child(&self, thread: ThreadId) -> bool {
        self.spawned.iter().any(|(c, _)| *c == thread)
    }

    /// Whom a criterion `reporter` reported naming child `thread` is credited to: the one
    /// listener the child was spawned to, when that is not the reporter; else the reporter
    /// (no thread named, a child spawned to the reporter itself or to several listeners, or a
    /// thread that is no child of this one — which the pump refuses before it gets here).
    pub fn credit(&self, thread: Option<ThreadId>, reporter: &Arc<str>) -> Arc<str> {
        let served = thread.and_then(|t| self.spawned.iter().find(|(c, _)| *c == t));
        match served.map(|(_, to)| &**to) {
            Some([one]) if one != reporter => Arc::clone(one),
            _ => Arc::clone(reporter),
        }
    }

    /// Counts one self-iteration of `listener`.
    pub fn iterate(&mut self, listener: &Arc<str>) {
        match self.iterations.iter_mut().find(|(l, _)| l == listener) {
            Some((_, n)) => *n += 1,
            None => self.iterations.push((Arc::clone(listener), 1)),
        }
    }
}

/// What a governor message changed, for the caller to act on.
#[derive(Debug)]
pub(crate) enum Absorbed {
    /// A goal was declared or tightened: its criteria count and budget overrides, for the
    /// decision record, and — for a thread's first goal — why it cannot start a loop
    /// ([`Goal::need_info`]).
    Goal {
        criteria: usize,
        budget: Budget,
        need_info: Option<&'static str>,
    },
    /// A loop signal, to resolve with the others of the delivery.
    Loop(Signal),
    /// A residual was added.
    Residual,
    /// A criterion or learning was noted.
    Noted,
}

impl Ledger {
    /// Takes in a governor message from listener `from` in a thread at spawn depth `depth`.
    /// Used for live messages and when a restarted pump replays them from history.
    pub fn absorb(&mut self, message: GovernorMessage, from: &Arc<str>, depth: u32) -> Absorbed {
        match message {
            GovernorMessage::Goal(goal) => {
                self.account.tighten(&goal.budget);
                if let Some(w) = goal.budget.wall_clock {
                    let by = self.started + w;
                    self.deadline = Some(self.deadline.map_or(by, |d| d.min(by)));
                }
                if let Some(d) = goal.budget.depth {
                    let by = depth + d;
                    self.max_depth = Some(self.max_depth.map_or(by, |m| m.min(by)));
                }
                let progress = self.progress();
                for (id, description) in &goal.criteria {
                    let status = progress.criterion(id);
                    if status.description.is_empty() {
                        status.description.clone_from(description);
                    }
                }
                let absorbed = Absorbed::Goal {
                    criteria: goal.criteria.len(),
                    budget: goal.budget.clone(),
                    need_info: progress.goal.is_none().then(|| goal.need_info()).flatten(),
                };
                // A later goal only tightens: one that would loosen is refused before it gets
                // here (`Goal::loosened_by`), and a recorded one from before that rule is
                // taken in as the tightening it could be.
                match &mut progress.goal {
                    Some(declared) => declared.tighten(goal),
                    None => progress.goal = Some(goal),
                }
                absorbed
            }
            GovernorMessage::Loop(signal) => Absorbed::Loop(signal),
            GovernorMessage::Residual(value) => {
                self.progress().residuals.push(value);
                Absorbed::Residual
            }
            GovernorMessage::Criterion {
                id,
                met,
                evidence,
                thread,
            } => {
                let by = self.credit(thread, from);
                let status = self.progress().criterion(&id);
                status.met = met;
                status.evidence = evidence;
                status.reported_by = Some(by);
                Absorbed::Noted
            }
            GovernorMessage::Learning { lane, text } => {
                self.progress()
                    .learnings
                    .push((lane, text, Arc::clone(from)));
                Absorbed::Noted
            }
        }
    }
}

impl Progress {
    /// The status of criterion `id`, added (unmet, undescribed) if it is new.
    fn criterion(&mut self, id: &str) -> &mut CriterionStatus {
        let at = match self.criteria.iter().position(|c| c.id == id) {
            Some(at) => at,
            None => {
                self.criteria.push(CriterionStatus {
                    id: id.to_owned(),
                    description: String::new(),
                    met: false,
                    evidence: None,
                    reported_by: None,
                });
                self.criteria.len() - 1
            }
        };
        &mut self.criteria[at]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governor::budget::Account;

    /// Issue 36: a `<criterion thread="C">` "is credited to C's listener when C is a child of
    /// this thread spawned to that listener and that listener is not the reporter".
    #[test]
    fn a_criterion_is_credited_to_the_one_listener_its_child_was_spawned_to() {
        let mut ledger = Ledger::new(Account::root(&Budget::unlimited()), None, None);
        let (lead, skeptic): (Arc<str>, Arc<str>) = ("lead".into(), "skeptic".into());
        let [to_skeptic, to_lead, to_both, stranger] = [(); 4].map(|()| ThreadId::new());
        ledger.spawned(to_skeptic, &[Arc::clone(&skeptic)]);
        ledger.spawned(to_lead, &[Arc::clone(&lead)]);
        ledger.spawned(to_both, &[Arc::clone(&skeptic), Arc::from("other")]);
        assert_eq!(ledger.credit(Some(to_skeptic), &lead), skeptic);
        // The reporter's own child, a child whose confirming listener is unknown, no thread
        // named, and a thread that is no child: the reporter's word.
        for thread in [Some(to_lead), Some(to_both), None, Some(stranger)] {
            assert_eq!(ledger.credit(thread, &lead), lead);
        }
        assert!(ledger.is_child(to_both) && !ledger.is_child(stranger));
    }
}
