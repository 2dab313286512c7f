//! What a publish tells its caller: the failure of a record and its kind, the report of a whole
//! publish, its progress.

use std::sync::Arc;
use std::time::Duration;

use super::prepare::prepare;

use super::Input;
use crate::client::error::Error;
use crate::webhook::Problem;

/// Why a record was not accepted, in one word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Kept back before sending: errors under its model, not JSON, larger than a body.
    Invalid,
    /// The service refused it (a 4xx other than 429).
    Refused,
    /// No success after every retry, the last answer a 429 or a 5xx.
    Failed,
    /// Publishing was cancelled (Ctrl-C) before the service accepted it, with no request of
    /// it in flight.
    Interrupted,
    /// Never left the machine: publishing stopped on an error that concerns every record
    /// before it was sent, or every request of it found the service unreachable.
    NotSent,
    /// Sent, but nothing proves either way whether the service stored it: every answer was
    /// a page that is not the API's (a proxy, a captive portal), none came (the service
    /// unreachable, the connection cut, or publishing stopped or was cancelled with its request
    /// in flight), or its body was refused with the words of a refusal found systematic, naming
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
pub(super) fn scrubbed<S: serde::Serializer>(
    text: &str,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&crate::client::redact::scrub(text))
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

pub(super) fn seconds<S: serde::Serializer>(
    d: &Duration,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

pub(super) fn error_words<S: serde::Serializer>(
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
pub struct PublishProgress {
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
pub type PublishProgressSink = Arc<dyn Fn(PublishProgress) + Send + Sync>;
