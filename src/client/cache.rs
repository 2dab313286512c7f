//! The cache of settled events on disk: one file per window whose every page was read, under a
//! private directory per account (a hash of the base URL, the API key and the client id, never
//! a secret) and endpoint, named by its range; atomic writes, checksummed reads, an LRU cap.
//!
//! A file is `svcache 1 <events> <bytes> <sha256>\n` and then a JSON array of the window's
//! events in `[lo, hi)`, sorted by (startTime, id), as the service sent them. Its name is
//! `<lo>_<hi>_<events>_<requests>.json` (epoch milliseconds; `requests`: those its fetch spent,
//! see [`Segment::requests`]): listing a directory is the index, so two
//! processes that fill one cache never share a file they both write. A file is written under a
//! unique temporary name and renamed into place, so no reader sees half of one; a file whose
//! length or checksum is wrong is reported, removed and fetched again, never served. Reading a
//! file touches its modification time, which the size cap evicts by (least recently used first).
//!
//! Beside the segments, `<qs>_<qe>.pages` files keep the pages that a fetch stopped by the
//! daily quota read of a window it could not finish (see [`Cache::carry`]), for the next
//! fetch of that window (a sync's next run) to take instead of asking them again.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

/// The default cap of a cache directory's size, bytes (2 GiB).
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;
/// The first word of every cache file (and its format's version after it).
const MAGIC: &str = "svcache 1";
/// A temporary file older than this was left by a writer that died: removed by eviction.
const STALE_TEMP: Duration = Duration::from_secs(3600);
/// The name of the file of an account's directory that says whose it is (no secret in it).
const ACCOUNT_FILE: &str = "account.json";
/// The first word of a file of carried pages (and its format's version after it).
const CARRY_MAGIC: &str = "svpages 1";
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

/// The user's cache directory (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on
/// macOS, `%LOCALAPPDATA%` on Windows), None when the environment names none.
pub fn user_cache_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let var = |name: &str| {
        env(name)
            .filter(|v| !v.trim().is_empty())
            .map(PathBuf::from)
    };
    if cfg!(windows) {
        var("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        var("HOME").map(|h| h.join("Library").join("Caches"))
    } else {
        var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))
    }
}

/// The default directory of the events cache: `surveillance/events` under the user's cache
/// directory.
pub fn default_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    user_cache_dir(env).map(|c| c.join("surveillance").join("events"))
}

fn sha256_hex(data: &[u8], bytes: usize) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, data);
    digest.as_ref()[..bytes.min(32)]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Creates `dir` and its parents, private to the user (0700 on Unix).
fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// A name no other writer uses: the process, the time and a counter.
fn temp_name() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(".tmp-{}-{t:x}-{n}", std::process::id())
}

