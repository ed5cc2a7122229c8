//! [`Limits`]: the size and shape bounds every message and payload is checked against.

/// Bounds applied to every envelope and payload, from outside or from a listener.
///
/// The defaults are safe for a public endpoint and generous for agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest message in bytes (default 1 MiB).
    pub max_bytes: usize,
    /// Deepest element nesting, counting the envelope's own elements (default 64).
    pub max_depth: usize,
    /// Most attributes (namespace declarations included) on one element (default 64).
    pub max_attributes: usize,
    /// Most payloads one listener delivery may output (default 64).
    pub max_outputs: usize,
}

impl Limits {
    /// Default for [`Limits::max_bytes`].
    pub const DEFAULT_MAX_BYTES: usize = 1 << 20;
    /// Default for [`Limits::max_depth`].
    pub const DEFAULT_MAX_DEPTH: usize = 64;
    /// Default for [`Limits::max_attributes`].
    pub const DEFAULT_MAX_ATTRIBUTES: usize = 64;
    /// Default for [`Limits::max_outputs`].
    pub const DEFAULT_MAX_OUTPUTS: usize = 64;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_depth: Self::DEFAULT_MAX_DEPTH,
            max_attributes: Self::DEFAULT_MAX_ATTRIBUTES,
            max_outputs: Self::DEFAULT_MAX_OUTPUTS,
        }
    }
}
