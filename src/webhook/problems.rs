//! The detailed validator: every problem of a record under its standard model, with its path,
//! a message that says what to fix (did-you-mean, legacy names) and its severity. It runs on
//! every record the emulator receives, and on the publishing paths only for a record their fast
//! check refused, so that problems are reported in one way whatever the source.

use std::fmt;

use serde_json::{Map, Value};

use super::messages::{kind, listed, shown_str, type_error};
use super::models::{
    model_named, Field, Kind, Model, COMMON_MODEL, DATA_TYPES, ITEM_TYPES, LEGACY, MODELS,
    RETAIL_ITEM, STATUSES,
};
use super::suggest::{suggest, suggest_field};
use crate::time::{parse_iso, IsoError};

/// How serious a [`Problem`] is: errors make the service reject the record, warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The record does not conform to its model.
    Error,
    /// The record conforms, but something looks wrong or relies on unstated behaviour.
    Warning,
}

/// One finding about a record: where (`items[3].unitPrice`), what, and how serious.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    /// Location in the record, e.g. `locationId` or `items[3].unitPrice`; empty for the record itself.
    pub path: String,
    /// Lowercase description with offending values in backticks.
    pub message: String,
    /// Whether the problem stops the record.
    pub severity: Severity,
}

impl Problem {
    pub(crate) fn error(path: String, message: String) -> Self {
        Self {
            path,
            message,
            severity: Severity::Error,
        }
    }

