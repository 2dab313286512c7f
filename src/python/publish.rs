//! Binding of webhook publishing: `publish` pulls records from a Python iterator in chunks while
//! holding the GIL briefly, writes each one as JSON text here (no `json.dumps`), and hands the
//! chunks to the core through a bounded channel; while the channel is full it waits with the GIL
//! released, checking for signals. Ctrl-C cancels the core, which returns its partial report.
//! Also `validate` and `to_json`, on the same converter.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyIterator, PyList, PyString, PyTuple};
use tokio::sync::{mpsc, watch};

use super::client::PyClient;
use super::{errors, log, runtime};
use crate::client::publish::{self as core, Input, Options, Progress, ProgressSink, Report};
use crate::client::redact;
use crate::client::Region;
use crate::webhook::{self as rules, Problem, Severity};

/// Containers nested deeper than this are refused (a record that contains itself).
const MAX_DEPTH: u32 = 64;
/// Dict keys whose JSON form is remembered, by object identity.
const KEY_CACHE: usize = 1024;

// ---------------------------------------------------------------------------------------------
// Python values to JSON text.

enum Seg {
    Key(String),
    Index(usize),
}

/// Why a value has no JSON form, and where it is.
struct ConvError {
    /// Innermost first.
    path: Vec<Seg>,
    message: String,
    /// A KeyboardInterrupt (or another exception that is not an `Exception`) raised by Python
    /// code the conversion called: it stops everything, it is not the record's fault.
    interrupt: Option<PyErr>,
}

impl ConvError {
    fn new(message: String) -> Self {
        ConvError {
            path: Vec::new(),
            message,
            interrupt: None,
        }
    }

    /// The error of Python code called for a value: an interrupt, or the value's problem.
    fn python(py: Python<'_>, e: PyErr, message: String) -> Self {
        let interrupt = (!e.is_instance_of::<PyException>(py)).then_some(e);
        ConvError {
            path: Vec::new(),
            message,
            interrupt,
        }
    }

    fn at(mut self, seg: Seg) -> Self {
        self.path.push(seg);
        self
    }

    /// The path as the validator writes it: `items[3].unitPrice`.
    fn path(&self) -> String {
        let mut out = String::new();
        for seg in self.path.iter().rev() {
            match seg {
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }

    fn problem(&self) -> Problem {
        Problem {
            path: self.path(),
            message: self.message.clone(),
            severity: Severity::Error,
        }
    }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .qualname()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}

/// Writes Python records as JSON text: dicts, lists, tuples, str, int, float, bool, None, and
/// sensibly the rest: datetimes and dates as epoch milliseconds (naive ones taken as UTC),
/// `Decimal` as a number, numpy scalars and arrays through `tolist()`, other mappings as objects.
pub struct Converter<'py> {
    date: Bound<'py, PyAny>,
    to_ms: Bound<'py, PyAny>,
    decimal: Bound<'py, PyAny>,
    mapping: Bound<'py, PyAny>,
    keys: KeyCache,
}

/// The JSON form of dict keys, by object address (the object kept alive with it).
type KeyCache = HashMap<usize, (Py<PyString>, Box<[u8]>), BuildHasherDefault<Identity>>;

/// Hashes an object address: the low bits are alignment, the multiply spreads the rest.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = ((n as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl<'py> Converter<'py> {
    /// Looks up the few Python classes the converter recognises.
    pub fn new(py: Python<'py>) -> PyResult<Self> {
        Ok(Converter {
            date: py.import("datetime")?.getattr("date")?,
            to_ms: py.import("surveillance._time")?.getattr("to_ms")?,
            decimal: py.import("decimal")?.getattr("Decimal")?,
            mapping: py.import("collections.abc")?.getattr("Mapping")?,
            keys: HashMap::default(),
        })
    }

    /// The JSON text of `obj`.
    fn text(&mut self, obj: &Bound<'py, PyAny>) -> Result<String, ConvError> {
        let mut out = Vec::with_capacity(512);
        self.value(obj, &mut out, 0)?;
        // Everything written is UTF-8 (strings come from `to_cow`, the rest is ASCII).
        String::from_utf8(out).map_err(|e| ConvError::new(format!("not UTF-8: {e}")))
    }

