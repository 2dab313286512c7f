//! Arrow record batches built from the service's JSON in Rust: one stable, typed schema per
//! resource (events with their documented `details` keys promoted to typed columns and the whole
//! `details` kept as JSON text), nested lists, structs and maps kept, and a clear error naming
//! the record and the field when a value has the wrong type.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BooleanBuilder, Float64Builder, Int64Builder, StringBuilder,
};
use arrow_array::{
    ArrayRef, ListArray, MapArray, RecordBatch, StructArray, TimestampMillisecondArray,
    TimestampSecondArray,
};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::error::{Error, Result};
use crate::time::parse_time;

/// Where a column's values come from in a record.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source {
    /// A top-level key.
    Key(&'static str),
    /// A key of a nested object (`details.duration_sec`).
    Nested(&'static str, &'static str),
    /// A top-level value kept whole, as JSON text.
    Json(&'static str),
    /// A top-level value whose `0` means "none", as the service's `deletedAt` ("0 normally
    /// means not deleted"): null in the table, not 1970-01-01.
    ZeroIsNone(&'static str),
}

/// A resource's columns: Arrow fields and where each one is read from.
#[derive(Debug, Clone)]
pub struct Layout {
    schema: SchemaRef,
    sources: Vec<Source>,
    /// What a record is called in errors (`event`, `site`, ...).
    noun: &'static str,
}

fn utc_ms() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

pub(crate) fn utc_s() -> DataType {
    DataType::Timestamp(TimeUnit::Second, Some("UTC".into()))
}

/// Whether a value is the number 0 (`0`, `0.0`, `"0"`), which [`Source::ZeroIsNone`] reads as
/// none.
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.trim() == "0",
        _ => false,
    }
}

pub(crate) fn list_of(dt: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", dt, true)))
}

pub(crate) fn strukt(fields: Vec<Field>) -> DataType {
    DataType::Struct(Fields::from(fields))
}

pub(crate) fn locale_map() -> DataType {
    let entries = Field::new(
        "entries",
        strukt(vec![
            Field::new("keys", DataType::Utf8, false),
            Field::new("values", DataType::Utf8, true),
        ]),
        false,
    );
    DataType::Map(Arc::new(entries), false)
}

impl Layout {
    /// A layout of `columns` (name, type, where it is read from); `noun` names a record in
    /// errors.
    pub(crate) fn new(
        noun: &'static str,
        columns: Vec<(&'static str, DataType, Source)>,
    ) -> Layout {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(n, dt, _)| Field::new(*n, dt.clone(), true))
            .collect();
        Layout {
            schema: Arc::new(Schema::new(fields)),
            sources: columns.into_iter().map(|(_, _, s)| s).collect(),
            noun,
        }
    }

    /// The Arrow schema (the same for every call, so datasets can be appended to).
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Events: DESIGN.md's schema.
    pub fn events() -> Layout {
        use Source::*;
        Layout::new(
            "event",
            vec![
                ("id", DataType::Utf8, Key("id")),
                ("startTime", utc_ms(), Key("startTime")),
                ("endTime", utc_ms(), Key("endTime")),
                ("createTime", utc_ms(), Key("createTime")),
                ("type", DataType::Utf8, Key("type")),
                ("subtype", DataType::Utf8, Key("subtype")),
                ("siteId", DataType::Utf8, Key("siteId")),
                ("deviceId", DataType::Utf8, Key("deviceId")),
                ("title", DataType::Utf8, Key("title")),
                ("subtitle", DataType::Utf8, Key("subtitle")),
                ("locationTags", list_of(DataType::Utf8), Key("locationTags")),
                (
                    "cameras",
                    list_of(strukt(vec![
                        Field::new("id", DataType::Utf8, true),
                        Field::new("name", DataType::Utf8, true),
                    ])),
                    Key("cameras"),
                ),
                (
                    "details.duration_sec",
                    DataType::Int64,
                    Nested("details", "duration_sec"),
                ),
                (
                    "details.confirmed",
                    DataType::Boolean,
                    Nested("details", "confirmed"),
                ),
                (
                    "details.origin",
                    DataType::Utf8,
                    Nested("details", "origin"),
                ),
                (
                    "details.localTime",
                    DataType::Int64,
                    Nested("details", "localTime"),
                ),
                (
                    "details.generatedByEventStandard",
                    DataType::Boolean,
                    Nested("details", "generatedByEventStandard"),
                ),
                (
                    "details.marker",
                    DataType::Utf8,
                    Nested("details", "marker"),
                ),
                ("details", DataType::Utf8, Json("details")),
            ],
        )
    }

