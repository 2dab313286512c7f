//! Publishing from columns: Arrow record batches (a pyarrow or polars table, a pandas DataFrame
//! converted to Arrow, a Parquet file, any record batch reader) written as JSON records straight
//! from the column buffers, one chunk of [`Input`]s at a time.
//!
//! The layout is the models' own: one column per field, named as the field; `items` a list of
//! structs whose fields are the item fields. A null leaves the field out of its record (a
//! column that does not apply to a row), as a null list element or struct field leaves out that
//! element or field. What the schema decides is checked once per input ([`Columns::open`]):
//! unknown and legacy column names, column types, required columns; only values are checked
//! per row, with the fast check of [`crate::webhook::fast`], and a row it refuses goes to the
//! detailed validator on its JSON text, so that its problems read as they do for a dict.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    ArrowDictionaryKeyType, Decimal128Type, Decimal256Type, Decimal32Type, Decimal64Type,
    Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{
    Array, BooleanArray, FixedSizeListArray, Float16Array, LargeStringArray, RecordBatch,
    RecordBatchReader, StringArray, StringViewArray,
};
use arrow_buffer::{i256, ArrowNativeType, NullBuffer};
use arrow_schema::{DataType, Schema, SchemaRef, TimeUnit};
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::json;
use super::prepare::{checked_value, first_errors};
use super::{Input, CHANNEL_CHUNKS, CHUNK};
use crate::client::error::{Error, Result};
use crate::webhook::fast::{Object, Scalar};
use crate::webhook::models::{model_named, Kind, ANY_ITEM, MODELS, OTHER_ITEM, RETAIL_ITEM};
use crate::webhook::{self, Problem, Severity};

/// Rows of a Parquet file read at a time.
const PARQUET_BATCH: usize = 8192;
/// Distinct `dataType` values of the first batch whose models the columns are checked against.
const MAX_DATA_TYPES: usize = 8;
use crate::time::DAY_MS;

// ---------------------------------------------------------------------------------------------
// The schema check.

/// What a model field takes, as far as a column's type can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldType {
    Text,
    Time,
    Number,
    Items,
}

fn field_type(kind: Kind) -> FieldType {
    match kind {
        Kind::Time => FieldType::Time,
        Kind::Number => FieldType::Number,
        Kind::Items(_) => FieldType::Items,
        Kind::DataType
        | Kind::SchemaVersion
        | Kind::Id
        | Kind::Text
        | Kind::Status
        | Kind::ItemType
        | Kind::TableNumber => FieldType::Text,
    }
}

/// What a column of this type holds, as JSON goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnType {
    Null,
    Bool,
    Number,
    Text,
    /// Timestamps and dates, written as epoch milliseconds.
    Time,
    List,
    Struct,
    /// No JSON form.
    Nothing,
}

fn column_type(dt: &DataType) -> ColumnType {
    use DataType as D;
    match dt {
        D::Null => ColumnType::Null,
        D::Boolean => ColumnType::Bool,
        D::Int8
        | D::Int16
        | D::Int32
        | D::Int64
        | D::UInt8
        | D::UInt16
        | D::UInt32
        | D::UInt64
        | D::Float16
        | D::Float32
        | D::Float64
        | D::Decimal32(..)
        | D::Decimal64(..)
        | D::Decimal128(..)
        | D::Decimal256(..) => ColumnType::Number,
        D::Utf8 | D::LargeUtf8 | D::Utf8View => ColumnType::Text,
        D::Timestamp(..) | D::Date32 | D::Date64 => ColumnType::Time,
        D::List(_)
        | D::LargeList(_)
        | D::FixedSizeList(..)
        | D::ListView(_)
        | D::LargeListView(_) => ColumnType::List,
        D::Struct(_) => ColumnType::Struct,
        D::Dictionary(_, values) => match column_type(values) {
            // Dictionaries of containers are not something Arrow writers make.
            ColumnType::List | ColumnType::Struct => ColumnType::Nothing,
            h => h,
        },
        _ => ColumnType::Nothing,
    }
}

/// The element type of a list-like type.
fn element(dt: &DataType) -> Option<&DataType> {
    match dt {
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::FixedSizeList(f, _)
        | DataType::ListView(f)
        | DataType::LargeListView(f) => Some(f.data_type()),
        _ => None,
    }
}

