//! The core's results as Python objects, derived from their serde types (pythonize): the plan,
//! the quota, the stats, the cache's contents and the emulator's lists cross as dicts and lists
//! built from the core's own structs, with no JSON text and no hand-built dict in between.

use pyo3::prelude::*;
use serde::Serialize;

/// `value` as Python objects: a struct or map as a dict, a sequence as a list, None for null.
pub fn to_py<'py, T: Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(pythonize::pythonize(py, value)?)
}

/// A result built into Python objects (see [`to_py`]) when an awaitable completes.
pub struct Value<T>(pub T);

impl<'py, T: Serialize> IntoPyObject<'py> for Value<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.0)
    }
}
