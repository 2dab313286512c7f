//! The daily request quota (the provider allows 2,400 requests a day per API key, all endpoints
//! together): a ledger that every client of the machine shares, which counts each request
//! before it is sent and refuses the one past the budget.
//!
//! The ledger is a small JSON file per service and key, in the directory given (`quota_dir`,
//! which the Python layer reads from `SURVEILLANCE_QUOTA_DIR`) or the user's cache directory
//! (`$XDG_CACHE_HOME` or `~/.cache` on Linux, `~/Library/Caches` on macOS, `%LOCALAPPDATA%` on
//! Windows, then `surveillance/quota`). Its name is a hash of the
//! base URL and the API key, never the key. Every update happens under an exclusive file lock,
//! so concurrent processes never spend the same request twice. Where no such directory can be
//! used, the ledger lives in the process's memory (and says so in `diagnose()`).
//!
//! The day is the service's UTC day, read from the `Date` header of its answers, so a skewed
//! local clock does not matter (`Date` has a one-second resolution: a request sent within a
//! second of midnight may be counted on the other day).
//!
//! A budget held elsewhere (a Dask cluster's share of the day) can also bound one client: an
//! allowance of requests granted in blocks, taken one per request before the ledger counts it.

use std::fs::File;
#[cfg(not(unix))]
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use reqwest::header::{HeaderMap, DATE};
use serde::{Deserialize, Serialize};

use super::error::{Error, Result, Wording};
use crate::time::{civil_from_days, days_from_civil};

use crate::time::DAY_MS;

/// Where the quota stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Quota {
    /// Requests a day (None: no budget is enforced; requests are still counted).
    pub limit: Option<u64>,
    /// Requests sent today (the service's UTC day) with this key, by every client of the
    /// machine.
    pub used: u64,
    /// Requests left today; None without a limit.
    pub remaining: Option<u64>,
    /// When the budget comes back: the service's next UTC midnight (epoch ms), or later when
    /// the service asked for a longer wait.
    pub resets_at_ms: i64,
}

/// The ledger's file contents.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct LedgerFile {
    /// The service's base URL (for whoever reads the file; the key is not in it).
    #[serde(default)]
    base_url: String,
    /// The service's UTC day counted, `YYYY-MM-DD`.
    #[serde(default)]
    day: String,
    /// Requests sent on `day`.
    #[serde(default)]
    used: u64,
    /// No request before this instant (epoch ms): the service answered 429 with a wait longer
    /// than a client would sleep, and confirmed it.
    #[serde(default)]
    blocked_until_ms: i64,
    /// Until this instant (epoch ms), a second such answer confirms the first: the service
    /// answered 429 once with a wait longer than a client would sleep, which only the call
    /// that got it believed.
    #[serde(default)]
    claimed_until_ms: i64,
}

/// The daily quota of one service and key, shared by the processes of the machine.
pub struct Ledger {
    limit: Option<u64>,
    base_url: String,
    /// None: the ledger lives in `memory` only.
    path: Option<PathBuf>,
    file: Mutex<Option<File>>,
    memory: Mutex<LedgerFile>,
    /// The service's clock minus the local clock, from its `Date` headers.
    skew_ms: AtomicI64,
    /// The clock the day is read from before the service's `Date` says otherwise.
    clock: RwLock<Clock>,
    /// Requests granted from a budget held elsewhere; None: none is in force.
    allowance: Mutex<Option<Allowance>>,
    /// Wakes the requests waiting for a grant.
    granted: tokio::sync::Notify,
}

/// What is left of the requests granted to a client, and whether more may come.
#[derive(Debug, Default, Clone, Copy)]
struct Allowance {
    left: u64,
    /// The budget said no more will come: a request that finds none left is refused.
    closed: bool,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("limit", &self.limit)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The clock a ledger reads the day from until the service's `Date` headers correct it: the
/// local clock, or the clock of a service that keeps its own (an emulator whose day can be
/// moved on, handed over by [`Ledger::follow`]).
#[derive(Clone, Default)]
pub struct Clock(Option<Arc<dyn Fn() -> i64 + Send + Sync>>);

impl Clock {
    /// A clock that reads `now` (epoch ms).
    pub fn new(now: impl Fn() -> i64 + Send + Sync + 'static) -> Clock {
        Clock(Some(Arc::new(now)))
    }

