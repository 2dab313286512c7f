//! Binding of the emulator: `surveillance._core.Emulator`, a thin wrapper over
//! `emulator::spawn` running on the bindings' runtime. Its arguments become the emulator's
//! types in `settings` (names to enums, keywords to settings) and reach its data through `data`;
//! `surveillance.Emulator` checks their ranges, once.

mod data;
mod settings;

use std::sync::Arc;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::emulator::{self, Faults, Handle, State};
use crate::python::conversions::from_json::{to_list, to_object};
use crate::python::conversions::keywords::{self, Keywords};
use crate::python::conversions::values::to_py;
use crate::python::runtime;

/// A running emulator of the service on a loopback port (see `surveillance.Emulator`).
#[pyclass(name = "Emulator", module = "surveillance._core", frozen)]
pub struct PyEmulator {
    handle: Handle,
    /// The directory of the daily quota's ledgers of its clients (the setting `quota_dir`,
    /// given by `surveillance.Emulator`); None: the user's cache directory's.
    quota_dir: Option<std::path::PathBuf>,
}

impl Drop for PyEmulator {
    fn drop(&mut self) {
        self.handle.signal_stop();
        self.forget_ledger();
    }
}

impl PyEmulator {
    /// The emulator's clock, for the ledgers of its clients (`Client.follow_clock`): the day
    /// of their quota is the emulator's, which `advance_clock` moves.
    pub(crate) fn clock(&self) -> crate::client::quota::Clock {
        let state = Arc::clone(&self.handle.state);
        crate::client::quota::Clock::new(move || state.now_ms())
    }

    /// Removes the daily quota's ledger of this emulator's URL and key (see
    /// `client::quota::forget`): it counted requests to a service that is gone.
    fn forget_ledger(&self) {
        use crate::client::{config, quota};
        let url = self.handle.url();
        if let Ok(url) = config::parse_base_url(&url, "base_url", "SURVEILLANCE_BASE_URL") {
            let dir = quota::ledger_dir(self.quota_dir.clone(), &|var| std::env::var(var).ok());
            quota::forget(
                url.as_str(),
                &self.handle.state.creds.api_key,
                dir.as_deref(),
            );
        }
    }
}

#[pymethods]
impl PyEmulator {
    /// The settings of `surveillance.Emulator`, as keywords (checked there), the start day as
    /// `YYYY-MM-DD`, and `quota_dir`, where its clients' ledgers are (forgotten when it stops).
    #[new]
    #[pyo3(signature = (**settings))]
    fn new(py: Python<'_>, settings: Option<Bound<'_, PyDict>>) -> PyResult<Self> {
        let (start, quota_dir) = settings::start(Keywords::new("Emulator", settings))?;
        Ok(PyEmulator {
            handle: spawn(py, start)?,
            quota_dir,
        })
    }

    /// Base URL of the service (no `/v2`).
    #[getter]
    fn url(&self) -> String {
        self.handle.url()
    }

    /// With `tls=True`: the PEM of the authority that signed the emulator's certificate.
    #[getter]
    fn ca_pem(&self) -> Option<String> {
        self.handle.ca_pem.clone()
    }

    /// Makes the next `count` requests whose path starts with `path` (all, when None) get a
    /// hostile answer; `mode` None lifts it.
    #[pyo3(signature = (mode=None, path="/v2/events", count=None, size=52_428_800, status=500))]
    fn set_hostile(
        &self,
        mode: Option<&str>,
        path: &str,
        count: Option<u64>,
        size: usize,
        status: u16,
    ) -> PyResult<()> {
        let rule = settings::hostile(mode, path, count, size, status)?;
        self.handle.state.set_hostile(rule);
        Ok(())
    }

    /// Base URL of the EU webhook.
    #[getter]
    fn eu_url(&self) -> String {
        self.handle.eu_url()
    }

    /// The accepted `x-api-key`.
    #[getter]
    fn api_key(&self) -> String {
        self.handle.state.creds.api_key.clone()
    }

