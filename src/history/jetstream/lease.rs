//! The writer's lease on a history stream: one key in a JetStream key-value bucket whose entries
//! expire after the lease's time to live. A store takes the key (a create fails while it is
//! alive), renews it every third of the time to live by a compare-and-set on its last revision,
//! and stops writing when a renewal is refused (the key lapsed and another store took it) or
//! when no renewal has succeeded for a whole time to live. A store waiting for the key (a
//! standby) tries again until the holder's key lapses or is released.
//!
//! A store that defers (its host writes the stream only when the host that should is not
//! there) hands the lease over when that host comes back and claims it.
//!
//! The lease says who should write; the fence says who can: the new holder's first message on
//! the stream (`jetstream.rs`, `fence`) moves the stream's last sequence, so an append from a
//! store that lost the lease without noticing yet (a paused process) carries an expected last
//! sequence the stream refuses.

use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::unavailable;
use crate::history::HistoryError;

/// Who may write a history stream, and for how long without renewing.
#[derive(Debug, Clone)]
pub struct LeaseOptions {
    /// This store's name in the lease (shown to a store waiting for it): host and process.
    pub owner: String,
    /// How long the lease outlives its last renewal: a dead writer's stream passes to a
    /// waiting store after about this long.
    pub ttl: Duration,
    /// Where this store's host serves its HTTP API, written in the lease so that a standby can
    /// forward requests to the writer (`http://10.0.0.1:7878`).
    pub address: Option<String>,
    /// While this store waits for the lease: the address the holder wrote (`None` while no
    /// holder gave one), updated as the holder changes.
    pub writer: Option<Arc<watch::Sender<Option<String>>>>,
    /// How long the lease must have been free — nobody holding it, seen again and again —
    /// before this store takes it: zero for a store whose stream this host should write (it
    /// takes a free lease at once), a time to live for a stream another host should write
    /// (this store takes it only when that host is not there to). Once this store has seen
    /// a holder, a quarter of it: the holder's lease lapsing was wait enough.
    pub defer: Duration,
}

/// What the lease's key holds: its holder and where that host serves.
#[derive(Debug, Serialize, Deserialize)]
struct Holder {
    owner: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    address: Option<String>,
}

impl Holder {
    fn of(options: &LeaseOptions) -> Vec<u8> {
        let holder = Self {
            owner: options.owner.clone(),
            address: options.address.clone(),
        };
        serde_json::to_vec(&holder).unwrap_or_default()
    }

    /// The holder written in `value` (a value not in this form names itself as the owner).
    fn read(value: &[u8]) -> Self {
        serde_json::from_slice(value).unwrap_or_else(|_| Self {
            owner: String::from_utf8_lossy(value).into_owned(),
            address: None,
        })
    }
}

impl LeaseOptions {
    /// A lease for this process (`host:pid`) with time to live `ttl`.
    pub fn this_process(ttl: Duration) -> Self {
        Self {
            owner: format!("{}:{}", host_name(), std::process::id()),
            ttl,
            address: None,
            writer: None,
            defer: Duration::ZERO,
        }
    }
}

/// This machine's name: `$HOSTNAME`, else `/etc/hostname`, else `localhost`.
pub fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The least a deferring store waits, once it has seen a holder, before taking a free lease.
const DEFER_AFTER_HOLDER: Duration = Duration::from_millis(100);

/// The key of the lease in its bucket.
const KEY: &str = "writer";

/// The key a store that writes the stream first (no `defer`) puts while another holds the
/// lease: a holder that deferred hands the lease over at its next renewal. It expires with
/// the bucket's time to live unless put again.
const CLAIM: &str = "claim";

/// A lease held: the bucket, its revision, and the epoch (the revision it was taken at).
pub(super) struct Lease {
    kv: kv::Store,
    revision: u64,
    options: LeaseOptions,
    stream: String,
}

