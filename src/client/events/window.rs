//! The window a planner keeps: its range, mode and pages, and what a count makes of it.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::page::{covered, order_of, Page, PageOrder};
use super::{Goal, Margin, Mode, Pace, Sizing, Window, CEILING_PAGE, LOOKAHEAD};
use crate::client::cache::Segment;
use crate::client::lists::{OFFSET_CEILING, PAGE};

impl Window {
    pub(super) fn new(id: u64, ws: i64, we: i64) -> Window {
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
            margin: Margin::Unknown,
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
    pub(super) fn guess(&self, beyond: Option<f64>) -> Option<f64> {
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
    pub(super) fn has(&self, offset: usize) -> bool {
        self.pages.contains_key(&offset) || self.assumed.contains(&offset)
    }

    /// A count: the first offset not known full, and the first offset of a page known short.
    pub(super) fn bounds(&self) -> (usize, Option<usize>) {
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
    pub(super) fn times(&self) -> Vec<i64> {
        self.pages
            .values()
            .flat_map(|p| p.events.iter().map(|e| e.start_ms))
            .collect()
    }

    /// Its events in `[ws, we)` among the pages in so far.
    pub(super) fn kept_so_far(&self) -> usize {
        self.pages
            .values()
            .flat_map(|p| p.events.iter())
            .filter(|e| e.start_ms >= self.ws && e.start_ms < self.we)
            .count()
    }

    /// Its events in `[ws, we)`, once every page is in (a count's pages known full
    /// included).
    pub(super) fn kept(&self) -> usize {
        self.kept_so_far() + PAGE * self.assumed.len()
    }

    /// A count: the pages from `lo` up to `to` not asked are taken as full, and the window as
    /// ending before `end`.
    pub(super) fn settle(&mut self, lo: usize, to: usize, end: usize) {
        let pages = &self.pages;
        self.assumed
            .extend((lo..to).step_by(PAGE).filter(|o| !pages.contains_key(o)));
        self.mode = Mode::Known { end };
    }
}

/// Its state's changes, each named for what it means: the only code that writes a window's
/// fields (but where it is made).
impl Window {
    /// Asks page 0 alone first; `margin`: whether it may be walked without its ceiling page.
    pub(super) fn open(&mut self, margin: Margin) {
        self.mode = Mode::Opening;
        self.margin = margin;
        self.launched.insert(0);
    }

    /// Asks its ceiling page and page 0 at once (no quota): the ceiling page decides.
    pub(super) fn open_with_probe(&mut self) {
        self.launched.extend([0, CEILING_PAGE]);
    }

    /// Waits for its ceiling page; whether that page is still to ask.
    pub(super) fn probe(&mut self) -> bool {
        self.mode = Mode::Probing;
        self.launched.insert(CEILING_PAGE)
    }

    /// Walked a page at a time, the next asked when the last came back full.
    pub(super) fn walk(&mut self) {
        self.mode = Mode::Walking;
    }

    /// Its size known: its pages end before `end`.
    pub(super) fn ends_before(&mut self, end: usize) {
        self.mode = Mode::Known { end };
    }

    /// Under the ceiling, paged ahead until a short page (before `end`, when it is known).
    pub(super) fn page_ahead(&mut self, end: Option<usize>) {
        self.mode = Mode::Paging { end };
    }

    /// Over the ceiling: its pages up to the ceiling page fetched and checked for `order`.
    pub(super) fn over_ceiling(&mut self, order: PageOrder) {
        self.mode = Mode::Full { order };
    }

    /// A part of an unsorted window that waits to be sized from the parent's `samples` that
    /// fall in it.
    pub(super) fn defer(&mut self, samples: Vec<i64>) {
        self.mode = Mode::Deferred;
        self.samples = Some(samples);
    }

    /// A deferred window that nothing can size any more: opened as any other.
    pub(super) fn release(&mut self) {
        self.samples = None;
        self.mode = Mode::Opening;
        self.launched.insert(0);
    }

    /// Complete: its events are all in.
    pub(super) fn complete(&mut self) {
        self.done = true;
    }

    /// Held by the cache's `segment`: complete without a request.
    pub(super) fn serve(&mut self, segment: Segment) {
        self.mode = Mode::Known { end: 0 };
        self.done = true;
        self.cached = Some(segment);
    }

    /// Whether the page at `offset` is still to ask (it is then counted asked).
    pub(super) fn launch(&mut self, offset: usize) -> bool {
        self.launched.insert(offset)
    }

    /// A request of it is sent: its query, `[qs, qe)`.
    pub(super) fn sent(&mut self) -> (i64, i64) {
        self.in_flight += 1;
        (self.qs, self.qe)
    }

    /// The answer `page` to its page at `offset`. A goal that infers full pages (a count)
    /// takes every page before a full one as full.
    pub(super) fn answer(&mut self, offset: usize, page: Page, goal: Goal) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.spent += 1;
        let full = page.events.len() == PAGE;
        self.launched.insert(offset);
        self.assumed.remove(&offset);
        self.pages.insert(offset, page);
        if goal.infers_full_pages() && full {
            let before = (0..offset).step_by(PAGE);
            let missing: Vec<usize> = before.filter(|o| !self.pages.contains_key(o)).collect();
            self.assumed.extend(missing);
        }
    }

    /// The answer `page` to its page at `offset` that came back after the planner stopped:
    /// kept, to carry.
    pub(super) fn late(&mut self, offset: usize, page: Page) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.pages.insert(offset, page);
    }

    /// A count: the pages at `offsets` (under the ceiling page, not in) are known full.
    pub(super) fn assume(&mut self, offsets: impl IntoIterator<Item = usize>) {
        for o in offsets {
            if o < CEILING_PAGE && !self.pages.contains_key(&o) {
                self.assumed.insert(o);
            }
        }
    }

    /// Its pages, taken (what a stopped sync carries).
    pub(super) fn take_pages(&mut self) -> BTreeMap<usize, Page> {
        std::mem::take(&mut self.pages)
    }

    /// The rests its exact size sizes, taken.
    pub(super) fn take_sizing(&mut self) -> Vec<Sizing> {
        std::mem::take(&mut self.sizing)
    }

    /// Its exact size, once known, sizes these rests.
    pub(super) fn sizes(&mut self, sizing: Vec<Sizing>) {
        self.sizing = sizing;
    }

    /// A deferred window's samples, taken.
    pub(super) fn take_samples(&mut self) -> Vec<i64> {
        self.samples.take().unwrap_or_default()
    }

    /// A count: the events it was estimated to hold when it was sized.
    pub(super) fn estimated(&mut self, events: f64) {
        self.estimate = Some(events);
    }

    /// A count without a quota: the pages the fetch asks ahead once its ceiling page is empty.
    pub(super) fn fetch_asks_ahead(&mut self, pages: usize) {
        self.ahead = pages;
    }

    /// How far the pages held for its query reach.
    pub(super) fn held_to(&mut self, furthest: Option<usize>) {
        self.held_to = furthest;
    }

    /// A chained cut: the part kept ends at `we` (its query stays).
    pub(super) fn end_at(&mut self, we: i64) {
        self.we = we;
    }

    /// A chained cut: the part kept starts at `ws` (its query stays).
    pub(super) fn start_at(&mut self, ws: i64) {
        self.ws = ws;
    }

    /// Read again from its first page in place of `old`: with `old`'s query and the requests
    /// spent on it.
    pub(super) fn again_as(&mut self, old: &Window) {
        (self.qs, self.qe, self.spent) = (old.qs, old.qe, old.spent);
    }
}

/// The requests a fetch makes for a window that a count completed: its pages up to its first
/// short one (or the ceiling), its ceiling page when that was asked past its end, and without a
/// quota the pages it asks ahead past its end (none on a sorted answer, whose density bounds
/// them, or on a window of two pages; else about half of `LOOKAHEAD` in flight when it pages
/// one ahead at a time, more when the density seen sent it further).
pub(super) fn fetch_requests(w: &Window, pace: Pace) -> f64 {
    let end = match w.mode {
        Mode::Known { end } | Mode::Paging { end: Some(end) } => end,
        Mode::Full { .. } => CEILING_PAGE + PAGE,
        _ => w.pages.keys().max().map_or(PAGE, |o| o + PAGE),
    };
    let pages = (end / PAGE) as f64;
    let ceiling = f64::from(u8::from(
        w.launched.contains(&CEILING_PAGE) && end <= CEILING_PAGE,
    ));
    if pace == Pace::Frugal || end > CEILING_PAGE || end == PAGE {
        return pages + ceiling;
    }
    // A sorted window is paged ahead no further than its density puts its end; an unsorted
    // one asks its second page alone, and pages ahead only once that and its ceiling page
    // tell it is larger.
    let sorted = matches!(
        order_of(w.times().into_iter()),
        PageOrder::Asc | PageOrder::Desc
    );
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
pub(super) fn spare_pages(needed: usize, w: &Window) -> usize {
    let probe = usize::from(w.launched.contains(&CEILING_PAGE));
    (needed / 4).saturating_sub(probe).min(LOOKAHEAD - 1)
}

/// The furthest page a window paged without a known end asks ahead, once a page of it is
/// full: [`LOOKAHEAD`] pages past its furthest full page (fewer on an unsorted answer while
/// it is small, see [`spare_pages`]), but on a sorted answer no further
/// than the page that the rest of its time would make the first short one at the density of
/// its pages, so that few pages are asked past its end (a denser rest is paged a page or two
/// at a time, near its end only). The next page is always asked. `order`: that of its pages.
pub(super) fn paged_reach(w: &Window, order: PageOrder) -> usize {
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

/// Whether a window's pages, some carried from an earlier run, make one answer: no event on
/// two of them. The service's order changing between the runs would show as an event seen
/// twice (and another one missed), since the pages' sizes still add up to the window's.
pub(super) fn holds_together(w: &Window) -> bool {
    let mut seen = HashSet::new();
    w.pages
        .values()
        .flat_map(|p| &p.events)
        .all(|e| seen.insert(e.id.as_str()))
}
