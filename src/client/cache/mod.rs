//! The cache of settled events on disk: one file per window whose every page was read, under a
//! private directory per account (a hash of the base URL, the API key and the client id, never
//! a secret) and endpoint, named by its range; atomic writes, checked reads, an LRU cap.
//!
//! The cache touches only what is its own. Its root holds a `CACHEDIR.TAG` of surveillance (the
//! convention backup tools honour): a directory the cache creates is marked so, and an existing
//! directory without the mark is never written, chmod-ed or cleared: the cache makes its own
//! marked folder, [`OWN_DIR`], inside it (see [`locate`]). Every directory the cache creates is
//! 0700 and every file 0600, whatever the umask; a root that is not private is refused. Below
//! the root no symbolic link is followed, to write, read or remove (a link is not the cache's).
//!
//! A file is `svcache 2 <header>\n` and then a JSON array of the window's events in `[lo, hi)`,
//! sorted by (startTime, id), as the service sent them. The header, one JSON object, says which
//! account, endpoint, report (exactly as given), range and count of events the file holds, and
//! its body's length and SHA-256: every read checks all of it against what was asked, and a
//! mismatch is damage (warned about, removed, fetched again), never served. Its name is
//! `<lo>_<hi>_<events>_<requests>.json` (epoch milliseconds; `requests`: those its fetch spent,
//! see [`Segment::requests`]): listing a directory is the index, so two
//! processes that fill one cache never share a file they both write. A file is written under a
//! unique temporary name and renamed into place, so no reader sees half of one. Reading a
//! file touches its modification time, which the size cap evicts by (least recently used first).
//!
//! Beside the segments, `<start>_<end>.pages` files keep the pages that a fetch stopped early
//! (a dlt load the daily quota stopped) read of the windows it did not finish, from `start`
//! on (see [`Cache::carry`]), for its next run to take instead of asking them again: a
//! checked blob of `events::carry`, which says whose pages it holds.
//!
//! By concern: `disk` says where the cache lives and how it touches the disk (private
//! directories, the root's mark, atomic writes); `admin` what a directory holds and its
//! clearing; this file the files' format and the [`Cache`] of one account.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::error::Result;

mod admin;
mod disk;

use admin::accounts;
pub use admin::{clear, info, Entry, Info};
pub(crate) use disk::make_private_dirs;
use disk::{
    check_root, make_own_dirs, read_own_dir, refuse_links, sha256_hex, temp_name, write_atomic,
};
pub use disk::{default_dir, is_marked, locate, user_cache_dir};

/// The default cap of a cache directory's size, bytes (2 GiB).
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;
/// The first word of every cache file, and its format's version after it.
const MAGIC: &str = "svcache 2";
/// The longest header a cache file may have, bytes.
const HEADER_MAX: usize = 1024;
/// The endpoint whose answers the cache keeps.
const ENDPOINT: &str = "GET /v2/events";
/// The file that marks the root of a cache (the Cache Directory Tagging convention:
/// <https://bford.info/cachedir/>).
pub const TAG_FILE: &str = "CACHEDIR.TAG";
/// What [`TAG_FILE`] holds: the convention's signature, then who made it.
const TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by surveillance (its cache of settled events).\n\
# For information about cache directory tags, see https://bford.info/cachedir/\n";
/// The words of [`TAG`] that say the mark is this cache's, not another program's.
const TAG_OWNER: &str = "created by surveillance";
/// The folder the cache makes for itself inside an existing directory that is not its own.
pub const OWN_DIR: &str = "surveillance-cache";
/// A temporary file older than this was left by a writer that died: removed by eviction.
const STALE_TEMP: Duration = Duration::from_secs(3600);
/// The name of the file of an account's directory that says whose it is (no secret in it).
const ACCOUNT_FILE: &str = "account.json";
/// The name of the file of an account's directory that keeps what its fetches found of the
/// service's order and density (see [`Seen`]).
const SEEN_FILE: &str = "shape.json";
/// A density kept is written again only when a fetch finds one denser by this factor.
const DENSER: f64 = 1.1;

/// The cache of one account: where its files are, and the cap of the whole directory.
#[derive(Debug, Clone)]
pub struct Cache {
    root: PathBuf,
    account: String,
    base_url: String,
    max_bytes: u64,
}

