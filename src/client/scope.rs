//! The call a request belongs to: a caller runs each call's work inside a [`Scope`], and every
//! request, retry and 429 of that work is counted in it as well as in the client's totals, so
//! that concurrent calls on one client each know what they spent.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What one call (and the calls within it) sent; a call inside another counts in both.
#[derive(Debug, Default)]
pub struct Scope {
    sent: AtomicU64,
    retries: AtomicU64,
    rate_limited: AtomicU64,
    /// The call this one runs within, if any.
    parent: Option<Arc<Scope>>,
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
}

impl Scope {
    /// A scope within `parent` (None: a call of its own).
    pub fn new(parent: Option<Arc<Scope>>) -> Arc<Scope> {
        Arc::new(Scope {
            parent,
            ..Scope::default()
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

    fn add(&self, what: Counted) {
        let _ = match what {
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
}
