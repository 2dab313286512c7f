//! The call a request belongs to: a caller runs each call's work inside a [`Scope`], and every
//! request, retry and 429 of that work is counted in it as well as in the client's totals, so
//! that concurrent calls on one client each know what they spent. A scope may also hold the
//! call's [`Observer`] (its telemetry) and the trace context its requests carry, and be
//! stopped: once a call is stopping ([`Scope::halt`], or its [`Stop`] says so), none of its
//! requests leaves, whichever task sends it and however late that task runs.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// What one call (and the calls within it) sent; a call inside another counts in both.
#[derive(Debug, Default)]
pub struct Scope {
    sent: AtomicU64,
    retries: AtomicU64,
    rate_limited: AtomicU64,
    /// Milliseconds its requests waited after 429s, each request's waits counted.
    waited_ms: AtomicU64,
    /// The outages its requests rode out: how many, and their time, from the first request
    /// of the call that met one to the first answered after it.
    outages: AtomicU64,
    outage_ms: AtomicU64,
    in_outage: AtomicBool,
    outage_since: Mutex<Option<Instant>>,
    /// The call this one runs within, if any.
    parent: Option<Arc<Scope>>,
    /// Told of each request, wait and token of the call (None: nobody watches, one branch a
    /// request).
    observer: Option<Arc<dyn Observer>>,
    /// The W3C `traceparent` the call's requests carry (None: no header).
    traceparent: Option<String>,
    /// Halted: the call sends nothing more (its work is being dropped).
    halted: AtomicBool,
    /// What else stops the call (None: only a halt).
    stop: Option<Arc<dyn Stop>>,
}

/// What stops a call from outside it (Ctrl-C seen by a signal handler, say): read before each
/// of its requests leaves, so it must be cheap and never block.
pub trait Stop: Send + Sync + std::fmt::Debug {
    /// The call is stopping: no request of it may leave from now on.
    fn stopping(&self) -> bool;
}

/// One exchange with the service as telemetry sees it: the attributes of the HTTP client
/// conventions of OpenTelemetry, never the query (which holds no secret, but a template is
/// what a dashboard groups by) nor a header.
#[derive(Debug, Clone)]
pub struct Exchange<'a> {
    /// `GET`, `POST`.
    pub method: &'a str,
    /// The path without its query: `/v2/events` (`url.template`).
    pub template: &'a str,
    /// `server.address`.
    pub server: &'a str,
    /// `server.port`.
    pub port: u16,
    /// The answer's status, when there was one.
    pub status: Option<u16>,
    /// Why it failed (`error.type`): the status for a 4xx or 5xx, `timeout`,
    /// `connection_refused` or `transport` without an answer; None for a success.
    pub error: Option<&'a str>,
    /// Times this request was sent before (`http.request.resend_count`).
    pub resend: u32,
    /// Whether it left the machine (a refused connection did not, and is not counted as sent).
    pub sent: bool,
    /// A token request.
    pub token: bool,
    /// When it was sent.
    pub start: SystemTime,
    /// From sending to the end of its answer's body (or its failure).
    pub duration: Duration,
}

/// Why a call waits before sending a request again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitKind {
    /// A 429's `Retry-After` (or a backoff without one).
    RateLimited,
    /// The service is unreachable or unavailable (an outage, ridden out within `max_outage`).
    Outage,
    /// A backoff after another retryable failure.
    Backoff,
}

impl WaitKind {
    /// Its name in telemetry.
    pub fn name(self) -> &'static str {
        match self {
            WaitKind::RateLimited => "rate_limited",
            WaitKind::Outage => "outage",
            WaitKind::Backoff => "backoff",
        }
    }
}

/// What a call's telemetry is told, from the tasks that do the call's work (so it must not
/// block: the binding's observer records and turns the records into spans and metrics in the
/// caller's thread).
pub trait Observer: Send + Sync + std::fmt::Debug {
    /// A request ended (answered or failed).
    fn exchange(&self, exchange: &Exchange<'_>);
    /// The call waits `wait` before sending `route` again.
    fn wait(&self, kind: WaitKind, route: &str, wait: Duration);
    /// A new access token was received.
    fn token(&self);
    /// A request is to be sent again after a failure (as `stats()` counts retries: the
    /// call may still end before it is sent).
    fn retry(&self);
    /// A page of `n` events was received from the service.
    fn events(&self, n: u64);
}

/// What happened to a request of the call running now (see [`count`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Counted {
    /// It left the machine.
    Sent,
    /// It was counted as sent, but its connection was refused.
    Unsent,
    /// It is sent again after a failure.
    Retry,
    /// It was answered 429.
    RateLimited,
    /// It waited this many milliseconds after a 429.
    Waited(u64),
    /// It met an outage that began at this instant (the call's began then, if none was under
    /// way).
    OutageMet(Instant),
    /// It was answered: an outage of the call under way is over.
    Answered,
}

impl Scope {
    /// A scope within `parent` (None: a call of its own).
    pub fn new(parent: Option<Arc<Scope>>) -> Arc<Scope> {
        Arc::new(Scope {
            parent,
            ..Scope::default()
        })
    }

