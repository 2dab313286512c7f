//! One page of events: asking for it (or taking it from what a plan or a quota check held),
//! parsing it into keyed events and their Arrow rows, and the order its times are in.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::held::{CARRIED_FOR, CHECKED_FOR, HELD_FOR};
use crate::client::error::{Error, Result};
use crate::client::http::Call;
use crate::client::lists::{page_error, PAGE};
use crate::client::Client;
use crate::time::{format_ms, parse_time};

/// 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: the range of the service's format.
pub(super) const MIN_MS: i64 = -62_135_596_800_000;
pub(super) const MAX_MS: i64 = 253_402_300_799_999;

/// One event: its sort key and the JSON the service sent.
#[derive(Debug)]
pub struct Event {
    /// startTime, Unix epoch milliseconds.
    pub start_ms: i64,
    /// Event id.
    pub id: String,
    /// The event's JSON text as the service sent it: a view into its page's body (shared, not
    /// copied), always valid UTF-8. Empty when the fetch keeps Arrow rows instead.
    pub(super) raw: Bytes,
    /// Where its Arrow row is: index of its page's batch in the window, and row in it.
    pub(super) page: u32,
    pub(super) row: u32,
}

/// What a fetch keeps of each event besides its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventForm {
    /// Its JSON text (for dicts).
    Text,
    /// A row of its page's Arrow record batch, built from the body in one pass.
    Arrow,
}

/// The events of one page, and their Arrow rows when the fetch keeps them.
#[derive(Debug)]
pub struct Page {
    pub(super) events: Vec<Event>,
    pub(super) batch: Option<RecordBatch>,
    /// Taken from what a plan or a quota check held (see [`Held`]): no request was sent for it
    /// by the fetch itself.
    pub(super) held: bool,
    /// Read by an earlier run of a sync that stopped, and carried to this one.
    pub(super) carried: bool,
    /// The page's body, kept until its window completes when the window may be cached (or
    /// carried to the next run).
    pub(super) body: Option<Bytes>,
}

/// A completed window: its events sorted by (startTime, id), and the record batches of its
/// pages their Arrow rows are in (none when the fetch keeps text).
#[derive(Debug, Default)]
pub struct Completed {
    /// The window's events, in order.
    pub events: Vec<Event>,
    pub(super) batches: Vec<RecordBatch>,
    /// The end of the window (exclusive): every event of the query before it has been sent.
    pub until_ms: i64,
}

impl Completed {
    /// The window's events as one record batch, in order (a fetch that keeps Arrow rows).
    pub fn record_batch(&self) -> Result<RecordBatch> {
        if self.events.is_empty() {
            return Ok(RecordBatch::new_empty(crate::client::arrow::events_schema()));
        }
        let batches: Vec<&RecordBatch> = self.batches.iter().collect();
        let rows: Vec<(usize, usize)> = self
            .events
            .iter()
            .map(|e| (e.page as usize, e.row as usize))
            .collect();
        arrow_select::interleave::interleave_record_batch(&batches, &rows)
            .map_err(|e| Error::Data(format!("cannot assemble a window of events: {e}")))
    }
}

impl Event {
    /// The event's JSON text, as the service sent it.
    pub fn text(&self) -> &str {
        // `raw` was cut from a `&str` at character boundaries, so this never fails.
        std::str::from_utf8(&self.raw).unwrap_or_default()
    }
}

#[derive(Deserialize)]
struct Key<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(rename = "startTime", borrow)]
    start_time: Cow<'a, str>,
}

