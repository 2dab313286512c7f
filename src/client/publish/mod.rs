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
//!   records are isolated and the rest sent again (safe: the service upserts);
//! - a batch that still fails in a retryable way after every retry of the HTTP layer is posted
//!   again later, twice, before its records are reported;
//! - records that share an upsert key are never in flight together, so the latest record of the
//!   source is the one the service keeps.
//!
//! [`Client::publish`] returns a [`Report`] in which every record taken from the source is
//! either accepted or a [`Failure`], also when it is cancelled (`cancel`) or stops on an error
//! that concerns every record (credentials refused).

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use url::Url;

use super::config::Region;
use super::error::{Error, Result};
use super::http::{Arrays, Call, Class};
use super::stats::Tally;
use super::Client;
use crate::webhook::Problem;

pub mod columns;
mod prepare;
mod source;

pub use prepare::check_text;
use prepare::{prepare, Rec};
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
    /// refuses arrays) or from 1 to 100, `validate`. The one place these are checked.
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
    Error::Argument(format!(
        "`batch_size` must be \"auto\" or from 1 to {MAX_BATCH}, got `{n}`"
    ))
}

/// Why a record was not accepted, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Kept back before sending: errors under its model, not JSON, larger than a body.
    Invalid,
    /// The service refused it (a 4xx other than 429).
    Refused,
    /// No success after every retry (429, 5xx, network).
    Failed,
    /// Publishing was cancelled (Ctrl-C) before the service accepted it.
    Interrupted,
    /// Publishing stopped on an error that concerns every record before it was sent.
    NotSent,
}

impl FailureKind {
    /// The kind of a record whose last answer was `status` (None: no answer).
    pub fn of_status(status: Option<u16>) -> FailureKind {
        match status {
            Some(s) if (400..500).contains(&s) && s != 429 => FailureKind::Refused,
            _ => FailureKind::Failed,
        }
    }

    /// Its name for people and for Python: `invalid`, `refused`, `failed`, `interrupted`,
    /// `not sent`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Invalid => "invalid",
            FailureKind::Refused => "refused",
            FailureKind::Failed => "failed",
            FailureKind::Interrupted => "interrupted",
            FailureKind::NotSent => "not sent",
        }
    }
}

/// A record that was not accepted, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// Why, in one word.
    pub kind: FailureKind,
    /// Position in the source (0-based).
    pub index: u64,
    /// Line number in a file (1-based), when the source is one.
    pub line: Option<u64>,
    /// The record's `transactionId`, when it has a string one.
    pub transaction_id: Option<String>,
    /// The HTTP status of the refusal; None when the record was not sent or got no answer.
    pub status: Option<u16>,
    /// Validation problems (errors and warnings), when validation kept it back.
    pub problems: Vec<Problem>,
    /// What happened, lowercase: the service's message for a refusal.
    pub message: String,
    /// The record as JSON text, ready to publish again (None if it could not be serialized).
    pub record: Option<String>,
}

/// What a publish did: every record taken from the source is accepted or in `failures`.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Records taken from the source.
    pub total: u64,
    /// Records posted to the service at least once.
    pub sent: u64,
    /// Records the service accepted.
    pub accepted: u64,
    /// Records not accepted, in source order.
    pub failures: Vec<Failure>,
    /// Bodies posted (first attempts; see `retries`).
    pub requests: u64,
    /// Requests sent again by this client during the publish (all its calls).
    pub retries: u64,
    /// 429 answers this client received during the publish.
    pub rate_limited: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Stopped by `cancel`: records taken but not yet accepted are failures.
    pub interrupted: bool,
    /// Stopped by an error that concerns every record (e.g. credentials refused).
    pub error: Option<Error>,
}