/// A file of the cache: the events of `[lo, hi)`, `events` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Start of its range, inclusive, epoch ms.
    pub lo: i64,
    /// End of its range, exclusive, epoch ms.
    pub hi: i64,
    /// How many events it holds.
    pub events: u64,
    /// The requests its fetch spent: one per page its window asked (a page a plan or a quota
    /// check read for that fetch included, retries not), with those of the windows a split
    /// replaced in its range. A window cut by the settle period keeps its settled part with
    /// the pages that part's events fill (the least a read of it takes), at most its
    /// window's: how many of its pages the settled part needed is not known.
    pub requests: u64,
    /// Its file.
    pub path: PathBuf,
}

/// A part of a range: served from a file of the cache, or to fetch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// `[lo, hi)` from a segment that covers it.
    Held(Segment, i64, i64),
    /// `[lo, hi)` is not in the cache.
    Gap(i64, i64),
}

/// What an account's fetches found of how the service gives its events, kept in the account's
/// directory so that a client of a later process (a notebook's kernel started again, the next
/// run of a job) starts from it rather than asking again what its first fetch would: whether
/// the service sorts events, whether a range's first page shows its first events, and the most
/// events a millisecond seen in a window of each report (None: all events). None of it decides
/// what a fetch returns, only how many requests it spends finding out.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Seen {
    /// A fetch found the service's events unsorted.
    pub unsorted: bool,
    /// A full first page was not sorted ascending.
    pub unpeekable: bool,
    /// The most events a millisecond seen in a window, per report.
    pub density: Vec<(Option<String>, f64)>,
}

impl Seen {
    /// The density kept of `report`'s events.
    pub fn density_of(&self, report: Option<&str>) -> Option<f64> {
        self.density
            .iter()
            .find(|(r, _)| r.as_deref() == report)
            .map(|(_, d)| *d)
    }

    /// Whether `self` tells what `kept` does not: a flag it lacks, or a density it lacks or
    /// holds [`DENSER`] times lower.
    pub fn tells_more_than(&self, kept: &Seen) -> bool {
        (self.unsorted && !kept.unsorted)
            || (self.unpeekable && !kept.unpeekable)
            || self.density.iter().any(|(r, d)| {
                kept.density_of(r.as_deref())
                    .is_none_or(|k| *d > k * DENSER)
            })
    }

    /// What `self` and `other` found together: either's flags, and the denser of each density.
    fn merged(mut self, other: Seen) -> Seen {
        self.unsorted |= other.unsorted;
        self.unpeekable |= other.unpeekable;
        for (report, d) in other.density {
            match self.density.iter_mut().find(|(r, _)| *r == report) {
                Some((_, mine)) => *mine = mine.max(d),
                None => self.density.push((report, d)),
            }
        }
        self
    }
}

/// Why a cached file cannot be served.
#[derive(Debug)]
pub enum Damage {
    /// It is gone (evicted, cleared, replaced by another process): fetched again, silently.
    Missing,
    /// It is there but not whole: fetched again, with a warning saying why.
    Corrupt(String),
}

/// A segment file of the format before `requests` was in the name (`<lo>_<hi>_<events>.json`):
/// no longer read, so removed when the cache is evicted or cleared.
fn former_segment(name: &str) -> bool {
    name.strip_suffix(".json").is_some_and(|n| {
        let parts: Vec<&str> = n.split('_').collect();
        parts.len() == 3 && parts.iter().all(|p| p.parse::<i64>().is_ok())
    })
}

/// The segment a file name stands for (`<lo>_<hi>_<events>_<requests>.json`).
fn segment_of(path: PathBuf) -> Option<Segment> {
    let name = path.file_name()?.to_str()?.strip_suffix(".json")?;
    let mut parts = name.split('_');
    let lo = parts.next()?.parse().ok()?;
    let hi = parts.next()?.parse().ok()?;
    let events = parts.next()?.parse().ok()?;
    let requests = parts.next()?.parse().ok()?;
    (parts.next().is_none() && lo < hi).then_some(Segment {
        lo,
        hi,
        events,
        requests,
        path,
    })
}

