//! Unit tests of the cache: its files, checks, cap, carried pages, marks and modes.

use super::*;
use crate::client::error::Error;

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
fn carried_pages_are_taken_once_from_where_they_were_read() {
    let root = temp_root("carry");
    let c = account(&root, "k");
    c.carry(None, 10, 50, b"blob one").expect("written");
    c.carry(None, 10, 40, b"blob two").expect("written");
    c.carry(None, 30, 40, b"blob three").expect("written");
    assert_eq!(c.take_carried(Some("r"), 10), None);
    let (end, data) = c.take_carried(None, 10).expect("carried");
    assert!(
        (end, &data[..]) == (50, &b"blob one"[..]) || (end, &data[..]) == (40, &b"blob two"[..])
    );
    // Taken once: every file carried from there is gone, the others stay.
    assert_eq!(c.take_carried(None, 10), None);
    assert_eq!(c.take_carried(None, 30), Some((40, b"blob three".to_vec())));
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
    let Err(Error::Config(words)) = clear(&root) else {
        panic!("a folder of the user's own files is cleared")
    };
    let why = words.to_string();
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
        let Some(Error::Config(words)) = refused else {
            panic!("a file is taken for a cache")
        };
        let why = words.to_string();
        assert!(why.contains("not a directory"), "{why}");
    }
    assert_eq!(listing(&root), before);
    // The cache's own folder in it: cleared of the cache's files, the user's left.
    let c = Cache::open(&root, "https://a.test", "k", "id", DEFAULT_MAX_BYTES).expect("open");
    assert_eq!(c.root(), root.join(OWN_DIR));
    c.write(None, 10, 20, 1, ["{}"].into_iter())
        .expect("written");
    c.carry(None, 20, 30, b"[]").expect("carried");
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
        let c = Cache::open(&dir, "https://a.test", "k", "id", DEFAULT_MAX_BYTES).expect("open");
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
        let Err(Error::Config(words)) =
            Cache::open(&named, "https://a.test", "k", "id", DEFAULT_MAX_BYTES)
        else {
            panic!("a read-only directory is taken")
        };
        let why = words.to_string();
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
    let Err(Error::Config(words)) =
        Cache::open(&shared, "https://a.test", "k", "id", DEFAULT_MAX_BYTES)
    else {
        panic!("a directory others can read is taken")
    };
    let why = words.to_string();
    assert!(why.contains("not private") && why.contains("0755"), "{why}");
    assert_eq!(mode(&shared), 0o755);
    // A folder of the cache's name that it did not make (no mark) is not taken either.
    let squatted = base.join("squatted");
    std::fs::create_dir_all(squatted.join(OWN_DIR)).expect("mkdir");
    let Err(Error::Config(words)) =
        Cache::open(&squatted, "https://a.test", "k", "id", DEFAULT_MAX_BYTES)
    else {
        panic!("an unmarked folder is taken")
    };
    let why = words.to_string();
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
    c.carry(Some("r"), 20, 30, b"[]").expect("carried");
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
    let again = Cache::open(&root, "https://a.test", "k", "id", DEFAULT_MAX_BYTES).expect("open");
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

/// A user's folder holding what a cache's account holds (`account.json`, `shape.json`, an
/// `events/` folder of a segment and carried pages); every path under it, with its contents.
#[cfg(unix)]
fn users_account(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    std::fs::create_dir_all(dir.join("events")).expect("mkdir");
    for (name, text) in [
        ("account.json", "{\"user\": \"me\"}"),
        ("shape.json", "{}"),
        ("events/10_20_1_1.json", "{}"),
        ("events/10_20.pages", "{}"),
        ("events/notes.txt", "mine"),
    ] {
        std::fs::write(dir.join(name), text).expect("write");
    }
    listing(dir)
}

#[cfg(unix)]
#[test]
fn a_link_below_the_root_is_never_followed_to_write_read_or_remove() {
    use std::os::unix::fs::symlink;
    let base = temp_root("links");
    let (root, mine) = (base.join("cache"), base.join("mine"));
    std::fs::create_dir_all(&mine).expect("mkdir");
    let before = users_account(&mine);
    let c = account(&root, "k");
    c.write(None, 0, 10, 1, ["{}"].into_iter())
        .expect("written");
    let account_dir = root.join(c.account());
    // The account's folder replaced by a link to the user's folder.
    std::fs::remove_dir_all(&account_dir).expect("rm");
    symlink(&mine, &account_dir).expect("symlink");
    let refused = c
        .write(None, 10, 20, 1, ["{}"].into_iter())
        .expect_err("a link is refused");
    assert!(refused.to_string().contains("symbolic link"), "{refused}");
    let seen = Seen {
        unsorted: true,
        ..Seen::default()
    };
    assert!(c.keep_seen(seen).is_err());
    assert!(c.carry(None, 0, 50, &[]).is_err());
    assert!(c.segments(None).is_empty());
    assert_eq!(c.seen(), None);
    assert_eq!(c.take_carried(None, 0), None);
    c.forget(None, 0, 100);
    c.evict();
    assert_eq!(info(&root).expect("info").files, 0);
    assert_eq!(listing(&mine), before);
    // Cleared: the link goes, never what it points to.
    assert_eq!(clear(&root).expect("cleared"), 0);
    assert!(std::fs::symlink_metadata(&account_dir).is_err());
    assert_eq!(listing(&mine), before);

    // The endpoint's folder of a real account replaced by a link.
    c.write(None, 0, 10, 1, ["{}"].into_iter())
        .expect("written");
    let events = c.dir(None);
    std::fs::remove_dir_all(&events).expect("rm");
    symlink(mine.join("events"), &events).expect("symlink");
    assert!(c.write(None, 10, 20, 1, ["{}"].into_iter()).is_err());
    assert!(c.segments(None).is_empty());
    c.forget(None, 0, 100);
    c.evict();
    assert_eq!(clear(&root).expect("cleared"), 0);
    assert!(std::fs::symlink_metadata(&events).is_err());
    assert_eq!(listing(&mine), before);
    let _ = std::fs::remove_dir_all(&base);
}
