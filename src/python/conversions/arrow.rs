//! Arrow data in and out through the PyCapsule interface (pyo3-arrow): tables (an object with
//! `__arrow_c_stream__`), any Arrow data written to Parquet, and columns as Python lists.

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use pyo3::prelude::*;
use pyo3_arrow::PyTable;

use super::errors;
use crate::python::runtime;

/// A table of `batches` (an object with `__arrow_c_stream__`), as a core result (so that it
/// can end the core's work).
pub fn table(batches: Vec<RecordBatch>, schema: SchemaRef) -> crate::client::Result<PyTable> {
    PyTable::try_new(batches, schema)
        .map_err(|e| crate::client::Error::Data(format!("cannot assemble the table: {e}")))
}

/// Writes any Arrow data (`__arrow_c_stream__` or `__arrow_c_array__`: our tables and
/// streams, pyarrow, polars) to the Parquet file `path`, with the GIL released; returns the
/// rows written. Nothing is left at `path` when it fails.
#[pyfunction]
pub fn write_parquet(
    py: Python<'_>,
    data: pyo3_arrow::input::AnyRecordBatch,
    path: std::path::PathBuf,
) -> PyResult<u64> {
    let reader = data.into_reader()?;
    let schema = reader.schema();
    let mut interrupt: Option<PyErr> = None;
    let written = runtime::detach(py, || {
        let batches = reader.map(|b| {
            b.map_err(|e| crate::client::Error::Data(format!("cannot read the data: {e}")))
        });
        // A source that Ctrl-C ended early (an event stream) leaves SIGINT pending: the file is
        // not moved into place, and the interrupt is raised.
        let commit = || match Python::attach(|py| py.check_signals()) {
            Ok(()) => Ok(()),
            Err(e) => {
                interrupt = Some(e);
                Err(crate::client::Error::Io("interrupted".into()))
            }
        };
        crate::client::parquet::write_checked(&path, schema, batches, commit)
    });
    match (written, interrupt) {
        (_, Some(e)) => Err(e),
        (Ok(rows), None) => Ok(rows),
        (Err(e), None) => Err(errors::to_py(e)),
    }
}

/// Columns of an Arrow table as Python lists (strings, integers, booleans; timestamps as epoch
/// milliseconds), for code that summarises a table without pyarrow (`surveillance demo`).
#[pyfunction]
pub fn columns<'py>(
    py: Python<'py>,
    table: PyTable,
    names: Vec<String>,
) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, TimestampMillisecondType};
    use arrow_schema::DataType;
    let (batches, schema) = table.into_inner();
    let out = pyo3::types::PyDict::new(py);
    for name in names {
        let index = schema.index_of(&name).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!("`names`: no column `{name}`"))
        })?;
        let list = pyo3::types::PyList::empty(py);
        for batch in &batches {
            let column = batch.column(index);
            for row in 0..column.len() {
                let value: Bound<'py, PyAny> = if column.is_null(row) {
                    py.None().into_bound(py)
                } else {
                    match column.data_type() {
                        DataType::Utf8 => column.as_string::<i32>().value(row).into_pyobject(py)?.into_any(),
                        DataType::Int64 => column.as_primitive::<Int64Type>().value(row).into_pyobject(py)?.into_any(),
                        DataType::Timestamp(arrow_schema::TimeUnit::Millisecond, _) => column
                            .as_primitive::<TimestampMillisecondType>()
                            .value(row)
                            .into_pyobject(py)?
                            .into_any(),
                        DataType::Boolean => pyo3::types::PyBool::new(py, column.as_boolean().value(row))
                            .to_owned()
                            .into_any(),
                        other => {
                            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                                "`names`: column `{name}` is {other}, not a string, integer, boolean or timestamp"
                            )))
                        }
                    }
                };
                list.append(value)?;
            }
        }
        out.set_item(name, list)?;
    }
    Ok(out)
}
