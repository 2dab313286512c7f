//! What an event read asks for, checked once (`EventQuery`): the range, the report and how
//! the fetch treats the cache and the quota. Python builds it from the caller's arguments and
//! hands the same object to whichever read it makes.

use pyo3::prelude::*;

use crate::client::events::{self, Query};
use crate::python::conversions::errors;

/// The range (epoch ms, `[start_ms, end_ms)`) and the report of an event read, checked when
/// it is made. `refresh`: past the cache of settled events, replacing what it held of the
/// range. `partial`: a sync's fetch, which keeps what it gets when the daily quota runs out,
/// is not refused up front for needing more than remains.
#[pyclass(name = "EventQuery", module = "surveillance._core", frozen)]
pub struct PyEventQuery {
    pub(crate) query: Query,
}

#[pymethods]
impl PyEventQuery {
    #[new]
    #[pyo3(signature = (start_ms, end_ms, report_id=None, *, refresh=false, partial=false))]
    fn new(
        start_ms: i64,
        end_ms: i64,
        report_id: Option<String>,
        refresh: bool,
        partial: bool,
    ) -> PyResult<Self> {
        let query = Query {
            start_ms,
            end_ms,
            report_id,
            partial,
            refresh,
        };
        events::check(&query).map_err(errors::to_py)?;
        Ok(PyEventQuery { query })
    }

    fn __repr__(&self) -> String {
        let q = &self.query;
        format!(
            "EventQuery({}, {}, report_id={:?}, refresh={}, partial={})",
            q.start_ms,
            q.end_ms,
            q.report_id,
            if q.refresh { "True" } else { "False" },
            if q.partial { "True" } else { "False" },
        )
    }
}
