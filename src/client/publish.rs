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

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::ops::Range;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::Method;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use url::Url;

use super::config::Region;
use super::error::{Error, Result};
use super::http::{Call, Class};
use super::stats::Tally;
use super::Client;
use crate::webhook::{self as validate, Problem, Severity};

/// Most records in one webhook array (the provider's limit).
pub const MAX_BATCH: usize = 100;
/// Largest body the client posts: the provider's 10 MB, counted in decimal to keep a margin.
pub const MAX_BODY: usize = 10_000_000;
/// Batches in flight when no publish concurrency is configured.
pub const DEFAULT_IN_FLIGHT: usize = 32;
/// Batches in flight at most, whatever the configured concurrency.
const MAX_IN_FLIGHT: usize = 256;
/// Records per chunk that the sources below send into the channel.
pub const CHUNK: usize = 256;
/// Chunks that may wait in the channel (with [`CHUNK`], about 4,000 records).
pub const CHANNEL_CHUNKS: usize = 16;
/// Times a batch that failed in a retryable way after every retry is posted again.
const ROUNDS: u32 = 2;
/// Batches that failed in a row (none accepted in between) before publishing stops.
const GIVE_UP_AFTER: u32 = 8;
/// A partial batch waits this long for more records when the source is slow.
const LINGER: Duration = Duration::from_millis(20);

/// One record from the source, with its position (0-based, in the order of the source).
#[derive(Debug)]
pub enum Input {
    /// A record as JSON text (a JSON Lines line, or a binding's serialization).
    Text {
        /// Position in the source.
        index: u64,
        /// Line number in a file (1-based), when the source is one.
        line: Option<u64>,
        /// The JSON text.
        text: String,
    },
    /// A record as a JSON value (Rust callers).
    Value {
        /// Position in the source.
        index: u64,
        /// The record.
        value: Value,
    },
    /// A record the producer could not turn into JSON; it is reported with this problem.
    Invalid {
        /// Position in the source.
        index: u64,
        /// Line number in a file (1-based), when the source is one.
        line: Option<u64>,
        /// What is wrong (an error).
        problem: Problem,
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
    /// Validate each record under its standard model and keep back those with errors.
    pub validate: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            region: None,
            batch_size: 1,
            validate: true,
        }
    }
}

impl Options {
    /// Refuses a batch size outside 1..=100.
    pub fn check(&self) -> Result<()> {
        if !(1..=MAX_BATCH).contains(&self.batch_size) {
            return Err(Error::Argument(format!(
                "`batch_size` must be between 1 and {MAX_BATCH}, got `{}`",
                self.batch_size
            )));
        }
        Ok(())
    }
}

/// A record that was not accepted, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
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

/// A record ready to post.
#[derive(Debug)]
struct Rec {
    index: u64,
    line: Option<u64>,
    /// Upsert key (see `validate::upsert_key`).
    key: Option<Box<str>>,
    /// Whether `key` is the record's `transactionId`.
    key_is_tx: bool,
    text: String,
}

impl Rec {
    fn transaction_id(&self) -> Option<String> {
        if self.key_is_tx {
            self.key.as_deref().map(str::to_owned)
        } else {
            None
        }
    }
}

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
}

/// Shared by the dispatcher and its batch tasks.
struct Shared {
    client: Client,
    url: Url,
    route: &'static str,
    requests: AtomicU64,
    tally: Arc<Tally>,
}

#[derive(Deserialize)]
struct KeyFields<'a> {
    #[serde(rename = "dataType", borrow, default)]
    data_type: Option<&'a RawValue>,
    #[serde(rename = "transactionId", borrow, default)]
    transaction_id: Option<&'a RawValue>,
    #[serde(rename = "locationId", borrow, default)]
    location_id: Option<&'a RawValue>,
    #[serde(rename = "eventUniqueId", borrow, default)]
    event_unique_id: Option<&'a RawValue>,
}

