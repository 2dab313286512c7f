//! All the events of a range, exactly once, in few requests: the window planner and fetcher.
//!
//! Each window is queried widened by 1 ms on both sides and filtered locally, so the service's
//! bound inclusivity does not matter. A window's ceiling page (offset 9,900) decides how it is
//! fetched, unless its first page (asked alone first) shows a small window (`open_ahead`; under
//! a quota a window is walked, see `advance`): a short ceiling page gives the window's exact
//! size; an empty one means "under the ceiling, size unknown" (paged from 0, a few pages ahead,
//! `paged_reach`); a full one means the window holds
//! 10,000 events or more. Then, if that page is sorted by startTime, the next window starts
//! (ascending) or ends (descending) at its last timestamp, inclusive, and is requested at once;
//! the order is checked again on every page of the window, and a window that turns out unsorted
//! is bisected and fetched again. An unsorted ceiling page bisects the window at its median.
//! A window whose next cut would not move (10,000 events or more in one millisecond) is a
//! `DenseWindow` error. Completed windows are emitted in time order, sorted by (startTime, id).
//!
//! With a cache of settled events (`cache`), a range is split into the parts its files hold,
//! served from disk as windows already complete, and the gaps, each planned as above; a
//! completed window's settled part (older than the client's `settle`) is written to the cache.
//!
//! By concern: `page` asks and parses one page, `held` keeps pages asked ahead for the fetch
//! that takes them, `run` holds the entry points (stream, count, peek) and the quota check;
//! this file plans and fetches the windows.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use tokio::task::JoinSet;

use super::cache::{Damage, Piece, Seen, Segment};
use super::error::{Error, Result};
use super::lists::{OFFSET_CEILING, PAGE};
use super::Client;
use crate::time::format_ms;

mod held;
mod page;
mod run;

pub use held::Held;
use held::HELD_FOR;
use page::{
    covered, fetch_page, hides_first, in_order, page_url, parse_page, projected, settled,
    settled_before, widened, Hold, MAX_MS, MIN_MS,
};
pub(crate) use page::{order_of, Order};
pub use page::{parse_events, Completed, Event, EventForm, Page};
pub use run::{
    count, density_seen, fetch_all, fetch_batches, peek, stream, stream_batches, AbortOnDrop, Count,
};

/// The last offset the service accepts, rounded to a page.
pub(crate) const CEILING_PAGE: usize = OFFSET_CEILING - PAGE;
/// A plan asks a page that may lie past a window's end (an empty page, which the fetch does
/// not ask) only when the fetch is at least this many requests a page so asked, so that it
/// adds at most 2% to the fetch that follows it (see `Fetch::walk_pages`).
const PAST_END_SHARE: f64 = 50.0;
/// Pages requested ahead in a window whose size is unknown.
pub(crate) const LOOKAHEAD: usize = 4;
/// The share of an unsorted window's sample fetched first when it is split under a quota.
const FIRST_PART: f64 = 0.35;
/// The events an estimated part of an unsorted window aims at (the ceiling is 10,000).
const PART_EVENTS: f64 = 7_000.0;
/// Requests in flight when no read concurrency is configured.
pub const DEFAULT_IN_FLIGHT: usize = 16;

/// What a client's fetches found of the service's events, for its later fetches: whether the
/// service sorts them, and the most events a millisecond seen in a window of each report (or
/// of all events), so that a later fetch of a range surely under the ceiling walks it without
/// asking its ceiling page again. A client with a cache starts from what the account's earlier
/// clients kept there, and keeps what it finds (see [`Seen`]).
#[derive(Debug, Default)]
pub struct Shape {
    unsorted: bool,
    /// A full first page (one [`peek`] asked, or a fetched window's) was not sorted
    /// ascending: later peeks tell nothing here, so they ask nothing.
    unpeekable: bool,
    density: std::collections::HashMap<Option<String>, f64>,
    /// What the client's cache holds of it, as this client last read or wrote it.
    kept: Seen,
}

impl Shape {
    /// A client's shape at its start: what its cache kept of the account's (see [`Seen`]).
    pub(crate) fn from_seen(seen: Seen) -> Shape {
        Shape {
            unsorted: seen.unsorted,
            unpeekable: seen.unpeekable,
            density: seen.density.iter().cloned().collect(),
            kept: seen,
        }
    }

    /// What it tells, to keep in the cache.
    pub(crate) fn seen(&self) -> Seen {
        let mut density: Vec<(Option<String>, f64)> =
            self.density.iter().map(|(r, d)| (r.clone(), *d)).collect();
        density.sort_by(|a, b| a.0.cmp(&b.0));
        Seen {
            unsorted: self.unsorted,
            unpeekable: self.unpeekable,
            density,
        }
    }

    /// Whether it tells what the cache does not hold (as this client knows it).
    pub(crate) fn untold(&self) -> bool {
        self.seen().tells_more_than(&self.kept)
    }

    /// Notes what the cache now holds.
    pub(crate) fn set_kept(&mut self, kept: Seen) {
        self.kept = kept;
    }
}

/// How often a fetch with a progress sink works out what it expects (see [`Fetch::report`]).
const EXPECT_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// A window whose estimate from the densest window seen times this factor is still under the
/// ceiling page is walked without it, sorted or not.
const SAFETY: f64 = 4.0;

/// What to fetch.
#[derive(Debug, Clone)]
pub struct Query {
    /// Start of the range, inclusive, epoch ms.
    pub start_ms: i64,
    /// End of the range, exclusive, epoch ms.
    pub end_ms: i64,
    /// Only the events of this report.
    pub report_id: Option<String>,
    /// A fetch that keeps what it gets when the daily quota runs out (a sync, which resumes
    /// the next day): it is not refused up front for needing more than remains.
    pub partial: bool,
    /// Read every part again, past the cache of settled events, and replace what it held.
    pub refresh: bool,
}

/// How far a fetch has got, and how far it has to go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Events emitted so far (whole windows, in time order).
    pub events: u64,
    /// Events received so far, page by page: ahead of `events` while windows are open.
    pub fetched: u64,
    /// Requests answered so far.
    pub requests: u64,
    /// Milliseconds of the range emitted so far.
    pub done_ms: i64,
    /// Milliseconds of the whole range.
    pub total_ms: i64,
    /// Windows planned so far.
    pub windows: u64,
    /// The events the range holds, as far as its pages tell so far (see
    /// [`Fetch::expect`]); None until a page tells anything.
    pub expected_events: Option<u64>,
    /// The requests the whole fetch takes, from `expected_events`.
    pub expected_requests: Option<u64>,
    /// Milliseconds left at the read rate in force (the slower of the limit and the rate
    /// seen), from `expected_requests`.
    pub eta_ms: Option<u64>,
    /// Requests not sent because windows came from the cache of settled events.
    pub saved: u64,
}

/// Receives progress updates.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The ceiling page.
    Probe,
    /// A page at this offset.
    Page(usize),
}

#[derive(Debug)]
enum Mode {
    /// Waiting for page 0 alone: a query's first window, whose size nothing suggests yet. A
    /// short page 0 ends it in one request; a full one sends the ceiling probe next.
    Opening,
    /// Waiting for the ceiling page.
    Probing,
    /// Size known: pages up to `end` (exclusive offset).
    Known { end: usize },
    /// Size unknown (under the ceiling): paged ahead until a short page.
    Paging { end: Option<usize> },
    /// Over the ceiling; the pages 0..=9,900 are fetched and checked for `order`.
    Full { order: Order },
    /// Under a daily quota: one page at a time, the next asked when the last came back full,
    /// so that no request is spent past the window's end.
    Walking,
    /// A part of an unsorted window that waits for its size to be estimated (`Sizing`).
    Deferred,
}

/// What a full ceiling page all of one millisecond makes of a sorted window (see
/// [`Fetch::burst_at_ceiling`]).
#[derive(Debug, Clone, Copy)]
enum Burst {
    /// Its first page, not in yet, tells the order.
    Wait,
    /// Walked up to another burst: walked on, up to a page of this one.
    Walk,
    /// Its pages up to this offset are in and hold it all before the burst: it ends there, and
    /// the next window starts at the burst.
    Chain(Order, usize),
    /// Cut here: the part before the burst (ascending) or after it (descending) is a window
    /// whose query does not reach it, and the rest another.
    Cut(i64, Order),
}

/// What an unsorted window's split left to size: the parent's sample of times (a page of an
/// unsorted answer is a uniform sample of its window), and the window whose size it waits for.
#[derive(Debug, Clone)]
struct Sizing {
    /// The parent window's sampled startTimes, sorted.
    samples: Arc<Vec<i64>>,
    /// The deferred window this one's exact size calibrates (the parent's rest).
    rest: u64,
}

#[derive(Debug)]
struct Window {
    id: u64,
    /// Range kept, `[ws, we)`.
    ws: i64,
    we: i64,
    /// Range queried (before a chained cut shrank `we`/`ws`).
    qs: i64,
    qe: i64,
    mode: Mode,
    pages: BTreeMap<usize, Page>,
    launched: HashSet<usize>,
    in_flight: usize,
    done: bool,
    /// Sized from a sample with enough margin under the ceiling that it is walked without
    /// asking its ceiling page, sorted or not.
    safe: bool,
    /// The rests this window's exact size, once known, sizes: its parent's, and those of the
    /// windows it was the first part of before (their samples that fall in it).
    sizing: Vec<Sizing>,
    /// A deferred window: the parent's samples that fall in it.
    samples: Option<Vec<i64>>,
    /// A count (a plan): the pages known full without being asked (a later page was full).
    assumed: BTreeSet<usize>,
    /// A count: the events the window was estimated to hold when it was sized.
    estimate: Option<f64>,
    /// A count without a quota: the pages the fetch asks ahead once its ceiling page is empty.
    ahead: usize,
    /// Served from this file of the cache (complete without a request).
    cached: Option<Segment>,
    /// Requests answered for its pages (a page a plan or a quota check held included).
    spent: u64,
    /// A fetch: the furthest of its pages under the ceiling page that a plan held for it
    /// when it was planned.
    held_to: Option<usize>,
}

impl Window {
    fn new(id: u64, ws: i64, we: i64) -> Window {
        Window {
            id,
            ws,
            we,
            qs: ws,
            qe: we,
            mode: Mode::Probing,
            pages: BTreeMap::new(),
            launched: HashSet::new(),
            in_flight: 0,
            done: false,
            safe: false,
            sizing: Vec::new(),
            samples: None,
            assumed: BTreeSet::new(),
            estimate: None,
            ahead: 0,
            cached: None,
            spent: 0,
            held_to: None,
        }
    }

