//! `GET /view/threads/{id}` through the front of a partitioned organism: the thread's partition
//! answers with the tree it holds, and a child that runs on another partition's pump
//! (`spread_children`) is not in it — only its id, in its parent's `children`. The front asks
//! each such child's own partition for its tree and adds those nodes, so the viewer shows the
//! whole tree wherever its threads run. A child that cannot be read now (its partition has no
//! writer) is listed in `unreached`.

use axum::Json;
use axum::body::Bytes;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::{Front, Sent};
use crate::ThreadId;
use crate::thread::Partition;

/// The most subtrees one answer gathers from other partitions (a tree spread wider is shown
/// to this many, the rest listed in `unreached`).
const MOST_SUBTREES: usize = 256;

/// The answer of `partition` (the thread's) to `sent`, with the trees of its descendants on
/// other partitions added; any answer but `200` as it came.
pub(super) async fn whole(
    front: &Front,
    partition: usize,
    sent: &Sent<'_>,
) -> Result<Response, Response> {
    let mut detail = read(front, partition, sent).await?;
    let count = front.writers.len() as u32;
    let mut known: std::collections::HashSet<String> = ids(&detail).collect();
    let mut missing = absent(&detail, &known);
    let mut unreached = Vec::new();
    let mut gathered = 0;
    while let Some((child, parent)) = missing.pop() {
        let Ok(id) = child.parse::<ThreadId>() else {
            continue;
        };
        if gathered == MOST_SUBTREES {
            unreached.push(child);
            continue;
        }
        gathered += 1;
        let path = format!("/view/threads/{id}");
        let asked = Sent {
            method: &Method::GET,
            path: &path,
            headers: sent.headers,
            body: Bytes::new(),
        };
        let partition = Partition::of(id, count) as usize;
        let Ok(subtree) = read(front, partition, &asked).await else {
            unreached.push(child);
            continue;
        };
        let Some(Value::Array(nodes)) = subtree.get("tree").cloned() else {
            unreached.push(child);
            continue;
        };
        let mut added: Vec<Value> = nodes
            .into_iter()
            .filter(|n| n["id"].as_str().is_some_and(|i| !known.contains(i)))
            .collect();
        // Its own pump holds the child without its parent (the parent is not there): the
        // node that names it is its parent here.
        for node in added.iter_mut().filter(|n| n["id"] == child.as_str()) {
            if node["parent"].is_null() {
                node["parent"] = Value::from(parent.clone());
            }
        }
        known.extend(
            added
                .iter()
                .filter_map(|n| n["id"].as_str().map(str::to_owned)),
        );
        if let Some(Value::Array(tree)) = detail.get_mut("tree") {
            tree.extend(added);
        }
        missing = absent(&detail, &known);
    }
    if !unreached.is_empty() {
        detail["unreached"] = Value::from(unreached);
    }
    Ok(Json(detail).into_response())
}

/// The ids of the nodes of a `/view/threads/{id}` answer's tree.
fn ids(detail: &Value) -> impl Iterator<Item = String> + '_ {
    detail["tree"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["id"].as_str().map(str::to_owned))
}

/// The children its tree's nodes name that are not nodes of it (not `known`), each with the
/// node that names it.
fn absent(detail: &Value, known: &std::collections::HashSet<String>) -> Vec<(String, String)> {
    let mut missing: Vec<(String, String)> = detail["tree"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| Some((n["id"].as_str()?, n["children"].as_array()?)))
        .flat_map(|(parent, children)| {
            children
                .iter()
                .filter_map(Value::as_str)
                .filter(|c| !known.contains(*c))
                .map(move |c| (c.to_owned(), parent.to_owned()))
        })
        .collect();
    missing.sort();
    missing.dedup();
    missing
}

/// The JSON of `partition`'s `200` answer to `sent`; any other answer as it came, or the
/// problem of reaching or reading it.
async fn read(front: &Front, partition: usize, sent: &Sent<'_>) -> Result<Value, Response> {
    let answer = front.exchange(partition, sent).await?;
    if answer.status() != StatusCode::OK {
        return Err(answer);
    }
    let bytes = axum::body::to_bytes(answer.into_body(), usize::MAX)
        .await
        .map_err(|e| unreadable(&e))?;
    serde_json::from_slice(&bytes).map_err(|e| unreadable(&e))
}

fn unreadable(e: &dyn std::fmt::Display) -> Response {
    crate::host::server::problem::Problem::new(
        StatusCode::BAD_GATEWAY,
        "writer-unreachable",
        format!("a partition's answer could not be read: {e}"),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::Router;
    use axum::http::HeaderMap;
    use tokio::sync::watch;

    use super::*;

    /// A tree whose child runs on a partition nobody writes now: the tree comes whole as its
    /// own partition has it, and the child is listed in `unreached`, not left out silently.
    #[tokio::test]
    async fn a_child_on_a_partition_without_a_writer_is_listed_unreached() {
        crate::listeners::llm::install_tls_provider();
        let root = Partition::new(0, 3).unwrap().new_thread();
        let child = Partition::new(2, 3).unwrap().new_thread();
        let answer = serde_json::json!({
            "tree": [{"id": root.to_string(), "parent": null, "children": [child.to_string()]}],
            "live": true,
        });
        let local = Router::new().route(
            "/view/threads/{id}",
            axum::routing::get(move || std::future::ready(Json(answer.clone()))),
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
        let bytes = axum::body::to_bytes(whole.into_body(), usize::MAX)
            .await
            .unwrap();
        let detail: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(detail["tree"].as_array().unwrap().len(), 1, "{detail}");
        assert_eq!(detail["unreached"], serde_json::json!([child.to_string()]));
    }
}