    pub(crate) fn warning(path: String, message: String) -> Self {
        Self {
            path,
            message,
            severity: Severity::Warning,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Validates one record (a JSON object) against its standard model; empty when it conforms.
///
/// Problems come in a deterministic order: top-level fields in model order, then unknown
/// top-level fields in the record's order, then each item (its fields, then its unknown fields).
#[must_use]
pub fn validate(record: &Value) -> Vec<Problem> {
    let mut out = Vec::new();
    let Some(obj) = record.as_object() else {
        out.push(Problem::error(
            String::new(),
            format!("expected a JSON object, found {}", kind(record)),
        ));
        return out;
    };
    let model = select_model(obj, &mut out);
    let items = check_object(obj, model.fields, Prefix::Top, &mut out);
    check_unknown_top(obj, model, &mut out);
    if let Some((elements, item_fields)) = items {
        for (i, element) in elements.iter().enumerate() {
            let Some(item) = element.as_object() else {
                out.push(Problem::error(
                    format!("items[{i}]"),
                    type_error("an object", element),
                ));
                continue;
            };
            // Items hold no nested items, so the returned array is always `None` here.
            let _ = check_object(item, item_fields, Prefix::Item(i), &mut out);
            check_unknown_item(item, item_fields, model, i, &mut out);
        }
    }
    out
}

/// True when any problem is an error (warnings do not stop a record).
#[must_use]
pub fn has_errors(problems: &[Problem]) -> bool {
    problems.iter().any(|p| p.severity == Severity::Error)
}

/// The upsert key of a record (see [`Model::key_text`]); None when absent.
#[must_use]
pub fn upsert_key(record: &Value) -> Option<String> {
    let obj = record.as_object()?;
    let model = model_named(obj.get("dataType")?.as_str()?)?;
    model.key_text(|name| obj.get(name)?.as_str())
}

/// The upsert key of a record as its fields and their values, as its model declares them (see
/// [`Model::key_fields`]); None when absent.
#[must_use]
pub fn upsert_fields(record: &Value) -> Option<Vec<(&'static str, String)>> {
    let obj = record.as_object()?;
    let model = model_named(obj.get("dataType")?.as_str()?)?;
    let fields = model.key_fields(|name| obj.get(name)?.as_str())?;
    Some(fields.into_iter().map(|(f, v)| (f, v.to_owned())).collect())
}

/// The upsert key of a record, hashed (see [`Model::key_hash`]); 0 when absent.
#[must_use]
pub fn key_hash(record: &Value) -> u64 {
    let Some(obj) = record.as_object() else {
        return 0;
    };
    let model = obj
        .get("dataType")
        .and_then(Value::as_str)
        .and_then(model_named);
    model.map_or(0, |m| m.key_hash(|name| obj.get(name)?.as_str()))
}

/// Where a field sits; paths are only built when a problem is reported.
#[derive(Clone, Copy)]
enum Prefix {
    Top,
    Item(usize),
}

impl Prefix {
    fn path(self, name: &str) -> String {
        match self {
            Prefix::Top => name.to_owned(),
            Prefix::Item(i) => format!("items[{i}].{name}"),
        }
    }
}

/// Reports dataType problems and picks the model the rest of the record is checked against.
fn select_model(obj: &Map<String, Value>, out: &mut Vec<Problem>) -> &'static Model {
    let path = || "dataType".to_owned();
    let Some(value) = obj.get("dataType") else {
        out.push(Problem::error(
            path(),
            format!(
                "missing required field `dataType`; expected one of {}",
                listed(DATA_TYPES)
            ),
        ));
        return &COMMON_MODEL;
    };
    let Some(name) = value.as_str() else {
        out.push(Problem::error(path(), type_error("a string", value)));
        return &COMMON_MODEL;
    };
    if let Some(model) = model_named(name) {
        return model;
    }
    let guess = suggest(name, DATA_TYPES.iter().copied());
    let message = format!(
        "unknown dataType `{}`; expected one of {}{}",
        shown_str(name),
        listed(DATA_TYPES),
        guess.map_or_else(String::new, |g| format!(" (did you mean `{g}`?)"))
    );
    out.push(Problem::error(path(), message));
    // A near miss almost certainly means that model, whose checks are then the useful ones;
    // otherwise only the fields all models share can be judged.
    guess.and_then(model_named).unwrap_or(&COMMON_MODEL)
}

/// Checks the declared fields of one object in model order; returns the items array to walk
/// later, so that item problems come after the top level's unknown fields.
fn check_object<'v>(
    obj: &'v Map<String, Value>,
    fields: &'static [Field],
    prefix: Prefix,
    out: &mut Vec<Problem>,
) -> Option<(&'v Vec<Value>, &'static [Field])> {
    let mut items = None;
    let mut start_ms = None;
    for field in fields {
        if matches!(field.kind, Kind::DataType) {
            // `select_model` has reported it already.
            continue;
        }
        let value = match obj.get(field.name) {
            Some(Value::Null) | None if !field.required => continue,
            None => {
                out.push(Problem::error(
                    prefix.path(field.name),
                    format!("missing required field `{}`", field.name),
                ));
                continue;
            }
            Some(v) => v,
        };
        match field.kind {
            Kind::DataType => {} // skipped above
            Kind::SchemaVersion => check_schema_version(value, prefix, field.name, out),
            Kind::Time => {
                let ms = check_time(value, prefix, field.name, out);
                if field.name == "startTime" {
                    start_ms = ms;
                } else if field.name == "endTime" {
                    if let (Some(start), Some(end)) = (start_ms, ms) {
                        if end < start {
                            out.push(Problem::warning(
                                prefix.path(field.name),
                                "endTime is before startTime".to_owned(),
                            ));
                        }
                    }
                }
            }
            Kind::Id => {
                if let Some(s) = expect_str(value, prefix, field.name, out) {
                    if s.is_empty() {
                        out.push(Problem::error(
                            prefix.path(field.name),
                            "must not be empty".to_owned(),
                        ));
                    }
                }
            }
            Kind::Text => {
                let _ = expect_str(value, prefix, field.name, out);
            }
            Kind::Number => {
                if !value.is_number() {
                    out.push(Problem::error(
                        prefix.path(field.name),
                        type_error("a number", value),
                    ));
                }
            }
            Kind::Status => {
                if let Some(s) = expect_str(value, prefix, field.name, out) {
                    check_published(s, STATUSES, "status", "", prefix, field.name, out);
                }
            }
            Kind::ItemType => {
                if let Some(s) = expect_str(value, prefix, field.name, out) {
                    check_published(
                        s,
                        ITEM_TYPES,
                        "item type",
                        "; the list is open",
                        prefix,
                        field.name,
                        out,
                    );
                }
            }
            Kind::TableNumber => match value {
                Value::String(_) => {}
                Value::Number(n) => out.push(Problem::error(
                    prefix.path(field.name),
                    format!(
                        "{}; `tableNumber` must be a string, e.g. `\"{n}\"`",
                        type_error("a string", value)
                    ),
                )),
                _ => out.push(Problem::error(
                    prefix.path(field.name),
                    type_error("a string", value),
                )),
            },
            Kind::Items(item_fields) => match value.as_array() {
                Some(elements) => items = Some((elements, item_fields)),
                None => out.push(Problem::error(
                    prefix.path(field.name),
                    type_error("an array", value),
                )),
            },
        }
    }
    items
}

fn expect_str<'v>(
    value: &'v Value,
    prefix: Prefix,
    name: &str,
    out: &mut Vec<Problem>,
) -> Option<&'v str> {
    let s = value.as_str();
    if s.is_none() {
        out.push(Problem::error(
            prefix.path(name),
            type_error("a string", value),
        ));
    }
    s
}

