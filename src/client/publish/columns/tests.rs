use std::sync::Arc;

use arrow_array::builder::{StringDictionaryBuilder, StringViewBuilder};
use arrow_array::types::Int32Type;
use arrow_array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float32Array, Float64Array, Int64Array,
    LargeStringArray, ListArray, NullArray, RecordBatchIterator, StringArray, StructArray,
    TimestampMicrosecondArray, TimestampNanosecondArray, UInt64Array,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{Field, Fields};

use super::*;
use crate::webhook::models::{OTHER_MODEL, RETAIL_MODEL};

/// The hashed upsert key of a retail record with this `transactionId`.
fn tx_key(id: &str) -> u64 {
    RETAIL_MODEL.key_hash(|_| Some(id))
}

/// The hashed upsert key of an `other` record at `location` with this `eventUniqueId`.
fn other_key(location: &str, event: &str) -> u64 {
    OTHER_MODEL.key_hash(|name| {
        Some(if name == "locationId" {
            location
        } else {
            event
        })
    })
}

const T: i64 = 1_794_891_600_000;

fn batch(columns: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(columns).expect("a batch")
}

fn reader(batches: Vec<RecordBatch>) -> Box<dyn RecordBatchReader + Send> {
    let schema = batches[0].schema();
    Box::new(RecordBatchIterator::new(
        batches.into_iter().map(Ok),
        schema,
    ))
}

fn strs(v: &[Option<&str>]) -> ArrayRef {
    Arc::new(StringArray::from(v.to_vec()))
}

fn item_fields() -> Fields {
    Fields::from(vec![
        Field::new("time", DataType::Int64, true),
        Field::new("quantity", DataType::Int64, true),
        Field::new("description", DataType::Utf8, true),
        Field::new("unitPrice", DataType::Float64, true),
        Field::new("type", DataType::Utf8, true),
    ])
}

/// `items` of `rows` lists (None: a null list), each element None (a null struct) or
/// (time, quantity, description, unitPrice, type).
#[allow(clippy::type_complexity)]
fn items(rows: &[Option<Vec<Option<(Option<i64>, i64, &str, f64, &str)>>>]) -> ArrayRef {
    let mut offsets = vec![0i32];
    let (mut time, mut qty, mut desc, mut price, mut kind, mut valid) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for row in rows {
        for e in row.iter().flatten() {
            match e {
                Some((t, q, d, p, k)) => {
                    time.push(*t);
                    qty.push(Some(*q));
                    desc.push(Some(*d));
                    price.push(Some(*p));
                    kind.push(Some(*k));
                    valid.push(true);
                }
                None => {
                    time.push(None);
                    qty.push(None);
                    desc.push(None);
                    price.push(None);
                    kind.push(None);
                    valid.push(false);
                }
            }
        }
        offsets.push(time.len() as i32);
    }
    let children: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(time)),
        Arc::new(Int64Array::from(qty)),
        Arc::new(StringArray::from(desc)),
        Arc::new(Float64Array::from(price)),
        Arc::new(StringArray::from(kind)),
    ];
    let structs = StructArray::new(item_fields(), children, Some(NullBuffer::from(valid)));
    let field = Arc::new(Field::new("item", DataType::Struct(item_fields()), true));
    let nulls = NullBuffer::from(rows.iter().map(Option::is_some).collect::<Vec<_>>());
    Arc::new(ListArray::new(
        field,
        OffsetBuffer::new(offsets.into()),
        Arc::new(structs),
        Some(nulls),
    ))
}

/// Two retail rows in the models' layout.
fn retail() -> RecordBatch {
    batch(vec![
        ("dataType", strs(&[Some("retail"), Some("retail")])),
        ("schemaVersion", strs(&[Some("1"), Some("1")])),
        (
            "startTime",
            Arc::new(
                TimestampNanosecondArray::from(vec![T * 1_000_000 + 999_999, T * 1_000_000])
                    .with_timezone("UTC"),
            ),
        ),
        (
            "endTime",
            strs(&[
                Some("2026-11-17T05:01:00.000Z"),
                Some("2026-11-17T00:01:00-0500"),
            ]),
        ),
        ("locationId", strs(&[Some("store-1"), Some("store-\"2\"")])),
        ("dataSourceId", strs(&[Some("pos-1"), Some("pos-2")])),
        ("transactionId", strs(&[Some("t-1"), Some("t-2")])),
        ("status", strs(&[Some("sale"), Some("refund")])),
        (
            "items",
            items(&[
                Some(vec![
                    Some((Some(T), 1, "coffee", 3.5, "SALE")),
                    None,
                    Some((Some(T + 1), 2, "cake \u{e9}", 1.0, "SALE")),
                ]),
                Some(vec![Some((None, 1, "tea", 2.25, "SALE"))]),
            ]),
        ),
        ("employeeName", strs(&[None, Some("Ann")])),
    ])
}