    fn value(
        &mut self,
        obj: &Bound<'py, PyAny>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<(), ConvError> {
        if depth > MAX_DEPTH {
            return Err(ConvError::new(format!(
                "nested more than {MAX_DEPTH} levels deep (does the record contain itself?)"
            )));
        }
        if let Ok(s) = obj.cast_exact::<PyString>() {
            return string(s, out);
        }
        if let Ok(d) = obj.cast_exact::<PyDict>() {
            return self.dict(d, out, depth);
        }
        if let Ok(f) = obj.cast_exact::<PyFloat>() {
            return float(f.value(), out);
        }
        if obj.is_none() {
            out.extend_from_slice(b"null");
            return Ok(());
        }
        if let Ok(b) = obj.cast::<PyBool>() {
            out.extend_from_slice(if b.is_true() { b"true" } else { b"false" });
            return Ok(());
        }
        if let Ok(i) = obj.cast_exact::<PyInt>() {
            return int(i, out);
        }
        if let Ok(l) = obj.cast_exact::<PyList>() {
            return self.seq(l.iter(), out, depth);
        }
        if let Ok(t) = obj.cast_exact::<PyTuple>() {
            return self.seq(t.iter(), out, depth);
        }
        self.other(obj, out, depth)
    }

    /// Subclasses of the basic types, and the sensible conversions of other types.
    fn other(
        &mut self,
        obj: &Bound<'py, PyAny>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<(), ConvError> {
        if let Ok(s) = obj.cast::<PyString>() {
            return string(s, out);
        }
        if let Ok(d) = obj.cast::<PyDict>() {
            return self.dict(d, out, depth);
        }
        if let Ok(f) = obj.cast::<PyFloat>() {
            return float(f.value(), out);
        }
        if let Ok(i) = obj.cast::<PyInt>() {
            return int(i, out);
        }
        if let Ok(l) = obj.cast::<PyList>() {
            return self.seq(l.iter(), out, depth);
        }
        if let Ok(t) = obj.cast::<PyTuple>() {
            return self.seq(t.iter(), out, depth);
        }
        let failed = |e: PyErr, what: &str| {
            let message = format!(
                "cannot convert {what} of type `{}` to JSON: {e}",
                type_name(obj)
            );
            ConvError::python(obj.py(), e, message)
        };
        if obj.is_instance(&self.date).unwrap_or(false) {
            let ms = self.to_ms.call1((obj,)).map_err(|e| failed(e, "a date"))?;
            let ms = ms.cast::<PyInt>().map_err(|e| failed(e.into(), "a date"))?;
            return int(ms, out);
        }
        if obj.is_instance(&self.decimal).unwrap_or(false) {
            let finite: bool = obj
                .call_method0("is_finite")
                .and_then(|v| v.extract())
                .map_err(|e| failed(e, "a decimal"))?;
            if !finite {
                return Err(ConvError::new(format!(
                    "`{}` has no JSON form (JSON has no NaN or infinity)",
                    obj.str().map(|s| s.to_string()).unwrap_or_default()
                )));
            }
            let text = obj.str().map_err(|e| failed(e, "a decimal"))?;
            out.extend_from_slice(text.to_string().as_bytes());
            return Ok(());
        }
        if obj.hasattr("tolist").unwrap_or(false) && obj.hasattr("dtype").unwrap_or(false) {
            // numpy scalars and arrays (and pandas' extension scalars): as Python values.
            let plain = obj
                .call_method0("tolist")
                .map_err(|e| failed(e, "a value"))?;
            return self.value(&plain, out, depth + 1);
        }
        if obj.is_instance(&self.mapping).unwrap_or(false) {
            let items = obj
                .call_method0("items")
                .and_then(|i| i.try_iter())
                .map_err(|e| failed(e, "a mapping"))?;
            out.push(b'{');
            for (n, item) in items.enumerate() {
                let item = item.map_err(|e| failed(e, "a mapping"))?;
                let (k, v): (Bound<'py, PyAny>, Bound<'py, PyAny>) =
                    item.extract().map_err(|e| failed(e, "a mapping"))?;
                if n > 0 {
                    out.push(b',');
                }
                self.entry(&k, &v, out, depth)?;
            }
            out.push(b'}');
            return Ok(());
        }
        Err(ConvError::new(format!(
            "a value of type `{}` has no JSON form; use str, int, float, bool, None, dict, list \
             or datetime",
            type_name(obj)
        )))
    }