impl Report {
    /// Accounts for records taken from a source that publishing never took (it had stopped):
    /// failures of `kind` with `message`, or with their problems when their producer refused
    /// them.
    pub fn unsent(&mut self, inputs: Vec<Input>, kind: FailureKind, message: &str) {
        for input in inputs {
            self.total += 1;
            let f = match prepare(input, false) {
                Err(f) => *f,
                Ok(rec) => rec.failure(kind, None, message.to_owned()),
            };
            self.failures.push(f);
        }
    }
}

/// How far a publish has got.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Records taken from the source.
    pub read: u64,
    /// Records accepted.
    pub accepted: u64,
    /// Records not accepted.
    pub rejected: u64,
    /// Bodies posted.
    pub requests: u64,
}

/// Receives progress updates.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// The outcome of one record of a batch.
#[derive(Debug, Clone)]
enum Outcome {
    Accepted,
    Failed {
        status: Option<u16>,
        message: String,
    },
}

/// Records posted together, with their outcomes as they become known (so that a cancelled
/// publish still knows which halves of a split batch were accepted).
#[derive(Debug)]
struct Batch {
    recs: Vec<Rec>,
    outcomes: Mutex<Vec<Option<Outcome>>>,
    /// Posted with this many rounds already used.
    round: u32,
}

impl Batch {
    fn new(recs: Vec<Rec>, round: u32) -> Batch {
        let n = recs.len();
        Batch {
            recs,
            outcomes: Mutex::new(vec![None; n]),
            round,
        }
    }

    fn set(&self, range: Range<usize>, outcome: &Outcome) {
        let mut o = self.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        for slot in &mut o[range] {
            *slot = Some(outcome.clone());
        }
    }

    fn accepted(&self, i: usize) -> bool {
        let o = self.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        matches!(o.get(i), Some(Some(Outcome::Accepted)))
    }

    fn take_outcomes(&self) -> Vec<Option<Outcome>> {
        std::mem::take(&mut *self.outcomes.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// What a batch task reports besides the outcomes.
#[derive(Debug, Default)]
struct TaskEnd {
    /// A retryable error ended some records: they may be posted again in a later round.
    retryable: bool,
    /// An error that concerns every record: publishing stops.
    fatal: Option<Error>,
    /// The last error that ended records of the batch after every retry.
    last: Option<Error>,
    /// The service refuses arrays: the batch's records without an outcome go again, one per
    /// request.
    singly: bool,
}

/// Shared by the dispatcher and its batch tasks.
struct Shared {
    client: Client,
    url: Url,
    route: &'static str,
    requests: AtomicU64,
    tally: Arc<Tally>,
    /// `batch_size="auto"`: fall back to one record per request if arrays are refused.
    fallback: bool,
}

/// The body of `recs`: one object alone when `as_array` is false and there is one record.
fn body_of(recs: &[Rec], as_array: bool) -> Bytes {
    if recs.len() == 1 && !as_array {
        return recs[0].text.clone();
    }
    let size = recs.iter().map(|r| r.text.len() + 1).sum::<usize>() + 1;
    let mut body = Vec::with_capacity(size);
    body.push(b'[');
    for (i, r) in recs.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(&r.text);
    }
    body.push(b']');
    Bytes::from(body)
}

/// The message of a refusal: the `message` (or `error`) of a JSON body, else the body's text.
fn refusal_message(status: u16, body: &str, fallback: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        ["message", "error_description", "error"]
            .iter()
            .find_map(|k| v.get(k).and_then(Value::as_str).map(str::to_owned))
    });
    let detail = from_json.unwrap_or_else(|| {
        let t = body.trim();
        if t.is_empty() {
            fallback.to_owned()
        } else {
            t.chars().take(500).collect()
        }
    });
    format!("the service refused the record ({status}): {detail}")
}

