//! The fetch loop: windows added and opened, their pages asked (at most the configured number in
//! flight) and each answer taken, with what the fetch expects and reports on the way.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::task::JoinSet;

use super::page::{
    fetch_page, order_of, page_url, projected, settled_before, Completed, EventForm, Page,
    PageOrder, Reuse,
};
use super::window::paged_reach;
use super::{
    Ask, Burst, CacheWrites, CarrySlot, Fetch, Goal, Margin, Mode, Pace, PageAsk, Precision,
    Progress, ProgressSink, Query, Sorting, Stage, Window, CEILING_PAGE, DEFAULT_IN_FLIGHT,
    EXPECT_EVERY, SAFETY,
};
use crate::client::cache::Piece;
use crate::client::error::{Error, Result};
use crate::client::lists::{OFFSET_CEILING, PAGE};
use crate::client::scope;
use crate::client::Client;
use crate::time::format_ms;

impl Fetch {
    /// A planner of `query`'s windows for `goal`: the `pieces` the cache holds, complete, and
    /// the first window of each gap queued.
    pub(super) fn new(
        client: Client,
        query: &Query,
        keep: EventForm,
        sink: Option<ProgressSink>,
        goal: Goal,
        pieces: Vec<Piece>,
    ) -> Fetch {
        let in_flight_max = client
            .config()
            .limits
            .read_concurrency
            .unwrap_or(DEFAULT_IN_FLIGHT)
            .max(1);
        // Under a daily quota requests are what a fetch costs: none is spent on speculation.
        let pace = match client.config().limits.daily_requests {
            Some(_) => Pace::Frugal,
            None => Pace::Ahead,
        };
        let sorting = if client.shape().unsorted {
            Sorting::Unsorted
        } else {
            Sorting::Sorted
        };
        let cache_writes = if !goal.counts() && client.cache().is_some() {
            CacheWrites::Keep
        } else {
            CacheWrites::Skip
        };
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
            goal,
            pace,
            sorting,
            counted: 0.0,
            predicted: 0.0,
            precision: Precision::Exact,
            sent: 0,
            started: std::time::Instant::now(),
            expected_at: None,
            cache_writes,
            carry_to: None,
            asked: Vec::new(),
            stage: Stage::Running,
            cutoff,
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

    /// Makes the fetch a sync's, which carries what it read to its next run when it stops
    /// early: the pages it read of the windows it did not hand out whole go to `slot`.
    pub(super) fn carry_to(&mut self, slot: CarrySlot) {
        if self.goal == Goal::Fetch {
            self.goal = Goal::Sync;
            self.carry_to = Some(slot);
        }
    }

    /// Stopped (Ctrl-C): asks nothing more (a request waiting for its turn under the limits
    /// is dropped), waits at most `grace` for the answers of the requests sent (each is paid
    /// for already), and carries every page read.
    pub(super) async fn stop_carrying(&mut self, grace: std::time::Duration) {
        for (task, sent) in std::mem::take(&mut self.asked) {
            if sent.load(Ordering::SeqCst) == 0 {
                task.abort();
            }
        }
        let deadline = tokio::time::Instant::now() + grace;
        while !self.tasks.is_empty() {
            match tokio::time::timeout_at(deadline, self.tasks.join_next()).await {
                Ok(Some(Ok((id, kind, Ok(page))))) => {
                    self.progress.requests += u64::from(!page.held);
                    let offset = match kind {
                        Ask::Probe => CEILING_PAGE,
                        Ask::Page(o) => o,
                    };
                    if let Some(w) = self.window_mut(id) {
                        w.in_flight = w.in_flight.saturating_sub(1);
                        w.pages.insert(offset, page);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        self.tasks.abort_all();
        self.stage = Stage::Ended;
        self.carry_stopped();
    }

    /// Counts in the fetch's progress the requests its quota check sent (its first page is
    /// taken from what the check held).
    pub(super) fn count_checked(&mut self, requests: u64) {
        self.progress.requests += requests;
    }

    /// Every window is done: the last progress is said, and a cache written to is trimmed to
    /// its cap.
    pub(super) fn finish(&mut self) {
        self.stage = Stage::Ended;
        self.report();
        if self.wrote {
            if let Some(cache) = self.client.cache() {
                cache.evict();
            }
        }
    }

    /// The day's quota stopped the fetch: what the pages already in show to be complete is
    /// kept, not asked again: carried to the next run when the fetch is a sync's (see
    /// [`Fetch::carry_stopped`]), else the sorted prefix they show, answered here.
    pub(super) fn stop_at_quota(&mut self) -> Option<Completed> {
        self.stage = Stage::Ended;
        if self.carry_stopped() {
            None
        } else {
            self.sorted_prefix()
        }
    }

    /// Sends what is queued and handles the next answer: the windows it completed (in time
    /// order), or None when every window is done.
    pub(super) async fn step(&mut self) -> Result<Option<Vec<Completed>>> {
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

    pub(super) fn window_mut(&mut self, id: u64) -> Option<&mut Window> {
        self.windows.values_mut().find(|w| w.id == id)
    }

    /// A window of `[ws, we)` with a fresh id, not yet planned.
    pub(super) fn new_window(&mut self, ws: i64, we: i64) -> Window {
        self.next_id += 1;
        let mut w = Window::new(self.next_id - 1, ws, we);
        if !self.goal.counts() {
            let report = self.query.report_id.as_deref();
            let base = page_url(&self.client, ws, we, report, 0);
            w.held_to = self.client.held().furthest(base.as_str(), CEILING_PAGE);
        }
        w
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
        self.progress.windows += 1;
        let mut w = self.new_window(ws, we);
        let id = w.id;
        w.mode = Mode::Opening;
        let dense_enough = || {
            let shape = self.client.shape();
            let densest = shape.density.get(&self.query.report_id).copied();
            densest.is_some_and(|d| d * (we - ws + 2) as f64 * SAFETY < CEILING_PAGE as f64)
        };
        w.margin = if margin == Margin::Ample || dense_enough() {
            Margin::Ample
        } else {
            Margin::Unknown
        };
        w.launched.insert(0);
        self.windows.insert(ws, w);
        self.queue.push_back((id, Ask::Page(0)));
        id
    }

    pub(super) fn add_window(&mut self, ws: i64, we: i64) -> u64 {
        if self.pace == Pace::Frugal {
            return self.add_opening(ws, we, Margin::Unknown);
        }
        self.progress.windows += 1;
        let mut w = self.new_window(ws, we);
        let id = w.id;
        w.launched.extend([0, CEILING_PAGE]);
        self.windows.insert(ws, w);
        // The ceiling page decides everything; page 0 is needed whatever it says (unless empty).
        self.queue.push_front((id, Ask::Page(0)));
        self.queue.push_front((id, Ask::Probe));
        id
    }

    /// The window a chained cut starts (the rest of a sorted range past a full window). A
    /// count asks no first page of it: as dense as the window before, it is searched for from
    /// the start, its ceiling page first when that density puts its end past it (full, every
    /// page before it is full, and the fetch walks them all).
    pub(super) fn add_chained(&mut self, ws: i64, we: i64) -> u64 {
        if !self.goal.counts() {
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
    pub(super) fn probe(&mut self, id: u64) {
        if let Some(w) = self.window_mut(id) {
            w.mode = Mode::Probing;
            if w.launched.insert(CEILING_PAGE) {
                self.queue.push_front((id, Ask::Probe));
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
        if self.goal.counts() {
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
            Some(o) if w.launched.insert(o) => self.queue.push_back((id, Ask::Page(o))),
            Some(_) => {}
            // Every page up to the ceiling is in, all full: over the ceiling.
            None => {
                w.mode = Mode::Full {
                    order: PageOrder::Constant,
                }
            }
        }
    }

    /// Without a quota, after a full first page of window `id`. A sorted page whose density
    /// puts the window well under the ceiling: paged ahead at once, no further than its
    /// density puts the end, its ceiling page asked only if it turns out larger (a count
    /// searches for its end). An unsorted page: its second page first (a window of a page or
    /// two, the most common, then costs its pages), then the ceiling page. Otherwise the
    /// ceiling page first, which decides how it is fetched. A count asks what the fetch asks.
    pub(super) fn open_ahead(&mut self, id: u64) {
        let counting = self.goal.counts();
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
            (true, _) | (false, PageOrder::Unsorted) if counting => self.walk(id),
            (true, _) | (false, PageOrder::Unsorted) => {
                w.mode = Mode::Paging { end: None };
                let reach = if small { paged_reach(w, order) } else { PAGE };
                self.enqueue_pages(id, (PAGE..=reach).step_by(PAGE));
            }
            _ => self.probe(id),
        }
    }

    /// Sends the requests queued, up to the configured number in flight, each in a task.
    pub(super) fn launch_pending(&mut self) {
        while self.tasks.len() < self.in_flight_max {
            let Some(asked) = self.next_ask() else {
                break;
            };
            let client = self.client.clone();
            let report = self.query.report_id.clone();
            let keep = self.keep;
            let hold = if self.goal.counts() {
                Reuse::Settled
            } else {
                Reuse::No
            };
            let sent = Arc::new(AtomicU64::new(0));
            let carries = self.goal.carries();
            let told = carries.then(|| sent.clone());
            let PageAsk { id, kind, qs, qe } = asked;
            let task = self.tasks.spawn(scope::inherit(async move {
                let report = report.as_deref();
                let offset = kind.offset();
                let result = fetch_page(&client, qs, qe, report, offset, keep, hold, told).await;
                (id, kind, result)
            }));
            if carries {
                // A sync's: when it stops, what has not been sent is not waited for.
                self.asked.retain(|(task, _)| !task.is_finished());
                self.asked.push((task, sent));
            }
        }
    }

    /// The planner's next request, counted in flight until its answer is taken
    /// ([`Fetch::on_result`]); None when nothing is queued.
    pub(super) fn next_ask(&mut self) -> Option<PageAsk> {
        loop {
            let (id, kind) = self.next_request()?;
            let Some(w) = self.window_mut(id) else {
                continue;
            };
            w.in_flight += 1;
            let (qs, qe) = (w.qs, w.qe);
            self.sent += 1;
            return Some(PageAsk { id, kind, qs, qe });
        }
    }

    /// Probes first (they decide the plan), then pages of the earliest windows.
    pub(super) fn next_request(&mut self) -> Option<(u64, Ask)> {
        let pos = self
            .queue
            .iter()
            .position(|(_, k)| *k == Ask::Probe)
            .unwrap_or(0);
        self.queue.remove(pos)
    }

    pub(super) fn enqueue_pages(&mut self, id: u64, offsets: impl IntoIterator<Item = usize>) {
        let mut fresh = Vec::new();
        let counting = self.goal.counts();
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
            self.queue.push_back((id, Ask::Page(o)));
        }
    }

    pub(super) fn on_result(&mut self, id: u64, kind: Ask, mut page: Page) -> Result<()> {
        self.progress.requests += u64::from(!page.held);
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
        let counting = self.goal.counts();
        let w = self.window_mut(id)?;
        w.in_flight -= 1;
        w.spent += 1;
        let offset = match kind {
            Ask::Probe => CEILING_PAGE,
            Ask::Page(o) => o,
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
        Some(len)
    }

    /// What window `id` does after the answer of `len` events to `kind`.
    fn decide(&mut self, id: u64, kind: Ask, len: usize) -> Result<()> {
        let frugal = self.pace == Pace::Frugal;
        let counting = self.goal.counts();
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        match (&w.mode, kind) {
            (Mode::Opening, Ask::Page(0)) if len < PAGE => w.mode = Mode::Known { end: PAGE },
            (Mode::Opening, Ask::Page(0)) if frugal => {
                // What an earlier window found holds for this one's first page too.
                if order_of(w.times().into_iter()) == PageOrder::Unsorted {
                    self.sorting = Sorting::Unsorted;
                }
                self.advance(id, self.sorting);
            }
            (Mode::Opening, Ask::Page(0)) => self.open_ahead(id),
            (Mode::Walking, Ask::Page(_)) if counting && len < PAGE => self.search(id),
            (Mode::Walking, Ask::Page(o)) if len < PAGE => {
                w.mode = Mode::Known { end: o + PAGE };
            }
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
        let counting = self.goal.counts();
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        let unsorted = order_of(w.times().into_iter()) == PageOrder::Unsorted;
        if unsorted {
            self.sorting = Sorting::Unsorted;
        }
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
                    w.mode = Mode::Paging { end: Some(end) };
                }
                self.enqueue_pages(id, (0..end).step_by(PAGE));
            }
            (Mode::Paging { end: None }, Ask::Page(o)) if o + PAGE >= CEILING_PAGE => {
                // The ceiling page was empty: nothing lies past it.
                if let Some(w) = self.window_mut(id) {
                    w.mode = Mode::Paging {
                        end: Some(CEILING_PAGE),
                    };
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

    /// Updates what the progress expects: the events of the range (the windows emitted,
    /// exactly; each open window as far as its pages tell (see [`Window::guess`]); the
    /// windows that tell nothing yet at the density of the others, or of what earlier fetches
    /// of this client saw), the requests those take, and the time they take at the read rate.
    /// With nothing to go on yet (an unsorted first window still open) it expects nothing.
    pub(super) fn expect(&mut self) {
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
    pub(super) fn report(&mut self) {
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
