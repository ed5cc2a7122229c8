//! `GET /view/threads/{id}` through the front of a partitioned organism: the thread's partition
//! answers with the tree it holds, and a child that runs on another partition's pump
//! (`spread_children`) is not in it — only its id, in its parent's `children`. The front asks
//! each such child's own partition for its tree and adds those nodes, so the viewer shows the
//! whole tree wherever its threads run. A child that cannot be read now (its partition has no
//! writer) is listed in `unreached`.

use std::collections::HashSet;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde_json::Value;

use super::{FORWARDED_FROM, Front, Sent};
use crate::ThreadId;
use crate::thread::Partition;

/// The most subtrees one answer gathers from other partitions (a tree spread wider is shown
/// to this many, the rest listed in `unreached`).
const MOST_SUBTREES: usize = 256;

/// How long one child's partition may take to answer before the child is listed unreached
/// (a host gone without closing must not hold the whole tree).
const CHILD_PATIENCE: Duration = Duration::from_secs(5);

/// How many children's partitions are asked at once.
const AT_ONCE: usize = 8;

/// The answer of `partition` (the thread's) to `sent`, with the trees of its descendants on
/// other partitions added; any answer but `200` as it came.
pub(super) async fn whole(
    front: &Front,
    partition: usize,
    sent: &Sent<'_>,
) -> Result<Response, Response> {
    let mut detail: Value = front.fetch(partition, sent).await?;
    let count = front.writers.len() as u32;
    // Every id in the tree, and every child asked for: none is asked twice.
    let mut seen: HashSet<String> = ids(nodes(&detail)).collect();
    // Each child's carve-out, as its parent's partition read it from the parent's records.
    let mut carved = carve_outs(&mut detail);
    let mut wanted = absent(nodes(&detail), &seen);
    let mut unreached = Vec::new();
    let mut asked = 0;
    while !wanted.is_empty() {
        seen.extend(wanted.iter().map(|(child, _)| child.clone()));
        let room = MOST_SUBTREES - asked;
        if wanted.len() > room {
            unreached.extend(wanted.drain(room..).map(|(child, _)| child));
        }
        asked += wanted.len();
        // One level of the tree at a time, its children's partitions asked together.
        type Answer = Option<(Vec<Value>, serde_json::Map<String, Value>)>;
        let answers: Vec<(String, String, Answer)> = futures_util::stream::iter(wanted.drain(..))
            .map(|(child, parent)| async move {
                let subtree = subtree(front, count, sent, &child).await;
                (child, parent, subtree)
            })
            .buffer_unordered(AT_ONCE)
            .collect()
            .await;
        let mut added = Vec::new();
        for (child, parent, subtree) in answers {
            let Some((subtree, more)) = subtree else {
                unreached.push(child);
                continue;
            };
            for mut node in subtree {
                let Some(id) = node["id"].as_str().map(str::to_owned) else {
                    continue;
                };
                if id != child && !seen.insert(id.clone()) {
                    continue;
                }
                // Its own pump holds the child without its parent (the parent is not there):
                // the node that names it is its parent here.
                if id == child && node["parent"].is_null() {
                    node["parent"] = Value::from(parent.clone());
                }
                if id == child && node["carve_out"].is_null() {
                    node["carve_out"] = carved.remove(&child).unwrap_or(Value::Null);
                }
                added.push(node);
            }
            carved.extend(more);
        }
        // Only the nodes just added can name children not asked for yet.
        wanted = absent(&added, &seen);
        if let Some(Value::Array(tree)) = detail.get_mut("tree") {
            tree.extend(added);
        }
    }
    if !unreached.is_empty() {
        unreached.sort();
        unreached.dedup();
        detail["unreached"] = Value::from(unreached);
    }
    let mut answer = Json(detail).into_response();
    let from = front.writer(partition).ok();
    if let Some(from) = from.and_then(|w| axum::http::HeaderValue::from_str(&w).ok()) {
        answer.headers_mut().insert(FORWARDED_FROM, from);
    }
    Ok(answer)
}

/// What `carved_elsewhere` of a `/view/threads/{id}` answer holds, taken out of it.
fn carve_outs(detail: &mut Value) -> serde_json::Map<String, Value> {
    match detail
        .as_object_mut()
        .and_then(|d| d.remove("carved_elsewhere"))
    {
        Some(Value::Object(carved)) => carved,
        _ => serde_json::Map::new(),
    }
}