    /// The accepted client id.
    #[getter]
    fn client_id(&self) -> String {
        self.handle.state.creds.client_id.clone()
    }

    /// The accepted client secret.
    #[getter]
    fn client_secret(&self) -> String {
        self.handle.state.creds.client_secret.clone()
    }

    /// The accepted audience.
    #[getter]
    fn audience(&self) -> String {
        self.handle.state.creds.audience.clone()
    }

    /// First instant of the data, epoch milliseconds.
    #[getter]
    fn start_ms(&self) -> i64 {
        self.handle.state.data().start_ms
    }

    /// End (exclusive) of the data, epoch milliseconds.
    #[getter]
    fn end_ms(&self) -> i64 {
        self.handle.state.data().end_ms
    }

    /// A report that exists but that the caller may not read.
    #[getter]
    fn restricted_report_id(&self) -> String {
        let data = self.handle.state.data();
        data.reports
            .iter()
            .find(|r| !r.visible)
            .map(|r| r.id.clone())
            .unwrap_or_default()
    }

    /// Replaces the injected faults, given by name (each one left out is none).
    #[pyo3(signature = (**faults))]
    fn set_faults(&self, faults: Option<Bound<'_, PyDict>>) -> PyResult<()> {
        let faults = settings::faults(Keywords::new("set_faults", faults))?;
        self.handle.state.set_faults(faults);
        Ok(())
    }

