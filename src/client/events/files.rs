//! The cache of settled events, read and written for a fetch's driver: a range split into the
//! parts the cache holds and the gaps, a held part's file read, and a completed window's
//! settled part written. The planner names what to read and keep; this does it.

use super::page::{in_order, parse_events, parse_page, settled_before, Event, EventForm, Page};
use super::{Query, Settled};
use crate::client::cache::{Damage, Piece, Segment};
use crate::client::Client;
use crate::time::format_ms;

/// The events of a cached segment of `report`'s events as one page; None when its file is
/// gone, or damaged (then removed, with a warning).
pub(super) fn load(
    client: &Client,
    report: Option<&str>,
    segment: &Segment,
    keep: EventForm,
) -> Option<Page> {
    let cache = client.cache()?;
    let damage = match cache.read(report, segment) {
        Ok(body) => {
            let url = client.config().url("/v2/events");
            match parse_page(&url, body, keep) {
                Ok(page) if page.events.len() as u64 != segment.events => Damage::Corrupt(format!(
                    "holds {} events where its header says {}",
                    page.events.len(),
                    segment.events
                )),
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
        client.http().warn(format!(
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

/// What a write of a window's settled part did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kept {
    /// It is in the cache (which then keeps to its cap when the fetch ends).
    Written,
    /// Nothing was written (no cache, or bodies that hold no events).
    Nothing,
    /// The cache cannot be written (warned about): the fetch writes no more.
    Failed,
}

/// Writes the settled part of a completed window of `report`'s events to the cache: its
/// `events` (sorted) when they hold their text, else those of its pages' bodies, kept once
/// each as the window keeps them.
pub(super) fn keep_settled(
    client: &Client,
    report: Option<&str>,
    keep: EventForm,
    settled: &Settled,
    events: &[Event],
) -> Kept {
    let Some(cache) = client.cache() else {
        return Kept::Nothing;
    };
    let Settled {
        lo, cut, requests, ..
    } = *settled;
    let written = if keep == EventForm::Text {
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
        let url = client.config().url("/v2/events");
        let mut all = Vec::new();
        for body in &settled.bodies {
            match parse_events(&url, body) {
                Ok(page) => all.extend(page),
                Err(_) => return Kept::Nothing,
            }
        }
        all.retain(|e| e.start_ms >= lo && e.start_ms < cut);
        in_order(&mut all);
        cache.write(report, lo, cut, requests, all.iter().map(Event::text))
    };
    match written {
        Ok(()) => Kept::Written,
        Err(e) => {
            client.http().warn(format!(
                "cannot write the cache of settled events in `{}` ({e}): this read goes on \
                 without it",
                cache.root().display()
            ));
            Kept::Failed
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
