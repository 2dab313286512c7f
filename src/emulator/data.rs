//! The emulator's data set: sites, devices, cameras and reports as JSON values, and events in a
//! compact sorted store (32 bytes each) rendered to JSON only when a page is served. The
//! generation lives in `generate`, the events' store and rendering in `events`, the table of
//! the lists it serves ([`LISTINGS`]) in `listings`.

mod events;
mod generate;
mod listings;

use chrono::{DateTime, NaiveDate, Offset, TimeZone};
use chrono_tz::Tz;
use serde_json::Value;

pub use events::{Change, Ev};
pub use listings::{listing, Listing, LISTINGS};

/// What to generate: the knobs of `Emulator(seed, sites, days, events_per_day)`.
#[derive(Debug, Clone)]
pub struct DataConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Number of sites.
    pub sites: usize,
    /// Number of UTC days of events, from `start`.
    pub days: u32,
    /// Events per UTC day, over all sites.
    pub events_per_day: u64,
    /// First UTC day of events.
    pub start: NaiveDate,
}

impl Default for DataConfig {
    fn default() -> Self {
        DataConfig {
            seed: 0,
            sites: 20,
            days: 14,
            events_per_day: 5000,
            start: NaiveDate::from_ymd_opt(2026, 1, 5).unwrap_or_default(),
        }
    }
}

/// Where a camera looks: decides event titles and which reports an event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// Drive-through lane.
    DriveThru,
    /// Checkout counter.
    Checkout,
    /// Store entrance.
    Entrance,
    /// Dining room or lobby.
    Lobby,
    /// Parking lot.
    Parking,
}

impl Zone {
    const ALL: [Zone; 5] = [
        Zone::DriveThru,
        Zone::Checkout,
        Zone::Entrance,
        Zone::Lobby,
        Zone::Parking,
    ];

    fn label(self) -> &'static str {
        match self {
            Zone::DriveThru => "Drive-thru",
            Zone::Checkout => "Checkout",
            Zone::Entrance => "Entrance",
            Zone::Lobby => "Lobby",
            Zone::Parking => "Parking",
        }
    }
}

/// A report: which events it groups, and whether the emulator's caller may read it.
#[derive(Debug, Clone)]
pub struct ReportInfo {
    /// Report id.
    pub id: String,
    /// The zone whose events it groups; None groups every event.
    pub zone: Option<Zone>,
    /// False for the report that exists but is not visible to the caller (403).
    pub visible: bool,
    /// The JSON the service returns for it.
    pub json: Value,
}

/// What the emulator needs to know about a site when it serves events.
#[derive(Debug, Clone)]
pub struct SiteInfo {
    /// Site id.
    pub id: String,
    /// IANA time zone.
    pub tz: Tz,
    /// `"locationTags":[...]` rendered once.
    pub tags_json: String,
    /// Opening hours in local minutes of the day, `[open, close)`; (0, 1440) for 24 h sites.
    pub open_min: u32,
    /// See `open_min`.
    pub close_min: u32,
    /// Indexes of the site's cameras in `Data::cams`.
    pub cameras: Vec<u32>,
    /// Relative share of the day's events.
    pub weight: f64,
}

/// What the emulator needs to know about a camera when it serves events.
#[derive(Debug, Clone)]
pub struct CamInfo {
    /// Index of its site.
    pub site: u32,
    /// Its device's id.
    pub device_id: String,
    /// `{"id":..,"name":..}` rendered once.
    pub json: String,
    /// Camera name.
    pub name: String,
    /// Camera name as JSON string contents (escaped, without the quotes).
    pub name_json: String,
    /// Where it looks.
    pub zone: Zone,
}

/// The whole data set of one emulator.
#[derive(Debug)]
pub struct Data {
    /// Seed (event ids derive from it).
    pub seed: u64,
    /// Sites as served.
    pub sites: Vec<Value>,
    /// Devices as served.
    pub devices: Vec<Value>,
    /// Cameras as served.
    pub cameras: Vec<Value>,
    /// Every report, visible or not.
    pub reports: Vec<ReportInfo>,
    /// Per site.
    pub site_info: Vec<SiteInfo>,
    /// Per camera, same order as `cameras`.
    pub cams: Vec<CamInfo>,
    /// Events sorted by (start_ms, seq).
    pub events: Vec<Ev>,
    /// For each report with a zone: positions in `events` of its events, ascending.
    pub report_index: Vec<Vec<u32>>,
    /// Next free sequence number.
    pub next_seq: u32,
    /// First instant of the generated data.
    pub start_ms: i64,
    /// End (exclusive) of the generated data.
    pub end_ms: i64,
}

const MARKERS: [&str; 4] = ["dwell-end", "dwell-threshold", "queue-exit", "manual"];

