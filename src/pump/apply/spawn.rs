//! Applying a `spawn-thread` request: the depth and threads budgets, the carve-out (with the
//! spawner's floor), the child's entry and its first message, the carve decision naming the
//! listeners the child serves, and the `thread-spawned` notice.

use std::sync::Arc;

use rust_decimal::Decimal;

use super::Applying;
use crate::envelope::local::local;
use crate::governor::Decision;
use crate::governor::Verdict;
use crate::governor::budget::{Amount, BudgetName, CarveRefused};
use crate::governor::ledger::Ledger;
use crate::history::RecordKind;
use crate::pump::Shared;
use crate::pump::route::Targets;
use crate::system::{ErrorCode, SystemMessage};
use crate::thread::registry::{ThreadEntry, ThreadInner};
use crate::{Envelope, Payload};

impl Applying<'_> {
    pub(super) fn spawn(
        &mut self,
        request: Payload,
        sub_id: Option<&str>,
        initial: Payload,
        targets: Targets,
        budget: &crate::governor::Budget,
    ) {
        let env = self.envelope(request);
        self.tx.record(self.inner, env, RecordKind::Message);
        let depth = self.entry.depth + 1;
        let too_deep = self.inner.ledger.max_depth.is_some_and(|max| depth > max);
        if !too_deep
            && let Some(partition) = self.shared.spread_to()
            && self.spawn_elsewhere(partition, depth, sub_id, &initial, &targets, budget)
        {
            return;
        }
        let child = if too_deep {
            Err(format!(
                "spawn refused: depth {depth} is over the max-depth budget"
            ))
        } else {
            self.shared
                .new_child(self.entry, self.inner, self.me_name(), sub_id, budget)
                .map_err(|refused| refused.to_string())
        };
        let child = child.and_then(|child| {
            let thread = Amount::of(BudgetName::Threads, Decimal::ONE);
            match self.inner.ledger.account.withdraw(thread) {
                Ok(()) => Ok(child),
                Err(e) => {
                    // Give the carve-out back: the child never existed. A failed withdrawal is
                    // a halt, as a turn's is: the tree has spawned all it may.
                    child.lock().ledger.account.close();
                    self.signals.halt.get_or_insert(Verdict::timeout(e.budget));
                    Err(format!("spawn refused: the {} budget is spent", e.budget))
                }
            }
        });
        let child = match child {
            Ok(child) => child,
            Err(message) => {
                let notice = SystemMessage::Error {
                    code: ErrorCode::BudgetExhausted,
                    message,
                };
                return self.refuse(notice, 1);
            }
        };
        self.shared.telemetry.spawned(child.id);
        let mut to = Vec::with_capacity(targets.len());
        for target in targets {
            let name = local(&self.shared.routes[target].name);
            let env = Envelope::new(Arc::clone(self.me_name()), child.id, initial.clone())
                .with_to(Some(Arc::clone(&name)));
            self.tx.queue_in_child(&child, env, target);
            to.push(name);
        }
        // Whom the child serves goes into the ledger and the record, so that a restart and
        // `verify --certificates` credit a `<criterion thread="…">` as the live pump did.
        self.inner.ledger.spawned(child.id, &to);
        let granted = if budget == &crate::governor::Budget::default() {
            crate::governor::Budget::default()
        } else {
            child_limits(&child, budget)
        };
        let decision = Decision::Carve {
            thread: child.id,
            to,
            granted,
        };
        self.shared
            .decide(&mut self.tx, self.entry, self.inner, &decision);
        let notice = SystemMessage::ThreadSpawned {
            assigned: child.id,
            parent: self.entry.id,
            suggested_sub_id: child.path.rsplit('.').next().unwrap_or_default().to_owned(),
            path: child.path.to_string(),
        };
        self.inner.add_child(child.id, Arc::clone(&child.path));
        self.inner.live_children += 1;
        self.tx.add_child(child);
        self.tx.snapshot(self.entry, self.inner);
        self.tell_me(notice);
    }
}

