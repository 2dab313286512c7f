//! Validation of webhook records against the service's standard object models
//! (`retail`, `restaurant`, `other`; see WEBHOOK-MODELS.md), with did-you-mean hints.

use std::fmt;

use serde_json::{Map, Value};

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
    fn error(path: String, message: String) -> Self {
        Self {
            path,
            message,
            severity: Severity::Error,
        }
    }

    fn warning(path: String, message: String) -> Self {
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

/// The upsert key of a record: `transactionId` for retail/restaurant, `locationId` + "\u{1f}" +
/// `eventUniqueId` for other; None when absent.
///
/// Empty or non-string ids also give `None`: such records fail validation, so they have no key.
#[must_use]
pub fn upsert_key(record: &Value) -> Option<String> {
    let obj = record.as_object()?;
    let id = |name: &str| obj.get(name)?.as_str().filter(|s| !s.is_empty());
    match obj.get("dataType")?.as_str()? {
        "retail" | "restaurant" => id("transactionId").map(str::to_owned),
        "other" => {
            let location = id("locationId")?;
            let event = id("eventUniqueId")?;
            // The unit separator cannot appear in ordinary ids, so the pair stays unambiguous.
            Some(format!("{location}\u{1f}{event}"))
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Model tables. Static slices so that validating a conforming record allocates nothing.

#[derive(Clone, Copy)]
enum Kind {
    /// The discriminator; checked by `select_model` before the field walk.
    DataType,
    /// Always the string `"1"`.
    SchemaVersion,
    /// Epoch milliseconds or an ISO-8601 timestamp with a zone.
    Time,
    /// A string that identifies something, so it must not be empty.
    Id,
    /// Any string.
    Text,
    /// Any JSON number.
    Number,
    /// retail/restaurant `status`: a string, warned about outside the published values.
    Status,
    /// retail/restaurant item `type`: a string, warned about outside the published (open) list.
    ItemType,
    /// A string that senders often send as a number.
    TableNumber,
    /// An array of objects following the given item fields.
    Items(&'static [Field]),
}

struct Field {
    name: &'static str,
    required: bool,
    kind: Kind,
}

const fn req(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        required: true,
        kind,
    }
}

const fn opt(name: &'static str, kind: Kind) -> Field {
    Field {
        name,
        required: false,
        kind,
    }
}

struct Model {
    /// `None` when the record's dataType is unusable and only shared fields are checked.
    data_type: Option<&'static str>,
    fields: &'static [Field],
    /// Names accepted besides `fields` (used when the model is unknown).
    also_known: &'static [&'static str],
}

const DATA_TYPES: &[&str] = &["retail", "restaurant", "other"];

const STATUSES: &[&str] = &[
    "sale",
    "void",
    "refund",
    "return",
    "discount",
    "exchange",
    "cancel",
    "no sale",
    "post void",
    "other",
    "rebate",
];

const ITEM_TYPES: &[&str] = &[
    "SALE",
    "MODIFIER",
    "SALE_OVERRIDE",
    "OVERRIDE_MODIFIER",
    "DISCOUNT",
];

/// Older revisions' names and the current name each one became.
const LEGACY: &[(&str, &str)] = &[("storeId", "locationId"), ("registerId", "dataSourceId")];

const RETAIL_ITEM: &[Field] = &[
    req("time", Kind::Time),
    req("quantity", Kind::Number),
    req("description", Kind::Text),
    req("unitPrice", Kind::Number),
    req("type", Kind::ItemType),
];

const OTHER_ITEM: &[Field] = &[
    opt("type", Kind::Text),
    opt("description", Kind::Text),
    opt("quantity", Kind::Number),
    opt("time", Kind::Time),
];

/// Items checked when the dataType is unusable: every field any model allows, none required.
const ANY_ITEM: &[Field] = &[
    opt("time", Kind::Time),
    opt("quantity", Kind::Number),
    opt("description", Kind::Text),
    opt("unitPrice", Kind::Number),
    opt("type", Kind::Text),
];

const RETAIL: &[Field] = &[
    req("dataType", Kind::DataType),
    req("schemaVersion", Kind::SchemaVersion),
    req("startTime", Kind::Time),
    req("endTime", Kind::Time),
    req("locationId", Kind::Id),
    req("dataSourceId", Kind::Id),
    req("transactionId", Kind::Id),
    req("status", Kind::Status),
    req("items", Kind::Items(RETAIL_ITEM)),
    opt("employeeId", Kind::Text),
    opt("employeeName", Kind::Text),
    opt("customerId", Kind::Text),
    opt("salesAssociateId", Kind::Text),
];

/// Retail's fields followed by the two restaurant ones, as the models page lists them.
const RESTAURANT: &[Field] = &[
    req("dataType", Kind::DataType),
    req("schemaVersion", Kind::SchemaVersion),
    req("startTime", Kind::Time),
    req("endTime", Kind::Time),
    req("locationId", Kind::Id),
    req("dataSourceId", Kind::Id),
    req("transactionId", Kind::Id),
    req("status", Kind::Status),
    req("items", Kind::Items(RETAIL_ITEM)),
    opt("employeeId", Kind::Text),
    opt("employeeName", Kind::Text),
    opt("customerId", Kind::Text),
    opt("salesAssociateId", Kind::Text),
    req("tableNumber", Kind::TableNumber),
    req("guestCount", Kind::Number),
];

const OTHER: &[Field] = &[
    req("dataType", Kind::DataType),
    req("schemaVersion", Kind::SchemaVersion),
    req("startTime", Kind::Time),
    req("locationId", Kind::Id),
    req("dataSourceId", Kind::Id),
    req("eventUniqueId", Kind::Id),
    req("eventType", Kind::Text),
    opt("endTime", Kind::Time),
    opt("eventDetails", Kind::Text),
    opt("employeeId", Kind::Text),
    opt("employeeName", Kind::Text),
    opt("status", Kind::Text),
    opt("items", Kind::Items(OTHER_ITEM)),
];

/// Fields every model shares, with the requirements they have in all of them.
const COMMON: &[Field] = &[
    req("dataType", Kind::DataType),
    req("schemaVersion", Kind::SchemaVersion),
    req("startTime", Kind::Time),
    opt("endTime", Kind::Time),
    req("locationId", Kind::Id),
    req("dataSourceId", Kind::Id),
    opt("employeeId", Kind::Text),
    opt("employeeName", Kind::Text),
    opt("status", Kind::Text),
    opt("items", Kind::Items(ANY_ITEM)),
];

/// Model-specific names, so that an unusable dataType only flags names no model knows.
const COMMON_ALSO_KNOWN: &[&str] = &[
    "transactionId",
    "customerId",
    "salesAssociateId",
    "tableNumber",
    "guestCount",
    "eventUniqueId",
    "eventType",
    "eventDetails",
];

static RETAIL_MODEL: Model = Model {
    data_type: Some("retail"),
    fields: RETAIL,
    also_known: &[],
};
static RESTAURANT_MODEL: Model = Model {
    data_type: Some("restaurant"),
    fields: RESTAURANT,
    also_known: &[],
};
static OTHER_MODEL: Model = Model {
    data_type: Some("other"),
    fields: OTHER,
    also_known: &[],
};
static COMMON_MODEL: Model = Model {
    data_type: None,
    fields: COMMON,
    also_known: COMMON_ALSO_KNOWN,
};

static MODELS: &[&Model] = &[&RETAIL_MODEL, &RESTAURANT_MODEL, &OTHER_MODEL];

fn model_named(name: &str) -> Option<&'static Model> {
    MODELS.iter().copied().find(|m| m.data_type == Some(name))
}

// ---------------------------------------------------------------------------------------------
// The walk.

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

// ---------------------------------------------------------------------------------------------
// Times.

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

pub(crate) enum IsoError {
    /// A well-formed date and time with no zone: ambiguous, so rejected with a hint.
    MissingZone,
    Invalid,
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fff...](Z|±HH:MM|±HHMM)` into epoch milliseconds, by hand
/// because it runs on every record and must accept the colon-less offsets senders use.
pub(crate) fn parse_iso(b: &[u8]) -> Result<i64, IsoError> {
    use IsoError::{Invalid, MissingZone};
    let digits = |from: usize, len: usize| -> Result<i64, IsoError> {
        let part = b.get(from..from + len).ok_or(Invalid)?;
        part.iter().try_fold(0i64, |acc, &c| {
            if c.is_ascii_digit() {
                Ok(acc * 10 + i64::from(c - b'0'))
            } else {
                Err(Invalid)
            }
        })
    };
    let at = |i: usize, want: &[u8]| b.get(i).is_some_and(|c| want.contains(c));
    if !(at(4, b"-") && at(7, b"-") && at(10, b"Tt") && at(13, b":") && at(16, b":")) {
        return Err(Invalid);
    }
    let year = digits(0, 4)?;
    let month = digits(5, 2)?;
    let day = digits(8, 2)?;
    let hour = digits(11, 2)?;
    let minute = digits(14, 2)?;
    let second = digits(17, 2)?;
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return Err(Invalid);
    }
    let mut i = 19;
    let mut millis = 0;
    if at(i, b".") {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            // Digits past the third only refine below a millisecond.
            if i - start < 3 {
                millis = millis * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        match i - start {
            0 => return Err(Invalid),
            1 => millis *= 100,
            2 => millis *= 10,
            _ => {}
        }
    }
    let offset_minutes = match b.get(i) {
        None => return Err(MissingZone),
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) => {
            let hours = digits(i + 1, 2)?;
            let (minutes, end) = if at(i + 3, b":") {
                (digits(i + 4, 2)?, i + 6)
            } else {
                (digits(i + 3, 2)?, i + 5)
            };
            if end != b.len() || hours > 23 || minutes > 59 {
                return Err(Invalid);
            }
            let total = hours * 60 + minutes;
            if sign == b'-' {
                -total
            } else {
                total
            }
        }
        Some(_) => return Err(Invalid),
    };
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second
        - offset_minutes * 60;
    Ok(seconds * 1_000 + millis)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

// ---------------------------------------------------------------------------------------------
// Unknown fields and suggestions.

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

/// The field an unknown name most likely meant: the model's names first, then (top level only)
/// the legacy names, each mapped to its current name.
fn suggest_field(
    name: &str,
    fields: &'static [Field],
    also_known: &'static [&'static str],
    legacy: bool,
) -> Option<&'static str> {
    let current = fields
        .iter()
        .map(|f| (f.name, f.name))
        .chain(also_known.iter().map(|k| (*k, *k)));
    let old = LEGACY
        .iter()
        .filter(move |_| legacy)
        .filter(|(_, now)| fields.iter().any(|f| f.name == *now))
        .copied();
    best_match(name, current.chain(old))
}

fn suggest(name: &str, candidates: impl Iterator<Item = &'static str>) -> Option<&'static str> {
    best_match(name, candidates.map(|c| (c, c)))
}

/// Picks the candidate closest to `name` (case-insensitive Levenshtein), first one on ties.
///
/// Distance 2 is allowed from six characters, 1 from three: shorter names would otherwise be
/// "corrected" into unrelated ones (`tip` into `time`).
fn best_match(
    name: &str,
    candidates: impl Iterator<Item = (&'static str, &'static str)>,
) -> Option<&'static str> {
    let limit = match name.len() {
        0..=2 => 0,
        3..=5 => 1,
        _ => 2,
    };
    let mut best: Option<(usize, &'static str)> = None;
    for (candidate, answer) in candidates {
        if let Some(d) = distance_within(name.as_bytes(), candidate.as_bytes(), limit) {
            if best.is_none_or(|(b, _)| d < b) {
                best = Some((d, answer));
            }
        }
    }
    best.map(|(_, answer)| answer)
}

/// Case-insensitive Levenshtein distance of `a` and `b` when it is at most `limit`.
fn distance_within(a: &[u8], b: &[u8], limit: usize) -> Option<usize> {
    if a.len().abs_diff(b.len()) > limit {
        return None;
    }
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cost = usize::from(!ca.eq_ignore_ascii_case(&cb));
            let next = (row[j] + 1).min(row[j + 1] + 1).min(diagonal + cost);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    let d = row[b.len()];
    (d <= limit).then_some(d)
}

// ---------------------------------------------------------------------------------------------
// Message helpers.

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// "expected a number, found string `12.50`": scalars are shown, containers only named.
fn type_error(expected: &str, value: &Value) -> String {
    match value {
        Value::Bool(b) => format!("expected {expected}, found boolean `{b}`"),
        Value::Number(n) => format!("expected {expected}, found number `{n}`"),
        Value::String(s) => format!("expected {expected}, found string `{}`", shown_str(s)),
        other => format!("expected {expected}, found {}", kind(other)),
    }
}

/// A value fit for a one-line message: control characters escaped, long text cut.
fn shown_str(s: &str) -> String {
    const MAX_CHARS: usize = 60;
    let mut shown = String::with_capacity(s.len().min(MAX_CHARS * 4));
    for (n, c) in s.chars().enumerate() {
        if n == MAX_CHARS {
            shown.push('…');
            break;
        }
        if c.is_control() {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    shown
}

fn listed(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("`{v}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// 2026-11-17T05:00:00Z.
    const T0: i64 = 1_794_891_600_000;

    fn retail() -> Value {
        json!({
            "dataType": "retail",
            "schemaVersion": "1",
            "startTime": T0,
            "endTime": "2026-11-17T05:03:00.000Z",
            "locationId": "store-17",
            "dataSourceId": "register-2",
            "transactionId": "4711-2026111705",
            "status": "sale",
            "items": [
                {"time": T0 + 1_000, "quantity": 1, "description": "coffee", "unitPrice": 2.5, "type": "SALE"},
                {"time": "2026-11-17T00:01:00-05:00", "quantity": 1, "description": "oat milk", "unitPrice": 0.4, "type": "MODIFIER"},
                {"time": "2026-11-17T00:01:30-0500", "quantity": 2, "description": "bagel", "unitPrice": 1.75, "type": "SALE_OVERRIDE"},
                {"time": "2026-11-17T05:02:00Z", "quantity": 1, "description": "coupon", "unitPrice": -1, "type": "DISCOUNT"}
            ],
            "employeeId": "e-9",
            "employeeName": "Ann",
            "customerId": "c-1",
            "salesAssociateId": "s-3"
        })
    }

    fn restaurant() -> Value {
        let mut r = retail();
        r["dataType"] = json!("restaurant");
        r["tableNumber"] = json!("12");
        r["guestCount"] = json!(3);
        r
    }

    fn other() -> Value {
        json!({
            "dataType": "other",
            "schemaVersion": "1",
            "startTime": "2026-11-17T05:00:00.000Z",
            "locationId": "store-17",
            "dataSourceId": "door-1",
            "eventUniqueId": "ev-1",
            "eventType": "door opened"
        })
    }

    fn set(record: &mut Value, path: &str, value: Value) {
        record[path] = value;
    }

    fn remove(record: &mut Value, field: &str) {
        record.as_object_mut().unwrap().remove(field);
    }

    fn item_mut(record: &mut Value, i: usize) -> &mut Map<String, Value> {
        record["items"][i].as_object_mut().unwrap()
    }

    fn shown(problems: &[Problem]) -> Vec<String> {
        problems.iter().map(ToString::to_string).collect()
    }

    /// The only problem of a record, which must exist.
    fn single(record: &Value) -> Problem {
        let problems = validate(record);
        assert_eq!(problems.len(), 1, "{:#?}", shown(&problems));
        problems.into_iter().next().unwrap()
    }

    fn error_at(path: &str, message: &str) -> Problem {
        Problem::error(path.to_owned(), message.to_owned())
    }

    // --- conforming records ---------------------------------------------------------------

    #[test]
    fn valid_retail_has_no_problems() {
        assert_eq!(shown(&validate(&retail())), Vec::<String>::new());
    }

    #[test]
    fn valid_retail_without_optional_fields_has_no_problems() {
        let mut r = retail();
        for f in [
            "employeeId",
            "employeeName",
            "customerId",
            "salesAssociateId",
        ] {
            remove(&mut r, f);
        }
        assert!(validate(&r).is_empty());
    }

    #[test]
    fn valid_restaurant_has_no_problems() {
        assert_eq!(shown(&validate(&restaurant())), Vec::<String>::new());
    }

    #[test]
    fn valid_other_minimal_and_full_have_no_problems() {
        assert!(validate(&other()).is_empty());
        let mut o = other();
        set(&mut o, "endTime", json!(T0 + 60_000));
        set(&mut o, "eventDetails", json!("badge 42"));
        set(&mut o, "employeeId", json!("e-1"));
        set(&mut o, "employeeName", json!("Bob"));
        set(&mut o, "status", json!("Whatever Free Text"));
        set(
            &mut o,
            "items",
            json!([
                {"type": "badge", "description": "front", "quantity": 1, "time": T0},
                {},
                {"description": "only a description"}
            ]),
        );
        assert_eq!(shown(&validate(&o)), Vec::<String>::new());
    }

    // --- record shape and dataType ----------------------------------------------------------

    #[test]
    fn non_object_is_one_error_at_the_root() {
        for (value, found) in [
            (json!([retail()]), "array"),
            (json!("retail"), "string"),
            (json!(null), "null"),
            (json!(3), "number"),
        ] {
            let p = single(&value);
            assert_eq!(
                p,
                error_at("", &format!("expected a JSON object, found {found}"))
            );
            assert_eq!(
                p.to_string(),
                format!("expected a JSON object, found {found}")
            );
        }
    }

    #[test]
    fn missing_data_type_is_an_error_and_other_problems_are_still_reported() {
        let mut r = retail();
        remove(&mut r, "dataType");
        set(&mut r, "schemaVersion", json!(1));
        remove(&mut r, "locationId");
        set(&mut r, "storeId", json!("store-17"));
        set(&mut r, "bogus", json!(true));
        let problems = validate(&r);
        assert_eq!(problems[0].path, "dataType");
        assert_eq!(problems.iter().filter(|p| p.path == "dataType").count(), 1);
        assert!(problems[0]
            .message
            .starts_with("missing required field `dataType`"));
        let all = shown(&problems).join("\n");
        assert!(all.contains("schemaVersion: expected the string `\"1\"`, found a number"));
        assert!(all.contains("locationId: missing required field `locationId`"));
        assert!(all.contains("legacy name of `locationId`"));
        assert!(all.contains("bogus: unknown field `bogus`"));
        assert!(!all.contains("did you mean"), "{all}");
        // Model-specific names are known to some model, so they are not flagged.
        assert!(!all.contains("transactionId"), "{all}");
        assert!(problems.iter().all(|p| p.severity == Severity::Error));
    }

    #[test]
    fn unusable_data_type_still_suggests_any_model_field() {
        let mut r = retail();
        remove(&mut r, "dataType");
        set(&mut r, "transactionID", json!("t"));
        assert_eq!(
            shown(&validate(&r))[1],
            "transactionID: unknown field `transactionID`; did you mean `transactionId`?"
        );
    }

    #[test]
    fn unknown_data_type_names_the_value_and_the_allowed_ones() {
        let mut r = retail();
        set(&mut r, "dataType", json!("sales"));
        let p = single(&r);
        assert_eq!(p.path, "dataType");
        assert_eq!(p.severity, Severity::Error);
        assert_eq!(
            p.message,
            "unknown dataType `sales`; expected one of `retail`, `restaurant`, `other`"
        );
    }

    #[test]
    fn near_miss_data_type_is_suggested_and_its_model_checked() {
        let mut r = retail();
        set(&mut r, "dataType", json!("Retail"));
        remove(&mut r, "transactionId");
        let problems = validate(&r);
        assert_eq!(
            shown(&problems),
            [
                "dataType: unknown dataType `Retail`; expected one of `retail`, `restaurant`, \
                 `other` (did you mean `retail`?)",
                "transactionId: missing required field `transactionId`",
            ]
        );
    }

    #[test]
    fn data_type_of_wrong_type_is_an_error() {
        let mut r = retail();
        set(&mut r, "dataType", json!(1));
        assert_eq!(
            single(&r).to_string(),
            "dataType: expected a string, found number `1`"
        );
        set(&mut r, "dataType", json!(null));
        assert_eq!(
            single(&r).to_string(),
            "dataType: expected a string, found null"
        );
    }

    // --- schemaVersion ----------------------------------------------------------------------

    #[test]
    fn schema_version_must_be_the_string_one() {
        let mut r = retail();
        set(&mut r, "schemaVersion", json!(1));
        assert_eq!(
            single(&r),
            error_at(
                "schemaVersion",
                "expected the string `\"1\"`, found a number"
            )
        );
        set(&mut r, "schemaVersion", json!("2"));
        assert_eq!(
            single(&r).message,
            "expected the string `\"1\"`, found `\"2\"`"
        );
        set(&mut r, "schemaVersion", json!(2));
        assert_eq!(
            single(&r).message,
            "expected the string `\"1\"`, found the number `2`"
        );
        set(&mut r, "schemaVersion", json!(null));
        assert_eq!(
            single(&r).message,
            "expected the string `\"1\"`, found null"
        );
        remove(&mut r, "schemaVersion");
        assert_eq!(
            single(&r),
            error_at("schemaVersion", "missing required field `schemaVersion`")
        );
    }

    // --- unknown fields, legacy names, did-you-mean -----------------------------------------

    #[test]
    fn legacy_names_give_the_current_name() {
        let mut r = retail();
        remove(&mut r, "locationId");
        remove(&mut r, "dataSourceId");
        set(&mut r, "registerId", json!("r-1"));
        set(&mut r, "storeId", json!("s-1"));
        let problems = validate(&r);
        let all = shown(&problems);
        assert!(all.contains(
            &"storeId: unknown field `storeId`: it is the legacy name of `locationId`; \
              use `locationId`"
                .to_owned()
        ));
        assert!(all.contains(
            &"registerId: unknown field `registerId`: it is the legacy name of `dataSourceId`; \
              use `dataSourceId`"
                .to_owned()
        ));
        assert!(has_errors(&problems));
    }

    #[test]
    fn legacy_names_are_unknown_in_other_records_too() {
        let mut o = other();
        set(&mut o, "storeId", json!("s-1"));
        let p = single(&o);
        assert_eq!(p.path, "storeId");
        assert!(p.message.contains("legacy name of `locationId`"));
    }

    #[test]
    fn near_misses_get_did_you_mean() {
        for (typo, meant) in [
            ("storeID", "locationId"),
            ("StoreId", "locationId"),
            ("registerID", "dataSourceId"),
            ("transactionID", "transactionId"),
            ("LocationId", "locationId"),
            ("locatonId", "locationId"),
            ("employeID", "employeeId"),
            ("salesAssociateID", "salesAssociateId"),
        ] {
            let mut r = retail();
            set(&mut r, typo, json!("x"));
            assert_eq!(
                single(&r),
                error_at(
                    typo,
                    &format!("unknown field `{typo}`; did you mean `{meant}`?")
                ),
                "{typo}"
            );
        }
    }

    #[test]
    fn unrelated_or_short_unknown_fields_get_no_suggestion() {
        let mut r = retail();
        set(&mut r, "loyaltyCard", json!("x"));
        assert_eq!(single(&r).message, "unknown field `loyaltyCard`");
        let mut r = retail();
        item_mut(&mut r, 0).insert("tip".into(), json!(1));
        // `tip` is two edits from `time`, too many for a three-letter name.
        assert_eq!(single(&r), error_at("items[0].tip", "unknown field `tip`"));
    }

    #[test]
    fn unknown_item_fields_are_errors_with_suggestions() {
        let mut r = retail();
        item_mut(&mut r, 1).insert("unitprice".into(), json!(1));
        item_mut(&mut r, 1).insert("Type".into(), json!("SALE"));
        let problems = validate(&r);
        assert_eq!(
            shown(&problems),
            [
                "items[1].Type: unknown field `Type`; did you mean `type`?",
                "items[1].unitprice: unknown field `unitprice`; did you mean `unitPrice`?",
            ]
        );
    }

    #[test]
    fn fields_of_another_data_type_say_where_they_belong() {
        let mut r = retail();
        set(&mut r, "tableNumber", json!("4"));
        assert_eq!(
            single(&r).message,
            "unknown field `tableNumber` for dataType `retail`; it belongs to `restaurant`"
        );
        let mut o = other();
        set(&mut o, "transactionId", json!("t"));
        assert_eq!(
            single(&o).message,
            "unknown field `transactionId` for dataType `other`; it belongs to `retail` and \
             `restaurant`"
        );
    }

    #[test]
    fn other_items_have_no_unit_price() {
        let mut o = other();
        set(
            &mut o,
            "items",
            json!([{}, {}, {"description": "x", "unitPrice": 1.0}]),
        );
        let p = single(&o);
        assert_eq!(p.path, "items[2].unitPrice");
        assert_eq!(
            p.message,
            "unknown field `unitPrice`; items of dataType `other` have no such field"
        );
        assert_eq!(p.severity, Severity::Error);
    }

    // --- required fields and types ------------------------------------------------------------

    #[test]
    fn missing_required_fields_are_reported_at_their_path() {
        let mut r = retail();
        remove(&mut r, "locationId");
        item_mut(&mut r, 2).remove("quantity");
        assert_eq!(
            shown(&validate(&r)),
            [
                "locationId: missing required field `locationId`",
                "items[2].quantity: missing required field `quantity`",
            ]
        );
    }

    #[test]
    fn every_retail_field_is_required() {
        for field in [
            "schemaVersion",
            "startTime",
            "endTime",
            "locationId",
            "dataSourceId",
            "transactionId",
            "status",
            "items",
        ] {
            let mut r = retail();
            remove(&mut r, field);
            assert_eq!(
                single(&r),
                error_at(field, &format!("missing required field `{field}`"))
            );
        }
        for field in ["time", "quantity", "description", "unitPrice", "type"] {
            let mut r = retail();
            item_mut(&mut r, 3).remove(field);
            assert_eq!(
                single(&r),
                error_at(
                    &format!("items[3].{field}"),
                    &format!("missing required field `{field}`")
                )
            );
        }
    }

    #[test]
    fn wrong_item_type_reads_with_its_path() {
        let mut r = retail();
        item_mut(&mut r, 3).insert("unitPrice".into(), json!("2.50"));
        let p = single(&r);
        assert_eq!(p.path, "items[3].unitPrice");
        assert!(p
            .to_string()
            .starts_with("items[3].unitPrice: expected a number"));
        assert_eq!(
            p.to_string(),
            "items[3].unitPrice: expected a number, found string `2.50`"
        );
    }

    #[test]
    fn wrong_types_are_errors() {
        let mut r = retail();
        set(&mut r, "locationId", json!(17));
        set(&mut r, "employeeName", json!(["Ann"]));
        item_mut(&mut r, 0).insert("quantity".into(), json!("1"));
        item_mut(&mut r, 0).insert("description".into(), json!(false));
        assert_eq!(
            shown(&validate(&r)),
            [
                "locationId: expected a string, found number `17`",
                "employeeName: expected a string, found array",
                "items[0].quantity: expected a number, found string `1`",
                "items[0].description: expected a string, found boolean `false`",
            ]
        );
    }

    #[test]
    fn items_must_be_an_array_of_objects() {
        let mut r = retail();
        set(&mut r, "items", json!({"0": {}}));
        assert_eq!(
            single(&r),
            error_at("items", "expected an array, found object")
        );
        let mut r = retail();
        r["items"].as_array_mut().unwrap().push(json!("coffee"));
        assert_eq!(
            single(&r),
            error_at("items[4]", "expected an object, found string `coffee`")
        );
        let mut o = other();
        set(&mut o, "items", json!("none"));
        assert_eq!(
            single(&o),
            error_at("items", "expected an array, found string `none`")
        );
    }

    #[test]
    fn null_is_absent_for_optional_fields_and_wrong_for_required_ones() {
        let mut r = retail();
        set(&mut r, "employeeId", json!(null));
        set(&mut r, "salesAssociateId", json!(null));
        assert!(validate(&r).is_empty());
        let mut o = other();
        set(&mut o, "endTime", json!(null));
        set(&mut o, "items", json!(null));
        set(&mut o, "status", json!(null));
        assert!(validate(&o).is_empty());
        let mut r = retail();
        set(&mut r, "transactionId", json!(null));
        set(&mut r, "items", json!(null));
        assert_eq!(
            shown(&validate(&r)),
            [
                "transactionId: expected a string, found null",
                "items: expected an array, found null",
            ]
        );
        let mut r = retail();
        item_mut(&mut r, 1).insert("unitPrice".into(), json!(null));
        assert_eq!(
            single(&r),
            error_at("items[1].unitPrice", "expected a number, found null")
        );
    }

    #[test]
    fn empty_ids_are_errors() {
        for field in ["locationId", "dataSourceId", "transactionId"] {
            let mut r = retail();
            set(&mut r, field, json!(""));
            assert_eq!(single(&r), error_at(field, "must not be empty"));
        }
        for field in ["locationId", "dataSourceId", "eventUniqueId"] {
            let mut o = other();
            set(&mut o, field, json!(""));
            assert_eq!(single(&o), error_at(field, "must not be empty"));
        }
        // Free text may be empty.
        let mut o = other();
        set(&mut o, "eventType", json!(""));
        assert!(validate(&o).is_empty());
    }

    // --- restaurant and other -----------------------------------------------------------------

    #[test]
    fn restaurant_requires_table_number_and_guest_count() {
        let mut r = restaurant();
        remove(&mut r, "tableNumber");
        remove(&mut r, "guestCount");
        assert_eq!(
            shown(&validate(&r)),
            [
                "tableNumber: missing required field `tableNumber`",
                "guestCount: missing required field `guestCount`",
            ]
        );
    }

    #[test]
    fn restaurant_table_number_must_be_a_string() {
        let mut r = restaurant();
        set(&mut r, "tableNumber", json!(12));
        let p = single(&r);
        assert_eq!(p.path, "tableNumber");
        assert_eq!(
            p.message,
            "expected a string, found number `12`; `tableNumber` must be a string, e.g. `\"12\"`"
        );
        set(&mut r, "tableNumber", json!("12"));
        set(&mut r, "guestCount", json!("3"));
        assert_eq!(
            single(&r),
            error_at("guestCount", "expected a number, found string `3`")
        );
    }

    #[test]
    fn other_requires_its_own_fields_and_not_retail_ones() {
        let mut o = other();
        for f in ["startTime", "eventUniqueId", "eventType"] {
            remove(&mut o, f);
        }
        assert_eq!(
            shown(&validate(&o)),
            [
                "startTime: missing required field `startTime`",
                "eventUniqueId: missing required field `eventUniqueId`",
                "eventType: missing required field `eventType`",
            ]
        );
    }

    #[test]
    fn other_item_fields_are_typed() {
        let mut o = other();
        set(
            &mut o,
            "items",
            json!([{"type": 1, "description": "d", "quantity": "2", "time": "yesterday"}]),
        );
        assert_eq!(
            shown(&validate(&o)),
            [
                "items[0].type: expected a string, found number `1`",
                "items[0].quantity: expected a number, found string `2`",
                "items[0].time: expected epoch milliseconds or an ISO-8601 timestamp, found \
                 `yesterday`",
            ]
        );
    }

    // --- times ----------------------------------------------------------------------------------

    fn with_start(value: Value) -> Vec<Problem> {
        let mut o = other();
        set(&mut o, "startTime", value);
        validate(&o)
    }

    #[test]
    fn accepted_time_forms() {
        for value in [
            json!(T0),
            json!(1.794_891_6e12),
            json!(1_794_891_600_000.0),
            json!("2026-11-17T05:00:00.000Z"),
            json!("2026-11-17T05:00:00Z"),
            json!("2026-11-17T05:00:00.5Z"),
            json!("2026-11-17T05:00:00.123456789Z"),
            json!("2026-11-17T00:00:00.000-05:00"),
            json!("2026-11-17T00:00:00.000-0500"),
            json!("2026-11-17T10:30:00+05:30"),
            json!("2026-11-17T10:30:00+0530"),
            json!("2024-02-29T00:00:00Z"),
            json!("2026-11-17t05:00:00z"),
        ] {
            assert_eq!(
                shown(&with_start(value.clone())),
                Vec::<String>::new(),
                "{value}"
            );
        }
    }

    #[test]
    fn rejected_time_forms() {
        for (value, found) in [
            (json!("2026-11-17 05:00:00Z"), "`2026-11-17 05:00:00Z`"),
            (json!("2026-11-17"), "`2026-11-17`"),
            (json!("2026-11-17T05:00Z"), "`2026-11-17T05:00Z`"),
            (json!("2026-13-01T00:00:00Z"), "`2026-13-01T00:00:00Z`"),
            (json!("2026-02-29T00:00:00Z"), "`2026-02-29T00:00:00Z`"),
            (json!("2026-11-17T24:00:00Z"), "`2026-11-17T24:00:00Z`"),
            (json!("2026-11-17T05:00:00.Z"), "`2026-11-17T05:00:00.Z`"),
            (json!("2026-11-17T05:00:00-5"), "`2026-11-17T05:00:00-5`"),
            (
                json!("2026-11-17T05:00:00-05:0"),
                "`2026-11-17T05:00:00-05:0`",
            ),
            (
                json!("2026-11-17T05:00:00-050"),
                "`2026-11-17T05:00:00-050`",
            ),
            (
                json!("2026-11-17T05:00:00Zjunk"),
                "`2026-11-17T05:00:00Zjunk`",
            ),
            (
                json!("2026-11-17T05:00:00+05:00x"),
                "`2026-11-17T05:00:00+05:00x`",
            ),
            (json!("17/11/2026"), "`17/11/2026`"),
            (json!(""), "``"),
            (json!(-1), "`-1`"),
            (json!(1_794_891_600_000.5), "`1794891600000.5`"),
            (json!(true), "`true`"),
            (json!(null), "null"),
            (json!([T0]), "array"),
            (json!({}), "object"),
        ] {
            let problems = with_start(value.clone());
            assert_eq!(
                shown(&problems),
                [format!(
                    "startTime: expected epoch milliseconds or an ISO-8601 timestamp, found {found}"
                )],
                "{value}"
            );
        }
    }

    #[test]
    fn rejected_times_carry_hints() {
        assert_eq!(
            with_start(json!("2026-11-17T05:00:00.000"))[0].message,
            "expected epoch milliseconds or an ISO-8601 timestamp, found \
             `2026-11-17T05:00:00.000`; the UTC offset (`Z` or e.g. `-05:00`) is missing"
        );
        assert_eq!(
            with_start(json!("1794891600000"))[0].message,
            "expected epoch milliseconds or an ISO-8601 timestamp, found `1794891600000`; \
             epoch milliseconds must be a JSON number, not a string"
        );
    }

    #[test]
    fn iso_parse_agrees_with_chrono() {
        for s in [
            "2026-11-17T05:00:00.000Z",
            "2026-11-17T00:00:00.000-05:00",
            "2026-11-17T10:30:15.7+05:30",
            "1970-01-01T00:00:00Z",
            "1969-12-31T23:59:59.999Z",
            "2000-02-29T12:00:00.25-11:45",
            "2100-03-01T00:00:00+14:00",
            "9999-12-31T23:59:59.999Z",
        ] {
            let expected = chrono::DateTime::parse_from_rfc3339(s)
                .unwrap()
                .timestamp_millis();
            assert_eq!(parse_iso(s.as_bytes()).ok(), Some(expected), "{s}");
        }
        assert_eq!(
            parse_iso(b"2026-11-17T00:00:00.000-0500").ok(),
            parse_iso(b"2026-11-17T00:00:00.000-05:00").ok()
        );
        assert_eq!(parse_iso(b"2026-11-17T05:00:00.000Z").ok(), Some(T0));
    }

    #[test]
    fn seconds_looking_epoch_is_a_warning_not_an_error() {
        let problems = with_start(json!(1_794_891_600));
        assert_eq!(
            problems,
            [Problem::warning(
                "startTime".into(),
                "epoch `1794891600` looks like seconds, not milliseconds".into()
            )]
        );
        assert!(!has_errors(&problems));
        // The boundary: 100_000_000_000 ms is fine, one less is not.
        assert!(with_start(json!(100_000_000_000_i64)).is_empty());
        assert_eq!(with_start(json!(99_999_999_999_i64)).len(), 1);
        let mut r = retail();
        item_mut(&mut r, 0).insert("time".into(), json!(1_794_891_601));
        let p = single(&r);
        assert_eq!(p.path, "items[0].time");
        assert_eq!(p.severity, Severity::Warning);
    }

    #[test]
    fn microseconds_looking_epoch_is_a_warning() {
        let problems = with_start(json!(T0 * 1_000));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].severity, Severity::Warning);
        assert!(problems[0].message.contains("microseconds"));
        assert_eq!(with_start(json!(u64::MAX)).len(), 1);
    }

    #[test]
    fn end_before_start_is_a_warning() {
        let mut r = retail();
        set(&mut r, "endTime", json!("2026-11-17T00:59:59.999-04:00"));
        let p = single(&r);
        assert_eq!(
            p,
            Problem::warning("endTime".into(), "endTime is before startTime".into())
        );
        // Equal times are fine, whatever their forms.
        set(&mut r, "endTime", json!("2026-11-17T01:00:00-0400"));
        assert!(validate(&r).is_empty());
        let mut r = restaurant();
        set(&mut r, "startTime", json!("2026-11-17T06:00:00Z"));
        set(&mut r, "endTime", json!(T0));
        assert_eq!(single(&r).severity, Severity::Warning);
        let mut o = other();
        set(&mut o, "endTime", json!(T0 - 1));
        assert_eq!(single(&o).severity, Severity::Warning);
    }

    // --- published values -----------------------------------------------------------------------

    #[test]
    fn every_published_status_and_item_type_passes() {
        for status in STATUSES {
            let mut r = retail();
            set(&mut r, "status", json!(status));
            assert!(validate(&r).is_empty(), "{status}");
        }
        for t in ITEM_TYPES {
            let mut r = restaurant();
            item_mut(&mut r, 0).insert("type".into(), json!(t));
            assert!(validate(&r).is_empty(), "{t}");
        }
    }

    #[test]
    fn status_outside_the_published_set_is_a_warning() {
        let mut r = retail();
        set(&mut r, "status", json!("SALE"));
        let p = single(&r);
        assert_eq!(p.severity, Severity::Warning);
        assert_eq!(p.path, "status");
        assert_eq!(
            p.message,
            "status `SALE` differs from the published value `sale` only in case; case \
             handling is not stated"
        );
        set(&mut r, "status", json!("completed"));
        let p = single(&r);
        assert_eq!(p.severity, Severity::Warning);
        assert!(p
            .message
            .starts_with("status `completed` is not a published value (`sale`, "));
        assert!(p.message.contains("`no sale`"));
        set(&mut r, "status", json!(1));
        assert_eq!(
            single(&r),
            error_at("status", "expected a string, found number `1`")
        );
    }

    #[test]
    fn item_type_outside_the_published_list_is_a_warning() {
        let mut r = retail();
        item_mut(&mut r, 2).insert("type".into(), json!("PAYMENT"));
        let p = single(&r);
        assert_eq!(p.path, "items[2].type");
        assert_eq!(p.severity, Severity::Warning);
        assert!(p
            .message
            .starts_with("item type `PAYMENT` is not a published value"));
        assert!(p.message.ends_with("; the list is open"));
        item_mut(&mut r, 2).insert("type".into(), json!("sale"));
        assert!(single(&r)
            .message
            .contains("published value `SALE` only in case"));
    }

    #[test]
    fn warnings_do_not_count_as_errors() {
        let mut r = retail();
        set(&mut r, "status", json!("SALE"));
        set(&mut r, "startTime", json!(1_794_891_600));
        item_mut(&mut r, 0).insert("type".into(), json!("TIP"));
        let problems = validate(&r);
        assert_eq!(problems.len(), 3);
        assert!(problems.iter().all(|p| p.severity == Severity::Warning));
        assert!(!has_errors(&problems));
        assert!(!has_errors(&[]));
        set(&mut r, "locationId", json!(""));
        assert!(has_errors(&validate(&r)));
    }

    // --- order, display, serialization -----------------------------------------------------------

    #[test]
    fn problems_come_in_model_order_then_unknown_fields_then_items() {
        let mut r = restaurant();
        // Inserted in alphabetical order so the record's order is the same with or without
        // serde_json's `preserve_order`.
        set(&mut r, "aNote", json!("x"));
        set(&mut r, "zNote", json!("x"));
        remove(&mut r, "guestCount");
        set(&mut r, "status", json!("Sale"));
        set(&mut r, "schemaVersion", json!(1));
        item_mut(&mut r, 3).insert("unitPrice".into(), json!("1"));
        item_mut(&mut r, 1).remove("time");
        item_mut(&mut r, 1).insert("extra".into(), json!(1));
        let paths: Vec<String> = validate(&r).into_iter().map(|p| p.path).collect();
        assert_eq!(
            paths,
            [
                "schemaVersion",
                "status",
                "guestCount",
                "aNote",
                "zNote",
                "items[1].time",
                "items[1].extra",
                "items[3].unitPrice",
            ]
        );
        assert_eq!(validate(&r), validate(&r));
    }

    #[test]
    fn display_omits_an_empty_path() {
        assert_eq!(error_at("", "boom").to_string(), "boom");
        assert_eq!(error_at("a.b", "boom").to_string(), "a.b: boom");
    }

    #[test]
    fn problems_serialize_with_lowercase_severity() {
        let p = Problem::warning("status".into(), "m".into());
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            json!({"path": "status", "message": "m", "severity": "warning"})
        );
        assert_eq!(
            serde_json::to_value(Severity::Error).unwrap(),
            json!("error")
        );
    }

    #[test]
    fn long_and_control_values_are_shown_on_one_short_line() {
        let mut r = retail();
        set(&mut r, "dataType", json!(format!("{}\n", "x".repeat(100))));
        let message = single(&r).message;
        assert!(
            message.contains(&format!("`{}…`", "x".repeat(60))),
            "{message}"
        );
        let mut r = retail();
        set(&mut r, "dataType", json!("a\nb"));
        assert!(single(&r).message.contains("`a\\nb`"));
    }

    // --- upsert key and helpers ---------------------------------------------------------------------

    #[test]
    fn upsert_key_per_data_type() {
        assert_eq!(upsert_key(&retail()).as_deref(), Some("4711-2026111705"));
        assert_eq!(
            upsert_key(&restaurant()).as_deref(),
            Some("4711-2026111705")
        );
        assert_eq!(upsert_key(&other()).as_deref(), Some("store-17\u{1f}ev-1"));
        let mut r = retail();
        remove(&mut r, "transactionId");
        assert_eq!(upsert_key(&r), None);
        let mut r = retail();
        set(&mut r, "transactionId", json!(4711));
        assert_eq!(upsert_key(&r), None);
        let mut o = other();
        remove(&mut o, "eventUniqueId");
        assert_eq!(upsert_key(&o), None);
        let mut o = other();
        set(&mut o, "locationId", json!(""));
        assert_eq!(upsert_key(&o), None);
        let mut o = other();
        set(&mut o, "dataType", json!("Other"));
        assert_eq!(upsert_key(&o), None);
        assert_eq!(upsert_key(&json!([retail()])), None);
    }

    #[test]
    fn distance_is_case_insensitive_and_bounded() {
        assert_eq!(distance_within(b"storeID", b"storeId", 2), Some(0));
        assert_eq!(distance_within(b"locatonId", b"locationId", 2), Some(1));
        assert_eq!(distance_within(b"kitten", b"sitting", 3), Some(3));
        assert_eq!(distance_within(b"kitten", b"sitting", 2), None);
        assert_eq!(distance_within(b"a", b"abcd", 2), None);
        assert_eq!(distance_within(b"", b"ab", 2), Some(2));
    }

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(days_in_month(1900, 2), 28);
        assert_eq!(days_in_month(2000, 2), 29);
    }
}
