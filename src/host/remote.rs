//! The CLI against a running host (`--url`): send, stop, resume, and the inspection commands,
//! over the HTTP API.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::history::ThreadPage;
use crate::history::page::MAX_PAGE;
use crate::host::HostError;
use crate::host::inspect::{self, HistoryFormat, ThreadsFormat};
use crate::{ThreadId, ThreadInfo};

/// How long connecting to the host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one request may take, answer included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest one wait of `send --wait` asks the host for (`GET /threads/{id}/settled`),
/// well inside [`REQUEST_TIMEOUT`]; a longer `--wait` asks again.
const WAIT_CHUNK: Duration = Duration::from_secs(60);
/// How often a request answered `503 standby` (or, for a read, `502`) is sent again, and how
/// long apart (its `Retry-After`): a host learns a partition's new writer within a second or
/// so.
const STANDBY_TRIES: usize = 10;
const STANDBY_PAUSE: Duration = Duration::from_secs(1);

/// Whether `response` is a standby's `503` with `Retry-After` (no writer known yet).
fn standby(response: &reqwest::Response) -> bool {
    response.status() == reqwest::StatusCode::SERVICE_UNAVAILABLE
        && response
            .headers()
            .contains_key(reqwest::header::RETRY_AFTER)
}

/// `text` percent-encoded for a query value (everything but RFC 3986 unreserved characters).
pub(super) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The token in `token_file` when given (its error if it cannot be read), else in the first
/// of `agentpump.token` here and the files the host at `url` may have recorded.
fn token_from_files(url: &str, token_file: Option<PathBuf>) -> Result<String, HostError> {
    let read = |file: &std::path::Path| {
        std::fs::read_to_string(file)
            .map(|t| t.trim().to_owned())
            .map_err(|e| format!("{}: {e}", file.display()))
    };
    if let Some(file) = token_file {
        return read(&file)
            .map_err(|e| HostError::usage(format!("no token: cannot read --token-file ({e})")));
    }
    let mut looked = Vec::new();
    let files = std::iter::once(PathBuf::from("agentpump.token"))
        .chain(super::known_hosts::candidates(url));
    for file in files {
        match read(&file) {
            Ok(token) if !token.is_empty() => return Ok(token),
            Ok(_) => looked.push(format!("{} (empty)", file.display())),
            Err(_) => looked.push(file.display().to_string()),
        }
    }
    Err(HostError::usage(format!(
        "no token for {url}: pass --token, set AGENTPUMP_TOKEN, or point --token-file at the host's token (agentpump run prints where it is); looked in {}",
        looked.join(", ")
    )))
}

/// Where a running host is and how to authenticate.
#[derive(Debug, Clone)]
pub struct Host {
    url: String,
    token: String,
}

impl Host {
    /// The host at `url`; the token from `token`, else `AGENTPUMP_TOKEN`, else `token_file`,
    /// else `agentpump.token` in the current directory, else the token the host at `url`
    /// recorded in the user's state directory ([`known_hosts`](super::known_hosts)).
    ///
    /// # Errors
    ///
    /// No token can be found: the message names every place looked in.
    pub fn new(
        url: &str,
        token: Option<String>,
        token_file: Option<PathBuf>,
    ) -> Result<Self, HostError> {
        let token = match token
            .or_else(|| std::env::var("AGENTPUMP_TOKEN").ok())
            .filter(|t| !t.is_empty())
        {
            Some(t) => t,
            None => token_from_files(url, token_file)?,
        };
        Ok(Self {
            url: url.trim_end_matches('/').to_owned(),
            token,
        })
    }

