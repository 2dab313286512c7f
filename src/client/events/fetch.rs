//! The fetch loop: windows added and opened, their pages asked (at most the configured number in
//! flight) and each answer taken, with what the fetch expects and reports on the way.

use std::collections::{BTreeMap, VecDeque};

use super::page::{order_of, projected, Page, PageOrder, Reuse};
use super::window::paged_reach;
use super::{
    Ask, Burst, CacheWrites, Goal, Margin, Mode, Outlook, Pace, PageAsk, Planner, Precision,
    Progress, Query, Sorting, Stage, CEILING_PAGE, SAFETY,
};
use crate::client::cache::Piece;
use crate::client::error::{Error, Result};
use crate::client::lists::PAGE;
use crate::time::format_ms;

impl Planner {
    /// A planner of `query`'s windows for `goal`, from what `outlook` tells: the `pieces` the
    /// cache holds, complete, and the first window of each gap queued.
    pub(super) fn new(query: &Query, goal: Goal, outlook: Outlook, pieces: Vec<Piece>) -> Planner {
        let cache_writes = match goal.writes_cache() {
            true => outlook.cache_writes,
            false => CacheWrites::Skip,
        };
        let mut p = Planner {
            progress: Progress {
                total_ms: query.end_ms - query.start_ms,
                ..Progress::default()
            },
            frontier: query.start_ms,
            query: query.clone(),
            windows: BTreeMap::new(),
            queue: VecDeque::new(),
            next_id: 0,
            density: None,
            densest: outlook.densest,
            goal,
            pace: outlook.pace,
            sorting: outlook.sorting,
            counted: 0.0,
            predicted: 0.0,
            precision: Precision::Exact,
            sent: 0,
            started: outlook.now,
            expected_at: None,
            cache_writes,
            stage: Stage::Running,
            cutoff: outlook.cutoff,
            replaced: Vec::new(),
            notes: Vec::new(),
        };
        for piece in pieces {
            match piece {
                Piece::Held(segment, lo, hi) => p.add_cached(segment, lo, hi),
                Piece::Gap(lo, hi) => p.add_gap(lo, hi),
            }
        }
        p
    }

    /// Makes the fetch a sync's, which carries what it read to its next run when it stops
    /// early (see [`Planner::carried`]); false when it is no fetch (a count carries nothing).
    pub(super) fn carrying(&mut self) -> bool {
        if self.goal == Goal::Fetch {
            self.goal = Goal::Sync;
        }
        self.goal.carries()
    }

    /// Whether a page it asks is held for a later fetch, or a held one taken (see [`Goal`]).
    pub(super) fn reuse(&self) -> Reuse {
        self.goal.reuse()
    }

    /// The answer `page` to `kind` of window `id` that came back after the planner stopped: kept
    /// with the window's pages, to carry, and decides nothing.
    pub(super) fn late(&mut self, id: u64, kind: Ask, page: Page) {
        self.answered(&page);
        if let Some(w) = self.window_mut(id) {
            w.late(kind.offset(), page);
        }
    }

    /// The planner has ended (every window done, or stopped): it asks nothing more.
    pub(super) fn end(&mut self) {
        self.stage = Stage::Ended;
    }

    /// Whether it is still running (not ended).
    pub(super) fn running(&self) -> bool {
        self.stage == Stage::Running
    }

    /// How far the pages held for window `id`'s query reach (a plan's, for the fetch that
    /// follows it): its pages are asked ahead no further than that before it is in.
    pub(super) fn held_to(&mut self, id: u64, furthest: Option<usize>) {
        if let Some(w) = self.window_mut(id) {
            w.held_to(furthest);
        }
    }

    /// The first window of the query: page 0 alone first. Many queries (an hourly sync, a
    /// day of one site) fit in one page, and a request is the scarcest thing there is; a
    /// large range pays one round trip of latency for it, not a request.
    pub(super) fn add_first_window(&mut self, ws: i64, we: i64) {
        self.add_opening(ws, we, Margin::Unknown);
    }

    /// The window of a gap the cache does not hold. (A stopped sync's pages carried to its
    /// next run wait in the client's held pages for the windows they were read of: planned
    /// again from the same pages, this fetch's windows take them instead of asking them.)
    pub(super) fn add_gap(&mut self, lo: i64, hi: i64) {
        self.add_first_window(lo, hi);
    }

    /// A window that asks page 0 alone first. `margin`: sized from a sample well under the
    /// ceiling (`Ample`), so walked without its ceiling page even when the service does not
    /// sort.
    pub(super) fn add_opening(&mut self, ws: i64, we: i64, margin: Margin) -> u64 {
        self.planned(1);
        let mut w = self.new_window(ws, we);
        let id = w.id;
        let dense_enough = || {
            let densest = self.densest;
            densest.is_some_and(|d| d * (we - ws + 2) as f64 * SAFETY < CEILING_PAGE as f64)
        };
        w.open(if margin == Margin::Ample || dense_enough() {
            Margin::Ample
        } else {
            Margin::Unknown
        });
        self.put(w);
        self.ask(id, Ask::Page(0));
        id
    }

