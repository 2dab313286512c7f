//! The cache of settled events in a fetch: a range split into the parts the cache holds and the
//! gaps, cached parts served as complete windows, and a completed window's settled part kept.

use bytes::Bytes;

use super::page::{in_order, parse_events, parse_page, settled_before, Event, EventForm, Page};
use super::{CacheWrites, Fetch, Mode, Query};
use crate::client::cache::{Damage, Piece, Segment};
use crate::client::Client;
use crate::time::format_ms;

impl Fetch {
    /// Adds the part `[lo, hi)` of a cached segment, complete without a request.
    pub(super) fn add_cached(&mut self, segment: Segment, lo: i64, hi: i64) {
        let mut w = self.new_window(lo, hi);
        w.mode = Mode::Known { end: 0 };
        w.done = true;
        w.cached = Some(segment);
        self.windows.insert(lo, w);
    }

    /// The events of a cached segment as one page; None when its file is gone, or damaged (then
    /// removed, with a warning).
    pub(super) fn load(&self, segment: &Segment) -> Option<Page> {
        let cache = self.client.cache()?;
        let damage = match cache.read(self.query.report_id.as_deref(), segment) {
            Ok(body) => {
                let url = self.client.config().url("/v2/events");
                match parse_page(&url, body, self.keep) {
                    Ok(page) if page.events.len() as u64 != segment.events => {
                        Damage::Corrupt(format!(
                            "holds {} events where its header says {}",
                            page.events.len(),
                            segment.events
                        ))
                    }
                    Ok(page) => match page
                        .events
                        .iter()
                        .find(|e| e.start_ms < segment.lo || e.start_ms >= segment.hi)
                    {
                        Some(e) => Damage::Corrupt(format!(
                            "holds an event of {}, out of its range",
                            format_ms(e.start_ms)
                        )),
                        None => return Some(page),
                    },
                    Err(e) => Damage::Corrupt(format!("does not hold events ({e})")),
                }
            }
            Err(d) => d,
        };
        if let Damage::Corrupt(why) = damage {
            self.client.http().warn(format!(
                "the cached events of {} to {} (`{}`) {why}: the file is removed and its range \
                 fetched again",
                format_ms(segment.lo),
                format_ms(segment.hi),
                segment.path.display()
            ));
            cache.remove(segment);
        }
        None
    }

    /// Writes the settled part `[lo, cut)` of a completed window to the cache, with the
    /// `requests` it took: its `events` (sorted) when they hold their text, else those of its
    /// pages' `bodies`, kept once each as the window keeps them. A cache that cannot be
    /// written is warned about once, then left alone by this fetch.
    pub(super) fn keep_settled(
        &mut self,
        lo: i64,
        cut: i64,
        requests: u64,
        events: &[Event],
        bodies: &[Bytes],
    ) {
        let Some(cache) = self.client.cache() else {
            return;
        };
        let report = self.query.report_id.as_deref();
        let written = if self.keep == EventForm::Text {
            cache.write(
                report,
                lo,
                cut,
                requests,
                events
                    .iter()
                    .filter(|e| e.start_ms >= lo && e.start_ms < cut)
                    .map(Event::text),
            )
        } else {
            let url = self.client.config().url("/v2/events");
            let mut all = Vec::new();
            for body in bodies {
                match parse_events(&url, body) {
                    Ok(page) => all.extend(page),
                    Err(_) => return,
                }
            }
            all.retain(|e| e.start_ms >= lo && e.start_ms < cut);
            in_order(&mut all);
            cache.write(report, lo, cut, requests, all.iter().map(Event::text))
        };
        match written {
            Ok(()) => self.wrote = true,
            Err(e) => {
                self.client.http().warn(format!(
                    "cannot write the cache of settled events in `{}` ({e}): this read goes on \
                     without it",
                    cache.root().display()
                ));
                self.cache_writes = CacheWrites::Skip;
            }
        }
    }
}

/// A query's range in pieces, in time order: the parts the client's cache holds of it (settled
/// ones only: the part within the settle period of now is always fetched) and the gaps. A
/// refresh drops what the cache held of the range and fetches it whole.
pub(super) fn pieces(client: &Client, query: &Query) -> Vec<Piece> {
    let (start, end) = (query.start_ms, query.end_ms);
    let Some(cache) = client.cache() else {
        return vec![Piece::Gap(start, end)];
    };
    let report = query.report_id.as_deref();
    let settled = end.min(settled_before(client)).max(start);
    if query.refresh {
        if settled > start {
            cache.forget(report, start, settled);
        }
        return vec![Piece::Gap(start, end)];
    }
    let mut out = if settled > start {
        cache.cover(report, start, settled)
    } else {
        Vec::new()
    };
    if end > settled {
        match out.last_mut() {
            Some(Piece::Gap(_, hi)) => *hi = end,
            _ => out.push(Piece::Gap(settled, end)),
        }
    }
    out
}
