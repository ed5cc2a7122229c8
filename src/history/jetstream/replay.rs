//! Rebuilding the index from the stream, message by message, checking that it rebuilds what
//! was written: every record's number and digest, every prune mark's anchors, and that every
//! gap in the stream — a message deleted — is one a prune mark lists.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use futures_util::StreamExt as _;

use super::retention::{self, Kept, PruneMark};
use super::{JetStreamOptions, PART, Sealed, Wire};
use crate::history::memory::Sealing;
use crate::history::{HistoryError, MemoryHistory};
use crate::{Limits, ThreadId};

/// Why a replay stopped: the stream could not be read (worth another try while the cluster
/// elects a leader), or a message of it is not what was written.
enum Stopped {
    Read(String),
    Bad(HistoryError),
}

fn read_error(e: impl std::fmt::Display) -> Stopped {
    Stopped::Read(format!("cannot read the history stream: {e}"))
}

/// What a replay of the stream found besides the index.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// The stream's last sequence.
    pub last: u64,
    /// What its messages hold, for the writer's next prunes.
    pub kept: Kept,
    /// Messages (parts) prune marks list as unneeded that are still there, to delete.
    pub gone: Vec<u64>,
}

/// The index rebuilt from every message of `stream`, and what else the replay found; a read
/// that fails is tried again from the start while patience lasts.
pub(super) async fn rebuild(
    stream: &stream::Stream,
    options: &JetStreamOptions,
) -> Result<(MemoryHistory, Found), HistoryError> {
    let until = Instant::now() + options.patience;
    loop {
        let index = MemoryHistory::serial();
        match replay(stream, &index, options).await {
            Ok(found) => return Ok((index, found)),
            Err(Stopped::Bad(e)) => return Err(e),
            Err(Stopped::Read(e)) if Instant::now() < until => {
                tracing::info!(error = %e, "reading the history stream again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(Stopped::Read(e)) => return Err(HistoryError::query(e)),
        }
    }
}

/// A message in parts being put together: its bytes so far, its parts' sequences, and the
/// part expected next (`i`, of `n`).
#[derive(Default)]
struct Pieces {
    bytes: Vec<u8>,
    seqs: Vec<u64>,
    next: (u64, u64),
}

/// Where a replay stands: what it saw and what it must account for at the end.
#[derive(Default)]
struct Replay {
    found: Found,
    pieces: Pieces,
    /// Every sequence read, in order.
    seen: Vec<u64>,
    /// Parts of messages in parts whose other parts are not there (dropped: deleted by a
    /// prune, which leaves gaps a mark lists, or never written).
    fragments: Vec<u64>,
    /// Every sequence a prune mark lists as unneeded.
    listed: HashSet<u64>,
    /// Threads with a record that did not chain from what the replay had (a record before it
    /// deleted), and the first message holding one: checked again at the end, from anchors.
    resealed: BTreeMap<ThreadId, u64>,
}

/// Applies every message of `stream` to `index`, in order, then checks that what the stream
/// lacks is what its prune marks deleted.
async fn replay(
    stream: &stream::Stream,
    index: &MemoryHistory,
    options: &JetStreamOptions,
) -> Result<Found, Stopped> {
    let mut stream = stream.clone();
    let info = stream.info().await.map_err(read_error)?;
    let (last, expected) = (info.state.last_sequence, info.state.messages);
    let mut replay = Replay::default();
    replay.found.last = last;
    if expected == 0 {
        return Ok(replay.found);
    }
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::OrderedConfig {
            deliver_policy: jetstream::consumer::DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .map_err(read_error)?;
    let mut messages = consumer.messages().await.map_err(read_error)?;
    // Every message there when the replay began; a deleted one is a gap, and the last may be
    // one, so the count says when all came.
    let mut received = 0;
    while let Some(message) = messages.next().await {
        let message = message.map_err(read_error)?;
        let seq = message.info().map_err(read_error)?.stream_sequence;
        let part = message
            .headers
            .as_ref()
            .and_then(|h| h.get(PART))
            .and_then(|v| {
                v.as_str()
                    .split_once('/')
                    .map(|(i, n)| (i.parse(), n.parse()))
            })
            .and_then(|(i, n)| Some((i.ok()?, n.ok()?)));
        replay.seen.push(seq);
        if let Some(whole) = replay.piece(seq, part, &message.payload) {
            replay.message(index, options, whole, seq)?;
        }
        received += 1;
        if seq >= last || received >= expected {
            break;
        }
    }
    if received < expected {
        return Err(read_error(format!(
            "it ended after {received} of its {expected} messages"
        )));
    }
    replay.accounted(index, options)
}

impl Replay {
    /// Takes message `seq` (part `part` of a message in parts, if it is one): the whole
    /// message once it is complete (its parts' sequences and bytes). A part out of turn drops
    /// what was being put together, and itself if it cannot start a message, as fragments.
    fn piece(
        &mut self,
        seq: u64,
        part: Option<(u64, u64)>,
        payload: &[u8],
    ) -> Option<(Vec<u64>, Vec<u8>)> {
        let follows = part.is_some_and(|p| p == self.pieces.next && !self.pieces.seqs.is_empty());
        if !follows && !self.pieces.seqs.is_empty() {
            self.fragments.append(&mut self.pieces.seqs);
            self.pieces = Pieces::default();
        }
        match part {
            None => Some((vec![seq], payload.to_vec())),
            Some((i, n)) if i == 1 || follows => {
                self.pieces.bytes.extend_from_slice(payload);
                self.pieces.seqs.push(seq);
                self.pieces.next = (i + 1, n);
                (i == n).then(|| {
                    let pieces = std::mem::take(&mut self.pieces);
                    (pieces.seqs, pieces.bytes)
                })
            }
            Some(_) => {
                self.fragments.push(seq);
                None
            }
        }
    }

    /// Applies one whole message (its parts' sequences, its body) at stream sequence `seq`.
    fn message(
        &mut self,
        index: &MemoryHistory,
        options: &JetStreamOptions,
        (parts, body): (Vec<u64>, Vec<u8>),
        seq: u64,
    ) -> Result<(), Stopped> {
        let applied = apply(index, &body, &options.limits).map_err(|e| {
            Stopped::Bad(HistoryError::query(format!(
                "message {seq} of the history stream `{}`: {e}",
                options.stream
            )))
        })?;
        for thread in applied.resealed {
            self.resealed.entry(thread).or_insert(seq);
        }
        if applied.marks.is_empty() {
            self.found.kept.message(parts, applied.names);
        }
        for mark in &applied.marks {
            self.found.kept.placed(seq, mark);
            self.listed.extend(&mark.deleted);
        }
        Ok(())
    }

    /// The replay's end: every thread with a record taken as recorded chains from its anchor,
    /// every gap in the stream and every dropped fragment is listed by a prune mark, and every
    /// number handed out is a record held or pruned.
    fn accounted(
        mut self,
        index: &MemoryHistory,
        options: &JetStreamOptions,
    ) -> Result<Found, Stopped> {
        let name = &options.stream;
        let bad = |what: String| Stopped::Bad(HistoryError::query(what));
        // An append in parts that never completed (its writer stopped midway; it was never
        // acknowledged) is dropped. A part deleted is a gap, checked below.
        self.fragments.append(&mut self.pieces.seqs);
        let unlisted: Vec<u64> = self
            .fragments
            .iter()
            .copied()
            .filter(|s| !self.listed.contains(s))
            .collect();
        if !unlisted.is_empty() {
            tracing::warn!(parts = ?unlisted, stream = %name, "an append in parts that never completed (never acknowledged) is left out");
        }
        for (&thread, &at) in &self.resealed {
            if let Err(b) = index.verify_log(thread) {
                return Err(bad(format!(
                    "message {at} of the history stream `{name}`: record {} of thread {thread} does not chain from what is kept or anchored: the stream was altered",
                    b.seq
                )));
            }
        }
        // The sequences between those read (and after the last read) that no mark lists: the
        // first five.
        let mut unlisted = Vec::new();
        let mut previous = 0;
        for seq in self.seen.iter().copied().chain([self.found.last + 1]) {
            let gap = (previous + 1..seq).filter(|s| !self.listed.contains(s));
            unlisted.extend(gap.take(5 - unlisted.len()));
            previous = seq;
        }
        if !unlisted.is_empty() {
            return Err(bad(format!(
                "messages {unlisted:?} of the history stream `{name}` are missing, and no prune mark lists them: a message was deleted from it"
            )));
        }
        if let Some((accounted, numbered)) = index.unaccounted() {
            return Err(bad(format!(
                "the history stream `{name}` numbered {numbered} records, and holds or pruned {accounted}: a message was deleted from it that no prune removed"
            )));
        }
        // What marks list that is still there (a deletion that failed, or never ran).
        let listed = &self.listed;
        self.found.gone = self
            .seen
            .iter()
            .copied()
            .filter(|s| listed.contains(s))
            .collect();
        Ok(self.found)
    }
}

/// What one stream message held: what its appends name, its prune marks, and the threads of
/// its records that did not chain from what the replay had.
#[derive(Debug, Default)]
struct Applied {
    names: Vec<(ThreadId, u64)>,
    marks: Vec<PruneMark>,
    resealed: Vec<ThreadId>,
}

/// Applies one message read back from the stream, checking it rebuilds what was recorded.
fn apply(index: &MemoryHistory, body: &[u8], limits: &Limits) -> Result<Applied, String> {
    let group: Vec<Wire> =
        serde_json::from_slice(body).map_err(|e| format!("not a group of appends: {e}"))?;
    let mut applied = Applied::default();
    for (i, wire) in group.into_iter().enumerate() {
        apply_one(index, wire, limits, &mut applied)
            .map_err(|e| format!("append {} of it: {e}", i + 1))?;
    }
    Ok(applied)
}

/// Applies one append of a group: a prune mark as the index's removal (each anchor checked
/// against what it removes), else its records.
fn apply_one(
    index: &MemoryHistory,
    mut wire: Wire,
    limits: &Limits,
    applied: &mut Applied,
) -> Result<(), String> {
    if let Some(mark) = wire.prune.take() {
        index.remove(&mark.anchors, &mark.carried)?;
        // The records numbered before the mark may all have been deleted since.
        index.skip_to(mark.numbered);
        applied.marks.push(mark);
        return Ok(());
    }
    let names = retention::names(&wire);
    let threads: Vec<ThreadId> = wire.records.iter().map(|r| r.thread).collect();
    let marks_thread = wire.delivered.as_ref().map(|d| d.thread);
    let (batch, time_us, recorded) = wire.batch(limits)?;
    // Past messages a prune deleted, numbering goes on from the first recorded number (never
    // back: a number below the next one is not what was written).
    if let Some((first, _)) = recorded.first() {
        index.skip_to(first.saturating_sub(1));
    }
    let mut sealing = Sealing::default();
    index.append_at(batch, time_us, Some(&mut sealing));
    applied.names.extend(names);
    applied.names.extend(marks_thread.zip(sealing.marked));
    let mut sealed: Sealed = sealing
        .records
        .into_iter()
        .map(|(seq, digest)| (seq, hex::encode(digest)))
        .collect();
    // A record whose number is right and whose digest is not may chain from a record a prune
    // deleted: it takes the digest recorded, and its thread is checked from its anchor once
    // the replay is over.
    for (i, (rebuilt, written)) in sealed.iter_mut().zip(&recorded).enumerate() {
        if rebuilt.0 == written.0 && rebuilt.1 != written.1 {
            let digest = <[u8; 32]>::try_from(hex::decode(&written.1).unwrap_or_default())
                .map_err(|_| format!("record {} of it has no digest", i + 1))?;
            index.reseal(threads[i], written.0, digest);
            applied.resealed.push(threads[i]);
            rebuilt.1.clone_from(&written.1);
        }
    }
    if sealed != recorded {
        let at = sealed
            .iter()
            .zip(&recorded)
            .position(|(a, b)| a != b)
            .unwrap_or(sealed.len().min(recorded.len()));
        return Err(format!(
            "its records do not rebuild as recorded (record {} of it: rebuilt {:?}, recorded {:?}): the stream was altered",
            at + 1,
            sealed.get(at),
            recorded.get(at)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `messages` (sequence, part) to a replay; the whole messages' parts, and the
    /// fragments dropped.
    fn pieced(messages: &[(u64, Option<(u64, u64)>)]) -> (Vec<Vec<u64>>, Vec<u64>) {
        let mut replay = Replay::default();
        let mut whole = Vec::new();
        for &(seq, part) in messages {
            if let Some((parts, _)) = replay.piece(seq, part, b"x") {
                whole.push(parts);
            }
        }
        replay.fragments.extend(replay.pieces.seqs);
        (whole, replay.fragments)
    }

    #[test]
    fn a_message_in_parts_missing_one_is_dropped_as_a_fragment_and_the_rest_goes_on() {
        // Whole, in parts and plain.
        assert_eq!(
            pieced(&[(1, Some((1, 2))), (2, Some((2, 2))), (3, None)]),
            (vec![vec![1, 2], vec![3]], vec![])
        );
        // Its last part deleted: the next message shows the first ones to be a fragment.
        assert_eq!(
            pieced(&[(1, Some((1, 3))), (2, Some((2, 3))), (4, None)]),
            (vec![vec![4]], vec![1, 2])
        );
        // Its first part deleted: the others cannot start a message.
        assert_eq!(
            pieced(&[
                (2, Some((2, 3))),
                (3, Some((3, 3))),
                (4, Some((1, 2))),
                (5, Some((2, 2)))
            ]),
            (vec![vec![4, 5]], vec![2, 3])
        );
        // Its middle part deleted, and the stream ends in the middle of one.
        assert_eq!(
            pieced(&[(1, Some((1, 3))), (3, Some((3, 3))), (4, Some((1, 2)))]),
            (vec![], vec![1, 3, 4])
        );
    }
}