fn check_schema_version(value: &Value, prefix: Prefix, name: &str, out: &mut Vec<Problem>) {
    const EXPECTED: &str = "expected the string `\"1\"`";
    let message = match value {
        Value::String(s) if s == "1" => return,
        Value::String(s) => format!("{EXPECTED}, found `\"{}\"`", shown_str(s)),
        // The common slip is `1` for `"1"`; name it plainly.
        Value::Number(n) if n.as_u64() == Some(1) => format!("{EXPECTED}, found a number"),
        Value::Number(n) => format!("{EXPECTED}, found the number `{n}`"),
        other => format!("{EXPECTED}, found {}", kind(other)),
    };
    out.push(Problem::error(prefix.path(name), message));
}

/// Warns about values outside a published list; the lists are incomplete or their case
/// handling is unstated, so a mismatch cannot be an error.
fn check_published(
    value: &str,
    published: &[&str],
    what: &str,
    tail: &str,
    prefix: Prefix,
    name: &str,
    out: &mut Vec<Problem>,
) {
    if published.contains(&value) {
        return;
    }
    let message = match published.iter().find(|p| p.eq_ignore_ascii_case(value)) {
        Some(p) => format!(
            "{what} `{}` differs from the published value `{p}` only in case; \
             case handling is not stated",
            shown_str(value)
        ),
        None => format!(
            "{what} `{}` is not a published value ({}){tail}",
            shown_str(value),
            listed(published)
        ),
    };
    out.push(Problem::warning(prefix.path(name), message));
}

/// Below this, an epoch value reads as seconds: `100_000_000_000` ms is 1973, as seconds 5138.
const SECONDS_LIMIT: i64 = 100_000_000_000;
/// 9999-12-31T23:59:59.999Z; beyond it an epoch value reads as micro- or nanoseconds.
const MILLIS_LIMIT: i64 = 253_402_300_799_999;

