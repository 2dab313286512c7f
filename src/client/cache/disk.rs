//! Where the cache lives and how it touches the disk: the user's cache directory, private
//! directories and modes, the root's `CACHEDIR.TAG` mark and check, no link followed below the
//! root, atomic writes.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::{OWN_DIR, TAG, TAG_FILE, TAG_OWNER};
use crate::client::error::{Error, Result};

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

pub(super) fn sha256_hex(data: &[u8], bytes: usize) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, data);
    digest.as_ref()[..bytes.min(32)]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Gives `path`, which the cache made, `mode` (on Unix): a mode given at creation loses the
/// bits of the umask, and the cache's are the same whatever the umask.
pub(super) fn set_mode(path: &Path, mode: u32) -> std::io::Result<()> {
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

/// Checks that `path`, below the cache's `root`, is reached through no symbolic link: the root
/// is the user's choice, but what lies below it is the cache's own, and a link there (an
/// account's or an endpoint's folder replaced by a link to a user's folder) would make the
/// cache write, serve or remove the files it points to. The parts of `path` that do not exist
/// yet are fine (the cache makes them); a path outside `root` is refused.
pub(super) fn refuse_links(root: &Path, path: &Path) -> std::io::Result<()> {
    let below = path.strip_prefix(root).map_err(|_| {
        std::io::Error::other(format!(
            "`{}` is not inside the cache `{}`",
            path.display(),
            root.display()
        ))
    })?;
    let mut at = root.to_path_buf();
    for part in below.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(std::io::Error::other(format!(
                    "`{}` is a symbolic link, and the cache follows none below its root: it \
                     writes, reads and removes nothing through it; remove the link (`surveillance \
                     cache clear` does)",
                    at.display()
                )))
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Makes `dir`, below the cache's `root`, as [`make_private_dirs`] does, once no part of it
/// below the root is a link (see [`refuse_links`]). The directory.
pub(super) fn make_own_dirs(root: &Path, dir: PathBuf) -> std::io::Result<PathBuf> {
    refuse_links(root, &dir)?;
    make_private_dirs(&dir)?;
    Ok(dir)
}

/// The entries of `dir`, below the cache's `root`, when no part of it below the root is a link
/// (see [`refuse_links`]); None when it is one, or cannot be read.
pub(super) fn read_own_dir(root: &Path, dir: &Path) -> Option<std::fs::ReadDir> {
    refuse_links(root, dir).ok()?;
    std::fs::read_dir(dir).ok()
}

/// Whether `path` is a directory itself, not a link to one (an entry the cache may list,
/// serve and clear).
pub(super) fn real_dir(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_dir())
}

/// The effective user of the process (Unix).
#[cfg(unix)]
pub(super) fn effective_uid() -> u32 {
    // SAFETY: geteuid takes nothing, cannot fail and touches no memory of the caller.
    unsafe { libc::geteuid() }
}

/// Whether the directory of `meta` is the user's alone: owned by the process's user, and
/// neither readable nor writable by anyone else (always, off Unix).
pub(super) fn private_to_user(meta: &std::fs::Metadata) -> bool {
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
pub(super) fn read_only(meta: &std::fs::Metadata) -> bool {
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
pub(super) fn mode_of(meta: &std::fs::Metadata) -> String {
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

pub(super) fn not_a_directory(path: &Path) -> Error {
    Error::config(format!(
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
        Err(e) => Err(Error::config(format!(
            "the cache directory `{}` cannot be read ({e})",
            dir.display()
        ))),
    }
}

/// Checks that the cache may use `root` (as [`locate`] gives it): an existing one holds the
/// cache's mark and is the user's alone; a missing one can be made where its nearest existing
/// parent is not read-only.
pub(super) fn check_root(root: &Path) -> Result<()> {
    match std::fs::metadata(root) {
        Ok(m) if !m.is_dir() => return Err(not_a_directory(root)),
        Ok(_) if !is_marked(root) => {
            return Err(Error::config(format!(
                "`{}` exists without the cache's `{TAG_FILE}`, so it is not the cache's: the \
                 cache writes nothing there; remove it, or name another directory",
                root.display()
            )))
        }
        Ok(m) if !private_to_user(&m) => {
            return Err(Error::config(format!(
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
            return Err(Error::config(format!(
                "the cache directory `{}` cannot be read ({e})",
                root.display()
            )))
        }
    }
    let mut at = root.parent();
    while let Some(dir) = at.filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(m) = std::fs::metadata(dir) {
            if m.is_dir() && read_only(&m) {
                return Err(Error::config(format!(
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
pub(super) fn temp_name() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(".tmp-{}-{t:x}-{n}", std::process::id())
}

/// Writes `data` to `path` atomically: a unique temporary name in the same directory, then a
/// rename over it. The file is private to the user (0600 on Unix, whatever the umask).
pub(super) fn write_atomic(path: &Path, data: &[&[u8]]) -> std::io::Result<()> {
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