    /// Now, epoch ms.
    pub fn now_ms(&self) -> i64 {
        match &self.0 {
            Some(now) => now(),
            None => chrono::Utc::now().timestamp_millis(),
        }
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Clock(given)"
        } else {
            "Clock(local)"
        })
    }
}

/// The directory of the ledgers: `given` (the setting `quota_dir`, which the Python layer
/// reads from `SURVEILLANCE_QUOTA_DIR`), else `surveillance/quota` in the user's cache
/// directory, which `env` (the platform's variables) places.
pub fn ledger_dir(given: Option<PathBuf>, env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    match given.filter(|dir| !dir.as_os_str().is_empty()) {
        Some(dir) => Some(dir),
        None => super::cache::user_cache_dir(env).map(|c| c.join("surveillance").join("quota")),
    }
}

/// Removes the ledger of `base_url` (as [`parse_base_url`](super::config::parse_base_url)
/// gives it) and `api_key` in `dir`, if there is one: for a service that ends with its
/// process (the emulator), whose ledgers would otherwise pile up, one per port and key.
pub fn forget(base_url: &str, api_key: &str, dir: Option<&Path>) {
    if let Some(dir) = dir {
        let _ = std::fs::remove_file(dir.join(file_name(base_url, api_key)));
    }
}

/// The ledger's file name for a service and key: a hash of both, never the key itself.
fn file_name(base_url: &str, api_key: &str) -> String {
    let mut data = Vec::with_capacity(base_url.len() + api_key.len() + 1);
    data.extend_from_slice(base_url.as_bytes());
    data.push(0);
    data.extend_from_slice(api_key.as_bytes());
    let digest = ring::digest::digest(&ring::digest::SHA256, &data);
    let hex: String = digest.as_ref()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("quota-{hex}.json")
}

