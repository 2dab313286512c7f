//! Where a window ends: its ceiling page read, bursts of one millisecond met, windows
//! chained at a cut or split at a median, an unsorted window's parts sized from its sample, and a
//! count's search for a window's last page.

use std::sync::Arc;

use super::page::{order_of, Event, Page, PageOrder};
use super::seek::{Seek, Sought};
use super::window::paged_reach;
use super::{
    dense, Ask, Burst, Margin, Pace, Planner, Precision, Sizing, Sorting, CEILING_PAGE, FIRST_PART,
    LOOKAHEAD, PART_EVENTS,
};
use crate::client::error::Result;
use crate::client::lists::{OFFSET_CEILING, PAGE};

impl Planner {
    /// A count's walk: the next page that narrows where window `id` ends (its first short
    /// page), from below where it can (a full page is one the fetch asks too), guided by its
    /// estimate or by how dense its pages are, without asking every page (see [`Seek`]).
    pub(super) fn search(&mut self, id: u64) {
        let others = self.counted
            + self
                .windows
                .values()
                .filter(|w| w.id != id)
                .map(|w| w.kept() as f64)
                .sum::<f64>();
        let seek = Seek {
            others,
            density: self.density,
            walk_pages: self.goal.walk_pages(),
            cutoff: self.cutoff,
        };
        let Some(w) = self.window_mut(id) else {
            return;
        };
        match w.seek(&seek) {
            Sought::Ended => {}
            Sought::Approximate => self.precision = Precision::Approximate,
            Sought::Ask(target) => {
                if w.launch(target) {
                    self.ask(id, Ask::Page(target));
                }
            }
        }
    }

    /// Window `id`'s ceiling page came back with `len` events (`PAGE` for one all of a
    /// millisecond whose first page came after it): how the window is fetched.
    pub(super) fn on_probe(&mut self, id: u64, len: usize) -> Result<()> {
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        if len == 0 {
            self.under_ceiling(id);
            return Ok(());
        }
        if len < PAGE {
            w.ends_before(CEILING_PAGE + PAGE);
            self.enqueue_pages(id, (1..CEILING_PAGE / PAGE).map(|p| p * PAGE));
            return Ok(());
        }
        let times: Vec<i64> = w
            .pages
            .get(&CEILING_PAGE)
            .map(|p| p.events.iter().map(|e| e.start_ms).collect())
            .unwrap_or_default();
        let order = order_of(times.iter().copied());
        if order == PageOrder::Constant {
            match self.burst_at_ceiling(id, &times) {
                Some(Burst::Wait) => return Ok(()),
                Some(Burst::Walk) => {
                    self.walk(id);
                    return Ok(());
                }
                Some(Burst::Chain(order, end)) => return self.chain_before(id, order, end),
                Some(Burst::Cut(cut, order)) => {
                    self.cut_out_burst(id, cut, order);
                    return Ok(());
                }
                None => {}
            }
        }
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        match order {
            PageOrder::Unsorted => self.split(id, times),
            PageOrder::Asc | PageOrder::Desc => {
                let cut = times.last().copied().unwrap_or(w.ws);
                w.over_ceiling(order);
                self.chain(id, order, cut)?;
                self.enqueue_pages(id, (1..CEILING_PAGE / PAGE).map(|p| p * PAGE));
                Ok(())
            }
            PageOrder::Constant => {
                // Direction unknown from this page alone: the other pages will tell.
                w.over_ceiling(order);
                self.enqueue_pages(id, (1..CEILING_PAGE / PAGE).map(|p| p * PAGE));
                Ok(())
            }
        }
    }

    /// Window `id`'s ceiling page came back empty: it is under the ceiling, its size unknown.
    fn under_ceiling(&mut self, id: u64) {
        let density = self.density;
        let searching = self.goal.searches();
        let Some(w) = self.window_mut(id) else {
            return;
        };
        if !w.pages.contains_key(&0) {
            // Page 0 says whether there is anything to page ahead for (a short one ends the
            // window).
            w.page_ahead(None);
            return;
        }
        // Page ahead, as far as the density suggests.
        let estimate = density.map_or(0.0, |d| d * (w.qe - w.qs + 2) as f64 * 1.1);
        let pages =
            ((estimate / PAGE as f64).ceil() as usize).clamp(LOOKAHEAD, CEILING_PAGE / PAGE);
        if searching {
            // The fetch pages ahead; a count searches for the end.
            w.fetch_asks_ahead(pages);
            self.search(id);
            return;
        }
        // A short page already in (page 0, usually) ends the window.
        let end = w
            .pages
            .iter()
            .find(|(o, p)| **o < CEILING_PAGE && p.events.len() < PAGE)
            .map(|(o, _)| o + PAGE);
        w.page_ahead(end);
        // Without a density seen, as far as the window's own pages tell.
        let reach = match density {
            Some(_) => pages * PAGE,
            None => paged_reach(w, order_of(w.times().into_iter())),
        };
        self.enqueue_pages(id, (PAGE..=reach).step_by(PAGE));
        if let Some(end) = end {
            self.enqueue_pages(id, (0..end).step_by(PAGE));
        }
    }

