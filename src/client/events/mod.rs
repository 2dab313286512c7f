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
//! A sync's fetch stopped early (Ctrl-C, the daily quota) carries the pages it read of the
//! windows it did not hand out to its next run (`carry`), which plans the same windows from
//! the same pages and asks none of them again.
//!
//! One planner serves four goals ([`Goal`]: a fetch, a sync's fetch, a plan's count, a quota
//! check's count); what differs between them is said by the goal, and how far ahead it asks by
//! its [`Pace`]. The planner ([`Planner`]) does no I/O: its interface is
//! [`Planner::next_ask`] (the request it wants sent), [`Planner::on_result`] (the page that
//! came back), the windows it hands out ([`Planner::drain_ready`]), the cache's file it wants
//! read ([`Planner::wants_file`]) and its notes for the driver ([`Note`]), with the clock
//! handed in. Its driver (`run`) sends the requests, reads and writes the cache, acts on the
//! notes and says the progress; `scripted` (tests) drives it with pages of a service of known
//! events instead, without a server.
//!
//! By concern. The planner: `book` the open windows, the requests queued and the notes (every
//! other part changes them through its calls); `fetch` windows opened, pages asked and
//! answers taken; `search` where a window ends (ceiling pages, bursts, chains and splits);
//! `seek` a count's search for a window's last page, and what a count found; `done` the
//! bookkeeping of a window's end (completion, windows handed out in order, what a stopped
//! sync keeps); `cached` the parts the cache holds; `progress` what it tells of its progress;
//! `window` one window's state and its changes (no other file writes a window's fields); this file its types. Around it: `run` the driver; `stream`
//! the entry points (stream, all at once, Arrow batches, peek); `count` a plan's count and
//! the quota check; `page` asks and parses one page; `files` the cache's files read and
//! written; `held` keeps pages asked ahead for the fetch that takes them; `carry` the blob of
//! what a stopped sync carries.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::sync::Arc;

use super::cache::{Seen, Segment};
use super::error::{Error, Result, Wording};
use super::lists::{OFFSET_CEILING, PAGE};
use crate::time::format_ms;

mod book;
mod cached;
pub mod carry;
mod count;
mod done;
mod fetch;
mod files;
mod held;
mod page;
mod progress;
mod run;
mod search;
mod seek;
mod stream;
mod window;

pub use carry::{CarriedPage, CarrySlot};
pub use count::{count, density_seen};
pub use held::Held;
pub(crate) use page::{order_of, PageOrder};
pub use page::{parse_events, Completed, Event, EventForm, Page};
use page::{Reuse, MAX_MS, MIN_MS};
use seek::requests_for;
pub use seek::Count;
pub use stream::{
    fetch_all, fetch_batches, peek, stream, stream_batches, stream_carrying, AbortOnDrop,
    STOP_GRACE,
};

/// The last offset the service accepts, rounded to a page.
pub(crate) const CEILING_PAGE: usize = OFFSET_CEILING - PAGE;
/// A plan asks a page that may lie past a window's end (an empty page, which the fetch does
/// not ask) only when the fetch is at least this many requests a page so asked, so that it
/// adds at most 2% to the fetch that follows it (see `Planner::walk_pages`).
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
pub struct EventsShape {
    unsorted: bool,
    /// A full first page (one [`peek`] asked, or a fetched window's) was not sorted
    /// ascending: later peeks tell nothing here, so they ask nothing.
    unpeekable: bool,
    density: std::collections::HashMap<Option<String>, f64>,
    /// What the client's cache holds of it, as this client last read or wrote it.
    kept: Seen,
}

