//! The planner's driver: the requests it asks sent (each in a task), the pages that come back
//! handed to it, the cache's files read and written as it says, its notes acted on (warnings,
//! what the client learns of the service, the pages held for a window), the progress said,
//! and a sync's pages carried when it stops. The planner ([`Planner`]) does no I/O; this does
//! all of it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::task::JoinSet;

use super::files::{keep_settled, load, Kept};
use super::page::{fetch_page, page_url, settled_before, Page};
use super::{
    carry, Ask, CacheWrites, CarrySlot, Completed, Count, EventForm, Goal, Learned, Note, Outlook,
    Pace, PageAsk, Planner, ProgressSink, Query, Ready, Sorting, CEILING_PAGE, DEFAULT_IN_FLIGHT,
};
use crate::client::cache::Piece;
use crate::client::error::{Error, Result};
use crate::client::scope;
use crate::client::Client;

/// The planner's driver: it sends the requests the planner asks (each in a task, at most the
/// configured number in flight), hands it the pages that come back, reads the cache's files it
/// names and writes what it says to keep, acts on its notes (warnings, what the client learns
/// of the service, the pages held for a window) and says the progress.
pub(super) struct Driver {
    p: Planner,
    client: Client,
    keep: EventForm,
    tasks: JoinSet<(u64, Ask, Result<Page>)>,
    in_flight_max: usize,
    sink: Option<ProgressSink>,
    /// A sync's: where the pages it read go when it stops early, and its requests launched and
    /// not known to be answered, with the count of their sends (see [`Driver::stop_carrying`]).
    carry: Option<Carry>,
    /// A window was written to the cache (which then keeps to its cap).
    wrote: bool,
}

/// What a sync's driver carries to its next run (see [`Driver::carry_to`]).
struct Carry {
    slot: CarrySlot,
    asked: Vec<(tokio::task::AbortHandle, Arc<AtomicU64>)>,
}

/// A sync's fetch dropped before it ended (Ctrl-C, its consumer gone, an error) carries the
/// pages it read of the windows it did not hand out, for its next run to take instead of
/// asking them again.
impl Drop for Driver {
    fn drop(&mut self) {
        if self.p.running() {
            self.carry_stopped();
        }
    }
}

impl Driver {
    /// The driver of a planner of `query` for `goal`, from what `client` knows: the `pieces`
    /// the cache holds, complete, and the gaps.
    pub(super) fn new(
        client: Client,
        query: &Query,
        keep: EventForm,
        sink: Option<ProgressSink>,
        goal: Goal,
        pieces: Vec<Piece>,
    ) -> Driver {
        let limits = &client.config().limits;
        let in_flight_max = limits.read_concurrency.unwrap_or(DEFAULT_IN_FLIGHT).max(1);
        let p = Planner::new(query, goal, outlook(&client, query), pieces);
        let mut d = Driver {
            p,
            client,
            keep,
            tasks: JoinSet::new(),
            in_flight_max,
            sink,
            carry: None,
            wrote: false,
        };
        d.act();
        d
    }

    /// Makes the fetch a sync's, which carries what it read to its next run when it stops
    /// early: the pages it read of the windows it did not hand out whole go to `slot`.
    pub(super) fn carry_to(&mut self, slot: CarrySlot) {
        if self.p.carrying() {
            self.carry = Some(Carry {
                slot,
                asked: Vec::new(),
            });
        }
    }

    /// Counts in the fetch's progress the requests its quota check sent (its first page is
    /// taken from what the check held).
    pub(super) fn count_checked(&mut self, requests: u64) {
        self.p.count_checked(requests);
    }

    /// Sends what the planner asks and hands it the next answer: the windows it completed (in
    /// time order), or None when every window is done.
    pub(super) async fn step(&mut self) -> Result<Option<Vec<Completed>>> {
        // Windows complete without a request (from the cache) go first.
        let ready = self.ready();
        if !ready.is_empty() {
            return Ok(Some(ready));
        }
        if self.p.is_done() {
            return Ok(None);
        }
        self.launch();
        let Some(joined) = self.tasks.join_next().await else {
            // Nothing in flight and nothing queued, yet windows remain: never return a
            // partial result as if it were whole.
            return Err(self.p.stalled());
        };
        match joined {
            Ok((id, kind, Ok(page))) => {
                let decided = self.p.on_result(id, kind, page);
                self.act();
                decided?;
            }
            Ok((_, _, Err(e))) => return Err(e),
            Err(e) => {
                return Err(Error::Transport(format!(
                    "an events request task failed: {e}"
                )))
            }
        }
        Ok(Some(self.ready()))
    }

