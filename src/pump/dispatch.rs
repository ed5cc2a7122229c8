//! One delivery: pass the governor's gate, call the handler (with its timeout and the thread's
//! deadline, catching panics), plan its outputs, and apply them in one transaction.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use futures_util::FutureExt as _;
use smallvec::SmallVec;
use tokio::time::Instant;

use super::Shared;
use super::apply::{Applying, Failure, FailureCode};
use super::gate::Admission;
use super::plan::{Step, Steps};
use super::tx::Tx;
use crate::envelope::local::local;
use crate::governor::Signals;
use crate::history::{HistoryError, Ticket, Timing};
use crate::listener::{Context, Delivery, ListenerError, Registration, RunStore, Usage};
use crate::system::{ErrorCode, SystemMessage};
use crate::thread::registry::{Queued, ThreadEntry};
use crate::tool::{Call, TOOL_NS};

/// What a finished handler call left to apply.
#[derive(Debug)]
struct Done<'a> {
    me: usize,
    /// The listener's name, this worker's copy.
    name: Arc<str>,
    delivery: &'a Delivery,
    failure: Option<Failure>,
    steps: Steps,
    usage: Usage,
    spent: Usage,
    /// How long the handler ran, timed only when the policy sets per-iteration limits.
    took: Option<Duration>,
    /// A governor notice that cost no turn.
    free: bool,
    /// When the handler ran, wall clock (kept with the delivered mark for the viewer's waterfall).
    timing: Timing,
    warnings: Vec<SystemMessage>,
}

impl Shared {
    /// Delivers one queued message and commits what came of it, inside its telemetry span
    /// (`pump/telemetry.rs`; nothing when telemetry is off).
    /// `store` is the runner's own handle on the store (see [`RunStore`]).
    pub(crate) async fn deliver(
        self: &Arc<Self>,
        entry: &Arc<ThreadEntry>,
        item: Queued,
        store: &RunStore,
    ) {
        let registration = &self.routes[item.target];
        let traced = self
            .telemetry
            .delivery(&self.registry, entry, registration, &item);
        traced.run(self.deliver_untraced(entry, item, store)).await;
    }

    async fn deliver_untraced(
        self: &Arc<Self>,
        entry: &Arc<ThreadEntry>,
        item: Queued,
        store: &RunStore,
    ) {
        let forwarded = self
            .forwarded(&self.routes[item.target], &item.envelope)
            .await;
        let (view, deadline, warnings, account, cost) = match self.gate(entry, &item, forwarded) {
            Admission::Go {
                view,
                deadline,
                warnings,
                account,
                cost,
            } => (view, deadline, warnings, account, cost),
            Admission::Halt(verdict) => return self.halt_before(entry, item, verdict).await,
        };
        let registration = &self.routes[item.target];
        let delivery = Delivery::new(item.envelope);
        let name = local(&registration.name);
        let mut cx = Context::new(
            entry.id,
            Arc::clone(&name),
            delivery.id(),
            Arc::clone(store),
            view,
            account,
        );
        let timed = !self.config.governor.iteration.is_unlimited();
        let started = timed.then(Instant::now);
        // A call held for a person is not handed to its tool (`pump/inbox/hold.rs`).
        let held = self.held(registration, &delivery, forwarded).await;
        let started_us = crate::history::now_us();
        let outcome = match held {
            Some(_) => Ok(()),
            None => invoke(registration, &delivery, &mut cx, deadline).await,
        };
        let took = started.map(|s| s.elapsed());
        let timing = Timing {
            started_us,
            handled_us: crate::history::now_us(),
        };
        let (outputs, usage, mut spent, on_commit) = cx.into_parts();
        spent.add(&cost.usage());
        let (steps, failure) = match (outcome, held) {
            (Ok(()), Some(held)) => {
                let mut steps = Steps::new();
                steps.push(Step::Ask {
                    held: Box::new(held),
                });
                (steps, None)
            }
            (Ok(()), None) => (self.plan(item.target, &delivery, outputs), None),
            (Err(mut failure), _) => {
                if !outputs.is_empty() {
                    failure.message = format!(
                        "{}; the {} output(s) it emitted before failing were dropped",
                        failure.message,
                        outputs.len()
                    );
                }
                (Steps::new(), Some(failure))
            }
        };
        let done = Done {
            me: item.target,
            name,
            delivery: &delivery,
            failure,
            steps,
            usage,
            spent,
            took,
            free: cost.free,
            timing,
            warnings,
        };
        let committed = self.apply_done(entry, done);
        let durable = self.await_commit(entry.id, committed).await.is_ok();
        if !durable {
            // Not delivered as far as history knows: delivered again once the store recovers.
            let item = Queued {
                envelope: delivery.envelope().clone(),
                target: item.target,
            };
            return self.stall(entry, item);
        }
        // After the commit, never before: a remote listener acknowledges its work item here.
        if let Some(after) = on_commit {
            after();
        }
    }

