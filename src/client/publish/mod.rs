//! Bulk publishing to the webhook: records from a source that is pulled as it goes (bounded
//! memory), validated and serialized here, posted one per body or in arrays of up to 100, many
//! requests in flight within the publish limits, and every record accounted for.
//!
//! The pipeline:
//! - a producer (a binding pulling a Python iterator, [`jsonl_source`], [`values_source`], or any
//!   task) sends chunks of [`Input`] into a bounded channel, so it waits when publishing lags;
//! - the dispatcher validates each record (when asked) and serializes it, rejecting locally what
//!   cannot be accepted (errors under its model, not JSON, larger than a body);
//! - records are grouped into batches (`batch_size` records, at most 10 MB a body) and each batch
//!   is posted by its own task through the shared [`Http`](super::http::Http) layer, which
//!   applies the publish limits and retries network errors, 429 (honouring `Retry-After`) and 5xx;
//! - a batch refused as a whole (400, 413, 422) is split in two, recursively, so that the bad
//!   records are isolated and the rest sent again (safe: the service upserts), unless the
//!   refusal is systematic: then one request judges each later array, and a run of arrays
//!   refused whole stops publishing ([`judge`]);
//! - a batch that still fails in a retryable way after every retry of the HTTP layer is posted
//!   again later, twice, before its records are reported;
//! - records that share an upsert key are never in flight together, so the latest record of the
//!   source is the one the service keeps.
//!
//! [`Client::publish`] returns a [`Report`] in which every record taken from the source is
//! either accepted or a [`Failure`], also when it is cancelled (`cancel`) or stops on an error
//! that concerns every record (credentials refused).
//!
//! By concern: `source` reads the records, `prepare` checks each and finds its upsert key,
//! `dispatch` batches them and posts at the configured rate, `post` posts a range of a batch and
//! reads its answer (`answer` what the answer proves, `judge` what the webhook's refusals that
//! name no record teach), `report` is what the caller gets; this file holds a publish's shared state and
//! [`Client::publish`].

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::Method;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use url::Url;

use super::config::Region;
use super::error::{Error, Result, Wording};
use super::http::{Call, Class, OutageClock};
use super::stats::Tally;
use super::Client;
use crate::webhook::Problem;
use judge::Judge;

mod answer;
pub mod columns;
mod dispatch;
pub mod json;
mod judge;
mod post;
mod prepare;
mod report;
mod source;

use dispatch::Dispatcher;
use post::normalized;
pub use prepare::check_text;
use prepare::Prepared;
pub use report::{Failure, FailureKind, PublishProgress, PublishProgressSink, Report};
pub use source::{jsonl_rest, jsonl_source, values_source, JsonlRest};

/// Most records in one webhook array (the provider's limit).
pub const MAX_BATCH: usize = 100;
/// Largest body the client posts: the provider's 10 MB, counted in decimal to keep a margin.
pub const MAX_BODY: usize = 10_000_000;
/// Batches in flight at most, whatever the configured concurrency, and with none configured:
/// a batch waiting out a 429's `Retry-After` holds its place, so sporadic 429s would otherwise
/// stall an unlimited client on a few dozen places.
const MAX_IN_FLIGHT: usize = 256;
/// Records per chunk that the sources below send into the channel.
pub const CHUNK: usize = 256;
/// Chunks that may wait in the channel (with [`CHUNK`], about 4,000 records).
pub const CHANNEL_CHUNKS: usize = 16;
/// Times a batch that failed in a retryable way after every retry is posted again.
const ROUNDS: u32 = 2;
/// Batches that failed in a row (none accepted in between) before publishing stops.
const GIVE_UP_AFTER: u32 = 8;
/// A partial batch waits this long for more records when the source is slow: an array that
/// goes out half full costs a request of the day's quota as a full one does.
const LINGER: Duration = Duration::from_millis(500);
/// Stopped by an error, the requests in flight have this long to bring their answers.
const DRAIN: Duration = Duration::from_secs(10);