    pub(super) fn add_window(&mut self, ws: i64, we: i64) -> u64 {
        if self.pace == Pace::Frugal {
            return self.add_opening(ws, we, Margin::Unknown);
        }
        self.planned(1);
        let mut w = self.new_window(ws, we);
        let id = w.id;
        w.open_with_probe();
        self.put(w);
        // The ceiling page decides everything; page 0 is needed whatever it says (unless empty).
        self.ask_first(id, Ask::Page(0));
        self.ask_first(id, Ask::Probe);
        id
    }

    /// The window a chained cut starts (the rest of a sorted range past a full window). A
    /// count asks no first page of it: as dense as the window before, it is searched for from
    /// the start, its ceiling page first when that density puts its end past it (full, every
    /// page before it is full, and the fetch walks them all).
    pub(super) fn add_chained(&mut self, ws: i64, we: i64) -> u64 {
        if !self.goal.searches() {
            return self.add_window(ws, we);
        }
        self.planned(1);
        let mut w = self.new_window(ws, we);
        let id = w.id;
        w.walk();
        self.put(w);
        self.search(id);
        id
    }

    /// Asks the ceiling page of window `id`, whose size is unknown.
    pub(super) fn probe(&mut self, id: u64) {
        if let Some(w) = self.window_mut(id) {
            if w.probe() {
                self.ask_first(id, Ask::Probe);
            }
        }
    }

    /// Under a quota, after a full page of window `id`. Sorted, the window is walked to its end
    /// or its ceiling page, which gives the next window's start: no request is lost. Unsorted
    /// (`sorting`), a window over the ceiling cannot be kept, so its ceiling page is asked
    /// next, unless a sample sized it or it was asked already.
    pub(super) fn advance(&mut self, id: u64, sorting: Sorting) {
        let ask = self.window_mut(id).is_some_and(|w| {
            sorting == Sorting::Unsorted
                && w.margin == Margin::Unknown
                && !w.launched.contains(&CEILING_PAGE)
        });
        if ask {
            self.probe(id);
        } else {
            self.walk(id);
        }
    }

    /// Asks the first page of window `id` not yet in, one at a time (a walking window).
    pub(super) fn walk(&mut self, id: u64) {
        if self.goal.searches() {
            return self.search(id);
        }
        let Some(w) = self.window_mut(id) else {
            return;
        };
        w.walk();
        let next = (0..CEILING_PAGE + PAGE)
            .step_by(PAGE)
            .find(|o| !w.pages.contains_key(o));
        match next {
            Some(o) if w.launch(o) => self.ask(id, Ask::Page(o)),
            Some(_) => {}
            // Every page up to the ceiling is in, all full: over the ceiling.
            None => w.over_ceiling(PageOrder::Constant),
        }
    }