/// `YYYY-MM-DD` of a day number (days since 1970-01-01).
pub fn day_name(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

fn day_number(name: &str) -> Option<i64> {
    let mut parts = name.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (parts.next()??, parts.next()??, parts.next()??);
    Some(days_from_civil(y, m, d))
}

impl Ledger {
    /// The ledger of `base_url` and `api_key` with `limit` requests a day, in `dir` (None, or a
    /// directory that cannot be used: in memory).
    /// The ledgers of the directory that no client has used for [`STALE_LEDGER`] are removed.
    pub fn open(base_url: &str, api_key: &str, limit: Option<u64>, dir: Option<&Path>) -> Ledger {
        let path = dir.and_then(|d| {
            // The directories it makes are 0700 and the ledger 0600, whatever the umask; a
            // directory that exists is left as it is.
            super::cache::make_private_dirs(d).ok()?;
            let path = d.join(file_name(base_url, api_key));
            prune(d, &path);
            open_file(&path).map(|f| (path, f))
        });
        let (path, file) = match path {
            Some((p, f)) => (Some(p), Some(f)),
            None => (None, None),
        };
        Ledger {
            limit,
            base_url: base_url.to_owned(),
            path,
            file: Mutex::new(file),
            memory: Mutex::new(LedgerFile::default()),
            skew_ms: AtomicI64::new(0),
            clock: RwLock::new(Clock::default()),
            allowance: Mutex::new(None),
            granted: tokio::sync::Notify::new(),
        }
    }

    fn allowance_slot(&self) -> std::sync::MutexGuard<'_, Option<Allowance>> {
        self.allowance.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `n` requests to the allowance, putting one in force (none left) if none is: from
    /// then on every request takes one of them ([`take_granted`](Self::take_granted)).
    pub fn grant(&self, n: u64) {
        let mut slot = self.allowance_slot();
        let a = slot.get_or_insert_with(Allowance::default);
        a.left = a.left.saturating_add(n);
        drop(slot);
        self.granted.notify_waiters();
    }

    /// No more grants will come: a request that finds the allowance spent is refused with
    /// [`Error::Quota`] instead of waiting.
    pub fn close_allowance(&self) {
        if let Some(a) = self.allowance_slot().as_mut() {
            a.closed = true;
        }
        self.granted.notify_waiters();
    }

    /// Ends the allowance (requests are no longer bounded by one); what was left unspent.
    pub fn end_allowance(&self) -> u64 {
        let left = self.allowance_slot().take().map_or(0, |a| a.left);
        self.granted.notify_waiters();
        left
    }

    /// Requests left of the allowance in force, or None.
    pub fn allowance(&self) -> Option<u64> {
        self.allowance_slot().map(|a| a.left)
    }

    /// Takes one request of the allowance in force (at once without one), waiting for the
    /// next grant when none is left; [`Error::Quota`] once the allowance is closed and spent.
    /// True when it took one (a request that then never reached the service gives it back:
    /// [`refund`](Self::refund)).
    pub async fn take_granted(&self) -> Result<bool> {
        loop {
            // Registered before the check, so a grant between the two is not missed.
            let next = self.granted.notified();
            {
                let mut slot = self.allowance_slot();
                match slot.as_mut() {
                    None => return Ok(false),
                    Some(a) if a.left > 0 => {
                        a.left -= 1;
                        return Ok(true);
                    }
                    Some(a) if a.closed => break,
                    Some(_) => {}
                }
            }
            next.await;
        }
        let limit = self.limit;
        Err(self.on_today(|r, _, day| {
            let when = reset_time((day + 1) * DAY_MS);
            Error::Quota {
                message: format!(
                    "the daily quota of this API key is used up by the clients that share its \
                     budget (the requests granted to this one are spent, and the budget has no \
                     more); it comes back at {when}"
                )
                .into(),
                used: r.used,
                limit,
                resets_at_ms: (day + 1) * DAY_MS,
            }
        }))
    }

    /// The ledger's file, or None when it lives in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Requests a day, if enforced.
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// Reads the day from `clock` from now on (the clock of an emulator, which its
    /// `advance_clock` moves): until the next `Date` header, as the service's clock.
    pub fn follow(&self, clock: Clock) {
        *self.clock.write().unwrap_or_else(|e| e.into_inner()) = clock;
        self.skew_ms.store(0, Ordering::Relaxed);
    }

    /// The local clock, epoch ms.
    fn local_ms(&self) -> i64 {
        self.clock
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .now_ms()
    }

    /// The service's clock now, epoch ms.
    pub fn service_now_ms(&self) -> i64 {
        self.local_ms() + self.skew_ms.load(Ordering::Relaxed)
    }

    /// Reads the service's clock from an answer's `Date` header.
    pub fn observe(&self, headers: &HeaderMap) {
        let Some(date) = headers.get(DATE).and_then(|v| v.to_str().ok()) else {
            return;
        };
        let Ok(t) = chrono::DateTime::parse_from_rfc2822(date.trim()) else {
            return;
        };
        // `Date` counts whole seconds: the middle of that second is the best guess.
        let service = t.timestamp_millis() + 500;
        self.skew_ms
            .store(service - self.local_ms(), Ordering::Relaxed);
    }

    /// Runs `f` on the ledger's record, under the file lock, and writes it back.
    fn update<T>(&self, f: impl Fn(&mut LedgerFile) -> T) -> T {
        let mut slot = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(file) = slot.as_mut() {
            if let Some(out) = with_file(file, &self.base_url, &f) {
                return out;
            }
            // The file was removed (unused for days, see [`prune`]): the same path again, where
            // the other clients of the machine count.
            *slot = self.path.as_deref().and_then(open_file);
            if let Some(file) = slot.as_mut() {
                if let Some(out) = with_file(file, &self.base_url, &f) {
                    return out;
                }
            }
            // The file failed under us: the process's memory holds the count from now on.
            *slot = None;
        }
        drop(slot);
        let mut memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut memory)
    }

    /// Runs `f` on the record of the service's day (a new count past its midnight), with the
    /// service's time now and the record's day.
    fn on_today<T>(&self, f: impl Fn(&mut LedgerFile, i64, i64) -> T) -> T {
        let now = self.service_now_ms();
        let today = now.div_euclid(DAY_MS);
        self.update(|r| {
            roll(r, today);
            let day = day_number(&r.day).unwrap_or(today);
            f(r, now, day)
        })
    }

    /// Counts one request about to be sent, on the day returned; [`Error::Quota`] (nothing is
    /// counted) when today's budget is spent, or the service asked for a wait that has not
    /// passed.
    pub fn spend(&self) -> Result<i64> {
        let limit = self.limit;
        self.on_today(|r, now, day| {
            if r.blocked_until_ms > now {
                return Err(quota_error(r.used, limit, r.blocked_until_ms, None));
            }
            if let Some(limit) = limit {
                if r.used >= limit {
                    return Err(quota_error(r.used, Some(limit), (day + 1) * DAY_MS, None));
                }
            }
            r.used += 1;
            Ok(day)
        })
    }

    /// Gives back a request counted on `day` (and the allowance's, when `granted`) that never
    /// reached the service: its connection was refused, or could not be made.
    pub fn refund(&self, day: i64, granted: bool) {
        self.on_today(|r, _, today| {
            if today == day {
                r.used = r.used.saturating_sub(1);
            }
        });
        if granted {
            self.return_grant();
        }
    }

    /// Gives back a request of the allowance taken for a request that did not leave after all
    /// (refused, or of a call that stopped meanwhile), for the requests waiting for one.
    pub fn return_grant(&self) {
        if let Some(a) = self.allowance_slot().as_mut() {
            a.left = a.left.saturating_add(1);
        }
        self.granted.notify_waiters();
    }

    /// The service answered 429 and asked to wait `wait_ms`, longer than the client waits: the
    /// error the call that got the answer raises. One such answer is believed by that call
    /// alone, not written to the ledger as the quota used up: a stray answer (a proxy's, a
    /// node's) would otherwise stop every job of the machine for up to two days. The service
    /// confirms it with a second such answer within an hour (to any client of the
    /// machine), or when the ledger is near its daily limit: then every client of the machine
    /// refuses requests until the wait is over ([`block`](Self::block)).
    pub fn claim(&self, wait_ms: i64, why: String) -> Error {
        let limit = self.limit;
        self.on_today(|r, now, _| {
            let until = now + wait_ms;
            let near = limit.is_some_and(|l| r.used.saturating_mul(10) >= l.saturating_mul(9));
            if near || r.claimed_until_ms > now {
                r.blocked_until_ms = r.blocked_until_ms.max(until);
                r.claimed_until_ms = 0;
                return quota_error(r.used, limit, until, Some(why.clone()));
            }
            r.claimed_until_ms = now + wait_ms.min(CONFIRM_WITHIN_MS);
            claim_error(r.used, limit, until, &why)
        })
    }

    /// The service answered 429 and asked to wait `wait_ms`, longer than the client waits:
    /// every client of the machine refuses requests until then. The error to raise.
    pub fn block(&self, wait_ms: i64, why: String) -> Error {
        let limit = self.limit;
        self.on_today(|r, now, _| {
            let until = now + wait_ms;
            r.blocked_until_ms = r.blocked_until_ms.max(until);
            quota_error(r.used, limit, until, Some(why.clone()))
        })
    }

    /// Where the quota stands now.
    pub fn quota(&self) -> Quota {
        let limit = self.limit;
        self.on_today(|r, now, day| {
            let midnight = (day + 1) * DAY_MS;
            let blocked = r.blocked_until_ms > now;
            Quota {
                limit,
                used: r.used,
                remaining: limit.map(|l| if blocked { 0 } else { l.saturating_sub(r.used) }),
                resets_at_ms: if blocked {
                    r.blocked_until_ms.max(midnight)
                } else {
                    midnight
                },
            }
        })
    }
}

