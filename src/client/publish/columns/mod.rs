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
//!
//! By concern: `schema` checks the columns once, `column` binds one column and writes its
//! values, `rows` writes a batch's rows as records and makes the chunks of inputs; this file
//! is the source (the batches of a table, a reader or a Parquet file) that feeds them.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::LargeStringBuilder;
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
use arrow_schema::{DataType, Field, Schema, SchemaRef, TimeUnit};
use bytes::Bytes;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::json;
use super::prepare::{check_text, checked_value, first_errors};
use super::{Input, CHANNEL_CHUNKS, CHUNK};
use crate::client::error::{Error, Result};
use crate::webhook::fast::{Object, Scalar};
use crate::webhook::models::{model_named, Kind, ANY_ITEM, MODELS, OTHER_ITEM, RETAIL_ITEM};
use crate::webhook::{self, scan, Problem, Severity};

use crate::time::DAY_MS;

/// Rows of a Parquet file read at a time.
const PARQUET_BATCH: usize = 8192;
/// Distinct `dataType` values of the first batch whose models the columns are checked against.
const MAX_DATA_TYPES: usize = 8;

mod column;
mod rows;
mod schema;

use column::*;
use rows::*;
use schema::*;

/// Record batches opened for publishing: the schema checked, the first rows read.
pub struct Columns {
    positions: Positions,
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
    pub fn open(batches: Box<dyn RecordBatchReader + Send>, check: bool) -> Result<Columns> {
        Columns::open_loose(batches, check, &[])
    }

    /// As [`open`](Columns::open), for columns of which those named in `loose` are lists of
    /// structs made from lists of dicts (a DataFrame's `items`): when the models refuse the
    /// columns, these are written as JSON text instead (as [`JSON_EXTENSION`] columns), so that
    /// each row is judged from its record's text, as a dict's list is, and the columns are
    /// checked again.
    pub fn open_loose(
        mut batches: Box<dyn RecordBatchReader + Send>,
        check: bool,
        loose: &[String],
    ) -> Result<Columns> {
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
                let at: Vec<usize> = loose
                    .iter()
                    .filter_map(|name| schema.index_of(name).ok())
                    .collect();
                if at.is_empty() {
                    return Err(refused(problems));
                }
                let texts = JsonText::new(batches, at);
                let first = first.map(|b| texts.convert(&b)).transpose()?;
                return Columns::open(Box::new(texts.with_first(first)), check);
            }
        }
        Ok(Columns {
            positions: Positions::new(&schema),
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
            positions,
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
            let rows = Rows::bind(&positions, &batch)?;
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

/// Record batches whose columns at `at` (lists of structs) are given as JSON text, one value
/// a row (null where the list is), written as the records' values are.
struct JsonText {
    inner: Box<dyn RecordBatchReader + Send>,
    schema: SchemaRef,
    at: Vec<usize>,
    /// A batch converted already, given back first.
    first: Option<RecordBatch>,
}

impl JsonText {
    fn new(inner: Box<dyn RecordBatchReader + Send>, at: Vec<usize>) -> JsonText {
        let given = inner.schema();
        let fields: Vec<Field> = given
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                if at.contains(&i) {
                    let metadata = [("ARROW:extension:name".to_owned(), JSON_EXTENSION.to_owned())];
                    Field::new(f.name(), DataType::LargeUtf8, true)
                        .with_metadata(metadata.into_iter().collect())
                } else {
                    f.as_ref().clone()
                }
            })
            .collect();
        let schema = Arc::new(Schema::new_with_metadata(fields, given.metadata().clone()));
        JsonText {
            inner,
            schema,
            at,
            first: None,
        }
    }

    fn with_first(mut self, first: Option<RecordBatch>) -> JsonText {
        self.first = first;
        self
    }

    fn convert(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let mut columns = batch.columns().to_vec();
        for &i in &self.at {
            if let Some(column) = columns.get_mut(i) {
                *column = Arc::new(json_text(column.as_ref())?);
            }
        }
        RecordBatch::try_new(self.schema.clone(), columns).map_err(read_error)
    }
}

impl Iterator for JsonText {
    type Item = std::result::Result<RecordBatch, arrow_schema::ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(first) = self.first.take() {
            return Some(Ok(first));
        }
        let batch = match self.inner.next()? {
            Ok(batch) => batch,
            Err(e) => return Some(Err(e)),
        };
        Some(
            self.convert(&batch)
                .map_err(|e| arrow_schema::ArrowError::ExternalError(Box::new(e))),
        )
    }
}

impl RecordBatchReader for JsonText {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// The values of `array` as JSON text, one a row, null where it has none.
fn json_text(array: &dyn Array) -> Result<LargeStringArray> {
    let col = Col::bind(array).map_err(|e| Error::Io(format!("cannot write the data: {e}")))?;
    let mut out = LargeStringBuilder::with_capacity(array.len(), array.len().saturating_mul(64));
    let mut buf = Vec::with_capacity(256);
    for row in 0..array.len() {
        if col.is_null(row) {
            out.append_null();
            continue;
        }
        buf.clear();
        col.write(row, &mut buf, false).map_err(|e| {
            Error::Io(format!(
                "cannot write the data: row {row} at `{}`: {}",
                e.path, e.message
            ))
        })?;
        out.append_value(String::from_utf8_lossy(&buf));
    }
    Ok(out.finish())
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
    let positions = Positions::new(&batch.schema());
    let rows = Rows::bind(&positions, batch)?;
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