/// Splits a page of events into keyed events, each a view into `body`.
pub fn parse_events(url: &url::Url, body: &Bytes) -> Result<Vec<Event>> {
    let raws: Vec<&RawValue> =
        serde_json::from_slice(body).map_err(|e| page_error(url, body, e))?;
    let base = body.as_ptr() as usize;
    let mut out = Vec::with_capacity(raws.len());
    for raw in raws {
        let text = raw.get();
        // A well-formed page with a bad event is the service's data, not a garbled answer:
        // `Data` is not retried (a `Decode` error of the page is).
        let key: Key = serde_json::from_str(text).map_err(|e| {
            Error::Data(format!(
                "an event of `{}` has no string `id` and `startTime` ({e})",
                url.path()
            ))
        })?;
        let start_ms = parse_time(&key.start_time).ok_or_else(|| {
            Error::Data(format!(
                "event `{}` of `{}` has a `startTime` that is not ISO 8601: `{}`",
                key.id,
                url.path(),
                key.start_time
            ))
        })?;
        let id = key.id.into_owned();
        // A borrowed RawValue is a slice of `body`: its place there is its address's distance.
        let at = (text.as_ptr() as usize).saturating_sub(base);
        out.push(Event {
            start_ms,
            id,
            raw: body.slice(at..at + text.len()),
            page: 0,
            row: u32::try_from(out.len()).unwrap_or(u32::MAX),
        });
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageOrder {
    Asc,
    Desc,
    Constant,
    Unsorted,
}

pub(crate) fn order_of(times: impl Iterator<Item = i64>) -> PageOrder {
    let (mut up, mut down) = (false, false);
    let mut prev: Option<i64> = None;
    for t in times {
        if let Some(p) = prev {
            up |= t > p;
            down |= t < p;
        }
        prev = Some(t);
    }
    match (up, down) {
        (true, true) => PageOrder::Unsorted,
        (true, false) => PageOrder::Asc,
        (false, true) => PageOrder::Desc,
        (false, false) => PageOrder::Constant,
    }
}

/// Whether a full page in `order` (of `len` events) hides which events of its query come
/// first: it is neither ascending nor of one millisecond. A peek at such a service's first
/// page tells nothing.
pub(super) fn hides_first(order: PageOrder, len: usize) -> bool {
    len >= PAGE && !matches!(order, PageOrder::Asc | PageOrder::Constant)
}

/// Whether a page read is kept for a later fetch (see [`Held`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reuse {
    /// A fetch's page: a held body of the same query is used instead of a request.
    No,
    /// A plan's probe: held for the fetch that follows when its range has settled.
    Settled,
    /// A fetch's quota check: held for that fetch, which asks it next.
    Next,
}

/// One page of the window `[qs, qe)`, held or taken as `hold` says, counting in `sent` (when
/// given) each request sent for it: a fetch that stops waits only for the answers of the
/// requests that have gone.
#[allow(clippy::too_many_arguments)]
pub(super) async fn fetch_page(
    client: &Client,
    qs: i64,
    qe: i64,
    report: Option<&str>,
    offset: usize,
    keep: EventForm,
    hold: Reuse,
    sent: Option<Arc<AtomicU64>>,
) -> Result<Page> {
    let url = page_url(client, qs, qe, report, offset);
    let settled = settled(qs, qe, settled_before(client));
    let ttl = match hold {
        Reuse::Settled if settled => Some(HELD_FOR),
        Reuse::Next => Some(CHECKED_FOR),
        _ => None,
    };
    let taken = client.held().take(url.as_str());
    if let Some((body, carried)) = taken {
        if hold != Reuse::No {
            // A count before its fetch: the page stays for the fetch (a carried one as long
            // as it was to).
            let ttl = match carried {
                Some(_) => CARRIED_FOR,
                None => ttl.unwrap_or(CHECKED_FOR),
            };
            client
                .held()
                .put(url.to_string(), body.clone(), ttl, carried.clone());
        }
        let mut page = parse_page(&url, body, keep)?;
        page.held = true;
        page.carried = carried.is_some();
        return Ok(page);
    }
    // The page is parsed as it is received, so that an answer that is not a page of events (a
    // proxy's HTML, a cut body) is retried like a failed request.
    let (page, body) = client
        .http()
        .send_checked(
            &Call {
                sent,
                ..Call::get(url.clone(), "GET /v2/events")
            },
            |body| Ok((parse_page(&url, body.clone(), keep)?, body)),
        )
        .await?;
    if let Some(o) = crate::client::scope::observer() {
        let rows = page.batch.as_ref().map_or(0, |b| b.num_rows());
        o.events(page.events.len().max(rows) as u64);
    }
    if let Some(ttl) = ttl {
        client.held().put(url.to_string(), body, ttl, None);
    }
    Ok(page)
}

/// The bounds the window `[qs, qe)` is queried with: widened by 1 ms on both sides, so that
/// inclusive and exclusive bounds give the same events once filtered; never past the dates the
/// service's format can write.
pub(super) fn widened(qs: i64, qe: i64) -> (i64, i64) {
    ((qs - 1).max(MIN_MS), (qe + 1).min(MAX_MS))
}

/// Whether the window queried as `[qs, qe)` has settled: its widened query ends before
/// `cutoff` (see [`settled_before`]).
pub(super) fn settled(qs: i64, qe: i64, cutoff: i64) -> bool {
    widened(qs, qe).1 < cutoff
}

/// The time of a query `[qs, qe)` that pages in `order` have covered, up to their last event's
/// startTime `last`, and the time left past it: ascending from `qs`, descending from `qe`. None
/// in another order, which tells no density.
pub(super) fn covered(order: PageOrder, last: i64, qs: i64, qe: i64) -> Option<(i64, i64)> {
    match order {
        PageOrder::Asc => Some((last - qs + 1, qe - last)),
        PageOrder::Desc => Some((qe - last, last - qs)),
        _ => None,
    }
}

/// The events a query `[qs, qe)` holds in all, projected from the `held` events of its pages
/// in `order` up to their last event's startTime `last`, at their density over the time they
/// covered (the query widened, as it is asked). None in another order, which tells no density.
pub(super) fn projected(order: PageOrder, held: f64, last: i64, qs: i64, qe: i64) -> Option<f64> {
    let (covered, _) = covered(order, last, qs, qe)?;
    Some(held * (qe - qs + 2) as f64 / covered.max(1) as f64)
}

/// The URL of the page at `offset` of the window `[qs, qe)`, queried [`widened`].
pub(super) fn page_url(
    client: &Client,
    qs: i64,
    qe: i64,
    report: Option<&str>,
    offset: usize,
) -> url::Url {
    let (qs, qe) = widened(qs, qe);
    let mut url = client.config().url("/v2/events");
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("startTime", &format_ms(qs));
        q.append_pair("endTime", &format_ms(qe));
        if let Some(r) = report {
            q.append_pair("reportId", r);
        }
        if offset > 0 {
            q.append_pair("offset", &offset.to_string());
        }
    }
    url
}

