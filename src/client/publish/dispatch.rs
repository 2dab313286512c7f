//! The dispatcher: records batched by upsert key so that two of one key are never in flight
//! together, batches posted at the configured rate and concurrency.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::prepare::{prepare, Prepared};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::post::post_range;
use super::report::{FailureKind, PublishProgress, PublishProgressSink, Report};
use super::{
    Batch, Input, Options, PublishState, RecordOutcome, TaskEnd, CHUNK, DRAIN, GIVE_UP_AFTER,
    MAX_BODY, ROUNDS,
};
use crate::client::error::Error;
use crate::client::http::Arrays;
use crate::client::scope;

/// Hashes of upsert keys are already mixed: they are their own hash.
#[derive(Default)]
pub(super) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

pub(super) type Keyed = BuildHasherDefault<KeyHasher>;

/// The state of one publish, owned by the dispatcher loop.
pub(super) struct Dispatcher {
    pub(super) shared: Arc<PublishState>,
    pub(super) options: Options,
    pub(super) in_flight_max: usize,
    /// Records taken from the source but not yet in a batch, each with a key not held by any
    /// other record in `ready` or in flight.
    pub(super) ready: VecDeque<Prepared>,
    /// Records waiting for an earlier record with the same key to finish.
    pub(super) blocked: HashMap<u64, VecDeque<Prepared>, Keyed>,
    pub(super) blocked_len: usize,
    /// Keys of the records in `ready` or in flight.
    pub(super) held: HashSet<u64, Keyed>,
    /// Batches to post again (a later round).
    pub(super) again: VecDeque<Batch>,
    pub(super) tasks: JoinSet<(u64, TaskEnd)>,
    pub(super) batches: HashMap<u64, Arc<Batch>>,
    pub(super) next_batch: u64,
    pub(super) report: Report,
    pub(super) failed_in_a_row: u32,
    /// The last error that ended records after every retry.
    pub(super) last_error: Option<Error>,
    pub(super) progress: Option<PublishProgressSink>,
    pub(super) last_progress: Instant,
}

impl Dispatcher {
    pub(super) fn take(&mut self, input: Input) {
        self.report.total += 1;
        match prepare(input, self.options.validate) {
            Err(f) => self.report.failures.push(*f),
            Ok(rec) => self.admit(rec),
        }
    }

    /// Queues a record, behind any earlier record with the same key.
    pub(super) fn admit(&mut self, rec: Prepared) {
        if rec.key != 0 && !self.held.insert(rec.key) {
            self.blocked_len += 1;
            self.blocked.entry(rec.key).or_default().push_back(rec);
            return;
        }
        self.ready.push_back(rec);
    }

    /// A record of `key` is done: the next one waiting for it may go.
    pub(super) fn release(&mut self, key: u64) {
        if key == 0 {
            return;
        }
        let next = match self.blocked.get_mut(&key) {
            Some(queue) => {
                let next = queue.pop_front();
                if queue.is_empty() {
                    self.blocked.remove(&key);
                }
                next
            }
            None => None,
        };
        match next {
            Some(rec) => {
                self.blocked_len -= 1;
                self.ready.push_back(rec);
            }
            None => {
                self.held.remove(&key);
            }
        }
    }

    /// Batches that may be in flight now (see [`Judge::room`]).
    pub(super) fn room(&self) -> usize {
        self.shared.judge().room(self.in_flight_max)
    }

    pub(super) fn buffered(&self) -> usize {
        self.ready.len() + self.blocked_len
    }

    pub(super) fn buffer_cap(&self) -> usize {
        (self.in_flight_max * self.options.batch_size).max(4 * CHUNK)
    }

    pub(super) fn spawn(&mut self, batch: Batch) {
        let id = self.next_batch;
        self.next_batch += 1;
        let batch = Arc::new(batch);
        self.batches.insert(id, batch.clone());
        let shared = self.shared.clone();
        let as_array = self.batch_size() > 1;
        self.tasks.spawn(scope::inherit(async move {
            let idx: Vec<usize> = (0..batch.recs.len()).collect();
            let end = post_range(&shared, &batch, idx, as_array, None).await;
            (id, end)
        }));
    }

    /// Records per body now: one once the service refused arrays ("auto").
    pub(super) fn batch_size(&self) -> usize {
        if self.options.fallback && self.shared.client.http().webhook.arrays() == Arrays::Refused {
            1
        } else {
            self.options.batch_size
        }
    }

