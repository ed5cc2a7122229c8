//! Ready-made Rust listeners.

mod echo;

pub use echo::Echo;