    /// Window `id`, whose ceiling page is all of the burst at `cut`'s side, is replaced by the
    /// part clear of the burst and the rest (see [`Burst::Cut`]).
    fn cut_out_burst(&mut self, id: u64, cut: i64, order: PageOrder) {
        self.count_split(id);
        if let Some(w) = self.window_mut(id) {
            let (ws, we) = (w.ws, w.we);
            self.take(ws);
            // The part clear of the burst, under the ceiling, is paged by the
            // density of its own first page (that of the windows seen may be the
            // burst's).
            if order == PageOrder::Asc {
                self.add_opening(ws, cut, Margin::Unknown);
                self.add_window(cut, we);
            } else {
                self.add_window(ws, cut);
                self.add_opening(cut, we, Margin::Unknown);
            }
        }
    }

    /// Under a quota, whether the walk of window `id` has just reached, at `offset`, a page
    /// all of one millisecond (a burst), its pages sorted and its ceiling page not asked: that
    /// page is asked next. The walk would reach the ceiling inside a burst that runs past it
    /// paging the burst for nothing (the next window starts at that millisecond and pages it
    /// again): the ceiling page tells, and the window then ends before the burst (see
    /// `burst_at_ceiling`).
    pub(super) fn meets_burst(&mut self, id: u64, offset: usize) -> bool {
        if self.sorting == Sorting::Unsorted {
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
            events.len() == PAGE
                && order_of(events.iter().map(|e| e.start_ms)) == PageOrder::Constant
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
            && matches!(
                order_of(w.times().into_iter()),
                PageOrder::Asc | PageOrder::Desc
            )
    }

    /// A full ceiling page of window `id` all of one millisecond (`times`), a burst that runs
    /// past the ceiling, on a service that sorts: paged whole, the window would page the burst
    /// up to the ceiling, and the next window, which starts at that millisecond, all of it
    /// again. So a walk that reached the burst ends before it; without a quota, the window is
    /// cut out of the burst's reach, before it (ascending) or after it (descending), its
    /// first page telling which; none without it yet (`Wait`). None where the window's pages
    /// tell no order, or it starts (ends) at the burst.
    pub(super) fn burst_at_ceiling(&mut self, id: u64, times: &[i64]) -> Option<Burst> {
        if self.sorting == Sorting::Unsorted {
            return None;
        }
        let frugal = self.pace == Pace::Frugal;
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
                PageOrder::Asc => t > w.ws,
                PageOrder::Desc => t + 1 < w.we,
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
            PageOrder::Asc if t - BURST_MARGIN > w.ws => Some(Burst::Cut(t - BURST_MARGIN, order)),
            PageOrder::Desc if t + BURST_MARGIN < w.we => Some(Burst::Cut(t + BURST_MARGIN, order)),
            _ => None,
        }
    }

    /// Under a quota, a walk that reaches a page of the burst its ceiling page is all of (see
    /// `burst_at_ceiling`): what that tells.
    pub(super) fn burst_reached(&mut self, id: u64) -> Option<Burst> {
        let w = self.window_mut(id)?;
        let times: Vec<i64> = w
            .pages
            .get(&CEILING_PAGE)
            .filter(|p| p.events.len() == PAGE)
            .map(|p| p.events.iter().map(|e| e.start_ms).collect())?;
        if order_of(times.iter().copied()) != PageOrder::Constant {
            return None;
        }
        match self.burst_at_ceiling(id, &times)? {
            Burst::Chain(order, end) => Some(Burst::Chain(order, end)),
            _ => None,
        }
    }

