//! The entry points that the bindings call: a fetch streamed window by window (a sync's,
//! which carries what it read when it stops early), all of it at once or as Arrow batches, a
//! peek at its first page. A fetch under a daily quota is checked first
//! (`count::quota_check_gaps`); then its driver (`run`) runs its planner.

use tokio::sync::{mpsc, watch};

use super::count::quota_check_gaps;
use super::files::pieces;
use super::page::{fetch_page, hides_first, in_order, Reuse};
use super::run::Driver;
use super::{
    check, order_of, CarrySlot, Completed, Event, EventForm, Goal, PageOrder, ProgressSink, Query,
};
use crate::client::cache::Piece;
use crate::client::error::{Error, Result};
use crate::client::lists::PAGE;
use crate::client::scope;
use crate::client::Client;

/// How long a stopped sync's fetch waits for the answers of the requests it had in flight (see
/// [`stream_carrying`]).
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// Fetches every event of the query, sending each completed window (sorted, in time order) to
/// `tx`. Stops early, without error, when the receiver is dropped.
pub async fn stream(
    client: Client,
    query: Query,
    keep: EventForm,
    tx: mpsc::Sender<Result<Completed>>,
    sink: Option<ProgressSink>,
) {
    run_stream(client, query, keep, tx, sink, None).await;
}

/// A sync's `stream`, which carries what it read to its next run when it stops early: once
/// `stop` turns true (Ctrl-C) it asks nothing more, waits at most [`STOP_GRACE`] for the
/// answers of the requests in flight (each is paid for already), and ends; the windows it
/// sent before are the caller's to keep. Stopped so, or by the daily quota, an error or being
/// dropped, it puts the pages it read of the windows it did not send in `slot` (see
/// [`super::carry`]).
pub async fn stream_carrying(
    client: Client,
    query: Query,
    keep: EventForm,
    tx: mpsc::Sender<Result<Completed>>,
    sink: Option<ProgressSink>,
    slot: CarrySlot,
    stop: watch::Receiver<bool>,
) {
    run_stream(client, query, keep, tx, sink, Some((slot, stop))).await;
}

