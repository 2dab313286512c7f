//! Client-side limits: for reads and for publishing, a pacing rate and a concurrency cap shared by
//! every task of one client; the rate is cut when 429s are sustained and climbs back along a
//! cubic curve (`Throttle`), while a lone 429 only delays its own request.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::{Error, Result};

pub use crate::limits::{Limits, DAILY_REQUESTS};

/// In flight at most when a concurrency is unlimited (a sanity cap on sockets).
const UNLIMITED_CONCURRENCY: usize = 512;
/// The share of its rate a cut keeps (TCP CUBIC and botocore's adaptive mode use 0.7).
const BETA: f64 = 0.7;
/// A cut rate climbs back to the rate it was cut from in this many seconds...
const RECOVERY: f64 = 3.0;
/// ... or in the time of this many requests at that rate, when longer (slow clients probe
/// as many requests apart as fast ones, not more often).
const RECOVERY_REQUESTS: f64 = 60.0;
/// How 429s are weighed before a first cut, and after one where the rate is well below the
/// rate of the cut: the share of 429s taken as chance (sporadic ones: per-node limits, a
/// neighbour's burst), the share that means the rate is over a limit, and the evidence that
/// makes a cut (see [`Detector`]). 5% of sporadic 429s make no cut in millions of answers; half
/// of them refused, after about 10 429s.
const FIRST: Detector = Detector {
    chance: 0.1,
    over: 0.3,
    cut_at: 8.0,
};
/// The same past the rate of the last cut (the recovery over, the rate probing for more
/// room), where 429s coming back are the limit found again: a smaller rise over the baseline
/// cuts (two 429s close together, once the baseline is known to be low), back to [`BETA`] of
/// the rate of that cut (no lower, so that sporadic 429s cannot ratchet the rate down from cut
/// to cut). Below that rate, [`FIRST`] weighs the answers: the rate there is one the service
/// took.
const AGAIN: Detector = Detector {
    chance: 0.02,
    over: 0.2,
    cut_at: 3.0,
};
/// A limit found again where it was makes the recovery twice as long, up to this many times
/// the first one (see [`RECOVERY`]).
const SLOWEST: f64 = 4.0;
/// An answer this long after the previous one (or three intervals at the rate in force, when
/// longer) starts the evidence afresh: the 429s of a call long over say nothing of this one.
const IDLE: Duration = Duration::from_secs(1);
/// The accepted rate, from which a cut starts, is measured since the first 429 of the evidence
/// that made the cut, over at least this much of the past...
const MIN_SPAN: Duration = Duration::from_millis(50);
/// ... when that holds this many successes; with fewer (a wave of requests refused at once),
/// the successes of the last second count too.
const RELIABLE: u32 = 5;
/// Answers kept at most this long (for those measures)...
const HISTORY: Duration = Duration::from_secs(4);
/// ... and at most this many (a bound on memory at thousands of answers a second).
const MAX_KEPT: usize = 16_384;
/// Below this share of the rate of the last cut, the rate explains no 429: answers to requests
/// sent there make the baseline share, and only [`FIRST`] cuts again.
const CALM: f64 = 0.9;
/// The baseline share counts as many answers, [`BASELINE_429S`] of them 429s, before the first
/// (so that a few say little, and the share starts at the sporadic 5%).
const BASELINE_PRIOR: f64 = 20.0;
/// See [`BASELINE_PRIOR`].
const BASELINE_429S: f64 = 1.0;
/// The baseline share is taken as this at most: 429s below the limit at a greater share (a
/// concurrency limit that refuses bursts, say) must not blind the test to a rate limit.
const BASELINE_MOST: f64 = 0.1;
/// The baseline share is taken over about this many answers (older ones weigh half, and so on).
const BASELINE_SPAN: f64 = 1000.0;
/// A request waiting for its turn looks at the rate again this often.
const RECHECK: Duration = Duration::from_millis(100);
/// The adaptive rate never goes below this many requests per second.
const FLOOR: f64 = 0.5;
/// A request that starts this little past its turn counts as started on it (at most a quarter
/// of the interval): the lateness of the timer that woke it.
const TIMER_SLACK: Duration = Duration::from_millis(2);

/// A test of whether 429s come more often than by chance: a CUSUM of the log-likelihood ratio
/// of "a share `over` of the answers are 429s" to "a share `chance`", each 429 adding to the
/// evidence and each success taking from it (never below 0); a cut when it reaches `cut_at`.
/// Sporadic 429s at the share `chance` or below leave the evidence near 0, however many
/// answers come; 429s at a share well above it build it up within a few of them.
#[derive(Debug, Clone, Copy)]
struct Detector {
    chance: f64,
    over: f64,
    cut_at: f64,
}

