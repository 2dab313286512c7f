//! What the webhook's answer proves about the records posted. API.md does not show the answer,
//! so every plausible shape is read, and the rule is: the service is believed unless it says
//! otherwise. A 2xx whose body is JSON of any shape, or empty, accepts every record posted,
//! unless the body counts fewer accepted or lists records as failed; a 2xx that is plainly not
//! the API's (an HTML page: a proxy, a captive portal, a login page) proves nothing. A refusal
//! (400, 422) may name the records at fault, by position or by id, under any plausible key.

use serde_json::{Map, Value};

use super::prepare::Prepared;
use crate::client::words;
use crate::webhook::Problem;

/// Short plain-text bodies that are an acknowledgement (compared lowercase, without
/// punctuation). Any other text is no proof: the service speaks JSON.
const ACKNOWLEDGEMENTS: [&str; 10] = [
    "ok",
    "accepted",
    "success",
    "succeeded",
    "received",
    "queued",
    "created",
    "done",
    "stored",
    "true",
];

/// Keys of lists whose entries are failures unless they say otherwise.
const FAILURE_LISTS: [&str; 11] = [
    "errors",
    "failures",
    "failed",
    "rejected",
    "invalid",
    "failedRecords",
    "failed_records",
    "rejectedRecords",
    "rejected_records",
    "invalidRecords",
    "invalid_records",
];
/// Keys of lists of per-record results, whose entries are failures only when they say so.
const RESULT_LISTS: [&str; 4] = ["results", "records", "items", "details"];
/// Keys of an entry that give the record's position in the body.
const POSITION_KEYS: [&str; 9] = [
    "index",
    "idx",
    "position",
    "recordIndex",
    "record_index",
    "record",
    "row",
    "item",
    "i",
];
/// Keys of an entry that give the record's id (its upsert key's field).
const ID_KEYS: [&str; 9] = [
    "transactionId",
    "transaction_id",
    "eventUniqueId",
    "event_unique_id",
    "id",
    "key",
    "recordId",
    "record_id",
    "externalId",
];
/// Keys of an entry that give the field at fault.
const PATH_KEYS: [&str; 6] = ["path", "field", "property", "loc", "pointer", "attribute"];
/// Counts of records accepted.
const ACCEPTED_COUNTS: [&str; 8] = [
    "accepted",
    "acceptedCount",
    "accepted_count",
    "succeeded",
    "successCount",
    "success_count",
    "stored",
    "storedCount",
];
/// Counts of records that failed.
const FAILED_COUNTS: [&str; 8] = [
    "failed",
    "failedCount",
    "failed_count",
    "rejected",
    "rejectedCount",
    "rejected_count",
    "errorCount",
    "error_count",
];
/// `status` values of an entry or an answer that say it failed, and that it succeeded.
const FAILED_STATUSES: [&str; 7] = [
    "error", "failed", "failure", "rejected", "invalid", "refused", "denied",
];
const OK_STATUSES: [&str; 9] = [
    "ok",
    "accepted",
    "success",
    "succeeded",
    "created",
    "stored",
    "upserted",
    "updated",
    "queued",
];

/// A record the answer names as failed: its position among the records posted, the
/// service's words and the problems it listed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Named {
    pub pos: usize,
    pub words: String,
    pub problems: Vec<Problem>,
}

/// What an answer proves.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Stored {
    /// Every record posted was accepted.
    All,
    /// The answer names the records that failed; the others were stored unless `rest_stored`
    /// is false (a count of accepted records says they were not: a service that stores all
    /// or nothing).
    Named {
        failed: Vec<Named>,
        rest_stored: bool,
    },
    /// Not every record was accepted, and the answer does not say which.
    Unnamed(String),
    /// Not an answer of the API: no proof either way.
    NoProof,
}

