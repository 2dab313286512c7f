//! The detailed validator, model by model, and the helpers it uses.

use serde_json::{json, Map, Value};

use super::models::{ITEM_TYPES, STATUSES};
use super::problems::{has_errors, upsert_key, validate, Problem, Severity};
use super::suggest::distance_within;

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
fn the_hashed_key_follows_the_key() {
    use super::key_hash;
    let (r, o) = (retail(), other());
    assert_ne!(key_hash(&r), 0);
    assert_eq!(key_hash(&r), key_hash(&restaurant()));
    let mut r2 = retail();
    set(&mut r2, "transactionId", json!("4712"));
    assert_ne!(key_hash(&r), key_hash(&r2));
    // The parts of a key are apart: `l` + `e` is not the single id "l\u{1f}e".
    let mut joined = retail();
    set(&mut joined, "transactionId", json!("store-17\u{1f}ev-1"));
    assert_ne!(key_hash(&o), key_hash(&joined));
    let mut none = other();
    remove(&mut none, "eventUniqueId");
    assert_eq!(key_hash(&none), 0);
    assert_eq!(key_hash(&json!([1])), 0);
}

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
fn the_upsert_key_is_declared_once_and_read_everywhere_else() {
    // `Model::key` is the one statement of the upsert key: the emulator and publishing read it
    // (`upsert_fields`, `upsert_key`, `key_hash`), and none of them restates which field keys
    // which dataType.
    let readers = [
        (
            "emulator/routes/webhook.rs",
            include_str!("../emulator/routes/webhook.rs"),
        ),
        (
            "emulator/dialect.rs",
            include_str!("../emulator/dialect.rs"),
        ),
        (
            "client/publish/prepare.rs",
            include_str!("../client/publish/prepare.rs"),
        ),
        (
            "client/publish/answer.rs",
            include_str!("../client/publish/answer.rs"),
        ),
    ];
    for (file, text) in readers {
        for restated in [
            r#""retail" | "restaurant""#,
            r#"=> "transactionId""#,
            r#"=> "eventUniqueId""#,
            r#"["transactionId", "eventUniqueId"]"#,
        ] {
            assert!(
                !text.contains(restated),
                "{file} restates the upsert key: {restated}"
            );
        }
    }
    let other = json!({"dataType": "other", "locationId": "l", "eventUniqueId": "e"});
    let fields = super::problems::upsert_fields(&other);
    assert_eq!(
        fields,
        Some(vec![
            ("locationId", "l".into()),
            ("eventUniqueId", "e".into())
        ])
    );
}
