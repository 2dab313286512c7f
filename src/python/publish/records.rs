//! Publishing from Python: `publish` pulls records from a Python iterator in chunks while
//! holding the GIL briefly, writes each one as JSON into one buffer per chunk and checks it in
//! the same walk ([`to_json`](crate::python::conversions::to_json)), and hands the chunks to the
//! core, ready to post, through a bounded channel; while the channel is full it waits with the
//! GIL released ([`wait`]'s steps). Ctrl-C cancels the core, which returns its partial report
//! ([`report`] converts it). A JSON Lines file is read by the core.

use std::ops::Range;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyIterator, PyString};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::report::{self, PyPublishReport};
use super::unread::Reread;
use super::{finished, Given, PublishCell, Publishing};
use crate::client;
use crate::client::publish::{self as core, FailureKind, Input};
use crate::python::conversions::errors;
use crate::python::conversions::to_json::{Writer, Written};
use crate::python::runtime::{self, log, wait};

/// A record's best-effort JSON when it has no exact one (for `write_failures`).
fn lossy_json(py: Python<'_>, obj: &Bound<'_, PyAny>) -> Option<String> {
    let json = py.import("json").ok()?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("default", py.get_type::<PyString>()).ok()?;
    json.call_method("dumps", (obj,), Some(&kwargs))
        .and_then(|s| s.extract::<String>())
        .ok()
}

/// Hands the latest progress to `callback`, with `read` (the records taken from a Python
/// iterator, which this thread counts) in place of the core's count when given.
fn report_read(
    cell: &PublishCell,
    py: Python<'_>,
    callback: Option<&Py<PyAny>>,
    read: Option<u64>,
) -> PyResult<()> {
    cell.report_with(py, callback, |d| match read {
        Some(n) => d.set_item("read", n),
        None => Ok(()),
    })
}

/// A record of a chunk, before the chunk's buffer is frozen.
enum ChunkRecord {
    Written {
        index: u64,
        range: Range<usize>,
        written: Written,
    },
    Refused(Input),
}

/// What one [`pull`] took from the iterator.
struct Pulled {
    /// The records of the chunk, in the iterator's order.
    inputs: Vec<Input>,
    /// The iterator is exhausted (or raised): nothing more to pull.
    done: bool,
    /// The exception the iterator raised, which ended the chunk early.
    raised: Option<PyErr>,
}

/// Pulls up to `n` records and writes them into one buffer, shared by the chunk's texts; with
/// `check`, each one checked in the same walk. A record the walk could not judge, or found
/// wrong, is checked by the core's careful path here, so that the core never scans a text again
/// and problems are worded as the detailed validator words them. A Python exception from the
/// iterator ends the chunk early. `capacity`: the buffer's size to start from, updated.
fn pull<'py>(
    py: Python<'py>,
    iter: &mut Bound<'py, PyIterator>,
    writer: &mut Writer<'py>,
    index: &mut u64,
    n: usize,
    check: bool,
    capacity: &mut usize,
) -> Pulled {
    let mut buf = Vec::with_capacity(*capacity);
    let mut pulled = Vec::with_capacity(n);
    let mut done = false;
    let mut raised = None;
    while pulled.len() < n {
        runtime::exit_point(py);
        let obj = match iter.next() {
            None => {
                done = true;
                break;
            }
            Some(Err(e)) => {
                done = true;
                raised = Some(e);
                break;
            }
            Some(Ok(obj)) => obj,
        };
        let start = buf.len();
        match writer.record(&obj, &mut buf, check) {
            Ok(written) => pulled.push(ChunkRecord::Written {
                index: *index,
                range: start..buf.len(),
                written,
            }),
            Err(mut e) => {
                buf.truncate(start);
                let interrupt = e.interrupt.take();
                pulled.push(ChunkRecord::Refused(Input::Rejected {
                    index: *index,
                    line: None,
                    problems: vec![e.problem()],
                    text: lossy_json(py, &obj),
                }));
                if let Some(interrupt) = interrupt {
                    // Taken from the source, so reported (as not accepted) with the rest.
                    *index += 1;
                    done = true;
                    raised = Some(*interrupt);
                    break;
                }
            }
        }
        *index += 1;
    }
    if pulled.len() == n {
        *capacity = buf.len() + buf.len() / 16 + 64;
    }
    let bytes = Bytes::from(buf);
    let chunk = pulled
        .into_iter()
        .map(|p| match p {
            ChunkRecord::Written {
                index,
                range,
                written,
            } => {
                let text = bytes.slice(range);
                if written.judged && (written.conforms || !check) {
                    Input::Ready {
                        index,
                        line: None,
                        key: written.key,
                        text,
                    }
                } else {
                    core::check_text(index, None, text, check)
                }
            }
            ChunkRecord::Refused(input) => input,
        })
        .collect();
    Pulled {
        inputs: chunk,
        done,
        raised,
    }
}

