//! Progress of a core task for a Python callback: the task writes its latest update into a
//! cell (no GIL, no queue: an update replaces the one not yet read), and the waiting thread
//! hands it to the callback as a dict between waits. One cell type for every task; each kind
//! of update says its dict's fields beside its binding (`events`, `publish`). A cell of a
//! client also says what the client waits for (`waiting`: an outage it rides out or a wait
//! after a 429, as `Http::waiting` words it, and `waiting_brief`, the same in a bar's few
//! columns; None when requests go through): the last dict again, with the new words, whenever
//! they change, since no update comes while the client waits.

use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::client::http::Wait;

/// A core progress update, as the callback's dict.
pub trait Update: Send + 'static {
    /// Puts the update's fields into `d`.
    fn fill(&self, d: &Bound<'_, PyDict>) -> PyResult<()>;
}

/// Where a core task writes its updates.
pub type Sink<P> = Arc<dyn Fn(P) + Send + Sync>;

/// What the client waits for now (None: nothing).
type WaitWords = Arc<dyn Fn() -> Option<Wait> + Send + Sync>;

/// What the callback was handed last: its dict, and the waiting words in it.
#[derive(Default)]
struct Shown {
    dict: Option<Py<PyDict>>,
    waiting: Option<Wait>,
}

/// The latest update of a task, written by the task, read by the waiting Python thread.
pub struct Cell<P> {
    latest: Arc<Mutex<Option<P>>>,
    waiting: Option<WaitWords>,
    shown: Arc<Mutex<Shown>>,
}

impl<P> Default for Cell<P> {
    fn default() -> Self {
        Cell {
            latest: Arc::new(Mutex::new(None)),
            waiting: None,
            shown: Arc::default(),
        }
    }
}

impl<P> Clone for Cell<P> {
    fn clone(&self) -> Self {
        Cell {
            latest: self.latest.clone(),
            waiting: self.waiting.clone(),
            shown: self.shown.clone(),
        }
    }
}

impl<P> Cell<P> {
    /// A cell whose dicts also say what `client` waits for (`waiting`).
    pub fn of(client: &crate::client::Client) -> Self {
        let client = client.clone();
        Cell {
            waiting: Some(Arc::new(move || client.http().waiting())),
            ..Cell::default()
        }
    }
}

impl<P: Update> Cell<P> {
    /// The sink for the core task.
    pub fn sink(&self) -> Sink<P> {
        let cell = self.latest.clone();
        Arc::new(move |p| {
            *cell.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
        })
    }

    /// Hands the latest update, if new, to `callback`.
    pub fn report(&self, py: Python<'_>, callback: Option<&Py<PyAny>>) -> PyResult<()> {
        self.report_with(py, callback, |_| Ok(()))
    }

    /// As `report`, with `amend` changing the dict before the call (a field the waiting
    /// thread knows better than the task). With no new update but new waiting words, the
    /// last dict is handed again (amended) with them.
    pub fn report_with(
        &self,
        py: Python<'_>,
        callback: Option<&Py<PyAny>>,
        amend: impl FnOnce(&Bound<'_, PyDict>) -> PyResult<()>,
    ) -> PyResult<()> {
        let Some(cb) = callback else { return Ok(()) };
        let latest = self.latest.lock().unwrap_or_else(|e| e.into_inner()).take();
        let waiting = self.waiting.as_ref().and_then(|w| w());
        let d = {
            let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
            let d = match (latest, &shown.dict) {
                (Some(p), _) => {
                    let d = PyDict::new(py);
                    p.fill(&d)?;
                    d
                }
                (None, _) if waiting == shown.waiting => return Ok(()),
                (None, Some(last)) => last.bind(py).copy()?,
                (None, None) => PyDict::new(py),
            };
            amend(&d)?;
            d.set_item("waiting", waiting.as_ref().map(|w| w.words.as_str()))?;
            d.set_item("waiting_brief", waiting.as_ref().map(|w| w.brief.as_str()))?;
            shown.dict = Some(d.clone().unbind());
            shown.waiting = waiting;
            d
        };
        cb.call1(py, (d,))?;
        Ok(())
    }
}