/// The endpoint directory's name of the events of `report` (or of all events): the id exactly
/// as given (the service's API does not say that it matches ids whatever their case), a byte
/// that is not a letter, a digit or `-` written `%XX`.
fn endpoint_dir(report: Option<&str>) -> String {
    let Some(r) = report else {
        return "events".to_string();
    };
    let mut name = String::from("events-");
    for b in r.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' {
            name.push(char::from(b));
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    name
}

/// A file of a carried window's pages: the window `[start, end)` and where it is.
struct CarriedFile {
    start: i64,
    end: i64,
    path: PathBuf,
}

/// The window `(qs, qe)` of a file of carried pages' name (`<qs>_<qe>.pages`).
fn carried_window(name: &str) -> Option<(i64, i64)> {
    let (qs, qe) = name.strip_suffix(".pages")?.split_once('_')?;
    Some((qs.parse().ok()?, qe.parse().ok()?))
}

/// Whether `name` is that of an account's directory (a hash: 32 hexadecimal digits).
fn account_name(name: &str) -> bool {
    name.len() == 32 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The report of an endpoint directory's `name`: `Some(None)` for all events, None for a name
/// the cache does not write.
fn report_of(name: &str) -> Option<Option<String>> {
    if name == "events" {
        return Some(None);
    }
    let r = name.strip_prefix("events-")?;
    (!r.is_empty()
        && r.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'%'))
    .then(|| Some(r.to_string()))
}

/// What a cache file says it holds, in its header: checked against what a read asked for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Header {
    /// The account's name in the cache (a hash).
    account: String,
    /// The endpoint whose answers it holds.
    endpoint: String,
    /// The report, exactly as given; None: all events.
    report: Option<String>,
    /// Start of its range, inclusive, epoch ms.
    start: i64,
    /// End of its range, exclusive, epoch ms.
    end: i64,
    /// How many events (a segment) or pages (carried pages) it holds.
    count: u64,
    /// Length of its body, bytes.
    bytes: u64,
    /// SHA-256 of its body, hexadecimal.
    sha256: String,
}

impl Header {
    /// The header's line: `magic`, the header as JSON, a newline.
    fn line(&self, magic: &str) -> Vec<u8> {
        let mut line = format!("{magic} ").into_bytes();
        // A struct of strings and integers: it serializes.
        line.extend(serde_json::to_vec(self).unwrap_or_default());
        line.push(b'\n');
        line
    }

    /// What in `self` (read from a file) is not what `want` asks, if anything.
    fn differs(&self, want: &Header, what: &str) -> Option<String> {
        let report = |r: &Option<String>| match r {
            Some(r) => format!("report `{}`", crate::text::shown(r)),
            None => "all events".to_string(),
        };
        if self.account != want.account {
            Some(format!("holds another account's {what}"))
        } else if self.endpoint != want.endpoint {
            Some(format!(
                "holds the {what} of another endpoint (`{}`)",
                crate::text::shown(&self.endpoint)
            ))
        } else if self.report != want.report {
            Some(format!(
                "holds the {what} of {}, not of {}",
                report(&self.report),
                report(&want.report)
            ))
        } else if (self.start, self.end) != (want.start, want.end) {
            Some(format!(
                "holds another window's {what} ({} to {})",
                crate::time::format_ms(self.start),
                crate::time::format_ms(self.end)
            ))
        } else if self.count != want.count {
            Some(format!(
                "says it holds {} {what} where its name says {}",
                self.count, want.count
            ))
        } else {
            None
        }
    }
}

/// The header of a cache file's `data` and the offset of its body, once they are checked: it is
/// of `magic`'s format, and its body has the length and checksum its header says. Whether it
/// holds what a read asked is for the caller to check ([`Header::differs`]).
fn check(data: &[u8], magic: &str) -> std::result::Result<(Header, usize), String> {
    let end = data
        .iter()
        .take(HEADER_MAX)
        .position(|b| *b == b'\n')
        .ok_or("has no header")?;
    let line = std::str::from_utf8(&data[..end]).map_err(|_| "has a garbled header")?;
    let Some(json) = line.strip_prefix(magic).and_then(|r| r.strip_prefix(' ')) else {
        let kind = magic.split(' ').next().unwrap_or(magic);
        return Err(if line.starts_with(kind) {
            "is of another version's format".into()
        } else {
            "is not a cache file".into()
        });
    };
    let header: Header = serde_json::from_str(json).map_err(|_| "has a garbled header")?;
    let body = &data[end + 1..];
    if body.len() as u64 != header.bytes {
        return Err(format!(
            "is truncated or padded ({} bytes of {})",
            body.len(),
            header.bytes
        ));
    }
    if sha256_hex(body, 32) != header.sha256 {
        return Err("fails its checksum".into());
    }
    Ok((header, end + 1))
}