/// Checks that `body` is the service's acceptance of the `n` records posted: a JSON object
/// whose `accepted` is `n`. Anything else that comes with a 2xx status (a proxy's HTML page, a
/// cut body, an object without the count) is no proof that the records were stored: it is an
/// [`Error::Decode`], which the HTTP layer retries like a 5xx.
fn acceptance(url: &Url, body: &[u8], n: usize) -> Result<()> {
    #[derive(Deserialize)]
    struct Answer {
        accepted: u64,
    }
    match serde_json::from_slice::<Answer>(body) {
        Ok(a) if a.accepted == n as u64 => Ok(()),
        outcome => {
            let what = match outcome {
                Ok(a) => format!("it counts {} accepted", a.accepted),
                Err(_) if serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok() => {
                    "it has no `accepted` count".to_owned()
                }
                Err(_) => "it is not JSON".to_owned(),
            };
            Err(Error::Decode {
                url: url.path().to_owned(),
                detail: format!(
                    "the answer is not the service's acceptance of {n} record{} \
                     (`{{\"accepted\": {n}}}`): {what}; it starts with `{}`",
                    if n == 1 { "" } else { "s" },
                    super::http::body_start(body)
                ),
            })
        }
    }
}

/// Errors after which no other record can succeed either.
fn is_fatal(e: &Error) -> bool {
    matches!(e, Error::Auth { .. } | Error::Config(_) | Error::Closed)
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Posts `range` of the batch; splits it when the service refuses it as a whole.
fn post_range<'a>(
    shared: &'a Shared,
    batch: &'a Batch,
    range: Range<usize>,
    as_array: bool,
) -> BoxFuture<'a, TaskEnd> {
    Box::pin(async move {
        let call = Call {
            method: Method::POST,
            url: shared.url.clone(),
            route: shared.route,
            body: Some(body_of(&batch.recs[range.clone()], as_array)),
            class: Class::Publish,
            tally: Some(shared.tally.clone()),
        };
        shared.requests.fetch_add(1, Ordering::Relaxed);
        let n = range.len();
        let accepted = |body: Bytes| acceptance(&shared.url, &body, n);
        match shared.client.http().send_checked(&call, accepted).await {
            Ok(_) => {
                batch.set(range, &Outcome::Accepted);
                TaskEnd::default()
            }
            Err(Error::Status { status: 400, .. }) if as_array && shared.fallback => {
                arrays_refused(shared, batch, range).await
            }
            Err(Error::Status { status, .. })
                if matches!(status, 400 | 413 | 422) && range.len() > 1 =>
            {
                split(shared, batch, range).await
            }
            Err(Error::Status {
                status,
                body,
                message,
                ..
            }) if matches!(status, 400 | 413 | 422) => {
                let outcome = Outcome::Failed {
                    status: Some(status),
                    message: refusal_message(status, &body, &message),
                };
                batch.set(range, &outcome);
                TaskEnd::default()
            }
            Err(e) => {
                let status = match &e {
                    Error::Status { status, .. } => Some(*status),
                    Error::Auth { status, .. } => *status,
                    _ => None,
                };
                let outcome = Outcome::Failed {
                    status,
                    message: e.to_string(),
                };
                batch.set(range, &outcome);
                if is_fatal(&e) {
                    TaskEnd {
                        fatal: Some(e),
                        ..TaskEnd::default()
                    }
                } else {
                    TaskEnd {
                        retryable: e.is_retryable(),
                        last: Some(e),
                        ..TaskEnd::default()
                    }
                }
            }
        }
    })
}

/// Hashes of upsert keys are already mixed: they are their own hash.
#[derive(Default)]
struct KeyHasher(u64);

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

type Keyed = BuildHasherDefault<KeyHasher>;

/// Refused as a whole: splits `range` in halves to find the records at fault. Halves are posted
/// one after the other so that a batch never holds more than one request.
async fn split(shared: &Shared, batch: &Batch, range: Range<usize>) -> TaskEnd {
    let mid = range.start + range.len() / 2;
    let a = post_range(shared, batch, range.start..mid, false).await;
    let b = post_range(shared, batch, mid..range.end, false).await;
    TaskEnd {
        retryable: a.retryable || b.retryable,
        fatal: a.fatal.or(b.fatal),
        last: b.last.or(a.last),
        singly: a.singly || b.singly,
    }
}

