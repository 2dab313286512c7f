//! What fetching the events of a range will cost, found with a few requests: `plan_events`.
//!
//! The estimate follows the window fetch (`events.rs`) step by step, with probes of single
//! pages instead of whole windows:
//! - on a service that sorts by startTime (either way), each window of 10,000 events is found
//!   with the ceiling page (offset 9,900) that the fetch asks for first anyway: its last
//!   timestamp is where the next window starts. One probe a window is 1% of what the fetch
//!   costs (100 requests a window), and those windows are counted exactly;
//! - the last window (under 9,900 events) is sized by a search over its page offsets that
//!   stops as soon as the requests and the events are known within 5%, or the plan's budget
//!   (2% of the fetch's requests, plus 5) is spent;
//! - on a service that does not sort, the count is extrapolated from the sample of times the
//!   first full ceiling page gives and the exact count of a sub-range; expect it within about
//!   40% there.
//!
//! Accuracy: on a sorted service, the requests are within about 10% of what the fetch makes
//! (the fetch's pages in flight past a window's end vary with timing, and a small range's
//! budget may end the search early), usually within 5%; so are the events. The plan's own
//! requests count against the daily quota.

use super::error::{Error, Result};
use super::events::{order_of, page_times, Order, Query, CEILING_PAGE, LOOKAHEAD};
use super::lists::{OFFSET_CEILING, PAGE};
use super::Client;

/// An estimate of a fetch's cost.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Plan {
    /// Events in the range (estimated).
    pub events: u64,
    /// Requests `events()` would make for them (estimated).
    pub requests: u64,
    /// Seconds at the client's read limits (requests per second, or the concurrency at the
    /// measured latency when no rate is set; 0 when unlimited).
    pub seconds: f64,
    /// Days of quota at the daily limit, what remains today counting first: 0.2 is a fifth
    /// of a day's quota (it fits today); 2.5 the rest of today, tomorrow and half the day
    /// after. 0 without a daily limit.
    pub days: f64,
    /// Requests the plan itself made.
    pub probes: u64,
    /// True when the count is exact (every window's size was found).
    pub exact: bool,
}

/// Relative precision at which the last window's search stops (requests and events alike),
/// unless the plan's budget runs out first.
const TOLERANCE: f64 = 0.05;

struct Planning<'a> {
    client: &'a Client,
    report: Option<&'a str>,
    probes: u64,
    /// Requests the fetch makes, so far.
    requests: f64,
    events: f64,
    exact: bool,
    /// Events a millisecond in the last full window (as the fetch keeps it).
    density: Option<f64>,
    /// Under a daily quota the fetch walks its windows a page at a time (see `events`).
    frugal: bool,
}

impl Planning<'_> {
    async fn page(&mut self, ws: i64, we: i64, offset: usize) -> Result<Vec<i64>> {
        self.probes += 1;
        // As the fetch asks (widened by 1 ms on both sides).
        page_times(self.client, ws, we, self.report, offset).await
    }

    /// The plan's budget of probes for a fetch of `requests`.
    fn budget(&self, requests: f64) -> u64 {
        (0.02 * requests + 5.0).floor() as u64
    }

    /// The last window, `[ws, we)`, whose ceiling page was empty (`under`), or which its page
    /// 0 says is well under it: fewer than 9,900 events. `first`: the times of its page 0
    /// when already fetched (the range's first window, full). False (nothing counted) when
    /// the search finds 9,900 events or more after all (only when not `under`).
    async fn last_window(
        &mut self,
        ws: i64,
        we: i64,
        first: Option<Vec<i64>>,
        under: bool,
    ) -> Result<bool> {
        let first_full = first.is_some();
        let frugal = self.frugal;
        let cost = |this: &Self, c: f64| {
            this.requests + window_requests(c, first_full, this.density, we - ws, frugal)
        };
        // Its first page: the end of a range often holds less than a page, and a full one's
        // times say how dense the window is, hence where to look first.
        let page0 = match first {
            Some(times) => times,
            None => self.page(ws, we, 0).await?,
        };
        // The count is in [lo, hi] (events of the widened query).
        let top = if under { CEILING_PAGE } else { OFFSET_CEILING };
        let (mut lo, mut hi) = if page0.len() < PAGE {
            (page0.len(), page0.len())
        } else {
            (PAGE, top)
        };
        let mut guess = guess_count(&page0, ws, we);
        loop {
            if lo >= CEILING_PAGE {
                return Ok(false);
            }
            let estimate = (lo + hi) as f64 / 2.0;
            let spread = cost(self, hi as f64) - cost(self, lo as f64);
            let precise = spread <= TOLERANCE * cost(self, estimate) * 2.0
                && (hi - lo) as f64 <= TOLERANCE * (self.events + estimate) * 2.0;
            if lo == hi || precise || self.probes >= self.budget(cost(self, lo as f64)) {
                self.exact &= lo == hi;
                self.requests = cost(self, estimate);
                self.events += estimate;
                return Ok(true);
            }
            // A page that can tell, from the one holding `lo` to the last that can start
            // below `hi`: first where page 0's density points, then halving geometrically
            // (the precision wanted is relative).
            let (first, last) = (lo / PAGE, (hi - 1) / PAGE);
            let page = match guess.take() {
                Some(g) => (g / PAGE as f64) as usize,
                None => ((first.max(1) * last.max(1)) as f64).sqrt().round() as usize,
            };
            let offset = page.clamp(first, last) * PAGE;
            let n = self.page(ws, we, offset).await?.len();
            match n {
                0 => hi = hi.min(offset),
                PAGE => lo = lo.max(offset + PAGE),
                n => {
                    lo = offset + n;
                    hi = lo;
                }
            }
            if lo > hi {
                hi = lo;
            }
        }
    }
}

