//! The call a binding's work belongs to: the Python layer marks each public call with a
//! [`PyCallScope`] in the context variable `_core.CALL` (per thread and per asyncio task), and
//! the work spawned for it runs inside the core's [`Scope`], which counts what the call sends.

use std::future::Future;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::IntoPyDict;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use super::telemetry::{Drained, Recorder};
use crate::client::scope::{self, Observer, Scope, Stop};

/// What one call sent: made by the Python layer for each public call, within the call that
/// runs now if any (a call inside another counts in both); with `observe`, what its requests
/// did is recorded for its telemetry, and with `traceparent` they carry that header.
#[pyclass(name = "CallScope", module = "surveillance._core", frozen)]
pub struct PyCallScope(Arc<Scope>, Option<Arc<Recorder>>);

#[pymethods]
impl PyCallScope {
    #[new]
    #[pyo3(signature = (parent=None, observe=false, traceparent=None))]
    fn new(
        parent: Option<PyRef<'_, PyCallScope>>,
        observe: bool,
        traceparent: Option<String>,
    ) -> Self {
        let parent = parent.map(|p| p.0.clone());
        if !observe && traceparent.is_none() {
            return PyCallScope(Scope::new(parent), None);
        }
        let recorder = observe.then(|| Arc::new(Recorder::default()));
        let observer = recorder.clone().map(|r| r as Arc<dyn Observer>);
        PyCallScope(Scope::observed(parent, observer, traceparent), recorder)
    }

    /// What the call's requests did since the last drain (None when not observed): its
    /// requests, waits, tokens received and events read.
    fn drain(&self) -> Option<Drained> {
        self.1.as_ref().map(|r| r.take())
    }

    /// Requests that left the machine during the call (retries and token requests included).
    #[getter]
    fn requests(&self) -> u64 {
        self.0.requests()
    }

    /// Requests sent again after a failure.
    #[getter]
    fn retries(&self) -> u64 {
        self.0.retries()
    }

    /// 429 answers received.
    #[getter]
    fn rate_limited(&self) -> u64 {
        self.0.rate_limited()
    }

    /// Seconds its requests waited after 429s (waits at the same time each counted).
    #[getter]
    fn waited(&self) -> f64 {
        self.0.waited().as_secs_f64()
    }

    /// Seconds the service was unreachable during the call (an outage under way counted so
    /// far).
    #[getter]
    fn outage(&self) -> f64 {
        self.0.outages().1.as_secs_f64()
    }
}

/// The context variable that holds the call running now (None outside a public call).
static CALL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// `_core.CALL`, made once.
pub fn variable(py: Python<'_>) -> PyResult<&Py<PyAny>> {
    CALL.get_or_try_init(py, || {
        let var = py.import("contextvars")?.getattr("ContextVar")?.call(
            ("surveillance.call",),
            Some(&[("default", py.None())].into_py_dict(py)?),
        )?;
        Ok(var.unbind())
    })
}

/// The scope of the caller's current call, if it is in one.
pub fn current(py: Python<'_>) -> Option<Arc<Scope>> {
    let var = variable(py).ok()?.bind(py);
    let now = var.call_method0("get").ok()?;
    let scope = now.cast::<PyCallScope>().ok()?;
    Some(scope.get().0.clone())
}

/// `fut` inside the caller's current call: what a binding hands to the runtime.
pub fn scoped<F: Future>(py: Python<'_>, fut: F) -> impl Future<Output = F::Output> {
    scope::within(current(py), fut)
}

/// Spawns `fut` on `rt` inside the caller's current call.
pub fn spawn<F>(rt: &Runtime, fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let scope = Python::attach(current);
    rt.spawn(scope::within(scope, fut))
}

/// A call within the caller's current one that also stops once `stop` says so, or once it is
/// halted (see `Scope::stoppable`): the scope of work that its consumer may stop before the
/// work ends, so that no request of it leaves after the stop.
pub fn stoppable(stop: Option<Arc<dyn Stop>>) -> Arc<Scope> {
    Scope::stoppable(Python::attach(current), stop)
}

/// Spawns `fut` on `rt` inside `call` (made by [`stoppable`]).
pub fn spawn_within<F>(rt: &Runtime, call: Arc<Scope>, fut: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    rt.spawn(scope::within(Some(call), fut))
}
