//! Tokens that the service ends after a few requests, over loopback: each renewal costs at most
//! two requests (the token request, and a post refused with the ended token), whichever way the
//! service refuses an ended token, on one client or several; the report counts the posts sent
//! again, the quota's ledger every request.

use serde_json::{json, Value};
use surveillance::client::publish::{values_source, Options, Report};
use surveillance::client::{Client, Limits};
use surveillance::emulator::dialect::ExpiredToken;
use surveillance::emulator::{Dialect, Handle};
use tokio::sync::watch;

use crate::common;

const RECORDS: u64 = 300;

const ONE_PER_BODY: Options = Options {
    region: None,
    batch_size: 1,
    fallback: false,
    validate: true,
};

fn records(client: usize) -> Vec<Value> {
    (0..RECORDS)
        .map(|i| {
            json!({
                "dataType": "retail", "schemaVersion": "1",
                "startTime": 1_794_891_600_000_i64, "endTime": 1_794_891_660_000_i64,
                "locationId": "store-1", "dataSourceId": "pos-1",
                "transactionId": format!("c{client}-{i}"), "status": "sale",
                "items": [{"time": 1_794_891_600_000_i64, "quantity": 1, "description": "tea",
                           "unitPrice": 1.0, "type": "SALE"}],
            })
        })
        .collect()
}

async fn publish(client: &Client, records: Vec<Value>) -> Report {
    let (rx, _feeder) = values_source(records);
    let (_tx, cancel) = watch::channel(false);
    client
        .publish(rx, ONE_PER_BODY, None, cancel)
        .await
        .expect("publish")
}

/// Requests the emulator received on `route`, whatever it answered.
fn received(h: &Handle, route: &str) -> u64 {
    let stats = h.state.stats_json();
    stats["requests"][route].as_object().map_or(0, |by_status| {
        by_status.values().filter_map(Value::as_u64).sum()
    })
}

/// `clients` clients of one emulator publish 300 records each at once, one per body, with tokens
/// that the service ends after `uses` requests and refuses as `how` says.
async fn ended_tokens(uses: u64, how: ExpiredToken, clients: usize) {
    let h = common::emulator(5, 1, 1, 10).await;
    h.state.set_dialect(Dialect {
        expired_token: how,
        token_requests: Some(uses),
        ..Dialect::default()
    });
    let all: Vec<Client> = (0..clients)
        .map(|_| common::client_for(&h, Limits::unlimited(), 3))
        .collect();
    let tasks: Vec<_> = all
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let c = c.clone();
            tokio::spawn(async move { publish(&c, records(i)).await })
        })
        .collect();
    let mut reports = Vec::new();
    for task in tasks {
        reports.push(task.await.expect("publish task"));
    }
    let case = format!("a token of {uses} requests, refused as {how:?}, {clients} client(s)");
    let mut posts = 0;
    let mut tokens = 0;
    for (client, report) in all.iter().zip(&reports) {
        let stats = client.stats();
        let token_requests = stats.requests["POST /v2/oauth/token"];
        let renewals = token_requests - 1;
        // Every record accepted once, and no error: an ended token is never taken for refused
        // credentials.
        assert!(report.error.is_none(), "{case}: {:?}", report.error);
        assert_eq!((report.accepted, report.sent), (RECORDS, RECORDS), "{case}");
        // Every request counted, the posts and the token requests: each renewal costs at most
        // two (not every post in flight refused and sent again at each renewal).
        assert!(
            report.requests + token_requests <= RECORDS + 2 * renewals,
            "{case}: {} posts and {token_requests} token requests",
            report.requests
        );
        // Every post past the records' own was sent again after a refusal, and counts as a
        // retry.
        assert_eq!(report.retries, report.requests - RECORDS, "{case}");
        // The quota's ledger counts every request that left: the posts and the token requests.
        assert_eq!(
            client.quota().used,
            report.requests + token_requests,
            "{case}"
        );
        posts += report.requests;
        tokens += token_requests;
    }
    // The emulator received what the clients counted, and stored each record once.
    assert_eq!(received(&h, "POST /v2/webhook"), posts, "{case}");
    assert_eq!(received(&h, "POST /v2/oauth/token"), tokens, "{case}");
    assert_eq!(
        h.state.daily_json()["used"].as_u64(),
        Some(posts + tokens),
        "{case}"
    );
    assert_eq!(
        h.state.published(None).len() as u64,
        RECORDS * clients as u64,
        "{case}"
    );
    eprintln!("{case}: {posts} posts, {tokens} token requests");
}

#[tokio::test]
async fn a_token_that_ends_after_a_few_posts_costs_at_most_two_requests_a_renewal() {
    for uses in [20, 7, 3] {
        ended_tokens(uses, ExpiredToken::Status401, 1).await;
    }
}

#[tokio::test]
async fn every_refusal_of_an_ended_token_costs_the_same() {
    for how in [ExpiredToken::Message403, ExpiredToken::WwwAuthenticate403] {
        ended_tokens(7, how, 1).await;
    }
}

#[tokio::test]
async fn several_clients_of_one_process_renew_their_own_tokens_as_cheaply() {
    ended_tokens(7, ExpiredToken::Status401, 3).await;
}