/// The upsert key of a record given as text, without building its tree (the same key as
/// `validate::upsert_key`); None when it has no usable key; Err when the text is not JSON.
fn key_of_text(text: &str) -> std::result::Result<Option<String>, serde_json::Error> {
    let str_of = |raw: Option<&RawValue>| -> Option<String> {
        raw.and_then(|r| serde_json::from_str::<String>(r.get()).ok())
            .filter(|s| !s.is_empty())
    };
    match serde_json::from_str::<KeyFields>(text) {
        Ok(k) if text.trim_start().starts_with('{') => Ok(match str_of(k.data_type).as_deref() {
            Some("retail" | "restaurant") => str_of(k.transaction_id),
            Some("other") => match (str_of(k.location_id), str_of(k.event_unique_id)) {
                (Some(location), Some(event)) => Some(format!("{location}\u{1f}{event}")),
                _ => None,
            },
            _ => None,
        }),
        // Valid JSON that is not an object (or an object whose key fields are odd): no key.
        _ => serde_json::from_str::<serde::de::IgnoredAny>(text).map(|_| None),
    }
}

fn first_errors(problems: &[Problem]) -> String {
    let errors: Vec<String> = problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .map(Problem::to_string)
        .collect();
    match errors.len() {
        0 => String::new(),
        1..=3 => errors.join("; "),
        n => format!("{}; and {} more", errors[..3].join("; "), n - 3),
    }
}

/// Turns an input into a record ready to post, or the failure that keeps it back.
fn prepare(input: Input, check: bool) -> std::result::Result<Rec, Box<Failure>> {
    let (index, line, text, value) = match input {
        Input::Invalid {
            index,
            line,
            problem,
            text,
        } => {
            return Err(Box::new(Failure {
                index,
                line,
                transaction_id: None,
                status: None,
                message: problem.to_string(),
                problems: vec![problem],
                record: text,
            }))
        }
        Input::Text { index, line, text } => (index, line, text, None),
        Input::Value { index, value } => {
            let text = value.to_string();
            (index, None, text, Some(value))
        }
    };
    let not_json = |e: serde_json::Error, text: String| {
        Box::new(Failure {
            index,
            line,
            transaction_id: None,
            status: None,
            problems: vec![Problem {
                path: String::new(),
                message: format!("not valid JSON: {e}"),
                severity: Severity::Error,
            }],
            message: format!("not valid JSON: {e}"),
            record: Some(text),
        })
    };
    let key = if check || value.is_some() {
        let value = match value {
            Some(v) => v,
            None => match serde_json::from_str::<Value>(&text) {
                Ok(v) => v,
                Err(e) => return Err(not_json(e, text)),
            },
        };
        if check {
            let problems = validate::validate(&value);
            if validate::has_errors(&problems) {
                return Err(Box::new(Failure {
                    index,
                    line,
                    transaction_id: value
                        .get("transactionId")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    status: None,
                    message: first_errors(&problems),
                    problems,
                    record: Some(text),
                }));
            }
        }
        validate::upsert_key(&value)
    } else {
        match key_of_text(&text) {
            Ok(k) => k,
            Err(e) => return Err(not_json(e, text)),
        }
    };
    if text.len() + 2 > MAX_BODY {
        let problem = Problem {
            path: String::new(),
            message: format!(
                "the record is {} bytes, over the webhook's body limit of 10 MB",
                text.len()
            ),
            severity: Severity::Error,
        };
        return Err(Box::new(Failure {
            index,
            line,
            transaction_id: None,
            status: None,
            message: problem.message.clone(),
            problems: vec![problem],
            record: Some(text),
        }));
    }
    let key_is_tx = key.as_deref().is_some_and(|k| !k.contains('\u{1f}'));
    Ok(Rec {
        index,
        line,
        key: key.map(String::into_boxed_str),
        key_is_tx,
        text,
    })
}

