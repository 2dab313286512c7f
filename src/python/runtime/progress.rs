//! Progress of a core task for a Python callback: the task writes its latest update into a
//! cell (no GIL, no queue: an update replaces the one not yet read), and the waiting thread
//! hands it to the callback as a dict between waits. One cell type for every task; each kind
//! of update says its dict's fields beside its binding (`events`, `publish`).

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A core progress update, as the callback's dict.
pub trait Update: Send + 'static {
    /// Puts the update's fields into `d`.
    fn fill(&self, d: &Bound<'_, PyDict>) -> PyResult<()>;
}

/// Where a core task writes its updates.
pub type Sink<P> = Arc<dyn Fn(P) + Send + Sync>;

/// The latest update of a task, written by the task, read by the waiting Python thread.
pub struct Cell<P>(Arc<Mutex<Option<P>>>);

impl<P> Default for Cell<P> {
    fn default() -> Self {
        Cell(Arc::new(Mutex::new(None)))
    }
}

impl<P> Clone for Cell<P> {
    fn clone(&self) -> Self {
        Cell(self.0.clone())
    }
}

impl<P: Update> Cell<P> {
    /// The sink for the core task.
    pub fn sink(&self) -> Sink<P> {
        let cell = self.0.clone();
        Arc::new(move |p| {
            *cell.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
        })
    }

    /// Hands the latest update, if new, to `callback`.
    pub fn report(&self, py: Python<'_>, callback: Option<&Py<PyAny>>) -> PyResult<()> {
        self.report_with(py, callback, |_| Ok(()))
    }

    /// As `report`, with `amend` changing the dict before the call (a field the waiting
    /// thread knows better than the task).
    pub fn report_with(
        &self,
        py: Python<'_>,
        callback: Option<&Py<PyAny>>,
        amend: impl FnOnce(&Bound<'_, PyDict>) -> PyResult<()>,
    ) -> PyResult<()> {
        let Some(cb) = callback else { return Ok(()) };
        let latest = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(p) = latest {
            let d = PyDict::new(py);
            p.fill(&d)?;
            amend(&d)?;
            cb.call1(py, (d,))?;
        }
        Ok(())
    }
}