    fn dict(
        &mut self,
        d: &Bound<'py, PyDict>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<(), ConvError> {
        out.push(b'{');
        for (n, (k, v)) in d.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            self.entry(&k, &v, out, depth)?;
        }
        out.push(b'}');
        Ok(())
    }

    fn entry(
        &mut self,
        k: &Bound<'py, PyAny>,
        v: &Bound<'py, PyAny>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<(), ConvError> {
        self.key(k, out)?;
        out.push(b':');
        self.value(v, out, depth + 1).map_err(|e| {
            let name = k
                .cast::<PyString>()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            e.at(Seg::Key(name))
        })
    }

    fn key(&mut self, k: &Bound<'py, PyAny>, out: &mut Vec<u8>) -> Result<(), ConvError> {
        if let Ok(s) = k.cast_exact::<PyString>() {
            // Records share their keys' objects (literals, DataFrame columns): their JSON form
            // is remembered by identity, and the object kept alive so the identity stays theirs.
            let id = s.as_ptr() as usize;
            if let Some((_, json)) = self.keys.get(&id) {
                out.extend_from_slice(json);
                return Ok(());
            }
            let start = out.len();
            string(s, out)?;
            if self.keys.len() < KEY_CACHE {
                let json: Box<[u8]> = out[start..].into();
                self.keys.insert(id, (s.clone().unbind(), json));
            }
            return Ok(());
        }
        if let Ok(s) = k.cast::<PyString>() {
            return string(s, out);
        }
        let shown = k
            .repr()
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default();
        Err(ConvError::new(format!(
            "keys must be strings, found the `{}` key `{shown}`",
            type_name(k)
        )))
    }

    fn seq(
        &mut self,
        items: impl Iterator<Item = Bound<'py, PyAny>>,
        out: &mut Vec<u8>,
        depth: u32,
    ) -> Result<(), ConvError> {
        out.push(b'[');
        for (i, v) in items.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            self.value(&v, out, depth + 1)
                .map_err(|e| e.at(Seg::Index(i)))?;
        }
        out.push(b']');
        Ok(())
    }
}

fn string(s: &Bound<'_, PyString>, out: &mut Vec<u8>) -> Result<(), ConvError> {
    let text = s.to_cow().map_err(|_| {
        ConvError::new("a string that is not valid Unicode (lone surrogate)".to_owned())
    })?;
    serde_json::to_writer(&mut *out, text.as_ref())
        .map_err(|e| ConvError::new(format!("cannot write a string: {e}")))
}

fn float(v: f64, out: &mut Vec<u8>) -> Result<(), ConvError> {
    if !v.is_finite() {
        return Err(ConvError::new(format!(
            "`{v}` has no JSON form (JSON has no NaN or infinity); leave the field out instead"
        )));
    }
    serde_json::to_writer(&mut *out, &v)
        .map_err(|e| ConvError::new(format!("cannot write a number: {e}")))
}

fn int(i: &Bound<'_, PyInt>, out: &mut Vec<u8>) -> Result<(), ConvError> {
    if let Ok(v) = i.extract::<i64>() {
        let _ = write!(out, "{v}");
    } else if let Ok(v) = i.extract::<u64>() {
        let _ = write!(out, "{v}");
    } else {
        // Larger integers are still JSON numbers; their decimal digits are the JSON form.
        let digits = i
            .str()
            .map_err(|e| ConvError::new(format!("cannot write an integer: {e}")))?;
        out.extend_from_slice(digits.to_string_lossy().as_bytes());
    }
    Ok(())
}

/// A record's best-effort JSON when it has no exact one (for `write_failures`).
fn lossy_json(py: Python<'_>, obj: &Bound<'_, PyAny>) -> Option<String> {
    let json = py.import("json").ok()?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("default", py.get_type::<PyString>()).ok()?;
    json.call_method("dumps", (obj,), Some(&kwargs))
        .and_then(|s| s.extract::<String>())
        .ok()
}