/// An array body refused with 400 ("auto" batches): is it the array the service refuses, or a
/// record in it? Its first record alone, then the same record in an array of one, tell (once
/// per client). Arrays refused: the batch's other records go again one per request, as every
/// record of the client from now on; otherwise the batch is split as usual.
async fn arrays_refused(shared: &Shared, batch: &Batch, range: Range<usize>) -> TaskEnd {
    let webhook = &shared.client.http().webhook;
    match webhook.arrays() {
        Arrays::Refused => {
            return TaskEnd {
                singly: true,
                ..TaskEnd::default()
            }
        }
        Arrays::Accepted if range.len() > 1 => return split(shared, batch, range).await,
        Arrays::Accepted => return post_range(shared, batch, range, false).await,
        Arrays::Unknown => {}
    }
    let first = range.start..range.start + 1;
    let alone = post_range(shared, batch, first.clone(), false).await;
    if !batch.accepted(range.start) {
        // The first record is refused alone too: it is at fault (perhaps with others).
        let rest = post_range_split(shared, batch, range.start + 1..range.end).await;
        return merge(alone, rest);
    }
    let call = Call {
        method: Method::POST,
        url: shared.url.clone(),
        route: shared.route,
        body: Some(body_of(&batch.recs[first], true)),
        class: Class::Publish,
        tally: Some(shared.tally.clone()),
    };
    shared.requests.fetch_add(1, Ordering::Relaxed);
    let one = shared
        .client
        .http()
        .send_checked(&call, |body: Bytes| acceptance(&shared.url, &body, 1))
        .await;
    match one {
        Err(Error::Status { status: 400, .. }) => {
            if webhook.refuse_arrays() {
                shared.client.http().warn(
                    "the webhook refuses JSON arrays (400 to a record in an array of one, 200 \
                     to the same record alone): this client posts one record per request from \
                     now on"
                        .to_owned(),
                );
            }
            TaskEnd {
                singly: true,
                ..TaskEnd::default()
            }
        }
        Ok(()) => {
            webhook.accept_arrays();
            let rest = post_range_split(shared, batch, range.start + 1..range.end).await;
            merge(alone, rest)
        }
        // No verdict (the service failed): the records without an outcome go again.
        Err(_) => TaskEnd {
            singly: true,
            ..TaskEnd::default()
        },
    }
}

/// Posts `range`, split in halves when it holds more than one record (the usual isolation of
/// a refused batch's records).
async fn post_range_split(shared: &Shared, batch: &Batch, range: Range<usize>) -> TaskEnd {
    match range.len() {
        0 => TaskEnd::default(),
        1 => post_range(shared, batch, range, false).await,
        _ => split(shared, batch, range).await,
    }
}

fn merge(a: TaskEnd, b: TaskEnd) -> TaskEnd {
    TaskEnd {
        retryable: a.retryable || b.retryable,
        fatal: a.fatal.or(b.fatal),
        last: b.last.or(a.last),
        singly: a.singly || b.singly,
    }
}

/// The state of one publish, owned by the dispatcher loop.
struct Dispatcher {
    shared: Arc<Shared>,
    options: Options,
    in_flight_max: usize,
    /// Records taken from the source but not yet in a batch, each with a key not held by any
    /// other record in `ready` or in flight.
    ready: VecDeque<Rec>,
    /// Records waiting for an earlier record with the same key to finish.
    blocked: HashMap<u64, VecDeque<Rec>, Keyed>,
    blocked_len: usize,
    /// Keys of the records in `ready` or in flight.
    held: HashSet<u64, Keyed>,
    /// Batches to post again (a later round).
    again: VecDeque<Batch>,
    tasks: JoinSet<(u64, TaskEnd)>,
    batches: HashMap<u64, Arc<Batch>>,
    next_batch: u64,
    report: Report,
    failed_in_a_row: u32,
    /// The last error that ended records after every retry.
    last_error: Option<Error>,
    progress: Option<ProgressSink>,
    last_progress: Instant,
}