impl Detector {
    /// The evidence one answer adds (negative: takes), when `baseline` of the answers below
    /// the limit are 429s (a chance share no test may go under).
    fn weigh(&self, throttled: bool, baseline: f64) -> f64 {
        let chance = self.chance.max(baseline.min(BASELINE_MOST));
        let over = self.over.max(chance + 0.1);
        if throttled {
            (over / chance).ln()
        } else {
            ((1.0 - over) / (1.0 - chance)).ln()
        }
    }
}

/// One answer: when it came, whether it was a 429.
#[derive(Debug, Clone, Copy)]
struct Answer {
    at: Instant,
    throttled: bool,
}

/// A cut of the rate: when, the accepted rate it started from, and the seconds it takes to
/// climb back to it.
#[derive(Debug, Clone, Copy)]
struct Cut {
    at: Instant,
    from: f64,
    recovery: f64,
}

impl Cut {
    /// The rate `now` on the cubic curve: `BETA * from` at the cut, concave up to `from`
    /// (reached after `recovery` seconds, where it is flat), convex beyond.
    fn curve(&self, now: Instant) -> f64 {
        let x = now.saturating_duration_since(self.at).as_secs_f64() / self.recovery - 1.0;
        self.from * (1.0 + (1.0 - BETA) * x.powi(3))
    }

    /// Whether `at` is after the cut and well below its rate (at most [`CALM`] of it): early
    /// in the recovery, where the rate explains no 429 even if the rate of the cut overstated
    /// the limit a little.
    fn calm(&self, at: Instant) -> bool {
        at > self.at && self.curve(at) <= CALM * self.from
    }

    /// Whether the rate is back at the rate of the cut, and climbing past it.
    fn probing(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.at).as_secs_f64() > self.recovery
    }
}

/// The rate controller of one class of requests, with time passed in (so that tests are exact).
///
/// A lone 429, or 429s that come at random at a small share of the answers whatever the rate
/// (5% of them, say), do not touch the rate: each only delays its own request (by its
/// `Retry-After`, in `Http::send`). The rate is cut only when 429s come at a share of the
/// answers that chance does not explain, as a limit lower than the rate gives: a sequential
/// test ([`Detector`], [`FIRST`]) weighs each answer, so that a share of half needs a few
/// 429s and 5% never adds up. The rate is then cut to [`BETA`] of the rate the service
/// accepted since those 429s began, and climbs back along a cubic curve, as in TCP CUBIC and
/// botocore's adaptive retry mode: fast at first, flat near the rate of the cut (reached after
/// [`RECOVERY`] seconds, or [`RECOVERY_REQUESTS`] requests), then faster again to find more
/// room. Past that rate, 429s coming back are the limit found again, and a smaller rise over
/// the baseline share ([`AGAIN`]: the share of 429s among the requests sent well below the
/// limit) cuts again, from that rate or the newly measured one when higher, and the recovery
/// doubles (up to [`SLOWEST`] times): a limit that stays where it was is probed less and less
/// often, each probe costing a few 429s. Answers to requests sent before a cut never make
/// another. The rate never exceeds the configured one, and is back at it (or lifted, if
/// unlimited, once the curve is twice what the client uses) as soon as the curve gets there:
/// within seconds of the last cut (tens of seconds after a limit found again several times),
/// whatever the calls and pauses in between.
#[derive(Debug)]
pub struct Throttle {
    configured: Option<f64>,
    /// The answers of the last [`HISTORY`].
    answers: VecDeque<Answer>,
    cut: Option<Cut>,
    last_start: Option<Instant>,
    /// The evidence of 429s over chance (see [`Detector`]), the sending instant of the first
    /// 429 of it, and the successes since.
    evidence: f64,
    since: Option<Instant>,
    accepted: u32,
    /// Answers to requests sent well below the rate of a cut, and the 429s among them (decayed).
    calm: (f64, f64),
    /// The same for the recovery under way, counted in `calm` once the rate is back near that
    /// of the cut without a cut in between, or the limit is found again there: a cut well
    /// below it means the rate made those 429s.
    recovering: (f64, f64),
}

impl Throttle {
    /// A controller of `configured` requests per second (None: unlimited).
    pub fn new(configured: Option<f64>) -> Throttle {
        Throttle {
            configured,
            answers: VecDeque::new(),
            cut: None,
            last_start: None,
            evidence: 0.0,
            since: None,
            accepted: 0,
            calm: (0.0, 0.0),
            recovering: (0.0, 0.0),
        }
    }

