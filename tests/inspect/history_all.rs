//! The whole history as data (issue 47): `agentpump history --all --format jsonl|xml` over
//! `--db` and `--url`, and `history export` saying what it selects and what it leaves out.

use crate::support;

use std::sync::Arc;

use agentpump::history::{HistoryStore, Record, SqliteHistory};
use support::{Scratch, agentpump_in, echo_pump, finished_and_open, serve};

const TOKEN: &str = "history-token";

/// Every record in `db`, by seq, read through the library.
async fn every_record(store: &SqliteHistory) -> Vec<Record> {
    let mut all = Vec::new();
    for t in store.threads(None).await.unwrap() {
        all.extend(store.thread(t.id, 0).await.unwrap());
    }
    all.sort_by_key(|r| r.seq);
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_all_prints_every_record_from_a_file_and_a_host() {
    let dir = Scratch::new("history-all");
    let (halted, open, _) = finished_and_open(&dir.db()).await;
    let db = dir.db().display().to_string();
    let expected = every_record(&SqliteHistory::open_read_only(dir.db()).unwrap()).await;
    assert!(expected.iter().any(|r| r.thread == open));
    assert!(expected.iter().any(|r| r.thread == halted));

    let (ok, out, err) = agentpump_in(
        &dir.0,
        &["history", "--all", "--format", "jsonl", "--db", &db],
    );
    assert!(ok, "{err}");
    let got: Vec<Record> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(got, expected, "every record, by seq");

    let (ok, _, err) = agentpump_in(&dir.0, &["history", "--all", "--tree", "--db", &db]);
    assert!(!ok && err.contains("cannot be used with"), "{err}");

    // Over a running host: the same records, as XML.
    let pump = echo_pump(Arc::new(SqliteHistory::open(dir.db()).unwrap()));
    let base = serve(&pump, TOKEN, 1 << 20).await;
    let cwd = dir.0.clone();
    let args = [
        "history", "--all", "--format", "xml", "--url", &base, "--token", TOKEN,
    ]
    .map(String::from);
    let (ok, out, err) = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        agentpump_in(&cwd, &args)
    })
    .await
    .unwrap();
    assert!(ok, "{err}");
    assert!(
        out.starts_with("<history xmlns=\"urn:agentpump:history:v1\">"),
        "{out}"
    );
    let seqs: Vec<String> = expected
        .iter()
        .map(|r| format!("<record seq=\"{}\"", r.seq))
        .collect();
    for seq in &seqs {
        assert!(out.contains(seq), "{seq} missing in {out}");
    }
}

#[tokio::test]
async fn history_export_says_what_it_selects_and_what_it_left_out() {
    let dir = Scratch::new("history-export-why");
    let (halted, _, cut) = finished_and_open(&dir.db()).await;
    let db = dir.db().display().to_string();
    let store = SqliteHistory::open_read_only(dir.db()).unwrap();
    // With the cut at now, every record of every thread but the halted one is left out.
    let all = every_record(&store).await;
    let gone = all.iter().filter(|r| r.thread == halted).count();
    let others: Vec<&Record> = all.iter().filter(|r| r.thread != halted).collect();
    let open_threads: std::collections::HashSet<_> = others.iter().map(|r| r.thread).collect();
    let exported = format!("exported {gone} records of 1 threads");
    let early = agentpump::history::export::rfc3339(cut - 3_600_000_000);
    let cases = [
        // Nothing finished before an early cut: nothing to export, and why.
        (
            vec!["--before", early.as_str()],
            "nothing to export: no finished thread has a record accepted before",
        ),
        // --keep-days 0: the halted thread goes, the idle root thread is named as left out.
        (vec!["--keep-days", "0"], exported.as_str()),
    ];
    for (i, (cut_args, first)) in cases.into_iter().enumerate() {
        let out_file = format!("export-{i}.jsonl");
        let mut args = vec!["history", "export", "--db", &db, "--out", &out_file];
        args.extend(cut_args);
        let (ok, out, err) = agentpump_in(&dir.0, &args);
        assert!(ok, "{err}");
        assert!(out.contains(first), "{out}");
        assert!(
            out.contains(
                "every record, as JSON lines: agentpump history --all --format jsonl --db"
            ),
            "{out}"
        );
        if i == 1 {
            assert!(
                out.contains(&format!(
                    "left out: {} records of {} threads accepted before the cut whose trees are not finished",
                    others.len(),
                    open_threads.len()
                )),
                "{out}"
            );
            assert!(out.contains("agentpump stop THREAD"), "{out}");
        }
    }
}