/// Runs the source over `batches`; the inputs in order.
fn publish_inputs(batches: Vec<RecordBatch>, check: bool) -> Vec<Input> {
    inputs_of(Columns::open(reader(batches), check).expect("columns that fit"))
}

/// Runs the source of `columns`; the inputs in order.
fn inputs_of(columns: Columns) -> Vec<Input> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let (mut rx, feeder) = columns.source();
        let mut out = Vec::new();
        while let Some(chunk) = rx.recv().await {
            out.extend(chunk);
        }
        feeder.await.expect("the feeder").expect("no read error");
        out
    })
}

fn text(input: &Input) -> String {
    match input {
        Input::Ready { text, .. } => String::from_utf8(text.to_vec()).expect("UTF-8"),
        Input::Rejected { text, .. } => text.clone().unwrap_or_default(),
        _ => panic!("a ready or rejected input"),
    }
}

fn problems_of(schema_batch: RecordBatch, check: bool) -> Vec<Problem> {
    match Columns::open(reader(vec![schema_batch]), check) {
        Err(Error::Validation { problems, .. }) => problems,
        Err(e) => panic!("a validation error, got {e}"),
        Ok(_) => Vec::new(),
    }
}

#[test]
fn rows_are_written_as_the_dict_path_writes_them() {
    let inputs = publish_inputs(vec![retail()], true);
    assert_eq!(inputs.len(), 2);
    assert_eq!(
        text(&inputs[0]),
        format!(
            r#"{{"dataType":"retail","schemaVersion":"1","startTime":{T},"endTime":"2026-11-17T05:01:00.000Z","locationId":"store-1","dataSourceId":"pos-1","transactionId":"t-1","status":"sale","items":[{{"time":{T},"quantity":1,"description":"coffee","unitPrice":3.5,"type":"SALE"}},{{"time":{},"quantity":2,"description":"cake é","unitPrice":1.0,"type":"SALE"}}]}}"#,
            T + 1
        )
    );
    assert_eq!(
        text(&inputs[1]),
        format!(
            r#"{{"dataType":"retail","schemaVersion":"1","startTime":{T},"endTime":"2026-11-17T00:01:00-0500","locationId":"store-\"2\"","dataSourceId":"pos-2","transactionId":"t-2","status":"refund","items":[{{"quantity":1,"description":"tea","unitPrice":2.25,"type":"SALE"}}],"employeeName":"Ann"}}"#
        )
    );
    // The second row's item lacks its required `time`: the detailed validator says so.
    match &inputs[1] {
        Input::Rejected {
            index, problems, ..
        } => {
            assert_eq!(*index, 1);
            let value: Value = serde_json::from_str(&text(&inputs[1])).expect("JSON");
            assert_eq!(problems, &webhook::validate(&value));
            assert_eq!(problems[0].path, "items[0].time");
        }
        _ => panic!("the second row is rejected"),
    }
    match &inputs[0] {
        Input::Ready { index, key, .. } => {
            assert_eq!(*index, 0);
            assert_eq!(*key, tx_key("t-1"));
        }
        _ => panic!("the first row is ready"),
    }
}

#[test]
fn without_checks_every_row_is_written_and_keyed() {
    let inputs = publish_inputs(vec![retail(), retail()], false);
    assert_eq!(inputs.len(), 4);
    for (i, input) in inputs.iter().enumerate() {
        match input {
            Input::Ready { index, key, .. } => {
                assert_eq!(*index, i as u64);
                assert_eq!(*key, tx_key(if i % 2 == 0 { "t-1" } else { "t-2" }));
            }
            _ => panic!("ready"),
        }
    }
}