/// A type as pyarrow names it (the name most users see), for messages.
fn type_name(dt: &DataType) -> String {
    use DataType as D;
    let unit = |u: &TimeUnit| match u {
        TimeUnit::Second => "s",
        TimeUnit::Millisecond => "ms",
        TimeUnit::Microsecond => "us",
        TimeUnit::Nanosecond => "ns",
    };
    match dt {
        D::Null => "null".into(),
        D::Boolean => "bool".into(),
        D::Int8 => "int8".into(),
        D::Int16 => "int16".into(),
        D::Int32 => "int32".into(),
        D::Int64 => "int64".into(),
        D::UInt8 => "uint8".into(),
        D::UInt16 => "uint16".into(),
        D::UInt32 => "uint32".into(),
        D::UInt64 => "uint64".into(),
        D::Float16 => "halffloat".into(),
        D::Float32 => "float".into(),
        D::Float64 => "double".into(),
        D::Utf8 => "string".into(),
        D::LargeUtf8 => "large_string".into(),
        D::Utf8View => "string_view".into(),
        D::Binary => "binary".into(),
        D::LargeBinary => "large_binary".into(),
        D::BinaryView => "binary_view".into(),
        D::Date32 => "date32".into(),
        D::Date64 => "date64".into(),
        D::Timestamp(u, None) => format!("timestamp[{}]", unit(u)),
        D::Timestamp(u, Some(tz)) => format!("timestamp[{}, tz={tz}]", unit(u)),
        D::Time32(u) | D::Time64(u) => format!("time[{}]", unit(u)),
        D::Duration(u) => format!("duration[{}]", unit(u)),
        D::Decimal32(p, s) | D::Decimal64(p, s) | D::Decimal128(p, s) => {
            format!("decimal({p}, {s})")
        }
        D::Decimal256(p, s) => format!("decimal256({p}, {s})"),
        D::List(f) | D::ListView(f) | D::FixedSizeList(f, _) => {
            format!("list<{}>", type_name(f.data_type()))
        }
        D::LargeList(f) | D::LargeListView(f) => {
            format!("large_list<{}>", type_name(f.data_type()))
        }
        D::Struct(fields) => format!(
            "struct<{}>",
            fields
                .iter()
                .map(|f| format!("{}: {}", f.name(), type_name(f.data_type())))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        D::Dictionary(_, values) => format!("dictionary<{}>", type_name(values)),
        other => other.to_string(),
    }
}

fn error(path: String, message: String) -> Problem {
    Problem {
        path,
        message,
        severity: Severity::Error,
    }
}

/// The layout of the `items` column, for messages.
const ITEMS_LAYOUT: &str = "a list of structs, one struct per item whose fields are the item \
     fields (e.g. `list<struct<time, quantity, description, unitPrice, type>>`)";

/// Problems that make the columns impossible to write as records, whatever the checks: a name
/// twice, a type with no JSON form, an `items` column that is not a list of structs.
fn layout_problems(schema: &Schema) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for f in schema.fields() {
        let name = f.name().as_str();
        if !seen.insert(name) {
            out.push(error(
                name.to_owned(),
                format!("the column `{name}` appears twice; a record has each field once"),
            ));
            continue;
        }
        if let Some(bad) = unwritable(f.data_type()) {
            out.push(error(
                name.to_owned(),
                format!(
                    "a column of `{}` has no JSON form (`{}` is not a string, number, boolean, \
                     time, list or struct); cast it or drop it",
                    type_name(f.data_type()),
                    type_name(bad)
                ),
            ));
            continue;
        }
        if name == "items" && !items_layout(f.data_type()) {
            out.push(error(
                "items".to_owned(),
                format!(
                    "`items` must be {ITEMS_LAYOUT}, found a column of `{}`",
                    type_name(f.data_type())
                ),
            ));
        }
    }
    out
}

/// The part of `dt` with no JSON form, if any.
fn unwritable(dt: &DataType) -> Option<&DataType> {
    match column_type(dt) {
        ColumnType::Nothing => Some(dt),
        ColumnType::List => element(dt).and_then(unwritable),
        ColumnType::Struct => match dt {
            DataType::Struct(fields) => fields.iter().find_map(|f| unwritable(f.data_type())),
            _ => None,
        },
        _ => None,
    }
}

/// `items` is a list of structs (or holds nothing at all: a null column, lists of nulls).
fn items_layout(dt: &DataType) -> bool {
    match column_type(dt) {
        ColumnType::Null => true,
        ColumnType::List => {
            element(dt).is_some_and(|e| matches!(e, DataType::Struct(_) | DataType::Null))
        }
        _ => false,
    }
}

/// Whether a column that holds `h` fits a field that wants `w`.
fn column_fits(w: FieldType, h: ColumnType) -> bool {
    matches!(
        (w, h),
        (_, ColumnType::Null)
            | (FieldType::Text, ColumnType::Text)
            | (
                FieldType::Time,
                ColumnType::Number | ColumnType::Text | ColumnType::Time
            )
            | (FieldType::Number, ColumnType::Number)
            | (FieldType::Items, ColumnType::List)
    )
}

fn expected(w: FieldType, name: &str) -> String {
    match (w, name) {
        (FieldType::Text, "schemaVersion") => "expected the string `\"1\"`".into(),
        (FieldType::Text, _) => "expected a string".into(),
        (FieldType::Time, _) => "expected epoch milliseconds or an ISO-8601 timestamp".into(),
        (FieldType::Number, _) => "expected a number".into(),
        (FieldType::Items, _) => "expected an array".into(),
    }
}

fn type_problem(path: &str, w: FieldType, name: &str, dt: &DataType) -> Problem {
    let hint = match (w, column_type(dt)) {
        (FieldType::Text, ColumnType::Number) => "; cast the column to strings",
        (FieldType::Number, ColumnType::Text) => "; cast the column to numbers",
        _ => "",
    };
    error(
        path.to_owned(),
        format!(
            "{}, found a column of `{}`{hint}",
            expected(w, name),
            type_name(dt)
        ),
    )
}

/// The kind of the top-level field `name` in any model (all models agree on what a name holds,
/// as far as types go).
fn top_kind(name: &str) -> Option<Kind> {
    MODELS
        .iter()
        .flat_map(|m| m.fields.iter())
        .find(|f| f.name == name)
        .map(|f| f.kind)
}

fn item_kind(name: &str) -> Option<Kind> {
    RETAIL_ITEM
        .iter()
        .chain(OTHER_ITEM)
        .chain(ANY_ITEM)
        .find(|f| f.name == name)
        .map(|f| f.kind)
}

/// What the detailed validator says at `path` of `record` (errors only).
fn validator_errors(record: &Value, path: &str) -> Vec<Problem> {
    webhook::validate(record)
        .into_iter()
        .filter(|p| p.path == path && p.severity == Severity::Error)
        .collect()
}

/// A record of `data_type` (none: without a `dataType`) with `fields`, for the validator.
fn probe(data_type: Option<&str>, fields: Value) -> Value {
    let mut record = serde_json::Map::new();
    if let Some(dt) = data_type {
        record.insert("dataType".into(), Value::String(dt.to_owned()));
    }
    if let Value::Object(fields) = fields {
        record.extend(fields);
    }
    Value::Object(record)
}

fn push(p: Problem, out: &mut Vec<Problem>) {
    if !out.contains(&p) {
        out.push(p);
    }
}

