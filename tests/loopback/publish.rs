//! Publishing against the emulator, over loopback: faults, batches split to isolate bad records,
//! validation, upserts, regions, cancellation, refused credentials, hostile answers, files.

use std::sync::Arc;

use serde_json::{json, Value};
use surveillance::client::http::Arrays;
use surveillance::client::publish::*;
use surveillance::client::{Client, Error, Limits, Region, Secret};
use surveillance::emulator::{Faults, Handle, Hostile, HostileRule};
use tokio::sync::{mpsc, watch};

use crate::common;

/// One object per body, as API.md describes.
const ONE_PER_BODY: Options = Options {
    region: None,
    batch_size: 1,
    fallback: false,
    validate: true,
};

async fn emulator() -> Handle {
    common::emulator(3, 2, 1, 10).await
}

fn client_for(h: &Handle, limits: Limits, max_retries: u32) -> Client {
    common::client_for(h, limits, max_retries)
}

fn retail(tx: &str, price: f64) -> Value {
    json!({
        "dataType": "retail", "schemaVersion": "1",
        "startTime": 1_794_891_600_000_i64, "endTime": 1_794_891_660_000_i64,
        "locationId": "store-1", "dataSourceId": "pos-1", "transactionId": tx,
        "status": "sale",
        "items": [{"time": 1_794_891_600_000_i64, "quantity": 1, "description": "tea",
                   "unitPrice": price, "type": "SALE"}],
    })
}

async fn run(client: &Client, records: Vec<Value>, options: Options) -> Report {
    let (rx, _feeder) = values_source(records);
    let (_tx, cancel) = watch::channel(false);
    client
        .publish(rx, options, None, cancel)
        .await
        .expect("publish")
}

fn stored(h: &Handle, region: &str) -> Vec<Value> {
    h.state
        .published(Some(region))
        .iter()
        .map(|t| serde_json::from_str(t).expect("json"))
        .collect()
}

#[tokio::test]
async fn every_record_arrives_once_under_faults() {
    let h = emulator().await;
    h.state.set_faults(Faults {
        error_rate: 0.1,
        rate_limit_rate: 0.1,
        drop_rate: 0.05,
        ..Faults::default()
    });
    let client = client_for(&h, Limits::unlimited(), 5);
    let records: Vec<Value> = (0..2_000).map(|i| retail(&format!("t-{i}"), 1.0)).collect();
    for batch_size in [1, 37] {
        h.state.clear_published();
        let options = Options {
            batch_size,
            ..Options::default()
        };
        let report = run(&client, records.clone(), options).await;
        assert_eq!(report.accepted, 2_000, "{:?}", report.failures.first());
        assert!(report.failures.is_empty());
        assert_eq!(report.total, 2_000);
        assert_eq!(stored(&h, "us").len(), 2_000);
    }
}

#[tokio::test]
async fn a_bad_record_in_a_batch_is_isolated_and_the_rest_stored() {
    let h = emulator().await;
    let client = client_for(&h, Limits::unlimited(), 2);
    let mut records: Vec<Value> = (0..100).map(|i| retail(&format!("t-{i}"), 1.0)).collect();
    records[42]["registerId"] = json!("r-1");
    let options = Options {
        batch_size: 100,
        fallback: false,
        validate: false,
        ..Options::default()
    };
    let report = run(&client, records, options).await;
    assert_eq!(report.accepted, 99);
    assert_eq!(report.failures.len(), 1);
    let f = &report.failures[0];
    assert_eq!((f.index, f.status), (42, Some(400)));
    assert_eq!(f.transaction_id.as_deref(), Some("t-42"));
    assert!(f.message.contains("registerId"), "{}", f.message);
    assert_eq!(stored(&h, "us").len(), 99);
    // 1 batch, then halves down to the bad record: 2 per level.
    assert!(report.requests <= 1 + 2 * 7, "{}", report.requests);
}

#[tokio::test]
async fn validation_keeps_back_bad_records_and_the_service_never_sees_them() {
    let h = emulator().await;
    let client = client_for(&h, Limits::unlimited(), 2);
    let mut records: Vec<Value> = (0..10).map(|i| retail(&format!("t-{i}"), 1.0)).collect();
    records[3]["storeId"] = json!("s");
    records[7]["items"][0]["unitPrice"] = json!("1.0");
    records[8]["status"] = json!("SALE"); // a warning only
    let report = run(&client, records, Options::default()).await;
    assert_eq!(report.accepted, 8);
    assert_eq!(report.sent, 8);
    let idx: Vec<u64> = report.failures.iter().map(|f| f.index).collect();
    assert_eq!(idx, [3, 7]);
    assert!(report.failures[0].message.contains("locationId"));
    assert_eq!(report.failures[1].problems[0].path, "items[0].unitPrice");
    assert_eq!(report.failures[1].status, None);
    assert_eq!(h.state.stats_json()["published_stored"], 8);
}

