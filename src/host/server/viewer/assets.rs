//! The page's files, embedded at build time from `assets/`: no CDN, no build step, works offline.
//! Each answer forbids framing and any script, style or connection from another origin.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("assets/index.html");
const CSS: &str = include_str!("assets/viewer.css");
const JS: &str = include_str!("assets/viewer.js");
const XML_JS: &str = include_str!("assets/xml.js");
const PLOT_JS: &str = include_str!("assets/plot.js");
const DOM_JS: &str = include_str!("assets/dom.js");
const PANELS_JS: &str = include_str!("assets/panels.js");
const PROCESS_JS: &str = include_str!("assets/process.js");
const TASKS_JS: &str = include_str!("assets/tasks.js");
const PLAN_JS: &str = include_str!("assets/plan.js");
const LOOP_JS: &str = include_str!("assets/loop.js");
const INBOX_JS: &str = include_str!("assets/inbox.js");
const TOTALS_JS: &str = include_str!("assets/totals.js");
const TIMING_JS: &str = include_str!("assets/timing.js");

/// Only this origin, no inline script, no frames.
const POLICY: &str = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// `GET /`.
pub(crate) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

/// `GET /viewer.css`.
pub(crate) async fn css() -> Response {
    asset("text/css; charset=utf-8", CSS)
}

/// `GET /viewer.js`: the page's module.
pub(crate) async fn js() -> Response {
    asset("text/javascript; charset=utf-8", JS)
}

/// `GET /xml.js`: pretty-printing and highlighting of payloads.
pub(crate) async fn xml_js() -> Response {
    asset("text/javascript; charset=utf-8", XML_JS)
}

/// `GET /plot.js`: the residual plot.
pub(crate) async fn plot_js() -> Response {
    asset("text/javascript; charset=utf-8", PLOT_JS)
}

/// `GET /dom.js`: DOM helpers.
pub(crate) async fn dom_js() -> Response {
    asset("text/javascript; charset=utf-8", DOM_JS)
}

/// `GET /panels.js`: the panels of a thread.
pub(crate) async fn panels_js() -> Response {
    asset("text/javascript; charset=utf-8", PANELS_JS)
}

/// `GET /process.js`: process events and tool calls in a transcript.
pub(crate) async fn process_js() -> Response {
    asset("text/javascript; charset=utf-8", PROCESS_JS)
}

/// `GET /tasks.js`: the tasks view.
pub(crate) async fn tasks_js() -> Response {
    asset("text/javascript; charset=utf-8", TASKS_JS)
}

/// `GET /plan.js`: plans as checklists.
pub(crate) async fn plan_js() -> Response {
    asset("text/javascript; charset=utf-8", PLAN_JS)
}

/// `GET /loop.js`: a loop thread's iterations and roles.
pub(crate) async fn loop_js() -> Response {
    asset("text/javascript; charset=utf-8", LOOP_JS)
}

/// `GET /inbox.js`: the inbox view (a person in the loop).
pub(crate) async fn inbox_js() -> Response {
    asset("text/javascript; charset=utf-8", INBOX_JS)
}

/// `GET /totals.js`: usage totals per thread and across threads.
pub(crate) async fn totals_js() -> Response {
    asset("text/javascript; charset=utf-8", TOTALS_JS)
}

/// `GET /timing.js`: the waterfall of a thread's deliveries.
pub(crate) async fn timing_js() -> Response {
    asset("text/javascript; charset=utf-8", TIMING_JS)
}
