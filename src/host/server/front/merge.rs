//! Lists over every partition: each partition's answer fetched and the lists merged into one,
//! as one host would have answered.
//!
//! `GET /threads` and `GET /inbox` are whole lists: concatenated (threads in path order).
//! `GET /view/totals` sums each partition's groups; `GET /view/organism` (without `?thread=`)
//! sums each partition's routes, counted over its own newest roots.
//! `POST /history/prune` prunes every partition in turn with the same cut and sums what went
//! (each partition's anchors chain on their own); a refusal stops it and is passed on, the
//! partitions before it pruned (a prune run again removes nothing twice).
//! `GET /view/threads` is paged: the front reads every partition's pages, orders the roots
//! oldest first by (start time, partition, the partition's own cursor), and numbers them 1, 2,
//! 3 …; that number is the merged list's cursor, and a page is the newest roots numbered below
//! `before`. A root that starts later usually takes the next number; one whose start time is
//! earlier than roots already numbered (another host's clock, a slow commit), or a filter
//! whose matches change meanwhile, shifts the numbers, and a later page repeats or skips one.
//! Every page reads every partition's roots: fine for a viewer's list, not for millions.

use axum::Json;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::{Front, Sent};
use crate::ThreadInfo;
use crate::history::export::rfc3339;
use crate::history::page::MAX_PAGE;
use crate::history::{Pruned, ThreadPage, ThreadSummary};
use crate::host::server::bodies::PruneCut;
use crate::host::server::problem::Problem;
use crate::host::server::viewer::{organism, totals};

/// A list the front merges.
#[derive(Debug, Clone, Copy)]
pub(super) enum List {
    /// `GET /threads`: thread snapshots.
    Threads,
    /// `GET /inbox`: the open requests.
    Inbox,
    /// `GET /view/threads`: a page of root threads.
    Roots,
    /// `POST /history/prune`: each partition pruned with the same cut, what went summed.
    Pruned,
    /// `GET /view/totals`: each partition's sums, summed per listener or day.
    Totals,
    /// `GET /view/organism` without `?thread=`: each partition's routes, summed.
    Organism,
}

/// `sent` answered from every partition, merged; or the first refusal, as it came.
pub(super) async fn every(front: &Front, list: List, sent: &Sent<'_>) -> Response {
    answered(front, list, sent)
        .await
        .unwrap_or_else(std::convert::identity)
}

async fn answered(front: &Front, list: List, sent: &Sent<'_>) -> Result<Response, Response> {
    match list {
        List::Threads => {
            let mut threads: Vec<ThreadInfo> = fetch_all::<Vec<ThreadInfo>>(front, sent)
                .await?
                .into_iter()
                .flatten()
                .collect();
            threads.sort_by(|a, b| a.path.cmp(&b.path));
            Ok(Json(threads).into_response())
        }
        List::Inbox => {
            let open: Vec<Value> = fetch_all::<Vec<Value>>(front, sent)
                .await?
                .into_iter()
                .flatten()
                .collect();
            Ok(Json(open).into_response())
        }
        List::Roots => roots(front, sent).await,
        List::Pruned => {
            // One cut for every partition: `keep_days` counted from now once, here.
            let sent = &Sent {
                body: one_cut(&sent.body),
                ..*sent
            };
            let mut total = Pruned::default();
            for pruned in fetch_all::<Pruned>(front, sent).await? {
                total.before_us = pruned.before_us;
                total.records += pruned.records;
                total.anchors.extend(pruned.anchors);
                total.partitions += 1;
            }
            Ok(Json(total).into_response())
        }
        List::Totals => {
            let answers = fetch_all::<totals::Across>(front, sent).await?;
            let query = sent.path.split_once('?').map(|(_, q)| q);
            let limit = super::query_value(query, "limit").and_then(|l| l.parse().ok());
            Ok(Json(totals::merged(answers, limit)).into_response())
        }
        List::Organism => {
            let answers = fetch_all::<organism::Organism>(front, sent).await?;
            Ok(Json(organism::merged(answers)).into_response())
        }
    }
}

/// Every partition's answer to `sent` read as `T`, in partition order; or the first answer to
/// pass on instead (see [`fetch`]).
async fn fetch_all<T: serde::de::DeserializeOwned>(
    front: &Front,
    sent: &Sent<'_>,
) -> Result<Vec<T>, Response> {
    let mut answers = Vec::with_capacity(front.writers.len());
    for partition in 0..front.writers.len() {
        answers.push(front.fetch::<T>(partition, sent).await?);
    }
    Ok(answers)
}