impl Lease {
    /// Takes the lease on `stream`, waiting while another store holds it.
    pub(super) async fn take(
        js: &jetstream::Context,
        stream: &str,
        options: &LeaseOptions,
        replicas: usize,
    ) -> Result<Self, HistoryError> {
        let kv = bucket(js, stream, options.ttl, replicas).await?;
        let mut told = None::<String>;
        let pause = (options.ttl / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let mut free_since = None::<Instant>;
        let mut defer = options.defer;
        loop {
            if !defer.is_zero() {
                match look(&kv, &mut free_since, &mut defer, options.defer).await {
                    Look::Free { long_enough: true } => {}
                    // Held: what the look read is who holds it; no `create` to learn that.
                    Look::Held(holder) => {
                        tell(
                            options,
                            &mut told,
                            stream,
                            holder.owner,
                            Some(holder.address),
                        );
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                    Look::Free { long_enough: false } => {
                        // Nobody writes the stream now: no address to forward to.
                        if let Some(writer) = &options.writer {
                            writer.send_if_modified(|known| known.take().is_some());
                        }
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                    // Not read (a slow cluster): the writer last known stays the best guess.
                    Look::Unread => {
                        tokio::time::sleep(pause).await;
                        continue;
                    }
                }
            }
            match kv.create(KEY, Holder::of(options).into()).await {
                Ok(revision) => {
                    tracing::info!(stream, epoch = revision, "holding the writer's lease");
                    if options.defer.is_zero()
                        && let Err(e) = kv.delete(CLAIM).await
                    {
                        // It expires with the bucket's time to live: a deferring holder may
                        // then hand over to this host once more, which is harmless.
                        tracing::warn!(stream, error = %e, "cannot withdraw the claim on the lease");
                    }
                    // No writer serves until this host does (it replays first): it publishes
                    // its own address then; forwarding to itself before would loop.
                    if let Some(writer) = &options.writer {
                        writer.send_replace(None);
                    }
                    return Ok(Self {
                        kv,
                        revision,
                        options: options.clone(),
                        stream: stream.to_owned(),
                    });
                }
                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => {
                    if options.defer.is_zero()
                        && let Err(e) = kv
                            .put(CLAIM, options.owner.clone().into_bytes().into())
                            .await
                    {
                        tracing::warn!(stream, error = %e, "cannot claim the lease from its holder; trying again");
                    }
                    let (holder, address) = holder(&kv).await;
                    tell(options, &mut told, stream, holder, address);
                }
                Err(e) => {
                    tracing::warn!(stream, error = %e, "cannot reach the lease bucket; trying again");
                }
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// The lease's epoch: the bucket revision it was taken at (rises with every holder).
    pub(super) fn epoch(&self) -> u64 {
        self.revision
    }

    /// The host waiting to write the stream first, when this store holds the lease only
    /// because that host was not there (it deferred), and that host is back.
    async fn claimed(&self) -> Option<String> {
        if self.options.defer.is_zero() {
            return None;
        }
        match self.kv.get(CLAIM).await {
            Ok(Some(claimant)) => Some(String::from_utf8_lossy(&claimant).into_owned()),
            _ => None,
        }
    }

    /// Renews the lease until the store is gone (then releases it) or the lease is lost (then
    /// `failed` says why, and the store takes no more writes).
    pub(super) fn keep(self, failed: &Arc<OnceLock<String>>) {
        let failed = Arc::downgrade(failed);
        tokio::spawn(self.renew(failed));
    }

    async fn renew(mut self, failed: Weak<OnceLock<String>>) {
        // Every third of the time to live from the last renewal's start, not from its end: a
        // slow answer (a loaded host, a busy cluster) must not stretch the period towards the
        // lapse. A tick missed while a renewal was slow is not made up in a burst.
        let mut ticks = tokio::time::interval(self.options.ttl / 3);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        let mut renewed = Instant::now();
        let mut handing_over = false;
        loop {
            ticks.tick().await;
            if failed.upgrade().is_none() {
                // The store was dropped: let a standby in at once rather than after the lapse.
                let _ = self
                    .kv
                    .delete_expect_revision(KEY, Some(self.revision))
                    .await;
                return;
            }
            // The claim is read alongside the renewal, not after it: one round trip a period.
            // The lease counts from before the renewal was sent: the server may renew it any
            // time after.
            let sent = Instant::now();
            let (updated, claimant) = tokio::join!(
                self.kv
                    .update(KEY, Holder::of(&self.options).into(), self.revision),
                async {
                    if handing_over {
                        None
                    } else {
                        self.claimed().await
                    }
                }
            );
            let why = match updated {
                Ok(revision) => {
                    self.revision = revision;
                    renewed = sent;
                    let Some(claimant) = claimant else {
                        continue;
                    };
                    // Handed over: this store takes no more writes now, and keeps the lease
                    // until it is dropped (its pump stopped), so that the claimant does not
                    // deliver what this host's pump is still delivering.
                    let why = format!(
                        "handed the writer's lease on the history stream `{}` to {claimant}, which writes it first; this store takes no more writes",
                        self.stream
                    );
                    tracing::warn!(reason = %why, "the history stream stopped taking writes");
                    if let Some(failed) = failed.upgrade() {
                        let _ = failed.set(why);
                    }
                    handing_over = true;
                    continue;
                }
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                    // A renewal whose acknowledgement was lost still moved the revision on:
                    // the key holding this store's own value at a newer revision is still ours.
                    match self.kv.entry(KEY).await {
                        Ok(Some(entry))
                            if entry.operation == kv::Operation::Put
                                && Holder::read(&entry.value).owner == self.options.owner =>
                        {
                            self.revision = entry.revision;
                            renewed = sent;
                            continue;
                        }
                        _ => format!(
                            "lost the writer's lease on the history stream `{}` (it lapsed and {} holds it); this store takes no more writes",
                            self.stream,
                            holder(&self.kv).await.0
                        ),
                    }
                }
                Err(e) if renewed.elapsed() < self.options.ttl => {
                    tracing::warn!(stream = %self.stream, error = %e, "cannot renew the writer's lease; trying again");
                    continue;
                }
                Err(e) => format!(
                    "could not renew the writer's lease on the history stream `{}` for {:?}: {e}; this store takes no more writes",
                    self.stream, self.options.ttl
                ),
            };
            tracing::error!(reason = %why, "the history stream stopped taking writes");
            if let Some(failed) = failed.upgrade() {
                let _ = failed.set(why);
            }
            return;
        }
    }
}

/// A waiting store learnt who holds the lease: the holder's address (`None` when it could not
/// be read) goes to `writer`, and the holder to the log when it changed.
fn tell(
    options: &LeaseOptions,
    told: &mut Option<String>,
    stream: &str,
    holder: String,
    address: Option<Option<String>>,
) {
    if let (Some(writer), Some(address)) = (&options.writer, address) {
        writer.send_if_modified(|known| {
            let changed = *known != address;
            known.clone_from(&address);
            changed
        });
    }
    if told.as_ref() != Some(&holder) {
        tracing::warn!(
            stream,
            %holder,
            "standby: another store writes the history stream; waiting for its lease to lapse"
        );
        *told = Some(holder);
    }
}

/// What a look at the lease found.
enum Look {
    /// Nobody holds it; `long_enough`: nobody has for the whole `defer`.
    Free { long_enough: bool },
    /// Someone holds it, as its key says.
    Held(Holder),
    /// The bucket did not answer.
    Unread,
}

/// Looks at the lease, counting how long it has been free on successive looks (`since`: when
/// it was first seen free in the current run of looks). Seen held, `defer` drops to a quarter
/// of `first`: the holder's lease lapsing will have been wait enough.
async fn look(
    kv: &kv::Store,
    since: &mut Option<Instant>,
    defer: &mut Duration,
    first: Duration,
) -> Look {
    match kv.get(KEY).await {
        Ok(None) => Look::Free {
            long_enough: since.get_or_insert_with(Instant::now).elapsed() >= *defer,
        },
        Ok(Some(value)) => {
            *since = None;
            *defer = (first / 4).max(DEFER_AFTER_HOLDER).min(first);
            Look::Held(Holder::read(&value))
        }
        Err(_) => {
            *since = None;
            Look::Unread
        }
    }
}

/// Who holds the lease now, as it says, and where it serves (`None` when the bucket did not
/// answer: where is then unknown, not nowhere).
async fn holder(kv: &kv::Store) -> (String, Option<Option<String>>) {
    match kv.get(KEY).await {
        Ok(Some(value)) => {
            let holder = Holder::read(&value);
            (holder.owner, Some(holder.address))
        }
        Ok(None) => ("nobody (it just lapsed)".to_owned(), Some(None)),
        Err(e) => (format!("an unknown holder ({e})"), None),
    }
}

/// The lease bucket of `stream`, created when missing: entries expire `ttl` after their last
/// write. The bucket's stream is made here, as the key-value convention lays it out
/// (`KV_<bucket>`, subjects `$KV.<bucket>.>`, one message per key): the client's own bucket
/// creation first asks for account details that the 2.9 servers of distributions do not give in
/// the form it reads.
async fn bucket(
    js: &jetstream::Context,
    stream: &str,
    ttl: Duration,
    replicas: usize,
) -> Result<kv::Store, HistoryError> {
    let name = format!("agentpump-lease-{stream}");
    let failed = |e: &dyn std::fmt::Display| {
        unavailable(format!("cannot open the lease bucket `{name}`: {e}"))
    };
    if let Ok(kv) = js.get_key_value(&name).await {
        return Ok(kv);
    }
    let config = jetstream::stream::Config {
        name: format!("KV_{name}"),
        subjects: vec![format!("$KV.{name}.>")],
        max_messages_per_subject: 1,
        max_age: ttl,
        duplicate_window: ttl,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        discard: jetstream::stream::DiscardPolicy::New,
        storage: jetstream::stream::StorageType::File,
        num_replicas: replicas.max(1),
        ..Default::default()
    };
    js.get_or_create_stream(config)
        .await
        .map_err(|e| failed(&e))?;
    js.get_key_value(&name).await.map_err(|e| failed(&e))
}
