//! [`Record`]: one entry of history, and [`NewRecord`], what the pump hands the store.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::{Envelope, EnvelopeError, Limits, MessageId, Payload, QName, ThreadId};

/// What a record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecordKind {
    /// A payload accepted for delivery to a listener.
    Message,
    /// A payload that left the pump for a client (a reply to an outside sender).
    Egress,
    /// A message the pump emitted (system namespace).
    System,
    /// A governor decision (governor namespace): halt, goal, carve-out, resume.
    Decision,
}

impl RecordKind {
    /// The kind as written in exports and in the hash chain.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Message => "message",
            Self::Egress => "egress",
            Self::System => "system",
            Self::Decision => "decision",
        }
    }
}

impl fmt::Display for RecordKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A record before the store has given it a sequence number, time and digest.
#[derive(Debug, Clone)]
pub struct NewRecord {
    /// The message.
    pub envelope: Envelope,
    /// What it is.
    pub kind: RecordKind,
    /// True when it waits in a queue for delivery (cleared by the delivery's commit).
    pub pending: bool,
}

/// One entry of history: a message the pump accepted (or refused, or sent out), with where it
/// belongs and its place in its thread's hash chain. Plain data; read it field by field.
///
/// # Example
///
/// ```
/// # use agentpump::{PumpBuilder, Registration, QName, history::RecordKind, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let say = QName::new("urn:example:say:v1", "say");
/// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say.clone())).build()?;
/// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
/// pump.settle(thread).await;
/// let records = pump.history(thread).await?;
/// let (post, answer) = (&records[0], &records[1]);
/// assert_eq!((&*post.from, post.to.as_deref(), post.kind), ("client", Some("echo"), RecordKind::Message));
/// assert_eq!((&*answer.from, answer.to.as_deref(), answer.kind), ("echo", Some("client"), RecordKind::Egress));
/// assert_eq!((answer.root.clone(), answer.in_reply_to), (say, Some(post.id)));
/// assert!(post.seq < answer.seq && answer.thread == thread);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Sequence number: unique in the store, starting at 1, rising in acceptance order within
    /// the thread. Across threads the SQLite and JetStream stores number in their one commit
    /// order; the in-memory store gives each OS thread blocks of numbers, so across threads on a
    /// multi-threaded runtime its order is acceptance order within a window of 128 records
    /// (`docs/history.md`).
    pub seq: u64,
    /// When it was accepted, microseconds since the Unix epoch.
    pub time_us: i64,
    /// What it is.
    pub kind: RecordKind,
    /// The thread it belongs to.
    pub thread: ThreadId,
    /// The message id.
    pub id: MessageId,
    /// The sender.
    pub from: Arc<str>,
    /// The addressee (a listener, or `client`), if any.
    pub to: Option<Arc<str>>,
    /// The message it answers, if any.
    pub in_reply_to: Option<MessageId>,
    /// The payload's root.
    pub root: QName,
    /// The payload's exact bytes.
    pub payload: Arc<str>,
    /// `sha256(previous digest of the thread ‖ canonical bytes of this record)`.
    #[serde(with = "hex::serde")]
    pub digest: [u8; 32],
}

impl Record {
    /// Rebuilds the envelope of this record (a restarted pump re-queues accepted messages).
    ///
    /// # Errors
    ///
    /// An [`EnvelopeError`] when the stored payload no longer parses under `limits`.
    pub fn to_envelope(&self, limits: &Limits) -> Result<Envelope, EnvelopeError> {
        let payload = Payload::parse(&self.payload, limits)?;
        Ok(Envelope::new(Arc::clone(&self.from), self.thread, payload)
            .with_id(self.id)
            .with_to(self.to.clone())
            .with_in_reply_to(self.in_reply_to))
    }

    /// Builds a record from a new one; the digest is computed by [`Record::seal`].
    pub(crate) fn from_new(new: &NewRecord, seq: u64, time_us: i64) -> Self {
        let env = &new.envelope;
        Self {
            seq,
            time_us,
            kind: new.kind,
            thread: env.thread(),
            id: env.id(),
            from: Arc::clone(env.from_shared()),
            to: env.to_shared().cloned(),
            in_reply_to: env.in_reply_to(),
            root: env.payload().qname().clone(),
            payload: env.payload().to_shared(),
            digest: [0; 32],
        }
    }

    /// Computes this record's digest chained from `previous` and stores it.
    pub(crate) fn seal(&mut self, previous: &[u8; 32]) {
        self.digest = self.chained_digest(previous);
    }