    /// The rate in force at `now` (None: unlimited).
    pub fn rate(&mut self, now: Instant) -> Option<f64> {
        let Some(cut) = self.cut else {
            return self.configured;
        };
        let curve = cut.curve(now);
        match self.configured {
            Some(c) if curve >= c => {
                self.end_cut();
                Some(c)
            }
            None if cut.probing(now)
                && curve > 2.0 * self.answered_in(now, Duration::from_secs(1)).max(1) as f64 =>
            {
                self.end_cut();
                None
            }
            _ => Some(curve.max(FLOOR)),
        }
    }

    /// Whether a request may start at `now` (then it counts as started), or the instant to ask
    /// again at: requests are spaced by the rate in force, never sent in a burst.
    pub fn turn(&mut self, now: Instant) -> Option<Instant> {
        let mut start = now;
        if let (Some(rate), Some(last)) = (self.rate(now), self.last_start) {
            let interval = Duration::from_secs_f64(1.0 / rate);
            let due = last + interval;
            if due > now {
                return Some(due);
            }
            // A wake-up a little past its turn (timers tick in milliseconds) counts from the
            // turn, or every interval would grow by the timer's lateness (a tenth at 100/s).
            if now - due <= TIMER_SLACK.min(interval / 4) {
                start = due;
            }
        }
        self.last_start = Some(start);
        None
    }

    /// Answers that came in the last `span` before `now`.
    fn answered_in(&self, now: Instant, span: Duration) -> usize {
        let old = match now.checked_sub(span) {
            Some(since) => self.answers.partition_point(|a| a.at <= since),
            None => 0,
        };
        self.answers.len() - old
    }

    /// The share of 429s the rate does not explain.
    fn baseline(&self) -> f64 {
        (self.calm.1 + BASELINE_429S) / (self.calm.0 + BASELINE_PRIOR)
    }

    /// The answers of a recovery that ended without a cut well below the limit count in the
    /// baseline.
    fn end_recovery(&mut self) {
        let (n, k) = std::mem::take(&mut self.recovering);
        self.calm.0 += n;
        self.calm.1 += k;
        if self.calm.0 > BASELINE_SPAN {
            self.calm.0 /= 2.0;
            self.calm.1 /= 2.0;
        }
    }

    /// The rate is back at the configured one, or lifted.
    fn end_cut(&mut self) {
        self.end_recovery();
        self.cut = None;
    }

    /// Successes answered in the last `span` before `now`.
    fn accepted_in(&self, now: Instant, span: Duration) -> usize {
        self.answers
            .iter()
            .rev()
            .take_while(|a| now.saturating_duration_since(a.at) <= span)
            .filter(|a| !a.throttled)
            .count()
    }

    /// Records the answer, at `now`, to a request sent at `sent`; a 429 may cut the rate.
    pub fn answer(&mut self, now: Instant, sent: Instant, throttled: bool) {
        let rate = self.rate(now);
        let idle = rate.map_or(IDLE, |r| IDLE.max(Duration::from_secs_f64(3.0 / r)));
        if self
            .answers
            .back()
            .is_some_and(|a| now.saturating_duration_since(a.at) > idle)
        {
            self.evidence = 0.0;
        }
        self.answers.push_back(Answer { at: now, throttled });
        while self.answers.len() > MAX_KEPT
            || self
                .answers
                .front()
                .is_some_and(|a| now.saturating_duration_since(a.at) > HISTORY)
        {
            self.answers.pop_front();
        }
        if self.cut.is_some_and(|c| c.probing(now)) {
            self.end_recovery();
        }
        if self.cut.is_some_and(|c| sent <= c.at) {
            // A request sent before the last cut tells nothing of the rate since.
            return;
        }
        let calm = self.cut.is_some_and(|c| c.calm(sent));
        if calm {
            self.recovering.0 += 1.0;
            self.recovering.1 += f64::from(u8::from(throttled));
        }
        let again = self.cut.is_some_and(|c| c.probing(sent));
        let test = if again { AGAIN } else { FIRST };
        if self.evidence == 0.0 {
            if !throttled {
                return;
            }
            self.since = Some(sent);
            self.accepted = 0;
        }
        if !throttled {
            self.accepted += 1;
        }
        self.evidence = (self.evidence + test.weigh(throttled, self.baseline())).max(0.0);
        if self.evidence >= test.cut_at {
            self.cut_rate(now, rate, again);
        }
    }