#[test]
fn other_records_are_keyed_by_location_and_event() {
    let b = batch(vec![
        ("dataType", strs(&[Some("other"), Some("other")])),
        ("schemaVersion", strs(&[Some("1"), Some("1")])),
        ("startTime", Arc::new(Int64Array::from(vec![T, T]))),
        ("locationId", strs(&[Some("l"), Some("l")])),
        ("dataSourceId", strs(&[Some("d"), Some("d")])),
        ("eventUniqueId", strs(&[Some("e"), Some("")])),
        ("eventType", strs(&[Some("door"), Some("door")])),
    ]);
    let inputs = publish_inputs(vec![b], true);
    match &inputs[0] {
        Input::Ready { key, .. } => assert_eq!(*key, other_key("l", "e")),
        _ => panic!("ready"),
    }
    match &inputs[1] {
        Input::Rejected { problems, .. } => {
            assert_eq!(problems[0].path, "eventUniqueId");
            assert_eq!(problems[0].message, "must not be empty");
        }
        _ => panic!("an empty id is rejected"),
    }
}

#[test]
fn values_are_checked_per_row_with_the_validators_words() {
    let b = batch(vec![
        (
            "dataType",
            strs(&[
                Some("other"),
                Some("other"),
                Some("othr"),
                Some("other"),
                Some("other"),
            ]),
        ),
        (
            "schemaVersion",
            strs(&[Some("1"), Some("2"), Some("1"), Some("1"), Some("1")]),
        ),
        (
            "startTime",
            strs(&[
                Some("2026-11-17T05:00:00Z"),
                Some("2026-11-17T05:00:00Z"),
                Some("2026-11-17T05:00:00Z"),
                Some("2026-11-17T05:00:00"),
                Some("2026-11-17T05:00:00Z"),
            ]),
        ),
        (
            "locationId",
            strs(&[Some("l"), Some("l"), Some("l"), Some("l"), None]),
        ),
        ("dataSourceId", strs(&[Some("d"); 5])),
        (
            "eventUniqueId",
            strs(&[Some("e1"), Some("e2"), Some("e3"), Some("e4"), Some("e5")]),
        ),
        ("eventType", strs(&[Some("door"); 5])),
        (
            "endTime",
            Arc::new(Int64Array::from(vec![
                Some(T),
                Some(T),
                Some(T),
                Some(T),
                Some(-5),
            ])),
        ),
    ]);
    let inputs = publish_inputs(vec![b], true);
    assert!(matches!(inputs[0], Input::Ready { .. }));
    for (i, input) in inputs.iter().enumerate().skip(1) {
        let Input::Rejected {
            index, problems, ..
        } = input
        else {
            panic!("row {i} is rejected");
        };
        assert_eq!(*index, i as u64);
        let value: Value = serde_json::from_str(&text(input)).expect("JSON");
        assert_eq!(problems, &webhook::validate(&value), "row {i}");
    }
    let first = |i: usize| match &inputs[i] {
        Input::Rejected { problems, .. } => problems[0].to_string(),
        _ => String::new(),
    };
    assert!(
        first(1).starts_with("schemaVersion: expected the string"),
        "{}",
        first(1)
    );
    assert!(
        first(2).starts_with("dataType: unknown dataType `othr`"),
        "{}",
        first(2)
    );
    assert!(first(3).contains("the UTC offset"), "{}", first(3));
    assert_eq!(first(4), "locationId: missing required field `locationId`");
}

