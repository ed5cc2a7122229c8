//! A flood of identical refusals (issue 19): every request gets its answer; history records the
//! first 8 whole and one `refusals-repeated` record that counts the rest, in reply to the first.

mod support;

use std::time::Duration;

use agentpump::history::Record;
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, PumpConfig, PumpHandle, QName, Registration};

const NS: &str = "urn:example:refusals";
/// A root no listener accepts: refused with `huh unknown-root`, in the system thread.
const NOPE: &str = r#"<nope xmlns="urn:example:refusals"/>"#;

fn pump(window: Duration) -> PumpHandle {
    PumpBuilder::new()
        .config(PumpConfig {
            refusal_window: window,
            ..PumpConfig::default()
        })
        .register(Registration::new("echo", Echo).accepts(QName::new(NS, "ping")))
        .build()
        .unwrap()
}

/// The refusals recorded for the client in the system thread: (code, record).
async fn answers(pump: &PumpHandle) -> Vec<(String, Record)> {
    pump.history(pump.system_thread())
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.to.as_deref() == Some("client"))
        .map(|r| (support::notice(&r).1, r))
        .collect()
}

async fn flood(pump: &PumpHandle, n: usize) {
    for _ in 0..n {
        let err = pump.post(None, None, NOPE).await.unwrap_err();
        assert_eq!(err.code(), "unknown-root", "every request gets its answer");
        assert!(err.recorded_in().is_some(), "and points at a record");
    }
}

#[tokio::test]
async fn a_flood_of_identical_refusals_is_recorded_as_eight_and_a_count() {
    let pump = pump(Duration::from_millis(200));
    flood(&pump, 100).await;
    let recorded = answers(&pump).await;
    assert_eq!(recorded.len(), 8, "the first 8 whole, the rest counted");
    assert!(recorded.iter().all(|(code, _)| code == "unknown-root"));
    // The window closes (the sweeper runs every window): the count is recorded.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let recorded = answers(&pump).await;
    assert_eq!(recorded.len(), 9, "{recorded:#?}");
    let (code, count) = &recorded[8];
    assert_eq!(code, "refusals-repeated");
    assert_eq!(
        count.in_reply_to,
        Some(recorded[0].1.id),
        "the count names its sample"
    );
    assert!(
        count.payload.contains("92 more refusals"),
        "{}",
        count.payload
    );
    let ping = format!(r#"<ping xmlns="{NS}"/>"#);
    let served = pump.post(None, None, &ping).await.unwrap().thread();
    pump.settle(served).await;
    assert_eq!(
        pump.history(served).await.unwrap().len(),
        2,
        "the pump keeps serving"
    );
}

#[tokio::test]
async fn a_different_refusal_closes_the_window_and_records_the_count_first() {
    let pump = pump(Duration::from_secs(60));
    flood(&pump, 10).await;
    let err = pump
        .post(None, None, r#"<other xmlns="urn:example:refusals"/>"#)
        .await
        .unwrap_err();
    assert_eq!(err.code(), "unknown-root");
    let codes: Vec<String> = answers(&pump).await.into_iter().map(|(c, _)| c).collect();
    let mut expected = vec!["unknown-root"; 8];
    expected.extend(["refusals-repeated", "unknown-root"]);
    assert_eq!(codes, expected);
}

#[tokio::test]
async fn shutdown_records_the_count_of_an_open_window() {
    let pump = pump(Duration::from_secs(60));
    flood(&pump, 12).await;
    assert_eq!(answers(&pump).await.len(), 8);
    pump.shutdown(Duration::from_secs(1)).await;
    let recorded = answers(&pump).await;
    assert_eq!(recorded.len(), 9);
    assert!(recorded[8].1.payload.contains("4 more refusals"));
}

#[tokio::test]
async fn a_zero_window_records_every_refusal() {
    let pump = pump(Duration::ZERO);
    flood(&pump, 20).await;
    assert_eq!(answers(&pump).await.len(), 20);
}
