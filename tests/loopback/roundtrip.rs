//! Round trips of the pure Rust client against the emulator, with no Python: every event of a
//! range exactly once under each order and bound semantics, past the offset ceiling.

use arrow_select::concat::concat_batches;
use surveillance::client::arrow::Layout;
use surveillance::client::config::DEFAULT_MAX_RETRIES;
use surveillance::client::events::{fetch_all, fetch_batches, Event, Query};
use surveillance::client::{Client, Error, Limits};
use surveillance::emulator::{Bounds, Faults, Handle, Order};

use crate::common;

async fn emulator(events_per_day: u64, days: u32) -> Handle {
    common::emulator(7, 10, days, events_per_day).await
}

fn client_for(h: &Handle, limits: Limits) -> Client {
    common::client_for(h, limits, DEFAULT_MAX_RETRIES)
}

fn whole(h: &Handle) -> Query {
    let d = h.state.data();
    Query {
        start_ms: d.start_ms,
        end_ms: d.end_ms,
        report_id: None,
        partial: false,
        refresh: false,
    }
}

async fn check_exact(h: &Handle, q: Query) -> usize {
    let client = client_for(
        h,
        Limits {
            read_concurrency: Some(8),
            ..Limits::unlimited()
        },
    );
    let got = fetch_all(client.clone(), q.clone(), None)
        .await
        .expect("fetch");
    let ids: Vec<String> = got.iter().map(|e| e.id.clone()).collect();
    let want = h.state.data().truth(q.start_ms, q.end_ms, None);
    assert_eq!(ids.len(), want.len(), "count");
    assert_eq!(ids, want, "ids in (startTime, id) order");
    let requests = client
        .stats()
        .requests
        .get("GET /v2/events")
        .copied()
        .unwrap_or(0) as usize;
    // The Arrow fetch (each page parsed into rows as it arrives, windows put in order) holds
    // exactly the table built from the texts of the same events.
    let batches = fetch_batches(client, q, None).await.expect("arrow fetch");
    let layout = Layout::events();
    let table = concat_batches(&layout.schema(), &batches).expect("concat");
    let expected = layout
        .batch(got.iter().map(Event::text))
        .expect("table of texts");
    assert_eq!(table, expected, "Arrow fetch");
    requests
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_for_every_order_and_bounds() {
    let h = emulator(12_000, 2).await;
    let q = whole(&h);
    for order in [Order::Asc, Order::Desc, Order::Shuffled] {
        for bounds in ["[)", "[]", "()"] {
            let b = Bounds::parse(bounds).expect("bounds");
            h.state.set_semantics(order, b);
            eprintln!("{order:?} {bounds}");
            check_exact(&h, q.clone()).await;
        }
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ascending_is_economical() {
    let h = emulator(25_000, 2).await;
    let q = whole(&h);
    let n = h.state.data().truth(q.start_ms, q.end_ms, None).len();
    let requests = check_exact(&h, q).await;
    let ideal = n.div_ceil(100);
    assert!(
        requests as f64 <= ideal as f64 * 1.02 + 2.0 * 7.0,
        "{requests} requests for {n} events"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dense_millisecond() {
    let h = emulator(3_000, 1).await;
    let at = h.state.data().start_ms + 3_600_000;
    h.state.data_mut().add_events(at, 9_999, Some(0));
    let q = Query {
        start_ms: at - 60_000,
        end_ms: at + 60_000,
        report_id: None,
        partial: false,
        refresh: false,
    };
    check_exact(&h, q.clone()).await;
    h.state.data_mut().add_events(at, 2, Some(0));
    let client = client_for(
        &h,
        Limits {
            read_concurrency: Some(8),
            ..Limits::unlimited()
        },
    );
    let err = fetch_all(client, q, None).await.expect_err("too dense");
    assert!(matches!(err, Error::DenseWindow { .. }), "{err}");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_under_faults() {
    let h = emulator(15_000, 1).await;
    h.state.set_faults(Faults {
        error_rate: 0.1,
        rate_limit_rate: 0.1,
        drop_rate: 0.05,
        latency_ms: 0,
        retry_after: 0,
        ..Faults::default()
    });
    check_exact(&h, whole(&h)).await;
    h.stop().await;
}
