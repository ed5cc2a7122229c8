//! The process engine: runs the processes of an APS document on the pump, deterministically.
//!
//! A [`Program`] is a checked document with every process compiled to a flat list of
//! instructions. A [`ProcessListener`] is one of its processes registered as a listener: a
//! trigger's root (whose text matches the trigger's `pattern`, if it has one) or a tool call of
//! the process starts it in a thread; each `USE` leaves as a
//! tool call (`urn:agentpump:tool:v1`) and its answer is the next delivery; `PAR` children and
//! `RUN` run in child threads; `TELL`, `SNAP`, `MILESTONE`, `PAR`, `JOIN`, `RETURN` and a
//! failure are recorded as events of `urn:agentpump:process:v1`; the `RETURN` goes back to the
//! starter as a tool result. The state of a run is a function of its thread's history, so after
//! a restart it continues where it was without calling any answered tool again. A call's id is
//! its ordinal in the run and a hash of its tool and arguments (`newton-1-1db374db3c96`): a rerun
//! that asks, at a place history holds, for another call (the file or the input changed) fails
//! with `history-diverged` instead of reusing or repeating anything.

mod compile;
mod effects;
mod listener;
mod machine;
mod par;
mod privacy;
mod program;
mod replay;

pub use listener::{DEFAULT_STEPS_PER_TURN, ProcessListener, UnknownProcess};
pub use program::{Program, ProgramError};
pub use replay::slot as call_place;
