//! The cache of settled events on disk: one file per window whose every page was read, under a
//! private directory per account (a hash of the base URL, the API key and the client id, never
//! a secret) and endpoint, named by its range; atomic writes, checked reads, an LRU cap.
//!
//! The cache touches only what is its own. Its root holds a `CACHEDIR.TAG` of surveillance (the
//! convention backup tools honour): a directory the cache creates is marked so, and an existing
//! directory without the mark is never written, chmod-ed or cleared: the cache makes its own
//! marked folder, [`OWN_DIR`], inside it (see [`locate`]). Every directory the cache creates is
//! 0700 and every file 0600, whatever the umask; a root that is not private is refused.
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
//! Beside the segments, `<qs>_<qe>.pages` files keep the pages that a fetch stopped by the
//! daily quota read of a window it could not finish (see [`Cache::carry`]), for the next
//! fetch of that window (a sync's next run) to take instead of asking them again.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::error::{Error, Result};

/// The default cap of a cache directory's size, bytes (2 GiB).
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;
/// The first word of every cache file, and its format's version after it.
const MAGIC: &str = "svcache 2";
/// The first word of a file of carried pages, and its format's version after it.
const CARRY_MAGIC: &str = "svpages 2";
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

/// Carried pages: `(offset, body)` each.
pub type Pages = Vec<(usize, Bytes)>;

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

/// Gives `path`, which the cache made, `mode` (on Unix): a mode given at creation loses the
/// bits of the umask, and the cache's are the same whatever the umask.
fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

/// Creates `dir` and whichever of its parents are missing, each private to the user (0700 on
/// Unix, whatever the umask). A directory that exists is left as it is, its mode too: the
/// cache never changes what it did not make. Whether `dir` itself was made.
pub(crate) fn make_private_dirs(dir: &Path) -> std::io::Result<bool> {
    let mut missing = Vec::new();
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => {
                return Err(std::io::Error::other(format!(
                    "`{}` is a file, not a directory",
                    at.display()
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing.push(at),
            Err(e) => return Err(e),
        }
        match at.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => at = parent,
            _ => break,
        }
    }
    let mut made = false;
    for d in missing.into_iter().rev() {
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            builder.mode(0o700);
        }
        made = match builder.create(d) {
            Ok(()) => {
                set_mode(d, 0o700)?;
                true
            }
            // Made by another process meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => false,
            Err(e) => return Err(e),
        };
    }
    Ok(made)
}

/// The effective user of the process (Unix).
#[cfg(unix)]
fn effective_uid() -> u32 {
    // SAFETY: geteuid takes nothing, cannot fail and touches no memory of the caller.
    unsafe { libc::geteuid() }
}

/// Whether the directory of `meta` is the user's alone: owned by the process's user, and
/// neither readable nor writable by anyone else (always, off Unix).
fn private_to_user(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.uid() == effective_uid() && meta.mode() & 0o077 == 0
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        true
    }
}

/// Whether the directory of `meta` says by its mode that it is not to be written: no one may
/// write it, or its owner, the process's user, may not (Unix; root writes anywhere, so the
/// mode is what tells).
fn read_only(meta: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let mode = meta.mode();
        mode & 0o222 == 0 || (meta.uid() == effective_uid() && mode & 0o200 == 0)
    }
    #[cfg(not(unix))]
    {
        meta.permissions().readonly()
    }
}

/// The permission bits of `meta`, for messages.
fn mode_of(meta: &std::fs::Metadata) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        format!("mode {:04o}", meta.mode() & 0o7777)
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        "read-only".to_string()
    }
}

/// Whether `dir` holds the cache's mark: a `CACHEDIR.TAG` that the cache wrote (another
/// program's tag does not make a directory the cache's).
pub fn is_marked(dir: &Path) -> bool {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(dir.join(TAG_FILE)) else {
        return false;
    };
    let mut head = Vec::with_capacity(TAG.len());
    if file.take(512).read_to_end(&mut head).is_err() {
        return false;
    }
    let head = String::from_utf8_lossy(&head);
    head.starts_with(&TAG[..TAG.find('\n').unwrap_or(TAG.len())]) && head.contains(TAG_OWNER)
}