    /// One record batch of `records` (JSON texts), in order.
    pub fn batch<'a>(&self, records: impl Iterator<Item = &'a str> + Clone) -> Result<RecordBatch> {
        if self.noun == "event" {
            if let Some(batch) = events_fast(&self.schema, records.clone()) {
                return Ok(batch);
            }
        }
        self.batch_checked(records)
    }

    /// The general path: every value checked against its column's type, so that a value of
    /// the wrong type is reported with its record and field.
    pub(crate) fn batch_checked<'a>(
        &self,
        records: impl Iterator<Item = &'a str> + Clone,
    ) -> Result<RecordBatch> {
        let raw_texts: Vec<&str> = records.clone().collect();
        let values: Vec<Value> = records
            .enumerate()
            .map(|(i, text)| {
                serde_json::from_str(text)
                    .map_err(|e| Error::Data(format!("{} #{i} is not valid JSON ({e})", self.noun)))
            })
            .collect::<Result<_>>()?;
        let ids: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("#{i}"), str::to_string)
            })
            .collect();
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.sources.len());
        let mut texts: Vec<Option<String>> = Vec::new();
        for (field, source) in self.schema.fields().iter().zip(&self.sources) {
            let column = match *source {
                Source::Key(k) => {
                    let cells: Vec<Option<&Value>> =
                        values.iter().map(|v| present(v.get(k))).collect();
                    build(field.data_type(), &cells, k, &id_refs, self.noun)?
                }
                Source::ZeroIsNone(k) => {
                    let cells: Vec<Option<&Value>> = values
                        .iter()
                        .map(|v| present(v.get(k)).filter(|c| !is_zero(c)))
                        .collect();
                    build(field.data_type(), &cells, k, &id_refs, self.noun)?
                }
                Source::Nested(outer, k) => {
                    let cells: Vec<Option<&Value>> = values
                        .iter()
                        .map(|v| present(v.get(outer).and_then(|o| o.get(k))))
                        .collect();
                    build(field.data_type(), &cells, field.name(), &id_refs, self.noun)?
                }
                Source::Json(k) => {
                    // The value's own text, as the service sent it.
                    texts.clear();
                    for text in &raw_texts {
                        let map: std::collections::HashMap<std::borrow::Cow<str>, &RawValue> =
                            serde_json::from_str(text).map_err(|e| Error::Data(format!("{e}")))?;
                        texts.push(
                            map.get(k)
                                .map(|r| r.get())
                                .filter(|t| *t != "null")
                                .map(str::to_string),
                        );
                    }
                    Arc::new(arrow_array::StringArray::from_iter(
                        texts.iter().map(Option::as_deref),
                    ))
                }
            };
            columns.push(column);
        }
        RecordBatch::try_new(self.schema.clone(), columns)
            .map_err(|e| Error::Data(format!("cannot assemble the {} table: {e}", self.noun)))
    }
}

#[derive(Deserialize)]
struct CameraRow<'a> {
    #[serde(borrow)]
    id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<std::borrow::Cow<'a, str>>,
}

#[derive(Deserialize)]
#[allow(non_snake_case)]
struct EventRow<'a> {
    #[serde(borrow)]
    id: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    startTime: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    endTime: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    createTime: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, rename = "type")]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    subtype: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    siteId: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    deviceId: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    title: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    subtitle: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    locationTags: Option<Vec<Option<std::borrow::Cow<'a, str>>>>,
    #[serde(borrow)]
    cameras: Option<Vec<Option<CameraRow<'a>>>>,
    #[serde(borrow)]
    details: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[allow(non_snake_case)]
struct DetailsRow<'a> {
    duration_sec: Option<i64>,
    confirmed: Option<bool>,
    #[serde(borrow)]
    origin: Option<std::borrow::Cow<'a, str>>,
    localTime: Option<i64>,
    generatedByEventStandard: Option<bool>,
    #[serde(borrow)]
    marker: Option<std::borrow::Cow<'a, str>>,
}