#[tokio::test]
async fn the_latest_record_of_a_key_wins() {
    let h = emulator().await;
    h.state.set_faults(Faults {
        error_rate: 0.2,
        drop_rate: 0.05,
        ..Faults::default()
    });
    let client = client_for(&h, Limits::unlimited(), 8);
    // Ten versions of each of 50 keys, interleaved.
    let records: Vec<Value> = (0..500)
        .map(|i| retail(&format!("t-{}", i % 50), f64::from(i)))
        .collect();
    let report = run(&client, records, Options::default()).await;
    assert_eq!(report.accepted, 500);
    let stored = stored(&h, "us");
    assert_eq!(stored.len(), 50);
    for r in stored {
        let tx = r["transactionId"].as_str().expect("tx");
        let k: f64 = tx[2..].parse().expect("n");
        assert_eq!(r["items"][0]["unitPrice"], json!(450.0 + k), "{tx}");
    }
}

#[tokio::test]
async fn eu_region_posts_to_the_eu_route() {
    let h = emulator().await;
    let client = client_for(&h, Limits::unlimited(), 2);
    let options = Options {
        region: Some(Region::Eu),
        batch_size: 10,
        ..Options::default()
    };
    let records: Vec<Value> = (0..25).map(|i| retail(&format!("e-{i}"), 1.0)).collect();
    let report = run(&client, records, options).await;
    assert_eq!(report.accepted, 25);
    assert_eq!(stored(&h, "eu").len(), 25);
    assert!(stored(&h, "us").is_empty());
}

#[tokio::test]
async fn texts_that_are_not_json_or_too_big_are_failures() {
    let h = emulator().await;
    let client = client_for(&h, Limits::unlimited(), 2);
    let mut big_text = retail("big", 1.0).to_string();
    big_text.insert_str(
        1,
        &format!("\"employeeName\":\"{}\",", "x".repeat(MAX_BODY)),
    );
    for validate in [true, false] {
        let texts = [
            "{\"dataType\": ".to_owned(),
            retail("ok", 1.0).to_string(),
            big_text.clone(),
        ];
        let (tx, rx) = mpsc::channel(4);
        let chunk = texts
            .into_iter()
            .enumerate()
            .map(|(i, text)| Input::Text {
                index: i as u64,
                line: Some(i as u64 + 1),
                text,
            })
            .collect();
        tx.send(chunk).await.expect("send");
        drop(tx);
        let (_c, cancel) = watch::channel(false);
        let options = Options {
            validate,
            batch_size: 10,
            ..Options::default()
        };
        let report = client
            .publish(rx, options, None, cancel)
            .await
            .expect("publish");
        assert_eq!(report.accepted, 1);
        let f: Vec<(u64, Option<u64>)> =
            report.failures.iter().map(|f| (f.index, f.line)).collect();
        assert_eq!(f, [(0, Some(1)), (2, Some(3))]);
        assert!(report.failures[0].message.starts_with("not valid JSON"));
        assert!(report.failures[1].message.contains("10 MB"));
    }
}

#[tokio::test]
async fn cancel_reports_every_record_not_yet_accepted() {
    let h = emulator().await;
    h.state.set_faults(Faults {
        latency_ms: 200,
        ..Faults::default()
    });
    let client = client_for(&h, Limits::unlimited(), 2);
    let records: Vec<Value> = (0..1_000).map(|i| retail(&format!("c-{i}"), 1.0)).collect();
    let (rx, _feeder) = values_source(records);
    let (stop, cancel) = watch::channel(false);
    let (seen, mut accepted) = watch::channel(0u64);
    let sink: PublishProgressSink = Arc::new(move |p: PublishProgress| {
        seen.send_replace(p.accepted);
    });
    let task = tokio::spawn({
        let client = client.clone();
        async move { client.publish(rx, ONE_PER_BODY, Some(sink), cancel).await }
    });
    // Cancelled once some records are accepted: with 200 ms a request, most are not yet.
    accepted.wait_for(|n| *n > 0).await.expect("progress");
    stop.send_replace(true);
    let report = task.await.expect("join").expect("publish");
    assert!(report.interrupted);
    assert!(report.accepted > 0 && report.accepted < 1_000);
    assert_eq!(report.accepted + report.failures.len() as u64, report.total);
    let stored = h.state.published_len() as u64;
    assert!(stored >= report.accepted);
    assert!(report
        .failures
        .iter()
        .all(|f| f.message.contains("interrupted") && f.record.is_some()));
}