/// One record from the source, with its position (0-based, in the order of the source).
#[derive(Debug)]
pub enum Input {
    /// A record as JSON text, checked here (JSON, its model when validating, its key).
    Text {
        /// Position in the source.
        index: u64,
        /// Line number in a file (1-based), when the source is one.
        line: Option<u64>,
        /// The JSON text.
        text: String,
    },
    /// A record as a JSON value (Rust callers), serialized and checked here.
    Value {
        /// Position in the source.
        index: u64,
        /// The record.
        value: Value,
    },
    /// A record its producer wrote as JSON and checked (its model, when validating; with
    /// [`prepare::check_text`] or the fast check of [`crate::webhook::fast`]).
    Ready {
        /// Position in the source.
        index: u64,
        /// Line number in a file (1-based), when the source is one.
        line: Option<u64>,
        /// Its upsert key, hashed as [`crate::webhook::fast`] does; 0 when it has none.
        key: u64,
        /// Its JSON text (often a view into a buffer its producer shares among records).
        text: Bytes,
    },
    /// A record its producer refused: not JSON, or errors under its model.
    Rejected {
        /// Position in the source.
        index: u64,
        /// Line number in a file (1-based), when the source is one.
        line: Option<u64>,
        /// Why (errors, and the record's warnings).
        problems: Vec<Problem>,
        /// The record as close to JSON as the producer could make it, for `write_failures`.
        text: Option<String>,
    },
}

/// How to publish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Where to post; None: the client's region.
    pub region: Option<Region>,
    /// Records per body: 1 posts one object per body, 2 to 100 post arrays.
    pub batch_size: usize,
    /// Arrays of `batch_size` until the service refuses an array body as such (not a record in
    /// it): then one object per request, for the rest of the client's life ("auto").
    pub fallback: bool,
    /// Validate each record under its standard model and keep back those with errors.
    pub validate: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            region: None,
            batch_size: MAX_BATCH,
            fallback: true,
            validate: true,
        }
    }
}

impl Options {
    /// The options a caller asked for, checked: `region` by name (None: the client's),
    /// `batch_size` None for "auto" (arrays of 100, one record per request once the service
    /// refuses arrays) or from 1 to 100, `validate`. The one place their values are checked
    /// (the Python layer checks their types).
    pub fn new(region: Option<&str>, batch_size: Option<i64>, validate: bool) -> Result<Options> {
        let options = Options {
            region: region.map(Region::parse).transpose()?,
            batch_size: match batch_size {
                None => MAX_BATCH,
                Some(n) => usize::try_from(n).map_err(|_| batch_size_error(n))?,
            },
            fallback: batch_size.is_none(),
            validate,
        };
        options.check()?;
        Ok(options)
    }

    /// Refuses a batch size outside 1..=100.
    pub fn check(&self) -> Result<()> {
        if !(1..=MAX_BATCH).contains(&self.batch_size) {
            return Err(batch_size_error(self.batch_size));
        }
        Ok(())
    }
}

/// The error of a batch size outside 1..=100 (`n` as the caller wrote it).
pub fn batch_size_error(n: impl std::fmt::Display) -> Error {
    Error::argument(Wording::new().arg("batch_size").text(format!(
        " must be \"auto\" or from 1 to {MAX_BATCH}, got `{n}`"
    )))
}

/// The outcome of one record of a batch.
#[derive(Debug, Clone)]
enum RecordOutcome {
    Accepted,
    Failed {
        kind: FailureKind,
        status: Option<u16>,
        message: String,
        problems: Vec<Problem>,
    },
}

impl RecordOutcome {
    fn failed(kind: FailureKind, status: Option<u16>, message: String) -> RecordOutcome {
        RecordOutcome::Failed {
            kind,
            status,
            message,
            problems: Vec::new(),
        }
    }
}

/// The request of a batch in flight: the records it holds, and how many times it left the
/// machine (retries included).
type Posting = (Vec<usize>, Arc<AtomicU64>);