/// How long a first 429 that asks for a wait longer than a client waits stands for a second
/// one to confirm it (see [`Ledger::claim`]): a service whose quota is used up refuses every
/// request, so the next one, from any client of the machine, gets the same answer well within
/// the hour.
const CONFIRM_WITHIN_MS: i64 = 3_600_000;

/// Starts a new day's count when `today` is later than the record's day. A record already on
/// a later day stays: another process saw the service's midnight first.
fn roll(r: &mut LedgerFile, today: i64) {
    if day_number(&r.day).is_none_or(|d| d < today) {
        r.day = day_name(today);
        r.used = 0;
    }
}

/// A ledger no client has counted a request in for this long holds no count of the service's
/// day, whatever the clocks: removed when a client opens a ledger of the same directory.
pub const STALE_LEDGER: std::time::Duration = std::time::Duration::from_secs(2 * 86_400);

/// Opens (creates) the ledger file at `path`.
fn open_file(path: &Path) -> Option<File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let file = options.open(path).ok()?;
    #[cfg(unix)]
    {
        // The ledger is the client's own (one made by an earlier version was 0644).
        use std::os::unix::fs::PermissionsExt;
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
    }
    Some(file)
}

/// Removes the ledgers of `dir` but `keep` last written [`STALE_LEDGER`] ago or more (of a
/// key or service no longer used, of an emulator that did not stop cleanly), each under its
/// lock, so that none is removed while a client counts in it. Best effort: a ledger that
/// cannot be removed stays.
fn prune(dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let stale = |file: &File| {
        file.metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= STALE_LEDGER)
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path == keep || !(name.starts_with("quota-") && name.ends_with(".json")) {
            continue;
        }
        let Ok(file) = File::open(&path) else {
            continue;
        };
        if !stale(&file) || file.try_lock().is_err() {
            continue;
        }
        // Read again under the lock: a client may have counted in it since.
        if stale(&file) {
            let _ = std::fs::remove_file(&path);
        }
        let _ = file.unlock();
    }
}

