//! From what a source gives ([`Input`]) to a record ready to post ([`Prepared`]) or the [`Failure`]
//! that keeps it back: the fast check ([`scan`]) for a text, the careful path (serde_json and
//! the detailed validator) for what the fast check refuses or cannot judge, and the size limit.

use bytes::Bytes;
use serde_json::Value;

use super::{Failure, FailureKind, Input, MAX_BODY};
use crate::webhook::scan::scan;
use crate::webhook::{self, Problem, Severity};

/// A record ready to post.
#[derive(Debug)]
pub(super) struct Prepared {
    pub index: u64,
    pub line: Option<u64>,
    /// Its upsert key, hashed (0: none).
    pub key: u64,
    /// Its JSON text.
    pub text: Bytes,
    /// It left the machine at least once (in an earlier batch, when posted again).
    pub posted: bool,
}

impl Prepared {
    /// The record's `transactionId` (see [`transaction_id_of`]), for a failure.
    pub fn transaction_id(&self) -> Option<String> {
        transaction_id_of(&self.text)
    }

    /// The failure of this record: `kind`, `status` and `message`.
    pub fn failure(self, kind: FailureKind, status: Option<u16>, message: String) -> Failure {
        Failure {
            kind,
            index: self.index,
            line: self.line,
            transaction_id: self.transaction_id(),
            status,
            problems: Vec::new(),
            message,
            record: Some(String::from_utf8_lossy(&self.text).into_owned()),
        }
    }
}

/// The `transactionId` of a record given as JSON text, when its model's upsert key is that
/// field alone ([`webhook::Model::key`]: retail and restaurant records).
pub(super) fn transaction_id_of(text: &[u8]) -> Option<String> {
    let record: Value = serde_json::from_slice(text).ok()?;
    match webhook::upsert_fields(&record)?.as_slice() {
        [("transactionId", id)] => Some(id.clone()),
        _ => None,
    }
}

