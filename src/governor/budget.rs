//! Budgets: [`Budget`] (limits per dimension), and the account ledger that withdraws spend
//! before it happens, charges it to every ancestor, and reserves carve-outs for children.
//!
//! Accounts form a tree like threads do. A withdrawal locks the spending account and its
//! ancestors (always child before parent; no other lock is taken while holding them), checks
//! that every level has room, and charges every level — so a tree never spends more than any of
//! its ancestors allows, however many children spend at once. A child spawned with a `<budget>`
//! has that much *reserved* at its spawner: siblings cannot take it.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

/// A budget dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BudgetName {
    /// Deliveries (turns) in the thread and below it.
    #[serde(rename = "max-turns")]
    Turns,
    /// Model tokens, in and out.
    #[serde(rename = "max-tokens")]
    Tokens,
    /// Cost, an exact decimal.
    #[serde(rename = "max-cost")]
    Cost,
    /// Tool calls.
    #[serde(rename = "max-tool-calls")]
    ToolCalls,
    /// Threads spawned below this one.
    #[serde(rename = "max-threads")]
    Threads,
    /// Time since the thread started.
    #[serde(rename = "max-wall-clock")]
    WallClock,
    /// Spawn depth below the root.
    #[serde(rename = "max-depth")]
    Depth,
    /// Tool calls in one self-iteration (phuc-loop §6.1 `max_tool_calls_per_iteration`).
    #[serde(rename = "max-tool-calls-per-iteration")]
    ToolCallsPerIteration,
    /// Handler time of one self-iteration (phuc-loop §6.1 `max_seconds_per_iteration`).
    #[serde(rename = "max-wall-clock-per-iteration")]
    WallClockPerIteration,
    /// Iterations of a loop controller (phuc-loop §6.1 `max_iterations`): counted by the
    /// controller, which aborts with `max-iterations`; never withdrawn by the governor.
    #[serde(rename = "max-iterations")]
    Iterations,
}

/// The dimensions that are withdrawn and charged (wall clock and depth are checked, not spent).
pub(crate) const SPENT: [BudgetName; 5] = [
    BudgetName::Turns,
    BudgetName::Tokens,
    BudgetName::Cost,
    BudgetName::ToolCalls,
    BudgetName::Threads,
];

impl BudgetName {
    /// The name as written in halts, warnings and reports (`max-turns`, …).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::BudgetName;
    /// assert_eq!(BudgetName::Turns.as_str(), "max-turns");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Turns => "max-turns",
            Self::Tokens => "max-tokens",
            Self::Cost => "max-cost",
            Self::ToolCalls => "max-tool-calls",
            Self::Threads => "max-threads",
            Self::WallClock => "max-wall-clock",
            Self::Depth => "max-depth",
            Self::ToolCallsPerIteration => "max-tool-calls-per-iteration",
            Self::WallClockPerIteration => "max-wall-clock-per-iteration",
            Self::Iterations => "max-iterations",
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Self::Turns => 0,
            Self::Tokens => 1,
            Self::Cost => 2,
            Self::ToolCalls => 3,
            Self::Threads => 4,
            Self::WallClock
            | Self::Depth
            | Self::ToolCallsPerIteration
            | Self::WallClockPerIteration
            | Self::Iterations => unreachable!("not a spent dimension"),
        }
    }
}

impl fmt::Display for BudgetName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Limits per dimension; `None` is unlimited. Plain data: the organism policy, a `goal`'s
/// tightening, a `spawn-thread` carve-out and a resume's addition are all `Budget`s.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Budget {
    /// Deliveries in the thread and its descendants.
    pub turns: Option<u64>,
    /// Model tokens (in + out).
    pub tokens: Option<u64>,
    /// Cost, exact.
    pub cost: Option<Decimal>,
    /// Tool calls.
    pub tool_calls: Option<u64>,
    /// Threads spawned below.
    pub threads: Option<u64>,
    /// Wall clock from the thread's start.
    #[serde(with = "millis", default)]
    pub wall_clock: Option<Duration>,
    /// Deepest spawn depth below the root (root = 0).
    pub depth: Option<u32>,
}