    /// The events it holds, as far as it is known yet: exactly once its last page is in;
    /// from a sorted answer, its run of full pages from offset 0 over the time they cover;
    /// else what a sample sized it at, or what its known last page bounds, or, a part of an
    /// unsorted window over the ceiling still to size, at least a page per sampled time. None
    /// when nothing tells yet. `beyond`: the events a millisecond of the windows done.
    fn guess(&self, beyond: Option<f64>) -> Option<f64> {
        if let Some(s) = &self.cached {
            let share = (self.we - self.ws) as f64 / (s.hi - s.lo).max(1) as f64;
            return Some(s.events as f64 * share.min(1.0));
        }
        let so_far = self.kept_so_far() as f64;
        let end = match self.mode {
            Mode::Known { end } | Mode::Paging { end: Some(end) } => Some(end),
            _ => None,
        };
        let whole = end.is_some_and(|e| (0..e).step_by(PAGE).all(|o| self.pages.contains_key(&o)));
        if self.done || whole {
            return Some(self.kept() as f64);
        }
        let run: Vec<&Page> = (0..=CEILING_PAGE)
            .step_by(PAGE)
            .map_while(|o| self.pages.get(&o))
            .take_while(|p| p.events.len() == PAGE)
            .collect();
        let times = || run.iter().flat_map(|p| p.events.iter().map(|e| e.start_ms));
        let covered = run
            .last()
            .and_then(|p| p.events.last())
            .and_then(|last| covered(order_of(times()), last.start_ms, self.qs, self.qe))
            .map(|(c, _)| c);
        if let Some(c) = covered {
            // The time its pages have not reached yet, at the density of the windows done
            // (when there are any: the hours of a day differ, and they span more of them), or
            // else of its own pages.
            let (n, c) = ((run.len() * PAGE) as f64, c.max(1) as f64);
            let left = ((self.we - self.ws) as f64 - c).max(0.0);
            return Some((n + left * beyond.unwrap_or(n / c)).max(so_far));
        }
        let bound = end.map(|e| e.saturating_sub(PAGE / 2) as f64);
        let sampled = self.samples.as_ref().map(|s| (s.len() * PAGE) as f64);
        self.estimate.or(bound).or(sampled).map(|g| g.max(so_far))
    }

    /// Whether the page at `offset` is in, or known full (a count).
    fn has(&self, offset: usize) -> bool {
        self.pages.contains_key(&offset) || self.assumed.contains(&offset)
    }

    /// A count: the first offset not known full, and the first offset of a page known short.
    fn bounds(&self) -> (usize, Option<usize>) {
        let full = |o: &usize| {
            self.assumed.contains(o) || self.pages.get(o).is_some_and(|p| p.events.len() == PAGE)
        };
        let lo = (0..=OFFSET_CEILING)
            .step_by(PAGE)
            .find(|o| !full(o))
            .unwrap_or(OFFSET_CEILING);
        let hi = self
            .pages
            .iter()
            .find(|(_, p)| p.events.len() < PAGE)
            .map(|(o, _)| *o);
        (lo, hi)
    }

    /// The times of its pages, in the service's order (offset by offset).
    fn times(&self) -> Vec<i64> {
        self.pages
            .values()
            .flat_map(|p| p.events.iter().map(|e| e.start_ms))
            .collect()
    }

    /// Its events in `[ws, we)` among the pages in so far.
    fn kept_so_far(&self) -> usize {
        self.pages
            .values()
            .flat_map(|p| p.events.iter())
            .filter(|e| e.start_ms >= self.ws && e.start_ms < self.we)
            .count()
    }

    /// Its events in `[ws, we)`, once every page is in (a count's pages known full
    /// included).
    fn kept(&self) -> usize {
        self.kept_so_far() + PAGE * self.assumed.len()
    }

    /// A count: the pages from `lo` up to `to` not asked are taken as full, and the window as
    /// ending before `end`.
    fn settle(&mut self, lo: usize, to: usize, end: usize) {
        let pages = &self.pages;
        self.assumed
            .extend((lo..to).step_by(PAGE).filter(|o| !pages.contains_key(o)));
        self.mode = Mode::Known { end };
    }
}

struct Fetch {
    client: Client,
    query: Query,
    windows: BTreeMap<i64, Window>,
    queue: VecDeque<(u64, Kind)>,
    tasks: JoinSet<(u64, Kind, Result<Page>)>,
    keep: EventForm,
    in_flight_max: usize,
    next_id: u64,
    frontier: i64,
    progress: Progress,
    sink: Option<ProgressSink>,
    /// Events per millisecond seen in the last full window, to size the pages ahead.
    density: Option<f64>,
    /// A daily quota is set: every request must carry events (see [`Fetch::frugal`]).
    frugal: bool,
    /// A window of this query came back in no order of startTime.
    unsorted: bool,
    /// A count (a plan), not a fetch: only the pages that decide are asked, the others are
    /// known full from a later full page, and each window's end is searched for.
    counting: bool,
    /// A count: the events of the completed windows, and the requests the fetch makes for them.
    counted: f64,
    predicted: f64,
    /// A count took a window's end within its precision instead of finding it.
    approximate: bool,
    /// Pages asked (answered or not).
    sent: u64,
    /// Completed windows' settled parts are written to the client's cache.
    caching: bool,
    /// A sync with a cache: the pages of a window that the daily quota, an error or an
    /// interruption (the fetch dropped, Ctrl-C) stops are carried to its next run (see
    /// [`Fetch::carry_stopped`]); their bodies are kept, as `caching`'s are.
    carry: bool,
    /// The fetch ended (completed, or stopped by the quota, which carries what it can
    /// itself): dropping it carries nothing (see the `Drop` of `Fetch`).
    ended: bool,
    /// Events that started before this (epoch ms) are settled.
    cutoff: i64,
    /// A count (a plan): the pages of a settled window it may ask in turn, rather than past
    /// where the window may end, when a page past the end would cost more than 2% of the fetch
    /// (its pages are held for the fetch that follows). 0 for a quota check's count, which is
    /// to spend as little as it can.
    walk_pages: usize,
    /// A window was written to the cache (which then keeps to its cap).
    wrote: bool,
    /// The windows a split replaced: their start and the requests sent for them, charged to
    /// the completed window that holds that start (for [`Segment::requests`]).
    replaced: Vec<(i64, u64)>,
    /// When the planner started, for the rate its requests are answered at.
    started: std::time::Instant,
    /// When [`Fetch::expect`] last ran (it reads every open window's events).
    expected_at: Option<std::time::Instant>,
}

/// A sync's fetch dropped before it ended (Ctrl-C, its consumer gone, an error) keeps the
/// pages it read of its frontier window in the cache, for its next run to take instead of
/// asking them again.
impl Drop for Fetch {
    fn drop(&mut self) {
        if !self.ended && !self.counting {
            self.carry_stopped();
        }
    }
}

fn dense(ms: i64) -> Error {
    Error::DenseWindow {
        timestamp: format_ms(ms),
    }
}

impl Fetch {
    fn window_mut(&mut self, id: u64) -> Option<&mut Window> {
        self.windows.values_mut().find(|w| w.id == id)
    }

    /// A window of `[ws, we)` with a fresh id, not yet planned.
    fn new_window(&mut self, ws: i64, we: i64) -> Window {
        self.next_id += 1;
        let mut w = Window::new(self.next_id - 1, ws, we);
        if !self.counting {
            let report = self.query.report_id.as_deref();
            let base = page_url(&self.client, ws, we, report, 0);
            w.held_to = self.client.held().furthest(base.as_str(), CEILING_PAGE);
        }
        w
    }

    /// The first window of the query: page 0 alone first. Many queries (an hourly sync, a
    /// day of one site) fit in one page, and a request is the scarcest thing there is; a
    /// large range pays one round trip of latency for it, not a request.
    fn add_first_window(&mut self, ws: i64, we: i64) {
        self.add_opening(ws, we, false);
    }

    /// The windows of a gap the cache does not hold: one, or, when an earlier run of a sync
    /// the quota stopped carried the pages of a window that starts here, that window first
    /// (its pages held for it, so its query asks none of them again) and the rest after it.
    fn add_gap(&mut self, lo: i64, hi: i64) {
        let report = self.query.report_id.clone();
        let carried = match self.client.cache() {
            Some(cache) if self.carry => match cache.take_carried(report.as_deref(), lo, hi) {
                Ok(carried) => carried,
                Err(damage) => {
                    if let Damage::Corrupt(why) = damage {
                        self.client.http().warn(format!(
                            "the pages of the window from {} that an earlier run carried in \
                             the cache: {why}: the file is removed and its pages asked again",
                            format_ms(lo)
                        ));
                    }
                    None
                }
            },
            _ => None,
        };
        let Some((qe, pages)) = carried else {
            return self.add_first_window(lo, hi);
        };
        for (offset, body) in pages {
            let url = page_url(&self.client, lo, qe, report.as_deref(), offset);
            self.client
                .held()
                .put(url.to_string(), body, HELD_FOR, true);
        }
        self.add_first_window(lo, qe);
        if qe < hi {
            self.add_first_window(qe, hi);
        }
    }

    /// A window that asks page 0 alone first. `safe`: sized from a sample well under the
    /// ceiling, so walked without its ceiling page even when the service does not sort.
    fn add_opening(&mut self, ws: i64, we: i64, safe: bool) -> u64 {
        self.progress.windows += 1;
        let mut w = self.new_window(ws, we);
        let id = w.id;
        w.mode = Mode::Opening;
        w.safe = safe || {
            let shape = self.client.shape();
            let densest = shape.density.get(&self.query.report_id).copied();
            densest.is_some_and(|d| d * (we - ws + 2) as f64 * SAFETY < CEILING_PAGE as f64)
        };
        w.launched.insert(0);
        self.windows.insert(ws, w);
        self.queue.push_back((id, Kind::Page(0)));
        id
    }

    fn add_window(&mut self, ws: i64, we: i64) -> u64 {
        if self.frugal {
            return self.add_opening(ws, we, false);
        }
        self.progress.windows += 1;
        let mut w = self.new_window(ws, we);
        let id = w.id;
        w.launched.extend([0, CEILING_PAGE]);
        self.windows.insert(ws, w);
        // The ceiling page decides everything; page 0 is needed whatever it says (unless empty).
        self.queue.push_front((id, Kind::Page(0)));
        self.queue.push_front((id, Kind::Probe));
        id
    }

    /// The window a chained cut starts (the rest of a sorted range past a full window). A
    /// count asks no first page of it: as dense as the window before, it is searched for from
    /// the start, its ceiling page first when that density puts its end past it (full, every
    /// page before it is full, and the fetch walks them all).
    fn add_chained(&mut self, ws: i64, we: i64) -> u64 {
        if !self.counting {
            return self.add_window(ws, we);
        }
        self.progress.windows += 1;
        let mut w = self.new_window(ws, we);
        let id = w.id;
        w.mode = Mode::Walking;
        self.windows.insert(ws, w);
        self.search(id);
        id
    }

    /// Asks the ceiling page of window `id`, whose size is unknown.
    fn probe(&mut self, id: u64) {
        if let Some(w) = self.window_mut(id) {
            w.mode = Mode::Probing;
            if w.launched.insert(CEILING_PAGE) {
                self.queue.push_front((id, Kind::Probe));
            }
        }
    }

    /// Under a quota, after a full page of window `id`. Sorted, the window is walked to its end
    /// or its ceiling page, which gives the next window's start: no request is lost. Unsorted
    /// (`unsorted`), a window over the ceiling cannot be kept, so its ceiling page is asked
    /// next, unless a sample sized it or it was asked already.
    fn advance(&mut self, id: u64, unsorted: bool) {
        let ask = self
            .window_mut(id)
            .is_some_and(|w| unsorted && !w.safe && !w.launched.contains(&CEILING_PAGE));
        if ask {
            self.probe(id);
        } else {
            self.walk(id);
        }
    }

