//! A failed handler: how it failed ([`Failure`]), and what applying the failure does — a notice
//! to the sender, or a halt for backpressure, the deadline or a budget with no room.

use super::Applying;
use crate::governor::{BudgetName, Verdict};
use crate::system::{ErrorCode, HuhCode, SystemMessage};

impl Applying<'_> {
    /// Reports a failed handler to the sender of the delivery, or halts on backpressure/deadline.
    pub(crate) fn fail(&mut self, failure: Failure) {
        let name = &self.shared.routes[self.me].name;
        tracing::warn!(thread = %self.entry.id, listener = %name, error = %failure.message, "handler failed");
        let notice = match failure.code {
            FailureCode::Error(code) => {
                self.inner.counters.failures += 1;
                self.tx.failed();
                SystemMessage::Error {
                    code,
                    message: failure.message,
                }
            }
            FailureCode::InvalidPayload => SystemMessage::Huh {
                code: HuhCode::InvalidPayload,
                message: failure.message,
                original: self.delivery.payload().as_str().to_owned(),
            },
            FailureCode::Backpressure => {
                self.signals
                    .halt
                    .get_or_insert(Verdict::backpressure("upstream"));
                return;
            }
            FailureCode::Deadline => {
                self.signals
                    .halt
                    .get_or_insert(Verdict::timeout(BudgetName::WallClock));
                return;
            }
            FailureCode::OverBudget(budget) => {
                self.signals.halt.get_or_insert(Verdict::timeout(budget));
                return;
            }
        };
        let to = self.shared.recipient_of(self.delivery.from(), self.me);
        let id = Some(self.delivery.id());
        self.shared
            .notice(&mut self.tx, self.entry, self.inner, to, notice, id);
    }
}

/// How a handler failed.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: FailureCode,
    pub message: String,
}

#[derive(Debug)]
pub(crate) enum FailureCode {
    Error(ErrorCode),
    InvalidPayload,
    Backpressure,
    /// The thread's wall-clock budget ran out during the handler.
    Deadline,
    /// The listener found no room for its next spend.
    OverBudget(BudgetName),
}

impl From<ErrorCode> for FailureCode {
    fn from(code: ErrorCode) -> Self {
        Self::Error(code)
    }
}
