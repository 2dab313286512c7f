//! The core's data as Python objects, derived from their serde types (pythonize): the
//! emulator's lists and the core's tables cross as dicts and lists built from the core's own
//! structs, with no JSON text and no hand-built dict in between. (The client's results are
//! classes of their own: `results`.)

use pyo3::prelude::*;
use serde::Serialize;

/// `value` as Python objects: a struct or map as a dict, a sequence as a list, None for null.
pub fn to_py<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(pythonize::pythonize(py, value)?)
}
