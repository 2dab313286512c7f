//! Property tests (proptest) of everything that reads untrusted JSON: pages, event windows,
//! Arrow conversion and the webhook validator must never panic, whatever the service or the
//! user sends; typed conversion either succeeds or names what is wrong. `PROPTEST_CASES` sets
//! how long they run (`./run-tests` keeps the default; raise it to fuzz longer).

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::arrow::{events_fast, Layout};
use super::events::parse_events;
use super::lists::{parse_page, List};
use super::Error;
use crate::time::parse_time;
use crate::webhook::scan::scan;
use crate::webhook::{has_errors, key_hash, validate, Severity};

/// Any JSON value, nested a few levels.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        // Strings that look like timestamps, valid or not.
        "20[0-9]{2}-[0-1][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,4})?(Z|[+-][0-9]{2}:?[0-9]{2})?"
            .prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

const EVENT_KEYS: [&str; 13] = [
    "id",
    "startTime",
    "endTime",
    "createTime",
    "type",
    "subtype",
    "siteId",
    "deviceId",
    "title",
    "subtitle",
    "locationTags",
    "cameras",
    "details",
];

/// An event-like object: the documented keys present or not, each with a value of the right
/// type or of any other.
fn event_like() -> impl Strategy<Value = Value> {
    let good = json!({
        "id": "e", "startTime": "2026-01-05T09:15:23.123-05:00",
        "endTime": "2026-01-05T09:16:00.000Z", "createTime": "2026-01-05T09:16:01.000+01:00",
        "type": "bookmark", "subtype": "ai-dwellTime", "siteId": "s", "deviceId": "d",
        "title": "t", "subtitle": "u", "locationTags": ["Brand:X"],
        "cameras": [{"id": "c", "name": "n"}],
        "details": {"duration_sec": 3, "confirmed": true, "origin": "o", "localTime": 1,
                    "generatedByEventStandard": false, "marker": "m"}
    });
    (
        prop::collection::vec((any::<bool>(), any::<bool>(), any_json()), EVENT_KEYS.len()),
        prop::collection::vec((any::<bool>(), any_json()), 6),
    )
        .prop_map(move |(choices, detail_choices)| {
            let mut out = Map::new();
            for (key, (keep, replace, other)) in EVENT_KEYS.iter().zip(choices) {
                if !keep {
                    continue;
                }
                let value = if replace { other } else { good[*key].clone() };
                out.insert(key.to_string(), value);
            }
            if let Some(Value::Object(details)) = out.get_mut("details") {
                let keys = [
                    "duration_sec",
                    "confirmed",
                    "origin",
                    "localTime",
                    "generatedByEventStandard",
                    "marker",
                ];
                for (k, (replace, other)) in keys.iter().zip(detail_choices) {
                    if replace {
                        details.insert(k.to_string(), other);
                    }
                }
            }
            Value::Object(out)
        })
}

/// A scalar as webhook records hold them, right or wrong for the field.
fn record_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (0u64..4_000_000_000_000).prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        (0u64..4_000_000_000_000).prop_map(|n| json!(n as f64)),
        Just(json!("")),
        Just(json!("1")),
        Just(json!(1)),
        Just(json!("sale")),
        Just(json!("SALE")),
        ".{0,12}".prop_map(Value::String),
        "20[0-9]{2}-[0-1][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,4})?(Z|[+-][0-9]{2}:?[0-9]{2})?"
            .prop_map(Value::String),
        Just(json!([])),
        Just(json!({"a": [1, null]})),
    ]
}