/// Records posted together, with their outcomes as they become known (so that a cancelled
/// publish still knows which halves of a split batch were accepted).
#[derive(Debug)]
struct Batch {
    recs: Vec<Prepared>,
    outcomes: Mutex<Vec<Option<RecordOutcome>>>,
    /// Records that left the machine at least once.
    posted: Mutex<Vec<bool>>,
    /// The request in flight (a batch holds at most one at a time).
    posting: Mutex<Option<Posting>>,
    /// Posted with this many rounds already used.
    round: u32,
    /// The milliseconds its records waited after 429s, over every round: within `max_wait`.
    waited: Arc<AtomicU64>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Batch {
    fn new(recs: Vec<Prepared>, round: u32) -> Batch {
        let n = recs.len();
        Batch {
            recs,
            outcomes: Mutex::new(vec![None; n]),
            posted: Mutex::new(vec![false; n]),
            posting: Mutex::new(None),
            round,
            waited: Arc::default(),
        }
    }

    /// Records of an earlier batch posted again in round `round`, having waited `waited` ms.
    fn again(recs: Vec<Prepared>, round: u32, waited: u64) -> Batch {
        let batch = Batch::new(recs, round);
        batch.waited.store(waited, Ordering::Relaxed);
        batch
    }

    fn set(&self, idx: &[usize], outcome: &RecordOutcome) {
        let mut o = locked(&self.outcomes);
        for &i in idx {
            o[i] = Some(outcome.clone());
        }
    }

    fn accepted(&self, i: usize) -> bool {
        matches!(
            locked(&self.outcomes).get(i),
            Some(Some(RecordOutcome::Accepted))
        )
    }

    /// Whether record `i` was refused alone with a message that ends with `words`
    /// (normalized).
    fn refused_with(&self, i: usize, words: &str) -> bool {
        matches!(
            locked(&self.outcomes).get(i),
            Some(Some(RecordOutcome::Failed { kind: FailureKind::Refused, message, .. }))
                if normalized(message).ends_with(words)
        )
    }

    /// A request of `idx` is about to be sent: its counter of departures.
    fn begin(&self, idx: &[usize]) -> Arc<AtomicU64> {
        let sent = Arc::new(AtomicU64::new(0));
        *locked(&self.posting) = Some((idx.to_vec(), sent.clone()));
        sent
    }

    /// The request of `begin` has its answer (or none will come).
    fn end(&self) {
        if let Some((idx, sent)) = locked(&self.posting).take() {
            if sent.load(Ordering::Relaxed) > 0 {
                let mut p = locked(&self.posted);
                for i in idx {
                    p[i] = true;
                }
            }
        }
    }

    /// The records of a request that left and whose answer never came (the task was
    /// stopped): they may have been stored.
    fn unanswered(&self) -> Vec<usize> {
        match locked(&self.posting).take() {
            Some((idx, sent)) if sent.load(Ordering::Relaxed) > 0 => {
                let mut p = locked(&self.posted);
                for &i in &idx {
                    p[i] = true;
                }
                idx
            }
            _ => Vec::new(),
        }
    }

    fn take_outcomes(&self) -> Vec<Option<RecordOutcome>> {
        std::mem::take(&mut *locked(&self.outcomes))
    }

    fn take_posted(&self) -> Vec<bool> {
        std::mem::take(&mut *locked(&self.posted))
    }
}

/// What a batch task reports besides the outcomes.
#[derive(Debug, Default)]
struct TaskEnd {
    /// A retryable error ended some records: they may be posted again in a later round.
    retryable: bool,
    /// Some records got no proof either way (an answer that is not the API's).
    unconfirmed: bool,
    /// An error that concerns every record: publishing stops.
    fatal: Option<Error>,
    /// The last error that ended records of the batch after every retry.
    last: Option<Error>,
    /// The service refuses arrays: the batch's records without an outcome go again, one per
    /// request.
    singly: bool,
}

/// PublishState by the dispatcher and its batch tasks.
struct PublishState {
    client: Client,
    url: Url,
    route: &'static str,
    tally: Arc<Tally>,
    /// `batch_size="auto"`: fall back to one record per request if arrays are refused.
    fallback: bool,
    /// What the publish has learnt of refusals that name no record.
    judge: Mutex<Judge>,
    /// The outage the publish is in, if any: one `max_outage` for all its posts (and the token
    /// requests made for them), after which it stops.
    outage: Arc<OutageClock>,
}

impl PublishState {
    fn judge(&self) -> std::sync::MutexGuard<'_, Judge> {
        locked(&self.judge)
    }

    /// The webhook request of `body` for records of `batch`, counted in the publish's tally
    /// (and in `sent`).
    fn call(&self, batch: &Batch, body: Bytes, sent: Option<Arc<AtomicU64>>) -> Call {
        Call {
            method: Method::POST,
            url: self.url.clone(),
            route: self.route,
            body: Some(body),
            class: Class::Publish,
            tally: Some(self.tally.clone()),
            sent,
            waited: Some(batch.waited.clone()),
            outage: Some(self.outage.clone()),
        }
    }
}