    /// A restart: after `after` more requests, the next one is dropped and the port closed
    /// (connections refused) for `seconds`, then open again on the same port, same state.
    #[pyo3(signature = (seconds, after=0))]
    fn outage(&self, seconds: f64, after: u64) -> PyResult<()> {
        if !(seconds.is_finite() && (0.0..=3600.0).contains(&seconds)) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "`seconds` must be from 0 to 3600, got `{seconds}`"
            )));
        }
        self.handle
            .state
            .schedule_outage(after, std::time::Duration::from_secs_f64(seconds));
        Ok(())
    }

    /// Each dialect setting and its values, the default first: a tuple of names, or for
    /// `token_requests` `(None, int)`.
    #[classattr]
    #[pyo3(name = "DIALECTS")]
    fn dialects(py: Python<'_>) -> PyResult<Py<PyDict>> {
        settings::dialects(py)
    }

    /// The defaults of its data (`DataConfig::default`): `seed`, `sites`, `days`,
    /// `events_per_day` and `start` (`YYYY-MM-DD`).
    #[classattr]
    #[pyo3(name = "DATA_DEFAULTS")]
    fn data_defaults(py: Python<'_>) -> PyResult<Py<PyDict>> {
        settings::data_defaults(py)
    }

    /// Replaces the dialect, given by setting name (each one left out is its default).
    #[pyo3(signature = (**dialect))]
    fn set_dialect(&self, dialect: Option<Bound<'_, PyDict>>) -> PyResult<()> {
        let dialect = settings::dialect(Keywords::new("set_dialect", dialect))?;
        self.handle.state.set_dialect(dialect);
        Ok(())
    }

    /// Sets the order and bound inclusivity of the events endpoint.
    #[pyo3(signature = (order="asc", bounds="[)"))]
    fn set_semantics(&self, order: &str, bounds: &str) -> PyResult<()> {
        let (o, b) = settings::semantics(order, bounds)?;
        self.handle.state.set_semantics(o, b);
        Ok(())
    }

    /// Enforces (or lifts, with None) the provider's published limits, given by name.
    #[pyo3(signature = (**limits))]
    fn set_limits(&self, limits: Option<Bound<'_, PyDict>>) -> PyResult<()> {
        let limits = keywords::limits(Keywords::new("set_limits", limits))?;
        self.handle.state.set_limits(limits);
        Ok(())
    }

    /// Whether the webhook accepts a JSON array of records as a body (`arrays=false`: 400
    /// `array_not_supported`, nothing stored).
    #[pyo3(signature = (arrays=true))]
    fn set_webhook(&self, arrays: bool) {
        self.handle.state.set_webhook_arrays(arrays);
    }

    /// `expires_in` of the tokens issued from now on.
    fn set_token_lifetime(&self, seconds: u64) {
        self.handle.state.set_token_lifetime(seconds);
    }

    /// Moves the emulator's clock (its clients' ledgers follow it: see `clock`).
    fn advance_clock(&self, seconds: f64) -> PyResult<()> {
        let seconds = settings::clock_move(seconds)?;
        self.handle.state.advance_clock(seconds);
        Ok(())
    }

    /// Refuses every token issued so far.
    fn revoke_tokens(&self) {
        self.handle.state.revoke_tokens();
    }

    /// Inserts `count` events starting at `at_ms` (created at `created_ms` when given); returns
    /// their ids.
    #[pyo3(signature = (at_ms, count=1, site_id=None, created_ms=None))]
    fn add_events(
        &self,
        py: Python<'_>,
        at_ms: i64,
        count: u32,
        site_id: Option<String>,
        created_ms: Option<i64>,
    ) -> PyResult<Vec<String>> {
        let state = &self.handle.state;
        runtime::detach(py, || {
            data::add_events(state, at_ms, count, site_id, created_ms)
        })
    }

    /// Changes the event `event_id` (its end at `end_ms`, its `details.confirmed`, its site
    /// `site_id`, each when given); returns it as now served.
    #[pyo3(signature = (event_id, end_ms=None, confirmed=None, site_id=None))]
    fn update_event<'py>(
        &self,
        py: Python<'py>,
        event_id: String,
        end_ms: Option<i64>,
        confirmed: Option<bool>,
        site_id: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let state = &self.handle.state;
        let text = runtime::detach(py, || {
            data::update_event(state, &event_id, end_ms, confirmed, site_id)
        })?;
        to_object(py, &text)
    }

    /// Stored webhook records (of one region, or all), as the service received them.
    #[pyo3(signature = (region=None))]
    fn published<'py>(
        &self,
        py: Python<'py>,
        region: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let texts = self.handle.state.published(region);
        to_list(py, texts.iter().map(String::as_str))
    }

    /// Forgets the stored webhook records.
    fn clear_published(&self) {
        self.handle.state.clear_published();
    }

    /// Every record of a resource list.
    fn resources<'py>(&self, py: Python<'py>, kind: &str) -> PyResult<Bound<'py, PyAny>> {
        data::resources(py, &self.handle.state, kind)
    }

    /// Ids of the events with `start <= startTime < end`, sorted by (startTime, id).
    #[pyo3(signature = (start_ms, end_ms, report_id=None))]
    fn truth(
        &self,
        py: Python<'_>,
        start_ms: i64,
        end_ms: i64,
        report_id: Option<String>,
    ) -> PyResult<Vec<String>> {
        let state = &self.handle.state;
        runtime::detach(py, || data::truth(state, start_ms, end_ms, report_id))
    }

    /// The statistics, as a dict.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.handle.state.stats_json())
    }

    /// Zeroes the statistics.
    fn reset_stats(&self) {
        self.handle.state.reset_stats();
    }

    /// Stops the server; idempotent.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let rt = runtime::get().map_err(|e| PyOSError::new_err(e.to_string()))?;
        runtime::detach(py, || rt.block_on(self.handle.stop()));
        self.forget_ledger();
        Ok(())
    }
}

/// A new emulator on the bindings' runtime, listening on a loopback port.
fn spawn(py: Python<'_>, start: settings::Start) -> PyResult<Handle> {
    let settings::Start {
        data,
        latency_ms,
        port,
        tls,
    } = start;
    let rt =
        runtime::get().map_err(|e| PyOSError::new_err(format!("cannot start the runtime: {e}")))?;
    let handle = runtime::detach(py, move || {
        let state = Arc::new(State::new(&data));
        state.set_faults(Faults {
            latency_ms,
            ..Faults::default()
        });
        rt.block_on(emulator::spawn_with(state, port, tls))
    });
    handle.map_err(|e| PyOSError::new_err(format!("cannot listen on 127.0.0.1:{port}: {e}")))
}
