//! Awaitables for `surveillance.AsyncClient`: pyo3-async-runtimes' bridge over the bindings' own
//! tokio runtime (the one the sync calls use, rebuilt after `fork()`). Cancelling the asyncio
//! future drops the Rust future, which aborts its requests and closes their connections.

use std::future::Future;
use std::pin::Pin;

use pyo3::prelude::*;
use pyo3_async_runtimes::generic::{self, ContextExt, JoinError, Runtime};
use pyo3_async_runtimes::TaskLocals;

use super::{self as runtime, call, log, Work};
use crate::python::conversions::errors;

tokio::task_local! {
    static LOCALS: TaskLocals;
}

/// The bindings' runtime, as pyo3-async-runtimes sees it.
pub struct Rt;

/// A task that failed to complete (panicked or was aborted).
pub struct Failed(tokio::task::JoinError);

impl JoinError for Failed {
    fn is_panic(&self) -> bool {
        self.0.is_panic()
    }

    fn into_panic(self) -> Box<dyn std::any::Any + Send + 'static> {
        self.0.into_panic()
    }
}

/// The join handle of a task spawned by [`Rt`] (None: the runtime could not be had, which
/// [`awaitable`] rules out before anything is spawned).
pub struct Joined(Option<tokio::task::JoinHandle<()>>);

impl Future for Joined {
    type Output = std::result::Result<(), Failed>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        match self.0.as_mut() {
            Some(handle) => Pin::new(handle).poll(cx).map(|r| r.map_err(Failed)),
            None => std::task::Poll::Ready(Ok(())),
        }
    }
}

impl Runtime for Rt {
    type JoinError = Failed;
    type JoinHandle = Joined;

    fn spawn<F>(fut: F) -> Joined
    where
        F: Future<Output = ()> + Send + 'static,
    {
        Joined(runtime::get().ok().map(|rt| rt.spawn(fut)))
    }

    fn spawn_blocking<F>(f: F) -> Joined
    where
        F: FnOnce() + Send + 'static,
    {
        Joined(runtime::get().ok().map(|rt| rt.spawn_blocking(f)))
    }
}

impl ContextExt for Rt {
    fn scope<F, R>(locals: TaskLocals, fut: F) -> Pin<Box<dyn Future<Output = R> + Send>>
    where
        F: Future<Output = R> + Send + 'static,
    {
        Box::pin(LOCALS.scope(locals, fut))
    }

    fn get_task_locals() -> Option<TaskLocals> {
        LOCALS.try_with(Clone::clone).ok()
    }
}

/// An asyncio awaitable of `work`'s result, converted to Python only when it completes.
pub fn awaitable<'py, T>(py: Python<'py>, work: impl Work<T>) -> PyResult<Bound<'py, PyAny>>
where
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    // The runtime is built here, on the caller's thread, so a failure is an exception now.
    runtime::get().map_err(errors::internal)?;
    log::refresh(py);
    let work = call::scoped(py, work);
    generic::future_into_py::<Rt, _, T>(py, async move {
        let result = work.await;
        Python::attach(log::flush);
        result.map_err(errors::to_py)
    })
}