/// Offset of `tz` at the UTC instant `ms`, in minutes.
fn offset_minutes(tz: Tz, ms: i64) -> i16 {
    match DateTime::from_timestamp_millis(ms) {
        Some(utc) => {
            let secs = tz
                .offset_from_utc_datetime(&utc.naive_utc())
                .fix()
                .local_minus_utc();
            (secs / 60) as i16
        }
        None => 0,
    }
}
#[cfg(test)]
mod tests {
    use super::generate::json_contents;
    use super::*;
    use crate::time::parse_time;

    fn small() -> Data {
        Data::generate(&DataConfig {
            seed: 3,
            sites: 8,
            days: 2,
            events_per_day: 2500,
            ..DataConfig::default()
        })
    }

    #[test]
    fn exact_count_sorted_and_in_range() {
        let d = small();
        assert_eq!(d.events.len(), 5000);
        assert!(d
            .events
            .windows(2)
            .all(|w| (w[0].start_ms, w[0].seq) < (w[1].start_ms, w[1].seq)));
        assert!(d
            .events
            .iter()
            .all(|e| e.start_ms >= d.start_ms && e.start_ms < d.end_ms));
    }

    #[test]
    fn bursts_share_a_millisecond() {
        let d = small();
        let mut best = 0;
        let mut run = 0;
        for w in d.events.windows(2) {
            run = if w[0].start_ms == w[1].start_ms {
                run + 1
            } else {
                0
            };
            best = best.max(run + 1);
        }
        assert!(best > 100, "largest burst {best}");
    }

    #[test]
    fn deterministic() {
        let a = small();
        let b = small();
        assert_eq!(a.events, b.events);
        assert_eq!(a.sites, b.sites);
        let c = Data::generate(&DataConfig {
            seed: 4,
            sites: 8,
            days: 2,
            events_per_day: 2500,
            ..DataConfig::default()
        });
        assert_ne!(a.sites, c.sites);
    }

    #[test]
    fn rendered_event_is_json_with_offset_times() {
        let d = small();
        let mut s = String::new();
        d.render_event(&d.events[10], &mut s);
        let v: Value = serde_json::from_str(&s).expect("valid json");
        let st = v["startTime"].as_str().unwrap_or_default();
        let parsed = DateTime::parse_from_rfc3339(st).expect("rfc3339");
        assert_eq!(parsed.timestamp_millis(), d.events[10].start_ms);
        assert_eq!(st.len(), "2026-01-05T09:15:23.123-05:00".len());
        assert!(v["details"]["duration_sec"].is_u64());
    }

    #[test]
    fn add_events_keeps_order_and_ids_unique() {
        let mut d = small();
        let at = d.events[100].start_ms;
        let ids = d.add_events(at, 50, Some(0));
        assert_eq!(ids.len(), 50);
        assert_eq!(
            d.truth(at, at + 1, None)
                .iter()
                .filter(|i| ids.contains(i))
                .count(),
            50
        );
        assert!(d.events.windows(2).all(|w| w[0].start_ms <= w[1].start_ms));
    }

    #[test]
    fn an_updated_event_is_served_changed_in_place() {
        let mut d = small();
        let e = d.events[200];
        let id = d.event_id(&e);
        let mut before = String::new();
        d.render_event(&e, &mut before);
        let before: Value = serde_json::from_str(&before).expect("json");
        let end = e.start_ms + 3_600_000;
        let other = (d.cams[e.cam as usize].site as usize + 1) % d.site_info.len();
        let change = Change {
            end_ms: Some(end),
            confirmed: Some(true),
            site: Some(other),
        };
        let after: Value =
            serde_json::from_str(&d.update_event(&id, change).expect("changed")).expect("json");
        assert_eq!(after["id"], before["id"]);
        assert_eq!(
            after["createTime"].as_str().and_then(parse_time),
            before["createTime"].as_str().and_then(parse_time)
        );
        assert_eq!(after["details"]["duration_sec"], 3600);
        assert_eq!(after["details"]["confirmed"], true);
        assert_eq!(
            after["siteId"].as_str(),
            Some(d.site_info[other].id.as_str())
        );
        assert_eq!(after["endTime"].as_str().and_then(parse_time), Some(end));
        assert_eq!(d.events[200].start_ms, e.start_ms);
        assert!(d.update_event("nope", Change::default()).is_err());
        let early = Change {
            end_ms: Some(e.start_ms - 1),
            ..Change::default()
        };
        assert!(d.update_event(&id, early).is_err());
    }

    #[test]
    fn json_contents_keep_escaped_quotes() {
        assert_eq!(json_contents("Till \"2\""), "Till \\\"2\\\"");
        assert_eq!(json_contents("a\\b · c"), "a\\\\b · c");
    }
}