    /// Asks the first page of window `id` not yet in, one at a time (a walking window).
    fn walk(&mut self, id: u64) {
        if self.counting {
            return self.search(id);
        }
        let Some(w) = self.window_mut(id) else {
            return;
        };
        w.mode = Mode::Walking;
        let next = (0..CEILING_PAGE + PAGE)
            .step_by(PAGE)
            .find(|o| !w.pages.contains_key(o));
        match next {
            Some(o) if w.launched.insert(o) => self.queue.push_back((id, Kind::Page(o))),
            Some(_) => {}
            // Every page up to the ceiling is in, all full: over the ceiling.
            None => {
                w.mode = Mode::Full {
                    order: Order::Constant,
                }
            }
        }
    }

    /// A count's walk: the next page that narrows where window `id` ends (its first short
    /// page), from below where it can (a full page is one the fetch asks too), guided by its
    /// estimate or by how dense its pages are, without asking every page.
    fn search(&mut self, id: u64) {
        let others = self.counted
            + self
                .windows
                .values()
                .filter(|w| w.id != id)
                .map(|w| w.kept() as f64)
                .sum::<f64>();
        let density = self.density;
        let (walk_pages, cutoff) = (self.walk_pages, self.cutoff);
        let Some(w) = self.window_mut(id) else {
            return;
        };
        w.mode = Mode::Walking;
        let (lo, hi) = w.bounds();
        if lo > CEILING_PAGE {
            // Full up to the ceiling: over it.
            w.mode = Mode::Full {
                order: Order::Constant,
            };
            return;
        }
        if hi == Some(lo) {
            w.mode = Mode::Known { end: lo + PAGE };
            return;
        }
        // A short page that is not empty is the last: every page before it is full.
        if let Some(h) = hi.filter(|h| w.pages.get(h).is_some_and(|p| !p.events.is_empty())) {
            w.settle(lo, h, h + PAGE);
            return;
        }
        // Precise enough for a plan, which is to be within 10%: a sorted window's end within
        // about 6% of the events counted so far, this window's and the others' (the end is
        // then taken halfway), so that the last window of a long range is settled in a probe
        // or two.
        // An unsorted window keeps to about 3% of its own size: sized from a sample, its size
        // calibrates the sample's other parts.
        let loose = w.sizing.is_empty()
            && w.estimate.is_none()
            && order_of(w.times().into_iter()) != Order::Unsorted;
        let within = if loose {
            0.12 * (lo as f64 + others)
        } else {
            0.06 * lo as f64
        };
        let top = hi.map_or(CEILING_PAGE, |h| h - PAGE);
        // Where the window ends, as far as its pages tell: the density of its sorted pages, or
        // what it was sized at.
        let sorted = w
            .pages
            .iter()
            .rev()
            .find(|(_, p)| p.events.len() == PAGE)
            .and_then(|(o, p)| {
                let last = p.events.last()?.start_ms;
                let order = order_of(p.events.iter().map(|e| e.start_ms));
                projected(order, (o + PAGE) as f64, last, w.qs, w.qe)
            });
        // From below: when its sorted pages put the end within half that width of the pages
        // known full, the end is taken there without another request (were the rest twice as
        // dense, the count would still be within that width), and no page past it is asked.
        let near = sorted.filter(|g| loose && hi.is_none_or(|h| *g < h as f64));
        if let Some(g) = near.filter(|g| g - lo as f64 <= within / 2.0) {
            let end = ((g / PAGE as f64).round() as usize * PAGE).max(lo);
            w.settle(lo, end, end);
            self.approximate = true;
            return;
        }
        if let Some(h) = hi.filter(|_| w.sizing.is_empty()) {
            if (h - lo) as f64 <= within {
                let end = (lo + (h - lo) / 2) / PAGE * PAGE + PAGE;
                w.settle(lo, end, end);
                self.approximate = true;
                return;
            }
        }
        // The next page towards a sorted guess: half way there, since the time the pages have
        // not reached may be half as dense as the time they have (the hours of a day differ).
        // A page short of the end costs nothing, one past it a request.
        let toward = |g: f64| ((lo as f64 + (g - lo as f64) * 0.5) as usize).saturating_sub(PAGE);
        // A window a chained cut started, with no page yet: as dense as the one before it.
        let chained = density
            .filter(|_| w.pages.is_empty())
            .map(|d| d * (w.qe - w.qs + 2) as f64);
        let guess = sorted.or(w.estimate).or(chained);
        let by_density = sorted.is_some();
        let empties = w
            .pages
            .iter()
            .filter(|(o, p)| p.events.is_empty() && **o != CEILING_PAGE)
            .count();
        let past_end_too_dear = (empties as f64 + 1.0) * PAST_END_SHARE
            > (lo as f64 + others) / PAGE as f64
            && lo / PAGE < walk_pages
            && settled(w.qs, w.qe, cutoff);
        let target = match (guess, hi) {
            // A window a chained cut started, not dense enough to be surely over the ceiling:
            // its first page (the fetch asks it too) tells its own density, where the window
            // before it may be far denser or sparser.
            (Some(g), _) if chained.is_some() && g * 0.8 < top as f64 => 0,
            // Sorted pages: towards their guess, under the ceiling or over it (the ceiling
            // page then tells, and the fetch walks to it), or under the page found short.
            (Some(g), None) if by_density => toward(g),
            (Some(g), Some(_)) if by_density && g < top as f64 => toward(g),
            // Just under a sample's guess: a full page costs nothing (the fetch asks it too),
            // an empty one is a request spent.
            (Some(g), _) if !by_density && g > lo as f64 && g < top as f64 => {
                ((g * 0.93) as usize).saturating_sub(PAGE)
            }
            // Surely over the ceiling: its page is the one that tells.
            (Some(g), None) if g >= top as f64 => top,
            // Past a sample's guess, no end found yet: it is most likely near, so the next page
            // while within 5% of it (the fetch asks every page short of the end), then twice as
            // far past it as the pages known full already are (the first page past the end
            // settles it within that distance).
            (Some(g), _) if !by_density && g > 0.0 && lo as f64 >= g => {
                let over = lo as f64 - g;
                let past = if over < 0.05 * g {
                    lo
                } else {
                    lo + over as usize
                };
                hi.map_or(past, |h| past.min(lo + (h - lo) * 3 / 10))
            }
            // Past the bound an empty page set: the density overshot. Most of the way there,
            // a page that is likely full (the fetch asks it too) and tells the density nearer
            // the end.
            (Some(_), Some(h)) if by_density => lo + (h - lo) * 4 / 5,
            // No guess, page 0 alone known (full): page 1, which the fetch asks too; a window of
            // a page or two (the most common) then ends without a page asked past it.
            _ if lo == PAGE => lo,
            // A few pages between the last full page and the empty one: each in turn, up to
            // the end (the fetch asks them all; a page past the end is a request spent).
            (_, Some(h)) if h - lo <= 5 * PAGE => lo,
            // No guess, and a page past the end would cost more than 2% of the fetch (its
            // pages known so far, each a request, against the pages already asked past an
            // end): the next page, which the fetch asks too.
            _ if past_end_too_dear => lo,
            // No guess: upwards from what is known, so that few pages are asked past the end.
            (_, Some(h)) => (lo * 2).min(lo + (h - lo) * 3 / 10),
            (_, None) => lo * 2,
        };
        let target = (target / PAGE * PAGE).clamp(lo, top);
        if w.launched.insert(target) {
            self.queue.push_back((id, Kind::Page(target)));
        }
    }

    /// Without a quota, after a full first page of window `id`. A sorted page whose density
    /// puts the window well under the ceiling: paged ahead at once, no further than its
    /// density puts the end, its ceiling page asked only if it turns out larger (a count
    /// searches for its end). An unsorted page: its second page first (a window of a page or
    /// two, the most common, then costs its pages), then the ceiling page. Otherwise the
    /// ceiling page first, which decides how it is fetched. A count asks what the fetch asks.
    fn open_ahead(&mut self, id: u64) {
        let counting = self.counting;
        let Some(w) = self.window_mut(id) else {
            return;
        };
        let times = w.times();
        let order = order_of(times.iter().copied());
        let small = times
            .last()
            .and_then(|&last| projected(order, PAGE as f64, last, w.qs, w.qe))
            .is_some_and(|events| events * SAFETY < CEILING_PAGE as f64);
        match (small, order) {
            // A count's walk searches for the end, its second page first when unsorted.
            (true, _) | (false, Order::Unsorted) if counting => self.walk(id),
            (true, _) | (false, Order::Unsorted) => {
                w.mode = Mode::Paging { end: None };
                let reach = if small { paged_reach(w, order) } else { PAGE };
                self.enqueue_pages(id, (PAGE..=reach).step_by(PAGE));
            }
            _ => self.probe(id),
        }
    }

    fn launch_pending(&mut self) {
        while self.tasks.len() < self.in_flight_max {
            let Some((id, kind)) = self.next_request() else {
                break;
            };
            let Some(w) = self.window_mut(id) else {
                continue;
            };
            let (qs, qe) = (w.qs, w.qe);
            w.in_flight += 1;
            let offset = match kind {
                Kind::Probe => CEILING_PAGE,
                Kind::Page(o) => o,
            };
            let client = self.client.clone();
            let report = self.query.report_id.clone();
            let keep = self.keep;
            let counting = self.counting;
            self.sent += 1;
            self.tasks.spawn(async move {
                let hold = if counting { Hold::Settled } else { Hold::No };
                let result =
                    fetch_page(&client, qs, qe, report.as_deref(), offset, keep, hold).await;
                (id, kind, result)
            });
        }
    }

    /// Probes first (they decide the plan), then pages of the earliest windows.
    fn next_request(&mut self) -> Option<(u64, Kind)> {
        let pos = self
            .queue
            .iter()
            .position(|(_, k)| *k == Kind::Probe)
            .unwrap_or(0);
        self.queue.remove(pos)
    }

    fn enqueue_pages(&mut self, id: u64, offsets: impl IntoIterator<Item = usize>) {
        let mut fresh = Vec::new();
        let counting = self.counting;
        if let Some(w) = self.window_mut(id) {
            if counting {
                // Pages known to be full: a count need not ask them.
                for o in offsets {
                    if o < CEILING_PAGE && !w.pages.contains_key(&o) {
                        w.assumed.insert(o);
                    }
                }
                return;
            }
            let limit = match w.mode {
                Mode::Paging { end: Some(e) } => e.min(CEILING_PAGE),
                _ => CEILING_PAGE,
            };
            for o in offsets {
                if o < limit && w.launched.insert(o) && !w.pages.contains_key(&o) {
                    fresh.push(o);
                }
            }
        }
        for o in fresh {
            self.queue.push_back((id, Kind::Page(o)));
        }
    }