/// What a 2xx answer with `body` proves about `recs`, posted together.
pub(super) fn success(body: &[u8], recs: &[&Prepared]) -> Stored {
    let n = recs.len();
    let text = String::from_utf8_lossy(&body[..body.len().min(1 << 20)]);
    let trimmed = text.trim_start_matches('\u{feff}').trim();
    if trimmed.is_empty() {
        return Stored::All;
    }
    let Ok(v) = serde_json::from_str::<Value>(trimmed) else {
        return if is_acknowledgement(trimmed) {
            Stored::All
        } else {
            Stored::NoProof
        };
    };
    let Value::Object(map) = &v else {
        // A JSON list, string or number from the API: nothing in it says otherwise.
        return Stored::All;
    };
    if let Some(stored_by) = named(map, recs) {
        return stored_by;
    }
    if let Some(k) = count(map, &ACCEPTED_COUNTS) {
        if k < n as u64 {
            return Stored::Unnamed(format!(
                "the service counted {k} of the {n} records posted as accepted"
            ));
        }
        return Stored::All;
    }
    if let Some(k) = count(map, &FAILED_COUNTS).filter(|k| *k > 0) {
        return Stored::Unnamed(format!(
            "the service counted {k} of the {n} records posted as failed"
        ));
    }
    if says_failed(map) {
        let w = words::of_json(&v, 0).unwrap_or_else(|| "it says the post failed".into());
        return Stored::Unnamed(w);
    }
    Stored::All
}

/// The failed records a refusal's `body` names among `recs`, when it names them all.
pub(super) fn refusal(body: &[u8], recs: &[&Prepared]) -> Option<Stored> {
    let v: Value = serde_json::from_slice(body).ok()?;
    named(v.as_object()?, recs)
}

/// Whether a short text body is an acknowledgement (`OK`, `accepted` ...).
fn is_acknowledgement(text: &str) -> bool {
    if text.len() > 32 || words::looks_like_html(text) {
        return false;
    }
    let word: String = text
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .collect::<String>()
        .trim()
        .to_lowercase();
    ACKNOWLEDGEMENTS.contains(&word.as_str())
}

fn count(map: &Map<String, Value>, keys: &[&str]) -> Option<u64> {
    keys.iter().find_map(|k| match map.get(*k)? {
        Value::Number(n) => n.as_u64(),
        _ => None,
    })
}

/// `success: false`, `ok: false`, or a `status` that says it failed.
fn says_failed(map: &Map<String, Value>) -> bool {
    let flag = |k: &str| matches!(map.get(k), Some(Value::Bool(false)));
    let status = map
        .get("status")
        .and_then(Value::as_str)
        .is_some_and(|s| FAILED_STATUSES.contains(&s.to_ascii_lowercase().as_str()));
    flag("success") || flag("ok") || flag("accepted") || status
}

/// One entry of a list of failures or results.
struct AnswerEntry {
    pos: Option<usize>,
    id: Option<String>,
    /// The fields the entry gives (of the echoed record, when it echoes one): those of a
    /// record's upsert key name it when they are all there.
    named: Map<String, Value>,
    failed: bool,
    words: String,
    path: Option<String>,
}