    pub(super) fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<String, HostError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(HostError::System)?;
        runtime.block_on(async {
            let url = format!("{}{path}", self.url);
            let client = crate::listeners::llm::http_client()
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(REQUEST_TIMEOUT)
                .build()
                .map_err(|e| HostError::http(format!("cannot make an HTTP client: {e}"), e))?;
            let mut tries = 0;
            let response = loop {
                let mut request = client
                    .request(method.clone(), &url)
                    .bearer_auth(&self.token);
                if let Some(body) = &body {
                    request = request.body(body.clone());
                }
                let response = request.send().await;
                // A host that does not know a partition's writer yet says when to ask again; a
                // read whose writer did not answer (`502`: its partition is changing hands) is
                // asked again too (a write is not: it may have reached the writer).
                let moving = |r: &reqwest::Response| {
                    method == reqwest::Method::GET
                        && r.status() == reqwest::StatusCode::BAD_GATEWAY
                };
                match response {
                    Ok(r) if (standby(&r) || moving(&r)) && tries < STANDBY_TRIES => {
                        tries += 1;
                        tokio::time::sleep(STANDBY_PAUSE).await;
                    }
                    other => break other,
                }
            };
            let response = response.map_err(|e| {
                let message = if e.is_connect() {
                    format!(
                        "no agentpump host answers at {} ({e}): start it with `agentpump run`, or pass --url to where it runs",
                        self.url
                    )
                } else {
                    format!("cannot reach {url}: {e}")
                };
                HostError::http(message, e)
            })?;
            let status = response.status();
            let text = response
                .text()
                .await
                .map_err(|e| HostError::http(format!("{url}: {e}"), e))?;
            if status.is_success() {
                return Ok(text);
            }
            let problem: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            Err(HostError::Remote(
                match (problem["detail"].as_str(), problem["code"].as_str()) {
                    (Some(detail), Some(code)) => {
                        format!("{detail} ({code}, HTTP {})", status.as_u16())
                    }
                    _ => format!("{url}: HTTP {status}"),
                },
            ))
        })
    }

    /// The full id of the thread `text` names on the host: an id, a unique prefix of one, or a
    /// displayed path (`46a2acab.part1`).
    pub(super) fn resolve(&self, text: &str) -> Result<ThreadId, HostError> {
        if let Ok(id) = text.parse() {
            return Ok(id);
        }
        let list = self.call(reqwest::Method::GET, "/threads", None)?;
        let threads: Vec<crate::ThreadInfo> = serde_json::from_str(&list).map_err(|e| {
            HostError::http(
                format!("{}: the host's thread list is unreadable: {e}", self.url),
                e,
            )
        })?;
        super::resolve::resolve(&threads, text, &self.url)
    }

    /// Sends a file's envelope or payload, into `thread` or a new thread; with `wait`, waits up
    /// to that long for the thread to settle and adds what happened after the message.
    ///
    /// # Errors
    ///
    /// The file cannot be read, or the host refuses the message (its problem detail).
    pub fn send(
        &self,
        file: &Path,
        thread: Option<&str>,
        to: Option<&str>,
        wait: Option<Duration>,
    ) -> Result<String, HostError> {
        let body = if file == Path::new("-") {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
                .map_err(HostError::System)?;
            bytes
        } else {
            std::fs::read(file).map_err(|e| HostError::io(file, e))?
        };
        let query = to.map(|t| format!("?to={}", encode(t))).unwrap_or_default();
        let path = match thread {
            Some(text) => format!("/threads/{}/messages{query}", self.resolve(text)?),
            None => format!("/threads{query}"),
        };
        let receipt = self.call(reqwest::Method::POST, &path, Some(body))?;
        let Some(patience) = wait else {
            return Ok(receipt + "\n");
        };
        let answer: serde_json::Value = serde_json::from_str(&receipt)
            .map_err(|e| HostError::http(format!("{}: unreadable receipt: {e}", self.url), e))?;
        let thread = answer["thread"]
            .as_str()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| HostError::Http {
                message: format!("{}: the receipt names no thread: {receipt}", self.url),
                source: None,
            })?;
        let transcript = self
            .wait(thread, answer["ids"][0].as_str(), patience)
            .map_err(|e| accepted_but(e, receipt.trim()))?;
        Ok(format!("{receipt}\n{transcript}"))
    }

    /// Stops a thread.
    ///
    /// # Errors
    ///
    /// The host refuses (unknown thread, already closed).
    pub fn stop(&self, thread: &str) -> Result<String, HostError> {
        let thread = self.resolve(thread)?;
        self.call(
            reqwest::Method::POST,
            &format!("/threads/{thread}/stop"),
            None,
        )
        .map(|_| format!("thread {thread} is stopping\n"))
    }

    /// Prunes the host's history before `before_us` (`POST /history/prune`).
    ///
    /// # Errors
    ///
    /// The host refuses (its problem detail) or cannot be reached.
    pub fn prune(&self, before_us: i64) -> Result<String, HostError> {
        let body = serde_json::json!({ "before": crate::history::export::rfc3339(before_us) });
        let answer = self.call(
            reqwest::Method::POST,
            "/history/prune",
            Some(body.to_string().into_bytes()),
        )?;
        let pruned: crate::history::Pruned = serde_json::from_str(&answer).map_err(|e| {
            HostError::http(
                format!("{}: the host's prune answer is unreadable: {e}", self.url),
                e,
            )
        })?;
        Ok(super::retention::render(&self.url, &pruned))
    }

    /// Resumes a halted thread with `budget` (JSON) added.
    ///
    /// # Errors
    ///
    /// The host refuses (unknown thread, not halted).
    pub fn resume(
        &self,
        thread: &str,
        budget: &crate::governor::Budget,
    ) -> Result<String, HostError> {
        let thread = self.resolve(thread)?;
        let body = serde_json::to_vec(&crate::host::server::bodies::BudgetBody::from(budget))
            .map_err(|e| HostError::http(format!("cannot write the budget: {e}"), e))?;
        self.call(
            reqwest::Method::POST,
            &format!("/threads/{thread}/resume"),
            Some(body),
        )
        .map(|_| format!("thread {thread} resumed\n"))
    }

    /// The root threads in `state` the host's search finds for `text`, every page read.
    fn roots_matching(
        &self,
        state: Option<&str>,
        text: &str,
    ) -> Result<Vec<ThreadInfo>, HostError> {
        let mut query = format!("/view/threads?q={}&limit={}", encode(text), MAX_PAGE);
        if let Some(state) = state {
            query.push_str(&format!("&state={}", encode(state)));
        }
        let mut found = Vec::new();
        let mut before = String::new();
        loop {
            let page: ThreadPage = self.json(&format!("{query}{before}"))?;
            found.extend(page.threads.into_iter().map(|t| t.info));
            match page.next {
                Some(next) => before = format!("&before={next}"),
                None => return Ok(found),
            }
        }
    }

    /// Lists threads, printed as the `threads` command prints them from a file; with `search`,
    /// the root threads the host's search finds (`GET /view/threads?q=`).
    ///
    /// # Errors
    ///
    /// The host cannot be reached or refuses.
    pub fn threads(
        &self,
        state: Option<&str>,
        search: Option<&str>,
        format: ThreadsFormat,
    ) -> Result<String, HostError> {
        let threads = match search {
            Some(text) => self.roots_matching(state, text)?,
            None => {
                let query = state
                    .map(|s| format!("?state={}", encode(s)))
                    .unwrap_or_default();
                self.json(&format!("/threads{query}"))?
            }
        };
        let mut reports = Vec::new();
        if format == ThreadsFormat::Text {
            for t in threads
                .iter()
                .filter(|t| t.state == crate::ThreadState::Halted)
            {
                reports.extend(self.reports(t.id)?);
            }
        }
        Ok(inspect::render_threads(
            &threads,
            &inspect::halts_of(reports),
            format,
        ))
    }

    /// Every halting report of `thread`, oldest first.
    fn reports(&self, thread: ThreadId) -> Result<Vec<crate::governor::HaltingReport>, HostError> {
        let text = self.call(
            reqwest::Method::GET,
            &format!("/threads/{thread}/reports"),
            None,
        )?;
        serde_json::from_str(&text)
            .map_err(|e| HostError::http(format!("{}: unreadable reports: {e}", self.url), e))
    }

    /// One JSON document from `path`.
    pub(super) fn json<T: serde::de::DeserializeOwned>(&self, path: &str) -> Result<T, HostError> {
        let text = self.call(reqwest::Method::GET, path, None)?;
        serde_json::from_str(&text)
            .map_err(|e| HostError::http(format!("{}{path}: unreadable answer: {e}", self.url), e))
    }

    /// Every record of every thread the host keeps, printed as from a file.
    ///
    /// # Errors
    ///
    /// The host cannot be reached or refuses.
    pub fn whole_history(&self, format: HistoryFormat) -> Result<String, HostError> {
        let threads: Vec<ThreadInfo> = self.json("/threads")?;
        let mut records: Vec<crate::history::Record> = Vec::new();
        for t in &threads {
            records.extend(self.json::<Vec<_>>(&format!("/threads/{}/history?format=json", t.id))?);
        }
        Ok(inspect::render_all(records, format))
    }

    /// A thread's history (with `tree`, its whole subtree), printed as from a file.
    ///
    /// # Errors
    ///
    /// The host cannot be reached or refuses.
    pub fn history(
        &self,
        thread: &str,
        format: HistoryFormat,
        tree: bool,
    ) -> Result<String, HostError> {
        let thread = self.resolve(thread)?;
        let threads: Vec<crate::ThreadInfo> = if tree {
            self.json(&format!("/threads/{thread}/tree"))?
        } else {
            vec![self.json(&format!("/threads/{thread}"))?]
        };
        let mut records: Vec<crate::history::Record> = Vec::new();
        for t in &threads {
            records.extend(self.json::<Vec<_>>(&format!("/threads/{}/history?format=json", t.id))?);
        }
        Ok(inspect::render_tree(
            &threads,
            &records,
            &inspect::Cuts::new(),
            format,
        ))
    }

    /// Every thread's hash chain, recomputed here from the records the host serves. A thread
    /// whose older records were pruned chains from an anchor the API does not serve: its
    /// records are vouched for by the host's own check (the viewer's integrity), said as such.
    ///
    /// # Errors
    ///
    /// The host cannot be reached, or a chain breaks (naming the thread and record).
    pub fn verify(&self) -> Result<String, HostError> {
        let threads: Vec<crate::ThreadInfo> = self.json("/threads")?;
        let (mut checked, mut anchored) = (0u64, 0usize);
        for t in &threads {
            let path = format!("/threads/{}/history?format=json", t.id);
            let records: Vec<crate::history::Record> = self.json(&path)?;
            match crate::history::verify_chain(&records) {
                Ok(n) => checked += n,
                Err(b) if records.first().is_some_and(|r| r.seq == b.seq) => {
                    let view: serde_json::Value = self.json(&format!("/view/threads/{}", t.id))?;
                    let integrity = &view["integrity"];
                    if integrity["verified"] != true {
                        return Err(HostError::Remote(format!(
                            "{}: {b}; the host's own check: {}",
                            self.url,
                            integrity["detail"].as_str().unwrap_or("not verified")
                        )));
                    }
                    checked += integrity["records"].as_u64().unwrap_or_default();
                    anchored += 1;
                }
                Err(b) => return Err(HostError::Remote(format!("{}: {b}", self.url))),
            }
        }
        let mut text = format!(
            "{}: {checked} records of {} threads verified, every chain intact\n",
            self.url,
            threads.len()
        );
        if anchored > 0 {
            text.push_str(&format!(
                "{anchored} of them pruned: their first record chains from a prune anchor the API does not serve; the host verified those from their anchors\n"
            ));
        }
        Ok(text)
    }

    /// `verify --certificates` against the host: every halt re-derived from its thread's
    /// records, read twice over the API, as from a file (`inspect::verify_certificates`).
    ///
    /// # Errors
    ///
    /// The host cannot be reached, or a halt the records do not support (each one named).
    pub fn verify_certificates(&self) -> Result<String, HostError> {
        let threads: Vec<crate::ThreadInfo> = self.json("/threads")?;
        let mut halted = Vec::new();
        for thread in threads {
            let reports = self.reports(thread.id)?;
            if reports.is_empty() {
                continue;
            }
            let path = format!("/threads/{}/history?format=json", thread.id);
            let reads = [self.json(&path)?, self.json(&path)?];
            halted.push((thread, reports, reads));
        }
        super::inspect::certificates_agree(&self.url, halted)
    }

    /// Every halting report of a thread, as a JSON array (oldest first), as from a file.
    ///
    /// # Errors
    ///
    /// The host cannot be reached, or the thread has not halted.
    pub fn report(&self, thread: &str) -> Result<String, HostError> {
        let thread = self.resolve(thread)?;
        let reports = self.reports(thread)?;
        if reports.is_empty() {
            return Err(HostError::usage(format!(
                "thread {thread} has no halting report"
            )));
        }
        Ok(serde_json::to_string_pretty(&reports).expect("reports serialize") + "\n")
    }

    /// Waits until `thread` has settled — it and every thread below it have nothing left to do,
    /// children on other pumps included — up to `patience`, then returns its records after
    /// `after` (the sent message) as a transcript.
    ///
    /// # Errors
    ///
    /// The host cannot be reached, or the thread is still working after `patience`.
    pub fn wait(
        &self,
        thread: ThreadId,
        after: Option<&str>,
        patience: Duration,
    ) -> Result<String, HostError> {
        let deadline = std::time::Instant::now() + patience;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let ms = left.min(WAIT_CHUNK).as_millis();
            let waited: serde_json::Value =
                self.json(&format!("/threads/{thread}/settled?wait_ms={ms}"))?;
            if waited["settled"] == true {
                break;
            }
            if std::time::Instant::now() >= deadline {
                return Err(HostError::Unsettled(format!(
                    "thread {thread} has not settled after {} s (it, or a thread below it, still has work); follow it with `agentpump history {thread}`",
                    patience.as_secs()
                )));
            }
        }
        let records: Vec<crate::history::Record> =
            self.json(&format!("/threads/{thread}/history?format=json"))?;
        let start = after
            .and_then(|id| records.iter().position(|r| r.id.to_string() == id))
            .unwrap_or(0);
        Ok(crate::history::export::transcript(&records[start..], 0))
    }
}