    /// Without a quota, after a full first page of window `id`. A sorted page whose density
    /// puts the window well under the ceiling: paged ahead at once, no further than its
    /// density puts the end, its ceiling page asked only if it turns out larger (a count
    /// searches for its end). An unsorted page: its second page first (a window of a page or
    /// two, the most common, then costs its pages), then the ceiling page. Otherwise the
    /// ceiling page first, which decides how it is fetched. A count asks what the fetch asks.
    pub(super) fn open_ahead(&mut self, id: u64) {
        let searching = self.goal.searches();
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
            (true, _) | (false, PageOrder::Unsorted) if searching => self.walk(id),
            (true, _) | (false, PageOrder::Unsorted) => {
                w.page_ahead(None);
                let reach = if small { paged_reach(w, order) } else { PAGE };
                self.enqueue_pages(id, (PAGE..=reach).step_by(PAGE));
            }
            _ => self.probe(id),
        }
    }

    /// The planner's next request, counted in flight until its answer is taken
    /// ([`Planner::on_result`]); None when nothing is queued. With nothing queued and nothing
    /// in flight, the deferred windows (which nothing can size any more) are opened first.
    pub(super) fn next_ask(&mut self) -> Option<PageAsk> {
        loop {
            let Some((id, kind)) = self.next_request() else {
                let idle = self.windows.values().all(|w| w.in_flight == 0);
                if idle && self.release_all() {
                    continue;
                }
                return None;
            };
            let Some(w) = self.window_mut(id) else {
                continue;
            };
            let (qs, qe) = w.sent();
            self.sent += 1;
            return Some(PageAsk { id, kind, qs, qe });
        }
    }

    pub(super) fn enqueue_pages(&mut self, id: u64, offsets: impl IntoIterator<Item = usize>) {
        let mut fresh = Vec::new();
        let inferring = self.goal.infers_full_pages();
        if let Some(w) = self.window_mut(id) {
            if inferring {
                // Pages known to be full: a count need not ask them.
                w.assume(offsets);
                return;
            }
            let limit = match w.mode {
                Mode::Paging { end: Some(e) } => e.min(CEILING_PAGE),
                _ => CEILING_PAGE,
            };
            for o in offsets {
                if o < limit && w.launch(o) && !w.pages.contains_key(&o) {
                    fresh.push(o);
                }
            }
        }
        for o in fresh {
            self.ask(id, Ask::Page(o));
        }
    }

    pub(super) fn on_result(&mut self, id: u64, kind: Ask, mut page: Page) -> Result<()> {
        self.answered(&page);
        if self.cache_writes == CacheWrites::Skip && !self.goal.carries() {
            page.body = None;
        }
        let Some(len) = self.take_page(id, kind, page) else {
            return Ok(());
        };
        self.decide(id, kind, len)?;
        self.check_done(id)
    }

    /// Puts the answer `page` to `kind` in window `id`; its events' count, None when the window
    /// is gone.
    fn take_page(&mut self, id: u64, kind: Ask, page: Page) -> Option<usize> {
        let goal = self.goal;
        let w = self.window_mut(id)?;
        let len = page.events.len();
        w.answer(kind.offset(), page, goal);
        Some(len)
    }

    /// What window `id` does after the answer of `len` events to `kind`.
    fn decide(&mut self, id: u64, kind: Ask, len: usize) -> Result<()> {
        let frugal = self.pace == Pace::Frugal;
        let searching = self.goal.searches();
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        match (&w.mode, kind) {
            (Mode::Opening, Ask::Page(0)) if len < PAGE => w.ends_before(PAGE),
            (Mode::Opening, Ask::Page(0)) if frugal => {
                // What an earlier window found holds for this one's first page too.
                if order_of(w.times().into_iter()) == PageOrder::Unsorted {
                    self.sorting = Sorting::Unsorted;
                }
                self.advance(id, self.sorting);
            }
            (Mode::Opening, Ask::Page(0)) => self.open_ahead(id),
            (Mode::Walking, Ask::Page(_)) if searching && len < PAGE => self.search(id),
            (Mode::Walking, Ask::Page(o)) if len < PAGE => w.ends_before(o + PAGE),
            (Mode::Walking, Ask::Page(o)) => self.walked_full(id, o)?,
            (Mode::Probing, Ask::Page(0)) if !frugal && w.pages.contains_key(&CEILING_PAGE) => {
                // The ceiling page came first, all of one millisecond: this page tells the
                // order it ends (see `on_probe`).
                self.on_probe(id, PAGE)?;
            }
            (Mode::Probing, Ask::Probe) if frugal && len == 0 => self.walk(id),
            (Mode::Probing, Ask::Probe) => self.on_probe(id, len)?,
            (Mode::Paging { end: None }, Ask::Page(0)) if len == PAGE => {
                // The ceiling page came back empty before this one.
                self.on_probe(id, 0)?;
            }
            (Mode::Paging { .. }, Ask::Page(o)) => self.paged(id, o, len),
            _ => {}
        }
        Ok(())
    }

    /// A full page at offset `o` of window `id`, walked: the walk goes on, or its ceiling page
    /// is asked (a burst met, an unsorted window), or the window ends before a burst.
    fn walked_full(&mut self, id: u64, o: usize) -> Result<()> {
        let searching = self.goal.searches();
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        let unsorted = order_of(w.times().into_iter()) == PageOrder::Unsorted;
        if unsorted {
            self.sorting = Sorting::Unsorted;
        }
        let burst = if searching || unsorted {
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
            let sorting = if unsorted {
                Sorting::Unsorted
            } else {
                Sorting::Sorted
            };
            self.advance(id, sorting);
        }
        Ok(())
    }

    /// A page at offset `o` of window `id`, paged ahead, came back with `len` events: the
    /// window's end is known, or more pages are asked ahead, or its ceiling page decides.
    fn paged(&mut self, id: u64, o: usize, len: usize) {
        let Some(w) = self.window_mut(id) else {
            return;
        };
        let kind = Ask::Page(o);
        match (&w.mode, kind) {
            (Mode::Paging { .. }, Ask::Page(o)) if len < PAGE => {
                // The end is known: every page before it is needed, launched or not yet.
                let mut end = o + PAGE;
                if let Some(w) = self.window_mut(id) {
                    if let Mode::Paging { end: Some(e) } = w.mode {
                        end = end.min(e);
                    }
                    w.page_ahead(Some(end));
                }
                self.enqueue_pages(id, (0..end).step_by(PAGE));
            }
            (Mode::Paging { end: None }, Ask::Page(o)) if o + PAGE >= CEILING_PAGE => {
                // The ceiling page was empty: nothing lies past it.
                if let Some(w) = self.window_mut(id) {
                    w.page_ahead(Some(CEILING_PAGE));
                }
                self.enqueue_pages(id, (0..CEILING_PAGE).step_by(PAGE));
            }
            (Mode::Paging { end: None }, Ask::Page(_)) => {
                let order = order_of(w.times().into_iter());
                let mut reach = paged_reach(w, order);
                if !w.launched.contains(&CEILING_PAGE)
                    && (order == PageOrder::Unsorted || reach >= CEILING_PAGE / 2)
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
    }

    pub(super) fn stalled(&self) -> Error {
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