fn not_a_directory(path: &Path) -> Error {
    Error::Config(format!(
        "the cache directory `{}` is a file, not a directory: name a directory",
        path.display()
    ))
}

/// The root of the cache that `dir` names: `dir` itself when it is missing (the cache makes it,
/// and marks it) or holds the cache's mark, else the cache's own folder [`OWN_DIR`] inside it
/// (an existing directory without the mark is the user's: the cache writes nothing else there).
/// A file is refused.
pub fn locate(dir: &Path) -> Result<PathBuf> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(not_a_directory(dir)),
        Ok(_) if is_marked(dir) => Ok(dir.to_path_buf()),
        Ok(_) => {
            let own = dir.join(OWN_DIR);
            match std::fs::metadata(&own) {
                Ok(m) if !m.is_dir() => Err(not_a_directory(&own)),
                _ => Ok(own),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(dir.to_path_buf()),
        Err(e) => Err(Error::Config(format!(
            "the cache directory `{}` cannot be read ({e})",
            dir.display()
        ))),
    }
}

/// Checks that the cache may use `root` (as [`locate`] gives it): an existing one holds the
/// cache's mark and is the user's alone; a missing one can be made where its nearest existing
/// parent is not read-only.
fn check_root(root: &Path) -> Result<()> {
    match std::fs::metadata(root) {
        Ok(m) if !m.is_dir() => return Err(not_a_directory(root)),
        Ok(_) if !is_marked(root) => {
            return Err(Error::Config(format!(
                "`{}` exists without the cache's `{TAG_FILE}`, so it is not the cache's: the \
                 cache writes nothing there; remove it, or name another directory",
                root.display()
            )))
        }
        Ok(m) if !private_to_user(&m) => {
            return Err(Error::Config(format!(
                "the cache directory `{}` is not private to the user ({}, or another user's): \
                 the cache keeps events only where no one else can read or write them; make it \
                 so (`chmod 700`), or name another directory",
                root.display(),
                mode_of(&m)
            )))
        }
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(Error::Config(format!(
                "the cache directory `{}` cannot be read ({e})",
                root.display()
            )))
        }
    }
    let mut at = root.parent();
    while let Some(dir) = at.filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(m) = std::fs::metadata(dir) {
            if m.is_dir() && read_only(&m) {
                return Err(Error::Config(format!(
                    "the cache directory `{}` cannot be made: `{}` is read-only ({}), and the \
                     cache writes nothing there; name a writable directory, or turn the cache \
                     off (`cache=False`, `SURVEILLANCE_CACHE=0`)",
                    root.display(),
                    dir.display(),
                    mode_of(&m)
                )));
            }
            break;
        }
        at = dir.parent();
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
/// rename over it. The file is private to the user (0600 on Unix, whatever the umask).
fn write_atomic(path: &Path, data: &[&[u8]]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = dir.join(temp_name());
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut f = options.open(&temp)?;
        set_mode(&temp, 0o600)?;
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

    /// The account's directory, made (private, in the marked root) if missing.
    fn account_dir(&self) -> std::io::Result<PathBuf> {
        self.own_root()?;
        let account = self.root.join(&self.account);
        make_private_dirs(&account)?;
        Ok(account)
    }

    /// The directory of `report`'s events, made (private, in the marked root) if missing.
    fn private_dirs(&self, report: Option<&str>) -> std::io::Result<PathBuf> {
        self.account_dir()?;
        let dir = self.dir(report);
        make_private_dirs(&dir)?;
        Ok(dir)
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
        let account = self.account_dir()?;
        let text = serde_json::to_vec(&all).map_err(std::io::Error::other)?;
        write_atomic(&account.join(SEEN_FILE), &[&text])?;
        Ok(all)
    }

    /// Keeps the pages that a fetch stopped by the daily quota read of a window it did not
    /// finish, the query `[qs, qe)` (settled), so that the next fetch of that query asks none
    /// of them again: `pages` are `(offset, body)`. One file, `<qs>_<qe>.pages`: the header
    /// line (`svpages 2`, then what it holds as a segment's does, `count` its pages), then each
    /// page as `<offset> <length>\n` and its body.
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
        let header = self
            .header(report, qs, qe, pages.len() as u64, &body)
            .line(CARRY_MAGIC);
        let dir = self.private_dirs(report)?;
        write_atomic(&dir.join(format!("{qs}_{qe}.pages")), &[&header, &body])
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
                let (qs, qe) = carried_window(path.file_name()?.to_str()?)?;
                Some((qs, qe, path))
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
    /// damaged file gives [`Damage::Corrupt`], which says the file and why.
    pub fn take_carried(
        &self,
        report: Option<&str>,
        lo: i64,
        hi: i64,
    ) -> std::result::Result<Option<(i64, Pages)>, Damage> {
        let mut found = Ok(None);
        for (qs, qe, path) in self.carried(report) {
            if qs < lo || qs >= hi {
                continue;
            }
            if qs == lo && qe <= hi && matches!(found, Ok(None)) {
                found = match std::fs::read(&path) {
                    Ok(data) => self
                        .read_carried(report, qs, qe, data)
                        .map(|pages| Some((qe, pages)))
                        .map_err(|why| Damage::Corrupt(format!("`{}` {why}", path.display()))),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(Damage::Corrupt(format!(
                        "`{}` cannot be read ({e})",
                        path.display()
                    ))),
                };
            }
            let _ = std::fs::remove_file(&path);
        }
        found
    }

    /// The pages of a file of `report`'s carried window `[qs, qe)`, if its header says it holds
    /// them and its length and checksum hold; else why not.
    fn read_carried(
        &self,
        report: Option<&str>,
        qs: i64,
        qe: i64,
        data: Vec<u8>,
    ) -> std::result::Result<Pages, String> {
        let garbled = || "holds garbled pages".to_string();
        let (header, start) = check(&data, CARRY_MAGIC)?;
        let count = header.count;
        if let Some(why) = header.differs(&self.header(report, qs, qe, count, &[]), "pages") {
            return Err(why);
        }
        let body = Bytes::from(data).slice(start..);
        let mut pages = Vec::new();
        let mut at = 0;
        while at < body.len() {
            let end = at
                + body[at..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .ok_or_else(garbled)?;
            let (offset, size) = std::str::from_utf8(&body[at..end])
                .ok()
                .and_then(|l| l.split_once(' '))
                .ok_or_else(garbled)?;
            let (Ok(offset), Ok(size)) = (offset.parse::<usize>(), size.parse::<usize>()) else {
                return Err(garbled());
            };
            let page = body.get(end + 1..end + 1 + size).ok_or_else(garbled)?;
            pages.push((offset, body.slice_ref(page)));
            at = end + 1 + size;
        }
        if pages.len() as u64 != count {
            return Err(garbled());
        }
        Ok(pages)
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

/// An endpoint's directory of an account, and its report (None: all events).
type Endpoint = (PathBuf, Option<String>);

/// The account directories of the cache at `root`, by name, and the endpoint directories of
/// each with their report: only the names the cache writes.
fn accounts(root: &Path) -> Vec<(PathBuf, Vec<Endpoint>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return out;
    };
    let mut accounts: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(account_name)
        })
        .collect();
    accounts.sort();
    for account in accounts {
        let mut endpoints: Vec<Endpoint> = std::fs::read_dir(&account)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .filter_map(|p| {
                let report = report_of(p.file_name()?.to_str()?)?;
                Some((p, report))
            })
            .collect();
        endpoints.sort();
        out.push((account, endpoints));
    }
    out
}