/// Writes `data` to `path` atomically: a unique temporary name in the same directory, then a
/// rename over it.
fn write_atomic(path: &Path, data: &[&[u8]]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = dir.join(temp_name());
    let written = (|| {
        let mut f = std::fs::File::create(&temp)?;
        for part in data {
            f.write_all(part)?;
        }
        f.sync_data()?;
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
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

/// The endpoint directory's name of the events of `report` (or of all events).
fn endpoint_dir(report: Option<&str>) -> String {
    match report {
        Some(r) => format!("events-{}", r.to_ascii_lowercase()),
        None => "events".to_string(),
    }
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

    /// The directory of `report`'s events, made (private, as the cache's root) if missing.
    fn private_dirs(&self, report: Option<&str>) -> std::io::Result<PathBuf> {
        let dir = self.dir(report);
        private_dir(&self.root)?;
        private_dir(&dir)?;
        Ok(dir)
    }

    /// The segments held of `report`'s events (or all events), by start.
    pub fn segments(&self, report: Option<&str>) -> Vec<Segment> {
        let Ok(entries) = std::fs::read_dir(self.dir(report)) else {
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

    /// The JSON array of a segment's events, checked against its header; its file is touched
    /// (the cap evicts the least recently used).
    pub fn read(&self, segment: &Segment) -> std::result::Result<Bytes, Damage> {
        let data = match std::fs::read(&segment.path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Damage::Missing),
            Err(e) => return Err(Damage::Corrupt(format!("cannot be read ({e})"))),
        };
        let body = check(&data).map_err(Damage::Corrupt)?;
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
        let account = self.root.join(&self.account);
        let dir = self.private_dirs(report)?;
        let marker = account.join(ACCOUNT_FILE);
        if !marker.exists() {
            let about = serde_json::json!({ "base_url": self.base_url }).to_string();
            write_atomic(&marker, &[about.as_bytes()])?;
        }
        let header = format!(
            "{MAGIC} {events} {} {}\n",
            body.len(),
            sha256_hex(&body, 32)
        );
        let path = dir.join(format!("{lo}_{hi}_{events}_{requests}.json"));
        write_atomic(&path, &[header.as_bytes(), &body])
    }

    /// What the account's fetches found of the service's events (see [`Seen`]), if any was
    /// kept; a file that does not read as one gives None (and is written again when a fetch
    /// finds something).
    pub fn seen(&self) -> Option<Seen> {
        let data = std::fs::read(self.root.join(&self.account).join(SEEN_FILE)).ok()?;
        let mut seen: Seen = serde_json::from_slice(&data).ok()?;
        seen.density.retain(|(_, d)| d.is_finite() && *d > 0.0);
        Some(seen)
    }

    /// Keeps `seen` with what the account's file already holds (another process may have
    /// written it since it was read): both's flags, the denser of each density. Answers what
    /// the file now holds.
    pub fn keep_seen(&self, seen: Seen) -> std::io::Result<Seen> {
        let all = seen.merged(self.seen().unwrap_or_default());
        let account = self.root.join(&self.account);
        private_dir(&self.root)?;
        private_dir(&account)?;
        let text = serde_json::to_vec(&all).map_err(std::io::Error::other)?;
        write_atomic(&account.join(SEEN_FILE), &[&text])?;
        Ok(all)
    }

    /// Keeps the pages that a fetch stopped by the daily quota read of a window it did not
    /// finish, the query `[qs, qe)` (settled), so that the next fetch of that query asks none
    /// of them again: `pages` are `(offset, body)`. One file, `<qs>_<qe>.pages`: the header
    /// `svpages 1 <pages> <bytes> <sha256>\n`, then each page as `<offset> <length>\n` and
    /// its body.
    pub fn carry(
        &self,
        report: Option<&str>,
        qs: i64,
        qe: i64,
        pages: &[(usize, &Bytes)],
    ) -> std::io::Result<()> {
        let mut body = Vec::new();
        for (offset, page) in pages {
            body.extend_from_slice(format!("{offset} {}\n", page.len()).as_bytes());
            body.extend_from_slice(page);
        }
        let header = format!(
            "{CARRY_MAGIC} {} {} {}\n",
            pages.len(),
            body.len(),
            sha256_hex(&body, 32)
        );
        let dir = self.private_dirs(report)?;
        write_atomic(
            &dir.join(format!("{qs}_{qe}.pages")),
            &[header.as_bytes(), &body],
        )
    }

    /// The carried windows of `report` (see [`Cache::carry`]): `(qs, qe, file)`.
    fn carried(&self, report: Option<&str>) -> Vec<(i64, i64, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(self.dir(report)) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| {
                let path = e.path();
                let name = path.file_name()?.to_str()?.strip_suffix(".pages")?;
                let (qs, qe) = name.split_once('_')?;
                Some((qs.parse().ok()?, qe.parse().ok()?, path))
            })
            .collect()
    }

    /// The end of the carried window of `report` that starts at `lo`, if one is kept.
    pub fn carried_end(&self, report: Option<&str>, lo: i64) -> Option<i64> {
        self.carried(report)
            .into_iter()
            .filter(|(qs, _, _)| *qs == lo)
            .map(|(_, qe, _)| qe)
            .min()
    }

    /// Takes the carried window of `report` that starts at `lo` and ends by `hi`: its end and
    /// its pages `(offset, body)`. Its file is removed, and so is every other carried window
    /// that starts in `[lo, hi)` (this fetch reads that range: none will be asked again). A
    /// damaged file gives nothing.
    pub fn take_carried(
        &self,
        report: Option<&str>,
        lo: i64,
        hi: i64,
    ) -> Option<(i64, Vec<(usize, Bytes)>)> {
        let mut found = None;
        for (qs, qe, path) in self.carried(report) {
            if qs < lo || qs >= hi {
                continue;
            }
            if qs == lo && qe <= hi && found.is_none() {
                found = std::fs::read(&path)
                    .ok()
                    .and_then(|data| Some((qe, read_carried(data)?)));
            }
            let _ = std::fs::remove_file(&path);
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

    /// Evicts the least recently used segments and carried pages of the whole directory until
    /// it fits its cap, temporary files that a dead writer left, and segments of the former
    /// naming.
    pub fn evict(&self) {
        let mut files = Vec::new();
        walk(&self.root, &mut |path, meta| {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            if name.starts_with(".tmp-") {
                if used.elapsed().is_ok_and(|age| age > STALE_TEMP) {
                    let _ = std::fs::remove_file(path);
                }
            } else if former_segment(name) {
                let _ = std::fs::remove_file(path);
            } else if segment_of(path.to_path_buf()).is_some() || name.ends_with(".pages") {
                files.push((used, meta.len(), path.to_path_buf()));
            }
        });
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

/// The pages of a file of carried pages, if its header, length and checksum hold.
fn read_carried(data: Vec<u8>) -> Option<Vec<(usize, Bytes)>> {
    let line = data.iter().position(|b| *b == b'\n')?;
    let header = std::str::from_utf8(&data[..line]).ok()?.to_owned();
    let rest = header.strip_prefix(CARRY_MAGIC)?;
    let mut words = rest.split_whitespace();
    let count: usize = words.next()?.parse().ok()?;
    let len: usize = words.next()?.parse().ok()?;
    let sum = words.next()?;
    let body = Bytes::from(data).slice(line + 1..);
    if body.len() != len || sha256_hex(&body, 32) != sum {
        return None;
    }
    let mut pages = Vec::with_capacity(count);
    let mut at = 0;
    while at < body.len() {
        let end = at + body[at..].iter().position(|b| *b == b'\n')?;
        let (offset, size) = std::str::from_utf8(&body[at..end]).ok()?.split_once(' ')?;
        let (offset, size): (usize, usize) = (offset.parse().ok()?, size.parse().ok()?);
        let page = body.get(end + 1..end + 1 + size)?;
        pages.push((offset, body.slice_ref(page)));
        at = end + 1 + size;
    }
    (pages.len() == count).then_some(pages)
}

/// The offset of the body of a cache file's `data`, once its header is checked.
fn check(data: &[u8]) -> std::result::Result<usize, String> {
    let end = data
        .iter()
        .take(200)
        .position(|b| *b == b'\n')
        .ok_or("has no header")?;
    let header = std::str::from_utf8(&data[..end]).map_err(|_| "has a garbled header")?;
    let rest = header.strip_prefix(MAGIC).ok_or("is not a cache file")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let [_, len, sum] = fields[..] else {
        return Err("has a garbled header".into());
    };
    let len: usize = len.parse().map_err(|_| "has a garbled header")?;
    let body = &data[end + 1..];
    if body.len() != len {
        return Err(format!(
            "is truncated or padded ({} bytes of {len})",
            body.len()
        ));
    }
    if sha256_hex(body, 32) != sum {
        return Err("fails its checksum".into());
    }
    Ok(end + 1)
}

/// Calls `f` with every file under `dir`, recursively.
fn walk(dir: &Path, f: &mut dyn FnMut(&Path, &std::fs::Metadata)) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            walk(&path, f);
        } else {
            f(&path, &meta);
        }
    }
}

/// What a cache directory holds, for `cache_info()` and `surveillance cache info`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Info {
    /// The directory.
    pub path: String,
    /// Bytes of its files.
    pub bytes: u64,
    /// Its files of events.
    pub files: u64,
    /// What each account holds of each endpoint.
    pub entries: Vec<Entry>,
}

/// What a cache holds of one account and endpoint.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Entry {
    /// The account's name in the cache (a hash of its base URL and credentials).
    pub account: String,
    /// Its base URL, when known.
    pub base_url: Option<String>,
    /// The endpoint (`GET /v2/events`).
    pub endpoint: String,
    /// The report, or None for all events.
    pub report_id: Option<String>,
    /// The ranges held, merged, epoch ms `[lo, hi)`.
    pub ranges: Vec<(i64, i64)>,
    /// Events held.
    pub events: u64,
    /// The requests the reads that filled its files spent on them (see
    /// [`Segment::requests`]): what it saves each time it is served whole.
    pub requests: u64,
    /// Bytes of its files.
    pub bytes: u64,
    /// Its files.
    pub files: u64,
}

/// What the cache at `root` holds.
pub fn info(root: &Path) -> Info {
    let mut info = Info {
        path: root.display().to_string(),
        ..Info::default()
    };
    let Ok(accounts) = std::fs::read_dir(root) else {
        return info;
    };
    let mut accounts: Vec<PathBuf> = accounts.flatten().map(|e| e.path()).collect();
    accounts.sort();
    for account in accounts.into_iter().filter(|p| p.is_dir()) {
        let base_url = std::fs::read(account.join(ACCOUNT_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v.get("base_url")?.as_str().map(String::from));
        let Ok(endpoints) = std::fs::read_dir(&account) else {
            continue;
        };
        let mut endpoints: Vec<PathBuf> = endpoints.flatten().map(|e| e.path()).collect();
        endpoints.sort();
        for dir in endpoints.into_iter().filter(|p| p.is_dir()) {
            let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let report_id = match name {
                "events" => None,
                n => match n.strip_prefix("events-") {
                    Some(r) => Some(r.to_string()),
                    None => continue,
                },
            };
            let mut entry = Entry {
                account: account
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("")
                    .to_string(),
                base_url: base_url.clone(),
                endpoint: "GET /v2/events".into(),
                report_id,
                ..Entry::default()
            };
            let mut segments: Vec<(Segment, u64)> = std::fs::read_dir(&dir)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| {
                    let len = e.metadata().ok()?.len();
                    Some((segment_of(e.path())?, len))
                })
                .collect();
            segments.sort_by_key(|(s, _)| (s.lo, s.hi));
            for (s, len) in segments {
                entry.events += s.events;
                entry.requests += s.requests;
                entry.bytes += len;
                entry.files += 1;
                match entry.ranges.last_mut() {
                    Some(last) if s.lo <= last.1 => last.1 = last.1.max(s.hi),
                    _ => entry.ranges.push((s.lo, s.hi)),
                }
            }
            if entry.files > 0 {
                info.bytes += entry.bytes;
                info.files += entry.files;
                info.entries.push(entry);
            }
        }
    }
    info
}

/// Removes every file of the cache at `root` (only the cache's own: its accounts' segments,
/// carried pages, `account.json` and `shape.json`, temporary files, and the directories they
/// empty); the number of segments removed.
pub fn clear(root: &Path) -> u64 {
    let mut removed = 0;
    let Ok(accounts) = std::fs::read_dir(root) else {
        return 0;
    };
    for account in accounts.flatten().map(|e| e.path()).filter(|p| p.is_dir()) {
        let Ok(endpoints) = std::fs::read_dir(&account) else {
            continue;
        };
        for dir in endpoints.flatten().map(|e| e.path()).filter(|p| p.is_dir()) {
            for file in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = file.path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if name.starts_with(".tmp-") || name.ends_with(".pages") || former_segment(name) {
                    let _ = std::fs::remove_file(&path);
                } else if segment_of(path.clone()).is_some() && std::fs::remove_file(&path).is_ok()
                {
                    removed += 1;
                }
            }
            let _ = std::fs::remove_dir(&dir);
        }
        let _ = std::fs::remove_file(account.join(ACCOUNT_FILE));
        let _ = std::fs::remove_file(account.join(SEEN_FILE));
        let _ = std::fs::remove_dir(&account);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_root(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "surveillance-cache-test-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// The cache under `root` of the test service's account of `key`.
    fn account(root: &Path, key: &str) -> Cache {
        Cache::new(
            root.to_path_buf(),
            "https://a.test",
            key,
            "id",
            DEFAULT_MAX_BYTES,
        )
    }

    #[test]
    fn segments_of_the_former_naming_are_removed() {
        let root = temp_root("former");
        let c = account(&root, "k");
        c.write(None, 10, 20, 1, ["{}"].into_iter())
            .expect("written");
        let former = c.dir(None).join("10_20_1.json");
        std::fs::write(&former, b"svcache 1 1 4 x\n[{}]").expect("written");
        assert!(former_segment("10_20_1.json") && !former_segment("10_20_1_1.json"));
        assert!(!former_segment("account.json") && !former_segment("a_b_c.json"));
        c.evict();
        assert!(!former.exists());
        assert_eq!(c.segments(None).len(), 1);
        std::fs::write(&former, b"").expect("written");
        assert_eq!(clear(&root), 1);
        assert!(!former.exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn carried_pages_are_taken_once_and_a_damaged_file_gives_none() {
        let root = temp_root("carry");
        let c = account(&root, "k");
        let (a, b) = (Bytes::from_static(b"[1,\n2]"), Bytes::from_static(b"[]"));
        c.carry(None, 10, 50, &[(0, &a), (9_900, &b)])
            .expect("written");
        c.carry(None, 30, 40, &[(0, &a)]).expect("written");
        assert_eq!(c.carried_end(None, 10), Some(50));
        assert_eq!(c.carried_end(Some("r"), 10), None);
        // Ending past the range asked: not taken.
        assert_eq!(c.take_carried(None, 10, 45), None);
        c.carry(None, 10, 50, &[(0, &a), (9_900, &b)])
            .expect("written");
        assert_eq!(
            c.take_carried(None, 10, 50),
            Some((50, vec![(0, a.clone()), (9_900, b.clone())]))
        );
        // Taken once; the other window in the range read is gone too.
        assert_eq!(c.carried_end(None, 10), None);
        assert_eq!(c.carried_end(None, 30), None);
        c.carry(None, 10, 50, &[(0, &a)]).expect("written");
        let file = c.dir(None).join("10_50.pages");
        let mut data = std::fs::read(&file).expect("read");
        let last = data.len() - 2;
        data[last] = b'9';
        std::fs::write(&file, data).expect("write");
        assert_eq!(c.take_carried(None, 10, 50), None);
        assert!(!file.exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_segment_round_trips_and_a_damaged_one_is_refused() {
        let root = temp_root("round");
        let c = Cache::new(
            root.clone(),
            "https://a.test",
            "key-1",
            "id",
            DEFAULT_MAX_BYTES,
        );
        c.write(
            None,
            10,
            20,
            3,
            ["{\"id\":\"a\"}", "{\"id\":\"b\"}"].into_iter(),
        )
        .expect("written");
        let segs = c.segments(None);
        assert_eq!(segs.len(), 1);
        assert_eq!(
            (segs[0].lo, segs[0].hi, segs[0].events, segs[0].requests),
            (10, 20, 2, 3)
        );
        assert_eq!(info(&root).entries[0].requests, 3);
        let body = c.read(&segs[0]).expect("read");
        assert_eq!(&body[..], b"[{\"id\":\"a\"},{\"id\":\"b\"}]");
        let data = std::fs::read(&segs[0].path).expect("file");
        std::fs::write(&segs[0].path, &data[..data.len() - 3]).expect("truncated");
        assert!(matches!(c.read(&segs[0]), Err(Damage::Corrupt(_))));
        c.remove(&segs[0]);
        assert!(matches!(c.read(&segs[0]), Err(Damage::Missing)));
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_range_is_covered_by_segments_and_gaps() {
        let root = temp_root("cover");
        let c = account(&root, "k");
        for (lo, hi) in [(10, 20), (15, 30), (40, 50)] {
            c.write(None, lo, hi, 1, std::iter::empty())
                .expect("written");
        }
        let kinds: Vec<(bool, i64, i64)> = c
            .cover(None, 0, 45)
            .into_iter()
            .map(|p| match p {
                Piece::Held(_, a, b) => (true, a, b),
                Piece::Gap(a, b) => (false, a, b),
            })
            .collect();
        assert_eq!(
            kinds,
            [
                (false, 0, 10),
                (true, 10, 20),
                (true, 20, 30),
                (false, 30, 40),
                (true, 40, 45)
            ]
        );
        let other = account(&root, "k2");
        assert!(other.segments(None).is_empty());
        assert_ne!(other.account(), c.account());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn what_fetches_found_is_kept_merged_with_the_file_and_cleared_with_the_cache() {
        let root = temp_root("seen");
        let c = account(&root, "k");
        assert_eq!(c.seen(), None);
        let one = Seen {
            unsorted: false,
            unpeekable: true,
            density: vec![(None, 0.5), (Some("r".into()), 0.25)],
        };
        assert_eq!(c.keep_seen(one.clone()).expect("kept"), one);
        assert_eq!(c.seen(), Some(one.clone()));
        // Another process's finding is merged with the file's, never lost.
        let two = Seen {
            unsorted: true,
            unpeekable: false,
            density: vec![(None, 0.4), (Some("s".into()), 1.0)],
        };
        let all = c.keep_seen(two).expect("kept");
        assert!(all.unsorted && all.unpeekable);
        assert_eq!(all.density_of(None), Some(0.5));
        assert_eq!(all.density_of(Some("r")), Some(0.25));
        assert_eq!(all.density_of(Some("s")), Some(1.0));
        assert_eq!(c.seen().as_ref(), Some(&all));
        // Only a flag or a density the file lacks, or one 10% denser, is worth a write.
        let mut denser = all.clone();
        denser.density[0].1 = 0.54;
        assert!(!denser.tells_more_than(&all));
        denser.density[0].1 = 0.6;
        assert!(denser.tells_more_than(&all));
        assert!(!Seen::default().tells_more_than(&all));
        // Another account's is its own; a damaged file tells nothing.
        let other = account(&root, "k2");
        assert_eq!(other.seen(), None);
        std::fs::write(root.join(c.account()).join(SEEN_FILE), b"{\"unsorted\": 3").expect("w");
        assert_eq!(c.seen(), None);
        c.keep_seen(one.clone()).expect("kept");
        assert_eq!(c.seen(), Some(one));
        clear(&root);
        assert_eq!(c.seen(), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_cap_evicts_the_least_recently_used_and_no_secret_is_written() {
        let root = temp_root("cap");
        let c = Cache::new(
            root.clone(),
            "https://a.test",
            "sekrit-key",
            "sekrit-id",
            600,
        );
        let text = format!("{{\"x\":\"{}\"}}", "y".repeat(150));
        for lo in 0..3 {
            c.write(None, lo * 10, lo * 10 + 10, 1, [text.as_str()].into_iter())
                .expect("written");
            std::thread::sleep(Duration::from_millis(20));
        }
        let first = c.segments(None).remove(0);
        c.read(&first).expect("read");
        c.evict();
        let left: Vec<i64> = c.segments(None).iter().map(|s| s.lo).collect();
        assert_eq!(left, [0, 20]);
        let mut seen = String::new();
        walk(&root, &mut |p, _| {
            seen.push_str(&p.display().to_string());
            seen.push_str(&String::from_utf8_lossy(
                &std::fs::read(p).unwrap_or_default(),
            ));
        });
        assert!(!seen.contains("sekrit"), "{seen}");
        assert_eq!(info(&root).files, 2);
        assert_eq!(clear(&root), 2);
        assert_eq!(info(&root).files, 0);
        let _ = std::fs::remove_dir_all(&root);
    }
}