/// A page of events (the body of `GET /v2/events`) in one pass: its record batch and each
/// event's (startTime in epoch ms, id). None when any value is off or a key is missing (the
/// careful path then says which).
pub(crate) fn event_page(body: &[u8]) -> Option<(RecordBatch, Vec<(i64, String)>)> {
    let rows: Vec<EventRow> = serde_json::from_slice(body).ok()?;
    let keys = rows
        .iter()
        .map(|r| {
            Some((
                parse_time(r.startTime.as_deref()?)?,
                r.id.as_deref()?.to_string(),
            ))
        })
        .collect::<Option<Vec<_>>>()?;
    Some((rows_batch(&events_schema(), &rows)?, keys))
}

/// The events schema (`Layout::events().schema()`), built once: it is needed for every page.
/// The Arrow schema of events (built once).
pub fn events_schema() -> SchemaRef {
    static SCHEMA: std::sync::OnceLock<SchemaRef> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| Layout::events().schema()).clone()
}

/// Events whose values all have the expected types, built without a JSON tree; None when any
/// value is off (the checked path then says which).
pub(crate) fn events_fast<'a>(
    schema: &SchemaRef,
    records: impl Iterator<Item = &'a str>,
) -> Option<RecordBatch> {
    let rows: Vec<EventRow> = records
        .map(|t| serde_json::from_str(t).ok())
        .collect::<Option<_>>()?;
    rows_batch(schema, &rows)
}

/// The record batch of typed rows, in order.
fn rows_batch<'a>(schema: &SchemaRef, rows: &[EventRow<'a>]) -> Option<RecordBatch> {
    let details: Vec<Option<DetailsRow>> = rows
        .iter()
        .map(|r| match r.details {
            Some(raw) if raw.get() != "null" => serde_json::from_str(raw.get()).ok().map(Some),
            _ => Some(None),
        })
        .collect::<Option<_>>()?;
    let n = rows.len();
    let text = |f: &dyn for<'r> Fn(&'r EventRow<'a>) -> Option<&'r str>| -> ArrayRef {
        let bytes = rows.iter().map(|r| f(r).map_or(0, str::len)).sum();
        let mut b = StringBuilder::with_capacity(n, bytes);
        for r in rows {
            b.append_option(f(r));
        }
        Arc::new(b.finish())
    };
    let time = |f: &dyn for<'r> Fn(&'r EventRow<'a>) -> Option<&'r str>| -> Option<ArrayRef> {
        let mut v = Vec::with_capacity(n);
        for r in rows {
            v.push(match f(r) {
                None => None,
                Some(s) => Some(parse_time(s)?),
            });
        }
        Some(Arc::new(
            TimestampMillisecondArray::from(v).with_timezone("UTC"),
        ))
    };
    let mut tag_offsets = vec![0i32];
    let mut tags = StringBuilder::new();
    let mut tag_valid = Vec::with_capacity(n);
    let mut cam_offsets = vec![0i32];
    let (mut cam_ids, mut cam_names) = (StringBuilder::new(), StringBuilder::new());
    let mut cam_item_valid = Vec::new();
    let mut cam_valid = Vec::with_capacity(n);
    for r in rows {
        tag_valid.push(r.locationTags.is_some());
        for t in r.locationTags.iter().flatten() {
            tags.append_option(t.as_deref());
        }
        tag_offsets.push(i32::try_from(tags.len()).ok()?);
        cam_valid.push(r.cameras.is_some());
        for c in r.cameras.iter().flatten() {
            cam_item_valid.push(c.is_some());
            cam_ids.append_option(c.as_ref().and_then(|c| c.id.as_deref()));
            cam_names.append_option(c.as_ref().and_then(|c| c.name.as_deref()));
        }
        cam_offsets.push(i32::try_from(cam_item_valid.len()).ok()?);
    }
    let fields = schema.fields();
    let DataType::List(tag_item) = fields[10].data_type() else {
        return None;
    };
    let DataType::List(cam_item) = fields[11].data_type() else {
        return None;
    };
    let DataType::Struct(cam_fields) = cam_item.data_type() else {
        return None;
    };
    let tags_array = ListArray::try_new(
        tag_item.clone(),
        OffsetBuffer::new(tag_offsets.into()),
        Arc::new(tags.finish()),
        Some(NullBuffer::from(tag_valid)),
    )
    .ok()?;
    let cam_struct = StructArray::try_new(
        cam_fields.clone(),
        vec![Arc::new(cam_ids.finish()), Arc::new(cam_names.finish())],
        Some(NullBuffer::from(cam_item_valid)),
    )
    .ok()?;
    let cams_array = ListArray::try_new(
        cam_item.clone(),
        OffsetBuffer::new(cam_offsets.into()),
        Arc::new(cam_struct),
        Some(NullBuffer::from(cam_valid)),
    )
    .ok()?;
    let int = |f: &dyn Fn(&DetailsRow<'a>) -> Option<i64>| -> ArrayRef {
        Arc::new(arrow_array::Int64Array::from_iter(
            details.iter().map(|d| d.as_ref().and_then(f)),
        ))
    };
    let boolean = |f: &dyn Fn(&DetailsRow<'a>) -> Option<bool>| -> ArrayRef {
        Arc::new(arrow_array::BooleanArray::from_iter(
            details.iter().map(|d| d.as_ref().and_then(f)),
        ))
    };
    let dtext = |f: &dyn for<'r> Fn(&'r DetailsRow<'a>) -> Option<&'r str>| -> ArrayRef {
        Arc::new(arrow_array::StringArray::from_iter(
            details.iter().map(|d| d.as_ref().and_then(f)),
        ))
    };
    let columns: Vec<ArrayRef> = vec![
        text(&|r| r.id.as_deref()),
        time(&|r| r.startTime.as_deref())?,
        time(&|r| r.endTime.as_deref())?,
        time(&|r| r.createTime.as_deref())?,
        text(&|r| r.kind.as_deref()),
        text(&|r| r.subtype.as_deref()),
        text(&|r| r.siteId.as_deref()),
        text(&|r| r.deviceId.as_deref()),
        text(&|r| r.title.as_deref()),
        text(&|r| r.subtitle.as_deref()),
        Arc::new(tags_array),
        Arc::new(cams_array),
        int(&|d| d.duration_sec),
        boolean(&|d| d.confirmed),
        dtext(&|d| d.origin.as_deref()),
        int(&|d| d.localTime),
        boolean(&|d| d.generatedByEventStandard),
        dtext(&|d| d.marker.as_deref()),
        text(&|r| r.details.map(RawValue::get).filter(|t| *t != "null")),
    ];
    RecordBatch::try_new(schema.clone(), columns).ok()
}