/// The limits a child actually got (its carve-out after clamping to what the parent had), with
/// the wall clock and depth it asked for (which a restart needs to rebuild its deadline and
/// depth limit).
fn child_limits(child: &ThreadEntry, asked: &crate::governor::Budget) -> crate::governor::Budget {
    let inner = child.lock();
    let mut b = crate::governor::Budget {
        wall_clock: asked.wall_clock,
        depth: asked.depth,
        ..crate::governor::Budget::default()
    };
    for line in inner.ledger.account.snapshot() {
        let limit = line.limit;
        let as_u64 = limit.and_then(|l| u64::try_from(l).ok());
        match line.name {
            BudgetName::Turns => b.turns = as_u64,
            BudgetName::Tokens => b.tokens = as_u64,
            BudgetName::Cost => b.cost = limit,
            BudgetName::ToolCalls => b.tool_calls = as_u64,
            BudgetName::Threads => b.threads = as_u64,
            BudgetName::WallClock
            | BudgetName::Depth
            | BudgetName::ToolCallsPerIteration
            | BudgetName::WallClockPerIteration
            | BudgetName::Iterations => {}
        }
    }
    b
}

impl Shared {
    /// Creates a child thread entry (not yet registered) with its carved account and deadline,
    /// at a path none of its siblings has.
    /// The spawner keeps a floor of 2 turns per open child, this one included (its
    /// `thread-spawned` notice and its `thread-result`), out of any turns carve-out.
    ///
    /// # Errors
    ///
    /// [`CarveRefused`] when the carve-out would grant nothing in a dimension it asks for.
    pub(crate) fn new_child(
        &self,
        parent: &ThreadEntry,
        inner: &ThreadInner,
        spawner: &Arc<str>,
        sub_id: Option<&str>,
        budget: &crate::governor::Budget,
    ) -> Result<Arc<ThreadEntry>, CarveRefused> {
        let path = child_path(parent, inner, sub_id);
        let floor = 2 * (inner.live_children as u64 + 1);
        let account = inner.ledger.account.child(budget, floor)?;
        let now = tokio::time::Instant::now();
        let ledger = Ledger::child(&inner.ledger, parent.depth, account, budget, now);
        let child = ThreadEntry::new(
            self.config.new_thread(),
            Some(parent),
            Some(Arc::clone(spawner)),
            path,
            parent.dialect,
            ledger,
        );
        child.lock().activate();
        Ok(Arc::new(child))
    }
}

/// The path of a new child of `parent` (whose state is `inner`): its sanitized `sub_id` (or
/// `child-N`), made unique among its siblings.
pub(super) fn child_path(
    parent: &ThreadEntry,
    inner: &ThreadInner,
    sub_id: Option<&str>,
) -> Arc<str> {
    let sub_id = sub_id
        .map(sanitize_sub_id)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("child-{}", inner.children.len() + 1));
    unique_path(&parent.path, &sub_id, |path| inner.has_child_path(path))
}

/// `parent.sub_id`, or — when a sibling already has that path — `parent.sub_id-N` with the
/// first free N from 2 (the sub-id shortened to keep 64 characters): seed 003's "Core confirms
/// with assigned ID", so that a path names one thread.
fn unique_path(parent: &str, sub_id: &str, taken: impl Fn(&str) -> bool) -> Arc<str> {
    let free = |path: &str| !taken(path);
    let path = format!("{parent}.{sub_id}");
    if free(&path) {
        return path.into();
    }
    (2u64..)
        .map(|n| {
            let suffix = format!("-{n}");
            let base: String = sub_id.chars().take(64 - suffix.len()).collect();
            format!("{parent}.{base}{suffix}")
        })
        .find(|p| free(p))
        .expect("a free suffix among more numbers than siblings")
        .into()
}

/// Keeps `A-Z a-z 0-9 _ -` of a suggested sub-id, at most 64 characters.
fn sanitize_sub_id(id: &str) -> String {
    id.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        .take(64)
        .collect()
}
