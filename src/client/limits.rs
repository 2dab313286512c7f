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
/// The baseline share is taken as this at most, and a cut is undone (see [`CutTrial`]) only
/// when the share of 429s well below its rate is this at most: refusals of most requests
/// whatever the rate are not told apart from a limit far below the rate (a wave of requests
/// sent at once, most of them refused), which must be cut again, not undone.
const BASELINE_MOST: f64 = 0.5;
/// A cut is judged once this many answers came to requests sent well below its rate...
const JUDGED: f64 = 30.0;
/// ... or at the end of that calm start of the recovery, with this many at least (fewer say
/// too little: the cut stays).
const JUDGED_LEAST: f64 = 10.0;
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

/// What a cut is judged by once its calm start is over (see [`Throttle::judge`]): the share of
/// 429s among the answers that made it (the last ones before it, [`JUDGED`] at least), and the
/// cut in force before it (None: the configured rate), which undoing it restores.
#[derive(Debug, Clone, Copy)]
struct CutTrial {
    share: f64,
    before: Option<Cut>,
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
/// another. Each cut is a trial of the rate: the answers of its calm start judge it
/// ([`Throttle::judge`]). 429s that come at random, whatever the rate (30% of the answers,
/// say), come there as often as before the cut: the cut is undone and their share learnt as
/// the baseline, so that they cost retries, not rate. The rate never exceeds the configured one, and is back at it (or lifted, if
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
    /// 429 of it, and the successes and 429s since.
    evidence: f64,
    since: Option<Instant>,
    accepted: u32,
    refused: u32,
    /// What the cut in force is judged by, until it is.
    trial: Option<CutTrial>,
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
            refused: 0,
            trial: None,
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
        self.trial = None;
    }

    /// Judges the cut in force by the answers to requests sent well below its rate (`n`, `k`
    /// of them 429s): a cut of a rate over a limit makes the 429s fall to the share that the
    /// rate does not explain; 429s that come at random, whatever the rate, come as often as
    /// before. When the share of 429s there is nearer the share that made the cut than the
    /// baseline, the cut did not help: it is undone (the rate goes back to where it was), and
    /// that share is learnt as the baseline, so that it makes no cut again. True when most of
    /// those answers are 429s: the cut was not deep enough (a wave sent at once overstated
    /// the rate the service took), and the rate is cut again at once.
    fn judge(&mut self) -> bool {
        let Some(v) = self.trial.take() else {
            return false;
        };
        let (n, k) = self.recovering;
        if n < JUDGED_LEAST {
            return false;
        }
        let share = k / n;
        if share > BASELINE_MOST {
            return true;
        }
        if share >= (v.share + self.baseline()) / 2.0 {
            self.end_recovery();
            self.cut = v.before;
            self.evidence = 0.0;
            self.since = None;
        }
        false
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
        if self.trial.is_some() {
            let (n, k) = self.recovering;
            if calm && n < JUDGED && k <= BASELINE_MOST * JUDGED {
                // The calm start of a cut tests the cut, not the rate.
                return;
            }
            if self.judge() {
                self.cut_rate(now, rate, false);
                return;
            }
        }
        let again = self.cut.is_some_and(|c| c.probing(sent));
        let test = if again { AGAIN } else { FIRST };
        if self.evidence == 0.0 {
            if !throttled {
                return;
            }
            self.since = Some(sent);
            self.accepted = 0;
            self.refused = 0;
        }
        if throttled {
            self.refused += 1;
        } else {
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
        // The share of 429s of the answers that made the cut, over as many as the cut is judged
        // by at least (the evidence's own start on a 429 and end on a run of them overstate it).
        let counted = (self.accepted + self.refused).max(JUDGED as u32) as usize;
        let (n, k) = self
            .answers
            .iter()
            .rev()
            .take(counted)
            .fold((0u32, 0u32), |(n, k), a| {
                (n + 1, k + u32::from(a.throttled))
            });
        self.trial = Some(CutTrial {
            share: f64::from(k) / f64::from(n.max(1)),
            before: self.cut,
        });
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
mod tests;