    fn on_result(&mut self, id: u64, kind: Kind, mut page: Page) -> Result<()> {
        self.progress.requests += u64::from(!page.held);
        if !self.caching {
            page.body = None;
        }
        let frugal = self.frugal;
        let counting = self.counting;
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        w.in_flight -= 1;
        w.spent += 1;
        let offset = match kind {
            Kind::Probe => CEILING_PAGE,
            Kind::Page(o) => o,
        };
        let len = page.events.len();
        w.launched.insert(offset);
        w.assumed.remove(&offset);
        w.pages.insert(offset, page);
        if counting && len == PAGE {
            // Every page before a full one is full.
            w.assumed.extend(
                (0..offset)
                    .step_by(PAGE)
                    .filter(|o| !w.pages.contains_key(o)),
            );
        }
        match (&w.mode, kind) {
            (Mode::Opening, Kind::Page(0)) if len < PAGE => w.mode = Mode::Known { end: PAGE },
            (Mode::Opening, Kind::Page(0)) if frugal => {
                // What an earlier window found holds for this one's first page too.
                let unsorted = order_of(w.times().into_iter()) == Order::Unsorted;
                self.unsorted |= unsorted;
                self.advance(id, self.unsorted);
            }
            (Mode::Opening, Kind::Page(0)) => self.open_ahead(id),
            (Mode::Walking, Kind::Page(_)) if counting && len < PAGE => self.search(id),
            (Mode::Walking, Kind::Page(o)) if len < PAGE => {
                w.mode = Mode::Known { end: o + PAGE };
            }
            (Mode::Walking, Kind::Page(o)) => {
                let unsorted = order_of(w.times().into_iter()) == Order::Unsorted;
                self.unsorted |= unsorted;
                let burst = if counting || unsorted {
                    None
                } else if self.meets_burst(id, o) {
                    Some(Burst::Wait)
                } else {
                    self.burst_reached(id)
                };
                if let Some(Burst::Chain(order, end)) = burst {
                    self.chain_before(id, order, end)?;
                } else if burst.is_some() {
                    self.probe(id);
                } else {
                    self.advance(id, unsorted);
                }
            }
            (Mode::Probing, Kind::Page(0)) if !frugal && w.pages.contains_key(&CEILING_PAGE) => {
                // The ceiling page came first, all of one millisecond: this page tells the
                // order it ends (see `on_probe`).
                self.on_probe(id, PAGE)?;
            }
            (Mode::Probing, Kind::Probe) if frugal && len == 0 => self.walk(id),
            (Mode::Probing, Kind::Probe) => self.on_probe(id, len)?,
            (Mode::Paging { end: None }, Kind::Page(0)) if len == PAGE => {
                // The ceiling page came back empty before this one.
                self.on_probe(id, 0)?;
            }
            (Mode::Paging { .. }, Kind::Page(o)) if len < PAGE => {
                // The end is known: every page before it is needed, launched or not yet.
                let mut end = o + PAGE;
                if let Some(w) = self.window_mut(id) {
                    if let Mode::Paging { end: Some(e) } = w.mode {
                        end = end.min(e);
                    }
                    w.mode = Mode::Paging { end: Some(end) };
                }
                self.enqueue_pages(id, (0..end).step_by(PAGE));
            }
            (Mode::Paging { end: None }, Kind::Page(o)) if o + PAGE >= CEILING_PAGE => {
                // The ceiling page was empty: nothing lies past it.
                if let Some(w) = self.window_mut(id) {
                    w.mode = Mode::Paging {
                        end: Some(CEILING_PAGE),
                    };
                }
                self.enqueue_pages(id, (0..CEILING_PAGE).step_by(PAGE));
            }
            (Mode::Paging { end: None }, Kind::Page(_)) => {
                let order = order_of(w.times().into_iter());
                let mut reach = paged_reach(w, order);
                if !w.launched.contains(&CEILING_PAGE)
                    && (order == Order::Unsorted || reach >= CEILING_PAGE / 2)
                {
                    // Paged without its ceiling page (see `open_ahead`), it turned out
                    // unsorted or large: the ceiling page decides now.
                    self.probe(id);
                } else {
                    // Every page below the furthest full one is needed, and a few past it are
                    // asked ahead. A plan's pages held for it are answered at once, the
                    // furthest perhaps short: none is asked past it before it is in, so that
                    // they send the pages ahead no further past the end than pages asked in
                    // turn do.
                    if let Some(h) = w.held_to.filter(|h| !w.pages.contains_key(h)) {
                        reach = reach.min(h.max(PAGE));
                    }
                    self.enqueue_pages(id, (PAGE..=reach).step_by(PAGE));
                }
            }
            _ => {}
        }
        self.check_done(id)
    }

    fn on_probe(&mut self, id: u64, len: usize) -> Result<()> {
        let density = self.density;
        let counting = self.counting;
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        if len == 0 && !w.pages.contains_key(&0) {
            // Under the ceiling, size unknown: page 0 says whether there is anything to page
            // ahead for (a short one ends the window).
            w.mode = Mode::Paging { end: None };
            return Ok(());
        }
        if len == 0 {
            // Under the ceiling, size unknown: page ahead, as far as the density suggests.
            let estimate = density.map_or(0.0, |d| d * (w.qe - w.qs + 2) as f64 * 1.1);
            let pages =
                ((estimate / PAGE as f64).ceil() as usize).clamp(LOOKAHEAD, CEILING_PAGE / PAGE);
            if counting {
                // The fetch pages ahead; a count searches for the end.
                w.ahead = pages;
                self.search(id);
                return Ok(());
            }
            // A short page already in (page 0, usually) ends the window.
            let end = w
                .pages
                .iter()
                .find(|(o, p)| **o < CEILING_PAGE && p.events.len() < PAGE)
                .map(|(o, _)| o + PAGE);
            w.mode = Mode::Paging { end };
            // Without a density seen, as far as the window's own pages tell.
            let reach = match density {
                Some(_) => pages * PAGE,
                None => paged_reach(w, order_of(w.times().into_iter())),
            };
            self.enqueue_pages(id, (PAGE..=reach).step_by(PAGE));
            if let Some(end) = end {
                self.enqueue_pages(id, (0..end).step_by(PAGE));
            }
            return Ok(());
        }
        if len < PAGE {
            w.mode = Mode::Known {
                end: CEILING_PAGE + PAGE,
            };
            self.enqueue_pages(id, (1..CEILING_PAGE / PAGE).map(|p| p * PAGE));
            return Ok(());
        }
        let times: Vec<i64> = w
            .pages
            .get(&CEILING_PAGE)
            .map(|p| p.events.iter().map(|e| e.start_ms).collect())
            .unwrap_or_default();
        let order = order_of(times.iter().copied());
        if order == Order::Constant {
            match self.burst_at_ceiling(id, &times) {
                Some(Burst::Wait) => return Ok(()),
                Some(Burst::Walk) => {
                    self.walk(id);
                    return Ok(());
                }
                Some(Burst::Chain(order, end)) => return self.chain_before(id, order, end),
                Some(Burst::Cut(cut, order)) => {
                    self.count_split(id);
                    if let Some(w) = self.window_mut(id) {
                        let (ws, we) = (w.ws, w.we);
                        self.windows.remove(&ws);
                        self.queue.retain(|(i, _)| *i != id);
                        // The part clear of the burst, under the ceiling, is paged by the
                        // density of its own first page (that of the windows seen may be the
                        // burst's).
                        if order == Order::Asc {
                            self.add_opening(ws, cut, false);
                            self.add_window(cut, we);
                        } else {
                            self.add_window(ws, cut);
                            self.add_opening(cut, we, false);
                        }
                    }
                    return Ok(());
                }
                None => {}
            }
        }
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        match order {
            Order::Unsorted => self.split(id, times),
            Order::Asc | Order::Desc => {
                let cut = times.last().copied().unwrap_or(w.ws);
                w.mode = Mode::Full { order };
                self.chain(id, order, cut)?;
                self.enqueue_pages(id, (1..CEILING_PAGE / PAGE).map(|p| p * PAGE));
                Ok(())
            }
            Order::Constant => {
                // Direction unknown from this page alone: the other pages will tell.
                w.mode = Mode::Full { order };
                self.enqueue_pages(id, (1..CEILING_PAGE / PAGE).map(|p| p * PAGE));
                Ok(())
            }
        }
    }

    /// Under a quota, whether the walk of window `id` has just reached, at `offset`, a page
    /// all of one millisecond (a burst), its pages sorted and its ceiling page not asked: that
    /// page is asked next. The walk would reach the ceiling inside a burst that runs past it
    /// paging the burst for nothing (the next window starts at that millisecond and pages it
    /// again): the ceiling page tells, and the window then ends before the burst (see
    /// `burst_at_ceiling`).
    fn meets_burst(&mut self, id: u64, offset: usize) -> bool {
        if self.unsorted || self.client.shape().unsorted {
            return false;
        }
        let Some(w) = self.window_mut(id) else {
            return false;
        };
        let Some(page) = w.pages.get(&offset) else {
            return false;
        };
        // Two full pages in a row of one millisecond (200 events or more): a page-sized burst
        // (a camera's backlog of a hundred or so) ends on the next page, and asking the ceiling
        // page for it would be a request the walk never needed.
        let one_ms = |events: &[Event]| {
            events.len() == PAGE && order_of(events.iter().map(|e| e.start_ms)) == Order::Constant
        };
        let before = offset
            .checked_sub(PAGE)
            .and_then(|o| w.pages.get(&o))
            .filter(|p| one_ms(&p.events));
        offset < CEILING_PAGE
            && !w.launched.contains(&CEILING_PAGE)
            && one_ms(&page.events)
            && before.is_some_and(|p| {
                p.events.first().map(|e| e.start_ms) == page.events.first().map(|e| e.start_ms)
            })
            && matches!(order_of(w.times().into_iter()), Order::Asc | Order::Desc)
    }

    /// A full ceiling page of window `id` all of one millisecond (`times`), a burst that runs
    /// past the ceiling, on a service that sorts: paged whole, the window would page the burst
    /// up to the ceiling, and the next window, which starts at that millisecond, all of it
    /// again. So a walk that reached the burst ends before it; without a quota, the window is
    /// cut out of the burst's reach, before it (ascending) or after it (descending), its
    /// first page telling which; none without it yet (`Wait`). None where the window's pages
    /// tell no order, or it starts (ends) at the burst.
    fn burst_at_ceiling(&mut self, id: u64, times: &[i64]) -> Option<Burst> {
        if self.unsorted || self.client.shape().unsorted {
            return None;
        }
        let frugal = self.frugal;
        let w = self.window_mut(id)?;
        let t = *times.first()?;
        let below: Vec<&Page> = w.pages.range(..CEILING_PAGE).map(|(_, p)| p).collect();
        if below.is_empty() {
            return (!frugal).then_some(Burst::Wait);
        }
        let order = order_of(
            below
                .iter()
                .flat_map(|p| p.events.iter().map(|e| e.start_ms))
                .chain(times.iter().copied()),
        );
        if frugal {
            // Walked from offset 0 up to a page of the burst.
            let (&last, page) = w.pages.range(..CEILING_PAGE).next_back()?;
            let walked = w.pages.range(..CEILING_PAGE).count() == last / PAGE + 1;
            let at_burst = page.events.iter().all(|e| e.start_ms == t);
            let inside = match order {
                Order::Asc => t > w.ws,
                Order::Desc => t + 1 < w.we,
                _ => false,
            };
            if !(walked && inside) {
                return None;
            }
            return Some(if at_burst {
                Burst::Chain(order, last + PAGE)
            } else {
                Burst::Walk
            });
        }
        match order {
            Order::Asc if t - BURST_MARGIN > w.ws => Some(Burst::Cut(t - BURST_MARGIN, order)),
            Order::Desc if t + BURST_MARGIN < w.we => Some(Burst::Cut(t + BURST_MARGIN, order)),
            _ => None,
        }
    }

