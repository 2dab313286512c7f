use super::*;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sv-quota-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn counts_until_the_budget_then_refuses_without_counting() {
    let d = dir("budget");
    let l = Ledger::open("https://api.test/", "key-1234", Some(3), Some(&d));
    for _ in 0..3 {
        l.spend().expect("within budget");
    }
    let e = l.spend().expect_err("past the budget");
    let Error::Quota {
        used,
        limit,
        message,
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!((*used, *limit), (3, Some(3)));
    assert!(e.to_string().contains("comes back at"), "{e}");
    // The setting it advises is named apart from the text, for each surface to say.
    let named: Vec<_> = message
        .parts()
        .iter()
        .filter_map(|p| match p {
            crate::wording::Part::Name { key, said } => Some((key.as_str(), said.as_str())),
            crate::wording::Part::Text(_) => None,
        })
        .collect();
    assert_eq!(named, [("daily_requests", "`Limits(daily_requests=...)`")]);
    let q = l.quota();
    assert_eq!((q.used, q.remaining), (3, Some(0)));
    // Another client of the same key and service sees the same count.
    let other = Ledger::open("https://api.test/", "key-1234", Some(3), Some(&d));
    assert!(other.spend().is_err());
    // Another key has its own.
    let mine = Ledger::open("https://api.test/", "key-5678", Some(3), Some(&d));
    assert!(mine.spend().is_ok());
    let _ = std::fs::remove_dir_all(&d);
}

#[cfg(unix)]
#[test]
fn the_ledger_is_0600_in_0700_directories_it_makes_and_leaves_others_as_they_are() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o7777;
    let d = dir("modes");
    let made = d.join("a").join("ledgers");
    let l = Ledger::open("https://api.test/", "key", None, Some(&made));
    l.spend().expect("no limit");
    let file = l.path().expect("a file").to_path_buf();
    assert_eq!(mode(&file), 0o600);
    assert_eq!(
        (mode(&d), mode(&d.join("a")), mode(&made)),
        (0o700, 0o700, 0o700)
    );
    // A shared directory that exists keeps its mode; an earlier ledger becomes private.
    let shared = dir("modes-shared");
    std::fs::create_dir_all(&shared).expect("mkdir");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).expect("chmod");
    let earlier = shared.join(file_name("https://api.test/", "key"));
    std::fs::write(&earlier, b"").expect("write");
    std::fs::set_permissions(&earlier, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let l = Ledger::open("https://api.test/", "key", None, Some(&shared));
    assert_eq!(l.path(), Some(earlier.as_path()));
    assert_eq!((mode(&shared), mode(&earlier)), (0o1777, 0o600));
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&shared);
}

