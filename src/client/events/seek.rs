//! A count's search for where a window ends (its first short page), from the window's pages
//! alone and what the count knows of the others: which page to ask next, or that the end is
//! known, exactly or within the plan's precision.

use super::page::{order_of, projected, settled, PageOrder};
use super::{Planner, Precision, Sorting, Window, CEILING_PAGE, PAST_END_SHARE};
use crate::client::lists::OFFSET_CEILING;
use crate::client::lists::PAGE;

/// What a count knows besides the window it searches.
pub(super) struct Seek {
    /// The events of the other windows: counted, or kept so far.
    pub(super) others: f64,
    /// Events per millisecond seen in the last full window (a chained window's guess).
    pub(super) density: Option<f64>,
    /// The pages of a settled window it may ask in turn (see `Goal::Plan`).
    pub(super) walk_pages: usize,
    /// Events that started before this (epoch ms) are settled.
    pub(super) cutoff: i64,
}

/// What a search step made of a window.
pub(super) enum Sought {
    /// Its end is known: it is complete once its pages are.
    Ended,
    /// Its end is taken within the count's precision.
    Approximate,
    /// The page at this offset narrows where it ends.
    Ask(usize),
}

impl Window {
    /// One step of a count's search of this window's end.
    pub(super) fn seek(&mut self, s: &Seek) -> Sought {
        self.walk();
        let (lo, hi) = self.bounds();
        if self.end_found(lo, hi) {
            return Sought::Ended;
        }
        // Precise enough for a plan, which is to be within 10%: a sorted window's end within
        // about 6% of the events counted so far, this window's and the others' (the end is
        // then taken halfway), so that the last window of a long range is settled in a probe
        // or two.
        // An unsorted window keeps to about 3% of its own size: sized from a sample, its size
        // calibrates the sample's other parts.
        let loose = self.sizing.is_empty()
            && self.estimate.is_none()
            && order_of(self.times().into_iter()) != PageOrder::Unsorted;
        let within = if loose {
            0.12 * (lo as f64 + s.others)
        } else {
            0.06 * lo as f64
        };
        let sorted = self.sorted_end();
        // From below: when its sorted pages put the end within half that width of the pages
        // known full, the end is taken there without another request (were the rest twice as
        // dense, the count would still be within that width), and no page past it is asked.
        let near = sorted.filter(|g| loose && hi.is_none_or(|h| *g < h as f64));
        if let Some(g) = near.filter(|g| g - lo as f64 <= within / 2.0) {
            let end = ((g / PAGE as f64).round() as usize * PAGE).max(lo);
            self.settle(lo, end, end);
            return Sought::Approximate;
        }
        if let Some(h) = hi.filter(|_| self.sizing.is_empty()) {
            if (h - lo) as f64 <= within {
                let end = (lo + (h - lo) / 2) / PAGE * PAGE + PAGE;
                self.settle(lo, end, end);
                return Sought::Approximate;
            }
        }
        let top = hi.map_or(CEILING_PAGE, |h| h - PAGE);
        let target = self.next_target(s, lo, hi, sorted);
        Sought::Ask((target / PAGE * PAGE).clamp(lo, top))
    }

    /// Whether the pages in say where the window ends (`lo`: its first page not known full;
    /// `hi`: its first short page known), its mode then set.
    fn end_found(&mut self, lo: usize, hi: Option<usize>) -> bool {
        if lo > CEILING_PAGE {
            // Full up to the ceiling: over it.
            self.over_ceiling(PageOrder::Constant);
            return true;
        }
        if hi == Some(lo) {
            self.ends_before(lo + PAGE);
            return true;
        }
        // A short page that is not empty is the last: every page before it is full.
        let last = hi.filter(|h| self.pages.get(h).is_some_and(|p| !p.events.is_empty()));
        if let Some(h) = last {
            self.settle(lo, h, h + PAGE);
            return true;
        }
        false
    }