/// Puts a window's events in the order a fetch gives them: an event seen on two pages (the
/// service's order shifted between them) kept once, as first seen, and all sorted by
/// (startTime, id).
pub(super) fn in_order(events: &mut Vec<Event>) {
    let mut seen = HashSet::with_capacity(events.len());
    let first: Vec<bool> = events.iter().map(|e| seen.insert(e.id.as_str())).collect();
    drop(seen);
    let mut first = first.into_iter();
    events.retain(|_| first.next().unwrap_or(true));
    events.sort_unstable_by(|a, b| (a.start_ms, &a.id).cmp(&(b.start_ms, &b.id)));
}

/// Now, Unix epoch milliseconds.
pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A page's events, and its typed rows unless only the texts are kept.
pub(super) fn parse_page(url: &url::Url, body: Bytes, keep: EventForm) -> Result<Page> {
    if keep == EventForm::Text {
        return Ok(Page {
            events: parse_events(url, &body)?,
            batch: None,
            held: false,
            carried: false,
            body: Some(body),
        });
    }
    // One pass over the body into typed rows; a page it cannot take (a value of the wrong type,
    // a missing key) goes the careful way, which says what is wrong.
    let (events, batch) = match crate::client::arrow::event_page(&body) {
        Some((batch, keys)) => {
            let events = keys
                .into_iter()
                .enumerate()
                .map(|(row, (start_ms, id))| Event {
                    start_ms,
                    id,
                    raw: Bytes::new(),
                    page: 0,
                    row: u32::try_from(row).unwrap_or(u32::MAX),
                })
                .collect();
            (events, batch)
        }
        None => {
            let events = parse_events(url, &body)?;
            let batch = crate::client::arrow::Layout::events()
                .batch_checked(events.iter().map(Event::text))?;
            (events, batch)
        }
    };
    Ok(Page {
        events,
        batch: Some(batch),
        held: false,
        carried: false,
        body: Some(body),
    })
}

/// Events that started before this instant (epoch ms) are settled: the client's settle
/// period before now.
pub(super) fn settled_before(client: &Client) -> i64 {
    now_ms().saturating_sub(client.config().settle_ms)
}
