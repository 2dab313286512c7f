//! The schema check of publishing from columns: once per input, the columns' names, types and
//! layout against the standard models (unknown and legacy names, a type no field takes, a
//! required column missing), worded as the detailed validator words a record's problems.

use super::*;

/// What a model field takes, as far as a column's type can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FieldType {
    Text,
    Time,
    Number,
    Items,
}

pub(super) fn field_type(kind: Kind) -> FieldType {
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
pub(super) enum ColumnType {
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

pub(super) fn column_type(dt: &DataType) -> ColumnType {
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
pub(super) fn element(dt: &DataType) -> Option<&DataType> {
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
pub(super) fn type_name(dt: &DataType) -> String {
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

pub(super) fn error(path: String, message: String) -> Problem {
    Problem {
        path,
        message,
        severity: Severity::Error,
    }
}

/// The layout of the `items` column, for messages.
pub(super) const ITEMS_LAYOUT: &str =
    "a list of structs, one struct per item whose fields are the item \
     fields (e.g. `list<struct<time, quantity, description, unitPrice, type>>`)";

/// The name of Arrow's canonical extension type for JSON text (`pyarrow.json_()`).
pub const JSON_EXTENSION: &str = "arrow.json";

/// A column of JSON text (the `arrow.json` extension type, on a string type): each value is
/// written as the JSON it holds, and each row with one is checked from its text.
pub(super) fn is_json(field: &Field) -> bool {
    field.extension_type_name() == Some(JSON_EXTENSION)
}

/// Problems that make the columns impossible to write as records, whatever the checks: a name
/// twice, a type with no JSON form, an `items` column that is not a list of structs (or JSON).
pub(super) fn layout_problems(schema: &Schema) -> Vec<Problem> {
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
        if is_json(f) {
            if column_type(f.data_type()) != ColumnType::Text {
                out.push(error(
                    name.to_owned(),
                    format!(
                        "a column of JSON (`{JSON_EXTENSION}`) must store strings, found `{}`",
                        type_name(f.data_type())
                    ),
                ));
            }
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
pub(super) fn unwritable(dt: &DataType) -> Option<&DataType> {
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
pub(super) fn items_layout(dt: &DataType) -> bool {
    match column_type(dt) {
        ColumnType::Null => true,
        ColumnType::List => {
            element(dt).is_some_and(|e| matches!(e, DataType::Struct(_) | DataType::Null))
        }
        _ => false,
    }
}

/// Whether a column that holds `h` fits a field that wants `w`.
pub(super) fn column_fits(w: FieldType, h: ColumnType) -> bool {
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

pub(super) fn expected(w: FieldType, name: &str) -> String {
    match (w, name) {
        (FieldType::Text, "schemaVersion") => "expected the string `\"1\"`".into(),
        (FieldType::Text, _) => "expected a string".into(),
        (FieldType::Time, _) => "expected epoch milliseconds or an ISO-8601 timestamp".into(),
        (FieldType::Number, _) => "expected a number".into(),
        (FieldType::Items, _) => "expected an array".into(),
    }
}

pub(super) fn type_problem(path: &str, w: FieldType, name: &str, dt: &DataType) -> Problem {
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
pub(super) fn top_kind(name: &str) -> Option<Kind> {
    MODELS
        .iter()
        .flat_map(|m| m.fields.iter())
        .find(|f| f.name == name)
        .map(|f| f.kind)
}

pub(super) fn item_kind(name: &str) -> Option<Kind> {
    RETAIL_ITEM
        .iter()
        .chain(OTHER_ITEM)
        .chain(ANY_ITEM)
        .find(|f| f.name == name)
        .map(|f| f.kind)
}

/// What the detailed validator says at `path` of `record` (errors only).
pub(super) fn validator_errors(record: &Value, path: &str) -> Vec<Problem> {
    webhook::validate(record)
        .into_iter()
        .filter(|p| p.path == path && p.severity == Severity::Error)
        .collect()
}

/// A record of `data_type` (none: without a `dataType`) with `fields`, for the validator.
pub(super) fn probe(data_type: Option<&str>, fields: Value) -> Value {
    let mut record = serde_json::Map::new();
    if let Some(dt) = data_type {
        record.insert("dataType".into(), Value::String(dt.to_owned()));
    }
    if let Value::Object(fields) = fields {
        record.extend(fields);
    }
    Value::Object(record)
}

pub(super) fn push(p: Problem, out: &mut Vec<Problem>) {
    if !out.contains(&p) {
        out.push(p);
    }
}

/// Problems of the columns under the models of `data_types` (the values of the `dataType`
/// column in the first rows; None when there are no rows): names no model knows (worded by the
/// detailed validator for those data types), types that cannot hold what a field takes,
/// required fields with no column (only when there are rows: none of them lacks anything).
pub(super) fn model_problems(schema: &Schema, data_types: Option<&[String]>) -> Vec<Problem> {
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
        if is_json(f) {
            // Any JSON value: checked row by row, from the text.
            continue;
        }
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
pub(super) fn data_types(batch: &RecordBatch) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let schema = batch.schema();
    let Some(i) = schema.index_of("dataType").ok() else {
        return out;
    };
    if is_json(schema.field(i)) {
        return out; // JSON text, not the names themselves: the rows are checked one by one
    }
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

pub(super) fn refused(problems: Vec<Problem>) -> Error {
    Error::Validation {
        message: format!(
            "the columns cannot be published as they are (nothing was sent): {}",
            first_errors(&problems)
        ),
        problems,
    }
}