/// A prune's body with `{"keep_days": N}` made the time it names now (`{"before": …}`), so
/// every partition cuts at the same instant; any other body as it came (each partition
/// refuses a bad one the same way).
fn one_cut(body: &Bytes) -> Bytes {
    use crate::host::retention::{keep_days, now_us};
    let Ok(cut) = serde_json::from_slice::<PruneCut>(body) else {
        return body.clone();
    };
    match (cut.before, cut.keep_days) {
        (None, Some(days)) => {
            // Never before 1970 (the route's dates have four-digit years); nothing is older.
            let before = rfc3339(keep_days(now_us(), days).max(0));
            Bytes::from(serde_json::json!({ "before": before }).to_string())
        }
        _ => body.clone(),
    }
}

/// Where a root sits among every partition's: (start time, partition, its own cursor).
type Place = (Option<i64>, usize, u64);

/// The merged page of `GET /view/threads`.
async fn roots(front: &Front, sent: &Sent<'_>) -> Result<Response, Response> {
    let (path, query) = sent.path.split_once('?').unwrap_or((sent.path, ""));
    let mut before = None;
    let mut limit = 0usize;
    let mut kept = Vec::new();
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query)
        .map_err(|e| bad_query(format!("the query does not read: {e}")).into_response())?;
    for (key, value) in pairs {
        match key.as_str() {
            "before" => {
                before = Some(value.parse::<u64>().map_err(|_| {
                    bad_query(format!(
                        "`before={value}` is not a cursor (a whole number from a page's `next`)"
                    ))
                    .into_response()
                })?);
            }
            "limit" => {
                limit = value.parse().map_err(|_| {
                    bad_query(format!(
                        "`limit={value}` is not a page size (a whole number)"
                    ))
                    .into_response()
                })?;
            }
            _ => kept.push((key, value)),
        }
    }
    // Each root with its place: start time, partition, the partition's own cursor.
    let mut all: Vec<(Place, ThreadSummary)> = Vec::new();
    for partition in 0..front.writers.len() {
        let mut cursor = None::<u64>;
        loop {
            let mut pairs = kept.clone();
            pairs.push(("limit".to_owned(), MAX_PAGE.to_string()));
            if let Some(cursor) = cursor {
                pairs.push(("before".to_owned(), cursor.to_string()));
            }
            let query = serde_urlencoded::to_string(&pairs).unwrap_or_default();
            let path = format!("{path}?{query}");
            let page = Sent {
                method: sent.method,
                path: &path,
                headers: sent.headers,
                body: sent.body.clone(),
            };
            let page = front.fetch::<ThreadPage>(partition, &page).await?;
            for root in page.threads {
                all.push(((root.started_us, partition, root.cursor), root));
            }
            match page.next {
                Some(next) if cursor != Some(next) => cursor = Some(next),
                _ => break,
            }
        }
    }
    all.sort_by_key(|(place, _)| *place);
    let size = match limit {
        0 => 50,
        n => n.min(MAX_PAGE),
    };
    let mut numbered: Vec<ThreadSummary> = all
        .into_iter()
        .zip(1u64..)
        .map(|((_, mut root), number)| {
            root.cursor = number;
            root
        })
        .filter(|root| before.is_none_or(|b| root.cursor < b))
        .collect();
    let rest = numbered.len().saturating_sub(size);
    let threads: Vec<ThreadSummary> = numbered.drain(rest..).rev().collect();
    let next = (rest > 0)
        .then(|| threads.last().map(|t| t.cursor))
        .flatten();
    Ok(Json(ThreadPage { threads, next }).into_response())
}

fn bad_query(detail: String) -> Problem {
    Problem::new(StatusCode::BAD_REQUEST, "bad-query", detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::export::parse_rfc3339;
    use crate::host::retention::{keep_days, now_us};

    fn cut_of(body: &'static str) -> (Option<String>, Option<u32>) {
        let cut: PruneCut = serde_json::from_slice(&one_cut(&Bytes::from(body))).unwrap();
        (cut.before, cut.keep_days)
    }

    #[test]
    fn a_prune_by_days_is_one_cut_for_every_partition() {
        let (before, days) = cut_of(r#"{"keep_days": 3}"#);
        assert_eq!(days, None);
        let before = parse_rfc3339(&before.unwrap()).unwrap();
        assert!((keep_days(now_us(), 3) - before).abs() < 60_000_000);
        // More days than there are since 1970: the epoch, which every partition reads.
        let (before, _) = cut_of(r#"{"keep_days": 4294967295}"#);
        assert_eq!(parse_rfc3339(&before.unwrap()).unwrap(), 0);
        // Anything else goes as it came, for each partition to answer.
        assert_eq!(
            cut_of(r#"{"before": "2026-10-01"}"#),
            (Some("2026-10-01".to_owned()), None)
        );
        let bad = Bytes::from_static(b"{\"keep_days\": -1}");
        assert_eq!(one_cut(&bad), bad);
    }
}
