//! What the planner tells of its progress: the requests answered, the windows planned, the
//! events handed out, and what it expects of the rest (events, requests, time).

use super::{Page, Planner, Progress, EXPECT_EVERY};
use crate::client::lists::{OFFSET_CEILING, PAGE};

impl Planner {
    /// The answer `page` came back (a request, unless it was taken from what a plan or a
    /// quota check held).
    pub(super) fn answered(&mut self, page: &Page) {
        self.progress.requests += u64::from(!page.held);
    }

    /// Counts in the fetch's progress the requests its quota check sent (its first page is
    /// taken from what the check held).
    pub(super) fn count_checked(&mut self, requests: u64) {
        self.progress.requests += requests;
    }

    /// `windows` more windows planned (fewer, when negative: one replaced).
    pub(super) fn planned(&mut self, windows: i64) {
        self.progress.windows = self.progress.windows.saturating_add_signed(windows);
    }

    /// `events` handed out, every event of the query before `until` (epoch ms) among them.
    pub(super) fn handed(&mut self, until: i64, events: usize) {
        self.progress.events += events as u64;
        self.progress.done_ms = until - self.query.start_ms;
    }

    /// Requests saved by a window the cache served.
    pub(super) fn saved(&mut self, requests: u64) {
        self.progress.saved += requests;
    }

    /// Updates what the progress expects: the events of the range (the windows emitted,
    /// exactly; each open window as far as its pages tell (see [`Window::guess`]); the
    /// windows that tell nothing yet at the density of the others, or of what earlier fetches
    /// of this client saw), the requests those take, and the time they take at the read rate.
    /// With nothing to go on yet (an unsorted first window still open) it expects nothing.
    pub(super) fn expect(&mut self, now: std::time::Instant, read_rate: Option<f64>) {
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
            self.densest
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
        let elapsed = now.saturating_duration_since(self.started).as_secs_f64();
        let seen = (self.progress.requests >= 3 && elapsed >= 1.0)
            .then(|| self.progress.requests as f64 / elapsed);
        let rate = match (read_rate, seen) {
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

    /// The progress, with what it expects (at the read rate `read_rate`), for a sink. What it
    /// expects is worked out again at most every [`EXPECT_EVERY`] (a bar is drawn no more
    /// often), and at the end: it reads every open window's events, a few thousand each, and a
    /// fetch reports after every page.
    pub(super) fn progress_at(
        &mut self,
        now: std::time::Instant,
        read_rate: Option<f64>,
    ) -> Progress {
        let due = self.windows.is_empty()
            || self
                .expected_at
                .is_none_or(|at| now.saturating_duration_since(at) >= EXPECT_EVERY);
        if due {
            self.expect(now, read_rate);
            self.expected_at = Some(now);
        }
        self.progress
    }
}