/// The nodes of `child`'s tree as its own partition has it, with the carve-outs of its own
/// children elsewhere; `None` when that partition cannot answer it now (no writer, a refusal,
/// no answer within [`CHILD_PATIENCE`]).
async fn subtree(
    front: &Front,
    count: u32,
    sent: &Sent<'_>,
    child: &str,
) -> Option<(Vec<Value>, serde_json::Map<String, Value>)> {
    let id = child.parse::<ThreadId>().ok()?;
    let path = format!("/view/threads/{id}");
    let asked = Sent {
        method: &Method::GET,
        path: &path,
        headers: sent.headers,
        body: Bytes::new(),
    };
    let partition = Partition::of(id, count) as usize;
    let read = tokio::time::timeout(CHILD_PATIENCE, front.fetch::<Value>(partition, &asked));
    let mut answer = read.await.ok()?.ok()?;
    let carved = carve_outs(&mut answer);
    match answer.get_mut("tree").map(Value::take) {
        Some(Value::Array(nodes)) => Some((nodes, carved)),
        _ => None,
    }
}

/// The nodes of a `/view/threads/{id}` answer's tree.
fn nodes(detail: &Value) -> &[Value] {
    detail["tree"].as_array().map_or(&[], Vec::as_slice)
}

/// The ids of `nodes`.
fn ids(nodes: &[Value]) -> impl Iterator<Item = String> + '_ {
    nodes
        .iter()
        .filter_map(|n| n["id"].as_str().map(str::to_owned))
}

/// The children `nodes` name that are not `seen`, each with the node that names it.
fn absent(nodes: &[Value], seen: &HashSet<String>) -> Vec<(String, String)> {
    let mut missing: Vec<(String, String)> = nodes
        .iter()
        .filter_map(|n| Some((n["id"].as_str()?, n["children"].as_array()?)))
        .flat_map(|(parent, children)| {
            children
                .iter()
                .filter_map(Value::as_str)
                .filter(|c| !seen.contains(*c))
                .map(move |c| (c.to_owned(), parent.to_owned()))
        })
        .collect();
    missing.sort();
    missing.dedup_by(|a, b| a.0 == b.0);
    missing
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::Router;
    use axum::http::HeaderMap;
    use tokio::sync::watch;

    use super::*;

    /// A tree with one child readable on another pump and one on a partition nobody writes
    /// now: the first is added under its parent, the second listed in `unreached` once, not
    /// left out silently.
    #[tokio::test]
    async fn a_child_on_a_partition_without_a_writer_is_listed_unreached_once() {
        crate::listeners::llm::install_tls_provider();
        let (root, near) = (
            Partition::new(0, 3).unwrap().new_thread(),
            Partition::new(0, 3).unwrap().new_thread(),
        );
        let far = Partition::new(2, 3).unwrap().new_thread();
        let answers = move |id: ThreadId| {
            if id == root {
                let children = [near.to_string(), far.to_string()];
                let carved = serde_json::json!({ near.to_string(): "<budget turns=\"4\"/>" });
                serde_json::json!({"tree": [{"id": root.to_string(), "parent": null, "children": children}], "live": true, "carved_elsewhere": carved})
            } else {
                serde_json::json!({"tree": [{"id": id.to_string(), "parent": null, "children": []}]})
            }
        };
        let local = Router::new().route(
            "/view/threads/{id}",
            axum::routing::get(
                move |axum::extract::Path(id): axum::extract::Path<ThreadId>| {
                    std::future::ready(Json(answers(id)))
                },
            ),
        );
        let mut front = super::super::tests::front();
        front.locals = Arc::new(vec![watch::channel(Some(local)).1]);
        let path = format!("/view/threads/{root}");
        let sent = Sent {
            method: &Method::GET,
            path: &path,
            headers: &HeaderMap::new(),
            body: Bytes::new(),
        };
        let whole = whole(&front, 0, &sent).await.unwrap();
        assert!(whole.headers().contains_key(FORWARDED_FROM));
        let bytes = axum::body::to_bytes(whole.into_body(), usize::MAX)
            .await
            .unwrap();
        let detail: Value = serde_json::from_slice(&bytes).unwrap();
        let tree = detail["tree"].as_array().unwrap();
        assert_eq!(tree.len(), 2, "{detail}");
        assert_eq!(tree[1]["id"], near.to_string());
        assert_eq!(tree[1]["parent"], root.to_string(), "its parent set here");
        assert_eq!(
            tree[1]["carve_out"], "<budget turns=\"4\"/>",
            "as its parent's partition read it"
        );
        assert!(detail.get("carved_elsewhere").is_none(), "{detail}");
        assert_eq!(detail["unreached"], serde_json::json!([far.to_string()]));
    }
}
