//! Applying a `spawn-thread` whose child goes to the pump of another partition
//! (`pump/spread.rs`): the grant withdrawn from the spawner's account, the carve decision and
//! the `adopt` parcel recorded in the parent, the parcel sent once the delivery is durable.

use std::sync::Arc;

use super::Applying;
use super::spawn::child_path;
use crate::Payload;
use crate::envelope::local::local;
use crate::governor::ledger::RemoteChild;
use crate::governor::{Budget, Decision, Verdict};
use crate::pump::Shared;
use crate::pump::route::Targets;
use crate::pump::spread::{Adoption, Parcel};
use crate::system::{ErrorCode, SystemMessage};
use crate::thread::Partition;

impl Applying<'_> {
    /// Spawns the child in `partition` if its carve-out bounds it in every dimension the
    /// parent's chain limits; `false` (nothing done) when it must stay here.
    pub(super) fn spawn_elsewhere(
        &mut self,
        partition: Partition,
        depth: u32,
        sub_id: Option<&str>,
        initial: &Payload,
        targets: &Targets,
        budget: &Budget,
    ) -> bool {
        let placed = match Shared::place_remote(self.inner, depth, budget) {
            Ok(Some(placed)) => placed,
            Ok(None) => return false,
            Err((message, spent)) => {
                if let Some(budget) = spent {
                    self.signals.halt.get_or_insert(Verdict::timeout(budget));
                }
                let notice = SystemMessage::Error {
                    code: ErrorCode::BudgetExhausted,
                    message,
                };
                self.refuse(notice, 1);
                return true;
            }
        };
        let child = partition.new_thread();
        let path = child_path(self.entry, self.inner, sub_id);
        let to: Vec<Arc<str>> = targets
            .iter()
            .map(|&target| local(&self.shared.routes[target].name))
            .collect();
        let adoption = Adoption {
            child,
            parent: self.entry.id,
            path: path.to_string(),
            spawner: self.me_name().to_string(),
            depth,
            max_depth: placed.max_depth,
            granted: placed.granted.clone(),
            to: to.iter().map(ToString::to_string).collect(),
            payload: initial.as_str().to_owned(),
            halted: false,
        };
        self.shared.telemetry.spawned(child);
        self.inner.ledger.spawned(child, &to);
        let carve = Decision::Carve {
            thread: child,
            to,
            granted: placed.granted,
        };
        self.shared
            .decide(&mut self.tx, self.entry, self.inner, &carve);
        let parcel = Parcel::Adopt(adoption);
        let json = serde_json::to_string(&parcel).expect("a parcel serializes");
        let sent = Decision::Parcel { sent: true, json };
        self.shared
            .decide(&mut self.tx, self.entry, self.inner, &sent);
        self.tx.ship(parcel);
        let notice = SystemMessage::ThreadSpawned {
            assigned: child,
            parent: self.entry.id,
            suggested_sub_id: path.rsplit('.').next().unwrap_or_default().to_owned(),
            path: path.to_string(),
        };
        self.inner.add_child(child, path);
        self.inner.live_children += 1;
        self.inner.ledger.remote_children.push(RemoteChild {
            thread: child,
            held: placed.held,
            returning: None,
        });
        self.tx.snapshot(self.entry, self.inner);
        self.tell_me(notice);
        true
    }
}
