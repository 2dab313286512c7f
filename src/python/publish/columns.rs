//! Publishing from columns (`publish` with `columns`): Arrow data (anything with
//! `__arrow_c_stream__` or `__arrow_c_array__`, imported through pyo3-arrow) or a Parquet file,
//! handed to the core's column source, which reads the batches and writes the records on a
//! thread of its own with the GIL released. The call waits as `publish` does: GIL released,
//! signals checked every 50 ms, Ctrl-C cancelling the core, which returns its partial report.
//! Also `json_column`, a DataFrame's column of lists and dicts as JSON text.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3_arrow::input::AnyRecordBatch;

use super::lines::open_source;
use super::report::{self, PyPublishReport};
use super::unread::Reread;
use super::{finished, Given, Publishing};
use crate::client::publish::columns::Columns;
use crate::python::conversions::errors;
use crate::python::runtime::wait::{self, Waited};
use crate::python::runtime::{self, log};

/// Publishes the rows of Arrow data or of a Parquet file as records (columns named as the
/// model's fields; `items` a list of structs): `publish` with `columns`.
///
/// Columns that do not fit the models raise `ValidationError` before anything is sent, unless
/// the columns named in `loose` (lists of structs made from lists of dicts) are the cause:
/// these then go as JSON text, each row judged as a dict's list is.
pub(super) fn publish(
    py: Python<'_>,
    publishing: Publishing,
    source: Given<'_>,
    loose: &[String],
) -> PyResult<(PyPublishReport, Option<Py<PyAny>>)> {
    let validate = publishing.options.validate;
    let again = source.again(Reread::Arrow, Reread::Parquet)?;
    let data = source
        .object
        .map(|d| d.extract::<AnyRecordBatch>())
        .transpose()?;
    let (reader, rows) = open_source(data, source.path)?;
    let again = again.map(|(source, size)| (source, size.or(rows)));
    let asked = publishing.asked.clone();
    let rt = runtime::get().map_err(errors::internal)?;
    log::refresh(py);
    // The schema check reads the first rows, which a stream may have to wait for.
    let opened = runtime::detach(py, || Columns::open_loose(reader, validate, loose));
    py.check_signals()?;
    let columns = opened.map_err(errors::to_py)?;
    let (rx, feeder) = {
        let _guard = rt.enter();
        columns.source()
    };
    let mut started = publishing.start(&rt, rx);

    // A signal, the caller giving up (an asyncio task cancelled) or a progress callback that
    // raised: the core stops at once and reports what it had; the source stops at its next
    // chunk (its channel is closed), reading no further.
    let (outcome, mut raised, interrupted) = match wait::until_done(
        py,
        &rt,
        &mut started.task,
        |py| started.cell.report(py, started.progress.as_ref()),
        started.cancelled.as_ref(),
    ) {
        Waited::Ended(done, None) => (done, None, false),
        Waited::Ended(done, Some(stopped)) => (done, stopped, true),
        Waited::Stopped(stopped) => {
            started.stop.send_replace(true);
            (
                runtime::detach(py, || rt.block_on(&mut started.task)),
                stopped,
                true,
            )
        }
    };
    log::flush(py);
    let report = finished(outcome)?;
    if !interrupted && report.error.is_none() {
        // The source ended (its channel closed): a read error, if any, is the publish's.
        match runtime::detach(py, || rt.block_on(feeder)) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => raised = Some(errors::to_py(e)),
            Err(join) => raised = Some(errors::internal(join)),
        }
    }
    if let Err(e) = started.cell.report(py, started.progress.as_ref()) {
        raised.get_or_insert(e);
    }
    report::outcome(py, &report, raised, asked, again)
}

/// Whether `value` is missing in a DataFrame column: None, NaN, pandas' `NaT` and `NA`.
pub(super) fn missing(value: &Bound<'_, PyAny>) -> bool {
    use pyo3::types::{PyFloat, PyList, PyString, PyTuple};
    if value.is_none() {
        return true;
    }
    if value.is_exact_instance_of::<PyDict>()
        || value.is_exact_instance_of::<PyList>()
        || value.is_exact_instance_of::<PyString>()
        || value.is_exact_instance_of::<PyTuple>()
    {
        return false;
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return f.value().is_nan();
    }
    value
        .get_type()
        .name()
        .is_ok_and(|n| n == "NaTType" || n == "NAType")
}

/// The values of `values` (any iterable: a pandas object column's `tolist()`) as one Arrow
/// column of JSON text, each value written as `publish` writes a record's values (dicts,
/// lists, numbers, strings; datetimes as epoch milliseconds), a missing one (None, NaN, NaT,
/// NA) null; for publishing a DataFrame's columns of lists and dicts without converting them
/// to Arrow types first. ValueError naming the row and the place of a value with no JSON form.
#[pyfunction]
pub fn json_column(py: Python<'_>, values: &Bound<'_, PyAny>) -> PyResult<pyo3_arrow::PyArray> {
    use std::sync::Arc;

    use arrow_array::LargeStringArray;
    use arrow_buffer::{Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
    use arrow_schema::{DataType, Field};

    use crate::python::conversions::to_json::Writer;

    /// The rows whose size sizes the column's text.
    const SIZING_ROWS: usize = 256;
    let n = values.len().unwrap_or(0);
    let mut writer = Writer::new(py)?;
    let mut text = Vec::with_capacity(n.min(SIZING_ROWS).saturating_mul(512));
    let mut offsets: Vec<i64> = Vec::with_capacity(n + 1);
    offsets.push(0);
    let mut nulls = NullBufferBuilder::new(n);
    for (row, value) in values.try_iter()?.enumerate() {
        let value = value?;
        if missing(&value) {
            nulls.append_null();
        } else {
            writer.record(&value, &mut text, false).map_err(|e| {
                e.into_value_error(|path| match path {
                    "" => format!("row {row}"),
                    path => format!("row {row} at `{path}`"),
                })
            })?;
            nulls.append_non_null();
        }
        let end = i64::try_from(text.len())
            .map_err(|_| PyValueError::new_err("the column's JSON is too large"))?;
        offsets.push(end);
        if row + 1 == SIZING_ROWS {
            // The whole column at these rows' size, an eighth over: one allocation instead of
            // a doubling copy or two of tens of megabytes.
            let want = (text.len() / SIZING_ROWS + 1) * n / 8 * 9;
            text.reserve(want.saturating_sub(text.len()));
        }
    }
    // The offsets grow from 0 to the text's length, and the writer writes UTF-8 (strings
    // from their own UTF-8, the rest in ASCII); `try_new` checks both.
    let array = LargeStringArray::try_new(
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        Buffer::from_vec(text),
        nulls.finish(),
    )
    .map_err(|e| PyValueError::new_err(format!("cannot build the column: {e}")))?;
    let field = Field::new("", DataType::LargeUtf8, true);
    Ok(pyo3_arrow::PyArray::new(Arc::new(array), Arc::new(field)))
}