async fn run_stream(
    client: Client,
    query: Query,
    keep: EventForm,
    tx: mpsc::Sender<Result<Completed>>,
    sink: Option<ProgressSink>,
    carry: Option<(CarrySlot, watch::Receiver<bool>)>,
) {
    let checked = match check(&query) {
        Ok(()) => quota_check_gaps(&client, &query).await,
        Err(e) => Err(e),
    };
    let (checking, pieces) = match checked {
        Ok(checked) => checked,
        Err(e) => {
            let _ = tx.send(Err(e)).await;
            return;
        }
    };
    let mut d = Driver::new(client, &query, keep, sink, Goal::Fetch, pieces);
    d.count_checked(checking);
    let mut stop = carry.map(|(slot, stop)| {
        d.carry_to(slot);
        stop
    });
    loop {
        let stepped = match &mut stop {
            // A stop said, or its sender gone (the stream dropped): stopped.
            Some(stop) => tokio::select! {
                biased;
                _ = stop.wait_for(|stopped| *stopped) => None,
                stepped = d.step() => Some(stepped),
            },
            None => Some(d.step().await),
        };
        let Some(stepped) = stepped else {
            d.stop_carrying(STOP_GRACE).await;
            return;
        };
        let ready = match stepped {
            Ok(Some(ready)) => ready,
            Ok(None) => {
                d.finish();
                return;
            }
            Err(e) => {
                if matches!(e, Error::Quota { .. }) {
                    if let Some(prefix) = d.stop_at_quota() {
                        let _ = tx.send(Ok(prefix)).await;
                    }
                }
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        for window in ready {
            if tx.send(Ok(window)).await.is_err() {
                return;
            }
        }
        // The sink keeps the latest update for the caller to read when it looks: cheap.
        d.report();
    }
}

/// A spawned task that is aborted when its owner is dropped: a fetch whose caller went away
/// (Ctrl-C, a cancelled awaitable) stops its requests at once instead of at its next send.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `stream` of the query in a task of its own, sending its windows to `tx`, stopped when the
/// handle answered is dropped.
fn spawn_stream(
    client: Client,
    query: Query,
    keep: EventForm,
    tx: mpsc::Sender<Result<Completed>>,
    sink: Option<ProgressSink>,
) -> AbortOnDrop {
    AbortOnDrop(tokio::spawn(scope::inherit(stream(
        client, query, keep, tx, sink,
    ))))
}

/// Every event of the query, sorted by (startTime, id).
pub async fn fetch_all(
    client: Client,
    query: Query,
    sink: Option<ProgressSink>,
) -> Result<Vec<Event>> {
    let (tx, mut rx) = mpsc::channel(64);
    let _producer = spawn_stream(client, query, EventForm::Text, tx, sink);
    let mut all = Vec::new();
    while let Some(window) = rx.recv().await {
        all.extend(window?.events);
    }
    Ok(all)
}

/// As `stream`, but each completed window is sent as one Arrow record batch: each page is
/// parsed into rows as it arrives, and a window's rows are put in order when it completes.
pub async fn stream_batches(
    client: Client,
    query: Query,
    tx: mpsc::Sender<Result<arrow_array::RecordBatch>>,
    sink: Option<ProgressSink>,
) {
    let (etx, mut erx) = mpsc::channel(2);
    let _producer = spawn_stream(client, query, EventForm::Arrow, etx, sink);
    while let Some(window) = erx.recv().await {
        let batch = window.and_then(|w| w.record_batch());
        let failed = batch.is_err();
        if tx.send(batch).await.is_err() || failed {
            break;
        }
    }
}

/// The first page of a fetch of `query`, asked ahead of it and held for it (a fetch of the
/// same query that follows takes it instead of asking again), with the events it shows to be
/// the query's first: all of the page's range when the page is short; those before its last
/// event's startTime when the service sorts them ascending (the page is then the range's
/// first); none otherwise. It asks nothing when the cache holds the query's start, or when
/// this client found the service's order to be another (a peek would tell nothing).
/// `until_ms` is where the events given end: every event of the query before it is among
/// them. This lets a reader that may want only the first rows (a lazy scan's `head`) stop
/// after one request, without a request more when it reads everything. With them, the events
/// a millisecond of a full page sorted descending (the query's last 100), where the page
/// showed that order: what sizes a first part that such a reader fetches on its own.
pub async fn peek(
    client: &Client,
    query: &Query,
    keep: EventForm,
) -> Result<(Completed, Option<f64>)> {
    check(query)?;
    let none = Completed {
        until_ms: query.start_ms,
        ..Completed::default()
    };
    let untold = {
        let shape = client.shape();
        shape.unsorted || shape.unpeekable
    };
    if untold {
        return Ok((none, None));
    }
    let (lo, hi) = match pieces(client, query).first() {
        Some(Piece::Gap(lo, hi)) if *lo == query.start_ms => (*lo, *hi),
        _ => return Ok((none, None)),
    };
    let report = query.report_id.as_deref();
    let page = fetch_page(client, lo, hi, report, 0, keep, Reuse::Next, None).await?;
    let order = order_of(page.events.iter().map(|e| e.start_ms));
    let until = if page.events.len() < PAGE {
        hi
    } else if order == PageOrder::Asc {
        page.events.last().map_or(lo, |e| e.start_ms)
    } else {
        // A page of one millisecond says nothing of the order; another order does.
        client.shape().unpeekable |= hides_first(order, page.events.len());
        client.keep_shape();
        let span = match (page.events.first(), page.events.last()) {
            (Some(first), Some(last)) if order == PageOrder::Desc => first.start_ms - last.start_ms,
            _ => 0,
        };
        let density = (span > 0).then(|| (page.events.len() - 1) as f64 / span as f64);
        return Ok((none, density));
    };
    let mut events: Vec<Event> = page
        .events
        .into_iter()
        .filter(|e| e.start_ms >= lo && e.start_ms < until)
        .collect();
    in_order(&mut events);
    let first = Completed {
        events,
        batches: page.batch.into_iter().collect(),
        until_ms: until,
    };
    Ok((first, None))
}

/// Every event of the query as Arrow record batches (one per window), in order.
pub async fn fetch_batches(
    client: Client,
    query: Query,
    sink: Option<ProgressSink>,
) -> Result<Vec<arrow_array::RecordBatch>> {
    let (tx, mut rx) = mpsc::channel(64);
    let _producer = AbortOnDrop(tokio::spawn(scope::inherit(stream_batches(
        client, query, tx, sink,
    ))));
    let mut all = Vec::new();
    while let Some(batch) = rx.recv().await {
        all.push(batch?);
    }
    Ok(all)
}
