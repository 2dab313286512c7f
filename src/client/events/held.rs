//! Pages read ahead of the fetch that asks them: a plan's, a quota check's, and those a stopped
//! sync carried to its next run.

use std::collections::VecDeque;

use bytes::Bytes;

/// Pages a plan read of ranges that have settled, kept for the fetch of the same range that
/// usually follows it: a page the fetch asks with the same query is taken from here instead of
/// being asked again, so that planning a fetch costs only the probes the fetch does not make.
/// A range that ended more than the client's settle period ago no longer changes (as
/// `sync_events` relies on), so its pages are still true when the fetch comes; each is used
/// once, and none is kept past [`HELD_FOR`] or beyond [`HELD_BYTES`] in all (the oldest go
/// first; carried pages stay). A fetch's quota check (`quota_check`) holds the fetch's first
/// page the same way, for [`CHECKED_FOR`], whether its range has settled or not: the fetch
/// asks it next, within the same call. The pages a stopped sync carried to its next run (see `carry`) wait here
/// too, marked with what they are, for the window they were read of, until the run ends.
#[derive(Debug, Default)]
pub struct Held {
    pages: VecDeque<HeldPage>,
    bytes: usize,
}

#[derive(Debug)]
struct HeldPage {
    url: String,
    body: Bytes,
    at: std::time::Instant,
    ttl: std::time::Duration,
    /// Read by an earlier fetch (another run): checked when its window completes, and carried
    /// again if the run stops before a fetch takes it.
    carried: Option<CarriedKey>,
}

/// One page carried from a stopped fetch: the page at `offset` of the window queried
/// `[qs, qe)` (before widening), as the service sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarriedPage {
    /// Start of the window's query, epoch ms.
    pub qs: i64,
    /// End of the window's query, epoch ms.
    pub qe: i64,
    /// The page's offset.
    pub offset: usize,
    /// The page's body.
    pub body: Bytes,
}

/// What a carried page is: of which report's events, the page at `offset` of the window
/// queried `[qs, qe)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct CarriedKey {
    pub(super) report: Option<String>,
    pub(super) qs: i64,
    pub(super) qe: i64,
    pub(super) offset: usize,
}

/// How long a plan's page of a settled range waits for its fetch.
pub(super) const HELD_FOR: std::time::Duration = std::time::Duration::from_secs(900);
/// How long the page a fetch's quota check read waits for that fetch (which asks it next,
/// whether its range has settled or not).
pub(super) const CHECKED_FOR: std::time::Duration = std::time::Duration::from_secs(60);
/// How long the pages carried from a stopped sync wait for its next run's fetches (they are
/// settled: they do not change).
pub(super) const CARRIED_FOR: std::time::Duration = std::time::Duration::from_secs(86_400);
/// The most body bytes held.
const HELD_BYTES: usize = 64 << 20;

impl Held {
    pub(super) fn put(
        &mut self,
        url: String,
        body: Bytes,
        ttl: std::time::Duration,
        carried: Option<CarriedKey>,
    ) {
        self.expire();
        self.bytes += body.len();
        self.pages.push_back(HeldPage {
            url,
            body,
            at: std::time::Instant::now(),
            ttl,
            carried,
        });
        // The oldest go first, but a carried page: it stands for a request already paid, and
        // the run it was carried to holds no more than the stopped run held.
        while self.bytes > HELD_BYTES {
            let Some(at) = self.pages.iter().position(|p| p.carried.is_none()) else {
                break;
            };
            if let Some(p) = self.pages.remove(at) {
                self.bytes -= p.body.len();
            }
        }
    }

    /// The page held for `url`, and what it is if an earlier run read it; removed.
    pub(super) fn take(&mut self, url: &str) -> Option<(Bytes, Option<CarriedKey>)> {
        self.expire();
        let at = self.pages.iter().position(|p| p.url == url)?;
        let page = self.pages.remove(at)?;
        self.bytes -= page.body.len();
        Some((page.body, page.carried))
    }

    /// The carried pages of `report`'s events that no fetch took, removed.
    pub(super) fn take_carried(&mut self, report: Option<&str>) -> Vec<CarriedPage> {
        self.expire();
        let mut out = Vec::new();
        self.pages.retain(|p| match &p.carried {
            Some(k) if k.report.as_deref() == report => {
                out.push(CarriedPage {
                    qs: k.qs,
                    qe: k.qe,
                    offset: k.offset,
                    body: p.body.clone(),
                });
                false
            }
            _ => true,
        });
        self.bytes = self.pages.iter().map(|p| p.body.len()).sum();
        out
    }