    fn apply_done(
        self: &Arc<Self>,
        entry: &Arc<ThreadEntry>,
        done: Done<'_>,
    ) -> Result<Ticket, HistoryError> {
        let family = self.registry.family(entry);
        let (mut inner, mut parent_inner) = family.lock(entry);
        let mut a = Applying {
            shared: self,
            tx: Tx::delivering(done.delivery.thread(), done.delivery.id()),
            entry,
            inner: &mut inner,
            parent: family.pair(&mut parent_inner),
            me: done.me,
            name: done.name,
            delivery: done.delivery,
            signals: Signals::default(),
            refusals: SmallVec::new(),
        };
        a.count(&done.usage, &done.spent, done.free);
        let mut total = done.usage.clone();
        total.add(&done.spent);
        if let Some(took) = done.took {
            a.check_iteration(total.tool_calls, took);
        }
        a.tx.handled(total, done.free, done.timing);
        for warning in done.warnings {
            a.tell_me(warning);
        }
        // Kept for the delivery's span only when telemetry is on (no copy otherwise).
        let failure = self
            .telemetry
            .on()
            .then(|| done.failure.as_ref().map(|f| f.message.clone()))
            .flatten();
        if let Some(failure) = done.failure {
            a.fail(failure);
        }
        for step in done.steps {
            a.step(step);
        }
        let refused = a.tell_refusals();
        let turn = a.inner.counters.deliveries;
        if let Some(total) = a.tx.handled_usage() {
            self.telemetry
                .delivered(total, failure.as_deref(), refused, turn);
        }
        a.conclude(refused);
        let Applying {
            tx, inner, parent, ..
        } = a;
        tx.commit(self, (entry, inner), parent)
    }
}

/// What a handler call came to: its result (or panic) and when it finished; `None` when the
/// deadline passed first.
type Handled = Option<(std::thread::Result<Result<(), ListenerError>>, Instant)>;

/// Runs the handler within its timeout and the thread's deadline, turning an error, a panic or
/// a timeout into a [`Failure`]. A handler that blocked its OS thread past the deadline cannot be
/// interrupted; when it comes back late its outputs are refused all the same.
async fn invoke(
    registration: &Registration,
    delivery: &Delivery,
    cx: &mut Context,
    deadline: Option<Instant>,
) -> Result<(), Failure> {
    let name = &registration.name;
    let limit = handling_limit(registration, delivery);
    let own = Instant::now() + limit;
    let until = deadline.map_or(own, |d| d.min(own));
    let handled: Handled = if registration.blocking {
        on_blocking_pool(registration, delivery, cx, until).await
    } else {
        let handling = AssertUnwindSafe(registration.listener.handle(delivery, cx)).catch_unwind();
        let mut finished = std::pin::pin!(async { (handling.await, Instant::now()) });
        // Polled once before any timer is set: most handlers finish on their first poll, and a
        // timer reaches the runtime's shared handle (a reference count every worker writes).
        match futures_util::poll!(finished.as_mut()) {
            Poll::Ready(done) => Some(done),
            Poll::Pending => tokio::time::timeout_at(until, finished).await.ok(),
        }
    };
    let (code, message) = match handled.filter(|(_, at)| *at <= until).map(|(r, _)| r) {
        Some(Ok(Ok(()))) => return Ok(()),
        Some(Ok(Err(ListenerError::Failed(m)))) => (
            ErrorCode::HandlerFailed.into(),
            format!("`{name}` failed: {m}"),
        ),
        Some(Ok(Err(ListenerError::InvalidPayload(m)))) => (
            FailureCode::InvalidPayload,
            format!("`{name}` cannot read the payload: {m}"),
        ),
        Some(Ok(Err(ListenerError::Backpressure(m)))) => {
            (FailureCode::Backpressure, format!("`{name}`: {m}"))
        }
        Some(Ok(Err(ListenerError::Upstream(m)))) => {
            (ErrorCode::UpstreamFailed.into(), format!("`{name}`: {m}"))
        }
        Some(Ok(Err(ListenerError::OverBudget(b)))) => (
            FailureCode::OverBudget(b),
            format!("`{name}`: the {b} budget has no room"),
        ),
        Some(Err(panic)) => (
            ErrorCode::HandlerPanicked.into(),
            format!("`{name}` panicked: {}", panic_text(&*panic)),
        ),
        None if until < own => (
            FailureCode::Deadline,
            format!("`{name}` ran into the thread's wall-clock budget"),
        ),
        None => (
            ErrorCode::HandlerTimeout.into(),
            format!("`{name}` did not finish within {} ms", limit.as_millis()),
        ),
    };
    Err(Failure { code, message })
}

/// How long a handler may take: its registration's timeout, or less when the delivery is a
/// tool call asking a shorter `timeout-ms` of a listener that does not answer that itself.
fn handling_limit(registration: &Registration, delivery: &Delivery) -> Duration {
    let own = registration.timeout;
    let q = delivery.qname();
    if !q.is(TOOL_NS, "call") || registration.listener.answers_call_timeouts() {
        return own;
    }
    match Call::shared(delivery.payload()) {
        Ok(call) => call
            .timeout_ms
            .map_or(own, |ms| own.min(Duration::from_millis(ms))),
        Err(_) => own,
    }
}

/// Runs a blocking handler on tokio's blocking pool with a context of its own, which comes
/// back into `cx` if it finishes in time. Past `until` it is left running and forgotten.
async fn on_blocking_pool(
    registration: &Registration,
    delivery: &Delivery,
    cx: &mut Context,
    until: Instant,
) -> Handled {
    let (listener, delivery) = (Arc::clone(&registration.listener), delivery.clone());
    let mut own = cx.fork();
    let runtime = tokio::runtime::Handle::current();
    let job = tokio::task::spawn_blocking(move || {
        let handling = AssertUnwindSafe(listener.handle(&delivery, &mut own)).catch_unwind();
        let result = runtime.block_on(handling);
        (result, Instant::now(), own)
    });
    match tokio::time::timeout_at(until, job).await {
        Ok(Ok((result, at, own))) => {
            *cx = own;
            Some((result, at))
        }
        Ok(Err(join)) => {
            let panic = join
                .try_into_panic()
                .unwrap_or_else(|_| Box::new("cancelled"));
            Some((Err(panic), Instant::now()))
        }
        Err(_) => None,
    }
}

fn panic_text(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic payload".to_owned())
}