#[tokio::test]
async fn refused_credentials_stop_publishing_with_an_error() {
    let h = emulator().await;
    let mut client = client_for(&h, Limits::unlimited(), 1);
    let mut config = client.config().clone();
    config.api_key = Secret::new("wrong");
    client = Client::new(config, None).expect("client");
    // More records than fit in flight (256 batches of 100) and in the source's channel.
    let n = 40_000;
    let records: Vec<Value> = (0..n).map(|i| retail(&format!("x-{i}"), 1.0)).collect();
    let report = run(&client, records, Options::default()).await;
    assert!(matches!(report.error, Some(Error::Auth { .. })));
    assert_eq!(report.accepted, 0);
    assert_eq!(report.failures.len() as u64, report.total);
    assert!(report.total < n, "stopped reading: {}", report.total);
    // Batches that waited for the token while it was refused take that refusal: one request.
    assert_eq!(
        client.stats().requests.get("POST /v2/oauth/token"),
        Some(&1)
    );
}

#[tokio::test]
async fn an_answer_that_is_not_an_acceptance_is_retried_and_never_counted() {
    let h = emulator().await;
    let client = client_for(&h, Limits::unlimited(), 4);
    let records: Vec<Value> = (0..30).map(|i| retail(&format!("h-{i}"), 1.0)).collect();
    // (A JSON object, `NotArray`, is believed: from the webhook, a 2xx JSON answer of any
    // shape is the service's acceptance.)
    for mode in [Hostile::Html, Hostile::Truncated] {
        for batch_size in [1, 10] {
            h.state.clear_published();
            // A few answers are a proxy's, then the service's own come through.
            h.state.set_hostile(Some(HostileRule {
                mode,
                path: "/v2/webhook".into(),
                remaining: Some(3),
            }));
            let options = Options {
                batch_size,
                ..Options::default()
            };
            let report = run(&client, records.clone(), options).await;
            assert_eq!(
                report.accepted,
                30,
                "{mode:?}: {:?}",
                report.failures.first()
            );
            assert_eq!(stored(&h, "us").len(), 30, "{mode:?}");
            assert!(report.retries >= 3, "{mode:?}: {}", report.retries);
        }
    }
}

#[tokio::test]
async fn a_proxy_that_never_lets_through_leaves_every_record_unconfirmed_with_its_answer() {
    let h = emulator().await;
    let client = client_for(&h, Limits::unlimited(), 1);
    h.state.set_hostile(Some(HostileRule {
        mode: Hostile::Html,
        path: "/v2/webhook".into(),
        remaining: None,
    }));
    let records: Vec<Value> = (0..5).map(|i| retail(&format!("p-{i}"), 1.0)).collect();
    let report = run(&client, records, Options::default()).await;
    assert_eq!(report.accepted, 0);
    assert_eq!(report.failures.len(), 5);
    assert_eq!(h.state.published_len(), 0);
    for f in &report.failures {
        assert_eq!(f.kind, FailureKind::Unconfirmed);
        assert!(f.message.contains("not the API's"), "{}", f.message);
        assert!(f.message.contains("<html>"), "{}", f.message);
        assert!(f.record.is_some());
    }
}