/// A webhook record of any model, conforming or with a few of the mistakes senders make: a field
/// dropped, a value of the wrong type or empty, an unknown or legacy name, a bad item.
fn webhook_record() -> impl Strategy<Value = Value> {
    let retail = json!({
        "dataType": "retail", "schemaVersion": "1", "startTime": 1_767_600_000_000i64,
        "endTime": "2026-01-05T09:16:00.000-0500", "locationId": "L1", "dataSourceId": "R1",
        "transactionId": "T1", "status": "sale", "employeeId": "e",
        "items": [{"time": 1_767_600_000_000i64, "quantity": 1, "description": "x",
                   "unitPrice": 2.5, "type": "SALE"},
                  {"time": "2026-01-05T09:15:00Z", "quantity": 2.5, "description": "y",
                   "unitPrice": -1, "type": "DISCOUNT"}]
    });
    let mut restaurant = retail.clone();
    restaurant["dataType"] = json!("restaurant");
    restaurant["tableNumber"] = json!("12");
    restaurant["guestCount"] = json!(3);
    let other = json!({
        "dataType": "other", "schemaVersion": "1", "startTime": "2026-01-05T09:15:00.5+01:00",
        "locationId": "L1", "dataSourceId": "D1", "eventUniqueId": "E1", "eventType": "door",
        "eventDetails": "open", "items": [{"type": "t", "quantity": 1}]
    });
    let names = prop_oneof![
        Just("dataType"),
        Just("schemaVersion"),
        Just("startTime"),
        Just("endTime"),
        Just("locationId"),
        Just("dataSourceId"),
        Just("transactionId"),
        Just("status"),
        Just("items"),
        Just("tableNumber"),
        Just("guestCount"),
        Just("eventUniqueId"),
        Just("eventType"),
        Just("storeId"),
        Just("registerId"),
        Just("employeeName"),
        Just("time"),
        Just("quantity"),
        Just("unitPrice"),
        Just("type"),
        Just("description"),
        Just("locationid"),
        Just("x"),
    ];
    (
        prop_oneof![Just(retail), Just(restaurant), Just(other)],
        prop::collection::vec((0u8..5, names, record_scalar(), 0usize..3), 0..4),
    )
        .prop_map(|(base, edits)| {
            let mut rec = base;
            for (op, name, value, item) in edits {
                match op {
                    0 => {
                        if let Some(o) = rec.as_object_mut() {
                            o.remove(name);
                        }
                    }
                    1 | 2 => rec[name] = value,
                    3 => {
                        if let Some(it) = rec.get_mut("items").and_then(|i| i.get_mut(item)) {
                            if let Some(o) = it.as_object_mut() {
                                o.insert(name.to_owned(), value);
                            } else {
                                *it = value;
                            }
                        }
                    }
                    _ => {
                        if let Some(it) = rec.get_mut("items").and_then(|i| i.get_mut(item)) {
                            if let Some(o) = it.as_object_mut() {
                                o.remove(name);
                            }
                        }
                    }
                }
            }
            rec
        })
}

/// A valid retail record: what [`record_like`] varies.
fn valid_retail() -> Value {
    json!({
        "dataType": "retail", "schemaVersion": "1", "startTime": 1_767_600_000_000i64,
        "endTime": "2026-01-05T09:16:00.000-0500", "locationId": "L1", "dataSourceId": "R1",
        "transactionId": "T1", "status": "sale",
        "items": [{"time": 1_767_600_000_000i64, "quantity": 1, "description": "x",
                   "unitPrice": 2.5, "type": "SALE"}]
    })
}

/// A webhook record: a valid retail record with fields dropped, replaced or added at random.
fn record_like() -> impl Strategy<Value = Value> {
    let base = valid_retail();
    (
        prop::collection::vec((0u8..4, any_json()), 10),
        prop::collection::btree_map(".{0,10}", any_json(), 0..3),
        prop_oneof![
            Just("retail".to_string()),
            Just("restaurant".to_string()),
            Just("other".to_string()),
            ".{0,6}",
        ],
    )
        .prop_map(move |(edits, extra, data_type)| {
            let mut rec = base.as_object().cloned().unwrap_or_default();
            let keys: Vec<String> = rec.keys().cloned().collect();
            for (key, (op, value)) in keys.iter().zip(edits) {
                match op {
                    0 => {
                        rec.remove(key);
                    }
                    1 => {
                        rec.insert(key.clone(), value);
                    }
                    _ => {}
                }
            }
            rec.extend(extra);
            rec.insert("dataType".into(), Value::String(data_type));
            Value::Object(rec)
        })
}

