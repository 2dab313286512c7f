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

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
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
use super::error::{Error, Result};
use super::http::{Arrays, Call, Class};
use super::stats::Tally;
use super::Client;
use crate::client::words;
use crate::webhook::Problem;
use answer::Stored;
use judge::{Judge, PROBES, STOP_AFTER};

mod answer;
pub mod columns;
pub mod json;
mod judge;
mod prepare;
mod source;

pub use prepare::check_text;
use prepare::{prepare, Prepared};
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
    /// Sent, but nothing proves either way whether the service stored it: every answer was
    /// a page that is not the API's (a proxy, a captive portal), none came before publishing
    /// stopped, or its body was refused with the words of a refusal found systematic, naming
    /// no record, and it was not posted alone. Publishing it again is safe (the service
    /// upserts).
    Unconfirmed,
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
    /// `not sent`, `unconfirmed`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Invalid => "invalid",
            FailureKind::Refused => "refused",
            FailureKind::Failed => "failed",
            FailureKind::Interrupted => "interrupted",
            FailureKind::NotSent => "not sent",
            FailureKind::Unconfirmed => "unconfirmed",
        }
    }
}

impl serde::Serialize for FailureKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A text as it may be shown or handed on: with anything that looks like a secret masked.
fn scrubbed<S: serde::Serializer>(text: &str, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&super::redact::scrub(text))
}

/// A record that was not accepted, and why. Serialized (for the bindings) with the record's
/// `transactionId` under the webhook's own name and the message scrubbed of secrets.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Failure {
    /// Why, in one word.
    pub kind: FailureKind,
    /// Position in the source (0-based).
    pub index: u64,
    /// Line number in a file (1-based), when the source is one.
    pub line: Option<u64>,
    /// The record's `transactionId`, when it has a string one.
    #[serde(rename = "transactionId")]
    pub transaction_id: Option<String>,
    /// The HTTP status of the refusal; None when the record was not sent or got no answer.
    pub status: Option<u16>,
    /// Validation problems (errors and warnings), when validation kept it back.
    pub problems: Vec<Problem>,
    /// What happened, lowercase: the service's message for a refusal.
    #[serde(serialize_with = "scrubbed")]
    pub message: String,
    /// The record as JSON text, ready to publish again (None if it could not be serialized).
    pub record: Option<String>,
}

/// What a publish did: every record taken from the source is accepted or in `failures`.
/// Serialized (for the bindings) with `elapsed` in seconds and `error` as its scrubbed words.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Records taken from the source.
    pub total: u64,
    /// Records that left the machine at least once.
    pub sent: u64,
    /// Records the service accepted.
    pub accepted: u64,
    /// Records not accepted, in source order.
    pub failures: Vec<Failure>,
    /// Requests that left the machine, retries included: each is one of the day's quota.
    pub requests: u64,
    /// Requests sent again by this client during the publish (all its calls).
    pub retries: u64,
    /// 429 answers this client received during the publish.
    pub rate_limited: u64,
    /// Wall time.
    #[serde(serialize_with = "seconds")]
    pub elapsed: Duration,
    /// Stopped by `cancel`: records taken but not yet accepted are failures.
    pub interrupted: bool,
    /// Stopped by an error that concerns every record (e.g. credentials refused).
    #[serde(serialize_with = "error_words")]
    pub error: Option<Error>,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

fn error_words<S: serde::Serializer>(
    e: &Option<Error>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match e {
        Some(e) => s.serialize_str(&e.clone().scrubbed().to_string()),
        None => s.serialize_none(),
    }
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
    /// Requests sent.
    pub requests: u64,
}

/// Receives progress updates.
pub type ProgressSink = Arc<dyn Fn(Progress) + Send + Sync>;

/// The outcome of one record of a batch.
#[derive(Debug, Clone)]
enum Outcome {
    Accepted,
    Failed {
        kind: FailureKind,
        status: Option<u16>,
        message: String,
        problems: Vec<Problem>,
    },
}

impl Outcome {
    fn failed(kind: FailureKind, status: Option<u16>, message: String) -> Outcome {
        Outcome::Failed {
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
    outcomes: Mutex<Vec<Option<Outcome>>>,
    /// Records that left the machine at least once.
    posted: Mutex<Vec<bool>>,
    /// The request in flight (a batch holds at most one at a time).
    posting: Mutex<Option<Posting>>,
    /// Posted with this many rounds already used.
    round: u32,
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
        }
    }