/// Problems of the columns under the models of `data_types` (the values of the `dataType`
/// column in the first rows; None when there are no rows): names no model knows (worded by the
/// detailed validator for those data types), types that cannot hold what a field takes,
/// required fields with no column (only when there are rows: none of them lacks anything).
fn model_problems(schema: &Schema, data_types: Option<&[String]>) -> Vec<Problem> {
    let mut out: Vec<Problem> = Vec::new();
    let types: Vec<Option<&str>> = match data_types {
        Some(d) if !d.is_empty() => d.iter().map(|d| Some(d.as_str())).collect(),
        _ => vec![None],
    };
    let has = |name: &str| schema.fields().iter().any(|f| f.name() == name);
    if data_types.is_some() && !has("dataType") {
        for p in validator_errors(&json!({}), "dataType") {
            push(p, &mut out);
        }
    }
    for f in schema.fields() {
        let name = f.name().as_str();
        let Some(kind) = top_kind(name) else {
            for dt in &types {
                for p in validator_errors(&probe(*dt, json!({ name: null })), name) {
                    push(p, &mut out);
                }
            }
            continue;
        };
        let w = field_type(kind);
        if !column_fits(w, column_type(f.data_type())) {
            push(type_problem(name, w, name, f.data_type()), &mut out);
            continue;
        }
        if w != FieldType::Items {
            continue;
        }
        let Some(DataType::Struct(item_fields)) = element(f.data_type()) else {
            continue;
        };
        for item in item_fields {
            let item_name = item.name().as_str();
            let path = format!("items.{item_name}");
            match item_kind(item_name) {
                None => {
                    for dt in &types {
                        let record = probe(*dt, json!({ "items": [{ item_name: null }] }));
                        for mut p in validator_errors(&record, &format!("items[0].{item_name}")) {
                            p.path.clone_from(&path);
                            push(p, &mut out);
                        }
                    }
                }
                Some(kind) => {
                    let w = field_type(kind);
                    if !column_fits(w, column_type(item.data_type())) {
                        push(
                            type_problem(&path, w, item_name, item.data_type()),
                            &mut out,
                        );
                    }
                }
            }
        }
        // Item fields the models of the data require that the struct lacks.
        for dt in types.iter().flatten() {
            if model_named(dt).is_none() {
                continue;
            }
            for missing in webhook::validate(&probe(Some(dt), json!({ "items": [{}] }))) {
                if let Some(field) = missing.path.strip_prefix("items[0].") {
                    if !item_fields.iter().any(|f| f.name() == field) {
                        let p = Problem {
                            path: format!("items.{field}"),
                            ..missing
                        };
                        push(p, &mut out);
                    }
                }
            }
        }
    }
    // Required fields of the data's models with no column: every row would lack them.
    for dt in types.iter().flatten() {
        let Some(model) = model_named(dt) else {
            continue;
        };
        for field in model.fields.iter().filter(|f| f.required && !has(f.name)) {
            for mut p in validator_errors(&probe(Some(dt), json!({})), field.name) {
                if field.name == "items" {
                    // Items are the one field whose column has a layout to learn.
                    p.message = format!("{}: add an `items` column, {ITEMS_LAYOUT}", p.message);
                }
                push(p, &mut out);
            }
        }
    }
    out
}

/// The distinct `dataType` values of a batch (a few at most), in the order they come.
fn data_types(batch: &RecordBatch) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Some(i) = batch.schema().index_of("dataType").ok() else {
        return out;
    };
    let Ok(col) = Col::bind(batch.column(i).as_ref()) else {
        return out;
    };
    for row in 0..batch.num_rows() {
        if let Some(s) = col.str_at(row) {
            if !out.iter().any(|d| d == s) {
                out.push(s.to_owned());
                if out.len() == MAX_DATA_TYPES {
                    break;
                }
            }
        }
    }
    out
}

fn refused(problems: Vec<Problem>) -> Error {
    Error::Validation {
        message: format!(
            "the columns cannot be published as they are (nothing was sent): {}",
            first_errors(&problems)
        ),
        problems,
    }
}

// ---------------------------------------------------------------------------------------------
// Columns bound for writing.

/// Why a value has no JSON form.
struct Unwritable {
    /// Where, innermost last: `unitPrice`, `items[2].unitPrice`.
    path: String,
    message: String,
}

/// The positions of a list's elements in its child.
enum Offsets<'a> {
    Small(&'a [i32]),
    Large(&'a [i64]),
    Fixed(&'a FixedSizeListArray),
    View(&'a [i32], &'a [i32]),
    LargeView(&'a [i64], &'a [i64]),
}

impl Offsets<'_> {
    /// The elements of list `i`, within `0..len` (the child's length).
    fn range(&self, i: usize, len: usize) -> Range<usize> {
        let at = |v: Option<i64>| {
            v.and_then(|v| usize::try_from(v).ok())
                .unwrap_or(0)
                .min(len)
        };
        let (start, end) = match self {
            Offsets::Small(o) => (
                o.get(i).map(|&v| i64::from(v)),
                o.get(i + 1).map(|&v| i64::from(v)),
            ),
            Offsets::Large(o) => (o.get(i).copied(), o.get(i + 1).copied()),
            Offsets::Fixed(a) => {
                let start = i64::from(a.value_offset(i));
                (Some(start), Some(start + i64::from(a.value_length())))
            }
            Offsets::View(o, s) => match (o.get(i), s.get(i)) {
                (Some(&o), Some(&s)) => (Some(i64::from(o)), Some(i64::from(o) + i64::from(s))),
                _ => (None, None),
            },
            Offsets::LargeView(o, s) => match (o.get(i), s.get(i)) {
                (Some(&o), Some(&s)) => (Some(o), o.checked_add(s)),
                _ => (None, None),
            },
        };
        let start = at(start);
        start..at(end).max(start)
    }
}

/// A struct's field, bound.
struct Member<'a> {
    name: &'a str,
    /// `"name":`, as JSON.
    key: Vec<u8>,
    col: Col<'a>,
}