impl Budget {
    /// Nothing limited.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::Budget;
    /// assert_eq!(Budget::unlimited().turns, None);
    /// ```
    pub fn unlimited() -> Self {
        Self::default()
    }

    /// Per dimension the smaller limit of the two (`None` counts as unlimited).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::Budget;
    /// let policy = Budget { turns: Some(100), tokens: Some(5_000), ..Budget::unlimited() };
    /// let goal = Budget { turns: Some(10), ..Budget::unlimited() };
    /// let both = policy.tightened(&goal);
    /// assert_eq!((both.turns, both.tokens), (Some(10), Some(5_000)));
    /// ```
    pub fn tightened(&self, other: &Budget) -> Budget {
        fn min<T: Ord + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, None) => a,
                (None, b) => b,
            }
        }
        Budget {
            turns: min(self.turns, other.turns),
            tokens: min(self.tokens, other.tokens),
            cost: min(self.cost, other.cost),
            tool_calls: min(self.tool_calls, other.tool_calls),
            threads: min(self.threads, other.threads),
            wall_clock: min(self.wall_clock, other.wall_clock),
            depth: min(self.depth, other.depth),
        }
    }

    /// This budget with every limit `given` sets put in its place (a fork's budget over the
    /// policy's).
    pub fn overridden(&self, given: &Budget) -> Budget {
        Budget {
            turns: given.turns.or(self.turns),
            tokens: given.tokens.or(self.tokens),
            cost: given.cost.or(self.cost),
            tool_calls: given.tool_calls.or(self.tool_calls),
            threads: given.threads.or(self.threads),
            wall_clock: given.wall_clock.or(self.wall_clock),
            depth: given.depth.or(self.depth),
        }
    }

    /// The spent dimensions' limits as an amount (an unlimited one as zero): a grant held, or
    /// a spend reported, written as a budget.
    pub(crate) fn spent_amount(&self) -> Amount {
        Amount(self.spent_limits().map(Option::unwrap_or_default))
    }

    /// The spent dimensions' limits, in [`SPENT`] order.
    pub(crate) fn spent_limits(&self) -> [Option<Decimal>; 5] {
        [
            self.turns.map(Decimal::from),
            self.tokens.map(Decimal::from),
            self.cost,
            self.tool_calls.map(Decimal::from),
            self.threads.map(Decimal::from),
        ]
    }
}