    /// Under a quota, a walk that reaches a page of the burst its ceiling page is all of (see
    /// `burst_at_ceiling`): what that tells.
    fn burst_reached(&mut self, id: u64) -> Option<Burst> {
        let w = self.window_mut(id)?;
        let times: Vec<i64> = w
            .pages
            .get(&CEILING_PAGE)
            .filter(|p| p.events.len() == PAGE)
            .map(|p| p.events.iter().map(|e| e.start_ms).collect())?;
        if order_of(times.iter().copied()) != Order::Constant {
            return None;
        }
        match self.burst_at_ceiling(id, &times)? {
            Burst::Chain(order, end) => Some(Burst::Chain(order, end)),
            _ => None,
        }
    }

    /// Window `id`, walked in `order` up to a page (before offset `end`) of the burst that
    /// its ceiling page is all of, ends before that burst: the next window starts at it.
    fn chain_before(&mut self, id: u64, order: Order, end: usize) -> Result<()> {
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        w.mode = Mode::Known { end };
        let t = w
            .pages
            .get(&CEILING_PAGE)
            .and_then(|p| p.events.first())
            .map(|e| e.start_ms);
        match t {
            Some(t) => self.chain(id, order, t),
            None => Ok(()),
        }
    }

    /// Cuts window `id` at `cut` and plans the rest of its range as a new window.
    fn chain(&mut self, id: u64, order: Order, cut: i64) -> Result<()> {
        let density = self.density;
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        let (ws, we) = (w.ws, w.we);
        // A burst among its pages (one all of a millisecond) tells nothing of the density
        // elsewhere: the density seen stays as it was.
        let burst = w.pages.values().any(|p| {
            p.events.len() == PAGE
                && order_of(p.events.iter().map(|e| e.start_ms)) == Order::Constant
        });
        match order {
            Order::Asc => {
                // Keep [ws, cut); every event at `cut` is fetched again by the next window.
                if cut <= ws {
                    return Err(dense(ws.max(cut)));
                }
                let span = (cut - w.qs).max(1) as f64;
                w.we = cut.min(we);
                self.density = Some(OFFSET_CEILING as f64 / span);
                if burst {
                    self.density = density;
                }
                if cut < we {
                    self.add_chained(cut, we);
                }
            }
            _ => {
                // Descending: keep (cut, we); the next window ends at `cut`, inclusive.
                if cut + 1 >= we {
                    return Err(dense(cut.min(we - 1)));
                }
                let span = (w.qe - cut).max(1) as f64;
                w.ws = (cut + 1).max(ws);
                self.density = Some(OFFSET_CEILING as f64 / span);
                if burst {
                    self.density = density;
                }
                if cut + 1 > ws {
                    let old = self.windows.remove(&ws);
                    if let Some(old) = old {
                        self.windows.insert(old.ws, old);
                    }
                    self.add_chained(ws, cut + 1);
                }
            }
        }
        Ok(())
    }

    /// Replaces window `id` by two halves split at the median of `times`.
    fn split(&mut self, id: u64, mut times: Vec<i64>) -> Result<()> {
        if self.frugal {
            return self.split_sampled(id);
        }
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        let (ws, we) = (w.ws, w.we);
        if we - ws <= 1 {
            return Err(dense(ws));
        }
        times.retain(|t| *t >= ws && *t < we);
        times.sort_unstable();
        let median = times
            .get(times.len() / 2)
            .copied()
            .unwrap_or(ws + (we - ws) / 2);
        let mid = median.clamp(ws + 1, we - 1);
        // A burst there (a millisecond sampled more than once) is fetched in a window of its
        // own rather than in the queries of both halves.
        let cuts = match burst_near(&times, mid).and_then(|t| burst_window(t, ws, we)) {
            Some((a, b)) => vec![ws, a, b, we],
            None => vec![ws, mid, we],
        };
        self.count_split(id);
        self.windows.remove(&ws);
        self.queue.retain(|(i, _)| *i != id);
        for pair in cuts.windows(2).filter(|p| p[0] < p[1]) {
            self.add_window(pair[0], pair[1]);
        }
        Ok(())
    }

    fn check_done(&mut self, id: u64) -> Result<()> {
        let frugal = self.frugal;
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        if w.done {
            return Ok(());
        }
        let complete = |end: usize| (0..end).step_by(PAGE).all(|o| w.has(o));
        let ready = match w.mode {
            Mode::Opening | Mode::Probing | Mode::Walking | Mode::Deferred => false,
            Mode::Known { end } => complete(end),
            Mode::Paging { end: Some(end) } => complete(end),
            Mode::Paging { end: None } => false,
            Mode::Full { .. } => complete(CEILING_PAGE + PAGE),
        };
        if !ready {
            return Ok(());
        }
        if w.pages.values().any(|p| p.carried) && !holds_together(w) {
            self.restart(id);
            return Ok(());
        }
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        if let Mode::Full { order } = w.mode {
            let times = w.times();
            let seen = order_of(times.iter().copied());
            match (order, seen) {
                (Order::Asc, Order::Asc) | (Order::Desc, Order::Desc) => {}
                (Order::Constant, Order::Asc) | (Order::Constant, Order::Desc) => {
                    // The last in the service's order: the largest ascending, the smallest descending.
                    let cut = times.last().copied().unwrap_or(w.ws);
                    if let Some(w) = self.window_mut(id) {
                        w.mode = Mode::Full { order: seen };
                    }
                    self.chain(id, seen, cut)?;
                }
                (_, Order::Constant) => return Err(dense(times.first().copied().unwrap_or(0))),
                _ => {
                    // The order the ceiling page suggested does not hold: fetch this range again
                    // in halves (what the chained window already covers stays covered).
                    return self.split(id, times);
                }
            }
        }
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        w.done = true;
        let (ws, we, kept) = (w.ws, w.we, w.kept());
        // A full first page in another order than ascending is what a peek would see: later
        // peeks of this client would tell nothing, so they ask nothing.
        let unpeekable = w.pages.get(&0).is_some_and(|p| {
            hides_first(
                order_of(p.events.iter().map(|e| e.start_ms)),
                p.events.len(),
            )
        });
        let sizing = std::mem::take(&mut w.sizing);
        let asked = fetch_requests(w, frugal);
        if unpeekable && !self.counting {
            self.client.shape().unpeekable = true;
        }
        if self.counting {
            self.predicted += asked;
        } else if self.frugal {
            let mut shape = self.client.shape();
            shape.unsorted |= self.unsorted;
            let d = shape
                .density
                .entry(self.query.report_id.clone())
                .or_default();
            *d = d.max(kept as f64 / (we - ws).max(1) as f64);
        }
        if !self.counting {
            self.client.keep_shape();
        }
        for s in sizing {
            let sampled = s.samples.iter().filter(|t| (ws..we).contains(*t)).count();
            self.size_rest(s.rest, kept, sampled);
        }
        Ok(())
    }

    /// Fetches window `id` again from its first page, asking every page: some of its pages
    /// were carried from an earlier run and do not hold together with this run's.
    fn restart(&mut self, id: u64) {
        let Some(ws) = self
            .windows
            .iter()
            .find(|(_, w)| w.id == id)
            .map(|(k, _)| *k)
        else {
            return;
        };
        let Some(old) = self.windows.remove(&ws) else {
            return;
        };
        self.client.http().warn(format!(
            "the pages an earlier run read of the events from {} to {} do not hold together \
             with this run's (the service's order changed): the window is read again",
            format_ms(old.qs),
            format_ms(old.qe),
        ));
        self.client.held().drop_carried();
        self.progress.windows -= 1;
        let id = self.add_opening(old.ws, old.we, false);
        if let Some(w) = self.window_mut(id) {
            (w.qs, w.qe, w.spent) = (old.qs, old.qe, old.spent);
        }
    }

    /// Splits an unsorted window over the ceiling, under a daily quota, with what its pages
    /// sampled. Its size is unknown (10,000 or more), so its first part, about a third of the
    /// sample, is fetched first; that part's exact size says how many events each sampled
    /// time stands for, which sizes the rest into parts that each fit under the ceiling with a
    /// margin. Those are walked without asking their ceiling pages.
    fn split_sampled(&mut self, id: u64) -> Result<()> {
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        let (ws, we) = (w.ws, w.we);
        if we - ws <= 1 {
            return Err(dense(ws));
        }
        let mut times: Vec<i64> = w
            .times()
            .into_iter()
            .filter(|t| (ws..we).contains(t))
            .collect();
        times.sort_unstable();
        // The rests this window was to size are sized by its first part instead, from their
        // samples that fall in it.
        let mut sizing = std::mem::take(&mut w.sizing);
        self.count_split(id);
        self.windows.remove(&ws);
        self.queue.retain(|(i, _)| *i != id);
        let at = ((times.len() as f64 * FIRST_PART).ceil() as usize).min(times.len());
        let cut = cut_near(&times, at, ws, we);
        let first = self.add_opening(ws, cut, false);
        let mut rest = self.new_window(cut, we);
        let rest_id = rest.id;
        rest.mode = Mode::Deferred;
        rest.samples = Some(times.iter().copied().filter(|t| *t >= cut).collect());
        self.windows.insert(cut, rest);
        sizing.push(Sizing {
            samples: Arc::new(times),
            rest: rest_id,
        });
        if let Some(w) = self.window_mut(first) {
            w.sizing = sizing;
        }
        Ok(())
    }

