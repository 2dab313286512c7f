//! Sources of records for [`Client::publish`](super::super::Client::publish): a JSON Lines file
//! read and checked in worker threads ([`jsonl_source`]), and JSON values ([`values_source`]).

use std::collections::VecDeque;
use std::io::Read;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::prepare::check_text;
use super::{Input, CHANNEL_CHUNKS, CHUNK};
use crate::client::error::{Error, Result};
use crate::webhook::{Problem, Severity};

/// A source of the given records, fed by a task; `index` counts from 0.
pub fn values_source(
    records: impl IntoIterator<Item = Value, IntoIter: Send + 'static>,
) -> (mpsc::Receiver<Vec<Input>>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    let mut iter = records.into_iter();
    let feeder = tokio::spawn(async move {
        let mut index = 0u64;
        loop {
            let mut chunk = Vec::with_capacity(CHUNK);
            for value in iter.by_ref().take(CHUNK) {
                chunk.push(Input::Value { index, value });
                index += 1;
            }
            if chunk.is_empty() || tx.send(chunk).await.is_err() {
                return;
            }
        }
    });
    (rx, feeder)
}

/// Bytes of the file read at a time (a block's lines are checked together, by one worker).
const BLOCK: usize = 256 * 1024;

/// A record's index, line number and range in its block.
type Numbered = (u64, u64, std::ops::Range<usize>);

/// A block of whole lines, with the records' positions in it.
struct Block {
    bytes: Bytes,
    /// (index, line number, range in `bytes`) of each record (non-blank line), in order.
    records: Vec<Numbered>,
}

/// Reads a JSON Lines file into a source: one record per non-blank line, `index` counting
/// records from 0 and `line` the line number. The lines are split here and checked (JSON, and
/// with `check` the record's model; its upsert key) by worker threads, one block each, handed
/// on in the file's order: a file publish uses every core. Each record's text is a view into
/// its block, not a copy.
///
/// The task ends with the file's read error, if any, or when the receiver is dropped.
pub fn jsonl_source(
    path: PathBuf,
    check: bool,
) -> (mpsc::Receiver<Vec<Input>>, JoinHandle<Result<()>>) {
    let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let feeder = tokio::spawn(async move {
        let (blocks_tx, mut blocks) = mpsc::channel::<Block>(workers);
        let reader = tokio::task::spawn_blocking(move || read_blocks(&path, &blocks_tx));
        let mut pending: VecDeque<JoinHandle<Vec<Input>>> = VecDeque::new();
        let mut more = true;
        loop {
            while more && pending.len() < workers {
                match blocks.recv().await {
                    Some(block) => pending.push_back(tokio::task::spawn_blocking(move || {
                        check_block(block, check)
                    })),
                    None => more = false,
                }
            }
            let Some(next) = pending.pop_front() else {
                break;
            };
            let inputs = next
                .await
                .map_err(|e| Error::Transport(format!("a record-checking task failed: {e}")))?;
            let mut inputs = inputs.into_iter().peekable();
            while inputs.peek().is_some() {
                let chunk: Vec<Input> = inputs.by_ref().take(CHUNK).collect();
                if tx.send(chunk).await.is_err() {
                    // Nobody reads any more: stop reading the file too.
                    drop(blocks);
                    return Ok(());
                }
            }
        }
        reader
            .await
            .map_err(|e| Error::Transport(format!("the file reader failed: {e}")))?
    });
    (rx, feeder)
}

/// Reads `path` in blocks of whole lines, numbering its records; stops early when nobody waits.
fn read_blocks(path: &PathBuf, out: &mpsc::Sender<Block>) -> Result<()> {
    let unreadable =
        |e: std::io::Error| Error::argument(format!("cannot read `{}`: {e}", path.display()));
    let mut file = std::fs::File::open(path).map_err(unreadable)?;
    let mut buf = BytesMut::with_capacity(BLOCK * 2);
    let (mut index, mut line) = (0u64, 0u64);
    let mut first = true;
    let mut eof = false;
    while !eof {
        let start = buf.len();
        buf.resize(start + BLOCK, 0);
        let n = loop {
            match file.read(&mut buf[start..]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(unreadable(e)),
            }
        };
        buf.truncate(start + n);
        eof = n == 0;
        // Whole lines only; the last one waits for the rest of its bytes (or the end).
        let cut = if eof {
            buf.len()
        } else {
            match buf.iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => continue,
            }
        };
        if cut == 0 {
            continue;
        }
        let bytes = buf.split_to(cut).freeze();
        let mut records = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let end = bytes[at..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |i| at + i);
            line += 1;
            let (mut a, mut b) = (at, end);
            if first && bytes[a..b].starts_with(b"\xef\xbb\xbf") {
                a += 3;
            }
            first = false;
            while a < b && bytes[a].is_ascii_whitespace() {
                a += 1;
            }
            while b > a && bytes[b - 1].is_ascii_whitespace() {
                b -= 1;
            }
            if a < b {
                records.push((index, line, a..b));
                index += 1;
            }
            at = end + 1;
        }
        if out.blocking_send(Block { bytes, records }).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// The records of a JSON Lines file after the first `skip`, numbered as [`jsonl_source`]
/// numbers them (non-blank lines, ASCII whitespace trimmed, a leading BOM dropped), as text
/// (bytes that are not UTF-8 replaced): what a stopped publish had not read yet, for
/// `write_failures`. The file is read in blocks on a thread of its own; iterate from a thread
/// that is not running async code (the iterator waits for the blocks).
pub fn jsonl_rest(path: PathBuf, skip: u64) -> JsonlRest {
    let (tx, rx) = mpsc::channel::<Block>(2);
    let reader = std::thread::spawn(move || read_blocks(&path, &tx));
    JsonlRest {
        rx,
        reader: Some(reader),
        block: None,
        skip,
    }
}

/// See [`jsonl_rest`].
pub struct JsonlRest {
    rx: mpsc::Receiver<Block>,
    reader: Option<std::thread::JoinHandle<Result<()>>>,
    /// The block being read, and its records not yet handed out.
    block: Option<(Bytes, std::vec::IntoIter<Numbered>)>,
    skip: u64,
}

impl Iterator for JsonlRest {
    type Item = Result<String>;

    fn next(&mut self) -> Option<Result<String>> {
        loop {
            if let Some((bytes, records)) = &mut self.block {
                for (index, _, range) in records.by_ref() {
                    if index >= self.skip {
                        return Some(Ok(String::from_utf8_lossy(&bytes[range]).into_owned()));
                    }
                }
                self.block = None;
            }
            match self.rx.blocking_recv() {
                Some(block) => self.block = Some((block.bytes, block.records.into_iter())),
                None => {
                    return match self.reader.take()?.join() {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(Err(e)),
                        Err(_) => Some(Err(Error::Io("the file reader failed".into()))),
                    }
                }
            }
        }
    }
}

/// Checks every record of a block.
fn check_block(block: Block, check: bool) -> Vec<Input> {
    block
        .records
        .into_iter()
        .map(|(index, line, range)| {
            let text = block.bytes.slice(range);
            match std::str::from_utf8(&text) {
                Ok(_) => check_text(index, Some(line), text, check),
                Err(e) => Input::Rejected {
                    index,
                    line: Some(line),
                    problems: vec![Problem {
                        path: String::new(),
                        message: format!("line {line} is not UTF-8: {e}"),
                        severity: Severity::Error,
                    }],
                    text: None,
                },
            }
        })
        .collect()
}