#[tokio::test]
async fn a_webhook_that_stays_rate_limited_stops_with_a_rate_limit_error() {
    let h = emulator().await;
    h.state.set_hostile(Some(HostileRule {
        mode: Hostile::Status(429),
        path: "/v2/webhook".into(),
        remaining: None,
    }));
    let client = client_for(&h, Limits::unlimited(), 0);
    let records: Vec<Value> = (0..400).map(|i| retail(&format!("r-{i}"), 1.0)).collect();
    let report = run(&client, records, Options::default()).await;
    assert_eq!(report.accepted, 0);
    match &report.error {
        Some(Error::Status {
            status: 429,
            message,
            ..
        }) => {
            assert!(message.contains("publishing stopped"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn auto_batches_fall_back_to_one_record_per_body_when_arrays_are_refused() {
    let h = emulator().await;
    h.state.set_webhook_arrays(false);
    let client = client_for(&h, Limits::unlimited(), 2);
    let records: Vec<Value> = (0..250).map(|i| retail(&format!("a-{i}"), 1.0)).collect();
    let report = run(&client, records.clone(), Options::default()).await;
    assert_eq!(report.accepted, 250, "{:?}", report.failures.first());
    assert_eq!(stored(&h, "us").len(), 250);
    assert_eq!(client.webhook_arrays(), Arrays::Refused);
    // Found out once: the next publish posts one record per body from the start.
    h.state.clear_published();
    let again = run(&client, records[..20].to_vec(), Options::default()).await;
    assert_eq!((again.accepted, again.requests), (20, 20));
    // A service that takes arrays: 250 records in 3 requests.
    h.state.set_webhook_arrays(true);
    let fresh = client_for(&h, Limits::unlimited(), 2);
    let report = run(&fresh, records, Options::default()).await;
    assert_eq!((report.accepted, report.requests), (250, 3));
}

#[tokio::test]
async fn a_refusal_that_names_its_bad_record_costs_one_request() {
    let h = emulator().await;
    let client = client_for(&h, Limits::unlimited(), 2);
    let mut records: Vec<Value> = (0..100).map(|i| retail(&format!("q-{i}"), 1.0)).collect();
    records[0]["registerId"] = json!("r-1");
    let options = Options {
        validate: false,
        ..Options::default()
    };
    let report = run(&client, records, options).await;
    assert_eq!((report.accepted, report.requests), (99, 1));
    assert_eq!(report.failures[0].index, 0);
    assert_eq!(report.failures[0].status, Some(400));
    assert!(!report.failures[0].problems.is_empty());
    assert_eq!(stored(&h, "us").len(), 99);
    // The refusal named the record: nothing was learnt of arrays, nothing more was sent.
    assert_eq!(client.webhook_arrays(), Arrays::Unknown);
}

#[tokio::test]
async fn jsonl_source_numbers_records_and_lines() {
    let dir = std::env::temp_dir().join(format!("sv-publish-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("records.jsonl");
    let mut bytes = "\u{feff}{\"a\":1}\n\n  {\"b\":2}\r\n{\"c\":\n"
        .as_bytes()
        .to_vec();
    bytes.extend_from_slice(b"{\"e\":\"\xff\"}\n{\"d\":4}");
    std::fs::write(&path, bytes).expect("write");
    let (mut rx, feeder) = jsonl_source(path.clone(), false);
    let mut got = Vec::new();
    while let Some(chunk) = rx.recv().await {
        for input in chunk {
            match input {
                Input::Ready {
                    index, line, text, ..
                } => got.push((index, line, String::from_utf8_lossy(&text).into_owned())),
                Input::Rejected {
                    index,
                    line,
                    problems,
                    ..
                } => got.push((index, line, problems[0].message.clone())),
                _ => panic!("unexpected input"),
            }
        }
    }
    feeder.await.expect("join").expect("read");
    assert_eq!(got.len(), 5, "{got:?}");
    assert_eq!(got[0], (0, Some(1), "{\"a\":1}".to_owned()));
    assert_eq!(got[1], (1, Some(3), "{\"b\":2}".to_owned()));
    assert_eq!((got[2].0, got[2].1), (2, Some(4)));
    assert!(got[2].2.starts_with("not valid JSON"), "{got:?}");
    assert_eq!((got[3].0, got[3].1), (3, Some(5)));
    assert!(got[3].2.contains("not UTF-8"), "{got:?}");
    assert_eq!(got[4], (4, Some(6), "{\"d\":4}".to_owned()));
    let _ = std::fs::remove_dir_all(&dir);
    let (_rx, feeder) = jsonl_source(dir.join("missing.jsonl"), true);
    assert!(feeder.await.expect("join").is_err());
}

#[tokio::test]
async fn a_large_file_keeps_its_order_across_blocks_and_workers() {
    let dir = std::env::temp_dir().join(format!("sv-publish-big-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("records.jsonl");
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&retail(&format!("b-{i}"), f64::from(i)).to_string());
        text.push('\n');
        if i % 7 == 0 {
            text.push_str("   \n");
        }
    }
    std::fs::write(&path, &text).expect("write");
    let (mut rx, feeder) = jsonl_source(path, true);
    let mut next = 0u64;
    while let Some(chunk) = rx.recv().await {
        for input in chunk {
            let Input::Ready { index, key, .. } = input else {
                panic!("a valid record refused")
            };
            assert_eq!(index, next);
            assert_eq!(
                key,
                surveillance::webhook::models::RETAIL_MODEL
                    .key_hash(|_| Some(format!("b-{index}")))
            );
            next += 1;
        }
    }
    feeder.await.expect("join").expect("read");
    assert_eq!(next, 20_000);
    let _ = std::fs::remove_dir_all(&dir);
}
