//! The bookkeeping of a window's end: a window checked complete (or restarted), the pages held
//! for it released, completed windows drained in time order, and what a stopped sync carries.

use std::collections::HashSet;

use super::page::{hides_first, in_order, order_of, Completed, Event, Page, PageOrder};
use super::window::{fetch_requests, holds_together};
use super::{
    dense, Ask, CacheWrites, Learned, Margin, Mode, Note, Pace, Planner, Ready, Settled, Sorting,
    Window, CEILING_PAGE,
};
use crate::client::cache::Segment;
use crate::client::error::Result;
use crate::client::lists::PAGE;
use crate::time::format_ms;

impl Planner {
    /// Checks whether window `id` is complete, and if so completes it (a full window whose
    /// pages turn out in another order than its ceiling page's is split or chained first).
    pub(super) fn check_done(&mut self, id: u64) -> Result<()> {
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
                (PageOrder::Asc, PageOrder::Asc) | (PageOrder::Desc, PageOrder::Desc) => {}
                (PageOrder::Constant, PageOrder::Asc) | (PageOrder::Constant, PageOrder::Desc) => {
                    // The last in the service's order: the largest ascending, the smallest descending.
                    let cut = times.last().copied().unwrap_or(w.ws);
                    if let Some(w) = self.window_mut(id) {
                        w.over_ceiling(seen);
                    }
                    self.chain(id, seen, cut)?;
                }
                (_, PageOrder::Constant) => return Err(dense(times.first().copied().unwrap_or(0))),
                _ => {
                    // The order the ceiling page suggested does not hold: fetch this range again
                    // in halves (what the chained window already covers stays covered).
                    return self.split(id, times);
                }
            }
        }
        self.completed(id);
        Ok(())
    }

    /// Window `id` is complete: what it tells of the service is kept (for a fetch), what it
    /// costs is counted (for a count), and the rests it sizes are sized.
    fn completed(&mut self, id: u64) {
        let pace = self.pace;
        let Some(w) = self.window_mut(id) else {
            return;
        };
        w.complete();
        let (ws, we, kept) = (w.ws, w.we, w.kept());
        // A full first page in another order than ascending is what a peek would see: later
        // peeks of this client would tell nothing, so they ask nothing.
        let unpeekable = w.pages.get(&0).is_some_and(|p| {
            hides_first(
                order_of(p.events.iter().map(|e| e.start_ms)),
                p.events.len(),
            )
        });
        let sizing = w.take_sizing();
        let asked = fetch_requests(w, pace);
        if !self.goal.hands_out() {
            self.predicted += asked;
        } else {
            let density = (pace == Pace::Frugal).then(|| kept as f64 / (we - ws).max(1) as f64);
            if let Some(d) = density {
                self.densest = Some(self.densest.map_or(d, |was| was.max(d)));
            }
            self.note(Note::Learned(Learned {
                unsorted: pace == Pace::Frugal && self.sorting == Sorting::Unsorted,
                unpeekable,
                density,
            }));
        }
        for s in sizing {
            let sampled = s.samples.iter().filter(|t| (ws..we).contains(*t)).count();
            self.size_rest(s.rest, kept, sampled);
        }
    }

    /// Fetches window `id` again from its first page, asking every page: some of its pages
    /// were carried from an earlier run and do not hold together with this run's.
    pub(super) fn restart(&mut self, id: u64) {
        let Some(ws) = self
            .windows
            .iter()
            .find(|(_, w)| w.id == id)
            .map(|(k, _)| *k)
        else {
            return;
        };
        let Some(old) = self.take(ws) else {
            return;
        };
        self.note(Note::Warn(format!(
            "the pages an earlier run read of the events from {} to {} do not hold together \
             with this run's (the service's order changed): the window is read again",
            format_ms(old.qs),
            format_ms(old.qe),
        )));
        self.note(Note::DropCarried);
        self.planned(-1);
        let id = self.add_opening(old.ws, old.we, Margin::Unknown);
        if let Some(w) = self.window_mut(id) {
            w.again_as(&old);
        }
    }

    /// Makes a deferred window an ordinary one.
    pub(super) fn release(&mut self, id: u64) {
        let Some(w) = self.window_mut(id) else {
            return;
        };
        if !matches!(w.mode, Mode::Deferred) {
            return;
        }
        w.release();
        self.planned(1);
        self.ask(id, Ask::Page(0));
    }

    /// Releases every deferred window (none can be sized any more).
    pub(super) fn release_all(&mut self) -> bool {
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

    /// Hands out the completed windows at the frontier, in time order (a count counts them),
    /// up to one the cache holds: that one waits for its file (see [`Planner::wants_file`]).
    pub(super) fn drain_ready(&mut self) -> Vec<Ready> {
        let mut out = Vec::new();
        while self.windows.get(&self.frontier).is_some_and(|w| w.done) {
            if self.wants_file().is_some() {
                break;
            }
            let Some(w) = self.take(self.frontier) else {
                break;
            };
            if self.goal.hands_out() {
                out.push(self.fetched(w));
            } else {
                self.count_done(&w);
            }
        }
        out
    }

    /// The cache's file the window at the frontier is served from, complete, if it is one and
    /// its events are wanted (a count of a whole file reads its header): the driver reads it
    /// and hands it to [`Planner::file_read`].
    pub(super) fn wants_file(&self) -> Option<Segment> {
        let w = self.windows.get(&self.frontier).filter(|w| w.done)?;
        let segment = w.cached.as_ref()?;
        let whole = self.part(w) == (segment.lo, segment.hi);
        (self.goal.hands_out() || !whole).then(|| segment.clone())
    }

    /// The part of the query window `w` holds.
    fn part(&self, w: &Window) -> (i64, i64) {
        (w.ws.max(self.query.start_ms), w.we.min(self.query.end_ms))
    }

    /// The events of the frontier window's file (`page`; None when it is gone or damaged, and
    /// then its range is fetched again, as any window's): a count counts them; a fetch hands
    /// them out, its requests saved.
    pub(super) fn file_read(&mut self, page: Option<Page>) -> Option<Completed> {
        let segment = self.wants_file()?;
        let w = self.take(self.frontier)?;
        let (lo, hi) = self.part(&w);
        let Some(page) = page else {
            self.add_opening(w.ws, w.we, Margin::Unknown);
            return None;
        };
        let events: Vec<Event> = page
            .events
            .into_iter()
            .filter(|e| e.start_ms >= lo && e.start_ms < hi)
            .collect();
        self.frontier = w.we;
        self.handed(self.frontier, 0);
        if !self.goal.hands_out() {
            // Held by the cache: its events count, its requests are none.
            self.counted += events.len() as f64;
            return None;
        }
        // Served whole, the requests its fetch spent; a part, the pages its events fill (the
        // least a read of that part asks), at most the file's.
        let saved = if (lo, hi) == (segment.lo, segment.hi) {
            segment.requests
        } else {
            (events.len() as u64)
                .div_ceil(PAGE as u64)
                .max(1)
                .min(segment.requests)
        };
        self.saved(saved);
        self.note(Note::Saved(saved));
        self.handed(self.frontier, events.len());
        Some(Completed {
            events,
            batches: page.batch.into_iter().collect(),
            until_ms: hi,
        })
    }

    /// A count: counts the completed window `w` at the frontier (one the cache holds whole by
    /// its file's header).
    fn count_done(&mut self, w: &Window) {
        let (lo, hi) = self.part(w);
        if let Some(segment) = &w.cached {
            self.counted += segment.events as f64;
        } else {
            let seen: HashSet<&str> = w
                .pages
                .values()
                .flat_map(|p| p.events.iter())
                .filter(|e| e.start_ms >= lo && e.start_ms < hi)
                .map(|e| e.id.as_str())
                .collect();
            self.counted += (seen.len() + PAGE * w.assumed.len()) as f64;
        }
        self.frontier = w.we;
        self.handed(self.frontier, 0);
    }

    /// The completed window `w` at the frontier, fetched: its events in order, and its settled
    /// part to keep in the cache.
    fn fetched(&mut self, w: Window) -> Ready {
        let (lo, hi) = self.part(&w);
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
        let settled = (self.cache_writes == CacheWrites::Keep && lo < self.cutoff).then(|| {
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
            Settled {
                lo,
                cut,
                requests: spent,
                bodies,
            }
        });
        self.frontier = w.we;
        self.handed(self.frontier, events.len());
        Ready {
            window: Completed {
                events,
                batches,
                until_ms: hi,
            },
            settled,
        }
    }

    /// What the incomplete frontier window's pages show to be complete, for a fetch that
    /// stops there (the daily quota ran out): on a service that sorts events ascending, its
    /// pages asked from offset 0 on, all full, hold every event of the window before the
    /// last one's startTime. So a sync keeps them, and its next run starts there rather than
    /// at the window's start. None when the pages do not show it (another order, no full page).
    pub(super) fn sorted_prefix(&mut self) -> Option<Completed> {
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
        if order_of(times) != PageOrder::Asc {
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
        self.handed(until, events.len());
        Some(Completed {
            events,
            batches,
            until_ms: until,
        })
    }

    /// A count: the requests the fetch spent on window `id` before it was split (the pages
    /// asked so far, as this count asked them). A fetch: the requests sent for it, answered or
    /// in flight, for the window that takes its start.
    pub(super) fn count_split(&mut self, id: u64) {
        if !self.goal.hands_out() {
            let asked = self.window_mut(id).map_or(0, |w| w.launched.len());
            self.predicted += asked as f64;
        } else if let Some(w) = self.window_mut(id) {
            let sent = (w.ws, w.spent + w.in_flight as u64);
            self.replaced.push(sent);
        }
    }
}