    /// Where the window ends, in events, as far as the density of its furthest full page
    /// tells (a sorted one).
    fn sorted_end(&self) -> Option<f64> {
        self.pages
            .iter()
            .rev()
            .find(|(_, p)| p.events.len() == PAGE)
            .and_then(|(o, p)| {
                let last = p.events.last()?.start_ms;
                let order = order_of(p.events.iter().map(|e| e.start_ms));
                projected(order, (o + PAGE) as f64, last, self.qs, self.qe)
            })
    }

    /// Whether a page past the window's end would cost more than 2% of the fetch (its pages
    /// known so far, each a request, against the pages already asked past an end), for a
    /// settled window within the pages a count may walk.
    fn past_end_too_dear(&self, s: &Seek, lo: usize) -> bool {
        let empties = self
            .pages
            .iter()
            .filter(|(o, p)| p.events.is_empty() && **o != CEILING_PAGE)
            .count();
        (empties as f64 + 1.0) * PAST_END_SHARE > (lo as f64 + s.others) / PAGE as f64
            && lo / PAGE < s.walk_pages
            && settled(self.qs, self.qe, s.cutoff)
    }

    /// The next page to ask, before it is put on a page boundary within the bounds: towards
    /// where the window's pages (`sorted`), its estimate or the window before it put its end.
    fn next_target(&self, s: &Seek, lo: usize, hi: Option<usize>, sorted: Option<f64>) -> usize {
        let top = hi.map_or(CEILING_PAGE, |h| h - PAGE);
        // The next page towards a sorted guess: half way there, since the time the pages have
        // not reached may be half as dense as the time they have (the hours of a day differ).
        // A page short of the end costs nothing, one past it a request.
        let toward = |g: f64| ((lo as f64 + (g - lo as f64) * 0.5) as usize).saturating_sub(PAGE);
        // A window a chained cut started, with no page yet: as dense as the one before it.
        let chained = s
            .density
            .filter(|_| self.pages.is_empty())
            .map(|d| d * (self.qe - self.qs + 2) as f64);
        let guess = sorted.or(self.estimate).or(chained);
        let by_density = sorted.is_some();
        match (guess, hi) {
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
            _ if self.past_end_too_dear(s, lo) => lo,
            // No guess: upwards from what is known, so that few pages are asked past the end.
            (_, Some(h)) => (lo * 2).min(lo + (h - lo) * 3 / 10),
            (_, None) => lo * 2,
        }
    }
}

impl Planner {
    /// What a count that ran to its end found.
    pub(super) fn count(&self) -> Count {
        Count {
            events: self.counted,
            requests: self.predicted,
            probes: self.sent,
            exact: self.sorting == Sorting::Sorted && self.precision == Precision::Exact,
        }
    }

    /// What a count stopped before its end makes of the query: the windows counted, and the
    /// open ones as far as their pages tell, at their density over the whole range; None when
    /// nothing tells yet.
    pub(super) fn estimate(&self) -> Option<Count> {
        let (mut events, mut span) = (self.counted, self.progress.done_ms as f64);
        let done = (span > 0.0).then(|| events / span);
        for w in self.windows.values() {
            if let Some(g) = w.guess(done) {
                events += g;
                span += (w.we - w.ws).max(1) as f64;
            }
        }
        if span <= 0.0 || events <= 0.0 {
            return None;
        }
        let events = events * (self.query.end_ms - self.query.start_ms) as f64 / span;
        Some(Count {
            events,
            requests: requests_for(events, 1) as f64,
            probes: self.sent,
            exact: false,
        })
    }
}

/// The requests a fetch of `events` events in `windows` ranges takes: its pages, and a short
/// last page for each range and each 10,000 events.
pub(super) fn requests_for(events: f64, windows: usize) -> u64 {
    let events = events.max(0.0);
    ((events / PAGE as f64).ceil() + (events / OFFSET_CEILING as f64).floor()) as u64
        + windows as u64
}

/// What a count of a query's events found (see [`count`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Count {
    /// Events in the range (exact on a sorting service, but for the rare window whose end the
    /// search took within 3%).
    pub events: f64,
    /// Requests the fetch makes for them.
    pub requests: f64,
    /// Requests the count made.
    pub probes: u64,
    /// Every window's end was found exactly, on a service that sorts.
    pub exact: bool,
}