    /// Starts batches while there is room in flight and enough records (or the source ended).
    pub(super) fn dispatch(&mut self, flush: bool) {
        while self.tasks.len() < self.room() {
            if let Some(batch) = self.again.pop_front() {
                self.spawn(batch);
                continue;
            }
            let size = self.batch_size();
            if self.ready.is_empty() || (!flush && self.ready.len() < size) {
                return;
            }
            let mut recs = Vec::with_capacity(size.min(self.ready.len()));
            let mut bytes = 2;
            while recs.len() < size {
                let Some(next) = self.ready.front() else {
                    break;
                };
                if !recs.is_empty() && bytes + next.text.len() + 1 > MAX_BODY {
                    break;
                }
                bytes += next.text.len() + 1;
                if let Some(rec) = self.ready.pop_front() {
                    recs.push(rec);
                }
            }
            self.spawn(Batch::new(recs, 0));
        }
    }

    /// Accounts for a finished batch.
    pub(super) fn finish(&mut self, id: u64, end: TaskEnd) {
        let Some(batch) = self.batches.remove(&id) else {
            return;
        };
        if let Some(e) = end.fatal {
            self.report.error.get_or_insert(e);
        }
        if let Some(e) = end.last {
            self.last_error = Some(e);
        }
        let outcomes = batch.take_outcomes();
        let accepted = outcomes
            .iter()
            .filter(|o| matches!(o, Some(RecordOutcome::Accepted)))
            .count();
        if accepted > 0 {
            self.failed_in_a_row = 0;
        } else if end.retryable || end.unconfirmed {
            self.failed_in_a_row += 1;
        }
        if end.retryable && self.report.error.is_none() && self.outage_spent() {
            // The service has not answered for `max_outage`: the publish's one budget is
            // spent (a later round, another batch would only wait again), so it stops.
            self.report.error = Some(self.last_error.clone().unwrap_or_else(|| {
                Error::Transport("the service was unreachable for `max_outage`".to_owned())
            }));
        }
        let posted = batch.take_posted();
        let retry_round = end.retryable
            && batch.round < ROUNDS
            && self.report.error.is_none()
            && self.failed_in_a_row < GIVE_UP_AFTER;
        let Ok(batch) = Arc::try_unwrap(batch) else {
            // The task has ended, so nobody else holds the batch; never reached.
            return;
        };
        let round = batch.round;
        let waited = batch.waited.load(Ordering::Relaxed);
        let mut again = Vec::new();
        for ((mut rec, outcome), p) in batch.recs.into_iter().zip(outcomes).zip(posted) {
            self.count_sent(&mut rec, p);
            match outcome {
                Some(RecordOutcome::Accepted) => {
                    self.report.accepted += 1;
                    self.release(rec.key);
                }
                Some(RecordOutcome::Failed {
                    kind: FailureKind::Failed,
                    ..
                }) if retry_round => {
                    // Keeps its key held: nothing newer with that key may overtake it.
                    again.push(rec);
                }
                None if end.singly => {
                    // Arrays refused: again, one record per body.
                    self.again.push_back(Batch::again(vec![rec], round, waited));
                }
                outcome => {
                    let key = rec.key;
                    let outcome = match outcome {
                        Some(o) => unanswered(o, rec.posted),
                        None => RecordOutcome::failed(
                            FailureKind::NotSent,
                            None,
                            "not sent: publishing stopped".to_owned(),
                        ),
                    };
                    self.fail(rec, outcome);
                    self.release(key);
                }
            }
        }
        if !again.is_empty() {
            self.again.push_back(Batch::again(again, round + 1, waited));
        }
        if self.failed_in_a_row >= GIVE_UP_AFTER && self.report.error.is_none() {
            // Of the kind of the last failure (a 429 stays a rate limit, a 5xx a server error).
            let why = format!(
                "publishing stopped after {GIVE_UP_AFTER} batches in a row failed after every retry"
            );
            self.report.error = Some(match self.last_error.take() {
                Some(Error::Status {
                    status,
                    body,
                    url,
                    message,
                }) => Error::Status {
                    status,
                    body,
                    url,
                    message: format!("{why}: {message}"),
                },
                Some(Error::Timeout(m)) => Error::Timeout(format!("{why}: {m}")),
                Some(e) => Error::Transport(format!("{why}: {e}")),
                None => Error::Transport(why),
            });
        }
    }

    /// Whether the publish has met no answer for `max_outage`.
    fn outage_spent(&self) -> bool {
        let budget = self.shared.client.config().max_outage;
        self.shared.outage.spent(budget)
    }

    /// Counts a record in `sent` the first time it is known to have left the machine.
    pub(super) fn count_sent(&mut self, rec: &mut Prepared, posted: bool) {
        if posted && !rec.posted {
            self.report.sent += 1;
        }
        rec.posted |= posted;
    }

    pub(super) fn fail(&mut self, rec: Prepared, outcome: RecordOutcome) {
        match outcome {
            RecordOutcome::Accepted => self.report.accepted += 1,
            RecordOutcome::Failed {
                kind,
                status,
                message,
                problems,
            } => {
                let mut f = rec.failure(kind, status, message);
                f.problems = problems;
                self.report.failures.push(f);
            }
        }
    }

