//! The host: the `agentpump` command line. Thin: `main` calls [`cli::run`], which parses the
//! arguments and hands each command to its own module.

pub mod check;
pub mod cli;
pub mod cluster;
mod courier;
pub mod demo;
pub mod error;
pub mod inbox;
pub mod inspect;
pub mod known_hosts;
pub mod mcp;
pub mod organism;
mod partitions;
pub mod process_check;
pub mod process_run;
pub mod remote;
mod resolve;
pub mod retention;
pub mod run;
pub mod server;
pub mod tasks;
pub mod view;

pub use error::HostError;