    /// The digest this record must have when the thread's previous digest is `previous`.
    ///
    /// The canonical bytes are the fields in this order — seq, time_us, kind, thread, id, from,
    /// to (empty if none), in_reply_to (empty if none), root (Clark notation), payload — each
    /// written as its byte length, `:`, the bytes, and `\n`. The length prefixes make the
    /// encoding injective: no bytes can move from one field to another without changing the digest.
    pub fn chained_digest(&self, previous: &[u8; 32]) -> [u8; 32] {
        // The previous digest and every field but the payload are gathered and hashed in one
        // piece: the hasher's per-call work, not the bytes, was most of the cost of these
        // short fields.
        let (ns, local) = (
            self.root.namespace().as_bytes(),
            self.root.local().as_bytes(),
        );
        let to = self.to.as_deref().unwrap_or("").as_bytes();
        // The previous digest, then each field: the fixed ones (numbers, kind, ids, prefixes)
        // fit in 64 bytes each; the named ones add their lengths.
        let room = 32 + 9 * 64 + self.from.len() + to.len() + ns.len() + local.len();
        let mut head = Canonical(Vec::with_capacity(room));
        head.0.extend_from_slice(previous);
        let mut uuid = [0u8; 36];
        head.field(&[Digits::new().unsigned(self.seq)]);
        head.field(&[Digits::new().signed(self.time_us)]);
        head.field(&[self.kind.as_str().as_bytes()]);
        head.field(&[hyphenated(self.thread.as_uuid(), &mut uuid)]);
        head.field(&[hyphenated(self.id.as_uuid(), &mut uuid)]);
        head.field(&[self.from.as_bytes()]);
        head.field(&[to]);
        let reply = match &self.in_reply_to {
            Some(id) => hyphenated(id.as_uuid(), &mut uuid),
            None => b"",
        };
        head.field(&[reply]);
        if ns.is_empty() {
            head.field(&[local]);
        } else {
            head.field(&[b"{", ns, b"}", local]);
        }
        // The payload, which may be large, goes to the hasher as it is.
        let payload = self.payload.as_bytes();
        head.prefix(payload.len());
        let mut h = Sha256::new();
        h.update(&head.0);
        h.update(payload);
        h.update(b"\n");
        h.finalize().into()
    }
}

/// Canonical bytes being gathered: each field its length in decimal, `:`, its bytes (given in
/// parts), `\n`.
struct Canonical(Vec<u8>);

impl Canonical {
    fn field(&mut self, parts: &[&[u8]]) {
        self.prefix(parts.iter().map(|p| p.len()).sum());
        for part in parts {
            self.0.extend_from_slice(part);
        }
        self.0.push(b'\n');
    }

    /// A field's length and `:`.
    fn prefix(&mut self, len: usize) {
        self.0.extend_from_slice(Digits::new().unsigned(len as u64));
        self.0.push(b':');
    }
}

/// A UUID in its hyphenated lower-case form, as `Display` writes it.
fn hyphenated<'a>(uuid: &uuid::Uuid, buf: &'a mut [u8; 36]) -> &'a [u8] {
    uuid.hyphenated().encode_lower(buf).as_bytes()
}

/// Room to write an integer in decimal, as `Display` writes it, without the formatting machinery.
struct Digits([u8; 20]);

impl Digits {
    fn new() -> Self {
        Self([0; 20])
    }

    fn unsigned(&mut self, value: u64) -> &[u8] {
        let start = self.write(value);
        &self.0[start..]
    }

    /// An `i64`: its magnitude, with `-` in front when negative (`i64::MIN` included).
    fn signed(&mut self, value: i64) -> &[u8] {
        let mut start = self.write(value.unsigned_abs());
        if value < 0 {
            start -= 1;
            self.0[start] = b'-';
        }
        &self.0[start..]
    }

    /// Writes `value` right-aligned (u64::MAX has 20 digits, so a sign still fits before it
    /// whenever the value came from an i64); returns where it starts.
    fn write(&mut self, mut value: u64) -> usize {
        let mut at = self.0.len();
        loop {
            at -= 1;
            self.0[at] = b'0' + (value % 10) as u8;
            value /= 10;
            if value == 0 {
                return at;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The canonical bytes exactly as [`Record::chained_digest`] documents them, written the
    /// plain way with `format!`.
    fn documented_digest(r: &Record, previous: &[u8; 32]) -> [u8; 32] {
        let fields = [
            r.seq.to_string(),
            r.time_us.to_string(),
            r.kind.as_str().to_owned(),
            r.thread.to_string(),
            r.id.to_string(),
            r.from.to_string(),
            r.to.as_deref().unwrap_or("").to_owned(),
            r.in_reply_to.map(|id| id.to_string()).unwrap_or_default(),
            r.root.to_string(),
            r.payload.to_string(),
        ];
        let mut h = Sha256::new();
        h.update(previous);
        for f in fields {
            h.update(format!("{}:{f}\n", f.len()));
        }
        h.finalize().into()
    }

    #[test]
    fn the_digest_is_the_documented_one_for_every_field_shape() {
        let base = Record {
            seq: 1,
            time_us: 1_763_000_000_123_456,
            kind: RecordKind::Message,
            thread: ThreadId::new(),
            id: MessageId::new(),
            from: Arc::from("client"),
            to: Some(Arc::from("echo")),
            in_reply_to: Some(MessageId::new()),
            root: QName::new("urn:x:v1", "say"),
            payload: Arc::from("<say xmlns=\"urn:x:v1\">héllo</say>"),
            digest: [0; 32],
        };
        let shapes = [
            base.clone(),
            Record {
                seq: u64::MAX,
                time_us: -42,
                kind: RecordKind::Egress,
                to: None,
                in_reply_to: None,
                root: QName::new("", "bare"),
                payload: Arc::from(""),
                ..base.clone()
            },
            Record {
                time_us: i64::MIN,
                ..base.clone()
            },
            Record {
                seq: 0,
                time_us: 0,
                kind: RecordKind::Decision,
                from: Arc::from(""),
                ..base.clone()
            },
            // Long fields, and a payload larger than a hasher block.
            Record {
                from: Arc::from("f".repeat(700)),
                root: QName::new("urn:".repeat(200), "long"),
                payload: Arc::from("p".repeat(100_000)),
                ..base.clone()
            },
        ];
        for previous in [[0u8; 32], [0xab; 32]] {
            for r in &shapes {
                assert_eq!(
                    r.chained_digest(&previous),
                    documented_digest(r, &previous),
                    "{r:?}"
                );
            }
        }
    }
}
