//! The baseline, measured in the same process and run as the pump: a bare loop doing only what a
//! hop cannot avoid — parse the envelope with quick-xml's namespace-aware reader (every event
//! read, every element and attribute name resolved) and pass it through a bounded tokio channel.
//!
//! No history, no routing, no governor, no allocation per hop: the message travels as an
//! `Arc<str>` of the same envelope, parsed again at every hop.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use quick_xml::NsReader;
use quick_xml::events::Event;
use quick_xml::name::ResolveResult;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

/// Namespace of the echo benchmarks' payloads.
pub const ECHO_NS: &str = "urn:agentpump:bench:echo:v1";

/// The payload the echo benchmarks post (and the echo listener sends back).
pub const PING: &str = r#"<ping xmlns="urn:agentpump:bench:echo:v1"><seq>00000001</seq><body>a short message</body></ping>"#;

/// Capacity of the baseline's bounded channels (the pump's default queue capacity).
pub const CAPACITY: usize = 1024;

/// `payload` in a full envelope of the pump's dialect, with ids, sender, addressee and thread,
/// as the pump writes one.
pub fn envelope(payload: &str) -> String {
    format!(
        "<message xmlns=\"urn:agentpump:envelope:v1\"><meta>\
         <id>0193f3c4-5b6e-7c1d-9a2b-3c4d5e6f7a8b</id><from>client</from><to>echo</to>\
         <thread>6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b</thread></meta>{payload}</message>"
    )
}

/// The envelope every baseline hop parses.
pub fn the_envelope() -> Arc<str> {
    Arc::from(envelope(PING))
}

/// Parses `xml` with the namespace-aware reader: reads every event, resolves every element and
/// attribute name. Returns a number derived from what it read, so nothing is optimised away.
pub fn parse(xml: &str) -> usize {
    let mut reader = NsReader::from_str(xml);
    let mut seen = 0usize;
    loop {
        let (ns, event) = reader
            .read_resolved_event()
            .expect("the baseline envelope is well-formed");
        if let ResolveResult::Bound(ns) = ns {
            seen += ns.as_ref().len();
        }
        match event {
            Event::Start(e) | Event::Empty(e) => {
                seen += e.local_name().as_ref().len();
                for attribute in e.attributes() {
                    let attribute = attribute.expect("well-formed attribute");
                    let (ns, local) = reader.resolver().resolve_attribute(attribute.key);
                    seen += local.as_ref().len() + attribute.value.len();
                    if let ResolveResult::Bound(ns) = ns {
                        seen += ns.as_ref().len();
                    }
                }
            }
            Event::Text(t) => seen += t.len(),
            Event::End(e) => seen += e.local_name().as_ref().len(),
            Event::Eof => return black_box(seen),
            _ => {}
        }
    }
}