/// The records the answer names as failed, when every entry it lists can be matched to a
/// record posted; None when it names none, or names one that cannot be matched.
fn named(map: &Map<String, Value>, recs: &[&Prepared]) -> Option<Stored> {
    let mut entries = Vec::new();
    for (keys, failing) in [(&FAILURE_LISTS[..], true), (&RESULT_LISTS[..], false)] {
        for key in keys {
            match map.get(*key) {
                Some(Value::Array(items)) => {
                    for item in items {
                        entries.push(entry(item, None, failing)?);
                    }
                }
                Some(Value::Object(by_key)) if failing => {
                    // `{"errors": {"3": "...", "T-17": [...]}}`
                    for (k, item) in by_key {
                        let (pos, id) = match k.parse::<usize>() {
                            Ok(p) => (Some(p), None),
                            Err(_) => (None, Some(k.clone())),
                        };
                        let e = match item {
                            Value::Object(_) => {
                                let e = entry(item, pos, true)?;
                                AnswerEntry {
                                    id: id.or(e.id),
                                    ..e
                                }
                            }
                            _ => AnswerEntry {
                                pos,
                                id,
                                named: Map::new(),
                                failed: true,
                                words: words::of_json(item, 0).unwrap_or_else(|| "refused".into()),
                                path: None,
                            },
                        };
                        entries.push(e);
                    }
                }
                _ => {}
            }
        }
    }
    let failures: Vec<AnswerEntry> = entries.into_iter().filter(|e| e.failed).collect();
    if failures.is_empty() {
        return None;
    }
    let n = recs.len();
    // Positions from 0, or from 1 when one of them is `n` and none is 0.
    let positions: Vec<usize> = failures.iter().filter_map(|e| e.pos).collect();
    let from_one = positions.contains(&n) && !positions.contains(&0);
    let keys: Vec<Vec<(&str, String)>> = if failures.iter().any(|e| e.pos.is_none()) {
        recs.iter().map(|r| key_of(&r.text)).collect()
    } else {
        Vec::new()
    };
    let mut failed: Vec<Named> = Vec::new();
    for e in failures {
        let pos = match (e.pos, &e.id) {
            (Some(p), _) => p.checked_sub(usize::from(from_one)).filter(|p| *p < n)?,
            (None, _) => {
                let mut matches = keys.iter().enumerate().filter(|(_, k)| names(&e, k));
                let (p, _) = matches.next()?;
                if matches.next().is_some() {
                    // Two records posted with one id: which of them failed is unknown.
                    return None;
                }
                p
            }
        };
        let problem = Problem {
            path: e.path.clone().unwrap_or_default(),
            message: e.words.clone(),
            severity: crate::webhook::Severity::Error,
        };
        match failed.iter_mut().find(|f| f.pos == pos) {
            Some(f) => {
                f.words = format!("{}; {}", f.words, e.words);
                f.problems.push(problem);
            }
            None => failed.push(Named {
                pos,
                words: e.words,
                problems: vec![problem],
            }),
        }
    }
    failed.sort_by_key(|f| f.pos);
    let rest_stored = count(map, &ACCEPTED_COUNTS).is_none_or(|k| k >= (n - failed.len()) as u64);
    Some(Stored::Named {
        failed,
        rest_stored,
    })
}