// ---------------------------------------------------------------------------------------------
// validate and to_json.

fn problem_dict<'py>(py: Python<'py>, p: &Problem) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("path", &p.path)?;
    d.set_item("message", &p.message)?;
    d.set_item(
        "severity",
        match p.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        },
    )?;
    Ok(d)
}

/// The problems of one record under its standard model, as dicts with `path`, `message` and
/// `severity`; empty when it conforms.
#[pyfunction]
#[pyo3(name = "validate")]
pub fn validate_record<'py>(
    py: Python<'py>,
    record: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let mut conv = Converter::new(py)?;
    let problems = match conv.text(record) {
        Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(value) => rules::validate(&value),
            Err(e) => vec![Problem {
                path: String::new(),
                message: format!("not valid JSON: {e}"),
                severity: Severity::Error,
            }],
        },
        Err(ConvError {
            interrupt: Some(e), ..
        }) => return Err(e),
        Err(e) => vec![e.problem()],
    };
    let out = PyList::empty(py);
    for p in &problems {
        out.append(problem_dict(py, p)?)?;
    }
    Ok(out)
}

/// The JSON text of a record, as `publish` writes it; ValueError naming the path of a value
/// with no JSON form.
#[pyfunction]
#[pyo3(name = "to_json")]
pub fn record_json(py: Python<'_>, record: &Bound<'_, PyAny>) -> PyResult<String> {
    let mut conv = Converter::new(py)?;
    conv.text(record).map_err(|e| {
        if let Some(interrupt) = e.interrupt {
            return interrupt;
        }
        let path = e.path();
        if path.is_empty() {
            PyValueError::new_err(e.message)
        } else {
            PyValueError::new_err(format!("{path}: {}", e.message))
        }
    })
}

// ---------------------------------------------------------------------------------------------
// publish.

/// Latest progress of the core, read by the waiting Python thread.
#[derive(Default, Clone)]
pub(super) struct Cell(std::sync::Arc<std::sync::Mutex<Option<Progress>>>);

impl Cell {
    pub(super) fn sink(&self) -> ProgressSink {
        let cell = self.0.clone();
        std::sync::Arc::new(move |p| {
            *cell.lock().unwrap_or_else(|e| e.into_inner()) = Some(p);
        })
    }

    pub(super) fn report(
        &self,
        py: Python<'_>,
        callback: Option<&Py<PyAny>>,
        read: Option<u64>,
    ) -> PyResult<()> {
        let Some(cb) = callback else { return Ok(()) };
        let latest = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(p) = latest {
            let d = PyDict::new(py);
            d.set_item("read", read.unwrap_or(p.read))?;
            d.set_item("accepted", p.accepted)?;
            d.set_item("rejected", p.rejected)?;
            d.set_item("requests", p.requests)?;
            cb.call1(py, (d,))?;
        }
        Ok(())
    }
}

/// Pulls up to `n` records; a Python exception from the iterator ends the chunk early.
fn pull<'py>(
    py: Python<'py>,
    iter: &mut Bound<'py, PyIterator>,
    conv: &mut Converter<'py>,
    index: &mut u64,
    n: usize,
) -> (Vec<Input>, bool, Option<PyErr>) {
    let mut chunk = Vec::with_capacity(n);
    for _ in 0..n {
        let obj = match iter.next() {
            None => return (chunk, true, None),
            Some(Err(e)) => return (chunk, true, Some(e)),
            Some(Ok(obj)) => obj,
        };
        let input = match conv.text(&obj) {
            Ok(text) => Input::Text {
                index: *index,
                line: None,
                text,
            },
            Err(mut e) => {
                let interrupt = e.interrupt.take();
                let input = Input::Rejected {
                    index: *index,
                    line: None,
                    problems: vec![e.problem()],
                    text: lossy_json(py, &obj),
                };
                if let Some(interrupt) = interrupt {
                    // Taken from the source, so reported (as not accepted) with the rest.
                    *index += 1;
                    chunk.push(input);
                    return (chunk, true, Some(interrupt));
                }
                input
            }
        };
        *index += 1;
        chunk.push(input);
    }
    (chunk, false, None)
}