/// Whether `file` was removed from its directory (a client that has it open still counts
/// in it). Where open files cannot be removed (Windows), never.
fn removed(file: &File) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        file.metadata().is_ok_and(|m| m.nlink() == 0)
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        false
    }
}

/// Reads, updates and writes the record of `file` under an exclusive lock; None when the file
/// cannot be used, or was removed (see [`prune`]).
fn with_file<T>(file: &mut File, base_url: &str, f: &impl Fn(&mut LedgerFile) -> T) -> Option<T> {
    file.lock().ok()?;
    if removed(file) {
        let _ = file.unlock();
        return None;
    }
    let out = (|| {
        // One read at offset 0 (the file is a few hundred bytes), one write when it changed:
        // a request costs four system calls with the lock.
        let mut buf = [0u8; 4096];
        let n = read_at(file, &mut buf)?;
        let text = std::str::from_utf8(&buf[..n]).unwrap_or_default();
        // A damaged or empty file starts again (it only holds a count).
        let mut record: LedgerFile = serde_json::from_str(text).unwrap_or_default();
        record.base_url = base_url.to_owned();
        let out = f(&mut record);
        let after = serde_json::to_string(&record).ok()?;
        if text != after {
            write_at(file, after.as_bytes())?;
            if after.len() < n {
                file.set_len(after.len() as u64).ok()?;
            }
        }
        Some(out)
    })();
    let _ = file.unlock();
    out
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8]) -> Option<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, 0).ok()
}

#[cfg(unix)]
fn write_at(file: &File, data: &[u8]) -> Option<()> {
    std::os::unix::fs::FileExt::write_all_at(file, data, 0).ok()
}

#[cfg(not(unix))]
fn read_at(mut file: &File, buf: &mut [u8]) -> Option<usize> {
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read(buf).ok()
}

#[cfg(not(unix))]
fn write_at(mut file: &File, data: &[u8]) -> Option<()> {
    file.seek(SeekFrom::Start(0)).ok()?;
    file.write_all(data).ok()
}

/// When the quota comes back, as an error says it: UTC to the second.
pub(crate) fn reset_time(resets_at_ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(resets_at_ms).map_or_else(
        || resets_at_ms.to_string(),
        |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
    )
}

fn quota_error(used: u64, limit: Option<u64>, resets_at_ms: i64, why: Option<String>) -> Error {
    let when = reset_time(resets_at_ms);
    let message = match (why, limit) {
        (Some(why), _) => Wording::from(format!(
            "{why}: the daily quota of this API key is probably used up ({used} requests \
             counted today); no request is sent before {when}, when the service said it \
             would take them again"
        )),
        (None, Some(limit)) => Wording::new()
            .text(format!(
                "the daily quota of {limit} requests of this API key is used up ({used} sent \
                 today, counted by every client on this machine); it comes back at {when}: try \
                 again then, or set "
            ))
            .name("daily_requests", "`Limits(daily_requests=...)`")
            .text(" to your key's real quota"),
        (None, None) => Wording::from(format!("requests are refused until {when}")),
    };
    Error::Quota {
        message,
        used,
        limit,
        resets_at_ms,
    }
}

/// The quota error of the call that got a first 429 whose wait is longer than `max_wait` (see
/// [`Ledger::claim`]).
fn claim_error(used: u64, limit: Option<u64>, until_ms: i64, why: &str) -> Error {
    let when = reset_time(until_ms);
    Error::Quota {
        message: format!(
            "{why}: the daily quota of this API key may be used up ({used} requests counted \
             today); the service said it would take requests again at {when}. The other \
             clients of this machine go on until a second such answer confirms it"
        )
        .into(),
        used,
        limit,
        resets_at_ms: until_ms,
    }
}

/// The quota error of a 429 whose wait is longer than `max_wait`, without a ledger to block.
pub fn long_wait_error(used: u64, limit: Option<u64>, until_ms: i64, why: String) -> Error {
    quota_error(used, limit, until_ms, Some(why))
}

#[cfg(test)]
mod tests;
