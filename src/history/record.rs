//! [`Record`]: one entry of history, and [`NewRecord`], what the pump hands the store.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::{Envelope, MessageId, QName, ThreadId};

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

/// One entry of history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Global sequence number, starting at 1, in acceptance order.
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
            to: env.to().map(Arc::from),
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
        use std::fmt::Write as _;
        let mut h = Sha256::new();
        h.update(previous);
        let field = |h: &mut Sha256, text: &str| {
            let mut len = itoa_buffer();
            let _ = write!(len, "{}:", text.len());
            h.update(len.as_bytes());
            h.update(text.as_bytes());
            h.update(b"\n");
        };
        let mut buf = String::with_capacity(64);
        let mut formatted = |h: &mut Sha256, value: &dyn std::fmt::Display| {
            buf.clear();
            let _ = write!(buf, "{value}");
            field(h, &buf);
        };
        formatted(&mut h, &self.seq);
        formatted(&mut h, &self.time_us);
        field(&mut h, self.kind.as_str());
        formatted(&mut h, &self.thread);
        formatted(&mut h, &self.id);
        field(&mut h, &self.from);
        field(&mut h, self.to.as_deref().unwrap_or(""));
        match self.in_reply_to {
            Some(id) => formatted(&mut h, &id),
            None => field(&mut h, ""),
        }
        formatted(&mut h, &self.root);
        field(&mut h, &self.payload);
        h.finalize().into()
    }
}

/// A small reusable buffer for formatting a length.
fn itoa_buffer() -> String {
    String::with_capacity(24)
}