#[test]
fn the_key_is_not_in_the_file_or_its_name() {
    let d = dir("secret");
    let l = Ledger::open("https://api.test/", "very-secret-key", None, Some(&d));
    l.spend().expect("no limit");
    let path = l.path().expect("a file").to_path_buf();
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(!text.contains("very-secret-key"), "{text}");
    assert!(!path.to_string_lossy().contains("very-secret"));
    assert!(text.contains("\"used\":1"), "{text}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_day_is_the_services() {
    let d = dir("day");
    let l = Ledger::open("https://api.test/", "key-1234", Some(1), Some(&d));
    l.spend().expect("first");
    assert!(l.spend().is_err());
    // The service's Date says it is tomorrow: a new budget.
    let mut h = HeaderMap::new();
    let tomorrow = chrono::Utc::now() + chrono::Duration::days(1);
    h.insert(
        DATE,
        tomorrow
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string()
            .parse()
            .expect("header"),
    );
    l.observe(&h);
    l.spend().expect("a new day");
    assert_eq!(l.quota().used, 1);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_long_wait_blocks_every_client_until_it_passes() {
    let d = dir("block");
    let l = Ledger::open("https://api.test/", "key-1234", None, Some(&d));
    let e = l.block(3_600_000, "the service answered 429".into());
    assert!(matches!(e, Error::Quota { .. }));
    let other = Ledger::open("https://api.test/", "key-1234", None, Some(&d));
    assert!(other.spend().is_err());
    assert_eq!(other.quota().remaining, None);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn one_long_wait_stops_its_call_and_a_second_one_every_client() {
    let d = dir("claim");
    let a = Ledger::open("https://api.test/", "key-1234", None, Some(&d));
    let b = Ledger::open("https://api.test/", "key-1234", None, Some(&d));
    // One answer: the call that got it raises, the others of the machine go on.
    let e = a.claim(3_600_000, "the service answered 429".into());
    assert!(matches!(e, Error::Quota { .. }), "{e:?}");
    assert!(e.to_string().contains("a second such answer"), "{e}");
    b.spend().expect("one answer stops no other client");
    a.spend().expect("nor the next call of its own client");
    assert_eq!(b.quota().remaining, None);
    // A second one, to any client of the machine, confirms it: every client waits.
    let e = b.claim(3_600_000, "the service answered 429".into());
    assert!(
        matches!(e, Error::Quota { resets_at_ms, .. } if resets_at_ms > 0),
        "{e:?}"
    );
    assert!(a.spend().is_err());
    assert!(b.spend().is_err());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn one_long_wait_near_the_daily_limit_stops_every_client() {
    let d = dir("claim-near");
    let a = Ledger::open("https://api.test/", "key-1234", Some(10), Some(&d));
    let b = Ledger::open("https://api.test/", "key-1234", Some(10), Some(&d));
    for _ in 0..9 {
        a.spend().expect("under the limit");
    }
    // 9 of 10 used: the service's own count may well be at the limit.
    let _ = a.claim(3_600_000, "the service answered 429".into());
    assert_eq!(b.quota().remaining, Some(0));
    assert!(b.spend().is_err());
    // 8 of 10 is not near: one answer stops its call alone.
    let d2 = dir("claim-far");
    let c = Ledger::open("https://api.test/", "key-1234", Some(10), Some(&d2));
    for _ in 0..8 {
        c.spend().expect("under the limit");
    }
    let _ = c.claim(3_600_000, "the service answered 429".into());
    c.spend().expect("not near the limit");
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&d2);
}

#[tokio::test]
async fn an_allowance_bounds_the_requests_until_it_ends() {
    let l = Ledger::open("https://api.test/", "key-1234", None, None);
    l.take_granted().await.expect("none in force");
    assert_eq!(l.allowance(), None);
    l.grant(2);
    l.take_granted().await.expect("1");
    l.take_granted().await.expect("2");
    assert_eq!(l.allowance(), Some(0));
    // None left: the request waits for the next grant.
    let short = std::time::Duration::from_millis(20);
    assert!(tokio::time::timeout(short, l.take_granted()).await.is_err());
    let (took, ()) = tokio::join!(l.take_granted(), async {
        tokio::time::sleep(short).await;
        l.grant(3);
    });
    took.expect("granted");
    assert_eq!(l.allowance(), Some(2));
    l.close_allowance();
    l.take_granted().await.expect("what is left still goes");
    l.take_granted().await.expect("the last");
    let e = l.take_granted().await.expect_err("closed and spent");
    assert!(matches!(e, Error::Quota { .. }), "{e}");
    assert!(e.to_string().contains("comes back at"), "{e}");
    l.grant(4);
    assert_eq!(l.end_allowance(), 4);
    l.take_granted().await.expect("none in force again");
}

/// Sets the time `path` was last written `ago`.
fn written_ago(path: &Path, ago: std::time::Duration) {
    let file = File::options().write(true).open(path).expect("open");
    let then = std::time::SystemTime::now() - ago;
    file.set_modified(then).expect("set mtime");
}

#[test]
fn opening_a_ledger_removes_those_unused_for_two_days() {
    let d = dir("prune");
    let day = std::time::Duration::from_secs(86_400);
    let old = Ledger::open("http://127.0.0.1:1/", "key-old", Some(9), Some(&d));
    old.spend().expect("counted");
    let recent = Ledger::open("http://127.0.0.1:2/", "key-new", Some(9), Some(&d));
    recent.spend().expect("counted");
    let mine = Ledger::open("https://api.test/", "key-1234", Some(9), Some(&d));
    mine.spend().expect("counted");
    let other = d.join("notes.txt");
    std::fs::write(&other, "not a ledger").expect("write");
    for path in [old.path(), mine.path()].into_iter().flatten() {
        written_ago(path, 3 * day);
    }
    written_ago(recent.path().expect("a file"), day);
    written_ago(&other, 3 * day);
    let reopened = Ledger::open("https://api.test/", "key-1234", Some(9), Some(&d));
    let mut left: Vec<_> = std::fs::read_dir(&d)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .collect();
    left.sort();
    let mut kept = vec![
        recent.path().expect("a file").to_path_buf(),
        reopened.path().expect("a file").to_path_buf(),
        other,
    ];
    kept.sort();
    // The stale ledger of another key is gone; its own (whatever its age), a recent one
    // and other files stay.
    assert_eq!(left, kept);
    assert_eq!(reopened.quota().used, 1);
    // A client whose ledger was removed under it counts in the new file, with the others.
    old.spend().expect("counted again");
    let again = Ledger::open("http://127.0.0.1:1/", "key-old", Some(9), Some(&d));
    assert!(again.path().expect("a file").exists());
    assert_eq!(again.quota().used, 1);
    old.spend().expect("counted");
    assert_eq!(again.quota().used, 2);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn without_a_directory_the_ledger_is_in_memory() {
    let l = Ledger::open("https://api.test/", "key-1234", Some(2), None);
    assert!(l.path().is_none());
    l.spend().expect("1");
    l.spend().expect("2");
    assert!(l.spend().is_err());
}

#[test]
fn the_directory_is_the_one_given_else_the_user_cache_directory() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(
        ledger_dir(Some(PathBuf::from("/q")), &env(&[("HOME", "/h")])),
        Some(PathBuf::from("/q"))
    );
    if cfg!(target_os = "linux") {
        // The variable is the Python layer's to read: the core takes the directory given.
        let both = &[("SURVEILLANCE_QUOTA_DIR", "/q"), ("HOME", "/h")];
        assert_eq!(
            ledger_dir(None, &env(both)),
            Some(PathBuf::from("/h/.cache/surveillance/quota"))
        );
    }
    assert_eq!(ledger_dir(None, &env(&[])), None);
}