/// The values of a column, typed.
enum Values<'a> {
    Null,
    Bool(&'a BooleanArray),
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    U64(&'a [u64]),
    F16(&'a Float16Array),
    F32(&'a [f32]),
    F64(&'a [f64]),
    D32(&'a [i32], i8),
    D64(&'a [i64], i8),
    D128(&'a [i128], i8),
    D256(&'a [i256], i8),
    Str(&'a StringArray),
    LargeStr(&'a LargeStringArray),
    View(&'a StringViewArray),
    /// Keys (into the values) of a dictionary-encoded column.
    Dict(Vec<usize>, Box<Col<'a>>),
    Stamp(&'a [i64], TimeUnit),
    Date32(&'a [i32]),
    Date64(&'a [i64]),
    List(Offsets<'a>, Box<Col<'a>>),
    Struct(Vec<Member<'a>>),
}

/// One column (or nested child) of a batch, ready to be written row by row.
struct Col<'a> {
    len: usize,
    nulls: Option<NullBuffer>,
    values: Values<'a>,
}

fn keys_of<K: ArrowDictionaryKeyType>(a: &dyn Array) -> Option<Vec<usize>> {
    let d = a.as_dictionary_opt::<K>()?;
    let n = d.values().len();
    Some(
        d.keys()
            .values()
            .iter()
            .map(|k| k.to_usize().unwrap_or(n).min(n))
            .collect(),
    )
}

impl<'a> Col<'a> {
    /// Binds `array` for writing; Err names a type with no JSON form.
    fn bind(array: &'a dyn Array) -> std::result::Result<Col<'a>, String> {
        use DataType as D;
        let unsupported = || type_name(array.data_type());
        let mismatch = || format!("an array that is not the `{}` it says", unsupported());
        macro_rules! prim {
            ($t:ty, $v:ident) => {
                Values::$v(
                    array
                        .as_primitive_opt::<$t>()
                        .ok_or_else(mismatch)?
                        .values(),
                )
            };
        }
        let values = match array.data_type() {
            D::Null => Values::Null,
            D::Boolean => Values::Bool(array.as_boolean_opt().ok_or_else(mismatch)?),
            D::Int8 => prim!(Int8Type, I8),
            D::Int16 => prim!(Int16Type, I16),
            D::Int32 => prim!(Int32Type, I32),
            D::Int64 => prim!(Int64Type, I64),
            D::UInt8 => prim!(UInt8Type, U8),
            D::UInt16 => prim!(UInt16Type, U16),
            D::UInt32 => prim!(UInt32Type, U32),
            D::UInt64 => prim!(UInt64Type, U64),
            D::Float16 => Values::F16(
                array
                    .as_primitive_opt::<Float16Type>()
                    .ok_or_else(mismatch)?,
            ),
            D::Float32 => prim!(Float32Type, F32),
            D::Float64 => prim!(Float64Type, F64),
            D::Decimal32(_, s) => Values::D32(
                array
                    .as_primitive_opt::<Decimal32Type>()
                    .ok_or_else(mismatch)?
                    .values(),
                *s,
            ),
            D::Decimal64(_, s) => Values::D64(
                array
                    .as_primitive_opt::<Decimal64Type>()
                    .ok_or_else(mismatch)?
                    .values(),
                *s,
            ),
            D::Decimal128(_, s) => Values::D128(
                array
                    .as_primitive_opt::<Decimal128Type>()
                    .ok_or_else(mismatch)?
                    .values(),
                *s,
            ),
            D::Decimal256(_, s) => Values::D256(
                array
                    .as_primitive_opt::<Decimal256Type>()
                    .ok_or_else(mismatch)?
                    .values(),
                *s,
            ),
            D::Utf8 => Values::Str(array.as_string_opt::<i32>().ok_or_else(mismatch)?),
            D::LargeUtf8 => Values::LargeStr(array.as_string_opt::<i64>().ok_or_else(mismatch)?),
            D::Utf8View => Values::View(array.as_string_view_opt().ok_or_else(mismatch)?),
            D::Timestamp(unit, _) => {
                let values: &[i64] = match unit {
                    TimeUnit::Second => array
                        .as_primitive_opt::<arrow_array::types::TimestampSecondType>()
                        .ok_or_else(mismatch)?
                        .values(),
                    TimeUnit::Millisecond => array
                        .as_primitive_opt::<arrow_array::types::TimestampMillisecondType>()
                        .ok_or_else(mismatch)?
                        .values(),
                    TimeUnit::Microsecond => array
                        .as_primitive_opt::<arrow_array::types::TimestampMicrosecondType>()
                        .ok_or_else(mismatch)?
                        .values(),
                    TimeUnit::Nanosecond => array
                        .as_primitive_opt::<arrow_array::types::TimestampNanosecondType>()
                        .ok_or_else(mismatch)?
                        .values(),
                };
                Values::Stamp(values, *unit)
            }
            D::Date32 => prim!(arrow_array::types::Date32Type, Date32),
            D::Date64 => prim!(arrow_array::types::Date64Type, Date64),
            D::Dictionary(key, _) => {
                let d = array.as_any_dictionary_opt().ok_or_else(mismatch)?;
                if d.values().is_empty() {
                    // No values: every key is null.
                    Values::Null
                } else {
                    let keys = match key.as_ref() {
                        D::Int8 => keys_of::<Int8Type>(array),
                        D::Int16 => keys_of::<Int16Type>(array),
                        D::Int32 => keys_of::<Int32Type>(array),
                        D::Int64 => keys_of::<Int64Type>(array),
                        D::UInt8 => keys_of::<UInt8Type>(array),
                        D::UInt16 => keys_of::<UInt16Type>(array),
                        D::UInt32 => keys_of::<UInt32Type>(array),
                        D::UInt64 => keys_of::<UInt64Type>(array),
                        _ => None,
                    }
                    .ok_or_else(unsupported)?;
                    Values::Dict(keys, Box::new(Col::bind(d.values().as_ref())?))
                }
            }
            D::List(_) => {
                let l = array.as_list_opt::<i32>().ok_or_else(mismatch)?;
                Values::List(
                    Offsets::Small(l.value_offsets()),
                    Box::new(Col::bind(l.values().as_ref())?),
                )
            }
            D::LargeList(_) => {
                let l = array.as_list_opt::<i64>().ok_or_else(mismatch)?;
                Values::List(
                    Offsets::Large(l.value_offsets()),
                    Box::new(Col::bind(l.values().as_ref())?),
                )
            }
            D::FixedSizeList(..) => {
                let l = array.as_fixed_size_list_opt().ok_or_else(mismatch)?;
                Values::List(Offsets::Fixed(l), Box::new(Col::bind(l.values().as_ref())?))
            }
            D::ListView(_) => {
                let l = array.as_list_view_opt::<i32>().ok_or_else(mismatch)?;
                Values::List(
                    Offsets::View(l.value_offsets(), l.value_sizes()),
                    Box::new(Col::bind(l.values().as_ref())?),
                )
            }
            D::LargeListView(_) => {
                let l = array.as_list_view_opt::<i64>().ok_or_else(mismatch)?;
                Values::List(
                    Offsets::LargeView(l.value_offsets(), l.value_sizes()),
                    Box::new(Col::bind(l.values().as_ref())?),
                )
            }
            D::Struct(fields) => {
                let s = array.as_struct_opt().ok_or_else(mismatch)?;
                let mut members = Vec::with_capacity(fields.len());
                for (f, child) in fields.iter().zip(s.columns()) {
                    members.push(Member {
                        name: f.name().as_str(),
                        key: key_json(f.name()),
                        col: Col::bind(child.as_ref())?,
                    });
                }
                Values::Struct(members)
            }
            _ => return Err(unsupported()),
        };
        Ok(Col {
            len: array.len(),
            nulls: array.logical_nulls(),
            values,
        })
    }

    /// True when row `i` has no value (null, or past the end of a malformed array).
    #[inline]
    fn is_null(&self, i: usize) -> bool {
        i >= self.len || self.nulls.as_ref().is_some_and(|n| n.is_null(i))
    }

    /// The string at row `i`, when the column holds strings and the row one.
    fn str_at(&self, i: usize) -> Option<&'a str> {
        if self.is_null(i) {
            return None;
        }
        match &self.values {
            Values::Str(a) => Some(a.value(i)),
            Values::LargeStr(a) => Some(a.value(i)),
            Values::View(a) => Some(a.value(i)),
            Values::Dict(keys, values) => values.str_at(*keys.get(i)?),
            _ => None,
        }
    }

    /// Writes the value of row `i` (not null) as JSON, and says what it is for the checks.
    /// `lossy` writes what has no JSON form as Python's `json.dumps` does (`NaN`), for a record
    /// kept back.
    fn write(
        &self,
        i: usize,
        out: &mut Vec<u8>,
        lossy: bool,
    ) -> std::result::Result<Scalar<'a>, Unwritable> {
        Ok(match &self.values {
            Values::Null => {
                out.extend_from_slice(b"null");
                Scalar::Null
            }
            Values::Bool(a) => {
                let b = a.value(i);
                out.extend_from_slice(if b { b"true" } else { b"false" });
                Scalar::Bool
            }
            Values::I8(v) => int(i64::from(at_slice(v, i)?), out),
            Values::I16(v) => int(i64::from(at_slice(v, i)?), out),
            Values::I32(v) => int(i64::from(at_slice(v, i)?), out),
            Values::I64(v) => int(at_slice(v, i)?, out),
            Values::U8(v) => uint(u64::from(at_slice(v, i)?), out),
            Values::U16(v) => uint(u64::from(at_slice(v, i)?), out),
            Values::U32(v) => uint(u64::from(at_slice(v, i)?), out),
            Values::U64(v) => uint(at_slice(v, i)?, out),
            Values::F16(a) => float(a.value(i).to_f64(), out, lossy)?,
            // As Python widens a float32 to a float.
            Values::F32(v) => float(f64::from(at_slice(v, i)?), out, lossy)?,
            Values::F64(v) => float(at_slice(v, i)?, out, lossy)?,
            Values::D32(v, s) => {
                let c = at_slice(v, i)?;
                decimal(&c.unsigned_abs().to_string(), c < 0, *s, out)
            }
            Values::D64(v, s) => {
                let c = at_slice(v, i)?;
                decimal(&c.unsigned_abs().to_string(), c < 0, *s, out)
            }
            Values::D128(v, s) => {
                let c = at_slice(v, i)?;
                decimal(&c.unsigned_abs().to_string(), c < 0, *s, out)
            }
            Values::D256(v, s) => {
                let c = at_slice(v, i)?;
                let text = c.to_string();
                let digits = text.strip_prefix('-').unwrap_or(&text);
                decimal(digits, text.starts_with('-'), *s, out)
            }
            Values::Str(a) => string(a.value(i), out),
            Values::LargeStr(a) => string(a.value(i), out),
            Values::View(a) => string(a.value(i), out),
            Values::Dict(keys, values) => {
                let k = at_slice(keys, i)?;
                if values.is_null(k) {
                    out.extend_from_slice(b"null");
                    Scalar::Null
                } else {
                    values.write(k, out, lossy)?
                }
            }
            Values::Stamp(v, unit) => {
                let raw = at_slice(v, i)?;
                let ms = match unit {
                    TimeUnit::Second => raw.checked_mul(1000),
                    TimeUnit::Millisecond => Some(raw),
                    TimeUnit::Microsecond => Some(raw.div_euclid(1000)),
                    TimeUnit::Nanosecond => Some(raw.div_euclid(1_000_000)),
                };
                match ms {
                    Some(ms) => int(ms, out),
                    None if lossy => int(raw, out),
                    None => {
                        return Err(Unwritable {
                            path: String::new(),
                            message: format!(
                                "the timestamp `{raw}` s is out of range for epoch milliseconds"
                            ),
                        })
                    }
                }
            }
            Values::Date32(v) => int(i64::from(at_slice(v, i)?) * DAY_MS, out),
            // A date64 is a date: as Python's `date`, its midnight.
            Values::Date64(v) => int(at_slice(v, i)?.div_euclid(DAY_MS) * DAY_MS, out),
            Values::List(offsets, child) => {
                out.push(b'[');
                let mut n = 0;
                for j in offsets.range(i, child.len) {
                    if child.is_null(j) {
                        continue;
                    }
                    if n > 0 {
                        out.push(b',');
                    }
                    child.write(j, out, lossy).map_err(|mut e| {
                        e.path = format!("[{n}]{}", e.path);
                        e
                    })?;
                    n += 1;
                }
                out.push(b']');
                Scalar::Container
            }
            Values::Struct(members) => {
                out.push(b'{');
                let mut first = true;
                for m in members {
                    if m.col.is_null(i) {
                        continue;
                    }
                    if !first {
                        out.push(b',');
                    }
                    first = false;
                    out.extend_from_slice(&m.key);
                    m.col.write(i, out, lossy).map_err(|mut e| {
                        e.path = format!(".{}{}", m.name, e.path);
                        e
                    })?;
                }
                out.push(b'}');
                Scalar::Container
            }
        })
    }
}

fn int(v: i64, out: &mut Vec<u8>) -> Scalar<'static> {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    if v >= 0 {
        Scalar::UInt(v.unsigned_abs())
    } else {
        Scalar::NegInt
    }
}

fn uint(v: u64, out: &mut Vec<u8>) -> Scalar<'static> {
    out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
    Scalar::UInt(v)
}

fn at_slice<T: Copy>(v: &[T], i: usize) -> std::result::Result<T, Unwritable> {
    v.get(i).copied().ok_or_else(|| Unwritable {
        path: String::new(),
        message: "a value past the end of its array".into(),
    })
}

/// `"name":` as JSON.
fn key_json(name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(name.len() + 3);
    json::write_str(&mut key, name);
    key.push(b':');
    key
}

fn string<'a>(s: &'a str, out: &mut Vec<u8>) -> Scalar<'a> {
    json::write_str(out, s);
    Scalar::Str(s)
}

/// A float as the dict path writes it (the same writer: Python's `repr`, `1e+16`).
fn float(
    v: f64,
    out: &mut Vec<u8>,
    lossy: bool,
) -> std::result::Result<Scalar<'static>, Unwritable> {
    if v.is_finite() {
        json::write_float(out, v);
        return Ok(Scalar::Float(v));
    }
    if lossy {
        out.extend_from_slice(match v {
            v if v.is_nan() => b"NaN".as_slice(),
            v if v > 0.0 => b"Infinity",
            _ => b"-Infinity",
        });
        return Ok(Scalar::Null);
    }
    Err(Unwritable {
        path: String::new(),
        message: format!(
            "`{v}` has no JSON form (JSON has no NaN or infinity); leave the field out instead"
        ),
    })
}

/// A decimal as Python's `str(Decimal)` writes it (which is what the dict path sends): the
/// coefficient's digits with the point placed by the scale, in exponent form when the exponent
/// is positive or the number very small.
fn decimal(digits: &str, negative: bool, scale: i8, out: &mut Vec<u8>) -> Scalar<'static> {
    let start = out.len();
    let exp = -i64::from(scale);
    let n = digits.len() as i64;
    let left = exp + n;
    let dot = if exp <= 0 && left > -6 { left } else { 1 };
    if negative {
        out.push(b'-');
    }
    if dot <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-dot) as usize));
        out.extend_from_slice(digits.as_bytes());
    } else if dot >= n {
        out.extend_from_slice(digits.as_bytes());
        out.extend(std::iter::repeat_n(b'0', (dot - n) as usize));
    } else {
        out.extend_from_slice(&digits.as_bytes()[..dot as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits.as_bytes()[dot as usize..]);
    }
    if left != dot {
        let _ = write!(Adapter(out), "E{:+}", left - dot);
    }
    number_scalar(&out[start..])
}

/// `fmt::Write` over a byte vector.
struct Adapter<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Adapter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// What a JSON number's text reads as (as the scanner and serde_json read it).
fn number_scalar(text: &[u8]) -> Scalar<'static> {
    let Ok(text) = std::str::from_utf8(text) else {
        return Scalar::Container;
    };
    let integer = !text.contains(['.', 'e', 'E']);
    if integer {
        if let Some(digits) = text.strip_prefix('-') {
            return match digits.parse::<u64>() {
                Ok(0) => Scalar::Float(-0.0),
                Ok(v) if v <= 1 << 63 => Scalar::NegInt,
                _ => text.parse().map_or(Scalar::Container, Scalar::Float),
            };
        }
        return match text.parse::<u64>() {
            Ok(v) => Scalar::UInt(v),
            Err(_) => Scalar::BigInt,
        };
    }
    text.parse().map_or(Scalar::Container, Scalar::Float)
}

// ---------------------------------------------------------------------------------------------
// Rows.

/// Where the columns that matter for the checks and keys are.
#[derive(Debug, Clone)]
struct Plan {
    /// `"name":` of each column.
    keys: Vec<Vec<u8>>,
    names: Vec<String>,
    items: Option<usize>,
    data_type: Option<usize>,
    /// The columns of the models' upsert key fields, by name.
    key_fields: Vec<(&'static str, usize)>,
}

impl Plan {
    fn new(schema: &Schema) -> Plan {
        let at = |name: &str| schema.index_of(name).ok();
        Plan {
            keys: schema.fields().iter().map(|f| key_json(f.name())).collect(),
            names: schema.fields().iter().map(|f| f.name().clone()).collect(),
            items: at("items").filter(|&i| items_layout(schema.field(i).data_type())),
            data_type: at("dataType"),
            key_fields: MODELS
                .iter()
                .flat_map(|m| m.key.iter())
                .filter_map(|name| Some((*name, at(name)?)))
                .collect(),
        }
    }
}

/// A batch's columns, bound.
struct Rows<'a> {
    plan: &'a Plan,
    cols: Vec<Col<'a>>,
}

/// What writing a row found.
struct Written {
    /// The fast check's verdict (always true when not checking).
    conforms: bool,
    /// The hashed upsert key; 0: none.
    key: u64,
}

impl<'a> Rows<'a> {
    fn bind(plan: &'a Plan, batch: &'a RecordBatch) -> Result<Rows<'a>> {
        if batch.num_columns() != plan.names.len() {
            return Err(Error::Io(format!(
                "a batch of the data has {} columns where its schema has {}",
                batch.num_columns(),
                plan.names.len()
            )));
        }
        let cols = batch
            .columns()
            .iter()
            .zip(&plan.names)
            .map(|(a, name)| {
                Col::bind(a.as_ref()).map_err(|t| {
                    Error::Io(format!(
                        "the column `{name}` of a batch cannot be written: {t}"
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Rows { plan, cols })
    }

    fn str_at(&self, col: Option<usize>, row: usize) -> Option<&'a str> {
        col.and_then(|c| self.cols.get(c))
            .and_then(|c| c.str_at(row))
    }

    /// The hashed upsert key of a row, as the scanner finds it in the row's JSON.
    fn key(&self, row: usize) -> u64 {
        let column = |name: &str| self.plan.key_fields.iter().find(|(n, _)| *n == name);
        let value = |name: &str| self.str_at(column(name).map(|(_, c)| *c), row);
        self.str_at(self.plan.data_type, row)
            .and_then(model_named)
            .map_or(0, |m| m.key_hash(value))
    }

    /// Writes row `row` as a JSON object, deciding with `check` whether it conforms.
    fn write(
        &self,
        row: usize,
        check: bool,
        lossy: bool,
        out: &mut Vec<u8>,
    ) -> std::result::Result<Written, Unwritable> {
        let mut record = if check {
            self.str_at(self.plan.data_type, row)
                .and_then(Object::record)
        } else {
            None
        };
        let conforms_so_far = !check || record.is_some();
        out.push(b'{');
        let mut first = true;
        for (c, col) in self.cols.iter().enumerate() {
            if col.is_null(row) {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(&self.plan.keys[c]);
            let name = self.plan.names[c].as_str();
            let located = |mut e: Unwritable| {
                e.path = format!("{name}{}", e.path);
                e
            };
            let Some(rec) = record.as_mut() else {
                col.write(row, out, lossy).map_err(located)?;
                continue;
            };
            let Some(field) = rec.field(name.as_bytes()) else {
                col.write(row, out, lossy).map_err(located)?;
                continue;
            };
            if let (Kind::Items(_), true) = (rec.kind(field), self.plan.items == Some(c)) {
                match rec.items(field) {
                    Some(items) => {
                        if !write_items(col, row, &items, out, lossy).map_err(located)? {
                            rec.fail();
                        }
                    }
                    None => {
                        col.write(row, out, lossy).map_err(located)?;
                    }
                }
            } else {
                let value = col.write(row, out, lossy).map_err(located)?;
                rec.value(field, value);
            }
        }
        out.push(b'}');
        Ok(Written {
            conforms: conforms_so_far && record.as_ref().is_none_or(Object::complete),
            key: self.key(row),
        })
    }
}

/// Writes the `items` list of a row, checking each element; false when one does not conform.
fn write_items(
    col: &Col<'_>,
    row: usize,
    items: &crate::webhook::fast::Items,
    out: &mut Vec<u8>,
    lossy: bool,
) -> std::result::Result<bool, Unwritable> {
    let Values::List(offsets, child) = &col.values else {
        col.write(row, out, lossy)?;
        return Ok(false);
    };
    let mut ok = true;
    out.push(b'[');
    let mut n = 0;
    for j in offsets.range(row, child.len) {
        if child.is_null(j) {
            continue;
        }
        if n > 0 {
            out.push(b',');
        }
        let at = |mut e: Unwritable| {
            e.path = format!("[{n}]{}", e.path);
            e
        };
        let Values::Struct(members) = &child.values else {
            child.write(j, out, lossy).map_err(at)?;
            ok = false;
            n += 1;
            continue;
        };
        let mut item = items.item();
        out.push(b'{');
        let mut first = true;
        for m in members {
            if m.col.is_null(j) {
                continue;
            }
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(&m.key);
            let value = m.col.write(j, out, lossy).map_err(|mut e| {
                e.path = format!("[{n}].{}{}", m.name, e.path);
                e
            })?;
            if let Some(f) = item.field(m.name.as_bytes()) {
                item.value(f, value);
            }
        }
        out.push(b'}');
        ok &= item.complete();
        n += 1;
    }
    out.push(b']');
    Ok(ok)
}

/// The inputs of rows `rows` of a batch, numbered from `index`: their JSON in one buffer, each
/// record a view of it.
fn chunk(
    rows: &Rows<'_>,
    range: Range<usize>,
    index: u64,
    check: bool,
    size_hint: usize,
) -> Vec<Input> {
    let mut buf = Vec::with_capacity(size_hint);
    let mut spans = Vec::with_capacity(range.len());
    for row in range {
        let start = buf.len();
        let outcome = match rows.write(row, check, false, &mut buf) {
            Ok(w) => Ok(w),
            Err(e) => {
                buf.truncate(start);
                // Always writable: what has no JSON form is written as Python writes it.
                let _ = rows.write(row, false, true, &mut buf);
                Err(e)
            }
        };
        spans.push((start..buf.len(), outcome));
    }
    let bytes = Bytes::from(buf);
    spans
        .into_iter()
        .zip(index..)
        .map(|((span, outcome), index)| {
            let text = bytes.slice(span);
            match outcome {
                Ok(Written {
                    conforms: true,
                    key,
                }) => Input::Ready {
                    index,
                    line: None,
                    key,
                    text,
                },
                // The detailed validator says what is wrong, as it does for a dict.
                Ok(Written {
                    conforms: false, ..
                }) => match serde_json::from_slice::<Value>(&text) {
                    Ok(value) => checked_value(index, None, &value, text, true),
                    Err(e) => Input::Rejected {
                        index,
                        line: None,
                        problems: vec![error(String::new(), format!("not valid JSON: {e}"))],
                        text: Some(String::from_utf8_lossy(&text).into_owned()),
                    },
                },
                Err(e) => Input::Rejected {
                    index,
                    line: None,
                    problems: vec![error(e.path, e.message)],
                    text: Some(String::from_utf8_lossy(&text).into_owned()),
                },
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The source.

/// Record batches opened for publishing: the schema checked, the first rows read.
pub struct Columns {
    plan: Plan,
    schema: SchemaRef,
    first: Option<RecordBatch>,
    rest: Box<dyn RecordBatchReader + Send>,
    check: bool,
}

impl std::fmt::Debug for Columns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Columns")
            .field("schema", &self.schema)
            .field("check", &self.check)
            .finish_non_exhaustive()
    }
}

fn read_error(e: impl std::fmt::Display) -> Error {
    Error::Io(format!("cannot read the data: {e}"))
}

impl Columns {
    /// Opens `batches` for publishing, checking (with `check`) what their schema decides
    /// against the models of the `dataType`s in their first rows (read here, so this may wait
    /// for a stream). [`Error::Validation`] with every problem when the columns cannot be
    /// published as they are: unknown or legacy names, types that cannot hold the field,
    /// required fields with no column; and, whatever `check`, a layout with no JSON form
    /// (a type such as `binary`, `items` that is not a list of structs).
    pub fn open(mut batches: Box<dyn RecordBatchReader + Send>, check: bool) -> Result<Columns> {
        let schema = batches.schema();
        let layout = layout_problems(&schema);
        if !layout.is_empty() {
            return Err(refused(layout));
        }
        let mut first = None;
        if check {
            for batch in batches.by_ref() {
                let batch = batch.map_err(read_error)?;
                if batch.num_rows() > 0 {
                    first = Some(batch);
                    break;
                }
            }
            let types = first.as_ref().map(data_types);
            let problems = model_problems(&schema, types.as_deref());
            if !problems.is_empty() {
                return Err(refused(problems));
            }
        }
        Ok(Columns {
            plan: Plan::new(&schema),
            schema,
            first,
            rest: batches,
            check,
        })
    }

    /// The columns' schema.
    #[must_use]
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Starts the source: a thread of the runtime's blocking pool reads the batches and writes
    /// their rows into chunks of [`Input`] (index: the row number from 0, across batches), sent
    /// to the returned channel; it stops at the end of the data, at a read error (the task's
    /// result), or when the receiver is dropped. Must be called within a tokio runtime.
    #[must_use]
    pub fn source(self) -> (mpsc::Receiver<Vec<Input>>, JoinHandle<Result<()>>) {
        let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
        let feeder = tokio::task::spawn_blocking(move || self.feed(&tx));
        (rx, feeder)
    }

    fn feed(self, tx: &mpsc::Sender<Vec<Input>>) -> Result<()> {
        let Columns {
            plan,
            schema,
            first,
            rest,
            check,
        } = self;
        let mut index = 0u64;
        let mut size_hint = 64 * 1024;
        for batch in first.into_iter().map(Ok).chain(rest) {
            let batch = batch.map_err(read_error)?;
            same_schema(&schema, &batch)?;
            let rows = Rows::bind(&plan, &batch)?;
            let n = batch.num_rows();
            let mut start = 0;
            while start < n {
                let end = (start + CHUNK).min(n);
                let inputs = chunk(&rows, start..end, index, check, size_hint);
                size_hint = inputs
                    .iter()
                    .map(|i| match i {
                        Input::Ready { text, .. } => text.len(),
                        _ => 256,
                    })
                    .sum::<usize>()
                    .max(1024)
                    * 9
                    / 8;
                index += (end - start) as u64;
                start = end;
                if tx.blocking_send(inputs).is_err() {
                    // Publishing stopped: read no further.
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// Refuses a batch whose columns are not those its stream announced (the schema was checked).
fn same_schema(schema: &Schema, batch: &RecordBatch) -> Result<()> {
    let got = batch.schema();
    let fields = got.fields();
    if fields.len() == schema.fields().len()
        && fields
            .iter()
            .zip(schema.fields())
            .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type())
    {
        return Ok(());
    }
    Err(Error::Io(format!(
        "a batch of the data does not have the schema the data announced: `{}` where `{}` was \
         announced",
        type_name(&DataType::Struct(fields.clone())),
        type_name(&DataType::Struct(schema.fields().clone()))
    )))
}

/// Opens the Parquet file `path` for reading in batches; also returns its number of rows.
pub fn parquet_batches(path: &Path) -> Result<(Box<dyn RecordBatchReader + Send>, u64)> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let io = |what: &str, e: &dyn std::fmt::Display| {
        Error::Io(format!("cannot {what} `{}`: {e}", path.display()))
    };
    let file = std::fs::File::open(path).map_err(|e| io("read", &e))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| io("read Parquet from", &e))?;
    let rows = u64::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
    let reader = builder
        .with_batch_size(PARQUET_BATCH)
        .build()
        .map_err(|e| io("read Parquet from", &e))?;
    Ok((Box::new(reader), rows))
}

/// The rows of `batch` as JSON texts, unchecked, what has no JSON form written as Python's
/// `json.dumps` writes it (for `write_failures`: the rows a publish did not read).
pub fn json_lines(batch: &RecordBatch) -> Result<Vec<String>> {
    let plan = Plan::new(&batch.schema());
    let rows = Rows::bind(&plan, batch)?;
    let mut out = Vec::with_capacity(batch.num_rows());
    let mut buf = Vec::with_capacity(1024);
    for row in 0..batch.num_rows() {
        buf.clear();
        let _ = rows.write(row, false, true, &mut buf);
        out.push(String::from_utf8_lossy(&buf).into_owned());
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