    fn set(&self, idx: &[usize], outcome: &Outcome) {
        let mut o = locked(&self.outcomes);
        for &i in idx {
            o[i] = Some(outcome.clone());
        }
    }

    fn accepted(&self, i: usize) -> bool {
        matches!(locked(&self.outcomes).get(i), Some(Some(Outcome::Accepted)))
    }

    /// Whether record `i` was refused alone with a message that ends with `words`
    /// (normalized).
    fn refused_with(&self, i: usize, words: &str) -> bool {
        matches!(
            locked(&self.outcomes).get(i),
            Some(Some(Outcome::Failed { kind: FailureKind::Refused, message, .. }))
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

    fn take_outcomes(&self) -> Vec<Option<Outcome>> {
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

/// Shared by the dispatcher and its batch tasks.
struct Shared {
    client: Client,
    url: Url,
    route: &'static str,
    tally: Arc<Tally>,
    /// `batch_size="auto"`: fall back to one record per request if arrays are refused.
    fallback: bool,
    /// What the publish has learnt of refusals that name no record.
    judge: Mutex<Judge>,
}

impl Shared {
    fn judge(&self) -> std::sync::MutexGuard<'_, Judge> {
        locked(&self.judge)
    }

    /// The webhook request of `body`, counted in the publish's tally (and in `sent`).
    fn call(&self, body: Bytes, sent: Option<Arc<AtomicU64>>) -> Call {
        Call {
            method: Method::POST,
            url: self.url.clone(),
            route: self.route,
            body: Some(body),
            class: Class::Publish,
            tally: Some(self.tally.clone()),
            sent,
        }
    }
}

/// The body of `recs`: one object alone when `as_array` is false and there is one record.
fn body_of(recs: &[&Prepared], as_array: bool) -> Bytes {
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

/// The message of a record refused with `status` (None: in a 2xx answer), in the service's
/// words.
fn refusal_message(status: Option<u16>, words: &str) -> String {
    match status {
        Some(s) => format!("the service refused the record ({s}): {words}"),
        None => format!("the service's answer lists the record as not accepted: {words}"),
    }
}

/// Words compared across refusals: lowercase, digits and spacing folded.
fn normalized(words: &str) -> String {
    let folded: String = words
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect();
    folded.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Errors after which no other record can succeed either.
fn is_fatal(e: &Error) -> bool {
    matches!(
        e,
        Error::Auth { .. } | Error::Config(_) | Error::Closed | Error::Quota { .. }
    )
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Posts the records `idx` of the batch (an array when more than one, or when `as_array`),
/// and reads what the answer proves about each. `parent` holds the normalized words of the
/// refusal of the body these records were split from, if they were.
fn post_range<'a>(
    shared: &'a Shared,
    batch: &'a Batch,
    idx: Vec<usize>,
    as_array: bool,
    parent: Option<String>,
) -> BoxFuture<'a, TaskEnd> {
    Box::pin(async move {
        let recs: Vec<&Prepared> = idx.iter().map(|&i| &batch.recs[i]).collect();
        let sent = batch.begin(&idx);
        let call = shared.call(body_of(&recs, as_array), Some(sent.clone()));
        let read = |body: Bytes| match answer::success(&body, &recs) {
            Stored::NoProof => Err(Error::Decode {
                url: shared.url.path().to_owned(),
                detail: format!(
                    "the answer is not the API's (no proof that the service stored the \
                     record{}): it starts with `{}`",
                    if recs.len() == 1 { "" } else { "s" },
                    super::http::body_start(&body)
                ),
            }),
            said => Ok(said),
        };
        let result = shared.client.http().send_checked(&call, read).await;
        batch.end();
        // A refusal (400, 422) naming records, or none.
        let refusal = match &result {
            Err(Error::Status {
                status: 400 | 422,
                body,
                ..
            }) => Some(answer::refusal(body.as_bytes(), &recs)),
            _ => None,
        };
        if !matches!(refusal, Some(None)) {
            shared.judge().answered();
        }
        match result {
            Ok(Stored::All) => {
                accept(shared, batch, &idx);
                TaskEnd::default()
            }
            Ok(Stored::Named {
                failed,
                rest_stored,
            }) => named(shared, batch, idx, failed, rest_stored, None, as_array).await,
            Ok(Stored::Unnamed(words)) => {
                refused_whole(shared, batch, idx, None, words, parent).await
            }
            Ok(Stored::NoProof) => unreachable_no_proof(batch, &idx),
            Err(Error::Status {
                status, body, url, ..
            }) if matches!(status, 400 | 422) => {
                if let Some(Some(Stored::Named {
                    failed,
                    rest_stored,
                })) = refusal
                {
                    return named(
                        shared,
                        batch,
                        idx,
                        failed,
                        rest_stored,
                        Some(status),
                        as_array,
                    )
                    .await;
                }
                let words = words::of_body(body.as_bytes())
                    .unwrap_or_else(|| "no details in the answer".to_owned());
                let norm = normalized(&words);
                let whole = idx.len() > 1 && idx.len() == batch.recs.len();
                let systematic = shared.judge().is_systematic(&norm);
                let end = if status == 400 && as_array && shared.fallback && !systematic {
                    arrays_refused(shared, batch, idx.clone(), words.clone()).await
                } else {
                    refused_whole(
                        shared,
                        batch,
                        idx.clone(),
                        Some(status),
                        words.clone(),
                        parent,
                    )
                    .await
                };
                let none_accepted = !idx.iter().any(|&i| batch.accepted(i));
                if whole && none_accepted && shared.judge().refused_whole(&norm) {
                    let message = format!(
                        "the service refused {STOP_AFTER} arrays in a row whole ({status}), naming \
                         no record, with the words it refused records alone with: {words}; \
                         publishing stopped (fix what those words name, then publish the records \
                         not accepted again)"
                    );
                    return merge(
                        end,
                        TaskEnd {
                            fatal: Some(Error::Status {
                                status,
                                body,
                                url,
                                message,
                            }),
                            ..TaskEnd::default()
                        },
                    );
                }
                end
            }
            Err(Error::Status { status: 413, .. }) if idx.len() > 1 => {
                // Too large as a whole: halves, with no refusal of the records to compare.
                split(shared, batch, idx, None).await
            }
            Err(Error::Status {
                status: 413, body, ..
            }) => {
                let words = words::of_body(body.as_bytes())
                    .unwrap_or_else(|| "the body is too large".to_owned());
                refused_whole(shared, batch, idx, Some(413), words, None).await
            }
            Err(e @ Error::Decode { .. }) => {
                // A 2xx that is not the API's, after every retry: neither accepted nor refused.
                batch.set(
                    &idx,
                    &Outcome::failed(FailureKind::Unconfirmed, None, e.to_string()),
                );
                TaskEnd {
                    unconfirmed: true,
                    last: Some(e),
                    ..TaskEnd::default()
                }
            }
            Err(e) => {
                let status = match &e {
                    Error::Status { status, .. } => Some(*status),
                    Error::Auth { status, .. } => *status,
                    _ => None,
                };
                let left = sent.load(Ordering::Relaxed) > 0;
                let kind = match &e {
                    // Held back by the day's quota before it left: never sent.
                    Error::Quota { .. } | Error::Closed if !left => FailureKind::NotSent,
                    _ => FailureKind::of_status(status),
                };
                let message = match kind {
                    FailureKind::NotSent => format!("not sent: {e}"),
                    _ => e.to_string(),
                };
                batch.set(&idx, &Outcome::failed(kind, status, message));
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

/// `read` turns no proof into an error, so it never comes as a value; were it to, its
/// records are unconfirmed.
fn unreachable_no_proof(batch: &Batch, idx: &[usize]) -> TaskEnd {
    batch.set(
        idx,
        &Outcome::failed(
            FailureKind::Unconfirmed,
            None,
            "the answer is not the API's: no proof that the service stored it".to_owned(),
        ),
    );
    TaskEnd {
        unconfirmed: true,
        ..TaskEnd::default()
    }
}

/// The answer names the records of `idx` that failed: they are refused with the service's
/// words; the others are accepted, or, when a count says they were not stored either (a
/// service that stores all or nothing), posted again without the failed ones.
async fn named(
    shared: &Shared,
    batch: &Batch,
    idx: Vec<usize>,
    failed: Vec<answer::Named>,
    rest_stored: bool,
    status: Option<u16>,
    as_array: bool,
) -> TaskEnd {
    let mut is_failed = vec![false; idx.len()];
    for f in failed {
        is_failed[f.pos] = true;
        batch.set(
            &[idx[f.pos]],
            &Outcome::Failed {
                kind: FailureKind::Refused,
                status,
                message: refusal_message(status, &f.words),
                problems: f.problems,
            },
        );
    }
    let rest: Vec<usize> = idx
        .iter()
        .zip(&is_failed)
        .filter(|(_, f)| !**f)
        .map(|(i, _)| *i)
        .collect();
    if rest.is_empty() {
        return TaskEnd::default();
    }
    if rest_stored {
        accept(shared, batch, &rest);
        return TaskEnd::default();
    }
    post_range(shared, batch, rest, as_array, None).await
}

/// The service refused the records `idx` as a whole, naming none. One record is refused with
/// the service's words. More are split in halves to find those at fault, unless the refusal is
/// systematic: when a part of a refused body is refused with the same words, [`PROBES`] of its
/// records are posted alone, and if each is refused the same way the refusal is found
/// systematic (a refusal of every record would otherwise cost 2n - 1 requests). From then on,
/// until a record is accepted, a body refused with those words is not split: its records are
/// unconfirmed, since a service that stores the valid records of a refused body may have
/// stored some of them, and nothing says which.
async fn refused_whole(
    shared: &Shared,
    batch: &Batch,
    idx: Vec<usize>,
    status: Option<u16>,
    words: String,
    parent: Option<String>,
) -> TaskEnd {
    if idx.len() == 1 {
        batch.set(
            &idx,
            &Outcome::failed(
                FailureKind::Refused,
                status,
                refusal_message(status, &words),
            ),
        );
        return TaskEnd::default();
    }
    let norm = normalized(&words);
    let unjudged = Outcome::failed(
        FailureKind::Unconfirmed,
        status,
        judge::unjudged(status, &words),
    );
    if shared.judge().is_systematic(&norm) {
        batch.set(&idx, &unjudged);
        return TaskEnd::default();
    }
    if idx.len() > PROBES && parent.as_deref() == Some(norm.as_str()) {
        let probes = [idx[0], idx[idx.len() / 2], idx[idx.len() - 1]];
        let mut end = TaskEnd::default();
        for p in probes {
            end = merge(end, post_range(shared, batch, vec![p], false, None).await);
        }
        let rest: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|i| !probes.contains(i))
            .collect();
        if probes.iter().all(|&p| batch.refused_with(p, &norm)) {
            shared.judge().found(norm);
            batch.set(&rest, &unjudged);
            return end;
        }
        return merge(end, split(shared, batch, rest, Some(norm)).await);
    }
    split(shared, batch, idx, Some(norm)).await
}

/// The records `idx` of `batch` were accepted.
fn accept(shared: &Shared, batch: &Batch, idx: &[usize]) {
    batch.set(idx, &Outcome::Accepted);
    shared.judge().accepted();
}

/// Posts `idx` in two halves, one after the other, so that a batch never holds more than one
/// request.
async fn split(shared: &Shared, batch: &Batch, idx: Vec<usize>, parent: Option<String>) -> TaskEnd {
    if idx.len() == 1 {
        return post_range(shared, batch, idx, false, parent).await;
    }
    let mid = idx.len() / 2;
    let a = post_range(shared, batch, idx[..mid].to_vec(), false, parent.clone()).await;
    let b = post_range(shared, batch, idx[mid..].to_vec(), false, parent).await;
    merge(a, b)
}

/// An array body refused with 400 naming no record ("auto" batches): is it the array the
/// service refuses, or a record in it? Its first record alone, then the same record in an
/// array of one, tell (once per client). Arrays refused: the batch's other records go again
/// one per request, as every record of the client from now on; otherwise the refusal is
/// handled as any other.
async fn arrays_refused(shared: &Shared, batch: &Batch, idx: Vec<usize>, words: String) -> TaskEnd {
    let webhook = &shared.client.http().webhook;
    match webhook.arrays() {
        Arrays::Refused => {
            return TaskEnd {
                singly: true,
                ..TaskEnd::default()
            }
        }
        Arrays::Accepted => return refused_whole(shared, batch, idx, Some(400), words, None).await,
        Arrays::Unknown => {}
    }
    let first = idx[0];
    let alone = post_range(shared, batch, vec![first], false, None).await;
    if !batch.accepted(first) {
        // The first record is refused alone too: it is at fault (perhaps with others).
        let rest = idx[1..].to_vec();
        if rest.is_empty() {
            return alone;
        }
        let rest = post_range(shared, batch, rest, false, None).await;
        return merge(alone, rest);
    }
    let recs = [&batch.recs[first]];
    let call = shared.call(body_of(&recs, true), None);
    let one = shared
        .client
        .http()
        .send_checked(&call, |body: Bytes| Ok(answer::success(&body, &recs)))
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
        Ok(_) => {
            webhook.accept_arrays();
            let rest = idx[1..].to_vec();
            if rest.is_empty() {
                return alone;
            }
            let rest = post_range(shared, batch, rest, false, None).await;
            merge(alone, rest)
        }
        // No verdict (the service failed): the records without an outcome go again.
        Err(_) => TaskEnd {
            singly: true,
            ..TaskEnd::default()
        },
    }
}

fn merge(a: TaskEnd, b: TaskEnd) -> TaskEnd {
    TaskEnd {
        retryable: a.retryable || b.retryable,
        unconfirmed: a.unconfirmed || b.unconfirmed,
        fatal: a.fatal.or(b.fatal),
        last: b.last.or(a.last),
        singly: a.singly || b.singly,
    }
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

/// The state of one publish, owned by the dispatcher loop.
struct Dispatcher {
    shared: Arc<Shared>,
    options: Options,
    in_flight_max: usize,
    /// Records taken from the source but not yet in a batch, each with a key not held by any
    /// other record in `ready` or in flight.
    ready: VecDeque<Prepared>,
    /// Records waiting for an earlier record with the same key to finish.
    blocked: HashMap<u64, VecDeque<Prepared>, Keyed>,
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
    fn admit(&mut self, rec: Prepared) {
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

    /// Batches that may be in flight now (see [`Judge::room`]).
    fn room(&self) -> usize {
        self.shared.judge().room(self.in_flight_max)
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
            let idx: Vec<usize> = (0..batch.recs.len()).collect();
            let end = post_range(&shared, &batch, idx, as_array, None).await;
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
        } else if end.retryable || end.unconfirmed {
            self.failed_in_a_row += 1;
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
        let mut again = Vec::new();
        for ((mut rec, outcome), p) in batch.recs.into_iter().zip(outcomes).zip(posted) {
            self.count_sent(&mut rec, p);
            match outcome {
                Some(Outcome::Accepted) => {
                    self.report.accepted += 1;
                    self.release(rec.key);
                }
                Some(Outcome::Failed {
                    kind: FailureKind::Failed,
                    ..
                }) if retry_round => {
                    // Keeps its key held: nothing newer with that key may overtake it.
                    again.push(rec);
                }
                None if end.singly => {
                    // Arrays refused: again, one record per body.
                    self.again.push_back(Batch::new(vec![rec], round));
                }
                outcome => {
                    let key = rec.key;
                    let outcome = outcome.unwrap_or_else(|| {
                        Outcome::failed(
                            FailureKind::NotSent,
                            None,
                            "not sent: publishing stopped".to_owned(),
                        )
                    });
                    self.fail(rec, outcome);
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

    /// Counts a record in `sent` the first time it is known to have left the machine.
    fn count_sent(&mut self, rec: &mut Prepared, posted: bool) {
        if posted && !rec.posted {
            self.report.sent += 1;
        }
        rec.posted |= posted;
    }

    fn fail(&mut self, rec: Prepared, outcome: Outcome) {
        match outcome {
            Outcome::Accepted => self.report.accepted += 1,
            Outcome::Failed {
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
    /// flight are given [`DRAIN`] to bring their answers, which count as they say; a request
    /// that left and got no answer leaves its records unconfirmed (interrupted, when
    /// cancelled).
    async fn stop(&mut self, rx: &mut mpsc::Receiver<Vec<Input>>, kind: FailureKind, why: &str) {
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
                                let (k, m) = if kind == FailureKind::Interrupted {
                                    (kind, "not confirmed: publishing was interrupted while its request was in flight (it may have been stored)".to_owned())
                                } else {
                                    (FailureKind::Unconfirmed, format!("sent, but no answer came before publishing stopped (it may have been stored): {why}"))
                                };
                                Outcome::failed(k, None, m)
                            }
                            None => Outcome::failed(kind, None, why.to_owned()),
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
            self.fail(rec, Outcome::failed(kind, None, why.to_owned()));
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
            requests: self.shared.tally.sent.load(Ordering::Relaxed),
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
                tally: Arc::default(),
                fallback: options.fallback,
                judge: Mutex::new(Judge::default()),
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
mod tests {
    use super::*;

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