fn present(v: Option<&Value>) -> Option<&Value> {
    v.filter(|v| !v.is_null())
}

fn kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("boolean `{b}`"),
        Value::Number(n) => format!("number `{n}`"),
        Value::String(s) => {
            let short: String = s.chars().take(40).collect();
            format!("string `{short}`")
        }
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

fn wrong(noun: &str, id: &str, path: &str, expected: &str, got: &Value) -> Error {
    Error::Data(format!(
        "{noun} `{id}`: field `{path}`: expected {expected}, found {}",
        kind(got)
    ))
}

fn as_int(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| f as i64)
    })
}

/// Builds one column of `dt` from `cells` (None = null); `ids` name the record of each cell.
fn build(
    dt: &DataType,
    cells: &[Option<&Value>],
    path: &str,
    ids: &[&str],
    noun: &str,
) -> Result<ArrayRef> {
    let err = |i: usize, expected: &str, v: &Value| wrong(noun, ids[i], path, expected, v);
    Ok(match dt {
        DataType::Utf8 => {
            let mut b = StringBuilder::with_capacity(cells.len(), cells.len() * 16);
            for (i, c) in cells.iter().enumerate() {
                match c {
                    None => b.append_null(),
                    Some(Value::String(s)) => b.append_value(s),
                    Some(v) => return Err(err(i, "a string", v)),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Int64 => {
            let mut b = Int64Builder::with_capacity(cells.len());
            for (i, c) in cells.iter().enumerate() {
                match c {
                    None => b.append_null(),
                    Some(v) => b.append_value(as_int(v).ok_or_else(|| err(i, "an integer", v))?),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Float64 => {
            let mut b = Float64Builder::with_capacity(cells.len());
            for (i, c) in cells.iter().enumerate() {
                match c {
                    None => b.append_null(),
                    Some(v) => b.append_value(v.as_f64().ok_or_else(|| err(i, "a number", v))?),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Boolean => {
            let mut b = BooleanBuilder::with_capacity(cells.len());
            for (i, c) in cells.iter().enumerate() {
                match c {
                    None => b.append_null(),
                    Some(v) => b.append_value(v.as_bool().ok_or_else(|| err(i, "a boolean", v))?),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Timestamp(unit, tz) => {
            let per_ms = matches!(unit, TimeUnit::Second);
            let mut out: Vec<Option<i64>> = Vec::with_capacity(cells.len());
            for (i, c) in cells.iter().enumerate() {
                out.push(match c {
                    None => None,
                    Some(Value::String(s)) => {
                        let ms = parse_time(s).ok_or_else(|| {
                            err(i, "an ISO-8601 timestamp", &Value::String(s.clone()))
                        })?;
                        Some(if per_ms { ms.div_euclid(1000) } else { ms })
                    }
                    Some(v) => Some(as_int(v).ok_or_else(|| err(i, "a timestamp", v))?),
                });
            }
            match unit {
                TimeUnit::Second => {
                    Arc::new(TimestampSecondArray::from(out).with_timezone_opt(tz.clone()))
                }
                _ => Arc::new(TimestampMillisecondArray::from(out).with_timezone_opt(tz.clone())),
            }
        }
        DataType::List(item) => {
            let mut offsets = Vec::with_capacity(cells.len() + 1);
            offsets.push(0i32);
            let mut children: Vec<Option<&Value>> = Vec::new();
            let mut child_ids: Vec<&str> = Vec::new();
            let mut valid = Vec::with_capacity(cells.len());
            for (i, c) in cells.iter().enumerate() {
                match c {
                    None => valid.push(false),
                    Some(Value::Array(items)) => {
                        valid.push(true);
                        for it in items {
                            children.push(present(Some(it)));
                            child_ids.push(ids[i]);
                        }
                    }
                    Some(v) => return Err(err(i, "an array", v)),
                }
                offsets.push(
                    i32::try_from(children.len())
                        .map_err(|_| err(i, "a smaller array", &Value::Null))?,
                );
            }
            let values = build(
                item.data_type(),
                &children,
                &format!("{path}[]"),
                &child_ids,
                noun,
            )?;
            Arc::new(
                ListArray::try_new(
                    item.clone(),
                    OffsetBuffer::new(offsets.into()),
                    values,
                    Some(NullBuffer::from(valid)),
                )
                .map_err(|e| Error::Data(format!("field `{path}`: {e}")))?,
            )
        }
        DataType::Struct(fields) => {
            let mut valid = Vec::with_capacity(cells.len());
            for (i, c) in cells.iter().enumerate() {
                match c {
                    None => valid.push(false),
                    Some(Value::Object(_)) => valid.push(true),
                    Some(v) => return Err(err(i, "an object", v)),
                }
            }
            let mut arrays = Vec::with_capacity(fields.len());
            for f in fields.iter() {
                let sub: Vec<Option<&Value>> = cells
                    .iter()
                    .map(|c| present(c.and_then(|v| v.get(f.name()))))
                    .collect();
                arrays.push(build(
                    f.data_type(),
                    &sub,
                    &format!("{path}.{}", f.name()),
                    ids,
                    noun,
                )?);
            }
            Arc::new(
                StructArray::try_new(fields.clone(), arrays, Some(NullBuffer::from(valid)))
                    .map_err(|e| Error::Data(format!("field `{path}`: {e}")))?,
            )
        }
        DataType::Map(entries, sorted) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(Error::Data(format!("field `{path}`: bad map layout")));
            };
            let mut offsets = vec![0i32];
            let mut keys = StringBuilder::new();
            let mut vals: Vec<Option<&Value>> = Vec::new();
            let mut val_ids: Vec<&str> = Vec::new();
            let mut valid = Vec::with_capacity(cells.len());
            for (i, c) in cells.iter().enumerate() {
                match c {
                    None => valid.push(false),
                    Some(Value::Object(m)) => {
                        valid.push(true);
                        for (k, v) in m {
                            keys.append_value(k);
                            vals.push(present(Some(v)));
                            val_ids.push(ids[i]);
                        }
                    }
                    Some(v) => return Err(err(i, "an object", v)),
                }
                offsets.push(
                    i32::try_from(vals.len())
                        .map_err(|_| err(i, "a smaller object", &Value::Null))?,
                );
            }
            let value_type = kv.get(1).map_or(DataType::Utf8, |f| f.data_type().clone());
            let values = build(&value_type, &vals, &format!("{path}.*"), &val_ids, noun)?;
            let entry_array =
                StructArray::try_new(kv.clone(), vec![Arc::new(keys.finish()), values], None)
                    .map_err(|e| Error::Data(format!("field `{path}`: {e}")))?;
            Arc::new(
                MapArray::try_new(
                    entries.clone(),
                    OffsetBuffer::new(offsets.into()),
                    entry_array,
                    Some(NullBuffer::from(valid)),
                    *sorted,
                )
                .map_err(|e| Error::Data(format!("field `{path}`: {e}")))?,
            )
        }
        other => {
            return Err(Error::Data(format!(
                "field `{path}`: unsupported type {other}"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Array;

    const EVENT: &str = r#"{"id":"e1","startTime":"2026-01-05T09:15:23.123-05:00","endTime":"2026-01-05T09:16:00.000-05:00","createTime":"2026-01-05T09:16:01.000-05:00","type":"bookmark","subtype":"ai-dwellTime","siteId":"s","deviceId":"d","title":"t","subtitle":"u","locationTags":["Brand:X","City:Y"],"details":{"duration_sec":37,"confirmed":true,"origin":"o","localTime":5,"generatedByEventStandard":true,"marker":"m","zone":"z"},"cameras":[{"id":"c","name":"n"}]}"#;

    #[test]
    fn events_schema_and_values() {
        let layout = Layout::events();
        let b = layout.batch([EVENT].into_iter()).expect("batch");
        assert_eq!(b.num_rows(), 1);
        assert_eq!(b.schema().field(1).data_type(), &utc_ms());
        let schema = b.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert!(names.contains(&"details.duration_sec") && names.last() == Some(&"details"));
        let start = b
            .column(1)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .expect("ts");
        assert_eq!(start.value(0), 1_767_622_523_123);
    }

    #[test]
    fn wrong_type_names_field_and_id() {
        let bad = EVENT.replace("\"duration_sec\":37", "\"duration_sec\":\"long\"");
        let err = Layout::events()
            .batch([bad.as_str()].into_iter())
            .expect_err("wrong type");
        let msg = err.to_string();
        assert!(
            msg.contains("`e1`") && msg.contains("details.duration_sec") && msg.contains("integer"),
            "{msg}"
        );
    }

    #[test]
    fn fast_and_checked_paths_agree() {
        let data = crate::emulator::data::Data::generate(&crate::emulator::DataConfig {
            seed: 4,
            sites: 5,
            days: 1,
            events_per_day: 2500,
            ..Default::default()
        });
        let texts: Vec<String> = data
            .events
            .iter()
            .map(|e| {
                let mut s = String::new();
                data.render_event(e, &mut s);
                s
            })
            .collect();
        let mut texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let odd = r#"{"id":"x","startTime":"2026-01-05T00:00:00.000Z","locationTags":null,"cameras":[null,{"id":"c"}],"details":null}"#;
        texts.push(odd);
        let layout = Layout::events();
        let fast = events_fast(&layout.schema, texts.iter().copied()).expect("fast path applies");
        let checked = layout
            .batch_checked(texts.iter().copied())
            .expect("checked path");
        assert_eq!(fast, checked);
    }

    #[test]
    fn empty_batch_has_the_full_schema() {
        let b = Layout::events().batch(std::iter::empty()).expect("empty");
        assert_eq!(b.num_rows(), 0);
        assert_eq!(b.num_columns(), 19);
    }

    #[test]
    fn reports_maps() {
        let r = r#"{"id":"r","name":{"en-US":"A","fr-FR":"B"},"description":null}"#;
        let b = crate::client::lists::List::Reports
            .layout()
            .batch([r].into_iter())
            .expect("batch");
        assert!(b.column(2).is_null(0));
        assert_eq!(b.column(1).len(), 1);
    }
}
