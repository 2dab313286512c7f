//! Binding of the client: `surveillance._core.Client`. Extracts arguments, runs core futures
//! through `wait`, returns JSON text for the Python layer to load. Rebuilt after `fork()`.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3_arrow::{PyRecordBatchReader, PyTable};

use super::convert::to_list;
use super::events::EventStream;
use super::wait::wait;
use super::{errors, log};
use crate::client::arrow::Layout;
use crate::client::events::{self, Query};
use crate::client::{self, Config, Limits, Secret, Settings};

type LimitsTuple = (Option<f64>, Option<usize>, Option<f64>, Option<usize>);

/// The native client (see `surveillance.Client`).
#[pyclass(name = "Client", module = "surveillance._core", frozen)]
pub struct PyClient {
    config: Config,
    core: Mutex<(u32, client::Client)>,
}

impl PyClient {
    /// The core client of this process (a forked child gets a fresh one: new pool, new token).
    fn core(&self) -> PyResult<client::Client> {
        let pid = std::process::id();
        let mut slot = self.core.lock().unwrap_or_else(|e| e.into_inner());
        if slot.0 != pid {
            *slot = (
                pid,
                client::Client::new(self.config.clone(), Some(log::sink()))
                    .map_err(errors::to_py)?,
            );
        }
        Ok(slot.1.clone())
    }
}