/// Checks a time field and returns its epoch milliseconds when it is usable.
fn check_time(value: &Value, prefix: Prefix, name: &str, out: &mut Vec<Problem>) -> Option<i64> {
    const EXPECTED: &str = "expected epoch milliseconds or an ISO-8601 timestamp";
    let bad = |detail: String, out: &mut Vec<Problem>| {
        out.push(Problem::error(
            prefix.path(name),
            format!("{EXPECTED}, found {detail}"),
        ));
        None
    };
    match value {
        Value::Number(n) => {
            let ms = if let Some(u) = n.as_u64() {
                i64::try_from(u).unwrap_or(i64::MAX)
            } else {
                match n.as_f64() {
                    // Integral and below 2^63, so the cast is exact.
                    Some(f) if f >= 0.0 && f.fract() == 0.0 && f < 9.0e18 => f as i64,
                    _ => return bad(format!("`{n}`"), out),
                }
            };
            if ms < SECONDS_LIMIT {
                out.push(Problem::warning(
                    prefix.path(name),
                    format!("epoch `{ms}` looks like seconds, not milliseconds"),
                ));
            } else if ms > MILLIS_LIMIT {
                out.push(Problem::warning(
                    prefix.path(name),
                    format!(
                        "epoch `{ms}` is after the year 9999; it looks like microseconds, \
                         not milliseconds"
                    ),
                ));
            }
            Some(ms)
        }
        Value::String(s) => match parse_iso(s.as_bytes()) {
            Ok(ms) => Some(ms),
            Err(IsoError::MissingZone) => bad(
                format!(
                    "`{}`; the UTC offset (`Z` or e.g. `-05:00`) is missing",
                    shown_str(s)
                ),
                out,
            ),
            Err(IsoError::Invalid) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                bad(
                    format!(
                        "`{}`; epoch milliseconds must be a JSON number, not a string",
                        shown_str(s)
                    ),
                    out,
                )
            }
            Err(IsoError::Invalid) => bad(format!("`{}`", shown_str(s)), out),
        },
        Value::Bool(b) => bad(format!("`{b}`"), out),
        other => bad(kind(other).to_owned(), out),
    }
}

fn check_unknown_top(obj: &Map<String, Value>, model: &Model, out: &mut Vec<Problem>) {
    for key in obj.keys() {
        let key = key.as_str();
        if model.fields.iter().any(|f| f.name == key) || model.also_known.contains(&key) {
            continue;
        }
        let shown = shown_str(key);
        let message = if let Some((_, current)) = LEGACY.iter().find(|(old, _)| *old == key) {
            format!(
                "unknown field `{shown}`: it is the legacy name of `{current}`; use `{current}`"
            )
        } else if let Some(guess) = suggest_field(key, model.fields, model.also_known, true) {
            format!("unknown field `{shown}`; did you mean `{guess}`?")
        } else if let Some(data_type) = model.data_type {
            let owners: Vec<&str> = MODELS
                .iter()
                .filter(|m| m.fields.iter().any(|f| f.name == key))
                .filter_map(|m| m.data_type)
                .collect();
            if owners.is_empty() {
                format!("unknown field `{shown}`")
            } else {
                format!(
                    "unknown field `{shown}` for dataType `{data_type}`; it belongs to {}",
                    owners
                        .iter()
                        .map(|t| format!("`{t}`"))
                        .collect::<Vec<_>>()
                        .join(" and ")
                )
            }
        } else {
            format!("unknown field `{shown}`")
        };
        out.push(Problem::error(key.to_owned(), message));
    }
}

fn check_unknown_item(
    item: &Map<String, Value>,
    fields: &'static [Field],
    model: &Model,
    index: usize,
    out: &mut Vec<Problem>,
) {
    for key in item.keys() {
        let key = key.as_str();
        if fields.iter().any(|f| f.name == key) {
            continue;
        }
        let shown = shown_str(key);
        let message = if let Some(guess) = suggest_field(key, fields, &[], false) {
            format!("unknown field `{shown}`; did you mean `{guess}`?")
        } else if let (Some(data_type), true) =
            (model.data_type, RETAIL_ITEM.iter().any(|f| f.name == key))
        {
            // Only `other` items lack a field retail items have (`unitPrice`).
            format!("unknown field `{shown}`; items of dataType `{data_type}` have no such field")
        } else {
            format!("unknown field `{shown}`")
        };
        out.push(Problem::error(Prefix::Item(index).path(key), message));
    }
}