    /// Cuts the rate to [`BETA`] of the rate accepted since the evidence began (`rate` the
    /// rate in force at most; after a cut near the rate of the last one, that rate at least).
    fn cut_rate(&mut self, now: Instant, rate: Option<f64>, again: bool) {
        let span = self
            .since
            .map_or(Duration::ZERO, |s| now.saturating_duration_since(s))
            .max(MIN_SPAN);
        let mut from = f64::from(self.accepted) / span.as_secs_f64();
        if self.accepted < RELIABLE && !again {
            from = from.max(self.accepted_in(now, Duration::from_secs(1)) as f64);
        }
        if let Some(r) = rate {
            from = from.min(r);
        }
        let base = |from: f64| RECOVERY.max(RECOVERY_REQUESTS / from);
        let (from, recovery) = match self.cut.filter(|_| again) {
            Some(c) => {
                // The limit found again near the rate of the last cut: the answers well below
                // it were not the rate's doing; the limit is where it was, so it is probed
                // half as often (up to [`SLOWEST`] times less often).
                let from = from.max(c.from).max(FLOOR / BETA);
                self.end_recovery();
                (from, (2.0 * c.recovery).min(SLOWEST * base(from)))
            }
            None => {
                self.recovering = (0.0, 0.0);
                let from = from.max(FLOOR / BETA);
                (from, base(from))
            }
        };
        self.evidence = 0.0;
        self.since = None;
        self.cut = Some(Cut {
            at: now,
            from,
            recovery,
        });
    }
}

/// The pacing and concurrency of one class of requests (reads, or publishing).
#[derive(Debug)]
pub struct Gate {
    throttle: Mutex<Throttle>,
    /// Paced requests that must wait for their turn do so one at a time, the others queued
    /// behind, so that a change of the rate applies at once to every request waiting.
    queue: tokio::sync::Mutex<()>,
    slots: Arc<Semaphore>,
}