    /// Sizes the deferred window `rest` from its sibling's exact size: `kept` events where
    /// `sampled` of the parent's times fell.
    fn size_rest(&mut self, rest: u64, kept: usize, sampled: usize) {
        let Some(w) = self.window_mut(rest) else {
            return;
        };
        let samples = w.samples.take().unwrap_or_default();
        if sampled == 0 || samples.is_empty() {
            self.release(rest);
            return;
        }
        let (ws, we) = (w.ws, w.we);
        let per_sample = kept as f64 / sampled as f64;
        // A burst that would fill half a part or more is fetched in a window of its own, out
        // of every other window's query; the time between is cut in parts as estimated.
        let mut bounds = vec![ws];
        for (t, n) in bursts(&samples) {
            if per_sample * n as f64 >= PART_EVENTS / 2.0 {
                if let Some((a, b)) = burst_window(t, ws, we) {
                    bounds.extend([a, b]);
                }
            }
        }
        bounds.push(we);
        bounds.dedup();
        let mut cuts = vec![ws];
        for pair in bounds.windows(2) {
            let (lo, hi) = (pair[0], pair[1]);
            let last = cuts.last().copied().unwrap_or(ws);
            if hi <= last {
                continue;
            }
            let inside: Vec<i64> = samples
                .iter()
                .copied()
                .filter(|t| (lo..hi).contains(t))
                .collect();
            // A burst's own window is one part, however large.
            let parts = if hi - lo <= 2 * BURST_MARGIN {
                1
            } else {
                ((per_sample * inside.len() as f64 / PART_EVENTS).ceil() as usize)
                    .clamp(1, inside.len().max(1))
            };
            for i in 1..parts {
                let t = cut_near(&inside, i * inside.len() / parts, lo, hi);
                let last = cuts.last().copied().unwrap_or(ws);
                if t > last && t < hi {
                    cuts.push(t);
                }
            }
            cuts.push(hi);
        }
        self.windows.remove(&ws);
        for pair in cuts.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let in_part = samples.iter().filter(|t| (a..b).contains(*t)).count();
            // Each count is a ratio of two samples; three standard errors of both must still
            // fit under the ceiling.
            let estimate = per_sample * in_part as f64;
            let error = (1.0 / sampled as f64 + 1.0 / in_part.max(1) as f64).sqrt();
            let safe = in_part > 0 && estimate * (1.0 + 3.0 * error) < CEILING_PAGE as f64;
            let part = self.add_opening(a, b, safe);
            if let Some(w) = self.window_mut(part) {
                w.estimate = Some(estimate);
            }
        }
    }

    /// A count: the requests the fetch spent on window `id` before it was split (the pages
    /// asked so far, as this count asked them). A fetch: the requests sent for it, answered or
    /// in flight, for the window that takes its start.
    fn count_split(&mut self, id: u64) {
        if self.counting {
            let asked = self.window_mut(id).map_or(0, |w| w.launched.len());
            self.predicted += asked as f64;
        } else if let Some(w) = self.window_mut(id) {
            let sent = (w.ws, w.spent + w.in_flight as u64);
            self.replaced.push(sent);
        }
    }

    /// Makes a deferred window an ordinary one.
    fn release(&mut self, id: u64) {
        let Some(w) = self.window_mut(id) else {
            return;
        };
        if !matches!(w.mode, Mode::Deferred) {
            return;
        }
        w.samples = None;
        w.mode = Mode::Opening;
        w.launched.insert(0);
        self.progress.windows += 1;
        self.queue.push_back((id, Kind::Page(0)));
    }

    /// Releases every deferred window (none can be sized any more).
    fn release_all(&mut self) -> bool {
        let deferred: Vec<u64> = self
            .windows
            .values()
            .filter(|w| matches!(w.mode, Mode::Deferred))
            .map(|w| w.id)
            .collect();
        for id in &deferred {
            self.release(*id);
        }
        !deferred.is_empty()
    }

    /// Emits the completed windows at the frontier, in time order (a count counts them).
    fn drain_ready(&mut self) -> Vec<Completed> {
        let mut out = Vec::new();
        if self.counting {
            while self.windows.get(&self.frontier).is_some_and(|w| w.done) {
                let Some(w) = self.windows.remove(&self.frontier) else {
                    break;
                };
                let (lo, hi) = (w.ws.max(self.query.start_ms), w.we.min(self.query.end_ms));
                if let Some(segment) = &w.cached {
                    // Held by the cache: its events count, its requests are none.
                    let held = if (lo, hi) == (segment.lo, segment.hi) {
                        Some(segment.events)
                    } else {
                        self.load(segment).map(|page| {
                            page.events
                                .iter()
                                .filter(|e| e.start_ms >= lo && e.start_ms < hi)
                                .count() as u64
                        })
                    };
                    let Some(held) = held else {
                        self.add_opening(w.ws, w.we, false);
                        break;
                    };
                    self.counted += held as f64;
                    self.frontier = w.we;
                    self.progress.done_ms = self.frontier - self.query.start_ms;
                    continue;
                }
                let seen: HashSet<&str> = w
                    .pages
                    .values()
                    .flat_map(|p| p.events.iter())
                    .filter(|e| e.start_ms >= lo && e.start_ms < hi)
                    .map(|e| e.id.as_str())
                    .collect();
                self.counted += (seen.len() + PAGE * w.assumed.len()) as f64;
                self.frontier = w.we;
                self.progress.done_ms = self.frontier - self.query.start_ms;
            }
            return out;
        }
        while let Some(w) = self.windows.get(&self.frontier) {
            if !w.done {
                break;
            }
            let Some(w) = self.windows.remove(&self.frontier) else {
                break;
            };
            let (lo, hi) = (w.ws.max(self.query.start_ms), w.we.min(self.query.end_ms));
            if let Some(segment) = &w.cached {
                let Some(page) = self.load(segment) else {
                    // Gone or damaged: fetched again, as any window.
                    self.add_opening(w.ws, w.we, false);
                    break;
                };
                let events: Vec<Event> = page
                    .events
                    .into_iter()
                    .filter(|e| e.start_ms >= lo && e.start_ms < hi)
                    .collect();
                // Served whole, the requests its fetch spent; a part, the pages its events
                // fill (the least a read of that part asks), at most the file's.
                let saved = if (lo, hi) == (segment.lo, segment.hi) {
                    segment.requests
                } else {
                    (events.len() as u64)
                        .div_ceil(PAGE as u64)
                        .max(1)
                        .min(segment.requests)
                };
                self.progress.saved += saved;
                self.client.http().stats.saved(saved);
                self.frontier = w.we;
                self.progress.events += events.len() as u64;
                self.progress.done_ms = self.frontier - self.query.start_ms;
                out.push(Completed {
                    events,
                    batches: page.batch.into_iter().collect(),
                    until_ms: hi,
                });
                // One file at a time: a range the cache holds whole still streams with
                // bounded memory.
                break;
            }
            let mut events: Vec<Event> = Vec::new();
            let mut batches = Vec::new();
            let mut bodies = Vec::new();
            for page in w.pages.into_values() {
                let at = u32::try_from(batches.len()).unwrap_or(u32::MAX);
                batches.extend(page.batch);
                bodies.extend(page.body);
                events.extend(
                    page.events
                        .into_iter()
                        .filter(|e| e.start_ms >= lo && e.start_ms < hi)
                        .map(|e| Event { page: at, ..e }),
                );
            }
            in_order(&mut events);
            if self.caching && lo < self.cutoff {
                let (ws, we) = (w.ws, w.we);
                let mut spent = w.spent;
                self.replaced.retain(|(at, sent)| {
                    let mine = (ws..we).contains(at);
                    spent += if mine { *sent } else { 0 };
                    !mine
                });
                let cut = hi.min(self.cutoff);
                if cut < hi {
                    let settled = events.iter().filter(|e| e.start_ms < cut).count() as u64;
                    spent = spent.min(settled.div_ceil(PAGE as u64).max(1));
                }
                self.keep_settled(lo, cut, spent, &events, &bodies);
            }
            self.frontier = w.we;
            self.progress.events += events.len() as u64;
            self.progress.done_ms = self.frontier - self.query.start_ms;
            out.push(Completed {
                events,
                batches,
                until_ms: hi,
            });
        }
        out
    }
}

impl Fetch {
    /// For a sync that the daily quota (or an interruption) stops: the pages read of the frontier window, whose
    /// query starts at the frontier, are kept in the cache when that query has settled; false
    /// when they are not (then [`Fetch::sorted_prefix`] keeps what it can). The next run starts
    /// at the frontier and takes that window first, so it asks none of those pages again; when
    /// the window completes, [`holds_together`] checks that the two runs' pages make one answer.
    fn carry_stopped(&self) -> bool {
        let Some(cache) = self.client.cache() else {
            return false;
        };
        let Some(w) = self.windows.get(&self.frontier) else {
            return false;
        };
        if !self.carry || w.done || w.cached.is_some() || w.qs != self.frontier {
            return false;
        }
        if widened(w.qs, w.qe).1 >= self.cutoff {
            return false;
        }
        let pages: Vec<(usize, &Bytes)> = w
            .pages
            .iter()
            .filter_map(|(o, p)| Some((*o, p.body.as_ref()?)))
            .collect();
        if pages.is_empty() {
            return false;
        }
        let report = self.query.report_id.as_deref();
        match cache.carry(report, w.qs, w.qe, &pages) {
            Ok(()) => true,
            Err(e) => {
                self.client.http().warn(format!(
                    "cannot keep the pages read so far in the cache ({e}): the next run asks \
                     them again"
                ));
                false
            }
        }
    }

    /// What the incomplete frontier window's pages show to be complete, for a fetch that
    /// stops there (the daily quota ran out): on a service that sorts events ascending, its
    /// pages asked from offset 0 on, all full, hold every event of the window before the
    /// last one's startTime. So a sync keeps them, and its next run starts there rather than
    /// at the window's start. None when the pages do not show it (another order, no full page).
    fn sorted_prefix(&mut self) -> Option<Completed> {
        let (start, end) = (self.query.start_ms, self.query.end_ms);
        let w = self.windows.get(&self.frontier)?;
        if w.done || w.cached.is_some() {
            return None;
        }
        let pages: Vec<&Page> = (0..=CEILING_PAGE)
            .step_by(PAGE)
            .map_while(|o| w.pages.get(&o).filter(|p| p.events.len() == PAGE))
            .collect();
        let times = pages
            .iter()
            .flat_map(|p| p.events.iter().map(|e| e.start_ms));
        if order_of(times) != Order::Asc {
            return None;
        }
        let last = pages.last()?.events.last()?.start_ms;
        let (lo, until) = (w.ws.max(start), last.min(w.we).min(end));
        if until <= lo {
            return None;
        }
        let mut events = Vec::new();
        let mut batches = Vec::new();
        for page in pages {
            let at = u32::try_from(batches.len()).unwrap_or(u32::MAX);
            batches.extend(page.batch.clone());
            for e in &page.events {
                if e.start_ms >= lo && e.start_ms < until {
                    events.push(Event {
                        start_ms: e.start_ms,
                        id: e.id.clone(),
                        raw: e.raw.clone(),
                        page: at,
                        row: e.row,
                    });
                }
            }
        }
        in_order(&mut events);
        self.progress.events += events.len() as u64;
        self.progress.done_ms = until - start;
        Some(Completed {
            events,
            batches,
            until_ms: until,
        })
    }
}

impl Fetch {
    /// Adds the part `[lo, hi)` of a cached segment, complete without a request.
    fn add_cached(&mut self, segment: Segment, lo: i64, hi: i64) {
        let mut w = self.new_window(lo, hi);
        w.mode = Mode::Known { end: 0 };
        w.done = true;
        w.cached = Some(segment);
        self.windows.insert(lo, w);
    }

    /// The events of a cached segment as one page; None when its file is gone, or damaged (then
    /// removed, with a warning).
    fn load(&self, segment: &Segment) -> Option<Page> {
        let cache = self.client.cache()?;
        let damage = match cache.read(self.query.report_id.as_deref(), segment) {
            Ok(body) => {
                let url = self.client.config().url("/v2/events");
                match parse_page(&url, body, self.keep) {
                    Ok(page) if page.events.len() as u64 != segment.events => {
                        Damage::Corrupt(format!(
                            "holds {} events where its header says {}",
                            page.events.len(),
                            segment.events
                        ))
                    }
                    Ok(page) => match page
                        .events
                        .iter()
                        .find(|e| e.start_ms < segment.lo || e.start_ms >= segment.hi)
                    {
                        Some(e) => Damage::Corrupt(format!(
                            "holds an event of {}, out of its range",
                            format_ms(e.start_ms)
                        )),
                        None => return Some(page),
                    },
                    Err(e) => Damage::Corrupt(format!("does not hold events ({e})")),
                }
            }
            Err(d) => d,
        };
        if let Damage::Corrupt(why) = damage {
            self.client.http().warn(format!(
                "the cached events of {} to {} (`{}`) {why}: the file is removed and its range \
                 fetched again",
                format_ms(segment.lo),
                format_ms(segment.hi),
                segment.path.display()
            ));
            cache.remove(segment);
        }
        None
    }

