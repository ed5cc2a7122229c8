//! Totals: tokens, cost and tool calls summed from the handled deliveries history keeps (its
//! [`Mark`]s) — per thread and per tree, and across threads by listener or by day. Computed
//! from the store, so they read the same over a live host and over a history file.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::Viewer;
use crate::history::Mark;
use crate::host::server::Problem;
use crate::host::server::params::Params;
use crate::host::server::thread_path::ThreadPath;

/// The groupings `GET /view/totals` takes.
const GROUPINGS: &str = "listener, day";

/// Most days `GET /view/totals?by=day` returns (and its default).
const MAX_DAYS: usize = 366;

/// Sums of handled deliveries; `cost` is exact (a decimal string, as the governor writes it).
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Totals {
    deliveries: u64,
    tokens_in: u64,
    tokens_out: u64,
    cost: Decimal,
    tool_calls: u64,
    /// Deliveries whose usage was an estimate (an endpoint that reported none).
    estimated: u64,
}

impl Totals {
    fn add(&mut self, mark: &Mark) {
        let u = &mark.usage;
        self.deliveries += 1;
        self.tokens_in += u.tokens_in;
        self.tokens_out += u.tokens_out;
        self.cost += u.cost;
        self.tool_calls += u.tool_calls;
        self.estimated += u64::from(u.estimated);
    }

    /// Adds another set of sums (another partition's).
    fn merge(&mut self, other: &Self) {
        self.deliveries += other.deliveries;
        self.tokens_in += other.tokens_in;
        self.tokens_out += other.tokens_out;
        self.cost += other.cost;
        self.tool_calls += other.tool_calls;
        self.estimated += other.estimated;
    }

    fn of(marks: &[Mark]) -> Self {
        let mut totals = Self::default();
        marks.iter().for_each(|m| totals.add(m));
        totals
    }
}

/// `GET /view/threads/{id}/totals`.
#[derive(Debug, Serialize)]
pub(crate) struct ThreadTotals {
    /// The thread alone.
    thread: Totals,
    /// The thread and all its descendants.
    tree: Totals,
    /// How many threads the tree has.
    threads: usize,
}

/// `GET /view/threads/{id}/totals`: the thread's totals and its tree's.
pub(crate) async fn thread(
    State(viewer): State<Viewer>,
    ThreadPath(id): ThreadPath,
) -> Result<Response, Problem> {
    let tree = super::api::tree(&viewer, id).await?;
    let (mut thread, mut all) = (Totals::default(), Totals::default());
    for info in &tree {
        let marks = viewer.store.marks(info.id).await?;
        marks.iter().for_each(|m| all.add(m));
        if info.id == id {
            thread = Totals::of(&marks);
        }
    }
    let threads = tree.len();
    Ok(Json(ThreadTotals {
        thread,
        tree: all,
        threads,
    })
    .into_response())
}

/// Query of `GET /view/totals`.
#[derive(Debug, Deserialize)]
pub(crate) struct Grouping {
    by: Option<String>,
    limit: Option<usize>,
}

/// One group of `GET /view/totals`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Group {
    /// The listener (`(none)` for messages without an addressee) or the UTC day `YYYY-MM-DD`.
    key: String,
    #[serde(flatten)]
    totals: Totals,
}

/// `GET /view/totals?by=listener|day&limit=`: every thread's handled deliveries, grouped by the
/// listener they went to (by name) or by the UTC day they were accepted (newest first, at most
/// `limit` days, 366 by default and at most).
pub(crate) async fn across(
    State(viewer): State<Viewer>,
    Params(q): Params<Grouping>,
) -> Result<Response, Problem> {
    let by_day = match q.by.as_deref().unwrap_or("listener") {
        "listener" => false,
        "day" => true,
        other => {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "bad-grouping",
                format!("`by` is `{other}`; it takes one of: {GROUPINGS}"),
            ));
        }
    };
    let limit = match q.limit {
        None => MAX_DAYS,
        Some(n) if (1..=MAX_DAYS).contains(&n) => n,
        Some(n) => {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "bad-limit",
                format!("`limit` is {n}; it takes 1 to {MAX_DAYS}"),
            ));
        }
    };
    let mut groups: BTreeMap<String, Totals> = BTreeMap::new();
    for info in viewer.store.threads(None).await? {
        for mark in viewer.store.marks(info.id).await? {
            let key = if by_day {
                crate::history::export::utc_date(mark.time_us)
            } else {
                mark.listener.as_deref().unwrap_or("(none)").to_owned()
            };
            groups.entry(key).or_default().add(&mark);
        }
    }
    Ok(Json(answer(groups, by_day, limit)).into_response())
}

/// The answer of `GET /view/totals`: by listener in name order, by day newest first (at most
/// `limit` days).
fn answer(groups: BTreeMap<String, Totals>, by_day: bool, limit: usize) -> Across {
    let groups = groups
        .into_iter()
        .map(|(key, totals)| Group { key, totals });
    let groups: Vec<Group> = if by_day {
        groups.rev().take(limit).collect()
    } else {
        groups.collect()
    };
    let by = if by_day { "day" } else { "listener" };
    Across {
        by: by.to_owned(),
        groups,
    }
}

/// `GET /view/totals`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Across {
    /// `listener` or `day`.
    by: String,
    groups: Vec<Group>,
}

/// Every partition's `GET /view/totals` answer summed into one, as one host would have
/// answered (each partition answered at most `limit` days: the newest `limit` of them all are
/// among those).
pub(crate) fn merged(answers: Vec<Across>, limit: Option<usize>) -> Across {
    let by_day = answers.first().is_some_and(|a| a.by == "day");
    let mut groups: BTreeMap<String, Totals> = BTreeMap::new();
    for group in answers.into_iter().flat_map(|a| a.groups) {
        groups.entry(group.key).or_default().merge(&group.totals);
    }
    answer(groups, by_day, limit.unwrap_or(MAX_DAYS).min(MAX_DAYS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(key: &str, deliveries: u64, cost: &str) -> Group {
        let totals = Totals {
            deliveries,
            cost: cost.parse().unwrap(),
            ..Totals::default()
        };
        Group {
            key: key.to_owned(),
            totals,
        }
    }

    fn keys(across: &Across) -> Vec<(&str, u64, String)> {
        let groups = across.groups.iter();
        groups
            .map(|g| {
                (
                    g.key.as_str(),
                    g.totals.deliveries,
                    g.totals.cost.to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn partitions_totals_are_summed_per_key_and_days_stay_the_newest() {
        let by_day = |groups| Across {
            by: "day".to_owned(),
            groups,
        };
        let answers = vec![
            by_day(vec![
                group("2026-11-27", 2, "0.10"),
                group("2026-11-25", 1, "0.01"),
            ]),
            by_day(vec![
                group("2026-11-27", 3, "0.05"),
                group("2026-11-26", 4, "0"),
            ]),
        ];
        let days = merged(answers, Some(2));
        assert_eq!(days.by, "day");
        assert_eq!(
            keys(&days),
            [
                ("2026-11-27", 5, "0.15".to_owned()),
                ("2026-11-26", 4, "0".to_owned())
            ]
        );
        let by_listener = |groups| Across {
            by: "listener".to_owned(),
            groups,
        };
        let answers = vec![
            by_listener(vec![group("echo", 1, "0")]),
            by_listener(vec![group("agent", 2, "1.5"), group("echo", 3, "0")]),
        ];
        let listeners = merged(answers, None);
        assert_eq!(
            keys(&listeners),
            [("agent", 2, "1.5".to_owned()), ("echo", 4, "0".to_owned())]
        );
    }
}