/// Held while a request is in flight.
#[derive(Debug)]
pub struct Slot(#[allow(dead_code)] OwnedSemaphorePermit);

impl Gate {
    /// A gate of `rate` per second and `concurrency` in flight.
    pub fn new(rate: Option<f64>, concurrency: Option<usize>) -> Gate {
        Gate {
            throttle: Mutex::new(Throttle::new(rate)),
            queue: tokio::sync::Mutex::new(()),
            slots: Arc::new(Semaphore::new(concurrency.unwrap_or(UNLIMITED_CONCURRENCY))),
        }
    }

    fn throttle(&self) -> std::sync::MutexGuard<'_, Throttle> {
        self.throttle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a concurrency slot, then for the request's turn under the rate.
    pub async fn acquire(&self) -> Result<Slot> {
        let permit = self
            .slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::Closed)?;
        if self.throttle().turn(Instant::now()).is_none() {
            return Ok(Slot(permit));
        }
        let _queue = self.queue.lock().await;
        loop {
            let due = self.throttle().turn(Instant::now());
            let Some(due) = due else { break };
            // Woken at least every RECHECK: the rate may have been raised meanwhile.
            tokio::time::sleep_until(due.min(Instant::now() + RECHECK).into()).await;
        }
        Ok(Slot(permit))
    }

    /// Refuses every waiting and future request (the client was closed).
    pub fn close(&self) {
        self.slots.close();
    }

    /// After a 429 to a request sent at `sent`: a lone one leaves the rate as it is (the request
    /// waits for its `Retry-After` alone); sustained ones cut it. A 429 that asks for an
    /// immediate retry (`Retry-After: 0`) is not counted.
    pub fn on_rate_limited(&self, sent: Instant, retry_after: Option<Duration>) {
        if retry_after.is_some_and(|w| w.is_zero()) {
            return;
        }
        self.throttle().answer(Instant::now(), sent, true);
    }

    /// After a success of a request sent at `sent`.
    pub fn on_success(&self, sent: Instant) {
        self.throttle().answer(Instant::now(), sent, false);
    }

    /// The rate in force now (None = unlimited).
    pub fn current_rate(&self) -> Option<f64> {
        self.throttle().rate(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn paces_at_the_rate() {
        let g = Gate::new(Some(50.0), Some(3));
        let t0 = Instant::now();
        for _ in 0..6 {
            drop(g.acquire().await.expect("open"));
        }
        // Five intervals of 20 ms after the first.
        assert!(
            t0.elapsed() >= Duration::from_millis(95),
            "{:?}",
            t0.elapsed()
        );
    }

    /// `s` seconds after `t0`.
    fn at(t0: Instant, s: f64) -> Instant {
        t0 + Duration::from_secs_f64(s)
    }

    /// Feeds `n` answers spread evenly over `[from, to)` seconds (sent and answered at once),
    /// the i-th a 429 when `throttled(i)`.
    fn feed(
        t: &mut Throttle,
        t0: Instant,
        (from, to): (f64, f64),
        n: usize,
        mut throttled: impl FnMut(usize) -> bool,
    ) {
        for i in 0..n {
            let now = at(t0, from + (to - from) * i as f64 / n as f64);
            t.answer(now, now, throttled(i));
        }
    }

    #[tokio::test]
    async fn a_429_delays_no_other_request() {
        let g = Gate::new(None, None);
        g.on_rate_limited(Instant::now(), Some(Duration::from_secs(1)));
        let t0 = Instant::now();
        for _ in 0..3 {
            drop(g.acquire().await.expect("open"));
        }
        assert!(
            t0.elapsed() < Duration::from_millis(500),
            "{:?}",
            t0.elapsed()
        );
        assert_eq!(g.current_rate(), None);
    }

    #[test]
    fn turns_are_spaced_by_the_rate() {
        let t0 = Instant::now();
        let mut t = Throttle::new(Some(4.0));
        assert_eq!(t.turn(t0), None);
        assert_eq!(t.turn(at(t0, 0.1)), Some(at(t0, 0.25)));
        assert_eq!(t.turn(at(t0, 0.25)), None);
        // Late: the next turn counts from this start, never a catch-up burst.
        assert_eq!(t.turn(at(t0, 2.0)), None);
        assert_eq!(t.turn(at(t0, 2.0)), Some(at(t0, 2.25)));
        // A millisecond past its turn (a timer's lateness): the next counts from the turn, so
        // the rate holds on average.
        assert_eq!(t.turn(at(t0, 2.251)), None);
        assert_eq!(t.turn(at(t0, 2.3)), Some(at(t0, 2.5)));
        let mut unlimited = Throttle::new(None);
        assert!((0..100).all(|_| unlimited.turn(t0).is_none()));
    }

    #[test]
    fn lone_and_sporadic_429s_leave_the_rate() {
        let t0 = Instant::now();
        let mut t = Throttle::new(Some(10.0));
        feed(&mut t, t0, (0.0, 3.0), 30, |i| i == 29);
        assert_eq!(t.rate(at(t0, 3.0)), Some(10.0));
        // 5% of 429s at random, as per-node limits give, for minutes at 2, 50 and 1,000 answers
        // a second, limited or not: not one cut.
        for (per_second, seconds) in [(2, 600), (50, 120), (1000, 60)] {
            for configured in [None, Some(per_second as f64)] {
                let mut t = Throttle::new(configured);
                let mut rng = crate::rng::Rng::new(7, per_second);
                for second in 0..seconds {
                    let s = second as f64;
                    feed(&mut t, t0, (s, s + 1.0), per_second as usize, |_| {
                        rng.chance(0.05)
                    });
                    assert!(t.cut.is_none(), "{per_second}/s, second {second}");
                }
                assert_eq!(t.rate(at(t0, seconds as f64)), configured);
            }
        }
    }

    #[test]
    fn waves_of_requests_with_sporadic_429s_leave_the_rate() {
        // As a read or a publish gives: a wave of requests answered at once, 5% of them 429s,
        // whose retries come back a second later, 5% of those 429s again, and so on; then the
        // next wave. Ten thousand waves.
        let t0 = Instant::now();
        let mut rng = crate::rng::Rng::new(3, 4);
        let mut t = Throttle::new(None);
        let mut now = 0.0;
        for wave in 0..10_000 {
            let mut n = [1, 2, 100, 500][wave % 4];
            while n > 0 {
                let mut refused = 0;
                for i in 0..n {
                    let answered = at(t0, now + 0.0002 * i as f64);
                    let throttled = rng.chance(0.05);
                    refused += usize::from(throttled);
                    t.answer(answered, at(t0, now), throttled);
                }
                assert!(t.cut.is_none(), "wave {wave}");
                now += 1.0;
                n = refused;
            }
        }
    }

    /// Feeds 429s from `from` seconds, `per_second` of them, until the rate is cut: the cut.
    fn throttle_until_cut(t: &mut Throttle, t0: Instant, from: f64, per_second: f64) -> Cut {
        for i in 0..1000 {
            let now = at(t0, from + i as f64 / per_second);
            t.answer(now, now, true);
            if let Some(cut) = t.cut {
                return cut;
            }
        }
        panic!("no cut");
    }

    #[test]
    fn sustained_429s_cut_the_rate_which_recovers_along_a_cubic() {
        let t0 = Instant::now();
        let mut t = Throttle::new(Some(100.0));
        // 50 a second accepted, then every other one refused: the service takes 25 a second.
        feed(&mut t, t0, (0.0, 2.0), 100, |_| false);
        feed(&mut t, t0, (2.0, 3.0), 50, |i| i % 2 == 1);
        let cut = t.cut.expect("a cut");
        let after = cut.at.duration_since(at(t0, 2.0)).as_secs_f64();
        assert!((0.1..1.5).contains(&after), "{after}");
        assert!(cut.from > 20.0 && cut.from <= 30.0, "{cut:?}");
        assert_eq!(cut.recovery, RECOVERY);
        let rate =
            |t: &mut Throttle, s: f64| t.rate(cut.at + Duration::from_secs_f64(s)).expect("cut");
        assert!((rate(&mut t, 0.0) - BETA * cut.from).abs() < 1e-9);
        // Concave up to the rate of the cut, reached after RECOVERY seconds, then convex.
        let curve: Vec<f64> = (0..=12).map(|i| rate(&mut t, 0.5 * i as f64)).collect();
        assert!(curve.windows(2).all(|w| w[1] > w[0]), "{curve:?}");
        assert!((curve[6] - cut.from).abs() < 1e-9, "{curve:?}");
        assert!(curve[1] - curve[0] > curve[6] - curve[5], "{curve:?}");
        assert!(curve[12] - curve[11] > curve[7] - curve[6], "{curve:?}");
        // Back at the configured rate (four times the accepted one) within seconds: the cut
        // is over.
        assert_eq!(t.rate(cut.at + Duration::from_secs(12)), Some(100.0));
        assert!(t.cut.is_none());
    }

    #[test]
    fn a_wave_all_refused_cuts_from_the_last_seconds_rate() {
        let t0 = Instant::now();
        let mut t = Throttle::new(None);
        feed(&mut t, t0, (0.0, 2.0), 100, |_| false);
        let cut = throttle_until_cut(&mut t, t0, 2.0, 1000.0);
        // Not a rate of 0: that of the last second.
        assert!(cut.from > 40.0 && cut.from <= 50.0, "{cut:?}");
    }

    #[test]
    fn a_slow_client_recovers_over_as_many_requests() {
        let t0 = Instant::now();
        let mut t = Throttle::new(None);
        feed(&mut t, t0, (0.0, 20.0), 40, |_| false); // 2 a second
        feed(&mut t, t0, (20.0, 40.0), 40, |i| i % 2 == 1);
        let cut = t.cut.expect("a cut");
        assert!(cut.from > 0.75 && cut.from <= 1.5, "{cut:?}");
        assert!((cut.recovery - 60.0 / cut.from).abs() < 1e-9, "{cut:?}");
    }

    #[test]
    fn answers_to_requests_sent_before_a_cut_do_not_cut_again() {
        let t0 = Instant::now();
        let mut t = Throttle::new(None);
        feed(&mut t, t0, (0.0, 1.0), 20, |_| false);
        let cut = throttle_until_cut(&mut t, t0, 1.0, 1000.0);
        // The rest of a burst sent before the cut comes back refused too.
        for i in 0..50 {
            t.answer(cut.at + Duration::from_millis(1 + i), at(t0, 1.0), true);
        }
        assert_eq!(t.cut.map(|c| (c.at, c.from)), Some((cut.at, cut.from)));
    }

    /// A cut of a client of `configured` that sent 50 a second, every other one refused from
    /// 2 s on.
    fn cut_at_half(configured: Option<f64>) -> (Throttle, Instant, Cut) {
        let t0 = Instant::now();
        let mut t = Throttle::new(configured);
        feed(&mut t, t0, (0.0, 2.0), 100, |_| false);
        for i in 0..50 {
            let now = at(t0, 2.0 + i as f64 / 50.0);
            t.answer(now, now, i % 2 == 1);
            if let Some(cut) = t.cut {
                return (t, t0, cut);
            }
        }
        panic!("no cut");
    }

    #[test]
    fn near_the_rate_of_a_cut_fewer_429s_cut_again() {
        let (mut t, _, first) = cut_at_half(None);
        // Early in the recovery, well below the rate of the cut, 5% of 429s are no more than
        // sporadic ones.
        let s = |d: f64| first.at + Duration::from_secs_f64(d);
        let mut i = 0;
        while s(0.01 + i as f64 * 0.04) < s(first.recovery) {
            let now = s(0.01 + i as f64 * 0.04);
            t.answer(now, now, first.calm(now) && i % 20 == 19);
            i += 1;
        }
        assert_eq!(t.cut.map(|c| c.at), Some(first.at));
        // Past the rate of the cut, one in five refused is the limit again.
        let mut again = None;
        for i in 0..200 {
            let now = s(first.recovery + 0.01 + i as f64 * 0.04);
            t.answer(now, now, i % 5 == 4);
            if t.cut.is_some_and(|c| c.at != first.at) {
                again = Some(i);
                break;
            }
        }
        assert!(again.is_some_and(|i| i < 40), "{again:?}");
        // From the rate of the first cut, not lower; the limit is where it was: the next
        // probe comes twice as late, and later still the next times, up to SLOWEST times.
        let second = t.cut.expect("a cut");
        assert!(second.from >= first.from, "{second:?}");
        assert!(
            (second.recovery - 2.0 * first.recovery).abs() < 1e-9,
            "{second:?}"
        );
        let mut last = second;
        for round in 0..4 {
            let s = |d: f64| last.at + Duration::from_secs_f64(d);
            for i in 0..2000 {
                let d = 0.01 + i as f64 * 0.04;
                let now = s(d);
                t.answer(now, now, d > last.recovery && i % 5 == 4);
                if t.cut.is_some_and(|c| c.at != last.at) {
                    break;
                }
            }
            let next = t.cut.expect("a cut");
            assert!(next.at > last.at, "round {round}: {next:?}");
            last = next;
        }
        assert!(
            (last.recovery - SLOWEST * first.recovery).abs() < 1e-9,
            "{last:?}"
        );
    }

    #[test]
    fn below_the_rate_of_a_cut_a_few_429s_do_not_cut_again() {
        // Past the calm start of the recovery but below the rate of the cut, the rate is one
        // the service took: two 429s close together (a neighbour's burst) are no limit.
        let (mut t, _, first) = cut_at_half(None);
        let s = |d: f64| first.at + Duration::from_secs_f64(d);
        let mut i = 0;
        while s(0.01 + i as f64 * 0.04) < s(first.recovery) {
            let now = s(0.01 + i as f64 * 0.04);
            t.answer(now, now, !first.calm(now) && (i % 40 == 38 || i % 40 == 39));
            i += 1;
        }
        assert_eq!(t.cut.map(|c| c.at), Some(first.at));
    }

    #[test]
    fn sporadic_429s_after_a_cut_do_not_ratchet_it_down() {
        for configured in [None, Some(100.0)] {
            let (mut t, t0, first) = cut_at_half(configured);
            let mut rng = crate::rng::Rng::new(5, 6);
            let d = first.at.duration_since(t0).as_secs_f64();
            // Then 5% of 429s at random, at the rate in force, for two minutes: the rate is
            // never below the first cut's, and back to the configured one (or lifted) within
            // seconds of the last cut.
            let mut now = d;
            let mut lowest = f64::INFINITY;
            let mut last_cut = first.at;
            while now < d + 120.0 {
                let rate = t.rate(at(t0, now)).unwrap_or(50.0).min(50.0);
                lowest = lowest.min(rate);
                t.answer(at(t0, now), at(t0, now), rng.chance(0.05));
                last_cut = t.cut.map_or(last_cut, |c| c.at);
                now += 1.0 / rate;
            }
            assert!(lowest >= BETA * first.from - 1e-9, "{lowest} {first:?}");
            let since = at(t0, now).duration_since(last_cut).as_secs_f64();
            assert!(since > 10.0, "{since}");
            assert!(t.cut.is_none(), "{:?}", t.cut);
        }
    }

    #[test]
    fn a_cut_outlives_its_call_by_seconds_at_most() {
        // A call ends at the cut; the next starts 10 s later: at the configured rate, or
        // unlimited again.
        for configured in [Some(100.0), None] {
            let (mut t, _, cut) = cut_at_half(configured);
            assert!(t.rate(cut.at).is_some());
            assert_eq!(t.rate(cut.at + Duration::from_secs(10)), configured);
        }
        // Its 429s make no evidence for the next one.
        let (mut t, _, cut) = cut_at_half(None);
        let later = cut.at + Duration::from_secs(60);
        for i in 0..3 {
            let now = later + Duration::from_millis(i);
            t.answer(now, now, true);
        }
        assert!(t.evidence < FIRST.cut_at);
        let fresh = t.evidence;
        let mut u = Throttle::new(None);
        for i in 0..3 {
            let now = later + Duration::from_millis(i);
            u.answer(now, now, true);
        }
        assert!((fresh - u.evidence).abs() < 1e-9);
    }

    #[test]
    fn an_unlimited_rate_is_lifted_again_when_unused() {
        let (mut t, t0, cut) = cut_at_half(None);
        assert!(t.rate(cut.at).is_some());
        // A few answers a second from then on: the curve passes twice that after the recovery.
        let d = cut.at.duration_since(t0).as_secs_f64();
        feed(&mut t, t0, (d + 0.1, d + 8.0), 16, |_| false);
        assert_eq!(t.rate(at(t0, d + 8.0)), None);
        assert!(t.cut.is_none());
    }

    /// A service that allows `limit` requests a second (a token bucket holding one second, as
    /// the emulator's), refuses a `sporadic` share of the others at random, and answers in
    /// 5 ms; a client with always more to send, `in_flight` at a time, that does not know the
    /// limit. The requests the service accepts per second, as a share of the limit, and the
    /// share of 429s among those sent from `settle` to `total` seconds.
    fn against_an_unknown_limit(
        configured: Option<f64>,
        (limit, sporadic): (f64, f64),
        in_flight: usize,
        settle: f64,
        total: f64,
    ) -> (f64, f64) {
        let t0 = Instant::now();
        let secs = |i: Instant| i.saturating_duration_since(t0).as_secs_f64();
        let mut rng = crate::rng::Rng::new(11, 2);
        let mut t = Throttle::new(configured);
        let (mut tokens, mut refilled) = (limit, 0.0);
        let mut pending: VecDeque<(f64, f64, bool)> = VecDeque::new();
        let (mut accepted, mut refused) = (0u64, 0u64);
        let mut now = 0.0;
        while now < total {
            let next_send = if pending.len() < in_flight {
                match t.turn(at(t0, now)) {
                    None => {
                        tokens = (tokens + (now - refilled) * limit).min(limit);
                        refilled = now;
                        let passed = tokens >= 1.0;
                        if passed {
                            tokens -= 1.0;
                        }
                        let ok = passed && !rng.chance(sporadic);
                        pending.push_back((now + 0.005, now, !ok));
                        continue;
                    }
                    Some(due) => secs(due),
                }
            } else {
                f64::INFINITY
            };
            match pending.front().copied() {
                Some((answered, sent, throttled)) if answered <= next_send => {
                    pending.pop_front();
                    now = answered;
                    t.answer(at(t0, answered), at(t0, sent), throttled);
                    if sent >= settle {
                        *(if throttled {
                            &mut refused
                        } else {
                            &mut accepted
                        }) += 1;
                    }
                }
                _ => now = next_send,
            }
        }
        let share_of_limit = accepted as f64 / (total - settle) / limit;
        (share_of_limit, refused as f64 / (accepted + refused) as f64)
    }

    #[test]
    fn settles_under_an_unknown_limit_with_few_429s() {
        for (limit, in_flight) in [(20.0, 16), (5.0, 3), (200.0, 32)] {
            let (share, refused) =
                against_an_unknown_limit(None, (limit, 0.0), in_flight, 10.0, 130.0);
            eprintln!("limit {limit}: {share:.3} of the limit, {refused:.3} of 429s");
            assert!(share >= 0.9, "limit {limit}: {share}");
            assert!(refused < 0.01, "limit {limit}: {refused}");
        }
        // From the start, finding the limit included, over 20 s, for a client configured for
        // twice the limit.
        for (limit, in_flight) in [(20.0, 3), (100.0, 16)] {
            let configured = Some(2.0 * limit);
            let (share, refused) =
                against_an_unknown_limit(configured, (limit, 0.0), in_flight, 0.0, 20.0);
            eprintln!(
                "limit {limit}, from the start: {share:.3} of the limit, {refused:.3} of 429s"
            );
            assert!(share >= 0.8, "limit {limit}: {share}");
            assert!(refused <= 0.05, "limit {limit}: {refused}");
        }
        // With 5% of sporadic 429s besides: they do not drag the rate below the limit.
        let (share, refused) = against_an_unknown_limit(None, (20.0, 0.05), 16, 10.0, 130.0);
        eprintln!("limit 20 and 5% sporadic: {share:.3} of the limit, {refused:.3} of 429s");
        assert!(share >= 0.85, "{share}");
        assert!(refused < 0.1, "{refused}");
    }

    #[test]
    fn published_limits_are_the_default() {
        let l = Limits::PUBLISHED;
        assert_eq!(l.read_per_second, Some(1.0));
        assert_eq!(l.publish_concurrency, Some(200));
    }
}