pub(super) fn report_dict<'py>(py: Python<'py>, r: &Report) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("total", r.total)?;
    d.set_item("sent", r.sent)?;
    d.set_item("accepted", r.accepted)?;
    d.set_item("requests", r.requests)?;
    d.set_item("retries", r.retries)?;
    d.set_item("rate_limited", r.rate_limited)?;
    d.set_item("elapsed", r.elapsed.as_secs_f64())?;
    d.set_item("interrupted", r.interrupted)?;
    d.set_item(
        "error",
        r.error.as_ref().map(|e| e.clone().scrubbed().to_string()),
    )?;
    let failures = PyList::empty(py);
    for f in &r.failures {
        let fd = PyDict::new(py);
        fd.set_item("index", f.index)?;
        fd.set_item("line", f.line)?;
        fd.set_item("transactionId", &f.transaction_id)?;
        fd.set_item("status", f.status)?;
        let problems = PyList::empty(py);
        for p in &f.problems {
            problems.append(problem_dict(py, p)?)?;
        }
        fd.set_item("problems", problems)?;
        fd.set_item("message", redact::scrub(&f.message))?;
        fd.set_item("record", &f.record)?;
        failures.append(fd)?;
    }
    d.set_item("failures", failures)?;
    Ok(d)
}

/// Publishes the records of `source` (an iterator) or of the JSON Lines file `path`.
///
/// Returns `(report, exception)`: the report as a dict, and the exception to raise with it
/// (KeyboardInterrupt or another signal's, the iterator's own, or the core's error that stopped
/// publishing), or None. Invalid arguments raise at once. `cancelled`, when given, is called
/// between waits: a true answer stops publishing as an interruption.
#[pyfunction]
#[pyo3(name = "publish", signature = (client, source=None, path=None, *, region=None, batch_size=None, validate=true, progress=None, cancelled=None))]
#[allow(clippy::too_many_arguments)]
pub fn publish_records<'py>(
    py: Python<'py>,
    client: &Bound<'py, PyClient>,
    source: Option<Bound<'py, PyAny>>,
    path: Option<PathBuf>,
    region: Option<String>,
    batch_size: Option<usize>,
    validate: bool,
    progress: Option<Py<PyAny>>,
    cancelled: Option<Py<PyAny>>,
) -> PyResult<(Bound<'py, PyDict>, Option<Py<PyAny>>)> {
    let core = client.get().core()?;
    let region = region
        .as_deref()
        .map(Region::parse)
        .transpose()
        .map_err(errors::to_py)?;
    let options = Options {
        region,
        // None: "auto", arrays of 100 unless the service refuses arrays.
        batch_size: batch_size.unwrap_or(core::MAX_BATCH),
        fallback: batch_size.is_none(),
        validate,
    };
    options.check().map_err(errors::to_py)?;
    core.config()
        .webhook_url(region.unwrap_or(core.config().region))
        .map_err(errors::to_py)?;
    let mut iter = match (&source, &path) {
        (Some(s), None) => Some(s.try_iter()?),
        (None, Some(_)) => None,
        _ => {
            return Err(PyValueError::new_err(
                "give exactly one of `source` and `path`",
            ))
        }
    };
    let rt = runtime::get().map_err(errors::internal)?;
    log::refresh(py);
    let (stop, cancel) = watch::channel(false);
    let cell = Cell::default();
    let sink = progress.as_ref().map(|_| cell.sink());
    let (rx, mut tx, reader) = match path {
        Some(p) => {
            let _guard = rt.enter();
            let (rx, reader) = core::jsonl_source(p, validate);
            (rx, None, Some(reader))
        }
        None => {
            let (tx, rx) = mpsc::channel(core::CHANNEL_CHUNKS);
            (rx, Some(tx), None)
        }
    };
    let mut task = rt.spawn(async move { core.publish(rx, options, sink, cancel).await });

    let mut conv = Converter::new(py)?;
    let mut index = 0u64;
    let mut pending: Option<Vec<Input>> = None;
    let mut exhausted = iter.is_none();
    let mut raised: Option<PyErr> = None;
    let mut interrupted = false;
    let mut last_tick = Instant::now();
    let outcome = loop {
        // Produce: pull a chunk, hand it over, or wait (GIL released) for room or the end.
        if let (Some(it), None, false) = (iter.as_mut(), &pending, exhausted) {
            let (chunk, done, err) = pull(py, it, &mut conv, &mut index, core::CHUNK);
            exhausted = done;
            if !chunk.is_empty() {
                pending = Some(chunk);
            }
            if let Some(e) = err {
                if !e.is_instance_of::<PyException>(py) {
                    interrupted = true;
                }
                raised = Some(e);
            }
        }
        if interrupted {
            break None;
        }
        let mut wait_for_room = false;
        let mut closed = false;
        if let (Some(sender), Some(chunk)) = (&tx, pending.take()) {
            match sender.try_reserve() {
                Ok(permit) => permit.send(chunk),
                Err(mpsc::error::TrySendError::Full(())) => {
                    pending = Some(chunk);
                    wait_for_room = true;
                }
                // The core stopped reading (an error that concerns every record).
                Err(mpsc::error::TrySendError::Closed(())) => {
                    pending = Some(chunk);
                    closed = true;
                }
            }
        }
        if closed {
            exhausted = true;
            tx = None;
        }
        if exhausted && pending.is_none() {
            // End of the source: the core finishes what it has.
            tx = None;
        }
        let producing = tx.is_some() && !wait_for_room;
        if !producing || last_tick.elapsed() >= Duration::from_millis(50) {
            let step = py.detach(|| {
                rt.block_on(async {
                    let room = async {
                        match (&tx, wait_for_room) {
                            (Some(sender), true) => {
                                let _ = sender.reserve().await;
                            }
                            _ => std::future::pending::<()>().await,
                        }
                    };
                    let budget = if producing {
                        Duration::ZERO
                    } else {
                        Duration::from_millis(50)
                    };
                    tokio::select! {
                        biased;
                        done = &mut task => Some(done),
                        _ = room => None,
                        _ = tokio::time::sleep(budget) => None,
                    }
                })
            });
            log::flush(py);
            cell.report(py, progress.as_ref(), iter.as_ref().map(|_| index))?;
            last_tick = Instant::now();
            if let Err(e) = py.check_signals() {
                interrupted = true;
                raised = Some(e);
                break None;
            }
            // The caller gave up (an asyncio task cancelled): stop as on Ctrl-C.
            if let Some(c) = &cancelled {
                if c.call0(py)?.is_truthy(py)? {
                    interrupted = true;
                    break None;
                }
            }
            if let Some(done) = step {
                break Some(done);
            }
        } else if let Err(e) = py.check_signals() {
            interrupted = true;
            raised = Some(e);
            break None;
        }
    };
    let outcome = match outcome {
        Some(done) => done,
        None => {
            // Interrupted: the core stops at once and reports what it had.
            stop.send_replace(true);
            drop(tx.take());
            py.detach(|| rt.block_on(&mut task))
        }
    };
    drop(tx);
    log::flush(py);
    let mut report = match outcome {
        Ok(Ok(report)) => report,
        Ok(Err(e)) => return Err(errors::to_py(e)),
        Err(join) => return Err(errors::internal(join)),
    };
    if let Some(reader) = reader {
        if interrupted || report.error.is_some() {
            reader.abort();
        } else if let Ok(Err(e)) = py.detach(|| rt.block_on(reader)) {
            // The file could not be read to its end.
            raised.get_or_insert(errors::to_py(e));
        }
    }
    if let Some(chunk) = pending.take() {
        let message = if interrupted {
            "not accepted: publishing was interrupted".to_owned()
        } else {
            match &report.error {
                Some(e) => format!("not sent: publishing stopped: {e}"),
                None => "not sent: publishing stopped".to_owned(),
            }
        };
        report.unsent(chunk, &message);
        report.failures.sort_by_key(|f| f.index);
    }
    cell.report(py, progress.as_ref(), iter.as_ref().map(|_| index))?;
    let error = match (raised, report.error.clone()) {
        (Some(e), _) => Some(e),
        (None, Some(e)) => Some(errors::to_py(e)),
        (None, None) => None,
    };
    let dict = report_dict(py, &report)?;
    Ok((dict, error.map(|e| e.into_value(py).into_any())))
}