/// The events of `[ws, we)` if the whole window were as dense as its first page (sorted
/// either way); None when the page is not full or not sorted.
fn guess_count(page0: &[i64], ws: i64, we: i64) -> Option<f64> {
    if page0.len() < PAGE {
        return None;
    }
    let b = *page0.last()?;
    let covered = match order_of(page0.iter().copied()) {
        Order::Asc => b - ws + 1,
        Order::Desc => we - b,
        _ => return None,
    }
    .max(1);
    Some(PAGE as f64 * (we - ws).max(1) as f64 / covered as f64)
}

/// The requests the fetch makes for a window it sizes by paging (its ceiling page was empty)
/// holding `count` events: its ceiling page, pages up to the first short one, and the pages
/// launched past it (the fetch keeps a few ahead: as many as the last full window's density
/// suggests, or `LOOKAHEAD`).
fn window_requests(
    count: f64,
    first_full: bool,
    density: Option<f64>,
    span: i64,
    frugal: bool,
) -> f64 {
    let needed = (count / PAGE as f64).floor() + 1.0;
    if frugal {
        // Walked to its first short page: nothing more.
        return needed;
    }
    let ahead = match density {
        Some(d) => ((d * (span + 2) as f64 * 1.1 / PAGE as f64).ceil())
            .clamp(LOOKAHEAD as f64, (CEILING_PAGE / PAGE) as f64),
        None => LOOKAHEAD as f64,
    };
    // The first window's page 0 came before its ceiling page; a chained window asks both at
    // once. Pages in flight past the end: those asked ahead beyond it, about half of
    // `LOOKAHEAD` when the fetch pages one ahead at a time.
    let past = if first_full {
        (LOOKAHEAD as f64 / 2.0).min(ahead)
    } else {
        (ahead - needed).max(LOOKAHEAD as f64 / 2.0)
    };
    1.0 + needed + past
}

/// Plans the fetch of `query` (see the module's documentation).
pub async fn plan(client: &Client, query: &Query) -> Result<Plan> {
    super::events::check(query)?;
    let mut p = Planning {
        client,
        report: query.report_id.as_deref(),
        probes: 0,
        requests: 0.0,
        events: 0.0,
        exact: true,
        density: None,
        frugal: client.config().limits.daily_requests.is_some(),
    };
    let (mut ws, mut we) = (query.start_ms, query.end_ms);
    // The fetch opens with page 0 alone: most small ranges end there.
    let first = p.page(ws, we, 0).await?;
    // Page 0's density says the range is well under the ceiling: it is sized without the
    // ceiling page (which the fetch asks for; the plan need not).
    let small = guess_count(&first, ws, we).is_some_and(|g| g < CEILING_PAGE as f64 / 2.0);
    if first.len() < PAGE {
        p.requests = 1.0;
        p.events = first.iter().filter(|t| (ws..we).contains(*t)).count() as f64;
    } else if small && p.last_window(ws, we, Some(first.clone()), false).await? {
        // Sized.
    } else {
        let mut first_window = true;
        loop {
            let probe = p.page(ws, we, CEILING_PAGE).await?;
            let n = probe.len();
            if n == 0 {
                let page0 = first_window.then(|| first.clone());
                p.last_window(ws, we, page0, true).await?;
                break;
            }
            if n < PAGE {
                // Its exact size: 9,900 + n; every page of it is fetched.
                p.requests += (OFFSET_CEILING / PAGE) as f64;
                p.events +=
                    (CEILING_PAGE + probe.iter().filter(|t| (ws..we).contains(*t)).count()) as f64;
                break;
            }
            p.requests += (OFFSET_CEILING / PAGE) as f64;
            match order_of(probe.iter().copied()) {
                Order::Asc | Order::Constant => {
                    let cut = probe.last().copied().unwrap_or(ws);
                    if cut <= ws {
                        return Err(Error::DenseWindow {
                            timestamp: crate::time::format_ms(ws),
                        });
                    }
                    // The window keeps [ws, cut); those at `cut` start the next one.
                    p.events += (CEILING_PAGE + probe.iter().filter(|t| **t < cut).count()) as f64;
                    p.density = Some(OFFSET_CEILING as f64 / (cut - ws + 1).max(1) as f64);
                    ws = cut;
                }
                Order::Desc => {
                    let cut = probe.last().copied().unwrap_or(we);
                    if cut + 1 >= we {
                        return Err(Error::DenseWindow {
                            timestamp: crate::time::format_ms(we - 1),
                        });
                    }
                    p.events += (CEILING_PAGE + probe.iter().filter(|t| **t > cut).count()) as f64;
                    p.density = Some(OFFSET_CEILING as f64 / (we - cut + 1).max(1) as f64);
                    we = cut + 1;
                }
                Order::Unsorted => {
                    unsorted(&mut p, ws, we, probe).await?;
                    break;
                }
            }
            first_window = false;
            if ws >= we {
                break;
            }
        }
    }
    let requests = p.requests.round().max(1.0) as u64;
    Ok(finish(
        client,
        p.events.round() as u64,
        requests,
        p.probes,
        p.exact,
    ))
}