impl Budget {
    /// A budget of these spent-dimension limits (in [`SPENT`] order), nothing else limited.
    /// A count that is not a whole number below 2⁶⁴ is left unlimited (none comes from a
    /// count).
    pub(crate) fn from_spent(limits: [Option<Decimal>; 5]) -> Self {
        let count = |d: Option<Decimal>| d.and_then(|d| u64::try_from(d).ok());
        Self {
            turns: count(limits[0]),
            tokens: count(limits[1]),
            cost: limits[2],
            tool_calls: count(limits[3]),
            threads: count(limits[4]),
            ..Self::default()
        }
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&(d.as_millis() as u64)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

/// Amounts in the spent dimensions, in [`SPENT`] order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Amount(pub [Decimal; 5]);

impl Amount {
    pub fn of(name: BudgetName, value: Decimal) -> Self {
        let mut a = Self::default();
        a.0[name.index()] = value;
        a
    }

    pub fn get(&self, name: BudgetName) -> Decimal {
        self.0[name.index()]
    }

    /// Adds `value` in dimension `name`.
    pub fn add(&mut self, name: BudgetName, value: Decimal) {
        self.0[name.index()] += value;
    }

    fn is_zero(&self) -> bool {
        self.0.iter().all(Decimal::is_zero)
    }
}

/// A withdrawal that does not fit: which budget, and whose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exhausted {
    pub budget: BudgetName,
    /// 0 = the spending thread itself, 1 = its parent, …
    pub level: usize,
}

/// Whether a level lacks room for `amount` in dimension `d` (its reservations count as used).
fn no_room_for(amount: Amount) -> impl Fn(&AccountState, usize) -> bool {
    // An unlimited dimension always has room: nothing to add up.
    move |state, d| {
        state.limit[d]
            .is_some_and(|limit| state.spent.0[d] + state.reserved.0[d] + amount.0[d] > limit)
    }
}

/// Adds `amount` to every level of a locked chain (child first); a level that carved a
/// dimension for the level below releases that much of its reservation.
fn spend(guards: &mut [MutexGuard<'_, AccountState>], amount: Amount) {
    for level in 0..guards.len() {
        let below = level.checked_sub(1).map(|b| guards[b].carved);
        let state = &mut guards[level];
        // Most dimensions of a withdrawal are zero (a turn, a tool call): nothing to add.
        for (d, add) in amount.0.iter().enumerate().filter(|(_, a)| !a.is_zero()) {
            state.spent.0[d] += add;
            if below.is_some_and(|carved| carved[d]) {
                let r = &mut state.reserved.0[d];
                *r -= (*add).min(*r);
            }
        }
    }
}

/// Every dimension, from the spender up, where `over` holds at a level the spender is not
/// covered at by a carve-out; each named once, at the lowest level it holds. Nothing is
/// allocated when nothing is over (the usual case).
fn overs(
    guards: &[MutexGuard<'_, AccountState>],
    over: impl Fn(&AccountState, usize) -> bool,
) -> Breaches {
    let mut out = Breaches::new();
    for (level, state) in guards.iter().enumerate() {
        for name in SPENT {
            let d = name.index();
            let covered = level > 0 && guards[level - 1].carved[d];
            if !covered && over(state, d) && !out.iter().any(|e: &Exhausted| e.budget == name) {
                out.push(Exhausted {
                    budget: name,
                    level,
                });
            }
        }
    }
    out
}

/// Why [`Account::admit`] let nothing through.
#[derive(Debug)]
pub(crate) enum Admit<T> {
    /// Budgets already spent past their limit, from the spender up (never empty).
    Breached(Breaches),
    /// The caller's own check refused.
    Refused(T),
    /// No room for the withdrawal.
    NoRoom(Exhausted),
}

/// Every dimension of a locked chain spent *past* its limit ([`Account::breached`]).
fn past_limit(guards: &[MutexGuard<'_, AccountState>]) -> Breaches {
    overs(guards, |state, d| {
        state.limit[d].is_some_and(|limit| state.spent.0[d] > limit)
    })
}

/// The locked accounts of a chain, child first.
type Guards<'a> = SmallVec<[MutexGuard<'a, AccountState>; 8]>;

/// One thread's account.
#[derive(Debug)]
pub(crate) struct Account {
    parent: Option<Arc<Account>>,
    state: Mutex<AccountState>,
}

#[derive(Debug, Clone)]
struct AccountState {
    /// Dimensions reserved at the parent (a carve-out), until the account closes.
    carved: [bool; 5],
    limit: [Option<Decimal>; 5],
    spent: Amount,
    /// Held for carved children, not yet spent by them.
    reserved: Amount,
    closed: bool,
}

impl Account {
    /// A root account with the given limits.
    pub fn root(budget: &Budget) -> Arc<Self> {
        Arc::new(Self {
            parent: None,
            state: Mutex::new(AccountState {
                carved: [false; 5],
                limit: budget.spent_limits(),
                spent: Amount::default(),
                reserved: Amount::default(),
                closed: false,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, AccountState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// This account and its ancestors, locked child first (on the stack for the usual depths).
    fn lock_chain(&self) -> Guards<'_> {
        let mut guards = Guards::new();
        let mut at = Some(self);
        while let Some(account) = at {
            guards.push(account.lock());
            at = account.parent.as_deref();
        }
        guards
    }

    /// Withdraws `amount` if every level has room; charges every level. Nothing changes on error.
    pub fn withdraw(self: &Arc<Self>, amount: Amount) -> Result<(), Exhausted> {
        if amount.is_zero() {
            return Ok(());
        }
        let mut guards = self.lock_chain();
        if let Some(exhausted) = overs(&guards, no_room_for(amount)).first().copied() {
            return Err(exhausted);
        }
        spend(&mut guards, amount);
        Ok(())
    }

    /// The gate's one look at the chain, locked once: the budgets already spent past their
    /// limit (`Breached`, every one named); else `first`, the caller's own check, run with the
    /// chain locked (`Refused`); else `amount` withdrawn if every level has room (`NoRoom`).
    /// Nothing is withdrawn on error. The same as [`Account::breached`], the check, then
    /// [`Account::withdraw`], without locking and walking the chain twice per delivery.
    pub fn admit<T>(
        self: &Arc<Self>,
        amount: Amount,
        first: impl FnOnce() -> Option<T>,
    ) -> Result<[Line; 5], Admit<T>> {
        let mut guards = self.lock_chain();
        let breaches = past_limit(&guards);
        if !breaches.is_empty() {
            return Err(Admit::Breached(breaches));
        }
        if let Some(refused) = first() {
            return Err(Admit::Refused(refused));
        }
        if !amount.is_zero() {
            if let Some(exhausted) = overs(&guards, no_room_for(amount)).first().copied() {
                return Err(Admit::NoRoom(exhausted));
            }
            spend(&mut guards, amount);
        }
        // What [`Account::snapshot`] would read next, under the same lock.
        Ok(lines(&guards[0]))
    }

    /// Whether `amount` could be withdrawn now (nothing changes).
    pub fn check(self: &Arc<Self>, amount: Amount) -> Result<(), Exhausted> {
        let guards = self.lock_chain();
        overs(&guards, no_room_for(amount))
            .first()
            .copied()
            .map_or(Ok(()), Err)
    }

    /// Charges `amount` (already spent, e.g. tokens a model used) to every level, even past a
    /// limit. Returns every budget now breached, from the spender up (empty when none).
    pub fn charge(self: &Arc<Self>, amount: Amount) -> Breaches {
        if !amount.is_zero() {
            let mut guards = self.lock_chain();
            spend(&mut guards, amount);
        }
        self.breached()
    }

    /// Every dimension spent *past* its limit at this level or above, from the spender up, each
    /// named once. Spending a budget exactly is allowed: only going past it is a breach.
    /// Reservations for children do not count: they are promises, not spend.
    pub fn breached(self: &Arc<Self>) -> Breaches {
        past_limit(&self.lock_chain())
    }

    /// Withdraws what `choose` picks — a value and the amount to withdraw for it — given the
    /// room in each spent dimension as a withdrawal sees it (the least limit − spent − reserved
    /// over every level checked: this account, and each ancestor up to the first carve-out
    /// covering it; `None` where nothing limits it), under one lock of the chain, so that
    /// nothing is spent between the look and the withdrawal. `Ok(None)` when `choose` picks
    /// nothing.
    ///
    /// # Errors
    ///
    /// `choose`'s refusal, or the budget the amount does not fit (nothing changes).
    pub fn withdraw_chosen<T, E>(
        self: &Arc<Self>,
        choose: impl FnOnce([Option<Decimal>; 5]) -> Result<Option<(T, Amount)>, E>,
    ) -> Result<Option<T>, Chosen<E>> {
        let mut guards = self.lock_chain();
        let Some((value, amount)) = choose(room(&guards)).map_err(Chosen::Refused)? else {
            return Ok(None);
        };
        if let Some(exhausted) = overs(&guards, no_room_for(amount)).first().copied() {
            return Err(Chosen::Exhausted(exhausted));
        }
        spend(&mut guards, amount);
        Ok(Some(value))
    }

    /// Settles a grant `held` (withdrawn with [`Account::withdraw`]) for a child on another
    /// pump that spent `spent`: what it did not spend goes back, what it spent past its grant
    /// (a model's tokens counted after the call) is charged. Returns what was done, to undo.
    pub fn settle(self: &Arc<Self>, held: Amount, spent: Amount) -> Settled {
        let (mut back, mut more) = (Amount::default(), Amount::default());
        for (d, (held, spent)) in held.0.iter().zip(spent.0).enumerate() {
            let diff = held - spent;
            if diff.is_sign_positive() {
                back.0[d] = diff;
            } else {
                more.0[d] = -diff;
            }
        }
        self.refund(back);
        self.charge(more);
        Settled { back, more }
    }

    /// Gives back `amount` withdrawn earlier (a grant held for a child on another pump, less
    /// what it spent): the exact inverse of [`Account::withdraw`] at every level.
    pub fn refund(self: &Arc<Self>, amount: Amount) {
        let mut guards = self.lock_chain();
        for level in 0..guards.len() {
            let below = level.checked_sub(1).map(|b| guards[b].carved);
            let state = &mut guards[level];
            for (d, back) in amount.0.iter().enumerate().filter(|(_, a)| !a.is_zero()) {
                let spent = state.spent.0[d];
                state.spent.0[d] -= (*back).min(spent);
                if below.is_some_and(|carved| carved[d]) {
                    state.reserved.0[d] += back;
                }
            }
        }
    }

    /// Opens a child account. Dimensions the child's `budget` names are carved out of this one
    /// and reserved; the others draw on this account as spent. A carve-out gets at most what is
    /// available here, and in the turns dimension at most what leaves `floor` turns unreserved
    /// (the spawner's own notices and results). Nothing changes on error.
    ///
    /// # Errors
    ///
    /// [`CarveRefused`] when a dimension the budget asks for (more than zero of) would be
    /// granted nothing.
    pub fn child(
        self: &Arc<Self>,
        budget: &Budget,
        floor: u64,
    ) -> Result<Arc<Account>, CarveRefused> {
        let requested = budget.spent_limits();
        let mut limit = [None; 5];
        let mut state = self.lock();
        for d in 0..5 {
            let Some(want) = requested[d] else { continue };
            let keep = if d == BudgetName::Turns.index() {
                Decimal::from(floor)
            } else {
                Decimal::ZERO
            };
            let available = state.limit[d]
                .map(|l| (l - state.spent.0[d] - state.reserved.0[d] - keep).max(Decimal::ZERO));
            let grant = available.map_or(want, |a| want.min(a));
            if grant.is_zero() && !want.is_zero() {
                return Err(CarveRefused {
                    budget: SPENT[d],
                    asked: want,
                    available: available.unwrap_or_default(),
                    floor: keep,
                });
            }
            limit[d] = Some(grant);
        }
        Ok(self.open_child(&mut state, limit))
    }

    /// Reopens a carved child with exactly the limits it was granted (recovery replays the
    /// recorded grant; no clamping happens twice). Dimensions without a grant draw on `self`.
    pub fn child_granted(self: &Arc<Self>, granted: &Budget) -> Arc<Account> {
        let mut state = self.lock();
        self.open_child(&mut state, granted.spent_limits())
    }

    /// A child account carved `limit` (the dimensions given) out of this one, whose locked state
    /// is `state`: reserved here in the same critical section that decided the grant.
    fn open_child(
        self: &Arc<Self>,
        state: &mut AccountState,
        limit: [Option<Decimal>; 5],
    ) -> Arc<Account> {
        for (reserved, grant) in state.reserved.0.iter_mut().zip(limit) {
            *reserved += grant.unwrap_or_default();
        }
        Arc::new(Account {
            parent: Some(Arc::clone(self)),
            state: Mutex::new(AccountState {
                carved: limit.map(|l| l.is_some()),
                limit,
                spent: Amount::default(),
                reserved: Amount::default(),
                closed: false,
            }),
        })
    }

    /// Returns what a carved child did not spend to its parent; from then on it draws on the
    /// parent like an uncarved child, so a resumed thread is checked against its ancestors.
    /// Idempotent.
    pub fn close(&self) {
        let mut state = self.lock();
        if state.closed {
            return;
        }
        state.closed = true;
        let carved = std::mem::take(&mut state.carved);
        let unspent: Vec<(usize, Decimal)> = (0..5)
            .filter(|&d| carved[d])
            .map(|d| {
                (
                    d,
                    state.limit[d]
                        .map_or(Decimal::ZERO, |l| (l - state.spent.0[d]).max(Decimal::ZERO)),
                )
            })
            .collect();
        drop(state);
        if let Some(parent) = &self.parent {
            let mut p = parent.lock();
            for (d, back) in unspent {
                let r = &mut p.reserved.0[d];
                *r -= back.min(*r);
            }
        }
    }

    /// Adds to this account's limits (a resume); a dimension that was unlimited stays so.
    pub fn extend(&self, extra: &Budget) {
        let extra = extra.spent_limits();
        let mut state = self.lock();
        state.closed = false;
        for (limit, more) in state.limit.iter_mut().zip(extra) {
            if let (Some(limit), Some(more)) = (limit.as_mut(), more) {
                *limit += more;
            }
        }
    }

    /// Tightens this account's limits (a `goal`); never loosens.
    pub fn tighten(&self, budget: &Budget) {
        let new = budget.spent_limits();
        let mut state = self.lock();
        for (limit, n) in state.limit.iter_mut().zip(new) {
            if let Some(n) = n {
                *limit = Some(limit.map_or(n, |l| l.min(n)));
            }
        }
    }

    /// Limit, spend and reservations per spent dimension of this account.
    pub fn snapshot(&self) -> [Line; 5] {
        lines(&self.lock())
    }
}

/// Every dimension of one account's state.
fn lines(state: &AccountState) -> [Line; 5] {
    SPENT.map(|name| Line {
        name,
        limit: state.limit[name.index()],
        spent: state.spent.get(name),
        reserved: state.reserved.get(name),
    })
}

/// One dimension of an account, as [`Account::snapshot`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Line {
    pub name: BudgetName,
    /// `None` when unlimited.
    pub limit: Option<Decimal>,
    /// Spent by the account and everything below it.
    pub spent: Decimal,
    /// Held for carved children, not yet spent by them.
    pub reserved: Decimal,
}

impl Line {
    /// What is left to spend here: limit − spent − reserved, not below zero.
    pub fn remaining(&self) -> Option<Decimal> {
        self.limit
            .map(|l| (l - self.spent - self.reserved).max(Decimal::ZERO))
    }
}

/// Why [`Account::withdraw_chosen`] withdrew nothing.
#[derive(Debug)]
pub(crate) enum Chosen<E> {
    /// The chooser refused.
    Refused(E),
    /// The chosen amount does not fit.
    Exhausted(Exhausted),
}

/// The least room (limit − spent − reserved) per spent dimension over a locked chain, up to the
/// first carve-out covering the spender; `None` where nothing limits it.
fn room(guards: &[MutexGuard<'_, AccountState>]) -> [Option<Decimal>; 5] {
    let mut room = [None; 5];
    for (level, state) in guards.iter().enumerate() {
        for (d, room) in room.iter_mut().enumerate() {
            let covered = level > 0 && guards[level - 1].carved[d];
            if covered {
                continue;
            }
            if let Some(limit) = state.limit[d] {
                let here = (limit - state.spent.0[d] - state.reserved.0[d]).max(Decimal::ZERO);
                *room = Some(room.map_or(here, |r: Decimal| r.min(here)));
            }
        }
    }
    room
}

/// What [`Account::settle`] did: given back, charged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Settled {
    back: Amount,
    more: Amount,
}

impl Settled {
    /// Undoes the settling on `account` (its record did not become durable).
    pub fn undo(self, account: &Arc<Account>) {
        account.charge(self.back);
        account.refund(self.more);
    }
}

/// The budgets breached by a charge (usually none or one: kept inline).
pub(crate) type Breaches = SmallVec<[Exhausted; 1]>;

/// A carve-out that would grant nothing in a dimension it asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CarveRefused {
    pub budget: BudgetName,
    pub asked: Decimal,
    pub available: Decimal,
    /// Turns the spawner keeps for its own notices and results.
    pub floor: Decimal,
}

impl fmt::Display for CarveRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "spawn refused: the carve-out asks for {} of {} but {} can be granted",
            self.asked, self.budget, self.available
        )?;
        if !self.floor.is_zero() {
            write!(
                f,
                " (the spawner keeps {} turns for the notices and results of its open children)",
                self.floor
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(n: u64) -> Amount {
        Amount::of(BudgetName::Tokens, Decimal::from(n))
    }

    #[test]
    fn withdrawals_never_exceed_any_ancestor() {
        let root = Account::root(&Budget {
            tokens: Some(100),
            ..Budget::default()
        });
        let a = root.child(&Budget::default(), 0).unwrap();
        let b = root.child(&Budget::default(), 0).unwrap();
        assert_eq!(a.withdraw(tokens(60)), Ok(()));
        assert_eq!(
            b.withdraw(tokens(50)),
            Err(Exhausted {
                budget: BudgetName::Tokens,
                level: 1
            })
        );
        assert_eq!(b.withdraw(tokens(40)), Ok(()));
        let line = root.snapshot()[1];
        assert_eq!(
            (line.name, line.limit, line.spent),
            (
                BudgetName::Tokens,
                Some(Decimal::from(100)),
                Decimal::from(100)
            )
        );
    }

    /// A root of 100 tokens and a child carving `carve` of them.
    fn root_and_carved(carve: u64) -> (Arc<Account>, Arc<Account>) {
        let only = |n| Budget {
            tokens: Some(n),
            ..Budget::default()
        };
        let root = Account::root(&only(100));
        let child = root.child(&only(carve), 0).unwrap();
        (root, child)
    }

    #[test]
    fn a_carve_out_is_reserved_against_siblings_and_returned_when_closed() {
        let (root, carved) = root_and_carved(70);
        let greedy = root.child(&Budget::default(), 0).unwrap();
        assert!(
            greedy.withdraw(tokens(31)).is_err(),
            "70 of 100 are reserved"
        );
        assert!(greedy.withdraw(tokens(30)).is_ok());
        assert!(carved.withdraw(tokens(71)).is_err(), "the carve-out is 70");
        assert!(carved.withdraw(tokens(50)).is_ok());
        carved.close();
        assert!(
            greedy.withdraw(tokens(20)).is_ok(),
            "the unspent 20 came back"
        );
        assert!(greedy.withdraw(tokens(1)).is_err());
        // A carve-out larger than what is left is cut to what is left; one that would be
        // granted nothing is refused, and nothing is reserved for it.
        let tokens_only = |n| Budget {
            tokens: Some(n),
            ..Budget::default()
        };
        let late = root.child(&tokens_only(500), 0).unwrap_err();
        assert_eq!(late.budget, BudgetName::Tokens);
        assert_eq!(root.snapshot()[1].reserved, Decimal::ZERO);
    }

    #[test]
    fn a_refund_undoes_a_withdrawal_at_every_level_and_room_is_the_least_up_the_chain() {
        let (root, carved) = root_and_carved(60);
        let below = carved.child(&Budget::default(), 0).unwrap();
        below.withdraw(tokens(10)).unwrap();
        let room_of = |a: &Arc<Account>| {
            let room = a.withdraw_chosen(|room| Ok::<_, ()>(Some((room, Amount::default()))));
            room.unwrap().unwrap()
        };
        let tokens_at = |a: &Arc<Account>| room_of(a)[BudgetName::Tokens.index()];
        // The root's 40 unreserved do not count for the carved child: its carve-out covers it.
        assert_eq!(tokens_at(&below), Some(Decimal::from(50)));
        assert_eq!(tokens_at(&root), Some(Decimal::from(40)));
        let before = (root.snapshot(), carved.snapshot(), below.snapshot());
        below.withdraw(tokens(30)).unwrap();
        below.refund(tokens(30));
        assert_eq!(
            (root.snapshot(), carved.snapshot(), below.snapshot()),
            before
        );
        assert_eq!(room_of(&Account::root(&Budget::default())), [None; 5]);
    }

    #[test]
    fn a_turns_carve_out_leaves_the_spawner_its_floor() {
        let turns = |n| Budget {
            turns: Some(n),
            ..Budget::default()
        };
        let root = Account::root(&turns(100));
        root.withdraw(Amount::of(BudgetName::Turns, Decimal::ONE))
            .unwrap();
        // Three children asking 40 each; the spawner keeps 2 turns per open child.
        let grants: Vec<Decimal> = (1..=3)
            .map(|open| {
                let child = root.child(&turns(40), 2 * open).unwrap();
                child.snapshot()[0].limit.unwrap()
            })
            .collect();
        assert_eq!(grants, [40, 40, 13].map(Decimal::from));
        let line = root.snapshot()[0];
        assert_eq!(line.remaining(), Some(Decimal::from(6)));
        let refused = root.child(&turns(1), 8).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "spawn refused: the carve-out asks for 1 of max-turns but 0 can be granted \
             (the spawner keeps 8 turns for the notices and results of its open children)"
        );
    }

    #[test]
    fn charges_go_past_limits_and_report_exhaustion() {
        let root = Account::root(&Budget {
            cost: Some(Decimal::new(100, 2)),
            ..Budget::default()
        });
        let child = root.child(&Budget::default(), 0).unwrap();
        assert!(
            child
                .charge(Amount::of(BudgetName::Cost, Decimal::new(100, 2)))
                .is_empty(),
            "spending a budget exactly is not a breach"
        );
        let over = child.charge(Amount::of(BudgetName::Cost, Decimal::new(1, 2)));
        assert_eq!(
            over.as_slice(),
            [Exhausted {
                budget: BudgetName::Cost,
                level: 1
            }]
        );
    }

    /// xorshift64*: a tiny deterministic generator for the property tests.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self, below: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % below
        }
    }

    /// Property: whatever the tree shape, carve-outs and interleaving of withdrawals from many
    /// OS threads, no account ever has more withdrawn than its limit, and a parent's spend is
    /// exactly the sum of what was withdrawn at or below it.
    #[test]
    fn random_trees_and_concurrent_withdrawals_never_overspend() {
        for seed in 1..=40u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let limit = 50 + rng.next(500);
            let root = Account::root(&Budget {
                tokens: Some(limit),
                ..Budget::default()
            });
            let mut accounts = vec![(Arc::clone(&root), Some(limit))];
            for _ in 0..(1 + rng.next(12)) {
                let (parent, _) = accounts[rng.next(accounts.len() as u64) as usize].clone();
                let carve = (rng.next(2) == 0).then(|| rng.next(limit));
                let Ok(child) = parent.child(
                    &Budget {
                        tokens: carve,
                        ..Budget::default()
                    },
                    0,
                ) else {
                    continue;
                };
                let granted = child.snapshot()[1].limit.map(|d| u64::try_from(d).unwrap());
                accounts.push((child, granted));
            }
            let workers: Vec<_> = (0..4u64)
                .map(|w| {
                    let accounts: Vec<_> = accounts.iter().map(|(a, _)| Arc::clone(a)).collect();
                    let mut rng = Rng(seed ^ (w + 1).wrapping_mul(0xD1B5_4A32_D192_ED03));
                    std::thread::spawn(move || {
                        let mut took = 0u64;
                        for _ in 0..300 {
                            let a = &accounts[rng.next(accounts.len() as u64) as usize];
                            let n = 1 + rng.next(9);
                            if a.withdraw(tokens(n)).is_ok() {
                                took += n;
                            }
                        }
                        took
                    })
                })
                .collect();
            let took: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
            let spent_at = |a: &Arc<Account>| u64::try_from(a.snapshot()[1].spent).unwrap();
            assert!(
                spent_at(&root) <= limit,
                "seed {seed}: root spent {} of {limit}",
                spent_at(&root)
            );
            assert_eq!(
                spent_at(&root),
                took,
                "seed {seed}: every withdrawal reaches the root"
            );
            for (account, granted) in &accounts[1..] {
                if let Some(granted) = granted {
                    assert!(
                        spent_at(account) <= *granted,
                        "seed {seed}: a child overspent its carve-out"
                    );
                }
            }
        }
    }
}