impl Cache {
    /// The cache of the account of `base_url`, `api_key` and `client_id` under `root`.
    pub fn new(root: PathBuf, base_url: &str, api_key: &str, client_id: &str, max: u64) -> Cache {
        let mut data = Vec::new();
        for part in [base_url.trim_end_matches('/'), api_key, client_id] {
            data.extend_from_slice(part.as_bytes());
            data.push(0);
        }
        Cache {
            root,
            account: sha256_hex(&data, 16),
            base_url: base_url.trim_end_matches('/').to_string(),
            max_bytes: max,
        }
    }

    /// The cache of the account of `base_url`, `api_key` and `client_id` in the directory
    /// `dir` names (see [`locate`]): refused when that is a file, an existing directory that
    /// is not the user's alone, or one to make under a read-only one. Nothing is written yet.
    pub fn open(
        dir: &Path,
        base_url: &str,
        api_key: &str,
        client_id: &str,
        max: u64,
    ) -> Result<Cache> {
        let root = locate(dir)?;
        check_root(&root)?;
        Ok(Cache::new(root, base_url, api_key, client_id, max))
    }

    /// The directory of the whole cache.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The account's name in the cache (a hash, never a secret).
    pub fn account(&self) -> &str {
        &self.account
    }

    fn dir(&self, report: Option<&str>) -> PathBuf {
        self.root.join(&self.account).join(endpoint_dir(report))
    }

    /// Makes the cache's root, marked, if it is missing: made and marked under a temporary
    /// name beside it, then renamed into place, so that no process ever sees it unmarked (and
    /// takes it for the user's). One that exists unmarked is not the cache's: refused.
    fn own_root(&self) -> std::io::Result<()> {
        if is_marked(&self.root) {
            return Ok(());
        }
        let not_own = || {
            std::io::Error::other(format!(
                "`{}` exists without the cache's `{TAG_FILE}`: the cache writes nothing there",
                self.root.display()
            ))
        };
        if self.root.exists() {
            return Err(not_own());
        }
        let parent = match self.root.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = self.root.file_name().ok_or_else(not_own)?;
        make_private_dirs(parent)?;
        let temp = parent.join(format!(".{}{}", name.to_string_lossy(), temp_name()));
        make_private_dirs(&temp)?;
        let made = write_atomic(&temp.join(TAG_FILE), &[TAG.as_bytes()])
            .and_then(|()| std::fs::rename(&temp, &self.root));
        if made.is_err() {
            let _ = std::fs::remove_file(temp.join(TAG_FILE));
            let _ = std::fs::remove_dir(&temp);
            // Another process made it first.
            if is_marked(&self.root) {
                return Ok(());
            }
        }
        made
    }

    /// The account's directory, made (private, in the marked root) if missing; refused when
    /// it is a link.
    fn account_dir(&self) -> std::io::Result<PathBuf> {
        self.own_root()?;
        make_own_dirs(&self.root, self.root.join(&self.account))
    }

    /// The directory of `report`'s events, made (private, in the marked root) if missing;
    /// refused when it, or the account's, is a link.
    fn private_dirs(&self, report: Option<&str>) -> std::io::Result<PathBuf> {
        self.account_dir()?;
        make_own_dirs(&self.root, self.dir(report))
    }

    /// What a file of `report`'s `[lo, hi)` holding `count` events (or pages) of `body` says.
    fn header(&self, report: Option<&str>, lo: i64, hi: i64, count: u64, body: &[u8]) -> Header {
        Header {
            account: self.account.clone(),
            endpoint: ENDPOINT.to_string(),
            report: report.map(String::from),
            start: lo,
            end: hi,
            count,
            bytes: body.len() as u64,
            sha256: sha256_hex(body, 32),
        }
    }

