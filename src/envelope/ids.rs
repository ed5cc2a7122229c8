//! Typed identifiers: [`MessageId`] (UUID v7, time-ordered) and [`ThreadId`] (UUID v4).

use std::fmt;
use std::str::FromStr;

use uuid::timestamp::context::{ContextV7, ThreadLocalContext};
use uuid::{Timestamp, Uuid};

/// Identifier of one message, assigned by the pump (UUID v7, so ids sort by creation time: to
/// the millisecond, and exactly among the ids one OS thread made).
///
/// # Example
///
/// ```
/// use agentpump::MessageId;
/// let (first, second) = (MessageId::new(), MessageId::new());
/// assert!(first < second); // sorts by creation time
/// assert_eq!(first.to_string().parse::<MessageId>()?, first);
/// # Ok::<(), agentpump::IdError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId(Uuid);

/// Identifier of one thread (UUID v4).
///
/// # Example
///
/// ```
/// use agentpump::ThreadId;
/// let id: ThreadId = "6f1c2a3b-9d4e-4f00-8a1b-2c3d4e5f6a7b".parse()?;
/// assert_eq!(id.to_string(), "6f1c2a3b-9d4e-4f00-8a1b-2c3d4e5f6a7b");
/// assert!("6f1c".parse::<ThreadId>().is_err());
/// # Ok::<(), agentpump::IdError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(Uuid);

/// A string that is not a UUID where an id was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a UUID")]
pub struct IdError(String);

thread_local! {
    /// The v7 counter of this OS thread: `Uuid::now_v7` shares one behind a process-wide mutex,
    /// which every message would take.
    static V7: ContextV7 = const { ContextV7::new() };
}

/// A fresh v7 UUID from this OS thread's counter.
fn message_uuid() -> Uuid {
    Uuid::new_v7(Timestamp::now(ThreadLocalContext::new(&V7)))
}

macro_rules! uuid_newtype {
    ($name:ident, $new:expr) => {
        impl $name {
            /// Creates a fresh identifier.
            ///
            /// # Example
            ///
            /// ```
            /// use agentpump::{MessageId, ThreadId};
            /// assert_ne!(ThreadId::new(), ThreadId::new()); // random (v4)
            /// let (a, b) = (MessageId::new(), MessageId::new());
            /// assert!(a < b); // time-ordered (v7)
            /// ```
            pub fn new() -> Self {
                Self($new)
            }

            /// Wraps an existing UUID.
            ///
            /// # Example
            ///
            /// ```
            /// use agentpump::{MessageId, ThreadId};
            /// let thread = ThreadId::new();
            /// assert_eq!(ThreadId::from_uuid(*thread.as_uuid()), thread);
            /// let id = MessageId::new();
            /// assert_eq!(MessageId::from_uuid(*id.as_uuid()), id);
            /// ```
            pub const fn from_uuid(uuid: Uuid) -> Self {
                Self(uuid)
            }

            /// The UUID inside.
            ///
            /// # Example
            ///
            /// ```
            /// use agentpump::{MessageId, ThreadId};
            /// assert_eq!(ThreadId::new().as_uuid().get_version_num(), 4);
            /// assert_eq!(MessageId::new().as_uuid().get_version_num(), 7);
            /// ```
            pub const fn as_uuid(&self) -> &Uuid {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.hyphenated().fmt(f)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            fn from_str(s: &str) -> Result<Self, IdError> {
                Uuid::parse_str(s.trim())
                    .map(Self)
                    .map_err(|_| IdError(s.to_owned()))
            }
        }
    };
}

uuid_newtype!(MessageId, message_uuid());
uuid_newtype!(ThreadId, Uuid::new_v4());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_text() {
        let id = ThreadId::new();
        assert_eq!(id.to_string().parse::<ThreadId>(), Ok(id));
        assert!("sess-abcd".parse::<MessageId>().is_err());
    }

    #[test]
    fn message_ids_sort_by_creation() {
        let ids: Vec<MessageId> = (0..10_000).map(|_| MessageId::new()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "strictly rising");
        assert!(ids.iter().all(|id| id.as_uuid().get_version_num() == 7));
        // Another OS thread's ids, made later, sort after these (to the millisecond).
        std::thread::sleep(std::time::Duration::from_millis(2));
        let later = std::thread::spawn(MessageId::new).join().unwrap();
        assert!(ids.last().is_some_and(|last| *last < later));
    }
}