    /// The furthest offset below `below` held of the query whose first page is `base` (none
    /// when no such page of it is held).
    pub(super) fn furthest(&self, base: &str, below: usize) -> Option<usize> {
        self.pages
            .iter()
            .filter(|p| p.at.elapsed() < p.ttl)
            .filter_map(|p| match p.url.strip_prefix(base)? {
                "" => Some(0),
                rest => rest.strip_prefix("&offset=")?.parse().ok(),
            })
            .filter(|o| *o < below)
            .max()
    }

    /// Drops the pages an earlier run read (their window did not hold together).
    pub(super) fn drop_carried(&mut self) {
        self.retain(|p| p.carried.is_none());
    }

    /// How many pages are held.
    pub(super) fn len(&self) -> usize {
        self.pages.len()
    }

    fn expire(&mut self) {
        self.retain(|p| p.at.elapsed() < p.ttl);
    }

    /// Keeps the pages `keep` says, and the count of their bytes.
    fn retain(&mut self, keep: impl Fn(&HeldPage) -> bool) {
        let before = self.pages.len();
        self.pages.retain(keep);
        if self.pages.len() != before {
            self.bytes = self.pages.iter().map(|p| p.body.len()).sum();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_page_is_used_once_and_the_oldest_go_past_the_cap() {
        let mut held = Held::default();
        held.put("a".into(), Bytes::from_static(b"[1]"), HELD_FOR, None);
        assert_eq!(held.take("b"), None);
        assert_eq!(held.take("a"), Some((Bytes::from_static(b"[1]"), None)));
        assert_eq!(held.take("a"), None);
        let big = Bytes::from(vec![b' '; HELD_BYTES / 2 + 1]);
        held.put("x".into(), big.clone(), HELD_FOR, None);
        held.put("y".into(), big.clone(), CHECKED_FOR, None);
        assert_eq!(held.take("x"), None);
        assert!(held.take("y").is_some());
        held.put(
            "q?s=1&offset=300".into(),
            Bytes::from_static(b"[]"),
            HELD_FOR,
            None,
        );
        held.put("q?s=1".into(), Bytes::from_static(b"[]"), HELD_FOR, None);
        held.put(
            "q?s=12&offset=900".into(),
            Bytes::from_static(b"[]"),
            HELD_FOR,
            None,
        );
        assert_eq!(held.furthest("q?s=1", 1000), Some(300));
        assert_eq!(held.furthest("q?s=1", 300), Some(0));
        assert_eq!(held.furthest("q?s=2", 1000), None);
        assert!(held.take("q?s=1&offset=300").is_some());
        assert_eq!(held.furthest("q?s=1", 1000), Some(0));
        held.retain(|_| false);
        let key = |offset| CarriedKey {
            report: None,
            qs: 1,
            qe: 2,
            offset,
        };
        held.put("c".into(), big.clone(), HELD_FOR, Some(key(0)));
        held.put("d".into(), big, HELD_FOR, None);
        // Past the cap, the oldest page not carried goes; a carried one stays.
        assert_eq!(held.take("d"), None);
        held.put("d".into(), Bytes::from_static(b"[]"), HELD_FOR, None);
        held.drop_carried();
        assert_eq!(held.take("c"), None);
        assert!(held.take("d").is_some());
        assert_eq!(held.bytes, 0);
        // Those no fetch took are carried again, each of its report only.
        held.put(
            "e".into(),
            Bytes::from_static(b"[2]"),
            CARRIED_FOR,
            Some(key(100)),
        );
        let other = CarriedKey {
            report: Some("r".into()),
            ..key(0)
        };
        held.put(
            "f".into(),
            Bytes::from_static(b"[3]"),
            CARRIED_FOR,
            Some(other),
        );
        let left = held.take_carried(None);
        assert_eq!(left.len(), 1);
        assert_eq!((left[0].offset, &left[0].body[..]), (100, &b"[2]"[..]));
        assert_eq!(held.len(), 1);
        assert_eq!(held.take_carried(Some("r")).len(), 1);
        assert_eq!((held.len(), held.bytes), (0, 0));
    }
}
