//! Search finds text inside payloads (issue 47): `GET /view/threads?q=` and `agentpump threads
//! --search` over `--db` and `--url`, the same on SQLite (by reading its payloads), on the
//! memory store and on JetStream.
//! Needs `nats-server` on the PATH (`.ci/run` installs it).

use crate::support;

use std::sync::Arc;

use agentpump::ThreadId;
use agentpump::history::{
    HistoryStore, JetStreamHistory, JetStreamOptions, MemoryHistory, SqliteHistory,
};
use support::{Scratch, agentpump_in, converse_one, echo_pump, serve};

const TOKEN: &str = "search-token";

/// The root threads `GET /view/threads?q=text` lists.
async fn found(base: &str, text: &str) -> Vec<String> {
    let url = format!("{base}/view/threads?q={}", urlencode(text));
    let page = support::json(support::http_client().get(url).bearer_auth(TOKEN)).await;
    page["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Three threads, one payload each: an amount, a coordinate and a word.
async fn three(pump: &agentpump::PumpHandle) -> [ThreadId; 3] {
    let mut out = Vec::new();
    for text in ["<amount>42.50</amount>", "<lat>26.218757</lat>", "plain"] {
        out.push(converse_one(pump, text).await);
    }
    out.try_into().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_finds_text_inside_payloads_on_sqlite_and_in_memory() {
    let dir = Scratch::new("search-api");
    // JetStream answers reads from an index in memory: it searches as the memory store does.
    let (_nats, url) = support::nats::server(&dir.0);
    let jetstream = JetStreamHistory::open(JetStreamOptions::new(&url, "search"));
    let stores: [(&str, Arc<dyn HistoryStore>); 3] = [
        ("sqlite", Arc::new(SqliteHistory::open(dir.db()).unwrap())),
        ("memory", Arc::new(MemoryHistory::new())),
        ("jetstream", Arc::new(jetstream.await.unwrap())),
    ];
    for (name, store) in stores {
        let pump = echo_pump(store);
        let [amount, lat, _] = three(&pump).await;
        let base = serve(&pump, TOKEN, 1 << 20).await;
        let one = |t: ThreadId| vec![t.to_string()];
        assert_eq!(found(&base, "42.50").await, one(amount), "{name}");
        assert_eq!(found(&base, "26.218757").await, one(lat), "{name}");
        assert_eq!(found(&base, "<AMOUNT>").await, one(amount), "{name}: case");
        // Two characters: no trigram to look up; SQLite reads the payloads.
        assert_eq!(found(&base, ".5").await, one(amount), "{name}: short");
        assert_eq!(found(&base, "99.99").await, Vec::<String>::new(), "{name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_searches_a_history_file_and_a_host() {
    let dir = Scratch::new("search-cli");
    let pump = echo_pump(Arc::new(SqliteHistory::open(dir.db()).unwrap()));
    let [amount, lat, plain] = three(&pump).await;
    let base = serve(&pump, TOKEN, 1 << 20).await;
    let db = dir.db().display().to_string();
    let cwd = dir.0.clone();
    let cli = move |args: Vec<String>| {
        let cwd = cwd.clone();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            agentpump_in(&cwd, &args)
        })
    };
    let over = [
        vec!["--db".to_owned(), db],
        vec!["--url".into(), base, "--token".into(), TOKEN.into()],
    ];
    for source in over {
        let mut args: Vec<String> = ["threads", "--search", "26.218757"]
            .map(String::from)
            .into();
        args.extend(source.iter().cloned());
        let (ok, out, err) = cli(args).await.unwrap();
        assert!(ok, "{source:?}: {err}");
        assert!(out.contains(&lat.to_string()), "{source:?}: {out}");
        for other in [amount, plain] {
            assert!(!out.contains(&other.to_string()), "{source:?}: {out}");
        }
        assert!(out.contains("1 threads"), "{source:?}: {out}");
    }
}