/// The Python side of a publish from an iterator: pulls chunks of records from it, writes and
/// checks them, and hands them to the core through its channel.
struct Feed<'py> {
    /// None for a JSON Lines file, which the core reads.
    iter: Option<Bound<'py, PyIterator>>,
    writer: Writer<'py>,
    /// The core's channel; None once the source is done or the core stopped reading.
    tx: Option<mpsc::Sender<Vec<Input>>>,
    validate: bool,
    /// The size to start a chunk's buffer from.
    capacity: usize,
    /// Records taken from the source.
    index: u64,
    /// A chunk written but not handed over yet (the channel was full, or closed).
    pending: Option<Vec<Input>>,
    /// The source has no more records, or the core takes no more.
    exhausted: bool,
    /// The exception to raise with the report: the iterator's own, or a signal's.
    raised: Option<PyErr>,
    /// Ctrl-C, or another exception that is not an `Exception`, stopped publishing.
    interrupted: bool,
}

impl<'py> Feed<'py> {
    /// Pulls the next chunk when none waits and the source has more.
    fn pull(&mut self, py: Python<'py>) {
        let Some(it) = self.iter.as_mut() else {
            return;
        };
        if self.pending.is_some() || self.exhausted {
            return;
        }
        let Pulled {
            inputs: chunk,
            done,
            raised: err,
        } = pull(
            py,
            it,
            &mut self.writer,
            &mut self.index,
            core::CHUNK,
            self.validate,
            &mut self.capacity,
        );
        self.exhausted = done;
        if !chunk.is_empty() {
            self.pending = Some(chunk);
        }
        if let Some(e) = err {
            if !e.is_instance_of::<PyException>(py) {
                self.interrupted = true;
            }
            self.raised = Some(e);
        }
    }

    /// Hands the waiting chunk to the core; true when its channel is full (wait for room).
    /// Closes the channel at the end of the source (the core finishes what it has), and
    /// stops when the core stopped reading (an error that concerns every record).
    fn hand_over(&mut self) -> bool {
        let mut full = false;
        let mut closed = false;
        if let (Some(sender), Some(chunk)) = (&self.tx, self.pending.take()) {
            match sender.try_reserve() {
                Ok(permit) => permit.send(chunk),
                Err(mpsc::error::TrySendError::Full(())) => {
                    self.pending = Some(chunk);
                    full = true;
                }
                Err(mpsc::error::TrySendError::Closed(())) => {
                    self.pending = Some(chunk);
                    closed = true;
                }
            }
        }
        if closed {
            self.exhausted = true;
            self.tx = None;
        }
        if self.exhausted && self.pending.is_none() {
            self.tx = None;
        }
        full
    }

    /// Records read from a Python source (None for a file, which the core counts).
    fn read(&self) -> Option<u64> {
        self.iter.as_ref().map(|_| self.index)
    }
}

/// The records a publish took but never handed to the core (`pending`), in the report: not
/// accepted when Ctrl-C stopped it, else not sent.
fn account_unsent(report: &mut core::Report, pending: Option<Vec<Input>>, interrupted: bool) {
    let Some(chunk) = pending else {
        return;
    };
    let (kind, message) = if interrupted {
        let why = "not accepted: publishing was interrupted";
        (FailureKind::Interrupted, why.to_owned())
    } else {
        let why = match &report.error {
            Some(e) => format!("not sent: publishing stopped: {e}"),
            None => "not sent: publishing stopped".to_owned(),
        };
        (FailureKind::NotSent, why)
    };
    report.unsent(chunk, kind, &message);
    report.failures.sort_by_key(|f| f.index);
}

/// The core's source of chunks: the JSON Lines file `path`, read by the core, or a channel
/// this thread feeds.
struct ChunkSource {
    /// What the core's publish reads.
    chunks: mpsc::Receiver<Vec<Input>>,
    /// The channel's sender, when this thread feeds it.
    feed: Option<mpsc::Sender<Vec<Input>>>,
    /// The core's reader of the file, when it reads one.
    reader: Option<JoinHandle<client::Result<()>>>,
}

fn channel(rt: &tokio::runtime::Runtime, path: Option<PathBuf>, validate: bool) -> ChunkSource {
    match path {
        Some(p) => {
            let _guard = rt.enter();
            let (chunks, reader) = core::jsonl_source(p, validate);
            ChunkSource {
                chunks,
                feed: None,
                reader: Some(reader),
            }
        }
        None => {
            let (feed, chunks) = mpsc::channel(core::CHANNEL_CHUNKS);
            ChunkSource {
                chunks,
                feed: Some(feed),
                reader: None,
            }
        }
    }
}