/// The body of `recs`: one object alone when `as_array` is false and there is one record.
fn body_of(recs: &[Rec], as_array: bool) -> Bytes {
    if recs.len() == 1 && !as_array {
        return Bytes::copy_from_slice(recs[0].text.as_bytes());
    }
    let size = recs.iter().map(|r| r.text.len() + 1).sum::<usize>() + 1;
    let mut body = Vec::with_capacity(size);
    body.push(b'[');
    for (i, r) in recs.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        body.extend_from_slice(r.text.as_bytes());
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
    match e {
        Error::Auth { .. } | Error::Config(_) => true,
        Error::Transport(m) => m == "the client is closed",
        _ => false,
    }
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
            Err(Error::Status { status, .. })
                if matches!(status, 400 | 413 | 422) && range.len() > 1 =>
            {
                // Refused as a whole: split to find the records at fault. Halves are posted one
                // after the other so a batch never holds more than one request.
                let mid = range.start + range.len() / 2;
                let a = post_range(shared, batch, range.start..mid, false).await;
                let b = post_range(shared, batch, mid..range.end, false).await;
                TaskEnd {
                    retryable: a.retryable || b.retryable,
                    fatal: a.fatal.or(b.fatal),
                    last: b.last.or(a.last),
                }
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
                        retryable: false,
                        fatal: Some(e),
                        last: None,
                    }
                } else {
                    TaskEnd {
                        retryable: e.is_retryable(),
                        fatal: None,
                        last: Some(e),
                    }
                }
            }
        }
    })
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
    blocked: HashMap<Box<str>, VecDeque<Rec>>,
    blocked_len: usize,
    /// Keys of the records in `ready` or in flight.
    held: HashMap<Box<str>, ()>,
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
        if let Some(key) = &rec.key {
            if self.held.contains_key(key) {
                self.blocked_len += 1;
                self.blocked.entry(key.clone()).or_default().push_back(rec);
                return;
            }
            self.held.insert(key.clone(), ());
        }
        self.ready.push_back(rec);
    }

    /// A record of `key` is done: the next one waiting for it may go.
    fn release(&mut self, key: &str) {
        let next = match self.blocked.get_mut(key) {
            Some(queue) => {
                let next = queue.pop_front();
                if queue.is_empty() {
                    self.blocked.remove(key);
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
                self.held.remove(key);
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
        let as_array = self.options.batch_size > 1;
        self.tasks.spawn(async move {
            let n = batch.recs.len();
            let end = post_range(&shared, &batch, 0..n, as_array).await;
            (id, end)
        });
    }

    /// Starts batches while there is room in flight and enough records (or the source ended).
    fn dispatch(&mut self, flush: bool) {
        while self.tasks.len() < self.in_flight_max {
            if let Some(batch) = self.again.pop_front() {
                self.spawn(batch);
                continue;
            }
            let size = self.options.batch_size;
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
                    if let Some(k) = &rec.key {
                        self.release(k);
                    }
                }
                Some(Outcome::Failed { status, message })
                    if retry_round && !matches!(status, Some(400 | 413 | 422)) =>
                {
                    // Keeps its key held: nothing newer with that key may overtake it.
                    let _ = message;
                    again.push(rec);
                }
                outcome => {
                    let (status, message) = match outcome {
                        Some(Outcome::Failed { status, message }) => (status, message),
                        _ => (None, "not sent: publishing stopped".to_owned()),
                    };
                    let key = rec.key.clone();
                    self.fail(rec, status, message);
                    if let Some(k) = key {
                        self.release(&k);
                    }
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

    fn fail(&mut self, rec: Rec, status: Option<u16>, message: String) {
        let transaction_id = rec.transaction_id();
        self.report.failures.push(Failure {
            index: rec.index,
            line: rec.line,
            transaction_id,
            status,
            problems: Vec::new(),
            message,
            record: Some(rec.text),
        });
    }

    /// Reports every record not yet accepted: in flight, waiting, or still in the channel.
    async fn stop(&mut self, rx: &mut mpsc::Receiver<Vec<Input>>, why: &str) {
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
                                self.fail(rec, status, message)
                            }
                            None => self.fail(rec, None, why.to_owned()),
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
            self.fail(rec, None, why.to_owned());
        }
        rx.close();
        while let Some(chunk) = rx.recv().await {
            for input in chunk {
                self.report.total += 1;
                let f = match prepare(input, false) {
                    Err(f) => *f,
                    Ok(rec) => Failure {
                        index: rec.index,
                        line: rec.line,
                        transaction_id: rec.transaction_id(),
                        status: None,
                        problems: Vec::new(),
                        message: why.to_owned(),
                        record: Some(rec.text),
                    },
                };
                self.report.failures.push(f);
            }
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
            .unwrap_or(DEFAULT_IN_FLIGHT)
            .clamp(1, MAX_IN_FLIGHT);
        let mut d = Dispatcher {
            shared: Arc::new(Shared {
                client: self.clone(),
                url,
                route,
                requests: AtomicU64::new(0),
                tally: Arc::default(),
            }),
            options,
            in_flight_max,
            ready: VecDeque::new(),
            blocked: HashMap::new(),
            blocked_len: 0,
            held: HashMap::new(),
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
            d.stop(&mut source, "not accepted: publishing was interrupted")
                .await;
        } else if let Some(e) = d.report.error.clone() {
            d.stop(&mut source, &format!("not sent: publishing stopped: {e}"))
                .await;
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

/// A source of the given records, fed by a task; `index` counts from 0.
pub fn values_source(
    records: impl IntoIterator<Item = Value, IntoIter: Send + 'static>,
) -> (mpsc::Receiver<Vec<Input>>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    let mut iter = records.into_iter();
    let feeder = tokio::spawn(async move {
        let mut index = 0u64;
        loop {
            let mut chunk = Vec::with_capacity(CHUNK);
            for value in iter.by_ref().take(CHUNK) {
                chunk.push(Input::Value { index, value });
                index += 1;
            }
            if chunk.is_empty() || tx.send(chunk).await.is_err() {
                return;
            }
        }
    });
    (rx, feeder)
}

/// Reads a JSON Lines file into a source: one record per non-blank line, `index` counting
/// records from 0 and `line` the line number. The task (a blocking one: file reads block) ends
/// with the file's read error, if any, or when the receiver is dropped.
pub fn jsonl_source(
    path: PathBuf,
) -> (
    mpsc::Receiver<Vec<Input>>,
    tokio::task::JoinHandle<Result<()>>,
) {
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    let feeder = tokio::task::spawn_blocking(move || {
        use std::io::BufRead;
        let unreadable =
            |e: std::io::Error| Error::Argument(format!("cannot read `{}`: {e}", path.display()));
        let file = std::fs::File::open(&path).map_err(unreadable)?;
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
        let mut buf = Vec::new();
        let (mut index, mut line) = (0u64, 0u64);
        let mut chunk = Vec::with_capacity(CHUNK);
        loop {
            buf.clear();
            let n = reader.read_until(b'\n', &mut buf).map_err(unreadable)?;
            if n == 0 {
                break;
            }
            line += 1;
            let mut bytes = buf.as_slice();
            if line == 1 {
                bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
            }
            let bytes = bytes.trim_ascii();
            if bytes.is_empty() {
                continue;
            }
            let input = match std::str::from_utf8(bytes) {
                Ok(text) => Input::Text {
                    index,
                    line: Some(line),
                    text: text.to_owned(),
                },
                Err(e) => Input::Invalid {
                    index,
                    line: Some(line),
                    problem: Problem {
                        path: String::new(),
                        message: format!("line {line} is not UTF-8: {e}"),
                        severity: Severity::Error,
                    },
                    text: None,
                },
            };
            index += 1;
            chunk.push(input);
            if chunk.len() == CHUNK {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
                if tx.blocking_send(full).is_err() {
                    return Ok(());
                }
            }
        }
        if !chunk.is_empty() {
            let _ = tx.blocking_send(chunk);
        }
        Ok(())
    });
    (rx, feeder)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Config, Limits, Secret, Settings};
    use crate::emulator::{spawn, DataConfig, Faults, Handle, Hostile, HostileRule, State};
    use serde_json::json;

    async fn emulator() -> Handle {
        let cfg = DataConfig {
            seed: 3,
            sites: 2,
            days: 1,
            events_per_day: 10,
            ..DataConfig::default()
        };
        spawn(Arc::new(State::new(&cfg)), 0)
            .await
            .expect("emulator listens")
    }

    fn client_for(h: &Handle, limits: Limits, max_retries: u32) -> Client {
        let c = &h.state.creds;
        let settings = Settings {
            api_key: Some(Secret::new(c.api_key.clone())),
            client_id: Some(c.client_id.clone()),
            client_secret: Some(Secret::new(c.client_secret.clone())),
            base_url: Some(h.url()),
            eu_base_url: Some(h.eu_url()),
            audience: Some(c.audience.clone()),
            limits: Some(limits),
            max_retries: Some(max_retries),
            ..Settings::default()
        };
        let config = Config::resolve(settings, &|_| None).expect("config");
        Client::new(config, None).expect("client")
    }

    fn retail(tx: &str, price: f64) -> Value {
        json!({
            "dataType": "retail", "schemaVersion": "1",
            "startTime": 1_794_891_600_000_i64, "endTime": 1_794_891_660_000_i64,
            "locationId": "store-1", "dataSourceId": "pos-1", "transactionId": tx,
            "status": "sale",
            "items": [{"time": 1_794_891_600_000_i64, "quantity": 1, "description": "tea",
                       "unitPrice": price, "type": "SALE"}],
        })
    }

    async fn run(client: &Client, records: Vec<Value>, options: Options) -> Report {
        let (rx, _feeder) = values_source(records);
        let (_tx, cancel) = watch::channel(false);
        client
            .publish(rx, options, None, cancel)
            .await
            .expect("publish")
    }

    fn stored(h: &Handle, region: &str) -> Vec<Value> {
        h.state
            .published(Some(region))
            .iter()
            .map(|t| serde_json::from_str(t).expect("json"))
            .collect()
    }

    #[tokio::test]
    async fn every_record_arrives_once_under_faults() {
        let h = emulator().await;
        h.state.set_faults(Faults {
            error_rate: 0.1,
            rate_limit_rate: 0.1,
            drop_rate: 0.05,
            ..Faults::default()
        });
        let client = client_for(&h, Limits::unlimited(), 5);
        let records: Vec<Value> = (0..2_000).map(|i| retail(&format!("t-{i}"), 1.0)).collect();
        for batch_size in [1, 37] {
            h.state.clear_published();
            let options = Options {
                batch_size,
                ..Options::default()
            };
            let report = run(&client, records.clone(), options).await;
            assert_eq!(report.accepted, 2_000, "{:?}", report.failures.first());
            assert!(report.failures.is_empty());
            assert_eq!(report.total, 2_000);
            assert_eq!(stored(&h, "us").len(), 2_000);
        }
    }

    #[tokio::test]
    async fn a_bad_record_in_a_batch_is_isolated_and_the_rest_stored() {
        let h = emulator().await;
        let client = client_for(&h, Limits::unlimited(), 2);
        let mut records: Vec<Value> = (0..100).map(|i| retail(&format!("t-{i}"), 1.0)).collect();
        records[42]["registerId"] = json!("r-1");
        let options = Options {
            batch_size: 100,
            validate: false,
            ..Options::default()
        };
        let report = run(&client, records, options).await;
        assert_eq!(report.accepted, 99);
        assert_eq!(report.failures.len(), 1);
        let f = &report.failures[0];
        assert_eq!((f.index, f.status), (42, Some(400)));
        assert_eq!(f.transaction_id.as_deref(), Some("t-42"));
        assert!(f.message.contains("registerId"), "{}", f.message);
        assert_eq!(stored(&h, "us").len(), 99);
        // 1 batch, then halves down to the bad record: 2 per level.
        assert!(report.requests <= 1 + 2 * 7, "{}", report.requests);
    }

    #[tokio::test]
    async fn validation_keeps_back_bad_records_and_the_service_never_sees_them() {
        let h = emulator().await;
        let client = client_for(&h, Limits::unlimited(), 2);
        let mut records: Vec<Value> = (0..10).map(|i| retail(&format!("t-{i}"), 1.0)).collect();
        records[3]["storeId"] = json!("s");
        records[7]["items"][0]["unitPrice"] = json!("1.0");
        records[8]["status"] = json!("SALE"); // a warning only
        let report = run(&client, records, Options::default()).await;
        assert_eq!(report.accepted, 8);
        assert_eq!(report.sent, 8);
        let idx: Vec<u64> = report.failures.iter().map(|f| f.index).collect();
        assert_eq!(idx, [3, 7]);
        assert!(report.failures[0].message.contains("locationId"));
        assert_eq!(report.failures[1].problems[0].path, "items[0].unitPrice");
        assert_eq!(report.failures[1].status, None);
        assert_eq!(h.state.stats_json()["published_stored"], 8);
    }

    #[tokio::test]
    async fn the_latest_record_of_a_key_wins() {
        let h = emulator().await;
        h.state.set_faults(Faults {
            error_rate: 0.2,
            drop_rate: 0.05,
            ..Faults::default()
        });
        let client = client_for(&h, Limits::unlimited(), 8);
        // Ten versions of each of 50 keys, interleaved.
        let records: Vec<Value> = (0..500)
            .map(|i| retail(&format!("t-{}", i % 50), f64::from(i)))
            .collect();
        let report = run(&client, records, Options::default()).await;
        assert_eq!(report.accepted, 500);
        let stored = stored(&h, "us");
        assert_eq!(stored.len(), 50);
        for r in stored {
            let tx = r["transactionId"].as_str().expect("tx");
            let k: f64 = tx[2..].parse().expect("n");
            assert_eq!(r["items"][0]["unitPrice"], json!(450.0 + k), "{tx}");
        }
    }

    #[tokio::test]
    async fn eu_region_posts_to_the_eu_route() {
        let h = emulator().await;
        let client = client_for(&h, Limits::unlimited(), 2);
        let options = Options {
            region: Some(Region::Eu),
            batch_size: 10,
            ..Options::default()
        };
        let records: Vec<Value> = (0..25).map(|i| retail(&format!("e-{i}"), 1.0)).collect();
        let report = run(&client, records, options).await;
        assert_eq!(report.accepted, 25);
        assert_eq!(stored(&h, "eu").len(), 25);
        assert!(stored(&h, "us").is_empty());
    }

    #[tokio::test]
    async fn texts_that_are_not_json_or_too_big_are_failures() {
        let h = emulator().await;
        let client = client_for(&h, Limits::unlimited(), 2);
        let mut big_text = retail("big", 1.0).to_string();
        big_text.insert_str(
            1,
            &format!("\"employeeName\":\"{}\",", "x".repeat(MAX_BODY)),
        );
        for validate in [true, false] {
            let texts = [
                "{\"dataType\": ".to_owned(),
                retail("ok", 1.0).to_string(),
                big_text.clone(),
            ];
            let (tx, rx) = mpsc::channel(4);
            let chunk = texts
                .into_iter()
                .enumerate()
                .map(|(i, text)| Input::Text {
                    index: i as u64,
                    line: Some(i as u64 + 1),
                    text,
                })
                .collect();
            tx.send(chunk).await.expect("send");
            drop(tx);
            let (_c, cancel) = watch::channel(false);
            let options = Options {
                validate,
                batch_size: 10,
                ..Options::default()
            };
            let report = client
                .publish(rx, options, None, cancel)
                .await
                .expect("publish");
            assert_eq!(report.accepted, 1);
            let f: Vec<(u64, Option<u64>)> =
                report.failures.iter().map(|f| (f.index, f.line)).collect();
            assert_eq!(f, [(0, Some(1)), (2, Some(3))]);
            assert!(report.failures[0].message.starts_with("not valid JSON"));
            assert!(report.failures[1].message.contains("10 MB"));
        }
    }

    #[tokio::test]
    async fn cancel_reports_every_record_not_yet_accepted() {
        let h = emulator().await;
        h.state.set_faults(Faults {
            latency_ms: 200,
            ..Faults::default()
        });
        let client = client_for(&h, Limits::unlimited(), 2);
        let records: Vec<Value> = (0..1_000).map(|i| retail(&format!("c-{i}"), 1.0)).collect();
        let (rx, _feeder) = values_source(records);
        let (stop, cancel) = watch::channel(false);
        let (seen, mut accepted) = watch::channel(0u64);
        let sink: ProgressSink = Arc::new(move |p: Progress| {
            seen.send_replace(p.accepted);
        });
        let task = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .publish(rx, Options::default(), Some(sink), cancel)
                    .await
            }
        });
        // Cancelled once some records are accepted: with 200 ms a request, most are not yet.
        accepted.wait_for(|n| *n > 0).await.expect("progress");
        stop.send_replace(true);
        let report = task.await.expect("join").expect("publish");
        assert!(report.interrupted);
        assert!(report.accepted > 0 && report.accepted < 1_000);
        assert_eq!(report.accepted + report.failures.len() as u64, report.total);
        let stored = h.state.published_len() as u64;
        assert!(stored >= report.accepted);
        assert!(report
            .failures
            .iter()
            .all(|f| f.message.contains("interrupted") && f.record.is_some()));
    }

    #[tokio::test]
    async fn refused_credentials_stop_publishing_with_an_error() {
        let h = emulator().await;
        let mut client = client_for(&h, Limits::unlimited(), 1);
        let mut config = client.config().clone();
        config.api_key = Secret::new("wrong");
        client = Client::new(config, None).expect("client");
        let records: Vec<Value> = (0..20_000)
            .map(|i| retail(&format!("x-{i}"), 1.0))
            .collect();
        let report = run(&client, records, Options::default()).await;
        assert!(matches!(report.error, Some(Error::Auth { .. })));
        assert_eq!(report.accepted, 0);
        assert_eq!(report.failures.len() as u64, report.total);
        assert!(report.total < 20_000, "stopped reading: {}", report.total);
    }

    #[tokio::test]
    async fn an_answer_that_is_not_an_acceptance_is_retried_and_never_counted() {
        let h = emulator().await;
        let client = client_for(&h, Limits::unlimited(), 4);
        let records: Vec<Value> = (0..30).map(|i| retail(&format!("h-{i}"), 1.0)).collect();
        for mode in [Hostile::Html, Hostile::NotArray, Hostile::Truncated] {
            for batch_size in [1, 10] {
                h.state.clear_published();
                // A few answers are a proxy's, then the service's own come through.
                h.state.set_hostile(Some(HostileRule {
                    mode,
                    path: "/v2/webhook".into(),
                    remaining: Some(3),
                }));
                let options = Options {
                    batch_size,
                    ..Options::default()
                };
                let report = run(&client, records.clone(), options).await;
                assert_eq!(
                    report.accepted,
                    30,
                    "{mode:?}: {:?}",
                    report.failures.first()
                );
                assert_eq!(stored(&h, "us").len(), 30, "{mode:?}");
                assert!(report.retries >= 3, "{mode:?}: {}", report.retries);
            }
        }
    }

    #[tokio::test]
    async fn a_proxy_that_never_lets_through_fails_every_record_with_its_answer() {
        let h = emulator().await;
        let client = client_for(&h, Limits::unlimited(), 1);
        h.state.set_hostile(Some(HostileRule {
            mode: Hostile::Html,
            path: "/v2/webhook".into(),
            remaining: None,
        }));
        let records: Vec<Value> = (0..5).map(|i| retail(&format!("p-{i}"), 1.0)).collect();
        let report = run(&client, records, Options::default()).await;
        assert_eq!(report.accepted, 0);
        assert_eq!(report.failures.len(), 5);
        assert_eq!(h.state.published_len(), 0);
        for f in &report.failures {
            assert!(
                f.message.contains("not the service's acceptance"),
                "{}",
                f.message
            );
            assert!(f.message.contains("<html>"), "{}", f.message);
            assert!(f.record.is_some());
        }
    }

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

    #[tokio::test]
    async fn a_webhook_that_stays_rate_limited_stops_with_a_rate_limit_error() {
        let h = emulator().await;
        h.state.set_hostile(Some(HostileRule {
            mode: Hostile::Status(429),
            path: "/v2/webhook".into(),
            remaining: None,
        }));
        let client = client_for(&h, Limits::unlimited(), 0);
        let records: Vec<Value> = (0..400).map(|i| retail(&format!("r-{i}"), 1.0)).collect();
        let report = run(&client, records, Options::default()).await;
        assert_eq!(report.accepted, 0);
        match &report.error {
            Some(Error::Status {
                status: 429,
                message,
                ..
            }) => {
                assert!(message.contains("publishing stopped"), "{message}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn jsonl_source_numbers_records_and_lines() {
        let dir = std::env::temp_dir().join(format!("sv-publish-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("records.jsonl");
        std::fs::write(&path, "\u{feff}{\"a\":1}\n\n  {\"b\":2}\r\n{\"c\":3}").expect("write");
        let (mut rx, feeder) = jsonl_source(path.clone());
        let mut got = Vec::new();
        while let Some(chunk) = rx.recv().await {
            for input in chunk {
                if let Input::Text { index, line, text } = input {
                    got.push((index, line, text));
                }
            }
        }
        feeder.await.expect("join").expect("read");
        assert_eq!(
            got,
            [
                (0, Some(1), "{\"a\":1}".to_owned()),
                (1, Some(3), "{\"b\":2}".to_owned()),
                (2, Some(4), "{\"c\":3}".to_owned()),
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
        let (_rx, feeder) = jsonl_source(dir.join("missing.jsonl"));
        assert!(feeder.await.expect("join").is_err());
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

    #[test]
    fn key_of_text_matches_the_validator() {
        for v in [
            retail("k", 1.0),
            json!({"dataType": "other", "locationId": "l", "eventUniqueId": "e"}),
            json!({"dataType": "retail", "transactionId": 5}),
            json!([1, 2]),
            json!("x"),
        ] {
            assert_eq!(
                key_of_text(&v.to_string()).expect("json"),
                validate::upsert_key(&v)
            );
        }
        assert!(key_of_text("{").is_err());
    }
}