    /// Window `id`, walked in `order` up to a page (before offset `end`) of the burst that
    /// its ceiling page is all of, ends before that burst: the next window starts at it.
    pub(super) fn chain_before(&mut self, id: u64, order: PageOrder, end: usize) -> Result<()> {
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        w.ends_before(end);
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
    pub(super) fn chain(&mut self, id: u64, order: PageOrder, cut: i64) -> Result<()> {
        let density = self.density;
        let Some(w) = self.window_mut(id) else {
            return Ok(());
        };
        let (ws, we) = (w.ws, w.we);
        // A burst among its pages (one all of a millisecond) tells nothing of the density
        // elsewhere: the density seen stays as it was.
        let burst = w.pages.values().any(|p| {
            p.events.len() == PAGE
                && order_of(p.events.iter().map(|e| e.start_ms)) == PageOrder::Constant
        });
        match order {
            PageOrder::Asc => {
                // Keep [ws, cut); every event at `cut` is fetched again by the next window.
                if cut <= ws {
                    return Err(dense(ws.max(cut)));
                }
                let span = (cut - w.qs).max(1) as f64;
                w.end_at(cut.min(we));
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
                w.start_at((cut + 1).max(ws));
                self.density = Some(OFFSET_CEILING as f64 / span);
                if burst {
                    self.density = density;
                }
                if cut + 1 > ws {
                    self.refile(ws);
                    self.add_chained(ws, cut + 1);
                }
            }
        }
        Ok(())
    }

    /// Replaces window `id` by two halves split at the median of `times`.
    pub(super) fn split(&mut self, id: u64, mut times: Vec<i64>) -> Result<()> {
        if self.pace == Pace::Frugal {
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
        self.take(ws);
        for pair in cuts.windows(2).filter(|p| p[0] < p[1]) {
            self.add_window(pair[0], pair[1]);
        }
        Ok(())
    }

    /// Splits an unsorted window over the ceiling, under a daily quota, with what its pages
    /// sampled. Its size is unknown (10,000 or more), so its first part, about a third of the
    /// sample, is fetched first; that part's exact size says how many events each sampled
    /// time stands for, which sizes the rest into parts that each fit under the ceiling with a
    /// margin. Those are walked without asking their ceiling pages.
    pub(super) fn split_sampled(&mut self, id: u64) -> Result<()> {
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
        let mut sizing = w.take_sizing();
        self.count_split(id);
        self.take(ws);
        let at = ((times.len() as f64 * FIRST_PART).ceil() as usize).min(times.len());
        let cut = cut_near(&times, at, ws, we);
        let first = self.add_opening(ws, cut, Margin::Unknown);
        let mut rest = self.new_window(cut, we);
        let rest_id = rest.id;
        rest.defer(times.iter().copied().filter(|t| *t >= cut).collect());
        self.put(rest);
        sizing.push(Sizing {
            samples: Arc::new(times),
            rest: rest_id,
        });
        if let Some(w) = self.window_mut(first) {
            w.sizes(sizing);
        }
        Ok(())
    }

    /// Sizes the deferred window `rest` from its sibling's exact size: `kept` events where
    /// `sampled` of the parent's times fell.
    pub(super) fn size_rest(&mut self, rest: u64, kept: usize, sampled: usize) {
        let Some(w) = self.window_mut(rest) else {
            return;
        };
        let samples = w.take_samples();
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
        self.take(ws);
        for pair in cuts.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let in_part = samples.iter().filter(|t| (a..b).contains(*t)).count();
            // Each count is a ratio of two samples; three standard errors of both must still
            // fit under the ceiling.
            let estimate = per_sample * in_part as f64;
            let error = (1.0 / sampled as f64 + 1.0 / in_part.max(1) as f64).sqrt();
            let margin = if in_part > 0 && estimate * (1.0 + 3.0 * error) < CEILING_PAGE as f64 {
                Margin::Ample
            } else {
                Margin::Unknown
            };
            let part = self.add_opening(a, b, margin);
            if let Some(w) = self.window_mut(part) {
                w.estimated(estimate);
            }
        }
    }
}

/// A cut of `[ws, we)` near the `at`-th of the sorted sampled times, in a gap between them: a
/// window's query is widened by 1 ms on both sides, so the milliseconds on either side of a
/// cut are fetched twice, and a cut inside a burst (thousands of events in a millisecond)
/// would fetch the burst twice. The widest gap within a tenth of the sample either side.
pub(super) fn cut_near(times: &[i64], at: usize, ws: i64, we: i64) -> i64 {
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
pub(super) const BURST_MARGIN: i64 = 2;

/// The bursts among the sorted sampled `times`: each millisecond sampled more than once (each
/// sampled time stands for many events), with how many times.
pub(super) fn bursts(times: &[i64]) -> Vec<(i64, usize)> {
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
pub(super) fn burst_near(times: &[i64], c: i64) -> Option<i64> {
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
pub(super) fn burst_window(t: i64, ws: i64, we: i64) -> Option<(i64, i64)> {
    let (a, b) = ((t - BURST_MARGIN).max(ws), (t + BURST_MARGIN).min(we));
    (a > ws || b < we).then_some((a, b))
}

/// A cut of `[ws, we)` beside the burst at `t` rather than in it, on the side nearer to the
/// `at`-th of the sorted sampled `times` (with sampled times on both sides of the cut).
pub(super) fn beside(times: &[i64], t: i64, at: usize, ws: i64, we: i64) -> Option<i64> {
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
