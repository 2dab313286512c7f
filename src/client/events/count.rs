//! Counting a fetch's events without fetching them (the plan's count, see [`count`]), and the
//! quota check built on it, which refuses a fetch the day's quota cannot hold before it spends
//! anything.

use super::files::pieces;
use super::page::{fetch_page, projected, Page, Reuse};
use super::run::{event_requests, sent_since, Driver};
use super::{
    check, order_of, requests_for, Count, EventForm, Goal, ProgressSink, Query, CEILING_PAGE,
};
use crate::client::cache::Piece;
use crate::client::error::{Error, Result, Wording};
use crate::client::lists::{OFFSET_CEILING, PAGE};
use crate::client::Client;
use crate::text::thousands;

/// The pieces of a fetch's range (see [`pieces`]), each gap checked by [`quota_check`]; the
/// requests the checks sent: at most a tenth of what is left of today's quota (one request
/// when fewer than ten are left), and none when the density of the events kept of earlier
/// fetches (see [`density_seen`]) tells that the gaps need more than is left, or less than
/// half of it.
pub(super) async fn quota_check_gaps(client: &Client, query: &Query) -> Result<(u64, Vec<Piece>)> {
    let pieces = pieces(client, query);
    let gaps: Vec<Query> = pieces
        .iter()
        .filter_map(|piece| match piece {
            Piece::Gap(lo, hi) => Some(Query {
                start_ms: *lo,
                end_ms: *hi,
                ..query.clone()
            }),
            Piece::Held(..) => None,
        })
        .collect();
    let quota = client.quota();
    let (Some(limit), Some(remaining)) = (quota.limit, quota.remaining) else {
        return Ok((0, pieces));
    };
    if query.partial || gaps.is_empty() {
        return Ok((0, pieces));
    }
    if let Some(density) = density_seen(client, query.report_id.as_deref()) {
        let events: f64 = gaps
            .iter()
            .map(|g| density * (g.end_ms - g.start_ms) as f64)
            .sum();
        let needed = requests_for(events, gaps.len());
        if needed > remaining {
            let about = needs("about", needed, events);
            return Err(refusal(client, &about, limit, remaining));
        }
        if needed * 2 < remaining {
            return Ok((0, pieces));
        }
    }
    let budget = (remaining / CHECK_SHARE).max(1);
    let mut sent = 0;
    for gap in &gaps {
        sent += quota_check(client, gap, budget.saturating_sub(sent)).await?;
    }
    Ok((sent, pieces))
}

/// A quota check spends at most this share of what is left (one request when less).
const CHECK_SHARE: u64 = 10;

/// The error that refuses a fetch: it needs `needs` (\"about 60 requests (about 6,000
/// events)\"), with `remaining` of today's `limit` left before its check.
fn refusal(client: &Client, needs: &str, limit: u64, remaining: u64) -> Error {
    let quota = client.quota();
    let left = quota.remaining.unwrap_or(remaining);
    let when = crate::client::quota::reset_time(quota.resets_at_ms);
    Error::Quota {
        message: Wording::new()
            .text(format!(
                "this fetch needs {needs}, more than the {left} left of today's {limit}; nothing \
                 was fetched ({spent} counted it). Fetch a shorter range, or sync the range (",
                left = thousands(left),
                limit = thousands(limit),
                spent = requests(remaining.saturating_sub(left)),
            ))
            .name("sync_events", "`sync_events`, `surveillance sync`")
            .text(format!(
                "), which keeps what each day's quota fetches and resumes the next day; the \
                 quota comes back at {when}"
            )),
        used: quota.used,
        limit: Some(limit),
        resets_at_ms: quota.resets_at_ms,
    }
}

/// What a fetch needs, for [`refusal`]: `about` or `at least` `requests` for `events`.
fn needs(about: &str, requests: u64, events: f64) -> String {
    let events = thousands(events.round() as u64);
    format!(
        "{about} {} ({about} {events} events)",
        self::requests(requests)
    )
}

/// `1 request`, `2,400 requests`.
fn requests(n: u64) -> String {
    format!("{} request{}", thousands(n), if n == 1 { "" } else { "s" })
}