impl EventsShape {
    /// A client's shape at its start: what its cache kept of the account's (see [`Seen`]).
    pub(crate) fn from_seen(seen: Seen) -> EventsShape {
        EventsShape {
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

/// How often a fetch with a progress sink works out what it expects (see
/// [`Planner::progress_at`]).
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
    /// [`Planner::expect`]); None until a page tells anything.
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

/// What a request of a window asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    /// The ceiling page.
    Probe,
    /// A page at this offset.
    Page(usize),
}

impl Ask {
    /// The offset of the page asked.
    fn offset(self) -> usize {
        match self {
            Ask::Probe => CEILING_PAGE,
            Ask::Page(o) => o,
        }
    }
}

/// A request the planner wants sent: the page `kind` of window `id`, whose query is
/// `[qs, qe)`.
#[derive(Debug, Clone, Copy)]
struct PageAsk {
    id: u64,
    kind: Ask,
    qs: i64,
    qe: i64,
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
    Full { order: PageOrder },
    /// Under a daily quota: one page at a time, the next asked when the last came back full,
    /// so that no request is spent past the window's end.
    Walking,
    /// A part of an unsorted window that waits for its size to be estimated (`Sizing`).
    Deferred,
}

/// What a full ceiling page all of one millisecond makes of a sorted window (see
/// [`Planner::burst_at_ceiling`]).
#[derive(Debug, Clone, Copy)]
enum Burst {
    /// Its first page, not in yet, tells the order.
    Wait,
    /// Walked up to another burst: walked on, up to a page of this one.
    Walk,
    /// Its pages up to this offset are in and hold it all before the burst: it ends there, and
    /// the next window starts at the burst.
    Chain(PageOrder, usize),
    /// Cut here: the part before the burst (ascending) or after it (descending) is a window
    /// whose query does not reach it, and the rest another.
    Cut(i64, PageOrder),
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
    /// Whether it was sized from a sample with enough margin under the ceiling that it is
    /// walked without asking its ceiling page, sorted or not.
    margin: Margin,
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

/// What a planner is for. The four goals plan windows alike; what differs is said here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goal {
    /// Every event of the query, handed out window by window in time order.
    Fetch,
    /// A sync's fetch: stopped early (Ctrl-C, the daily quota, an error, dropped), it carries
    /// the pages it read of the windows it did not hand out to its next run.
    Sync,
    /// A plan's count: only the pages that decide are asked, the others are known full from
    /// a later full page, and each window's end is searched for. `walk_pages`: the pages of a
    /// settled window it may ask in turn, rather than past where the window may end, when a
    /// page past the end would cost more than 2% of the fetch (its pages are held for the
    /// fetch that follows).
    Plan { walk_pages: usize },
    /// A quota check's count: a plan's, spending as little as it can.
    Check,
}

impl Goal {
    /// Whether it hands out the events, window by window (a fetch, a sync's), rather than
    /// counting them and predicting what each window costs the fetch (a plan, a quota check).
    fn hands_out(self) -> bool {
        match self {
            Goal::Fetch | Goal::Sync => true,
            Goal::Plan { .. } | Goal::Check => false,
        }
    }

    /// Whether it searches for a window's end, asking only the pages that decide (a count),
    /// rather than walking or paging the window whole (a fetch).
    fn searches(self) -> bool {
        !self.hands_out()
    }

    /// Whether a full page tells it that every page before it is full, so that it asks none
    /// of them (a count: it needs their number, not their events).
    fn infers_full_pages(self) -> bool {
        !self.hands_out()
    }

    /// Whether its windows take the pages a plan or a quota check held for them (a fetch).
    fn takes_held(self) -> bool {
        self.hands_out()
    }

    /// Whether it keeps its completed windows' settled parts for the client's cache (a
    /// fetch, where the client has a cache).
    fn writes_cache(self) -> bool {
        self.hands_out()
    }

    /// Whether a page it asks is held for a later fetch (a count's, of a settled range: the
    /// fetch that follows a plan takes it instead of asking it again), or a held one taken.
    fn reuse(self) -> Reuse {
        match self.hands_out() {
            true => Reuse::No,
            false => Reuse::Settled,
        }
    }

    /// A sync's fetch, which carries what it read when it stops early.
    fn carries(self) -> bool {
        self == Goal::Sync
    }

    /// The pages of a settled window a count may ask in turn (see [`Goal::Plan`]).
    fn walk_pages(self) -> usize {
        match self {
            Goal::Plan { walk_pages } => walk_pages,
            _ => 0,
        }
    }
}

/// How far ahead of what is known a planner asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pace {
    /// A daily quota is set: requests are what a fetch costs, and none is spent on
    /// speculation (a window is walked a page at a time).
    Frugal,
    /// No daily quota: pages are asked ahead where that saves round trips.
    Ahead,
}

/// Whether the service was seen to sort the events of a query by startTime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sorting {
    /// Every page seen so far was in an order of startTime.
    Sorted,
    /// A window came back in no order of startTime.
    Unsorted,
}

/// Whether a count found every window's end, or took one within its precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Precision {
    Exact,
    Approximate,
}

/// Whether a fetch writes its completed windows' settled parts to the client's cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CacheWrites {
    /// It writes them (and keeps its pages' bodies until their window completes).
    Keep,
    /// It writes nothing: no cache, a count, or a cache that could not be written.
    Skip,
}

/// Whether a planner is still running or has ended (completed, or stopped by the quota).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Running,
    Ended,
}

/// How sure a window's size is to be under the ceiling before its ceiling page is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Margin {
    /// Nothing says: sorted or not, its ceiling page may be needed.
    Unknown,
    /// Sized from a sample (or the densest window seen) well under the ceiling: walked
    /// without its ceiling page, sorted or not.
    Ample,
}