impl Client {
    /// Publishes the records that `source` yields (in chunks) to the webhook.
    ///
    /// Returns when the source is closed and every record has an outcome, when `cancel`
    /// becomes true (records not yet accepted are then failures, `interrupted` is set), or
    /// when an error concerns every record (`error` is set; records not sent are failures).
    /// Only a bad `options` or region is an `Err`: nothing was read then.
    ///
    /// ```no_run
    /// # async fn demo(client: surveillance::client::Client) -> surveillance::client::Result<()> {
    /// use surveillance::client::publish::{values_source, Options};
    /// let records = vec![serde_json::json!({"dataType": "other"})];
    /// let (rx, _feeder) = values_source(records);
    /// let (_stop, cancel) = tokio::sync::watch::channel(false);
    /// let report = client.publish(rx, Options::default(), None, cancel).await?;
    /// assert_eq!(report.total, 1);
    /// # Ok(()) }
    /// ```
    pub async fn publish(
        &self,
        mut source: mpsc::Receiver<Vec<Input>>,
        options: Options,
        progress: Option<PublishProgressSink>,
        mut cancel: watch::Receiver<bool>,
    ) -> Result<Report> {
        options.check()?;
        let region = options.region.unwrap_or(self.config().region);
        let url = self.config().webhook_url(region)?;
        let route = match region {
            Region::Us => "POST /v2/webhook",
            Region::Eu => "POST /v2/webhook (eu)",
        };
        let started = Instant::now();
        let in_flight_max = self
            .config()
            .limits
            .publish_concurrency
            .unwrap_or(MAX_IN_FLIGHT)
            .clamp(1, MAX_IN_FLIGHT);
        let mut d = Dispatcher {
            shared: Arc::new(PublishState {
                client: self.clone(),
                url,
                route,
                tally: Arc::default(),
                fallback: options.fallback,
                judge: Mutex::new(Judge::default()),
                outage: Arc::default(),
            }),
            options,
            in_flight_max,
            ready: VecDeque::new(),
            blocked: HashMap::default(),
            blocked_len: 0,
            held: HashSet::default(),
            again: VecDeque::new(),
            tasks: JoinSet::new(),
            batches: HashMap::new(),
            next_batch: 0,
            report: Report::default(),
            failed_in_a_row: 0,
            last_error: None,
            progress,
            last_progress: Instant::now(),
        };
        let mut source_done = false;
        let mut cancelled = *cancel.borrow();
        while !cancelled && d.report.error.is_none() {
            d.dispatch(source_done);
            if source_done && d.tasks.is_empty() && d.ready.is_empty() && d.again.is_empty() {
                // Blocked records always wait for one in flight, so none is left here.
                break;
            }
            let room = !source_done && d.buffered() < d.buffer_cap();
            let lingering = !source_done
                && !d.ready.is_empty()
                && d.tasks.len() < d.room()
                && d.ready.len() < d.options.batch_size;
            tokio::select! {
                biased;
                changed = cancel.changed() => {
                    // A dropped sender means nobody can cancel any more, not a cancel.
                    cancelled = changed.is_ok() && *cancel.borrow();
                    if changed.is_err() {
                        cancel = watch::channel(false).1;
                    }
                }
                Some(joined) = d.tasks.join_next(), if !d.tasks.is_empty() => {
                    match joined {
                        Ok((id, end)) => d.finish(id, end),
                        Err(e) => d.report.error = Some(Error::Transport(format!("a publishing task failed: {e}"))),
                    }
                    d.progress(false);
                }
                chunk = source.recv(), if room => {
                    match chunk {
                        Some(chunk) => {
                            for input in chunk {
                                d.take(input);
                            }
                            d.progress(false);
                        }
                        None => source_done = true,
                    }
                }
                _ = tokio::time::sleep(LINGER), if lingering => {
                    d.dispatch(true);
                }
            }
        }
        if cancelled {
            d.report.interrupted = true;
            let why = "not accepted: publishing was interrupted";
            d.stop(&mut source, FailureKind::Interrupted, why).await;
        } else if let Some(e) = d.report.error.clone() {
            let why = format!("not sent: publishing stopped: {e}");
            d.stop(&mut source, FailureKind::NotSent, &why).await;
        }
        d.progress(true);
        let mut report = d.report;
        report.failures.sort_by_key(|f| f.index);
        report.requests = d.shared.tally.sent.load(Ordering::Relaxed);
        report.retries = d.shared.tally.retries.load(Ordering::Relaxed);
        report.rate_limited = d.shared.tally.rate_limited.load(Ordering::Relaxed);
        report.elapsed = started.elapsed();
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
