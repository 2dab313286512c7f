//! Binding of the event fetches: completed windows as lists of dicts or record batches
//! (`stream`), events as streams of Arrow record batches (`batches`), the checked query of a
//! read (`query`), the events' Arrow schema, and the fetch's progress as the callback's dict.

pub(super) mod batches;
pub(super) mod query;
pub(super) mod stream;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::client::events::Progress;
use crate::python::runtime::progress::{Cell, Update};

/// The events fetch's progress cell.
pub type ProgressCell = Cell<Progress>;

impl Update for Progress {
    fn fill(&self, d: &Bound<'_, PyDict>) -> PyResult<()> {
        d.set_item("events", self.events)?;
        d.set_item("fetched", self.fetched)?;
        d.set_item("requests", self.requests)?;
        d.set_item("done_ms", self.done_ms)?;
        d.set_item("total_ms", self.total_ms)?;
        d.set_item("windows", self.windows)?;
        d.set_item("expected_events", self.expected_events)?;
        d.set_item("expected_requests", self.expected_requests)?;
        d.set_item("eta_s", self.eta_ms.map(|ms| ms as f64 / 1000.0))?;
        d.set_item("saved", self.saved)
    }
}

/// The Arrow schema of events (`output="arrow"`, `event_batches`, synced datasets): the one
/// definition, which the dask meta and the CSV columns are derived from.
#[pyfunction]
pub fn events_schema() -> pyo3_arrow::PySchema {
    pyo3_arrow::PySchema::new(crate::client::arrow::events_schema())
}