/// A wait that failed after the host accepted the message: the receipt said with the failure
/// (the thread goes on), and a host without `GET /threads/{id}/settled` named as older.
fn accepted_but(failed: HostError, receipt: &str) -> HostError {
    let said = |why: &str| {
        let why = if why.contains("(unknown-url, HTTP 404)") {
            format!("the host is an agentpump older than this command and cannot wait ({why})")
        } else {
            why.to_owned()
        };
        format!("the message was accepted ({receipt}), but waiting for it failed: {why}")
    };
    match failed {
        HostError::Remote(why) => HostError::Remote(said(&why)),
        HostError::Http { message, source } => HostError::Http {
            message: said(&message),
            source,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::{HostError, accepted_but, encode};

    #[test]
    fn a_failed_wait_keeps_the_receipt_and_names_an_older_host() {
        let receipt = r#"{"thread":"t","ids":["m"]}"#;
        let older = HostError::Remote(
            "no such URL `/threads/t/settled`; the routes are in docs/http-api.md (unknown-url, HTTP 404)".into(),
        );
        let said = accepted_but(older, receipt).to_string();
        assert!(said.starts_with(&format!("the message was accepted ({receipt}), but waiting for it failed: the host is an agentpump older than this command and cannot wait")), "{said}");
        let unsettled = HostError::Unsettled("thread t has not settled".into());
        assert_eq!(
            accepted_but(unsettled, receipt).to_string(),
            "thread t has not settled"
        );
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode("scripted-ping_1.x~"), "scripted-ping_1.x~");
        assert_eq!(encode("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
    }
}