/// The errors of `problems`, three at most, for a failure's message.
pub(super) fn first_errors(problems: &[Problem]) -> String {
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

fn error(message: String) -> Problem {
    Problem {
        path: String::new(),
        message,
        severity: Severity::Error,
    }
}

/// Checks a record given as JSON text (valid UTF-8): [`Input::Ready`] with its key when it may
/// be posted, [`Input::Rejected`] with its problems when it is not JSON or (with `check`) has
/// errors under its model. The fast scan decides when it can; the careful path otherwise, so
/// that problems are reported as the detailed validator words them.
pub fn check_text(index: u64, line: Option<u64>, text: Bytes, check: bool) -> Input {
    // Only valid UTF-8 comes here (a `String`, or a line checked by the reader).
    let Ok(s) = std::str::from_utf8(&text) else {
        return Input::Rejected {
            index,
            line,
            problems: vec![error("not UTF-8".into())],
            text: None,
        };
    };
    if let Some(scanned) = scan(s, check) {
        if !check || scanned.conforms {
            return Input::Ready {
                index,
                line,
                key: scanned.key,
                text,
            };
        }
    }
    let value = match serde_json::from_str::<Value>(s) {
        Ok(v) => v,
        Err(e) => {
            return Input::Rejected {
                index,
                line,
                problems: vec![error(format!("not valid JSON: {e}"))],
                text: Some(s.to_owned()),
            }
        }
    };
    checked_value(index, line, &value, text, check)
}

/// The careful path of a record already parsed: the detailed validator (with `check`) and the
/// upsert key from the tree.
pub(super) fn checked_value(
    index: u64,
    line: Option<u64>,
    value: &Value,
    text: Bytes,
    check: bool,
) -> Input {
    if check {
        let problems = webhook::validate(value);
        if webhook::has_errors(&problems) {
            return Input::Rejected {
                index,
                line,
                problems,
                text: Some(String::from_utf8_lossy(&text).into_owned()),
            };
        }
    }
    let key = webhook::key_hash(value);
    Input::Ready {
        index,
        line,
        key,
        text,
    }
}

/// Turns an input into a record ready to post, or the failure that keeps it back.
pub(super) fn prepare(input: Input, check: bool) -> Result<Prepared, Box<Failure>> {
    match input {
        // Checked here, then taken as their producer's checked records are.
        Input::Text { index, line, text } => {
            prepare(check_text(index, line, Bytes::from(text), check), check)
        }
        Input::Value { index, value } => {
            let text = Bytes::from(value.to_string());
            prepare(checked_value(index, None, &value, text, check), check)
        }
        Input::Ready {
            index,
            line,
            key,
            text,
        } => {
            if text.len() + 2 > MAX_BODY {
                let message = format!(
                    "the record is {} bytes, over the webhook's body limit of 10 MB",
                    text.len()
                );
                return Err(Box::new(Failure {
                    kind: FailureKind::Invalid,
                    index,
                    line,
                    transaction_id: transaction_id_of(&text),
                    status: None,
                    message: message.clone(),
                    problems: vec![error(message)],
                    record: Some(String::from_utf8_lossy(&text).into_owned()),
                }));
            }
            Ok(Prepared {
                index,
                line,
                key,
                text,
                posted: false,
            })
        }
        Input::Rejected {
            index,
            line,
            problems,
            text,
        } => Err(Box::new(rejected(index, line, problems, text))),
    }
}

/// The failure of a record its producer or the checks refused.
pub(super) fn rejected(
    index: u64,
    line: Option<u64>,
    problems: Vec<Problem>,
    text: Option<String>,
) -> Failure {
    let message = match first_errors(&problems) {
        m if m.is_empty() => problems.first().map(Problem::to_string).unwrap_or_default(),
        m => m,
    };
    Failure {
        kind: FailureKind::Invalid,
        index,
        line,
        transaction_id: text
            .as_deref()
            .and_then(|t| transaction_id_of(t.as_bytes())),
        status: None,
        message,
        problems,
        record: text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn transaction_ids_are_those_of_retail_and_restaurant_records() {
        for (v, want) in [
            (
                json!({"dataType": "retail", "transactionId": "t"}),
                Some("t"),
            ),
            (
                json!({"dataType": "restaurant", "transactionId": "t"}),
                Some("t"),
            ),
            (json!({"dataType": "other", "transactionId": "t"}), None),
            (json!({"dataType": "retail", "transactionId": 5}), None),
            (json!({"dataType": "retail", "transactionId": ""}), None),
            (json!([1]), None),
        ] {
            let text = v.to_string();
            assert_eq!(transaction_id_of(text.as_bytes()).as_deref(), want, "{v}");
        }
    }

    #[test]
    fn texts_are_checked_the_fast_way_or_the_careful_way() {
        let good = json!({"dataType": "other", "schemaVersion": "1", "startTime": 1,
            "locationId": "l", "dataSourceId": "d", "eventUniqueId": "e", "eventType": "t"});
        let Input::Ready { key, .. } = check_text(0, None, Bytes::from(good.to_string()), true)
        else {
            panic!("ready")
        };
        assert_eq!(key, crate::webhook::key_hash(&good));
        let mut bad = good.clone();
        bad["storeId"] = json!("s");
        match check_text(1, Some(2), Bytes::from(bad.to_string()), true) {
            Input::Rejected { problems, line, .. } => {
                assert_eq!(line, Some(2));
                assert!(
                    problems.iter().any(|p| p.message.contains("legacy name")),
                    "{problems:?}"
                );
            }
            _ => panic!("rejected"),
        }
        assert!(matches!(
            check_text(1, None, Bytes::from(bad.to_string()), false),
            Input::Ready { .. }
        ));
        match check_text(2, None, Bytes::from_static(b"{\"a\":"), false) {
            Input::Rejected { problems, .. } => {
                assert!(problems[0].message.starts_with("not valid JSON"))
            }
            _ => panic!("rejected"),
        }
    }
}