    /// The segments held of `report`'s events (or all events), by start.
    pub fn segments(&self, report: Option<&str>) -> Vec<Segment> {
        let Some(entries) = read_own_dir(&self.root, &self.dir(report)) else {
            return Vec::new();
        };
        let mut out: Vec<Segment> = entries.filter_map(|e| segment_of(e.ok()?.path())).collect();
        out.sort_by_key(|s| (s.lo, std::cmp::Reverse(s.hi)));
        out
    }

    /// `[start, end)` as pieces in time order: each part a segment covers (the one that reaches
    /// furthest), and the gaps between.
    pub fn cover(&self, report: Option<&str>, start: i64, end: i64) -> Vec<Piece> {
        let segments: Vec<Segment> = self
            .segments(report)
            .into_iter()
            .filter(|s| s.hi > start && s.lo < end)
            .collect();
        let mut pieces = Vec::new();
        let mut at = start;
        while at < end {
            let best = segments
                .iter()
                .filter(|s| s.lo <= at && s.hi > at)
                .max_by_key(|s| s.hi);
            if let Some(s) = best {
                let to = s.hi.min(end);
                pieces.push(Piece::Held(s.clone(), at, to));
                at = to;
            } else {
                let to = segments
                    .iter()
                    .filter(|s| s.lo > at)
                    .map(|s| s.lo)
                    .min()
                    .unwrap_or(end)
                    .min(end);
                pieces.push(Piece::Gap(at, to));
                at = to;
            }
        }
        pieces
    }