/// The planner of a query's windows: what to ask next, and what each page that comes back
/// decides. It does no I/O: its driver ([`run`]) sends what it asks, hands it the pages,
/// serves the cache's files it names, writes what it says to keep, and acts on its notes.
struct Planner {
    query: Query,
    windows: BTreeMap<i64, Window>,
    queue: VecDeque<(u64, Ask)>,
    next_id: u64,
    frontier: i64,
    progress: Progress,
    /// Events per millisecond seen in the last full window, to size the pages ahead.
    density: Option<f64>,
    /// The most events a millisecond seen in a window of the query's report, by this client's
    /// earlier fetches and this one: a window it puts well under the ceiling is walked without
    /// its ceiling page.
    densest: Option<f64>,
    /// What the planner is for: a fetch, a sync's fetch, a plan's count, a quota check's.
    goal: Goal,
    /// How far ahead of what is known it may ask (see [`Pace`]).
    pace: Pace,
    /// Whether a window of this query came back in no order of startTime.
    sorting: Sorting,
    /// A count: the events of the completed windows, and the requests the fetch makes for them.
    counted: f64,
    predicted: f64,
    /// A count: whether it took a window's end within its precision instead of finding it.
    precision: Precision,
    /// Pages asked (answered or not).
    sent: u64,
    /// Whether completed windows' settled parts are kept for the client's cache.
    cache_writes: CacheWrites,
    /// Whether the planner has ended (completed, or stopped by the quota).
    stage: Stage,
    /// Events that started before this (epoch ms) are settled.
    cutoff: i64,
    /// The windows a split replaced: their start and the requests sent for them, charged to
    /// the completed window that holds that start (for [`Segment::requests`]).
    replaced: Vec<(i64, u64)>,
    /// When the planner started, for the rate its requests are answered at.
    started: std::time::Instant,
    /// When [`Planner::expect`] last ran (it reads every open window's events).
    expected_at: Option<std::time::Instant>,
    /// What the driver is to do beside sending requests, oldest first (see [`Note`]).
    notes: Vec<Note>,
}

/// What a planner starts from: what the client's settings and earlier fetches tell.
#[derive(Debug, Clone, Copy)]
struct Outlook {
    /// How far ahead of what is known it may ask.
    pace: Pace,
    /// Whether earlier fetches found the service not sorting.
    sorting: Sorting,
    /// The most events a millisecond earlier fetches saw in a window of the query's report.
    densest: Option<f64>,
    /// Events that started before this (epoch ms) are settled.
    cutoff: i64,
    /// Whether completed windows' settled parts are kept for the client's cache.
    cache_writes: CacheWrites,
    /// When the planner starts.
    now: std::time::Instant,
}

/// What a planner tells its driver to do beside sending requests.
#[derive(Debug, Clone, PartialEq)]
enum Note {
    /// A window of `[qs, qe)` was opened: the driver says how far the pages held for its query
    /// reach (see [`Planner::held_to`]).
    Opened { id: u64, qs: i64, qe: i64 },
    /// Warn the user.
    Warn(String),
    /// The pages carried from an earlier run do not hold together with this run's: dropped.
    DropCarried,
    /// Requests saved by serving windows from the cache.
    Saved(u64),
    /// What a completed window tells of the service, for the client's later fetches.
    Learned(Learned),
}

/// What a completed window tells of the service (see [`EventsShape`]).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Learned {
    /// The service does not sort its events by startTime.
    unsorted: bool,
    /// A full first page was not sorted ascending: later peeks tell nothing.
    unpeekable: bool,
    /// The events a millisecond in the window, when a fetch under a quota saw it.
    density: Option<f64>,
}

/// A window handed out: its events, and the settled part to keep in the client's cache.
#[derive(Debug)]
struct Ready {
    window: Completed,
    settled: Option<Settled>,
}

/// The settled part `[lo, cut)` of a completed window, to keep in the client's cache with the
/// `requests` it took; `bodies`: its pages' bodies (their events, where the window's events
/// do not hold their text).
#[derive(Debug)]
struct Settled {
    lo: i64,
    cut: i64,
    requests: u64,
    bodies: Vec<bytes::Bytes>,
}

fn dense(ms: i64) -> Error {
    Error::DenseWindow {
        timestamp: format_ms(ms),
    }
}

/// Checks a query before anything is sent.
pub fn check(query: &Query) -> Result<()> {
    for (name, ms) in [("start", query.start_ms), ("end", query.end_ms)] {
        if !(MIN_MS..=MAX_MS + 1).contains(&ms) {
            return Err(Error::argument(Wording::new().arg(name).text(format!(
                " must be from 0001-01-01 to 9999-12-31 (the dates the service's timestamps \
                 can hold), got {ms} ms since 1970"
            ))));
        }
    }
    if query.end_ms <= query.start_ms {
        return Err(Error::argument(
            Wording::new()
                .arg("end")
                .text(format!(" ({}) must be after ", format_ms(query.end_ms)))
                .arg("start")
                .text(format!(" ({})", format_ms(query.start_ms))),
        ));
    }
    if let Some(r) = &query.report_id {
        super::check_uuid(r, "report_id")?;
    }
    Ok(())
}

#[cfg(test)]
mod scripted;
#[cfg(test)]
mod tests;