fn url() -> url::Url {
    url::Url::parse("http://127.0.0.1/v2/events").expect("static url")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(400)
    ))]

    #[test]
    fn pages_of_any_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = parse_page(&url(), &body);
        let _ = parse_events(&url(), &bytes::Bytes::from(body));
    }

    #[test]
    fn pages_of_any_json_never_panic(value in any_json()) {
        let body = value.to_string();
        let page = parse_page(&url(), body.as_bytes());
        prop_assert_eq!(page.is_ok(), value.is_array());
        if let Ok(events) = parse_events(&url(), &bytes::Bytes::from(body.clone())) {
            // Each event's text is exactly its record in the page.
            let records = page.unwrap_or_default();
            prop_assert_eq!(events.len(), records.len());
            for (e, r) in events.iter().zip(&records) {
                prop_assert_eq!(e.text(), r.get());
            }
        }
    }

    #[test]
    fn timestamps_never_panic(text in ".{0,40}") {
        let _ = parse_time(&text);
    }

    #[test]
    fn events_to_arrow_build_or_name_the_field(events in prop::collection::vec(event_like(), 0..6)) {
        let texts: Vec<String> = events.iter().map(Value::to_string).collect();
        let layout = Layout::events();
        match layout.batch(texts.iter().map(String::as_str)) {
            Ok(batch) => prop_assert_eq!(batch.num_rows(), events.len()),
            Err(Error::Data(message)) => prop_assert!(message.contains("field") || message.contains("JSON"), "{}", message),
            Err(other) => prop_assert!(false, "unexpected error kind: {other}"),
        }
        // Where the fast path applies it agrees with the checked one.
        if let Some(fast) = events_fast(&layout.schema(), texts.iter().map(String::as_str)) {
            let checked = layout.batch_checked(texts.iter().map(String::as_str));
            prop_assert_eq!(Some(fast), checked.ok());
        }
    }

    #[test]
    fn any_records_to_arrow_never_panic(values in prop::collection::vec(any_json(), 0..5)) {
        let texts: Vec<String> = values.iter().map(Value::to_string).collect();
        for layout in [Layout::events(), List::Sites.layout(), List::Devices.layout(), List::Cameras.layout(), List::Reports.layout()] {
            let _ = layout.batch(texts.iter().map(String::as_str));
        }
    }

    #[test]
    fn validate_never_panics_and_says_where(record in record_like()) {
        let problems = validate(&record);
        for p in &problems {
            prop_assert!(!p.message.is_empty());
        }
        prop_assert_eq!(has_errors(&problems), problems.iter().any(|p| p.severity == Severity::Error));
    }

    #[test]
    fn the_scan_agrees_with_the_careful_path(record in webhook_record(), pretty in any::<bool>()) {
        let text = if pretty {
            serde_json::to_string_pretty(&record)
        } else {
            serde_json::to_string(&record)
        }
        .expect("json");
        let careful = !has_errors(&validate(&record));
        let key = key_hash(&record);
        // The scanner may leave a record to the careful path, but never for a plain record.
        let s = scan(&text, true);
        prop_assert!(s.is_some(), "not scanned: {}", text);
        let s = s.expect("scanned");
        prop_assert_eq!(s.conforms, careful, "{} {:?}", text, validate(&record));
        prop_assert_eq!(s.key, key, "{}", text);
        let unchecked = scan(&text, false).expect("scanned");
        prop_assert_eq!((unchecked.conforms, unchecked.key), (false, key));
    }

    #[test]
    fn the_scan_never_takes_what_is_not_json_for_json(
        record in webhook_record(),
        cuts in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = serde_json::to_vec(&record).expect("json");
        for (at, byte) in cuts {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        if let Ok(text) = std::str::from_utf8(&bytes) {
            if let Some(s) = scan(text, true) {
                let parsed = serde_json::from_str::<Value>(text);
                prop_assert!(parsed.is_ok(), "scanned as JSON: {:?}", text);
                let v = parsed.expect("json");
                prop_assert_eq!(s.conforms, !has_errors(&validate(&v)), "{:?}", text);
            }
        }
    }

    #[test]
    fn validate_any_json_never_panics(value in any_json()) {
        let problems = validate(&value);
        prop_assert_eq!(value.is_object() && !has_errors(&problems), value.is_object() && problems.iter().all(|p| p.severity == Severity::Warning));
    }
}

#[test]
fn a_valid_record_has_no_error() {
    let record = valid_retail();
    assert!(!has_errors(&validate(&record)), "{:?}", validate(&record));
}

#[test]
fn floats_are_read_exactly() {
    // Found by the Python-side property test: without serde_json's `float_roundtrip`, this
    // was read one unit in the last place off (as 7225682116495306.0).
    let v: f64 = serde_json::from_str("7225682116495305.0").expect("a float");
    assert_eq!(v, 7_225_682_116_495_305.0);
    let camera = r#"{"id":"c","streams":[{"fps":7225682116495305.0}]}"#;
    let batch = List::Cameras
        .layout()
        .batch([camera].into_iter())
        .expect("camera batch");
    assert_eq!(batch.num_rows(), 1);
}
