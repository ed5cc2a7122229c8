//! [`QName`]: the routing key of a payload (namespace URI + local name, never the prefix).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// A namespace-qualified element name. Two payloads with the same namespace URI and local name
/// route the same way whatever prefix they were written with.
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

    /// The namespace URI, empty when the element is in no namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The local name.
    pub fn local(&self) -> &str {
        &self.local
    }

    /// True when both parts equal the given ones (no allocation).
    pub fn is(&self, namespace: &str, local: &str) -> bool {
        &*self.namespace == namespace && &*self.local == local
    }
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