    /// The JSON array of the events of `report`'s segment, once its header says it holds them
    /// (this account's, this endpoint's, this report's, its range and count) and its body's
    /// length and checksum hold; its file is touched (the cap evicts the least recently used).
    pub fn read(
        &self,
        report: Option<&str>,
        segment: &Segment,
    ) -> std::result::Result<Bytes, Damage> {
        let data = match std::fs::read(&segment.path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Damage::Missing),
            Err(e) => return Err(Damage::Corrupt(format!("cannot be read ({e})"))),
        };
        let (header, body) = check(&data, MAGIC).map_err(Damage::Corrupt)?;
        let want = self.header(report, segment.lo, segment.hi, segment.events, &[]);
        if let Some(why) = header.differs(&want, "events") {
            return Err(Damage::Corrupt(why));
        }
        if let Ok(f) = std::fs::File::options().write(true).open(&segment.path) {
            let _ = f.set_modified(SystemTime::now());
        }
        Ok(Bytes::from(data).slice(body..))
    }

    /// Removes a segment's file (a damaged one, or one a refresh replaces).
    pub fn remove(&self, segment: &Segment) {
        let _ = std::fs::remove_file(&segment.path);
    }

    /// Keeps the events of `[lo, hi)`, whose JSON texts are `texts` (sorted by (startTime,
    /// id)), for `report`'s events, with the `requests` their fetch spent.
    pub fn write<'a>(
        &self,
        report: Option<&str>,
        lo: i64,
        hi: i64,
        requests: u64,
        texts: impl Iterator<Item = &'a str>,
    ) -> std::io::Result<()> {
        let mut body = Vec::with_capacity(4096);
        body.push(b'[');
        let mut events = 0u64;
        for t in texts {
            if events > 0 {
                body.push(b',');
            }
            body.extend_from_slice(t.as_bytes());
            events += 1;
        }
        body.push(b']');
        let dir = self.private_dirs(report)?;
        let marker = self.root.join(&self.account).join(ACCOUNT_FILE);
        if !marker.exists() {
            let about = serde_json::json!({ "base_url": self.base_url }).to_string();
            write_atomic(&marker, &[about.as_bytes()])?;
        }
        let header = self.header(report, lo, hi, events, &body).line(MAGIC);
        let path = dir.join(format!("{lo}_{hi}_{events}_{requests}.json"));
        write_atomic(&path, &[&header, &body])
    }

    /// What the account's fetches found of the service's events (see [`Seen`]), if any was
    /// kept; a file that does not read as one gives None (and is written again when a fetch
    /// finds something).
    pub fn seen(&self) -> Option<Seen> {
        let path = self.root.join(&self.account).join(SEEN_FILE);
        refuse_links(&self.root, &path).ok()?;
        let data = std::fs::read(path).ok()?;
        let mut seen: Seen = serde_json::from_slice(&data).ok()?;
        seen.density.retain(|(_, d)| d.is_finite() && *d > 0.0);
        Some(seen)
    }

    /// Keeps `seen` with what the account's file already holds (another process may have
    /// written it since it was read): both's flags, the denser of each density. Answers what
    /// the file now holds.
    pub fn keep_seen(&self, seen: Seen) -> std::io::Result<Seen> {
        let all = seen.merged(self.seen().unwrap_or_default());
        let account = self.account_dir()?;
        let text = serde_json::to_vec(&all).map_err(std::io::Error::other)?;
        write_atomic(&account.join(SEEN_FILE), &[&text])?;
        Ok(all)
    }

    /// Keeps the pages that a fetch stopped early read of the windows it did not finish, from
    /// `start` to `end`, as the blob `data` of `events::carry` (which checks whose they are
    /// when it is read), so that the next fetch from `start` asks none of them again. One
    /// file, `<start>_<end>.pages`.
    pub fn carry(
        &self,
        report: Option<&str>,
        start: i64,
        end: i64,
        data: &[u8],
    ) -> std::io::Result<()> {
        let dir = self.private_dirs(report)?;
        write_atomic(&dir.join(format!("{start}_{end}.pages")), &[data])
    }

    /// The carried windows of `report` (see [`Cache::carry`]).
    fn carried(&self, report: Option<&str>) -> Vec<CarriedFile> {
        let Some(entries) = read_own_dir(&self.root, &self.dir(report)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let path = e.path();
                let (start, end) = carried_window(path.file_name()?.to_str()?)?;
                Some(CarriedFile { start, end, path })
            })
            .collect()
    }

    /// Takes the pages of `report`'s events carried from `start` (see [`Cache::carry`]): the
    /// end of their span and the blob. Every file of pages carried from `start` is removed
    /// (the fetch that takes them reads that range).
    pub fn take_carried(&self, report: Option<&str>, start: i64) -> Option<(i64, Vec<u8>)> {
        let mut found = None;
        for c in self.carried(report) {
            if c.start != start {
                continue;
            }
            if found.is_none() {
                found = std::fs::read(&c.path).ok().map(|data| (c.end, data));
            }
            let _ = std::fs::remove_file(&c.path);
        }
        found
    }

    /// Removes every segment of `report` that overlaps `[lo, hi)` (a refresh of that range).
    pub fn forget(&self, report: Option<&str>, lo: i64, hi: i64) {
        for s in self.segments(report) {
            if s.hi > lo && s.lo < hi {
                self.remove(&s);
            }
        }
    }

    /// Evicts the least recently used segments and carried pages of the whole cache (every
    /// account's) until it fits its cap, temporary files that a dead writer left, and segments
    /// of the former naming: only in the directories the cache writes, of a marked root.
    pub fn evict(&self) {
        if !is_marked(&self.root) {
            return;
        }
        let mut files = Vec::new();
        let own = accounts(&self.root)
            .into_iter()
            .flat_map(|(account, endpoints)| {
                std::iter::once(account).chain(endpoints.into_iter().map(|(dir, _)| dir))
            });
        for dir in own {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                let path = entry.path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                if !meta.is_file() {
                    continue;
                } else if name.starts_with(".tmp-") {
                    if used.elapsed().is_ok_and(|age| age > STALE_TEMP) {
                        let _ = std::fs::remove_file(&path);
                    }
                } else if former_segment(name) {
                    let _ = std::fs::remove_file(&path);
                } else if segment_of(path.clone()).is_some() || carried_window(name).is_some() {
                    files.push((used, meta.len(), path));
                }
            }
        }
        let mut total: u64 = files.iter().map(|(_, n, _)| n).sum();
        if total <= self.max_bytes {
            return;
        }
        files.sort();
        for (_, n, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total = total.saturating_sub(n);
            }
        }
    }
}

#[cfg(test)]
mod tests;