    /// Reports every record not yet accepted (in flight, waiting, or still in the channel):
    /// those never sent as failures of `kind`, with `why`. Stopped by an error, the requests in
    /// flight are given [`DRAIN`] to bring their answers, which count as they say; cancelled,
    /// they are dropped at once. A request that left and whose answer was not read leaves its
    /// records unconfirmed, cancelled or not: the service may have stored them, so they are
    /// never reported as interrupted or not sent.
    pub(super) async fn stop(
        &mut self,
        rx: &mut mpsc::Receiver<Vec<Input>>,
        kind: FailureKind,
        why: &str,
    ) {
        if kind != FailureKind::Interrupted {
            let deadline = tokio::time::Instant::now() + DRAIN;
            while !self.tasks.is_empty() {
                match tokio::time::timeout_at(deadline, self.tasks.join_next()).await {
                    Ok(Some(Ok((id, end)))) => self.finish(id, end),
                    Ok(Some(Err(_))) => {}
                    Ok(None) | Err(_) => break,
                }
            }
        }
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        let ids: Vec<u64> = self.batches.keys().copied().collect();
        for id in ids {
            if let Some(batch) = self.batches.remove(&id) {
                let unanswered = batch.unanswered();
                let posted = batch.take_posted();
                let outcomes = batch.take_outcomes();
                if let Ok(batch) = Arc::try_unwrap(batch) {
                    let recs = batch.recs.into_iter().zip(outcomes).zip(posted);
                    for (i, ((mut rec, outcome), p)) in recs.enumerate() {
                        self.count_sent(&mut rec, p);
                        let outcome = match outcome {
                            Some(o) => o,
                            None if unanswered.contains(&i) => {
                                // Its request left and its answer was not awaited: the service
                                // may have stored it, whatever stopped publishing.
                                let m = if kind == FailureKind::Interrupted {
                                    "sent, but publishing was interrupted while its request was in flight (it may have been stored)".to_owned()
                                } else {
                                    format!("sent, but no answer came before publishing stopped (it may have been stored): {why}")
                                };
                                RecordOutcome::failed(FailureKind::Unconfirmed, None, m)
                            }
                            None => RecordOutcome::failed(kind, None, why.to_owned()),
                        };
                        self.fail(rec, outcome);
                    }
                }
            }
        }
        let mut waiting: Vec<Prepared> = Vec::new();
        for batch in std::mem::take(&mut self.again) {
            waiting.extend(batch.recs);
        }
        waiting.extend(std::mem::take(&mut self.ready));
        for (_, queue) in std::mem::take(&mut self.blocked) {
            waiting.extend(queue);
        }
        self.blocked_len = 0;
        self.held.clear();
        for rec in waiting {
            let outcome = match kind {
                // Posted before and waiting for a later round: it may have been stored.
                FailureKind::NotSent if rec.posted => RecordOutcome::failed(
                    FailureKind::Unconfirmed,
                    None,
                    format!("sent before without an answer that accepted it (it may have been stored), then {why}"),
                ),
                _ => RecordOutcome::failed(kind, None, why.to_owned()),
            };
            self.fail(rec, outcome);
        }
        rx.close();
        while let Some(chunk) = rx.recv().await {
            self.report.unsent(chunk, kind, why);
        }
    }

    pub(super) fn progress(&mut self, force: bool) {
        let Some(sink) = &self.progress else { return };
        if !force && self.last_progress.elapsed() < Duration::from_millis(50) {
            return;
        }
        self.last_progress = Instant::now();
        sink(PublishProgress {
            read: self.report.total,
            accepted: self.report.accepted,
            rejected: self.report.failures.len() as u64,
            requests: self.shared.tally.sent.load(Ordering::Relaxed),
        });
    }
}

/// The outcome of a record that failed after every retry, told as what it is when the last
/// failure was no answer at all (the service unreachable, the connection cut or timed out):
/// not sent when none of its requests ever left the machine, unconfirmed when one did (it may
/// have been stored).
fn unanswered(outcome: RecordOutcome, posted: bool) -> RecordOutcome {
    match outcome {
        RecordOutcome::Failed {
            kind: FailureKind::Failed,
            status: None,
            message,
            problems,
        } => {
            let (kind, message) = if posted {
                let m = format!("sent, but no answer came (it may have been stored): {message}");
                (FailureKind::Unconfirmed, m)
            } else {
                (FailureKind::NotSent, format!("not sent: {message}"))
            };
            RecordOutcome::Failed {
                kind,
                status: None,
                message,
                problems,
            }
        }
        other => other,
    }
}