/// Reads one entry; None when it is of a shape that says nothing of a record.
fn entry(item: &Value, pos: Option<usize>, failing: bool) -> Option<AnswerEntry> {
    let as_pos = |v: &Value| match v {
        Value::Number(n) => n.as_u64().map(|p| p as usize),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    match item {
        Value::Number(_) => Some(AnswerEntry {
            pos: as_pos(item),
            id: None,
            named: Map::new(),
            failed: failing,
            words: "refused".into(),
            path: None,
        }),
        Value::String(s) => Some(AnswerEntry {
            // A list of ids, or of messages that name no record (then unmatched).
            pos,
            id: Some(s.clone()),
            named: Map::new(),
            failed: failing,
            words: "refused".into(),
            path: None,
        }),
        Value::Object(o) => {
            let pos = pos.or_else(|| POSITION_KEYS.iter().find_map(|k| as_pos(o.get(*k)?)));
            let id = ID_KEYS.iter().find_map(|k| match o.get(*k)? {
                Value::String(s) if !s.is_empty() => Some(s.clone()),
                _ => None,
            });
            // An echoed record names a record by its fields.
            let named = match o.get("record") {
                Some(Value::Object(rec)) => rec.clone(),
                _ => o.clone(),
            };
            let status = o
                .get("status")
                .and_then(Value::as_str)
                .map(str::to_ascii_lowercase);
            let ok_flag = ["success", "ok", "accepted"]
                .iter()
                .find_map(|k| o.get(*k).and_then(Value::as_bool));
            let has_error = ["error", "errors", "message", "reason"]
                .iter()
                .any(|k| o.get(*k).is_some_and(|v| !v.is_null()));
            let failed = match (ok_flag, status.as_deref()) {
                (Some(ok), _) => !ok,
                (None, Some(s)) if OK_STATUSES.contains(&s) => false,
                (None, Some(s)) if FAILED_STATUSES.contains(&s) => true,
                _ => failing || has_error,
            };
            let path = PATH_KEYS.iter().find_map(|k| match o.get(*k)? {
                Value::String(s) => Some(s.clone()),
                Value::Array(parts) => Some(
                    parts
                        .iter()
                        .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                        .collect::<Vec<_>>()
                        .join("."),
                ),
                _ => None,
            });
            let mut without_path = o.clone();
            for k in PATH_KEYS {
                without_path.remove(k);
            }
            let words = words::of_json(&Value::Object(without_path), 0)
                .filter(|w| !OK_STATUSES.contains(&w.to_ascii_lowercase().as_str()))
                .unwrap_or_else(|| "refused".into());
            let words = match &path {
                Some(p) if !p.is_empty() && !words.starts_with(p.as_str()) => {
                    format!("{p}: {words}")
                }
                _ => words,
            };
            Some(AnswerEntry {
                pos,
                id,
                named,
                failed,
                words,
                path,
            })
        }
        _ => None,
    }
}

/// The upsert key of a record given as JSON text, as its model declares it
/// ([`crate::webhook::upsert_fields`]); empty when it has none.
fn key_of(text: &[u8]) -> Vec<(&'static str, String)> {
    serde_json::from_slice::<Value>(text)
        .ok()
        .as_ref()
        .and_then(crate::webhook::upsert_fields)
        .unwrap_or_default()
}

/// Whether an entry names the record whose upsert key is `key`: it gives every field of the key
/// with the record's values, or an id equal to one of them and no key field with another value.
fn names(e: &AnswerEntry, key: &[(&str, String)]) -> bool {
    let given = |field: &str| e.named.get(field).and_then(Value::as_str);
    if key.is_empty() || key.iter().any(|(f, v)| given(f).is_some_and(|g| g != v)) {
        return false;
    }
    key.iter().all(|(f, _)| given(f).is_some())
        || e.id
            .as_ref()
            .is_some_and(|id| key.iter().any(|(_, v)| v == id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn recs(n: usize) -> Vec<Prepared> {
        (0..n)
            .map(|i| Prepared {
                index: i as u64,
                line: None,
                key: i as u64 + 1,
                text: Bytes::from(format!(r#"{{"dataType":"retail","transactionId":"T{i}"}}"#)),
                posted: false,
            })
            .collect()
    }

    fn stored_by(body: &str, n: usize) -> Stored {
        let r = recs(n);
        let refs: Vec<&Prepared> = r.iter().collect();
        success(body.as_bytes(), &refs)
    }

    fn failed_positions(s: &Stored) -> Vec<usize> {
        match s {
            Stored::Named { failed, .. } => failed.iter().map(|f| f.pos).collect(),
            other => panic!("not named: {other:?}"),
        }
    }

    #[test]
    fn other_records_are_named_by_their_location_and_event_id() {
        // One event id at two locations: two records, as the upsert key declares (`Model::key`).
        let other = |i: u64, location: &str| Prepared {
            index: i,
            line: None,
            key: i + 1,
            text: Bytes::from(format!(
                r#"{{"dataType":"other","locationId":"{location}","eventUniqueId":"E"}}"#
            )),
            posted: false,
        };
        let r = [other(0, "L1"), other(1, "L2")];
        let refs: Vec<&Prepared> = r.iter().collect();
        let body = r#"{"failed":[{"locationId":"L2","eventUniqueId":"E","reason":"bad"}]}"#;
        let s = refusal(body.as_bytes(), &refs).expect("named");
        assert_eq!(failed_positions(&s), vec![1]);
        let echoed = r#"{"failed":[{"record":{"locationId":"L1","eventUniqueId":"E"}}]}"#;
        let s = refusal(echoed.as_bytes(), &refs).expect("named");
        assert_eq!(failed_positions(&s), vec![0]);
        // The event id alone names neither.
        let body = r#"{"failed":[{"eventUniqueId":"E","reason":"bad"}]}"#;
        assert!(refusal(body.as_bytes(), &refs).is_none());
    }

    #[test]
    fn any_json_or_empty_2xx_accepts_every_record() {
        for body in [
            r#"{"accepted": 3}"#,
            r#"{"status":"accepted","transactionId":"T1","upserted":false}"#,
            "{}",
            r#"{"status":"ok"}"#,
            r#"{"success":true}"#,
            r#"{"received": 3}"#,
            r#"{"status":"queued"}"#,
            "",
            "  \n",
            "[]",
            "OK",
            "ok\n",
            "Accepted.",
        ] {
            assert_eq!(stored_by(body, 3), Stored::All, "{body:?}");
        }
    }

    #[test]
    fn a_page_that_is_not_the_apis_proves_nothing() {
        for body in [
            "<html><body>Sign in to continue</body></html>",
            "<!DOCTYPE html><title>Portal</title>",
            "Please log in at the portal before using the network",
        ] {
            assert_eq!(stored_by(body, 2), Stored::NoProof, "{body:?}");
        }
    }

    #[test]
    fn a_2xx_that_says_otherwise_is_believed() {
        assert!(matches!(
            stored_by(r#"{"accepted": 2}"#, 3),
            Stored::Unnamed(_)
        ));
        assert!(matches!(
            stored_by(r#"{"failed": 1}"#, 3),
            Stored::Unnamed(_)
        ));
        let nope = stored_by(r#"{"success": false, "message": "nope"}"#, 3);
        assert!(matches!(nope, Stored::Unnamed(w) if w == "nope"));
        assert_eq!(
            failed_positions(&stored_by(
                r#"{"accepted": 2, "errors": [{"index": 1, "message": "bad"}]}"#,
                3
            )),
            vec![1]
        );
    }

    #[test]
    fn refusals_name_records_by_position_or_id_under_any_key() {
        let r = recs(4);
        let refs: Vec<&Prepared> = r.iter().collect();
        for (body, want) in [
            (
                r#"{"errors":[{"index":2,"path":"items[0].quantity","message":"expected a number"}],"accepted":3}"#,
                vec![2],
            ),
            (
                r#"{"failed":[{"transactionId":"T3","reason":"bad status"}]}"#,
                vec![3],
            ),
            (
                r#"{"error":"validation_error","failures":[{"record":0,"field":"status","reason":"bad"}]}"#,
                vec![0],
            ),
            (r#"{"errors":{"1":["bad"],"T2":"worse"}}"#, vec![1, 2]),
            (
                r#"{"results":[{"index":0,"status":"ok"},{"index":1,"status":"error","message":"x"}]}"#,
                vec![1],
            ),
            (r#"{"rejected":["T0","T1"]}"#, vec![0, 1]),
            (r#"{"invalid":[4]}"#, vec![3]),
        ] {
            let s = refusal(body.as_bytes(), &refs).unwrap_or_else(|| panic!("{body}"));
            assert_eq!(failed_positions(&s), want, "{body}");
        }
        let problems = match refusal(
            br#"{"errors":[{"index":2,"path":"items[0].quantity","message":"expected a number"}]}"#,
            &refs,
        ) {
            Some(Stored::Named {
                failed,
                rest_stored,
            }) => {
                assert!(rest_stored);
                failed[0].problems.clone()
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(problems[0].path, "items[0].quantity");
        assert_eq!(problems[0].message, "items[0].quantity: expected a number");
    }

    #[test]
    fn what_cannot_be_matched_names_nothing() {
        let r = recs(4);
        let refs: Vec<&Prepared> = r.iter().collect();
        for body in [
            r#"{"message":"one or more records failed validation"}"#,
            r#"{"errors":["quantity must be a number"]}"#,
            r#"{"errors":[{"index":9,"message":"out of range"}]}"#,
            r#"{"errors":[{"message":"no position"}]}"#,
            "not json",
        ] {
            assert_eq!(refusal(body.as_bytes(), &refs), None, "{body}");
        }
    }

    #[test]
    fn a_count_of_none_accepted_means_the_rest_was_not_stored() {
        let r = recs(3);
        let refs: Vec<&Prepared> = r.iter().collect();
        match refusal(
            br#"{"errors":[{"index":0,"message":"bad"}],"accepted":0}"#,
            &refs,
        ) {
            Some(Stored::Named { rest_stored, .. }) => assert!(!rest_stored),
            other => panic!("{other:?}"),
        }
    }
}