/// Under a daily quota, refuses a fetch that cannot fit in what remains of today's before it
/// spends it; the requests it sent (none without a quota), at most `budget`.
///
/// Where what remains fetches fewer events than a query's offsets reach (10,000), one page
/// decides: the one at the offset of the last page that what remains can ask. Full, the range
/// holds more events than that fetches; short, it fits. With a `budget` of two or more, the
/// fetch's own first page (held for it, so it is not asked twice) is asked first: short, or
/// at a density that puts the range under half of what remains, it asks nothing more.
///
/// Else, after that first page, the range is counted (as `plan_events` counts it) within the
/// budget, and refused if it needs more than remains: exactly when the count ends within it,
/// else at the density of what it counted.
async fn quota_check(client: &Client, query: &Query, budget: u64) -> Result<u64> {
    let before = event_requests(client);
    let quota = client.quota();
    let (Some(limit), Some(remaining)) = (quota.limit, quota.remaining) else {
        return Ok(0);
    };
    if budget == 0 {
        return Ok(0);
    }
    let (ws, we) = (query.start_ms, query.end_ms);
    let report = query.report_id.as_deref();
    let last = remaining.saturating_sub(1).saturating_mul(PAGE as u64);
    let decides = |page: &Page| {
        if page.events.len() < PAGE {
            return Ok(sent_since(client, before));
        }
        let events = (last + PAGE as u64) as f64;
        let held = needs("at least", requests_for(events, 1), events);
        Err(refusal(client, &held, limit, remaining))
    };
    // The page at the offset of the last page what is left could ask: it decides alone.
    let at_last = || {
        fetch_page(
            client,
            ws,
            we,
            report,
            last as usize,
            EventForm::Text,
            Reuse::Next,
            None,
        )
    };
    if budget == 1 && last <= CEILING_PAGE as u64 {
        return decides(&at_last().await?);
    }
    let page = fetch_page(
        client,
        ws,
        we,
        report,
        0,
        EventForm::Text,
        Reuse::Next,
        None,
    )
    .await?;
    let times: Vec<i64> = page.events.iter().map(|e| e.start_ms).collect();
    if times.len() < PAGE {
        return Ok(sent_since(client, before));
    }
    // The pages the range holds at its first page's density; unsorted: at least a page more,
    // up to any number.
    let pages = times
        .last()
        .and_then(|&t| projected(order_of(times.iter().copied()), 1.0, t, ws, we))
        .unwrap_or((2 * OFFSET_CEILING / PAGE) as f64);
    if pages * 2.0 < remaining as f64 {
        return Ok(sent_since(client, before));
    }
    if last <= CEILING_PAGE as u64 {
        return decides(&at_last().await?);
    }
    let held = client.held().len();
    let cap = budget.saturating_sub(sent_since(client, before));
    let Some(counted) = count_within(client, query, cap).await? else {
        // Nothing tells more than the first page did: the fetch goes on, and the quota stops
        // it if it must.
        return Ok(sent_since(client, before));
    };
    // The pages the count read of a settled range are the fetch's own: it will not ask them.
    let reused = client.held().len().saturating_sub(held) as u64;
    let needed = (counted.requests.ceil() as u64).saturating_sub(reused);
    let left = client.quota().remaining.unwrap_or(remaining);
    if needed <= left {
        return Ok(sent_since(client, before));
    }
    let about = needs("about", needed, counted.events);
    Err(refusal(client, &about, limit, remaining))
}

/// A count of `query` (see [`count`]) that sends at most `cap` requests: the count, when it
/// ends within them; else the range's events and requests at the density of the windows it
/// counted and of what the pages of those still open tell; None when nothing tells yet.
async fn count_within(client: &Client, query: &Query, cap: u64) -> Result<Option<Count>> {
    check(query)?;
    let pieces = pieces(client, query);
    let mut d = Driver::new(
        client.clone(),
        query,
        EventForm::Text,
        None,
        Goal::Check,
        pieces,
    );
    d.count_within(cap).await
}

/// Counts the events of the query the way the fetch would fetch them, window by window with
/// the same decisions, but asking only the pages that decide (each window's first page, its
/// ceiling page when the fetch asks it, and a few pages to find where it ends): the pages
/// between are known full without being asked. The pages it asks of a settled range are held
/// for the fetch that follows (see [`Held`]).
///
/// `walk_pages`: the pages of a settled window it may ask one after the other where a page
/// past the window's end would cost the fetch more than 2% (a plan's, whose pages the fetch
/// takes); 0 asks as few pages as it can (a quota check's).
pub async fn count(
    client: Client,
    query: &Query,
    sink: Option<ProgressSink>,
    walk_pages: usize,
) -> Result<Count> {
    check(query)?;
    let pieces = pieces(&client, query);
    let goal = Goal::Plan { walk_pages };
    Driver::new(client, query, EventForm::Text, sink, goal, pieces)
        .count()
        .await
}

/// The most events a millisecond that this client's fetches under a quota found in a window
/// of `report` (or of all events), if any were seen: what sizes a part of a range meant to fit
/// one page (a lazy scan's first part) before any of its pages is asked.
pub fn density_seen(client: &Client, report: Option<&str>) -> Option<f64> {
    let shape = client.shape();
    shape
        .density
        .get(&report.map(str::to_owned))
        .copied()
        .filter(|d| d.is_finite() && *d > 0.0)
}
