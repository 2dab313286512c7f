//! What a cache directory holds and its clearing: `cache_info()` and `cache_clear()`, over every
//! account and endpoint under a root.

use std::path::{Path, PathBuf};

use super::disk::{is_marked, locate, real_dir};
use super::{
    account_name, carried_window, former_segment, report_of, segment_of, Segment, ACCOUNT_FILE,
    ENDPOINT, SEEN_FILE, TAG_FILE,
};
use crate::client::error::{Error, Result};

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
pub(super) type Endpoint = (PathBuf, Option<String>);

/// The account directories of the cache at `root`, by name, and the endpoint directories of
/// each with their report: only the names the cache writes, and only directories themselves (a
/// link is never followed below the root: see [`links`]).
pub(super) fn accounts(root: &Path) -> Vec<(PathBuf, Vec<Endpoint>)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(root) else {
        return out;
    };
    let mut accounts: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            real_dir(p)
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
            .filter(|p| real_dir(p))
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

/// The symbolic links under the cache at `root` that bear the name of an account's or an
/// endpoint's directory: the cache follows none of them (they lead out of the cache).
fn links(root: &Path) -> Vec<PathBuf> {
    let is_link = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
    let named = |dir: &Path, name: fn(&str) -> bool| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| is_link(p) && p.file_name().and_then(|n| n.to_str()).is_some_and(name))
            .collect()
    };
    let mut out = named(root, account_name);
    for (account, _) in accounts(root) {
        out.extend(named(&account, |n| report_of(n).is_some()));
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
pub(super) fn cleared(name: &str) -> bool {
    name.starts_with(".tmp-") || carried_window(name).is_some() || former_segment(name)
}

/// Empties the cache that `dir` names (see [`locate`]): only what the cache wrote there (its
/// accounts' segments, carried pages, `account.json` and `shape.json`, its temporary files,
/// and the directories they empty), in a root that holds its mark, which stays; the number of
/// segments removed. A link in place of an account's or an endpoint's directory is removed
/// itself, never followed: what it points to is left as it is. A file, or an existing directory that is not the cache's (no mark), is
/// refused, and nothing is removed; a missing one holds nothing.
pub fn clear(dir: &Path) -> Result<u64> {
    let root = locate(dir)?;
    if !root.exists() && root == dir {
        return Ok(0);
    }
    if !is_marked(&root) {
        return Err(Error::config(format!(
            "`{}` is not a cache of surveillance (it holds no `{TAG_FILE}` of the cache): \
             nothing is removed",
            dir.display()
        )));
    }
    for link in links(&root) {
        // A link to a directory is a directory entry on Windows, a file elsewhere; neither
        // call removes what it points to.
        if std::fs::remove_file(&link).is_err() {
            let _ = std::fs::remove_dir(&link);
        }
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