    /// Writes the settled part `[lo, cut)` of a completed window to the cache, with the
    /// `requests` it took: its `events` (sorted) when they hold their text, else those of its
    /// pages' `bodies`, kept once each as the window keeps them. A cache that cannot be
    /// written is warned about once, then left alone by this fetch.
    fn keep_settled(
        &mut self,
        lo: i64,
        cut: i64,
        requests: u64,
        events: &[Event],
        bodies: &[Bytes],
    ) {
        let Some(cache) = self.client.cache() else {
            return;
        };
        let report = self.query.report_id.as_deref();
        let written = if self.keep == EventForm::Text {
            cache.write(
                report,
                lo,
                cut,
                requests,
                events
                    .iter()
                    .filter(|e| e.start_ms >= lo && e.start_ms < cut)
                    .map(Event::text),
            )
        } else {
            let url = self.client.config().url("/v2/events");
            let mut all = Vec::new();
            for body in bodies {
                match parse_events(&url, body) {
                    Ok(page) => all.extend(page),
                    Err(_) => return,
                }
            }
            all.retain(|e| e.start_ms >= lo && e.start_ms < cut);
            in_order(&mut all);
            cache.write(report, lo, cut, requests, all.iter().map(Event::text))
        };
        match written {
            Ok(()) => self.wrote = true,
            Err(e) => {
                self.client.http().warn(format!(
                    "cannot write the cache of settled events in `{}` ({e}): this read goes on \
                     without it",
                    cache.root().display()
                ));
                self.caching = false;
            }
        }
    }
}

/// A query's range in pieces, in time order: the parts the client's cache holds of it (settled
/// ones only: the part within the settle period of now is always fetched) and the gaps. A
/// refresh drops what the cache held of the range and fetches it whole.
fn pieces(client: &Client, query: &Query) -> Vec<Piece> {
    let (start, end) = (query.start_ms, query.end_ms);
    let Some(cache) = client.cache() else {
        return vec![Piece::Gap(start, end)];
    };
    let report = query.report_id.as_deref();
    let settled = end.min(settled_before(client)).max(start);
    if query.refresh {
        if settled > start {
            cache.forget(report, start, settled);
        }
        return vec![Piece::Gap(start, end)];
    }
    let mut out = if settled > start {
        cache.cover(report, start, settled)
    } else {
        Vec::new()
    };
    if end > settled {
        match out.last_mut() {
            Some(Piece::Gap(_, hi)) => *hi = end,
            _ => out.push(Piece::Gap(settled, end)),
        }
    }
    out
}

/// The requests a fetch makes for a window that a count completed: its pages up to its first
/// short one (or the ceiling), its ceiling page when that was asked past its end, and without a
/// quota the pages it asks ahead past its end (none on a sorted answer, whose density bounds
/// them, or on a window of two pages; else about half of `LOOKAHEAD` in flight when it pages
/// one ahead at a time, more when the density seen sent it further).
fn fetch_requests(w: &Window, frugal: bool) -> f64 {
    let end = match w.mode {
        Mode::Known { end } | Mode::Paging { end: Some(end) } => end,
        Mode::Full { .. } => CEILING_PAGE + PAGE,
        _ => w.pages.keys().max().map_or(PAGE, |o| o + PAGE),
    };
    let pages = (end / PAGE) as f64;
    let ceiling = f64::from(u8::from(
        w.launched.contains(&CEILING_PAGE) && end <= CEILING_PAGE,
    ));
    if frugal || end > CEILING_PAGE || end == PAGE {
        return pages + ceiling;
    }
    // A sorted window is paged ahead no further than its density puts its end; an unsorted
    // one asks its second page alone, and pages ahead only once that and its ceiling page
    // tell it is larger.
    let sorted = matches!(order_of(w.times().into_iter()), Order::Asc | Order::Desc);
    let past = if sorted || !w.launched.contains(&CEILING_PAGE) {
        0.0
    } else if w.ahead <= LOOKAHEAD {
        // No density seen: about half the pages it spares (see `spare_pages`).
        spare_pages(end / PAGE, w) as f64 / 2.0
    } else {
        (w.ahead as f64 - pages).max(LOOKAHEAD as f64 / 2.0)
    };
    pages + ceiling + past
}

/// The pages a window paged without a known end, and in no order that tells its density, asks
/// past the next one it needs, when `needed` pages are known needed: one for every four
/// (less its ceiling page, a request past the end of a window under the ceiling), up to
/// [`LOOKAHEAD`] in all, so that the pages asked past its end stay within a quarter of its
/// pages.
fn spare_pages(needed: usize, w: &Window) -> usize {
    let probe = usize::from(w.launched.contains(&CEILING_PAGE));
    (needed / 4).saturating_sub(probe).min(LOOKAHEAD - 1)
}

/// The furthest page a window paged without a known end asks ahead, once a page of it is
/// full: [`LOOKAHEAD`] pages past its furthest full page (fewer on an unsorted answer while
/// it is small, see [`spare_pages`]), but on a sorted answer no further
/// than the page that the rest of its time would make the first short one at the density of
/// its pages, so that few pages are asked past its end (a denser rest is paged a page or two
/// at a time, near its end only). The next page is always asked. `order`: that of its pages.
fn paged_reach(w: &Window, order: Order) -> usize {
    let Some((&furthest, page)) = w.pages.iter().rev().find(|(_, p)| p.events.len() == PAGE) else {
        return LOOKAHEAD * PAGE;
    };
    let ahead = furthest + LOOKAHEAD * PAGE;
    let unordered = furthest + PAGE * (1 + spare_pages(furthest / PAGE + 2, w));
    let Some(last) = page.events.last().map(|e| e.start_ms) else {
        return unordered;
    };
    let Some((covered, left)) = covered(order, last, w.qs, w.qe) else {
        return unordered;
    };
    let held = (furthest + PAGE) as f64;
    let events = held + held * left.max(0) as f64 / covered.max(1) as f64;
    let short = (events / PAGE as f64) as usize * PAGE;
    short.clamp(furthest + PAGE, ahead)
}

/// A cut of `[ws, we)` near the `at`-th of the sorted sampled times, in a gap between them: a
/// window's query is widened by 1 ms on both sides, so the milliseconds on either side of a
/// cut are fetched twice, and a cut inside a burst (thousands of events in a millisecond)
/// would fetch the burst twice. The widest gap within a tenth of the sample either side.
fn cut_near(times: &[i64], at: usize, ws: i64, we: i64) -> i64 {
    let fallback = times
        .get(at)
        .copied()
        .unwrap_or(ws + (we - ws) / 2)
        .clamp(ws + 1, we - 1);
    let reach = (times.len() / 10).max(1);
    let lo = at.saturating_sub(reach).max(1);
    let hi = (at + reach).min(times.len().saturating_sub(1));
    let gap = (lo..=hi)
        .filter(|&j| j < times.len())
        .map(|j| (times[j] - times[j - 1], j))
        .filter(|(g, _)| *g >= 3)
        .filter(|(g, j)| burst_near(times, times[j - 1] + g / 2).is_none())
        // The nearest to `at` of the gaps as wide as the widest, up to a factor of 2.
        .min_by_key(|(g, j)| (std::cmp::Reverse(g.ilog2()), j.abs_diff(at)));
    match gap {
        Some((g, j)) => (times[j - 1] + g / 2).clamp(ws + 1, we - 1),
        None => burst_near(times, fallback)
            .and_then(|t| beside(times, t, at, ws, we))
            .unwrap_or(fallback),
    }
}

/// How far a cut keeps from a burst: a window `[ws, we)` is queried from `ws - 1` to `we + 1`
/// (see [`widened`]), both ends included by a service with inclusive bounds, so a burst at `t`
/// is in no query of a window that ends at `t - 2` or before or starts at `t + 2` or after.
const BURST_MARGIN: i64 = 2;

/// The bursts among the sorted sampled `times`: each millisecond sampled more than once (each
/// sampled time stands for many events), with how many times.
fn bursts(times: &[i64]) -> Vec<(i64, usize)> {
    let mut out: Vec<(i64, usize)> = Vec::new();
    for pair in times.windows(2).filter(|p| p[0] == p[1]) {
        match out.last_mut() {
            Some((t, n)) if *t == pair[0] => *n += 1,
            _ => out.push((pair[0], 2)),
        }
    }
    out
}

/// A burst among the sorted sampled `times` within 1 ms of a cut at `c`, which would put it
/// in the queries of the windows on both sides of the cut, each then paging it.
fn burst_near(times: &[i64], c: i64) -> Option<i64> {
    let from = times.partition_point(|t| *t < c - 1);
    times[from..]
        .windows(2)
        .take_while(|p| p[0] <= c + 1)
        .find(|p| p[0] == p[1])
        .map(|p| p[0])
}

/// The window of its own that a burst at `t` is fetched in, within `[ws, we)`: from
/// [`BURST_MARGIN`] before it to as far after, so that no other window's query holds it. None
/// when that is the whole of `[ws, we)`.
fn burst_window(t: i64, ws: i64, we: i64) -> Option<(i64, i64)> {
    let (a, b) = ((t - BURST_MARGIN).max(ws), (t + BURST_MARGIN).min(we));
    (a > ws || b < we).then_some((a, b))
}

/// A cut of `[ws, we)` beside the burst at `t` rather than in it, on the side nearer to the
/// `at`-th of the sorted sampled `times` (with sampled times on both sides of the cut).
fn beside(times: &[i64], t: i64, at: usize, ws: i64, we: i64) -> Option<i64> {
    let (first, end) = (
        times.partition_point(|x| *x < t),
        times.partition_point(|x| *x <= t),
    );
    let before =
        (t - BURST_MARGIN > ws && first > 0).then_some((at.abs_diff(first), t - BURST_MARGIN));
    let after = (t + BURST_MARGIN < we && end < times.len())
        .then_some((at.abs_diff(end), t + BURST_MARGIN));
    [before, after].into_iter().flatten().min().map(|(_, c)| c)
}

/// Whether a window's pages, some carried from an earlier run, make one answer: no event on
/// two of them. The service's order changing between the runs would show as an event seen
/// twice (and another one missed), since the pages' sizes still add up to the window's.
fn holds_together(w: &Window) -> bool {
    let mut seen = HashSet::new();
    w.pages
        .values()
        .flat_map(|p| &p.events)
        .all(|e| seen.insert(e.id.as_str()))
}