impl Dispatcher {
    fn take(&mut self, input: Input) {
        self.report.total += 1;
        match prepare(input, self.options.validate) {
            Err(f) => self.report.failures.push(*f),
            Ok(rec) => self.admit(rec),
        }
    }

    /// Queues a record, behind any earlier record with the same key.
    fn admit(&mut self, rec: Rec) {
        if rec.key != 0 && !self.held.insert(rec.key) {
            self.blocked_len += 1;
            self.blocked.entry(rec.key).or_default().push_back(rec);
            return;
        }
        self.ready.push_back(rec);
    }

    /// A record of `key` is done: the next one waiting for it may go.
    fn release(&mut self, key: u64) {
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

    fn buffered(&self) -> usize {
        self.ready.len() + self.blocked_len
    }

    fn buffer_cap(&self) -> usize {
        (self.in_flight_max * self.options.batch_size).max(4 * CHUNK)
    }

    fn spawn(&mut self, batch: Batch) {
        let id = self.next_batch;
        self.next_batch += 1;
        let batch = Arc::new(batch);
        self.batches.insert(id, batch.clone());
        let shared = self.shared.clone();
        let as_array = self.batch_size() > 1;
        self.tasks.spawn(async move {
            let n = batch.recs.len();
            let end = post_range(&shared, &batch, 0..n, as_array).await;
            (id, end)
        });
    }

    /// Records per body now: one once the service refused arrays ("auto").
    fn batch_size(&self) -> usize {
        if self.options.fallback && self.shared.client.http().webhook.arrays() == Arrays::Refused {
            1
        } else {
            self.options.batch_size
        }
    }

    /// Starts batches while there is room in flight and enough records (or the source ended).
    fn dispatch(&mut self, flush: bool) {
        while self.tasks.len() < self.in_flight_max {
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
            self.report.sent += recs.len() as u64;
            self.spawn(Batch::new(recs, 0));
        }
    }

    /// Accounts for a finished batch.
    fn finish(&mut self, id: u64, end: TaskEnd) {
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
            .filter(|o| matches!(o, Some(Outcome::Accepted)))
            .count();
        if accepted > 0 {
            self.failed_in_a_row = 0;
        } else if end.retryable {
            self.failed_in_a_row += 1;
        }
        let retry_round = end.retryable
            && batch.round < ROUNDS
            && self.report.error.is_none()
            && self.failed_in_a_row < GIVE_UP_AFTER;
        let Ok(batch) = Arc::try_unwrap(batch) else {
            // The task has ended, so nobody else holds the batch; never reached.
            return;
        };
        let round = batch.round;
        let mut again = Vec::new();
        for (rec, outcome) in batch.recs.into_iter().zip(outcomes) {
            match outcome {
                Some(Outcome::Accepted) => {
                    self.report.accepted += 1;
                    self.release(rec.key);
                }
                Some(Outcome::Failed { status, message })
                    if retry_round && !matches!(status, Some(400 | 413 | 422)) =>
                {
                    // Keeps its key held: nothing newer with that key may overtake it.
                    let _ = message;
                    again.push(rec);
                }
                None if end.singly => {
                    // Arrays refused: again, one record per body.
                    self.again.push_back(Batch::new(vec![rec], round));
                }
                outcome => {
                    let (status, message) = match outcome {
                        Some(Outcome::Failed { status, message }) => (status, message),
                        _ => (None, "not sent: publishing stopped".to_owned()),
                    };
                    let key = rec.key;
                    self.fail(rec, FailureKind::of_status(status), status, message);
                    self.release(key);
                }
            }
        }
        if !again.is_empty() {
            self.again.push_back(Batch::new(again, round + 1));
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

    fn fail(&mut self, rec: Rec, kind: FailureKind, status: Option<u16>, message: String) {
        self.report
            .failures
            .push(rec.failure(kind, status, message));
    }

    /// Reports every record not yet accepted (in flight, waiting, or still in the channel):
    /// those with no answer yet as failures of `kind`, with `why`.
    async fn stop(&mut self, rx: &mut mpsc::Receiver<Vec<Input>>, kind: FailureKind, why: &str) {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        let ids: Vec<u64> = self.batches.keys().copied().collect();
        for id in ids {
            if let Some(batch) = self.batches.remove(&id) {
                let outcomes = batch.take_outcomes();
                if let Ok(batch) = Arc::try_unwrap(batch) {
                    for (rec, outcome) in batch.recs.into_iter().zip(outcomes) {
                        match outcome {
                            Some(Outcome::Accepted) => self.report.accepted += 1,
                            Some(Outcome::Failed { status, message }) => {
                                self.fail(rec, FailureKind::of_status(status), status, message)
                            }
                            None => self.fail(rec, kind, None, why.to_owned()),
                        }
                    }
                }
            }
        }
        let mut waiting: Vec<Rec> = Vec::new();
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
            self.fail(rec, kind, None, why.to_owned());
        }
        rx.close();
        while let Some(chunk) = rx.recv().await {
            self.report.unsent(chunk, kind, why);
        }
    }

    fn progress(&mut self, force: bool) {
        let Some(sink) = &self.progress else { return };
        if !force && self.last_progress.elapsed() < Duration::from_millis(50) {
            return;
        }
        self.last_progress = Instant::now();
        sink(Progress {
            read: self.report.total,
            accepted: self.report.accepted,
            rejected: self.report.failures.len() as u64,
            requests: self.shared.requests.load(Ordering::Relaxed),
        });
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
        progress: Option<ProgressSink>,
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
            shared: Arc::new(Shared {
                client: self.clone(),
                url,
                route,
                requests: AtomicU64::new(0),
                tally: Arc::default(),
                fallback: options.fallback,
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
                && d.tasks.len() < d.in_flight_max
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
        report.requests = d.shared.requests.load(Ordering::Relaxed);
        report.retries = d.shared.tally.retries.load(Ordering::Relaxed);
        report.rate_limited = d.shared.tally.rate_limited.load(Ordering::Relaxed);
        report.elapsed = started.elapsed();
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acceptance_is_the_count_of_the_records_posted() {
        let url = Url::parse("http://127.0.0.1/v2/webhook").expect("url");
        assert!(acceptance(&url, br#"{"accepted": 3}"#, 3).is_ok());
        for (body, n) in [
            (&br#"{"accepted": 2}"#[..], 3),
            (br#"{"accepted": "3"}"#, 3),
            (br#"{"accepted": {"n": 3}}"#, 3),
            (br#"{"data": [], "message": "not the list"}"#, 1),
            (br#"{"accep"#, 1),
            (b"<html><body>Bad Gateway</body></html>", 1),
            (b"", 1),
            (b"[]", 1),
        ] {
            let e = acceptance(&url, body, n).expect_err("not an acceptance");
            assert!(matches!(e, Error::Decode { .. }), "{e}");
        }
    }

    #[test]
    fn a_failure_kind_follows_the_last_status() {
        assert_eq!(FailureKind::of_status(Some(400)), FailureKind::Refused);
        assert_eq!(FailureKind::of_status(Some(403)), FailureKind::Refused);
        for failed in [Some(429), Some(500), Some(503), None] {
            assert_eq!(FailureKind::of_status(failed), FailureKind::Failed);
        }
        assert_eq!(FailureKind::NotSent.as_str(), "not sent");
    }

    #[test]
    fn batch_size_is_checked() {
        for bad in [0, 101] {
            let o = Options {
                batch_size: bad,
                ..Options::default()
            };
            assert!(o.check().is_err());
        }
    }
}
