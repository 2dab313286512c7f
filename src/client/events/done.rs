//! The bookkeeping of a window's end: a window checked complete (or restarted), the pages held
//! for it released, completed windows drained in time order, and what a stopped sync carries.

use std::collections::HashSet;

use super::carry::{self, CarriedPage};
use super::page::{hides_first, in_order, order_of, widened, Completed, Event, Page, PageOrder};
use super::window::{fetch_requests, holds_together};
use super::{dense, Ask, CacheWrites, Fetch, Margin, Mode, Pace, Sorting, Window, CEILING_PAGE};
use crate::client::cache::Segment;
use crate::client::error::Result;
use crate::client::lists::PAGE;
use crate::time::format_ms;

impl Fetch {
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
                        w.mode = Mode::Full { order: seen };
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
        let asked = fetch_requests(w, pace);
        let counting = self.goal.counts();
        if unpeekable && !counting {
            self.client.shape().unpeekable = true;
        }
        if counting {
            self.predicted += asked;
        } else if pace == Pace::Frugal {
            let mut shape = self.client.shape();
            shape.unsorted |= self.sorting == Sorting::Unsorted;
            let d = shape
                .density
                .entry(self.query.report_id.clone())
                .or_default();
            *d = d.max(kept as f64 / (we - ws).max(1) as f64);
        }
        if !counting {
            self.client.keep_shape();
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
        let id = self.add_opening(old.ws, old.we, Margin::Unknown);
        if let Some(w) = self.window_mut(id) {
            (w.qs, w.qe, w.spent) = (old.qs, old.qe, old.spent);
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
        w.samples = None;
        w.mode = Mode::Opening;
        w.launched.insert(0);
        self.progress.windows += 1;
        self.queue.push_back((id, Ask::Page(0)));
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

    /// Emits the completed windows at the frontier, in time order (a count counts them).
    pub(super) fn drain_ready(&mut self) -> Vec<Completed> {
        if self.goal.counts() {
            self.count_ready();
            return Vec::new();
        }
        let mut out = Vec::new();
        while self.windows.get(&self.frontier).is_some_and(|w| w.done) {
            let Some(w) = self.windows.remove(&self.frontier) else {
                break;
            };
            if let Some(segment) = &w.cached {
                // One file at a time: a range the cache holds whole still streams with
                // bounded memory.
                out.extend(self.served(&w, segment));
                break;
            }
            out.push(self.fetched(w));
        }
        out
    }

    /// A count: counts the completed windows at the frontier, in time order.
    fn count_ready(&mut self) {
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
                    self.add_opening(w.ws, w.we, Margin::Unknown);
                    break;
                };
                self.counted += held as f64;
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
            self.progress.done_ms = self.frontier - self.query.start_ms;
        }
    }

    /// The completed window `w` at the frontier that the cache serves from `segment`; None when
    /// its file is gone or damaged (then it is fetched again, as any window).
    fn served(&mut self, w: &Window, segment: &Segment) -> Option<Completed> {
        let (lo, hi) = (w.ws.max(self.query.start_ms), w.we.min(self.query.end_ms));
        let Some(page) = self.load(segment) else {
            self.add_opening(w.ws, w.we, Margin::Unknown);
            return None;
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
        Some(Completed {
            events,
            batches: page.batch.into_iter().collect(),
            until_ms: hi,
        })
    }

    /// The completed window `w` at the frontier, fetched: its events in order, its settled
    /// part kept in the cache.
    fn fetched(&mut self, w: Window) -> Completed {
        let (lo, hi) = (w.ws.max(self.query.start_ms), w.we.min(self.query.end_ms));
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
        if self.cache_writes == CacheWrites::Keep && lo < self.cutoff {
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
        Completed {
            events,
            batches,
            until_ms: hi,
        }
    }

    /// For a sync that the daily quota, an error or an interruption stops: the pages read of
    /// every window not handed out (the frontier window's, and those of the windows after it,
    /// whole or not), whose query has settled, and the carried pages that no window took yet,
    /// go to the fetch's carry slot; false when none does (then [`Fetch::sorted_prefix`]
    /// keeps what it can). The next run starts at the frontier and plans the same windows
    /// from the same pages, so it asks none of them again; when a window completes,
    /// [`holds_together`] checks that the two runs' pages make one answer.
    pub(super) fn carry_stopped(&mut self) -> bool {
        let Some(slot) = self.carry_to.take() else {
            return false;
        };
        if !self.goal.carries() {
            return false;
        }
        let mut pages = Vec::new();
        for w in self.windows.values_mut() {
            if w.cached.is_some() || widened(w.qs, w.qe).1 >= self.cutoff {
                continue;
            }
            for (offset, page) in std::mem::take(&mut w.pages) {
                if let Some(body) = page.body {
                    pages.push(CarriedPage {
                        qs: w.qs,
                        qe: w.qe,
                        offset,
                        body,
                    });
                }
            }
        }
        let report = self.query.report_id.as_deref();
        pages.extend(carry::left(&self.client, report));
        let carried = !pages.is_empty();
        if let Ok(mut slot) = slot.lock() {
            slot.extend(pages);
        }
        carried
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
        self.progress.events += events.len() as u64;
        self.progress.done_ms = until - start;
        Some(Completed {
            events,
            batches,
            until_ms: until,
        })
    }
}