/// U1p's baseline: `n` round trips in windows of `window` (≤ [`CAPACITY`]): the client sends a
/// window, then takes its answers, as a client that does not wait for each answer does.
pub async fn pipelined(n: usize, window: usize) -> Duration {
    let env = the_envelope();
    let (to_echo, mut echo_rx) = mpsc::channel::<Arc<str>>(CAPACITY);
    let (to_client, mut client_rx) = mpsc::channel::<Arc<str>>(CAPACITY);
    let echo = tokio::spawn(async move {
        while let Some(message) = echo_rx.recv().await {
            black_box(parse(&message));
            if to_client.send(message).await.is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let mut left = n;
    while left > 0 {
        let k = window.min(left);
        for _ in 0..k {
            black_box(parse(&env));
            to_echo
                .send(Arc::clone(&env))
                .await
                .expect("echo task alive");
        }
        for _ in 0..k {
            client_rx.recv().await.expect("echo answers");
        }
        left -= k;
    }
    let elapsed = started.elapsed();
    drop(to_echo);
    echo.await.expect("echo task");
    elapsed
}

/// Figure 1's baseline: `n` round trips. The client parses the envelope and sends it through a
/// bounded channel to an echo task, which parses it and answers through another bounded channel:
/// two hops per round trip, like the pump's post → echo → egress.
pub async fn round_trips(n: usize) -> Duration {
    pipelined(n, 1).await
}

/// Figure 2's baseline: `tasks` long-lived tasks, each with its own bounded channel; per round,
/// `clients` client tasks parse and send one message to each task, and each task parses it and
/// answers through a shared bounded channel. Returns the time for `rounds` rounds, which move
/// `2 × tasks × rounds` one-way messages.
pub async fn many_tasks(tasks: usize, rounds: usize, clients: usize) -> Duration {
    let env = the_envelope();
    let (back_tx, mut back_rx) = mpsc::channel::<Arc<str>>(CAPACITY);
    let mut senders = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        let (tx, mut rx) = mpsc::channel::<Arc<str>>(16);
        let back = back_tx.clone();
        tokio::spawn(async move {
            while let Some(message) = rx.recv().await {
                black_box(parse(&message));
                if back.send(message).await.is_err() {
                    break;
                }
            }
        });
        senders.push(tx);
    }
    drop(back_tx);
    let senders = Arc::new(senders);
    let started = Instant::now();
    for _ in 0..rounds {
        let mut sending = Vec::with_capacity(clients);
        for c in 0..clients {
            let senders = Arc::clone(&senders);
            let env = Arc::clone(&env);
            sending.push(tokio::spawn(async move {
                for i in (c..senders.len()).step_by(clients) {
                    black_box(parse(&env));
                    senders[i].send(Arc::clone(&env)).await.expect("task alive");
                }
            }));
        }
        for _ in 0..tasks {
            back_rx.recv().await.expect("a task answers");
        }
        for s in sending {
            s.await.expect("client task");
        }
    }
    started.elapsed()
}

/// Figure 3's baseline: `n` self-hops of one task — receive from its own bounded channel, parse,
/// send to itself again.
pub async fn self_hops(n: usize) -> Duration {
    let env = the_envelope();
    let (tx, mut rx) = mpsc::channel::<Arc<str>>(CAPACITY);
    tx.send(env).await.expect("open");
    let started = Instant::now();
    for _ in 0..n {
        let message = rx.recv().await.expect("open");
        black_box(parse(&message));
        tx.send(message).await.expect("open");
    }
    started.elapsed()
}

/// U6's ceiling: `tasks` tasks at once, each doing `rounds` self-hops: receive from its own
/// bounded channel, parse the message, chain a SHA-256 over it, send it to itself again.
/// Returns the time until every task is done (`tasks × rounds` hops).
pub async fn many_selves(tasks: usize, rounds: usize) -> Duration {
    let env = the_envelope();
    let started = Instant::now();
    let running: Vec<_> = (0..tasks)
        .map(|_| {
            let env = Arc::clone(&env);
            tokio::spawn(async move {
                let (tx, mut rx) = mpsc::channel::<Arc<str>>(16);
                tx.send(env).await.expect("open");
                let mut chain = [0u8; 32];
                for _ in 0..rounds {
                    let message = rx.recv().await.expect("open");
                    black_box(parse(&message));
                    chain = Sha256::new()
                        .chain_update(chain)
                        .chain_update(message.as_bytes())
                        .finalize()
                        .into();
                    tx.send(message).await.expect("open");
                }
                black_box(chain)
            })
        })
        .collect();
    for task in running {
        task.await.expect("a self-hopping task");
    }
    started.elapsed()
}

/// Figure 4's baseline: the parent parses its request and spawns `n` tasks; each parses its
/// initial message and answers once through a bounded channel; the parent parses every answer.
/// Returns the time to the last answer.
pub async fn fan_out(n: usize) -> Duration {
    let env = the_envelope();
    let (tx, mut rx) = mpsc::channel::<Arc<str>>(CAPACITY);
    let started = Instant::now();
    black_box(parse(&env));
    for _ in 0..n {
        let tx = tx.clone();
        let env = Arc::clone(&env);
        tokio::spawn(async move {
            black_box(parse(&env));
            let _ = tx.send(env).await;
        });
    }
    for _ in 0..n {
        let answer = rx.recv().await.expect("every task answers");
        black_box(parse(&answer));
    }
    started.elapsed()
}
