//! [`QName`]: the routing key of a payload (namespace URI + local name, never the prefix).

use std::cell::RefCell;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// A namespace-qualified element name. Two payloads with the same namespace URI and local name
/// route the same way whatever prefix they were written with.
///
/// # Example
///
/// ```
/// use agentpump::{Limits, Payload, QName};
/// let add = QName::new("urn:example:calc:v1", "add");
/// let written = Payload::parse(r#"<c:add xmlns:c="urn:example:calc:v1"/>"#, &Limits::default())?;
/// assert_eq!(written.qname(), &add); // the prefix `c` is not part of the name
/// assert_eq!((add.namespace(), add.local()), ("urn:example:calc:v1", "add"));
/// assert_eq!("{urn:example:calc:v1}add".parse::<QName>()?, add); // Clark notation
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QName {
    namespace: Arc<str>,
    local: Arc<str>,
}

impl QName {
    /// Creates a name from a namespace URI (empty for no namespace) and a local name.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::QName;
    /// let add = QName::new("urn:example:calc:v1", "add");
    /// assert_eq!(add.to_string(), "{urn:example:calc:v1}add");
    /// ```
    pub fn new(namespace: impl AsRef<str>, local: impl AsRef<str>) -> Self {
        Self {
            namespace: Arc::from(namespace.as_ref()),
            local: Arc::from(local.as_ref()),
        }
    }

    /// The same as [`QName::new`], but shared with the names recently made on this OS thread:
    /// the roots of payloads repeat, and a repeat costs no allocation.
    pub(crate) fn recent(namespace: &str, local: &str) -> Self {
        if namespace.len() + local.len() > Recent::MAX_BYTES {
            return Self::new(namespace, local);
        }
        let shared = RECENT.try_with(|cell| {
            let Ok(mut recent) = cell.try_borrow_mut() else {
                return Self::new(namespace, local);
            };
            if let Some(name) = recent.names.iter().find(|n| n.is(namespace, local)) {
                return name.clone();
            }
            let name = Self::new(namespace, local);
            // Round robin: a stream of ever new names (hostile input) keeps at most
            // `Recent::SIZE` of them alive.
            let next = recent.next;
            if next < recent.names.len() {
                recent.names[next] = name.clone();
            } else {
                recent.names.push(name.clone());
            }
            recent.next = (next + 1) % Recent::SIZE;
            name
        });
        // Only while this OS thread is being torn down is there no cache.
        shared.unwrap_or_else(|_| Self::new(namespace, local))
    }

    /// The namespace URI, empty when the element is in no namespace.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::QName;
    /// assert_eq!(QName::new("urn:example:v1", "add").namespace(), "urn:example:v1");
    /// assert_eq!(QName::new("", "add").namespace(), ""); // no namespace
    /// ```
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The local name.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::QName;
    /// assert_eq!(QName::new("urn:example:v1", "add").local(), "add");
    /// ```
    pub fn local(&self) -> &str {
        &self.local
    }

    /// True when both parts equal the given ones (no allocation).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::QName;
    /// let add = QName::new("urn:example:v1", "add");
    /// assert!(add.is("urn:example:v1", "add"));
    /// assert!(!add.is("urn:example:v2", "add"));
    /// ```
    pub fn is(&self, namespace: &str, local: &str) -> bool {
        &*self.namespace == namespace && &*self.local == local
    }
}

/// The names [`QName::recent`] hands out again.
#[derive(Default)]
struct Recent {
    names: Vec<QName>,
    /// Where the next new name goes once `names` is full.
    next: usize,
}

impl Recent {
    const SIZE: usize = 32;
    /// Longer names are not kept: 32 names of at most this many bytes each, per OS thread.
    const MAX_BYTES: usize = 256;
}

thread_local! {
    static RECENT: RefCell<Recent> = RefCell::new(Recent::default());
}

impl fmt::Display for QName {
    /// Clark notation: `{namespace}local`, or just `local` without a namespace.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.local)
        } else {
            write!(f, "{{{}}}{}", self.namespace, self.local)
        }
    }
}

impl FromStr for QName {
    type Err = std::convert::Infallible;

    /// Reads Clark notation: `{namespace}local` or `local`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.strip_prefix('{').and_then(|r| r.rsplit_once('}')) {
            Some((namespace, local)) => Self::new(namespace, local),
            None => Self::new("", s),
        })
    }
}

impl serde::Serialize for QName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for QName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(text.parse().unwrap_or_else(|never| match never {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_names_are_shared_and_never_mixed_up() {
        let a = QName::recent("urn:a", "x");
        let again = QName::recent("urn:a", "x");
        assert!(
            Arc::ptr_eq(&a.namespace, &again.namespace),
            "a repeat is shared"
        );
        // Same local name in another namespace, and the reverse: distinct names.
        assert_eq!(QName::recent("urn:b", "x"), QName::new("urn:b", "x"));
        assert_eq!(QName::recent("", "x"), QName::new("", "x"));
        // More names than the cache holds: each still comes back right, and the cache stays
        // bounded.
        for i in 0..Recent::SIZE * 3 {
            let local = format!("n{i}");
            assert_eq!(
                QName::recent("urn:many", &local),
                QName::new("urn:many", &local)
            );
        }
        RECENT.with(|r| assert_eq!(r.borrow().names.len(), Recent::SIZE));
        assert_eq!(QName::recent("urn:a", "x"), a);
        // A long name is made, not kept: hostile URIs cannot pin memory in the cache.
        let long = "u".repeat(Recent::MAX_BYTES);
        assert_eq!(QName::recent(&long, "x"), QName::new(&long, "x"));
        let kept = RECENT.with(|r| r.borrow().names.iter().any(|n| n.namespace() == long));
        assert!(!kept);
    }
}