#[pymethods]
impl PyClient {
    #[new]
    #[pyo3(signature = (api_key=None, client_id=None, client_secret=None, *, region=None, base_url=None,
        eu_base_url=None, audience=None, timeout=None, max_retries=None, limits=None, ca_bundle=None,
        trust_env=None, max_body_bytes=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        api_key: Option<String>,
        client_id: Option<String>,
        client_secret: Option<String>,
        region: Option<String>,
        base_url: Option<String>,
        eu_base_url: Option<String>,
        audience: Option<String>,
        timeout: Option<f64>,
        max_retries: Option<u32>,
        limits: Option<LimitsTuple>,
        ca_bundle: Option<PathBuf>,
        trust_env: Option<bool>,
        max_body_bytes: Option<usize>,
    ) -> PyResult<Self> {
        let timeout = match timeout {
            Some(t) if !(t.is_finite() && t > 0.0) => {
                return Err(errors::ConfigError::new_err(format!(
                    "`timeout` must be a positive number of seconds, got `{t}`"
                )))
            }
            Some(t) => Some(Duration::from_secs_f64(t)),
            None => None,
        };
        let settings = Settings {
            api_key: api_key.map(Secret::new),
            client_id,
            client_secret: client_secret.map(Secret::new),
            region,
            base_url,
            eu_base_url,
            audience,
            timeout,
            max_retries,
            limits: limits.map(|(rps, rc, pps, pc)| Limits {
                read_per_second: rps,
                read_concurrency: rc,
                publish_per_second: pps,
                publish_concurrency: pc,
            }),
            ca_bundle,
            trust_env,
            max_body_bytes,
        };
        let config = Config::from_settings(settings).map_err(errors::to_py)?;
        let core = client::Client::new(config.clone(), Some(log::sink())).map_err(errors::to_py)?;
        Ok(PyClient {
            config,
            core: Mutex::new((std::process::id(), core)),
        })
    }

    /// Every site, as a list of dicts.
    fn sites<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let c = self.core()?;
        let records = wait(py, async move { c.sites().await })?;
        to_list(py, records.iter().map(|r| r.get()))
    }

    /// Every device, as a list of dicts.
    fn devices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let c = self.core()?;
        let records = wait(py, async move { c.devices().await })?;
        to_list(py, records.iter().map(|r| r.get()))
    }

    /// Every readable report, as a list of dicts.
    fn reports<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let c = self.core()?;
        let records = wait(py, async move { c.reports().await })?;
        to_list(py, records.iter().map(|r| r.get()))
    }

    /// Every camera (of a site and/or device), as a JSON array text.
    #[pyo3(signature = (site_id=None, device_id=None))]
    fn cameras<'py>(
        &self,
        py: Python<'py>,
        site_id: Option<String>,
        device_id: Option<String>,
    ) -> PyResult<Bound<'py, PyList>> {
        let c = self.core()?;
        let records = wait(py, async move {
            c.cameras(site_id.as_deref(), device_id.as_deref()).await
        })?;
        to_list(py, records.iter().map(|r| r.get()))
    }

    /// The same events, window after window; at most `buffer` completed windows wait for
    /// the consumer (bounded memory) while the next ones are fetched.
    #[pyo3(signature = (start_ms, end_ms, report_id=None, progress=None, buffer=2))]
    fn event_stream(
        &self,
        start_ms: i64,
        end_ms: i64,
        report_id: Option<String>,
        progress: Option<Py<PyAny>>,
        buffer: usize,
    ) -> PyResult<EventStream> {
        let query = Query {
            start_ms,
            end_ms,
            report_id,
        };
        events::check(&query).map_err(errors::to_py)?;
        EventStream::start(self.core()?, query, progress, buffer)
    }

    /// Every record of a list (`sites`, `devices`, `cameras`, `reports`) as an Arrow table.
    #[pyo3(signature = (kind, site_id=None, device_id=None))]
    fn list_arrow(
        &self,
        py: Python<'_>,
        kind: String,
        site_id: Option<String>,
        device_id: Option<String>,
    ) -> PyResult<PyTable> {
        let layout = match kind.as_str() {
            "sites" => Layout::sites(),
            "devices" => Layout::devices(),
            "cameras" => Layout::cameras(),
            "reports" => Layout::reports(),
            other => return Err(PyValueError::new_err(format!("no list `{other}`"))),
        };
        let c = self.core()?;
        let schema = layout.schema();
        let batch = wait(py, async move {
            let records = match kind.as_str() {
                "sites" => c.sites().await?,
                "devices" => c.devices().await?,
                "cameras" => c.cameras(site_id.as_deref(), device_id.as_deref()).await?,
                _ => c.reports().await?,
            };
            layout.batch(records.iter().map(|r| r.get()))
        })?;
        super::arrow::table(vec![batch], schema)
    }

    /// Every event of the range as an Arrow table (one batch per window).
    #[pyo3(signature = (start_ms, end_ms, report_id=None, progress=None))]
    fn events_arrow(
        &self,
        py: Python<'_>,
        start_ms: i64,
        end_ms: i64,
        report_id: Option<String>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<PyTable> {
        let query = Query {
            start_ms,
            end_ms,
            report_id,
        };
        events::check(&query).map_err(errors::to_py)?;
        let cell = super::events::ProgressCell::default();
        let sink = progress.as_ref().map(|_| cell.sink());
        let c = self.core()?;
        let batches = super::wait::wait_with(py, events::fetch_batches(c, query, sink), |py| {
            cell.report(py, progress.as_ref())
        });
        cell.report(py, progress.as_ref())?;
        super::arrow::table(batches?, Layout::events().schema())
    }

    /// The events of the range as a stream of Arrow record batches (bounded memory).
    #[pyo3(signature = (start_ms, end_ms, report_id=None))]
    fn event_batches(
        &self,
        start_ms: i64,
        end_ms: i64,
        report_id: Option<String>,
    ) -> PyResult<PyRecordBatchReader> {
        let query = Query {
            start_ms,
            end_ms,
            report_id,
        };
        events::check(&query).map_err(errors::to_py)?;
        super::arrow::event_batches(self.core()?, query)
    }

    /// A valid access token.
    fn access_token(&self, py: Python<'_>) -> PyResult<String> {
        let c = self.core()?;
        wait(py, async move {
            c.access_token().await.map(|t| t.expose().to_string())
        })
    }

    /// The effective settings and whether a token can be had, as text (no secrets).
    fn diagnose(&self, py: Python<'_>) -> PyResult<String> {
        let c = self.core()?;
        wait(py, async move { Ok(c.diagnose().await) })
    }

    /// The counters, as JSON text.
    fn stats_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.core()?.stats()).map_err(errors::internal)
    }

    /// Stops requests in flight; the client refuses new ones.
    fn close(&self) -> PyResult<()> {
        self.core()?.close();
        Ok(())
    }

    /// The resolved configuration, secrets included (for pickling; never printed).
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = &self.config;
        let d = PyDict::new(py);
        d.set_item("api_key", c.api_key.expose())?;
        d.set_item("client_id", &c.client_id)?;
        d.set_item("client_secret", c.client_secret.expose())?;
        d.set_item("region", c.region.as_str())?;
        d.set_item("base_url", c.base_url.as_str())?;
        d.set_item("eu_base_url", c.eu_base_url.as_ref().map(|u| u.to_string()))?;
        d.set_item("audience", &c.audience)?;
        d.set_item("timeout", c.timeout.as_secs_f64())?;
        d.set_item("max_retries", c.max_retries)?;
        let l = c.limits;
        d.set_item(
            "limits",
            (
                l.read_per_second,
                l.read_concurrency,
                l.publish_per_second,
                l.publish_concurrency,
            ),
        )?;
        d.set_item(
            "ca_bundle",
            c.ca_bundle.as_ref().map(|p| p.display().to_string()),
        )?;
        d.set_item("trust_env", c.trust_env)?;
        d.set_item("max_body_bytes", c.max_body_bytes)?;
        Ok(d)
    }

    /// Base URL (no secret).
    #[getter]
    fn base_url(&self) -> String {
        self.config.base_url.to_string()
    }

    /// Default publishing region.
    #[getter]
    fn region(&self) -> &'static str {
        self.config.region.as_str()
    }
}