/// Checks a query before anything is sent.
pub fn check(query: &Query) -> Result<()> {
    for (name, ms) in [("start", query.start_ms), ("end", query.end_ms)] {
        if !(MIN_MS..=MAX_MS + 1).contains(&ms) {
            return Err(Error::Argument(format!(
                "`{name}` must be from 0001-01-01 to 9999-12-31 (the dates the service's \
                 timestamps can hold), got {ms} ms since 1970"
            )));
        }
    }
    if query.end_ms <= query.start_ms {
        return Err(Error::Argument(format!(
            "`end` ({}) must be after `start` ({})",
            format_ms(query.end_ms),
            format_ms(query.start_ms)
        )));
    }
    if let Some(r) = &query.report_id {
        super::check_uuid(r, "report_id")?;
    }
    Ok(())
}

impl Fetch {
    /// A planner of `query`'s windows: the `pieces` the cache holds, complete, and the first
    /// window of each gap queued. `counting`: a count (a plan).
    fn new(
        client: Client,
        query: &Query,
        keep: EventForm,
        sink: Option<ProgressSink>,
        counting: bool,
        pieces: Vec<Piece>,
    ) -> Fetch {
        let in_flight_max = client
            .config()
            .limits
            .read_concurrency
            .unwrap_or(DEFAULT_IN_FLIGHT)
            .max(1);
        // Under a daily quota requests are what a fetch costs: none is spent on speculation.
        let frugal = client.config().limits.daily_requests.is_some();
        let unsorted = client.shape().unsorted;
        let caching = !counting && client.cache().is_some();
        let carry = caching && query.partial;
        let cutoff = settled_before(&client);
        let mut p = Fetch {
            progress: Progress {
                total_ms: query.end_ms - query.start_ms,
                ..Progress::default()
            },
            frontier: query.start_ms,
            client,
            query: query.clone(),
            windows: BTreeMap::new(),
            queue: VecDeque::new(),
            tasks: JoinSet::new(),
            in_flight_max,
            next_id: 0,
            keep,
            sink,
            density: None,
            frugal,
            unsorted,
            counting,
            counted: 0.0,
            predicted: 0.0,
            approximate: false,
            sent: 0,
            started: std::time::Instant::now(),
            expected_at: None,
            caching,
            carry,
            ended: false,
            cutoff,
            walk_pages: 0,
            wrote: false,
            replaced: Vec::new(),
        };
        for piece in pieces {
            match piece {
                Piece::Held(segment, lo, hi) => p.add_cached(segment, lo, hi),
                Piece::Gap(lo, hi) => p.add_gap(lo, hi),
            }
        }
        p
    }

    /// Sends what is queued and handles the next answer: the windows it completed (in time
    /// order), or None when every window is done.
    async fn step(&mut self) -> Result<Option<Vec<Completed>>> {
        loop {
            // Windows complete without a request (from the cache) go first.
            let ready = self.drain_ready();
            if !ready.is_empty() {
                return Ok(Some(ready));
            }
            if self.windows.is_empty() {
                return Ok(None);
            }
            self.launch_pending();
            let Some(joined) = self.tasks.join_next().await else {
                if self.release_all() {
                    continue;
                }
                // Nothing in flight and nothing queued, yet windows remain: never return a
                // partial result as if it were whole.
                return Err(self.stalled());
            };
            match joined {
                Ok((id, kind, Ok(page))) => self.on_result(id, kind, page)?,
                Ok((_, _, Err(e))) => return Err(e),
                Err(e) => {
                    return Err(Error::Transport(format!(
                        "an events request task failed: {e}"
                    )))
                }
            }
            return Ok(Some(self.drain_ready()));
        }
    }

    /// Updates what the progress expects: the events of the range (the windows emitted,
    /// exactly; each open window as far as its pages tell (see [`Window::guess`]); the
    /// windows that tell nothing yet at the density of the others, or of what earlier fetches
    /// of this client saw), the requests those take, and the time they take at the read rate.
    /// With nothing to go on yet (an unsorted first window still open) it expects nothing.
    fn expect(&mut self) {
        let (mut known, mut span) = (self.progress.events as f64, self.progress.done_ms as f64);
        let (mut kept, mut unknown_ms) = (self.progress.events, 0.0);
        let done = (span > 0.0).then(|| known / span);
        for w in self.windows.values() {
            kept += w.kept_so_far() as u64;
            match w.guess(done) {
                Some(g) => {
                    known += g;
                    span += (w.we - w.ws).max(1) as f64;
                }
                None => unknown_ms += (w.we - w.ws).max(1) as f64,
            }
        }
        // A window cut shorter drops events it had kept: the count shown never goes back, and
        // is exact once every window is emitted.
        self.progress.fetched = if self.windows.is_empty() {
            self.progress.events
        } else {
            kept.max(self.progress.fetched)
        };
        let density = if span > 0.0 {
            Some(known / span)
        } else {
            let shape = self.client.shape();
            shape.density.get(&self.query.report_id).copied()
        };
        let Some(density) = density else {
            return;
        };
        let fetched = self.progress.fetched as f64;
        let expected = (known + density * unknown_ms).round().max(fetched);
        let left = expected - fetched;
        // The pages left, and a partial last page for each window left (10,000 events each).
        let open = if self.windows.is_empty() { 0.0 } else { 1.0 };
        let more = (left / PAGE as f64).ceil() + (left / OFFSET_CEILING as f64).floor() + open;
        let requests = self.progress.requests + more as u64;
        self.progress.expected_events = Some(expected as u64);
        self.progress.expected_requests = Some(requests);
        let elapsed = self.started.elapsed().as_secs_f64();
        let seen = (self.progress.requests >= 3 && elapsed >= 1.0)
            .then(|| self.progress.requests as f64 / elapsed);
        let rate = match (self.client.read_rate(), seen) {
            (Some(limit), Some(seen)) => Some(limit.min(seen)),
            (limit, seen) => limit.or(seen),
        };
        self.progress.eta_ms = if self.windows.is_empty() {
            Some(0)
        } else {
            rate.filter(|r| *r > 0.0)
                .map(|r| ((requests - self.progress.requests) as f64 / r * 1000.0) as u64)
        };
    }

    /// Hands the progress, with what it expects, to the sink, if any. What it expects is
    /// worked out again at most every [`EXPECT_EVERY`] (a bar is drawn no more often), and
    /// at the end: it reads every open window's events, a few thousand each, and a fetch
    /// reports after every page.
    fn report(&mut self) {
        let due = self.windows.is_empty()
            || self
                .expected_at
                .is_none_or(|at| at.elapsed() >= EXPECT_EVERY);
        if self.sink.is_some() && due {
            self.expect();
            self.expected_at = Some(std::time::Instant::now());
        }
        if let Some(s) = &self.sink {
            s(self.progress);
        }
    }

    fn stalled(&self) -> Error {
        let stalled = self
            .windows
            .values()
            .map(|w| {
                let missing: Vec<usize> = (0..CEILING_PAGE)
                    .step_by(PAGE)
                    .filter(|o| !w.has(*o))
                    .take(5)
                    .collect();
                let mut launched: Vec<&usize> = w.launched.iter().collect();
                launched.sort();
                format!(
                    "{}..{} ({:?}, {} pages, missing {missing:?}, launched {launched:?})",
                    format_ms(w.ws),
                    format_ms(w.we),
                    w.mode,
                    w.pages.len()
                )
            })
            .collect::<Vec<_>>();
        Error::Transport(format!(
            "internal error: event windows left incomplete: {}",
            stalled.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_time;

    #[test]
    fn order_detection() {
        assert_eq!(order_of([1, 2, 2, 3].into_iter()), Order::Asc);
        assert_eq!(order_of([3, 3, 1].into_iter()), Order::Desc);
        assert_eq!(order_of([5, 5].into_iter()), Order::Constant);
        assert_eq!(order_of([1, 3, 2].into_iter()), Order::Unsorted);
    }

    #[test]
    fn only_a_full_page_in_another_order_hides_the_first_events() {
        assert!(hides_first(Order::Desc, PAGE) && hides_first(Order::Unsorted, PAGE));
        assert!(!hides_first(Order::Asc, PAGE) && !hides_first(Order::Constant, PAGE));
        assert!(!hides_first(Order::Desc, PAGE - 1));
    }

    #[test]
    fn time_round_trip() {
        let ms = 1_767_571_200_123;
        assert_eq!(parse_time(&format_ms(ms)), Some(ms));
        assert_eq!(
            parse_time("2026-01-05T09:15:23.123-05:00"),
            Some(1_767_622_523_123)
        );
        assert_eq!(parse_time("garbage"), None);
    }

    #[test]
    fn events_are_views_of_their_page() {
        let url = url::Url::parse("http://127.0.0.1/v2/events").expect("url");
        let body = Bytes::from(
            " [ {\"id\":\"a\\\"b\",\"startTime\":\"2026-01-05T09:15:23.123-05:00\",\"t\":\"é · ✓\"} ,\n{\"startTime\":\"1970-01-01T00:00:00Z\",\"id\":\"c\"}]",
        );
        let events = parse_events(&url, &body).expect("a page");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].id, "a\"b");
        assert_eq!(events[0].start_ms, 1_767_622_523_123);
        assert_eq!(
            events[0].text(),
            "{\"id\":\"a\\\"b\",\"startTime\":\"2026-01-05T09:15:23.123-05:00\",\"t\":\"é · ✓\"}"
        );
        assert_eq!(
            events[1].text(),
            "{\"startTime\":\"1970-01-01T00:00:00Z\",\"id\":\"c\"}"
        );
        assert!(parse_events(&url, &Bytes::from_static(b"{}")).is_err());
    }

    #[test]
    fn times_are_read_as_chrono_reads_them() {
        let chrono_ms = |s: &str| {
            chrono::DateTime::parse_from_rfc3339(s)
                .ok()
                .map(|t| t.timestamp_millis())
        };
        let mut cases: Vec<String> = Vec::new();
        for (y, mo, d) in [
            (1969, 12, 31),
            (1970, 1, 1),
            (2000, 2, 29),
            (2024, 2, 29),
            (2025, 2, 29),
            (2100, 2, 29),
            (2026, 13, 1),
            (2026, 4, 31),
            (2026, 12, 31),
            (1, 1, 1),
            (9999, 12, 31),
        ] {
            for time in [
                "00:00:00", "23:59:59", "24:00:00", "12:60:00", "12:00:60", "09:15:23",
            ] {
                for frac in ["", ".", ".1", ".12", ".123", ".123456789", ".9999"] {
                    for off in [
                        "Z", "z", "+00:00", "-05:00", "+05:45", "-03:30", "+24:00", "+01:60",
                        "+0100", "",
                    ] {
                        cases.push(format!("{y:04}-{mo:02}-{d:02}T{time}{frac}{off}"));
                    }
                }
            }
        }
        cases.extend(
            [
                "2026-01-05 09:15:23Z",
                "2026-01-05t09:15:23Z",
                "2026-1-05T09:15:23Z",
                "+2026-01-05T09:15:23Z",
                "2026-01-05T09:15:23.123-05:00 ",
            ]
            .map(String::from),
        );
        for case in &cases {
            let colonless = case.ends_with("+0100");
            match parse_time(case) {
                // The one form chrono refuses and the service may send: `+0100`.
                Some(ms) if colonless => assert_eq!(
                    Some(ms),
                    chrono_ms(&case.replace("+0100", "+01:00")),
                    "{case}"
                ),
                got => assert_eq!(got, chrono_ms(case), "{case}"),
            }
        }
    }
}