    /// The windows the planner hands out, their settled parts written to the cache; a window
    /// the cache holds read from its file, one file at a time (a range the cache holds whole
    /// still streams with bounded memory).
    fn ready(&mut self) -> Vec<Completed> {
        let report = self.p.query.report_id.clone();
        let mut out = Vec::new();
        loop {
            for Ready { window, settled } in self.p.drain_ready() {
                if let Some(settled) = settled {
                    let kept = keep_settled(
                        &self.client,
                        report.as_deref(),
                        self.keep,
                        &settled,
                        &window.events,
                    );
                    match kept {
                        Kept::Written => self.wrote = true,
                        Kept::Failed => self.p.skip_cache_writes(),
                        Kept::Nothing => {}
                    }
                }
                out.push(window);
            }
            let Some(segment) = self.p.wants_file() else {
                break;
            };
            let page = load(&self.client, report.as_deref(), &segment, self.keep);
            let served = self.p.file_read(page);
            self.act();
            if let Some(window) = served {
                out.push(window);
                break;
            }
        }
        out
    }

    /// Acts on the planner's notes.
    fn act(&mut self) {
        for note in self.p.take_notes() {
            match note {
                Note::Opened { id, qs, qe } => {
                    let report = self.p.query.report_id.as_deref();
                    let base = page_url(&self.client, qs, qe, report, 0);
                    let furthest = self.client.held().furthest(base.as_str(), CEILING_PAGE);
                    self.p.held_to(id, furthest);
                }
                Note::Warn(text) => self.client.http().warn(text),
                Note::DropCarried => self.client.held().drop_carried(),
                Note::Saved(requests) => self.client.http().stats.saved(requests),
                Note::Learned(learned) => self.learn(learned),
            }
        }
    }

    /// Keeps what a completed window told of the service, for the client's later fetches.
    fn learn(&self, learned: Learned) {
        {
            let mut shape = self.client.shape();
            shape.unpeekable |= learned.unpeekable;
            shape.unsorted |= learned.unsorted;
            if let Some(d) = learned.density {
                let report = self.p.query.report_id.clone();
                let densest = shape.density.entry(report).or_default();
                *densest = densest.max(d);
            }
        }
        self.client.keep_shape();
    }

    /// Sends the requests the planner asks, up to the configured number in flight, each in a
    /// task.
    fn launch(&mut self) {
        while self.tasks.len() < self.in_flight_max {
            let Some(asked) = self.p.next_ask() else {
                break;
            };
            let client = self.client.clone();
            let report = self.p.query.report_id.clone();
            let keep = self.keep;
            let hold = self.p.reuse();
            let sent = Arc::new(AtomicU64::new(0));
            let told = self.carry.is_some().then(|| sent.clone());
            let PageAsk { id, kind, qs, qe } = asked;
            let task = self.tasks.spawn(scope::inherit(async move {
                let report = report.as_deref();
                let offset = kind.offset();
                let result = fetch_page(&client, qs, qe, report, offset, keep, hold, told).await;
                (id, kind, result)
            }));
            if let Some(carry) = &mut self.carry {
                // A sync's: when it stops, what has not been sent is not waited for.
                carry.asked.retain(|(task, _)| !task.is_finished());
                carry.asked.push((task, sent));
            }
        }
    }

