//! A fork proven against its source: what `agentpump verify` checks of every thread whose first
//! record is a `fork` decision — the record it names exists in the source with that chain
//! digest, the records carried as context are the source's, and the message delivered again is
//! the source's — or, when the decision says it was edited, the payload whose SHA-256 it names,
//! sent from the client.

use sha2::{Digest as _, Sha256};

use super::super::{Record, RecordKind};
use crate::ThreadId;
use crate::governor::{Decision, Fork, ForkMode};

/// Why a forked thread does not agree with the thread it names as its source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForkBreak {
    /// The source has no record with the seq the fork names.
    #[error("fork {fork}: source thread {origin} has no record {seq}")]
    Missing {
        /// The forked thread.
        fork: ThreadId,
        /// The source thread.
        origin: ThreadId,
        /// The seq named.
        seq: u64,
    },
    /// The source record's chain digest is not the one the fork decision names.
    #[error("fork {fork}: record {seq} of {origin} has digest {found}, the fork names {named}")]
    Digest {
        /// The forked thread.
        fork: ThreadId,
        /// The source thread.
        origin: ThreadId,
        /// The record forked from.
        seq: u64,
        /// The digest in the fork decision (hex).
        named: String,
        /// The record's digest now (hex).
        found: String,
    },
    /// A record of the fork is not the source record it was copied from.
    #[error("fork {fork}: record {record} is not record {seq} of {origin} it was copied from")]
    Copied {
        /// The forked thread.
        fork: ThreadId,
        /// The record of the fork.
        record: u64,
        /// The source thread.
        origin: ThreadId,
        /// The source record.
        seq: u64,
    },
    /// The message a fork delivered edited is not the one its decision names.
    #[error(
        "fork {fork}: record {record} is not the edited message the fork names (SHA-256 {named}, found {found})"
    )]
    Edited {
        /// The forked thread.
        fork: ThreadId,
        /// The record of the fork delivered again.
        record: u64,
        /// The SHA-256 (hex) the fork decision names.
        named: String,
        /// The SHA-256 (hex) of the record's payload, or `none` when the fork has no such
        /// record from the client.
        found: String,
    },
    /// The fork carries other records than the source's context before the record.
    #[error("fork {fork}: carries records {carried:?} of {origin}, its context is {context:?}")]
    Context {
        /// The forked thread.
        fork: ThreadId,
        /// The source thread.
        origin: ThreadId,
        /// The seqs the decision names.
        carried: Vec<u64>,
        /// The seqs of the source's records before the record that are carried ([`is_carried`]).
        context: Vec<u64>,
    },
}

/// Whether a source record before the fork point is carried into a fork as context: the
/// conversation, not the governor's own records — its decisions and the messages addressed to it
/// (goals, residuals, signals, plans) belong to the source's ledger. A restart replays a
/// thread's governor records, so leaving them out keeps a fork's ledger as fresh after a
/// restart as it was when it started.
pub fn is_carried(record: &Record) -> bool {
    record.kind != RecordKind::Decision && record.to.as_deref() != Some("governor")
}

/// The thread `records` (one thread's, in order) was forked from, if its first record is a
/// fork decision.
pub fn forked_from(records: &[Record]) -> Option<ThreadId> {
    decision(records).map(|f| f.source)
}

fn decision(records: &[Record]) -> Option<Fork> {
    let first = records.first().filter(|r| r.kind == RecordKind::Decision)?;
    match Decision::parse(&first.payload)? {
        Decision::Fork(fork) => Some(fork),
        _ => None,
    }
}

/// Checks a forked thread's records against its source's (both whole, in order). A thread that
/// is not a fork passes.
///
/// # Errors
///
/// The [`ForkBreak`] naming the first record that does not agree.
pub fn verify_fork(fork: &[Record], source: &[Record]) -> Result<(), ForkBreak> {
    let Some(named) = decision(fork) else {
        return Ok(());
    };
    let check = Check {
        fork,
        source,
        named: &named,
    };
    let chosen = check.find(named.at)?;
    let found = hex::encode(chosen.digest);
    if found != named.digest {
        return Err(ForkBreak::Digest {
            fork: fork[0].thread,
            origin: named.source,
            seq: named.at,
            named: named.digest.clone(),
            found,
        });
    }
    let delivered = match named.mode {
        ForkMode::Context => {
            check.context()?;
            chosen
        }
        ForkMode::FirstMessage => source
            .iter()
            .find(|r| r.kind == RecordKind::Message)
            .unwrap_or(chosen),
    };
    let at = 1 + named.carried.len();
    if let Some(edited) = &named.edited {
        return check.edited(at, edited);
    }
    // Delivered again from the client, to the listener chosen: the message itself is the same.
    check.same(at, delivered, |c, o| {
        (&c.root, &c.payload) == (&o.root, &o.payload)
    })
}

/// A fork being checked against its source.
struct Check<'a> {
    fork: &'a [Record],
    source: &'a [Record],
    named: &'a Fork,
}

impl<'a> Check<'a> {
    fn find(&self, seq: u64) -> Result<&'a Record, ForkBreak> {
        let found = self.source.iter().find(|r| r.seq == seq);
        found.ok_or(ForkBreak::Missing {
            fork: self.fork[0].thread,
            origin: self.named.source,
            seq,
        })
    }

    /// Whether the fork's record at position `at` is `original` by `same`.
    fn same(
        &self,
        at: usize,
        original: &Record,
        same: impl Fn(&Record, &Record) -> bool,
    ) -> Result<(), ForkBreak> {
        match self.fork.get(at) {
            Some(copy) if same(copy, original) => Ok(()),
            copy => Err(ForkBreak::Copied {
                fork: self.fork[0].thread,
                record: copy.map_or(0, |c| c.seq),
                origin: self.named.source,
                seq: original.seq,
            }),
        }
    }

    /// Whether the fork's record at position `at` is a message from the client whose payload has
    /// the SHA-256 `named` (hex): the edited message the decision names.
    fn edited(&self, at: usize, named: &str) -> Result<(), ForkBreak> {
        let record = self.fork.get(at).filter(|r| {
            r.kind == RecordKind::Message && &*r.from == crate::envelope::CLIENT_SENDER
        });
        let found = record.map_or_else(
            || "none".to_owned(),
            |r| hex::encode(Sha256::digest(r.payload.as_bytes())),
        );
        if found == named {
            return Ok(());
        }
        Err(ForkBreak::Edited {
            fork: self.fork[0].thread,
            record: record.map_or(0, |r| r.seq),
            named: named.to_owned(),
            found,
        })
    }

    /// The records a context fork carries: the source's context before the record
    /// ([`is_carried`]), each copied as it was (kind, sender, addressee, root, payload).
    fn context(&self) -> Result<(), ForkBreak> {
        let context: Vec<u64> = self
            .source
            .iter()
            .filter(|r| r.seq < self.named.at && is_carried(r))
            .map(|r| r.seq)
            .collect();
        if context != self.named.carried {
            return Err(ForkBreak::Context {
                fork: self.fork[0].thread,
                origin: self.named.source,
                carried: self.named.carried.clone(),
                context,
            });
        }
        for (i, &seq) in self.named.carried.iter().enumerate() {
            let original = self.find(seq)?;
            self.same(1 + i, original, |c, o| {
                (c.kind, &c.from, &c.to, &c.root, &c.payload)
                    == (o.kind, &o.from, &o.to, &o.root, &o.payload)
            })?;
        }
        Ok(())
    }
}