/// What the cache that `dir` names holds (see [`locate`]; nothing when it is missing). A file
/// is refused.
pub fn info(dir: &Path) -> Result<Info> {
    let root = locate(dir)?;
    let mut info = Info {
        path: root.display().to_string(),
        ..Info::default()
    };
    for (account, endpoints) in accounts(&root) {
        let base_url = std::fs::read(account.join(ACCOUNT_FILE))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v.get("base_url")?.as_str().map(String::from));
        for (dir, report_id) in endpoints {
            let mut entry = Entry {
                account: account
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("")
                    .to_string(),
                base_url: base_url.clone(),
                endpoint: ENDPOINT.into(),
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
    Ok(info)
}

/// Whether `name` is that of a file the cache writes in an endpoint's directory and removes
/// when cleared: a temporary file, carried pages, or a segment of the former naming (a
/// segment is counted apart).
fn cleared(name: &str) -> bool {
    name.starts_with(".tmp-") || carried_window(name).is_some() || former_segment(name)
}

/// Empties the cache that `dir` names (see [`locate`]): only what the cache wrote there (its
/// accounts' segments, carried pages, `account.json` and `shape.json`, its temporary files,
/// and the directories they empty), in a root that holds its mark, which stays; the number of
/// segments removed. A file, or an existing directory that is not the cache's (no mark), is
/// refused, and nothing is removed; a missing one holds nothing.
pub fn clear(dir: &Path) -> Result<u64> {
    let root = locate(dir)?;
    if !root.exists() && root == dir {
        return Ok(0);
    }
    if !is_marked(&root) {
        return Err(Error::Config(format!(
            "`{}` is not a cache of surveillance (it holds no `{TAG_FILE}` of the cache): \
             nothing is removed",
            dir.display()
        )));
    }
    let mut removed = 0;
    for (account, endpoints) in accounts(&root) {
        for (dir, _) in endpoints {
            for file in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = file.path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if cleared(name) {
                    let _ = std::fs::remove_file(&path);
                } else if segment_of(path.clone()).is_some() && std::fs::remove_file(&path).is_ok()
                {
                    removed += 1;
                }
            }
            let _ = std::fs::remove_dir(&dir);
        }
        for file in std::fs::read_dir(&account).into_iter().flatten().flatten() {
            let name = file.file_name();
            let name = name.to_str().unwrap_or("");
            if name == ACCOUNT_FILE || name == SEEN_FILE || name.starts_with(".tmp-") {
                let _ = std::fs::remove_file(file.path());
            }
        }
        let _ = std::fs::remove_dir(&account);
    }
    Ok(removed)
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
        assert_eq!(clear(&root).expect("cleared"), 1);
        assert!(!former.exists());
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn carried_pages_are_taken_once_and_a_damaged_file_is_said_to_be_damaged() {
        let root = temp_root("carry");
        let c = account(&root, "k");
        let (a, b) = (Bytes::from_static(b"[1,\n2]"), Bytes::from_static(b"[]"));
        c.carry(None, 10, 50, &[(0, &a), (9_900, &b)])
            .expect("written");
        c.carry(None, 30, 40, &[(0, &a)]).expect("written");
        assert_eq!(c.carried_end(None, 10), Some(50));
        assert_eq!(c.carried_end(Some("r"), 10), None);
        // Ending past the range asked: not taken.
        assert_eq!(c.take_carried(None, 10, 45).expect("whole"), None);
        c.carry(None, 10, 50, &[(0, &a), (9_900, &b)])
            .expect("written");
        assert_eq!(
            c.take_carried(None, 10, 50).expect("whole"),
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
        let Err(Damage::Corrupt(why)) = c.take_carried(None, 10, 50) else {
            panic!("a damaged file of carried pages is taken")
        };
        assert!(
            why.contains("10_50.pages") && why.contains("checksum"),
            "{why}"
        );
        assert!(!file.exists());
        assert_eq!(c.take_carried(None, 10, 50).expect("none"), None);
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
        assert_eq!(info(&root).expect("info").entries[0].requests, 3);
        let body = c.read(None, &segs[0]).expect("read");
        assert_eq!(&body[..], b"[{\"id\":\"a\"},{\"id\":\"b\"}]");
        let data = std::fs::read(&segs[0].path).expect("file");
        std::fs::write(&segs[0].path, &data[..data.len() - 3]).expect("truncated");
        assert!(matches!(c.read(None, &segs[0]), Err(Damage::Corrupt(_))));
        c.remove(&segs[0]);
        assert!(matches!(c.read(None, &segs[0]), Err(Damage::Missing)));
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
        clear(&root).expect("cleared");
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
            900,
        );
        let text = format!("{{\"x\":\"{}\"}}", "y".repeat(150));
        for lo in 0..3 {
            c.write(None, lo * 10, lo * 10 + 10, 1, [text.as_str()].into_iter())
                .expect("written");
            std::thread::sleep(Duration::from_millis(20));
        }
        let first = c.segments(None).remove(0);
        c.read(None, &first).expect("read");
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
        assert_eq!(info(&root).expect("info").files, 2);
        assert_eq!(clear(&root).expect("cleared"), 2);
        assert_eq!(info(&root).expect("info").files, 0);
        let _ = std::fs::remove_dir_all(&root);
    }

    /// The mode bits of `path`.
    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).expect("stat").permissions().mode() & 0o7777
    }

    #[cfg(unix)]
    fn set(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    /// A folder of a user's own files at `dir`, with names the cache of the earlier format
    /// wrote too; every path under it, with its contents.
    fn users_folder(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        for (name, text) in [
            ("notes.txt", "mine"),
            ("123.json", "[1]"),
            ("orders.pages", "pages"),
            (".tmp-build", "scratch"),
            ("0123456789abcdef0123456789abcdef/account.json", "{}"),
            ("0123456789abcdef0123456789abcdef/shape.json", "{}"),
            (
                "0123456789abcdef0123456789abcdef/events/10_20_1_1.json",
                "{}",
            ),
            ("0123456789abcdef0123456789abcdef/events/10_20.pages", "{}"),
            ("project/events/10_20_1.json", "{}"),
        ] {
            let path = dir.join(name);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        std::fs::create_dir_all(dir.join("empty")).expect("mkdir");
        listing(dir)
    }

    fn listing(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("list").flatten() {
                let path = e.path();
                if path.is_dir() {
                    stack.push(path.clone());
                    out.push((path, None));
                } else {
                    out.push((path.clone(), Some(std::fs::read(&path).expect("read"))));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn clear_refuses_a_directory_without_the_mark_and_removes_only_what_the_cache_wrote() {
        let root = temp_root("clear-mark");
        let before = users_folder(&root);
        let Err(Error::Config(why)) = clear(&root) else {
            panic!("a folder of the user's own files is cleared")
        };
        assert!(
            why.contains("CACHEDIR.TAG") && why.contains("nothing"),
            "{why}"
        );
        assert_eq!(listing(&root), before);
        // Another program's tag does not make it the cache's.
        std::fs::write(
            root.join(TAG_FILE),
            "Signature: 8a477f597d28d172789f06886806bc55\n# made by a build tool\n",
        )
        .expect("tag");
        let before = listing(&root);
        assert!(clear(&root).is_err());
        assert_eq!(listing(&root), before);
        // A file is refused, as by `info`.
        let file = root.join("notes.txt");
        for refused in [clear(&file).err(), info(&file).err()] {
            let Some(Error::Config(why)) = refused else {
                panic!("a file is taken for a cache")
            };
            assert!(why.contains("not a directory"), "{why}");
        }
        assert_eq!(listing(&root), before);
        // The cache's own folder in it: cleared of the cache's files, the user's left.
        let c = Cache::open(&root, "https://a.test", "k", "id", DEFAULT_MAX_BYTES).expect("open");
        assert_eq!(c.root(), root.join(OWN_DIR));
        c.write(None, 10, 20, 1, ["{}"].into_iter())
            .expect("written");
        c.carry(None, 20, 30, &[(0, &Bytes::from_static(b"[]"))])
            .expect("carried");
        c.keep_seen(Seen::default()).expect("kept");
        assert_eq!(clear(&root).expect("cleared"), 1);
        let mut left = before.clone();
        left.push((root.join(OWN_DIR), None));
        left.push((
            root.join(OWN_DIR).join(TAG_FILE),
            Some(TAG.as_bytes().to_vec()),
        ));
        left.sort();
        assert_eq!(listing(&root), left);
        // A missing directory holds nothing to clear.
        assert_eq!(clear(&root.join("missing")).expect("nothing"), 0);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[cfg(unix)]
    #[test]
    fn an_existing_directory_keeps_its_mode_and_the_cache_keeps_to_its_own_folder() {
        let base = temp_root("modes");
        for dir_mode in [0o1777, 0o755, 0o700] {
            let dir = base.join(format!("{dir_mode:o}"));
            let before = users_folder(&dir);
            set(&dir, dir_mode);
            let c =
                Cache::open(&dir, "https://a.test", "k", "id", DEFAULT_MAX_BYTES).expect("open");
            let own = dir.join(OWN_DIR);
            assert_eq!(c.root(), own);
            c.write(Some("ABC"), 10, 20, 1, ["{}"].into_iter())
                .expect("written");
            assert_eq!(mode(&dir), dir_mode);
            assert!(is_marked(&own) && mode(&own) == 0o700);
            let mut theirs = listing(&dir);
            theirs.retain(|(p, _)| !p.starts_with(&own));
            assert_eq!(theirs, before);
            // Opened again: the same folder (the directory is still not the cache's).
            let again =
                Cache::open(&dir, "https://a.test", "k", "id", DEFAULT_MAX_BYTES).expect("open");
            assert_eq!(again.root(), own);
            assert_eq!(again.segments(Some("ABC")).len(), 1);
        }
        // A read-only directory is refused, and nothing is written there.
        let dir = base.join("500");
        let before = users_folder(&dir);
        set(&dir, 0o500);
        for named in [dir.clone(), dir.join("cache")] {
            let Err(Error::Config(why)) =
                Cache::open(&named, "https://a.test", "k", "id", DEFAULT_MAX_BYTES)
            else {
                panic!("a read-only directory is taken")
            };
            assert!(why.contains("read-only") && why.contains("0500"), "{why}");
        }
        assert_eq!(mode(&dir), 0o500);
        assert_eq!(listing(&dir), before);
        set(&dir, 0o700);
        // A marked directory that is not private is refused, never chmod-ed.
        let shared = base.join("shared");
        std::fs::create_dir_all(&shared).expect("mkdir");
        std::fs::write(shared.join(TAG_FILE), TAG).expect("tag");
        set(&shared, 0o755);
        let Err(Error::Config(why)) =
            Cache::open(&shared, "https://a.test", "k", "id", DEFAULT_MAX_BYTES)
        else {
            panic!("a directory others can read is taken")
        };
        assert!(why.contains("not private") && why.contains("0755"), "{why}");
        assert_eq!(mode(&shared), 0o755);
        // A folder of the cache's name that it did not make (no mark) is not taken either.
        let squatted = base.join("squatted");
        std::fs::create_dir_all(squatted.join(OWN_DIR)).expect("mkdir");
        let Err(Error::Config(why)) =
            Cache::open(&squatted, "https://a.test", "k", "id", DEFAULT_MAX_BYTES)
        else {
            panic!("an unmarked folder is taken")
        };
        assert!(why.contains("without the cache's `CACHEDIR.TAG`"), "{why}");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[cfg(unix)]
    #[test]
    fn what_the_cache_makes_is_0700_and_0600_and_its_root_is_marked() {
        let base = temp_root("private");
        let root = base.join("a").join("cache");
        let c = Cache::open(&root, "https://a.test", "k", "id", DEFAULT_MAX_BYTES).expect("open");
        assert_eq!(c.root(), root);
        assert!(!base.exists(), "nothing is made before a write");
        c.write(None, 10, 20, 1, ["{}"].into_iter())
            .expect("written");
        c.carry(Some("r"), 20, 30, &[(0, &Bytes::from_static(b"[]"))])
            .expect("carried");
        c.keep_seen(Seen::default()).expect("kept");
        assert!(is_marked(&root));
        assert!(std::fs::read_to_string(root.join(TAG_FILE))
            .expect("tag")
            .starts_with("Signature: 8a477f597d28d172789f06886806bc55\n"));
        let mut files = 0;
        for (path, text) in listing(&base) {
            if text.is_some() {
                files += 1;
            }
            assert_eq!(
                mode(&path),
                if text.is_some() { 0o600 } else { 0o700 },
                "{path:?}"
            );
        }
        assert_eq!(files, 5);
        // Marked: opened again as the root itself, and cleared.
        let again =
            Cache::open(&root, "https://a.test", "k", "id", DEFAULT_MAX_BYTES).expect("open");
        assert_eq!(again.root(), root);
        assert_eq!(clear(&root).expect("cleared"), 1);
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn a_file_that_holds_another_window_account_report_or_count_is_damaged() {
        let root = temp_root("identity");
        let c = account(&root, "k");
        c.write(None, 10, 20, 1, ["{\"id\":\"a\"}"].into_iter())
            .expect("written");
        c.write(
            None,
            20,
            40,
            2,
            ["{\"id\":\"b\"}", "{\"id\":\"c\"}"].into_iter(),
        )
        .expect("written");
        let segs = c.segments(None);
        let (small, large) = (&segs[0], &segs[1]);
        assert_eq!((small.events, large.events), (1, 2));
        let damaged = |c: &Cache, report: Option<&str>, seg: &Segment, says: &str| {
            let Err(Damage::Corrupt(why)) = c.read(report, seg) else {
                panic!("{seg:?} is served")
            };
            assert!(why.contains(says), "{why}");
        };
        // A whole, valid file of one window under another's name.
        let data = std::fs::read(&small.path).expect("read");
        std::fs::write(&large.path, &data).expect("copied");
        damaged(&c, None, large, "another window");
        // Its name's count changed.
        let renamed = c.dir(None).join("10_20_2_1.json");
        std::fs::write(&renamed, &data).expect("copied");
        let wrong = segment_of(renamed).expect("a segment");
        damaged(&c, None, &wrong, "its name says 2");
        // Another report's, another account's.
        c.write(Some("R"), 10, 20, 1, ["{\"id\":\"a\"}"].into_iter())
            .expect("written");
        let theirs = &c.segments(Some("R"))[0];
        std::fs::copy(&small.path, &theirs.path).expect("copied");
        damaged(&c, Some("R"), theirs, "of all events, not of report `R`");
        let other = account(&root, "k2");
        other
            .write(None, 10, 20, 1, ["{\"id\":\"z\"}"].into_iter())
            .expect("written");
        std::fs::copy(&other.segments(None)[0].path, &small.path).expect("copied");
        damaged(&c, None, small, "another account's");
        // The earlier format, with no header of what it holds.
        std::fs::write(&small.path, b"svcache 1 1 11 x\n[{\"id\":\"a\"}]").expect("written");
        damaged(&c, None, small, "another version");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_report_id_is_kept_exactly_as_given() {
        let root = temp_root("report-case");
        let c = account(&root, "k");
        let id = "3F2B8C1E-5D4A-4E6B-9C7D-2A1B0C9D8E7F";
        c.write(Some(id), 10, 20, 1, ["{}"].into_iter())
            .expect("written");
        assert_eq!(c.segments(Some(id)).len(), 1);
        assert!(c.segments(Some(&id.to_lowercase())).is_empty());
        assert_eq!(endpoint_dir(Some(id)), format!("events-{id}"));
        assert_eq!(endpoint_dir(Some("a/../b")), "events-a%2F%2E%2E%2Fb");
        let shown = info(&root).expect("info");
        assert_eq!(shown.entries[0].report_id.as_deref(), Some(id));
        let _ = std::fs::remove_dir_all(&root);
    }
}