/// A service that does not sort: the window `[ws, we)` holds 10,000 events or more, and its
/// ceiling page is a sample of their times. The sub-range up to the sample's `k`-th time holds
/// about `k`% of them; its exact count (when under the ceiling) gives the whole by proportion.
async fn unsorted(p: &mut Planning<'_>, ws: i64, we: i64, mut sample: Vec<i64>) -> Result<()> {
    sample.retain(|t| (ws..we).contains(t));
    sample.sort_unstable();
    p.exact = false;
    let mut k = sample.len() / 4;
    while k >= 2 {
        let cut = sample[k - 1] + 1;
        let ceiling = p.page(ws, cut, CEILING_PAGE).await?.len();
        if ceiling == PAGE {
            k /= 4;
            continue;
        }
        let count = if ceiling > 0 {
            (CEILING_PAGE + ceiling) as f64
        } else {
            // Under the ceiling: its pages, found as for a sorted service's last window.
            let before = p.events;
            p.last_window(ws, cut, None, true).await?;
            let c = p.events - before;
            p.events = before;
            c
        };
        let total = count * sample.len() as f64 / k as f64;
        p.events += total;
        p.requests += if p.frugal {
            // Under a quota the fetch spends its first window's two pages, a third of it with
            // its ceiling page, then parts of about 7,000 events: half a page each at its end.
            // (The window's pages, counted before its ceiling page said it was unsorted, are
            // these.)
            total / PAGE as f64 + 3.0 + 0.5 * (total / 7_000.0 + 2.0)
                - (OFFSET_CEILING / PAGE) as f64
        } else {
            // The fetch splits such windows in halves at the median: about two requests per
            // window more than the pages, in windows of 5,000 to 10,000 events.
            total / PAGE as f64 + 2.0 * total / 7_500.0
        };
        return Ok(());
    }
    // Too dense to sample: at least the ceiling.
    p.events += OFFSET_CEILING as f64;
    p.requests += (OFFSET_CEILING / PAGE) as f64;
    Ok(())
}

/// Time and quota of `requests` at the client's limits.
fn finish(client: &Client, events: u64, requests: u64, probes: u64, exact: bool) -> Plan {
    let limits = client.config().limits;
    let seconds = match (limits.read_per_second, limits.read_concurrency) {
        (Some(rate), _) => requests as f64 / rate,
        _ => 0.0,
    };
    let days = match limits.daily_requests {
        Some(limit) => {
            let remaining = client.quota().remaining.unwrap_or(limit) as f64;
            let (r, l) = (requests as f64, limit as f64);
            if r <= remaining {
                r / l
            } else {
                1.0 + (r - remaining) / l
            }
        }
        None => 0.0,
    };
    Plan {
        events,
        requests,
        seconds,
        days,
        probes,
        exact,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paged_window_costs_its_pages_and_a_few_past_its_end() {
        // 2,000 events in the first window: ceiling, 21 pages, about two in flight past.
        let r = window_requests(2000.0, true, None, 1000, false);
        assert!((23.0..=25.0).contains(&r), "{r}");
        // A chained window asked 34 pages ahead from the last window's density (3 events a
        // millisecond over 1,002 ms, and a tenth more), needing 21: 13 past its end.
        let r = window_requests(2000.0, false, Some(3.0), 1000, false);
        assert_eq!(r, 1.0 + 21.0 + 13.0);
        // Under a quota the window is walked: its 21 pages, the last one short.
        assert_eq!(window_requests(2000.0, false, Some(3.0), 1000, true), 21.0);
    }
}
