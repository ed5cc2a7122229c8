//! The studio — the history viewer's pages — as a new user meets it (issue 47), one test binary
//! for its parts (each test file is a binary CI compiles and links):
//!
//! - `list`: the thread list says what each thread is, filters the waiting ones, and the
//!   header's Inbox link counts the requests waiting; the transcript reads an inbox request and
//!   its answer; every view opens at its top; nothing is clipped at 1 400 px.
//! - `compose`: every example the compose form offers is one its listener accepts.
//! - `organism`: the whole-organism graph, layered, its declared routes shown before traffic.
//! - `replay`: the replay form's listener choice and edited message; `replay_api`: the same
//!   through `POST /threads/{id}/fork` and `verify`.
//!
//! Headless Chromium with axe-core on each view: see tests/viewer.rs for what they need.

mod support;

#[path = "viewer/browser.rs"]
#[allow(dead_code)] // the `agentpump view` helper is tests/viewer.rs's
mod browser;

#[path = "studio/compose.rs"]
mod compose;
#[path = "studio/list.rs"]
mod list;
#[path = "studio/organism.rs"]
mod organism;
#[path = "studio/replay.rs"]
mod replay;
#[path = "studio/replay_api.rs"]
mod replay_api;