/// Waits up to `budget`, the GIL released, for the core's publish `task` to end, or for room
/// in the channel of `full` (its sender, when it was full); the task's outcome if it ended.
fn wait_core(
    py: Python<'_>,
    rt: &tokio::runtime::Runtime,
    task: &mut JoinHandle<client::Result<core::Report>>,
    full: Option<&mpsc::Sender<Vec<Input>>>,
    budget: Duration,
) -> Option<Result<client::Result<core::Report>, tokio::task::JoinError>> {
    wait::step(py, rt, budget, async {
        let room = async {
            match full {
                Some(sender) => {
                    let _ = sender.reserve().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            biased;
            done = &mut *task => Some(done),
            _ = room => None,
        }
    })
    .flatten()
}

/// Publishes the records of a Python iterable or of a JSON Lines file: `publish` without
/// `columns`. `cancelled`, when given, is called between waits: a true answer stops publishing
/// as an interruption.
pub(super) fn publish(
    py: Python<'_>,
    publishing: Publishing,
    source: Given<'_>,
) -> PyResult<(PyPublishReport, Option<Py<PyAny>>)> {
    let _call = runtime::ExitGuard::enter();
    let validate = publishing.options.validate;
    let again = source.again(Reread::Records, Reread::Jsonl)?;
    let iter = source.object.as_ref().map(|s| s.try_iter()).transpose()?;
    let path = source.path;
    let asked = publishing.asked.clone();
    let rt = runtime::get().map_err(errors::internal)?;
    log::refresh(py);
    let ChunkSource {
        chunks: rx,
        feed: tx,
        reader,
    } = channel(&rt, path, validate);
    let mut feed = Feed {
        exhausted: iter.is_none(),
        iter,
        writer: Writer::new(py)?,
        tx,
        validate,
        capacity: 64 * 1024,
        index: 0,
        pending: None,
        raised: None,
        interrupted: false,
    };
    let mut started = publishing.start(&rt, rx);
    let mut last_tick = Instant::now();
    let outcome = loop {
        // Produce: pull a chunk, hand it over, or wait (GIL released) for room or the end.
        feed.pull(py);
        if feed.interrupted {
            break None;
        }
        let full = feed.hand_over();
        let producing = feed.tx.is_some() && !full;
        if producing && last_tick.elapsed() < wait::TICK {
            if let Err(e) = py.check_signals() {
                feed.interrupted = true;
                feed.raised = Some(e);
                break None;
            }
            continue;
        }
        // Wait for the core, for room in its channel, or (producing) not at all.
        let budget = if producing {
            Duration::ZERO
        } else {
            wait::TICK
        };
        let step = wait_core(
            py,
            &rt,
            &mut started.task,
            feed.tx.as_ref().filter(|_| full),
            budget,
        );
        // Ctrl-C may land in the progress callback (Python code) as well as between waits;
        // either way, on the callback's own error, and when the caller gives up, the core
        // stops and reports.
        let read = feed.read();
        let ticked = wait::between(
            py,
            |py| report_read(&started.cell, py, started.progress.as_ref(), read),
            started.cancelled.as_ref(),
        );
        last_tick = Instant::now();
        if let Err(stopped) = ticked {
            feed.interrupted = true;
            feed.raised = stopped;
            // A core that ended in this step has its whole report (and a spent handle).
            break step;
        }
        if let Some(done) = step {
            break Some(done);
        }
    };
    let outcome = match outcome {
        Some(done) => done,
        None => {
            // Interrupted: the core stops at once and reports what it had.
            started.stop.send_replace(true);
            drop(feed.tx.take());
            runtime::detach(py, || rt.block_on(&mut started.task))
        }
    };
    drop(feed.tx.take());
    log::flush(py);
    let mut report = finished(outcome)?;
    let mut raised = feed.raised.take();
    if let Some(reader) = reader {
        if feed.interrupted || report.error.is_some() {
            reader.abort();
        } else if let Ok(Err(e)) = runtime::detach(py, || rt.block_on(reader)) {
            // The file could not be read to its end.
            raised.get_or_insert(errors::to_py(e));
        }
    }
    account_unsent(&mut report, feed.pending.take(), feed.interrupted);
    // The last progress update: its error (Ctrl-C in the callback) comes with the report.
    if let Err(e) = report_read(&started.cell, py, started.progress.as_ref(), feed.read()) {
        raised.get_or_insert(e);
    }
    report::outcome(py, &report, raised, asked, again)
}