    /// A scope within `parent` whose requests tell `observer` and carry `traceparent`.
    pub fn observed(
        parent: Option<Arc<Scope>>,
        observer: Option<Arc<dyn Observer>>,
        traceparent: Option<String>,
    ) -> Arc<Scope> {
        Arc::new(Scope {
            parent,
            observer,
            traceparent,
            ..Scope::default()
        })
    }

    /// A scope within `parent` that also stops once `stop` says so: whoever stops it (or
    /// halts it) drops its work, whose requests meanwhile wait rather than leave.
    pub fn stoppable(parent: Option<Arc<Scope>>, stop: Option<Arc<dyn Stop>>) -> Arc<Scope> {
        Arc::new(Scope {
            parent,
            stop,
            ..Scope::default()
        })
    }

    /// Stops the call (and the calls within it): none of its requests leaves from now on.
    /// Called before its work is dropped, so that no task of it that runs late sends one.
    pub fn halt(&self) {
        self.halted.store(true, Ordering::SeqCst);
    }

    /// The call, or one it runs within, is stopping.
    pub fn stopping(&self) -> bool {
        std::iter::successors(Some(self), |s| s.parent.as_deref()).any(|s| {
            s.halted.load(Ordering::SeqCst) || s.stop.as_ref().is_some_and(|t| t.stopping())
        })
    }