#[test]
fn times_of_every_kind_become_epoch_milliseconds() {
    let b = batch(vec![
        (
            "a",
            Arc::new(TimestampMicrosecondArray::from(vec![T * 1000 + 999, -1])),
        ),
        (
            "b",
            Arc::new(
                TimestampNanosecondArray::from(vec![T * 1_000_000, -1]).with_timezone("+05:00"),
            ),
        ),
        ("c", Arc::new(Date32Array::from(vec![20_774, 0]))),
    ]);
    let inputs = publish_inputs(vec![b], false);
    assert_eq!(
        text(&inputs[0]),
        format!(r#"{{"a":{T},"b":{T},"c":{}}}"#, 20_774 * DAY_MS)
    );
    // Before 1970, floored as Python's `to_ms` floors.
    assert_eq!(text(&inputs[1]), r#"{"a":-1,"b":-1,"c":0}"#);
}

#[test]
fn numbers_are_written_as_python_writes_them() {
    let decimals = Decimal128Array::from(vec![350, 0, -15, 1, 7])
        .with_precision_and_scale(10, 2)
        .expect("a decimal type");
    let tiny = Decimal128Array::from(vec![1, 1, 1, 1, 123])
        .with_precision_and_scale(10, 7)
        .expect("a decimal type");
    let whole = Decimal128Array::from(vec![350, 5, 5, 5, 5])
        .with_precision_and_scale(10, -2)
        .expect("a decimal type");
    let b = batch(vec![
        ("d", Arc::new(decimals) as ArrayRef),
        ("tiny", Arc::new(tiny)),
        ("whole", Arc::new(whole)),
        (
            "f32",
            Arc::new(Float32Array::from(vec![0.1f32, 1.0, 2.5, 1e20, -0.0])),
        ),
        (
            "f64",
            Arc::new(Float64Array::from(vec![3.5, 1.0, 1e20, 1e-7, 0.1 + 0.2])),
        ),
        (
            "u64",
            Arc::new(UInt64Array::from(vec![u64::MAX, 0, 1, 2, 3])),
        ),
        (
            "b",
            Arc::new(BooleanArray::from(vec![true, false, true, false, true])),
        ),
    ]);
    let texts: Vec<String> = publish_inputs(vec![b], false).iter().map(text).collect();
    // Python: str(Decimal("3.50")), str(Decimal("1E-7")), str(Decimal("3.50E+4")), ...
    assert_eq!(
        texts[0],
        r#"{"d":3.50,"tiny":1E-7,"whole":3.50E+4,"f32":0.10000000149011612,"f64":3.5,"u64":18446744073709551615,"b":true}"#
    );
    assert_eq!(
        texts[1],
        r#"{"d":0.00,"tiny":1E-7,"whole":5E+2,"f32":1.0,"f64":1.0,"u64":0,"b":false}"#
    );
    assert_eq!(
        texts[2],
        r#"{"d":-0.15,"tiny":1E-7,"whole":5E+2,"f32":2.5,"f64":1e+20,"u64":1,"b":true}"#
    );
    assert!(
        texts[3].starts_with(
            r#"{"d":0.01,"tiny":1E-7,"whole":5E+2,"f32":1.0000000200408773e+20,"f64":1e-07"#
        ),
        "{}",
        texts[3]
    );
    assert!(
        texts[4].starts_with(
            r#"{"d":0.07,"tiny":0.0000123,"whole":5E+2,"f32":-0.0,"f64":0.30000000000000004"#
        ),
        "{}",
        texts[4]
    );
}

#[test]
fn nan_has_no_json_form_and_keeps_its_row_back() {
    let b = batch(vec![
        ("dataType", strs(&[Some("other"), Some("other")])),
        ("x", Arc::new(Float64Array::from(vec![f64::NAN, 1.5]))),
    ]);
    let inputs = publish_inputs(vec![b], false);
    match &inputs[0] {
        Input::Rejected { problems, text, .. } => {
            assert_eq!(problems[0].path, "x");
            assert!(problems[0].message.starts_with("`NaN` has no JSON form"));
            assert_eq!(text.as_deref(), Some(r#"{"dataType":"other","x":NaN}"#));
        }
        _ => panic!("rejected"),
    }
    assert!(matches!(inputs[1], Input::Ready { .. }));
}

#[test]
fn strings_are_escaped_as_serde_json_escapes_them() {
    for s in [
        "plain",
        "",
        "quote \" and backslash \\",
        "controls \u{0}\u{1f}\n\t",
        "del \u{7f}, é, \u{2028}, 🙂",
        "a long string without anything to escape, longer than a vector register",
    ] {
        let mut out = Vec::new();
        assert_eq!(super::string(s, &mut out), Scalar::Str(s));
        assert_eq!(out, serde_json::to_vec(s).expect("a string"), "{s:?}");
    }
}

#[test]
fn strings_of_every_encoding_are_written() {
    let mut dict = StringDictionaryBuilder::<Int32Type>::new();
    dict.append_value("retail");
    dict.append_null();
    let mut view = StringViewBuilder::new();
    view.append_value("a string longer than twelve bytes");
    view.append_value("short");
    let b = batch(vec![
        ("dataType", Arc::new(dict.finish()) as ArrayRef),
        ("v", Arc::new(view.finish())),
        (
            "l",
            Arc::new(LargeStringArray::from(vec![Some("tab\there"), None])),
        ),
        ("n", Arc::new(NullArray::new(2))),
    ]);
    let texts: Vec<String> = publish_inputs(vec![b], false).iter().map(text).collect();
    assert_eq!(
        texts,
        vec![
            r#"{"dataType":"retail","v":"a string longer than twelve bytes","l":"tab\there"}"#,
            r#"{"v":"short"}"#
        ]
    );
}

#[test]
fn indexes_count_rows_across_batches() {
    let inputs = publish_inputs(vec![retail(), retail().slice(1, 1), retail()], true);
    let indexes: Vec<u64> = inputs
        .iter()
        .map(|i| match i {
            Input::Ready { index, .. } | Input::Rejected { index, .. } => *index,
            _ => u64::MAX,
        })
        .collect();
    assert_eq!(indexes, vec![0, 1, 2, 3, 4]);
    assert!(matches!(inputs[3], Input::Ready { .. }));
    // A sliced batch keeps its own rows.
    assert!(text(&inputs[2]).contains("t-2"));
}

#[test]
fn a_legacy_column_is_one_problem_worded_by_the_validator() {
    let mut b = retail();
    let mut columns: Vec<(String, ArrayRef)> = b
        .schema()
        .fields()
        .iter()
        .zip(b.columns())
        .map(|(f, c)| (f.name().clone(), c.clone()))
        .collect();
    columns[4].0 = "storeId".into();
    b = RecordBatch::try_from_iter(columns).expect("a batch");
    let problems = problems_of(b, true);
    assert_eq!(
        problems,
        vec![
            error(
                "storeId".into(),
                "unknown field `storeId`: it is the legacy name of `locationId`; use `locationId`"
                    .into()
            ),
            error(
                "locationId".into(),
                "missing required field `locationId`".into()
            ),
        ]
    );
}

#[test]
fn column_types_are_checked_once() {
    let b = batch(vec![
        ("dataType", strs(&[Some("other")])),
        ("schemaVersion", Arc::new(Int64Array::from(vec![1]))),
        ("startTime", Arc::new(BooleanArray::from(vec![true]))),
        ("locationId", Arc::new(Int64Array::from(vec![17]))),
        ("dataSourceId", strs(&[Some("d")])),
        ("eventUniqueId", strs(&[Some("e")])),
        ("eventType", strs(&[Some("t")])),
        ("items", items(&[Some(vec![])])),
        ("descripton", strs(&[Some("x")])),
    ]);
    let shown: Vec<String> = problems_of(b, true)
        .iter()
        .map(Problem::to_string)
        .collect();
    assert_eq!(
        shown,
        vec![
            "schemaVersion: expected the string `\"1\"`, found a column of `int64`; cast the column to strings",
            "startTime: expected epoch milliseconds or an ISO-8601 timestamp, found a column of `bool`",
            "locationId: expected a string, found a column of `int64`; cast the column to strings",
            "descripton: unknown field `descripton`",
        ]
    );
}

#[test]
fn an_items_column_must_be_a_list_of_structs_even_unchecked() {
    for check in [true, false] {
        let b = batch(vec![
            ("dataType", strs(&[Some("retail")])),
            ("items", strs(&[Some("[]")])),
        ]);
        let problems = problems_of(b, check);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "items");
        assert!(
            problems[0]
                .message
                .starts_with("`items` must be a list of structs")
                && problems[0].message.ends_with("found a column of `string`"),
            "{}",
            problems[0].message
        );
    }
    let b = batch(vec![("items", {
        let values = Arc::new(Int64Array::from(vec![1, 2]));
        let field = Arc::new(Field::new("item", DataType::Int64, true));
        Arc::new(ListArray::new(
            field,
            OffsetBuffer::new(vec![0, 2].into()),
            values,
            None,
        )) as ArrayRef
    })]);
    let problems = problems_of(b, false);
    assert!(
        problems[0]
            .message
            .ends_with("found a column of `list<int64>`"),
        "{problems:?}"
    );
}

#[test]
fn required_item_fields_and_a_missing_data_type_are_schema_problems() {
    let b = batch(vec![("schemaVersion", strs(&[Some("1")]))]);
    let problems = problems_of(b, true);
    assert_eq!(problems[0].path, "dataType");
    assert!(problems[0]
        .message
        .starts_with("missing required field `dataType`"));

    let fields = Fields::from(vec![Field::new("quantity", DataType::Int64, true)]);
    let structs = StructArray::new(
        fields.clone(),
        vec![Arc::new(Int64Array::from(vec![1]))],
        None,
    );
    let list = ListArray::new(
        Arc::new(Field::new("item", DataType::Struct(fields), true)),
        OffsetBuffer::new(vec![0, 1].into()),
        Arc::new(structs),
        None,
    );
    let mut columns: Vec<(String, ArrayRef)> = retail()
        .slice(0, 1)
        .schema()
        .fields()
        .iter()
        .zip(retail().slice(0, 1).columns())
        .map(|(f, c)| (f.name().clone(), c.clone()))
        .collect();
    columns[8].1 = Arc::new(list);
    let b = RecordBatch::try_from_iter(columns).expect("a batch");
    let paths: Vec<String> = problems_of(b, true).into_iter().map(|p| p.path).collect();
    assert_eq!(
        paths,
        vec![
            "items.time",
            "items.description",
            "items.unitPrice",
            "items.type"
        ]
    );
}

#[test]
fn a_frame_without_items_is_told_the_layout() {
    let full = retail();
    let at = full.schema().index_of("items").expect("an items column");
    let mut b = full.clone();
    b.remove_column(at);
    let problems = problems_of(b, true);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].path, "items");
    assert!(
        problems[0].message.starts_with(
            "missing required field `items`: add an `items` column, a list of structs"
        ),
        "{problems:?}"
    );
}

#[test]
fn binary_columns_have_no_json_form() {
    let b = batch(vec![(
        "blob",
        Arc::new(arrow_array::BinaryArray::from(vec![b"x".as_slice()])) as ArrayRef,
    )]);
    let problems = problems_of(b, false);
    assert_eq!(problems[0].path, "blob");
    assert!(
        problems[0].message.contains("`binary` has no JSON form"),
        "{problems:?}"
    );
}

#[test]
fn an_empty_input_has_no_rows() {
    let empty = retail().slice(0, 0);
    assert!(publish_inputs(vec![empty.clone(), empty], true).is_empty());
    // With no rows, no field is missing; a name no model knows is still refused.
    let b = batch(vec![("schemaVersion", strs(&[]))]);
    assert!(problems_of(b, true).is_empty());
    let b = batch(vec![("storeId", strs(&[]))]);
    assert_eq!(problems_of(b, true)[0].path, "storeId");
}

#[test]
fn json_lines_write_every_row_unchecked() {
    let lines = json_lines(&retail()).expect("lines");
    assert_eq!(lines.len(), 2);
    assert!(lines[1].ends_with(r#""employeeName":"Ann"}"#));
}

#[test]
fn decimals_follow_python_str() {
    let show = |digits: &str, negative: bool, scale: i8| {
        let mut out = Vec::new();
        decimal(digits, negative, scale, &mut out);
        String::from_utf8(out).expect("ASCII")
    };
    // str(Decimal(...)) in Python, for each (coefficient, exponent = -scale).
    assert_eq!(show("350", false, 2), "3.50");
    assert_eq!(show("0", false, 2), "0.00");
    assert_eq!(show("0", false, 0), "0");
    assert_eq!(show("0", false, 10), "0E-10");
    assert_eq!(show("15", true, 2), "-0.15");
    assert_eq!(show("1", false, 6), "0.000001");
    assert_eq!(show("1", false, 7), "1E-7");
    assert_eq!(show("123", false, 8), "0.00000123");
    assert_eq!(show("123", false, 9), "1.23E-7");
    assert_eq!(show("5", false, -2), "5E+2");
    assert_eq!(show("123", false, -1), "1.23E+3");
    assert_eq!(show("350", false, 0), "350");
}

/// `batch` with its column `name` replaced by `texts` in a column of JSON text.
fn with_json(batch: &RecordBatch, name: &str, texts: &[Option<&str>]) -> RecordBatch {
    let schema = batch.schema();
    let at = schema.index_of(name).expect("the column");
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut metadata = std::collections::HashMap::new();
    metadata.insert("ARROW:extension:name".to_owned(), JSON_EXTENSION.to_owned());
    fields[at] = Field::new(name, DataType::LargeUtf8, true).with_metadata(metadata);
    let mut columns = batch.columns().to_vec();
    columns[at] = Arc::new(LargeStringArray::from(texts.to_vec()));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("a batch")
}

/// What the inputs say of each row: ready (with its key) or rejected (with its problems), and
/// the record as a JSON value.
fn outcomes(inputs: &[Input]) -> Vec<(Option<u64>, Vec<Problem>, Value)> {
    inputs
        .iter()
        .map(|i| {
            let value = serde_json::from_str(&text(i)).unwrap_or(Value::Null);
            match i {
                Input::Ready { key, .. } => (Some(*key), Vec::new(), value),
                Input::Rejected { problems, .. } => (None, problems.clone(), value),
                _ => panic!("a ready or rejected input"),
            }
        })
        .collect()
}

#[test]
fn a_column_of_json_text_is_written_as_it_is_and_judged_as_the_list_column() {
    let arrow = publish_inputs(vec![retail()], true);
    let texts: Vec<String> = outcomes(&arrow)
        .iter()
        .map(|(_, _, v)| v["items"].to_string())
        .collect();
    let texts: Vec<Option<&str>> = texts.iter().map(|t| Some(t.as_str())).collect();
    let json = with_json(&retail(), "items", &texts);
    for check in [true, false] {
        assert_eq!(
            outcomes(&publish_inputs(vec![json.clone()], check)),
            outcomes(&publish_inputs(vec![retail()], check)),
            "check: {check}"
        );
    }
    // The text goes as it is: its spaces and key order are kept.
    let spaced = r#"[ {"type": "SALE", "time": 1794891600000, "quantity": 1, "description": "x", "unitPrice": 2} ]"#;
    let inputs = publish_inputs(
        vec![with_json(&retail(), "items", &[Some(spaced), None])],
        true,
    );
    assert!(text(&inputs[0]).ends_with(&format!(r#""items":{spaced}}}"#)));
    assert!(matches!(inputs[0], Input::Ready { key, .. } if key == tx_key("t-1")));
    // A null leaves the field out: retail records require it.
    match &inputs[1] {
        Input::Rejected { problems, .. } => assert_eq!(problems[0].path, "items"),
        _ => panic!("rejected"),
    }
}

#[test]
fn json_text_that_is_not_json_keeps_its_row_back_checked_or_not() {
    let good =
        r#"[{"time":1794891600000,"quantity":1,"description":"x","unitPrice":2,"type":"SALE"}]"#;
    for bad in [
        "[{not json",
        "",
        "[] []",
        r#"[{"time":1794891600000}"#,
        "nul",
    ] {
        let json = with_json(&retail(), "items", &[Some(bad), Some(good)]);
        for check in [true, false] {
            let inputs = publish_inputs(vec![json.clone()], check);
            match &inputs[0] {
                Input::Rejected { problems, .. } => {
                    assert!(problems[0].message.starts_with("not valid JSON"), "{bad}");
                }
                _ => panic!("`{bad}` is kept back (check: {check})"),
            }
            assert!(matches!(inputs[1], Input::Ready { .. }), "{bad}");
        }
    }
}

#[test]
fn json_keys_and_fields_are_judged_from_the_whole_text() {
    // A JSON `transactionId`: the key is the text's, found by the careful path.
    let json = with_json(&retail(), "transactionId", &[Some(r#""t-1""#), Some("7")]);
    let inputs = publish_inputs(vec![json], true);
    assert!(matches!(inputs[0], Input::Ready { key, .. } if key == tx_key("t-1")));
    match &inputs[1] {
        Input::Rejected { problems, .. } => assert_eq!(problems[0].path, "transactionId"),
        _ => panic!("a number is not a transactionId"),
    }
    // JSON stored as numbers has no meaning.
    let schema = Schema::new(vec![Field::new("items", DataType::Int64, true)
        .with_metadata(
            [("ARROW:extension:name".to_owned(), JSON_EXTENSION.to_owned())].into(),
        )]);
    let problems = layout_problems(&schema);
    assert!(
        problems[0].message.contains("must store strings"),
        "{problems:?}"
    );
}

#[test]
fn the_scanner_judges_items_text_as_the_validator_does() {
    use crate::webhook::scan::{is_json, items_text};
    let items = Object::record("retail")
        .and_then(|mut r| {
            let f = r.field(b"items")?;
            r.items(f)
        })
        .expect("retail items");
    let item =
        r#"{"time":1794891600000,"quantity":1,"description":"x","unitPrice":2,"type":"SALE"}"#;
    assert_eq!(items_text(&format!("[{item}, {item}]"), &items), Some(true));
    assert_eq!(items_text(&format!(" [{item}] \n"), &items), Some(true));
    assert_eq!(items_text("[]", &items), Some(true));
    assert_eq!(items_text(r#"[{"time":1}]"#, &items), Some(false));
    assert_eq!(items_text("[1]", &items), Some(false));
    assert_eq!(items_text(&format!("[{item}] x"), &items), None);
    assert_eq!(items_text(&format!("[{item}"), &items), None);
    assert_eq!(items_text("{}", &items), None);
    for text in ["1", " [1, {\"a\": null}] ", "\"x\"", "null"] {
        assert!(is_json(text), "{text}");
    }
    for text in ["", "[1,]", "{\"a\"}", "1 2", "nul", "[1"] {
        assert!(!is_json(text), "{text}");
    }
}

/// `retail()` with items that lack their required `description`.
fn retail_without_descriptions() -> RecordBatch {
    let full = retail();
    let list = full
        .column_by_name("items")
        .expect("items")
        .as_list::<i32>();
    let structs = list.values().as_struct();
    let keep = [0, 1, 3, 4];
    let fields: Fields = keep.iter().map(|&i| structs.fields()[i].clone()).collect();
    let children = keep.iter().map(|&i| structs.column(i).clone()).collect();
    let child = StructArray::new(fields.clone(), children, structs.nulls().cloned());
    let items: ArrayRef = Arc::new(ListArray::new(
        Arc::new(Field::new("item", DataType::Struct(fields), true)),
        list.offsets().clone(),
        Arc::new(child),
        list.nulls().cloned(),
    ));
    let schema = full.schema();
    batch(
        schema
            .fields()
            .iter()
            .zip(full.columns())
            .map(|(f, c)| {
                let c = if f.name() == "items" {
                    items.clone()
                } else {
                    c.clone()
                };
                (f.name().as_str(), c)
            })
            .collect(),
    )
}

#[test]
fn loose_items_the_models_refuse_go_as_json_text_judged_row_by_row() {
    let b = retail_without_descriptions();
    assert!(
        !problems_of(b.clone(), true).is_empty(),
        "refused as a whole"
    );
    let loose = ["items".to_owned()];
    let columns = Columns::open_loose(reader(vec![b.clone()]), true, &loose).expect("opened");
    let items = columns.schema().field_with_name("items").expect("items");
    assert!(is_json(items));
    // A column not named loose is refused as before.
    let other = ["employeeName".to_owned()];
    assert!(Columns::open_loose(reader(vec![b]), true, &other).is_err());

    let inputs = inputs_of(columns);
    assert_eq!(inputs.len(), 2);
    for input in &inputs {
        let Input::Rejected { problems, .. } = input else {
            panic!("a row kept back, got {input:?}");
        };
        assert!(
            problems.iter().any(|p| p.path.ends_with("description")),
            "{problems:?}"
        );
    }
    assert!(text(&inputs[0]).contains(
        r#""items":[{"time":1794891600000,"quantity":1,"unitPrice":3.5,"type":"SALE"},"#
    ));
}