    /// Stopped (Ctrl-C): asks nothing more (a request waiting for its turn under the limits
    /// is dropped), waits at most `grace` for the answers of the requests sent (each is paid
    /// for already), and carries every page read.
    pub(super) async fn stop_carrying(&mut self, grace: std::time::Duration) {
        if let Some(carry) = &mut self.carry {
            for (task, sent) in std::mem::take(&mut carry.asked) {
                if sent.load(Ordering::SeqCst) == 0 {
                    task.abort();
                }
            }
        }
        let deadline = tokio::time::Instant::now() + grace;
        while !self.tasks.is_empty() {
            match tokio::time::timeout_at(deadline, self.tasks.join_next()).await {
                Ok(Some(Ok((id, kind, Ok(page))))) => self.p.late(id, kind, page),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
        self.tasks.abort_all();
        self.p.end();
        self.carry_stopped();
    }

    /// Every window is done: the last progress is said, and a cache written to is trimmed to
    /// its cap.
    pub(super) fn finish(&mut self) {
        self.p.end();
        self.report();
        if self.wrote {
            if let Some(cache) = self.client.cache() {
                cache.evict();
            }
        }
    }

    /// The day's quota stopped the fetch: what the pages already in show to be complete is
    /// kept, not asked again: carried to the next run when the fetch is a sync's (see
    /// [`Driver::carry_stopped`]), else the sorted prefix they show, answered here.
    pub(super) fn stop_at_quota(&mut self) -> Option<Completed> {
        self.p.end();
        if self.carry_stopped() {
            None
        } else {
            self.p.sorted_prefix()
        }
    }

    /// A sync's, stopped: the pages it read of the windows it did not hand out (see
    /// [`Planner::carried`]), and the carried pages that no window took yet, go to its carry
    /// slot; false when none does (or it is no sync's).
    fn carry_stopped(&mut self) -> bool {
        let Some(carry) = self.carry.take() else {
            return false;
        };
        let mut pages = self.p.carried();
        pages.extend(carry::left(&self.client, self.p.query.report_id.as_deref()));
        let carried = !pages.is_empty();
        if let Ok(mut slot) = carry.slot.lock() {
            slot.extend(pages);
        }
        carried
    }

    /// Hands the progress, with what it expects, to the sink, if any.
    pub(super) fn report(&mut self) {
        if let Some(s) = &self.sink {
            let now = std::time::Instant::now();
            s(self.p.progress_at(now, self.client.read_rate()));
        }
    }

    /// Runs a count to its end (see [`super::count`]), its progress said after each answer.
    pub(super) async fn count(&mut self) -> Result<Count> {
        while self.step().await?.is_some() {
            if let Some(s) = &self.sink {
                s(self.p.progress);
            }
        }
        Ok(self.p.count())
    }

    /// A count that sends at most `cap` requests (see `count_within`): the count, when it ends
    /// within them; else what the planner makes of what it counted; None when nothing tells.
    pub(super) async fn count_within(&mut self, cap: u64) -> Result<Option<Count>> {
        let before = event_requests(&self.client);
        let most = self.in_flight_max.max(1);
        loop {
            // A request in flight may not be counted yet: it is taken as sent.
            let sent = sent_since(&self.client, before) + self.tasks.len() as u64;
            let room = cap.saturating_sub(sent);
            if room == 0 && self.tasks.is_empty() {
                break;
            }
            self.in_flight_max = most.min(self.tasks.len() + room as usize);
            if self.step().await?.is_none() {
                return Ok(Some(self.p.count()));
            }
        }
        Ok(self.p.estimate())
    }
}

/// What `client`'s settings and earlier fetches tell a planner of `query`.
fn outlook(client: &Client, query: &Query) -> Outlook {
    let (unsorted, densest) = {
        let shape = client.shape();
        (shape.unsorted, shape.density.get(&query.report_id).copied())
    };
    // Under a daily quota requests are what a fetch costs: none is spent on speculation.
    let pace = match client.config().limits.daily_requests {
        Some(_) => Pace::Frugal,
        None => Pace::Ahead,
    };
    Outlook {
        pace,
        sorting: match unsorted {
            true => Sorting::Unsorted,
            false => Sorting::Sorted,
        },
        densest,
        cutoff: settled_before(client),
        cache_writes: match client.cache() {
            Some(_) => CacheWrites::Keep,
            None => CacheWrites::Skip,
        },
        now: std::time::Instant::now(),
    }
}

/// The events requests `client` has sent.
pub(super) fn event_requests(client: &Client) -> u64 {
    client
        .stats()
        .requests
        .get("GET /v2/events")
        .copied()
        .unwrap_or(0)
}

/// Events requests `client` sent since it had sent `before`.
pub(super) fn sent_since(client: &Client, before: u64) -> u64 {
    event_requests(client).saturating_sub(before)
}