    /// Requests that left the machine during the call (retries and token requests included).
    pub fn requests(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Requests sent again after a failure.
    pub fn retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// 429 answers received.
    pub fn rate_limited(&self) -> u64 {
        self.rate_limited.load(Ordering::Relaxed)
    }

    /// Seconds its requests waited after 429s (concurrent waits each counted).
    pub fn waited(&self) -> Duration {
        Duration::from_millis(self.waited_ms.load(Ordering::Relaxed))
    }

    /// The outages the call met, and their time in all (one under way counted so far).
    pub fn outages(&self) -> (u64, Duration) {
        let since = *self.outage_since.lock().unwrap_or_else(|p| p.into_inner());
        let ended = Duration::from_millis(self.outage_ms.load(Ordering::Relaxed));
        let n = self.outages.load(Ordering::Relaxed);
        match since {
            Some(since) => (n + 1, ended + since.elapsed()),
            None => (n, ended),
        }
    }

    fn outage_met(&self, at: Instant) {
        let mut since = self.outage_since.lock().unwrap_or_else(|p| p.into_inner());
        if since.is_none() {
            *since = Some(at);
            self.in_outage.store(true, Ordering::Relaxed);
        }
    }

    fn answered(&self) {
        // Most answers come with no outage under way: no lock for them.
        if !self.in_outage.load(Ordering::Relaxed) {
            return;
        }
        let mut since = self.outage_since.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(at) = since.take() {
            self.in_outage.store(false, Ordering::Relaxed);
            let ms = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.outage_ms.fetch_add(ms, Ordering::Relaxed);
            self.outages.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn add(&self, what: Counted) {
        let _ = match what {
            Counted::Waited(ms) => self.waited_ms.fetch_add(ms, Ordering::Relaxed),
            Counted::OutageMet(at) => {
                self.outage_met(at);
                0
            }
            Counted::Answered => {
                self.answered();
                0
            }
            Counted::Sent => self.sent.fetch_add(1, Ordering::Relaxed),
            Counted::Unsent => self
                .sent
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .unwrap_or(0),
            Counted::Retry => self.retries.fetch_add(1, Ordering::Relaxed),
            Counted::RateLimited => self.rate_limited.fetch_add(1, Ordering::Relaxed),
        };
    }
}

tokio::task_local! {
    static CURRENT: Arc<Scope>;
}

/// The scope of the task running now, if it runs in one.
pub fn current() -> Option<Arc<Scope>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// Runs `fut` inside `scope` (None: as it is).
pub async fn within<F: Future>(scope: Option<Arc<Scope>>, fut: F) -> F::Output {
    match scope {
        Some(s) => CURRENT.scope(s, fut).await,
        None => fut.await,
    }
}

/// `fut` inside the scope of the task running now: what a task spawns for its call carries
/// the call's scope with it (a task-local value is not inherited by a spawned task).
pub fn inherit<F: Future>(fut: F) -> impl Future<Output = F::Output> {
    within(current(), fut)
}

/// `fut` as a call within the one running now that also stops once `stop` says so (see
/// [`Scope::stoppable`]).
pub async fn stoppable<F: Future>(stop: Arc<dyn Stop>, fut: F) -> F::Output {
    within(Some(Scope::stoppable(current(), Some(stop))), fut).await
}

/// The call running now is stopping (see [`Scope::stopping`]).
pub fn stopping() -> bool {
    CURRENT.try_with(|s| s.stopping()).unwrap_or(false)
}

/// Never returns while the call running now is stopping: a request of it waits here, before it
/// leaves, until whoever stopped the call drops its work. Returns at once otherwise.
pub async fn hold_if_stopping() {
    if stopping() {
        std::future::pending::<()>().await;
    }
}

/// The observer of the innermost call running now that has one.
pub fn observer() -> Option<Arc<dyn Observer>> {
    CURRENT
        .try_with(|s| {
            std::iter::successors(Some(&**s), |s| s.parent.as_deref())
                .find_map(|s| s.observer.clone())
        })
        .ok()
        .flatten()
}

/// The `traceparent` of the innermost call running now that has one.
pub fn traceparent() -> Option<String> {
    CURRENT
        .try_with(|s| {
            std::iter::successors(Some(&**s), |s| s.parent.as_deref())
                .find_map(|s| s.traceparent.clone())
        })
        .ok()
        .flatten()
}

/// Counts `what` in the scope of the task running now, and in each enclosing one.
pub(crate) fn count(what: Counted) {
    let _ = CURRENT.try_with(|s| {
        std::iter::successors(Some(&**s), |s| s.parent.as_deref()).for_each(|s| s.add(what));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_within_another_counts_in_both_and_spawned_work_keeps_its_scope() {
        let outer = Scope::new(None);
        let inner = Scope::new(Some(outer.clone()));
        let add = || count(Counted::Sent);
        within(Some(outer.clone()), async {
            add();
            within(Some(inner.clone()), async {
                add();
                tokio::spawn(inherit(async move { add() })).await.ok();
                // Not inherited: a task spawned as it is counts nowhere.
                tokio::spawn(async move { add() }).await.ok();
            })
            .await;
        })
        .await;
        add(); // outside any scope
        assert_eq!((outer.requests(), inner.requests()), (3, 2));
    }

    #[derive(Debug, Default)]
    struct Flag(AtomicBool);

    impl Stop for Flag {
        fn stopping(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[tokio::test]
    async fn a_call_stops_when_it_or_a_call_it_runs_within_is_halted_or_told_to() {
        let outer = Scope::new(None);
        let flag = Arc::new(Flag::default());
        let inner = Scope::stoppable(Some(outer.clone()), Some(flag.clone()));
        let seen = |s: &Arc<Scope>| within(Some(s.clone()), async { stopping() });
        assert!(!seen(&inner).await && !stopping());
        flag.0.store(true, Ordering::SeqCst);
        assert!(seen(&inner).await && !seen(&outer).await);
        // A task that the call spawned sees it too; a call within a halted one is stopped.
        flag.0.store(false, Ordering::SeqCst);
        outer.halt();
        let spawned = within(Some(inner.clone()), async {
            tokio::spawn(inherit(async { stopping() }))
                .await
                .expect("task")
        });
        assert!(spawned.await && seen(&outer).await);
        let held = within(Some(inner), hold_if_stopping());
        assert!(tokio::time::timeout(Duration::from_millis(20), held)
            .await
            .is_err());
    }

    #[derive(Debug, Default)]
    struct Seen(std::sync::Mutex<Vec<String>>);

    impl Observer for Seen {
        fn exchange(&self, e: &Exchange<'_>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{} {}", e.method, e.template));
        }
        fn wait(&self, kind: WaitKind, route: &str, _: Duration) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{} {route}", kind.name()));
        }
        fn token(&self) {}
        fn retry(&self) {}
        fn events(&self, _: u64) {}
    }

    #[tokio::test]
    async fn the_innermost_observed_call_is_told_and_its_trace_goes_to_spawned_work() {
        let seen = Arc::new(Seen::default());
        let outer = Scope::observed(None, Some(seen.clone()), Some("00-a-b-01".into()));
        // A call within, not observed itself: its requests tell the call around it.
        let inner = Scope::new(Some(outer.clone()));
        let parent = within(Some(inner), async {
            tokio::spawn(inherit(async {
                let o = observer().expect("observed");
                o.wait(WaitKind::RateLimited, "GET /v2/events", Duration::ZERO);
                traceparent()
            }))
            .await
            .expect("task")
        })
        .await;
        assert_eq!(*seen.0.lock().unwrap(), ["rate_limited GET /v2/events"]);
        assert_eq!(parent.as_deref(), Some("00-a-b-01"));
        assert!(observer().is_none() && traceparent().is_none());
    }

    #[tokio::test]
    async fn a_calls_outage_runs_from_its_first_request_that_meets_it_to_the_first_answer() {
        let call = Scope::new(None);
        let ago = |s: u64| {
            Instant::now()
                .checked_sub(Duration::from_secs(s))
                .expect("an instant in the past")
        };
        within(Some(call.clone()), async {
            count(Counted::Answered); // no outage under way: nothing
                                      // Three requests in flight meet it: one outage, from the first of them.
            count(Counted::OutageMet(ago(4)));
            count(Counted::OutageMet(ago(3)));
            count(Counted::OutageMet(ago(2)));
            let (n, so_far) = call.outages();
            assert_eq!(n, 1);
            assert!(so_far >= Duration::from_secs(4), "{so_far:?}");
            count(Counted::Answered);
            count(Counted::Answered);
            count(Counted::Waited(1_500));
            count(Counted::Waited(500));
        })
        .await;
        let (n, took) = call.outages();
        assert_eq!(n, 1);
        assert!((4_000..5_000).contains(&took.as_millis()), "{took:?}");
        assert_eq!(call.waited(), Duration::from_secs(2));
    }
}
