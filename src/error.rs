//! [`Error`]: one error type for a program that uses the library and wants `?` to work across
//! its parts.

use crate::history::AuditError;
use crate::history::HistoryError;
use crate::listener::RegistrationError;
use crate::pump::{BuildError, ControlError, IngressError};
use crate::thread::StateError;
use crate::{EnvelopeError, IdError, extract::ExtractError};

/// Any error the library returns to its caller: each module's own error, converted by `?`.
///
/// Every variant is transparent: its message and `source()` are those of the module's error,
/// which stays reachable by matching (`Error::Ingress(e) => e.code()`).
///
/// # Example
///
/// ```
/// use agentpump::{PumpBuilder, QName, Registration, ThreadId, listeners::Echo};
///
/// async fn greet() -> Result<(), agentpump::Error> {
///     let pump = PumpBuilder::new()
///         .register(Registration::new("echo", Echo).accepts(QName::new("urn:example:echo", "say")))
///         .build()?; // BuildError
///     let receipt = pump.post(None, None, r#"<say xmlns="urn:example:echo">hi</say>"#).await?; // IngressError
///     pump.settle(receipt.thread()).await;
///     assert_eq!(pump.history(receipt.thread()).await?.len(), 2); // HistoryError
///     let not_an_id = "sess-1".parse::<ThreadId>(); // IdError
///     assert!(matches!(not_an_id.map_err(agentpump::Error::from), Err(agentpump::Error::Id(_))));
///     Ok(())
/// }
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), agentpump::Error> {
/// # greet().await }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An envelope or payload does not parse, or breaks a limit.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    /// A string is not a thread or message id.
    #[error(transparent)]
    Id(#[from] IdError),
    /// A string is not a thread state.
    #[error(transparent)]
    State(#[from] StateError),
    /// Listener or model text holds something that looks like a payload and is not one.
    #[error(transparent)]
    Extract(#[from] ExtractError),
    /// A registration is invalid or clashes with another.
    #[error(transparent)]
    Registration(#[from] RegistrationError),
    /// The pump could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The pump refused outside input (boxed: it holds the recorded answer).
    #[error(transparent)]
    Ingress(Box<IngressError>),
    /// A thread cannot be stopped or resumed.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// The history store failed.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// A halting report does not agree with the recorded history.
    #[error(transparent)]
    Audit(#[from] AuditError),
}

impl From<IngressError> for Error {
    fn from(e: IngressError) -> Self {
        Self::Ingress(Box::new(e))
    }
}
