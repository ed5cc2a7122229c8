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

use std::sync::Arc;
use std::time::Duration;

use agentpump::PumpHandle;
use support::Scratch;

/// The demo organism on a SQLite history in `scratch`; with `used`, its demo threads run and
/// settled first (their payloads become the examples).
pub(crate) async fn demo(scratch: &Scratch, used: bool) -> PumpHandle {
    let agentpump = std::path::Path::new(env!("CARGO_BIN_EXE_agentpump"));
    let mut organism = agentpump::host::demo::organism(agentpump).unwrap();
    organism.set_base(&scratch.0);
    let store = organism.open_store_at(&scratch.db()).unwrap();
    let pump = organism
        .start_builder("listeners/demo/organism.toml")
        .await
        .unwrap()
        .history(Arc::new(store))
        .build()
        .unwrap();
    if used {
        for (_, to, payload) in agentpump::host::demo::STARTS {
            let root = pump.post(None, Some(to), payload).await.unwrap().thread();
            tokio::time::timeout(Duration::from_secs(30), pump.settle(root))
                .await
                .expect("demo thread settles");
        }
    }
    pump
}
