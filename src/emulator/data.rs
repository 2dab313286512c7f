//! The emulator's data set: sites, devices, cameras and reports as JSON values (and the table
//! of the lists it serves, [`LISTINGS`]), and events in a compact sorted store (32 bytes each)
//! rendered to JSON only when a page is served.

use chrono::{DateTime, NaiveDate, Offset, TimeZone};
use chrono_tz::Tz;
use serde_json::{json, Value};

use crate::rng::{mix, push_uuid, Rng};
use crate::time::push_time;

use crate::time::DAY_MS;

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
pub struct Report {
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

/// One event in 32 bytes; its JSON is rendered from this and the site/camera tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ev {
    /// startTime, Unix epoch milliseconds.
    pub start_ms: i64,
    /// Sequence number: the event id is derived from it and the seed.
    pub seq: u32,
    /// endTime - startTime.
    pub dur_ms: u32,
    /// createTime - endTime: negative once [`Data::update_event`] moved the end past the
    /// creation.
    pub create_delay_ms: i32,
    /// Index in `Data::cams`.
    pub cam: u32,
    /// UTC offset of the site at startTime, minutes.
    pub offset_min: i16,
    /// Bit 0: `confirmed` present; bit 1: its value; bits 2-3: marker kind.
    pub flags: u8,
}

/// What [`Data::update_event`] changes of an event; a field left None stays as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct Change {
    /// The new endTime, epoch ms (not before its startTime).
    pub end_ms: Option<i64>,
    /// The new `details.confirmed`.
    pub confirmed: Option<bool>,
    /// The new site, an index in `Data::site_info`.
    pub site: Option<usize>,
}

/// A list the emulator serves: the one table a new list endpoint is added to (with its
/// records in [`Data`]). Its path, the query parameters that narrow it (each matched, without
/// regard to case, against a key of the record) and its records, in the order served.
#[derive(Debug)]
pub struct Listing {
    /// `sites`, `devices`, ... (as `Emulator.resources` takes it).
    pub name: &'static str,
    /// Its path.
    pub path: &'static str,
    /// (query parameter, key of the record) for each filter.
    pub filters: &'static [(&'static str, &'static str)],
    /// Every record of the list.
    pub records: fn(&Data) -> Vec<&Value>,
}

/// The lists, in the order the documentation gives them.
pub const LISTINGS: [Listing; 4] = [
    Listing {
        name: "sites",
        path: "/v2/sites",
        filters: &[],
        records: |d| d.sites.iter().collect(),
    },
    Listing {
        name: "devices",
        path: "/v2/devices",
        filters: &[],
        records: |d| d.devices.iter().collect(),
    },
    Listing {
        name: "cameras",
        path: "/v2/cameras",
        filters: &[("siteId", "siteId"), ("deviceId", "deviceId")],
        records: |d| d.cameras.iter().collect(),
    },
    Listing {
        name: "reports",
        path: "/v2/reports",
        filters: &[],
        // A report the caller may not read is not listed.
        records: |d| {
            d.reports
                .iter()
                .filter(|r| r.visible)
                .map(|r| &r.json)
                .collect()
        },
    },
];

/// The list called `name`.
pub fn listing(name: &str) -> Option<&'static Listing> {
    LISTINGS.iter().find(|l| l.name == name)
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
    pub reports: Vec<Report>,
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

const BRANDS: [&str; 6] = [
    "Northwind Coffee",
    "Bluebird Burgers",
    "Summit Fuel",
    "Harbor Pharmacy",
    "Maple Market",
    "Comet Tacos",
];

const CITIES: [(&str, &str); 16] = [
    ("New York", "America/New_York"),
    ("Chicago", "America/Chicago"),
    ("Denver", "America/Denver"),
    ("Phoenix", "America/Phoenix"),
    ("Los Angeles", "America/Los_Angeles"),
    ("Anchorage", "America/Anchorage"),
    ("Honolulu", "Pacific/Honolulu"),
    ("Toronto", "America/Toronto"),
    ("St. John's", "America/St_Johns"),
    ("London", "Europe/London"),
    ("Berlin", "Europe/Berlin"),
    ("Madrid", "Europe/Madrid"),
    ("Kolkata", "Asia/Kolkata"),
    ("Kathmandu", "Asia/Kathmandu"),
    ("Sydney", "Australia/Sydney"),
    ("Auckland", "Pacific/Auckland"),
];

const RETENTIONS: [u32; 4] = [7, 14, 30, 90];

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

/// How busy a local hour is, relative to the peak (lunch and dinner).
fn hour_weight(hour: u32) -> f64 {
    match hour {
        11..=13 => 1.0,
        17..=19 => 0.9,
        7..=10 | 14..=16 => 0.55,
        20..=21 => 0.45,
        _ => 0.15,
    }
}

impl Data {
    /// Generates the data set for `cfg`, deterministically.
    pub fn generate(cfg: &DataConfig) -> Data {
        let mut rng = Rng::new(cfg.seed, 1);
        let customer = rng.uuid();
        let mut sites = Vec::with_capacity(cfg.sites);
        let mut devices = Vec::new();
        let mut cameras = Vec::new();
        let mut site_info = Vec::with_capacity(cfg.sites);
        let mut cams = Vec::new();
        for s in 0..cfg.sites {
            let brand = BRANDS[rng.below(BRANDS.len() as u64) as usize];
            let (city, tz_name) = CITIES[rng.below(CITIES.len() as u64) as usize];
            let tz: Tz = tz_name.parse().unwrap_or(Tz::UTC);
            let site_id = rng.uuid();
            let n_devices = match rng.below(10) {
                0..=6 => 1,
                7..=8 => 2,
                _ => 3,
            };
            let address = format!("{} Main Street, {city}", 10 + rng.below(9000));
            let twenty_four = brand == "Summit Fuel" || rng.chance(0.1);
            let (open_min, close_min) = if twenty_four {
                (0, 1440)
            } else {
                (
                    6 * 60 + 30 * rng.below(5) as u32,
                    20 * 60 + 30 * rng.below(7) as u32,
                )
            };
            let mut device_ids = Vec::new();
            let mut site_cams = Vec::new();
            let (mut cam_total, mut cam_offline) = (0u64, 0u64);
            for d in 0..n_devices {
                let device_id = rng.uuid();
                let n_cams = 4 + rng.below(9);
                let mut dev_offline = 0u64;
                for c in 0..n_cams {
                    let zone = if c == 0 {
                        Zone::Entrance
                    } else {
                        Zone::ALL[rng.below(Zone::ALL.len() as u64) as usize]
                    };
                    let cam_id = rng.uuid();
                    let name = format!("{} {}", zone.label(), c + 1 + d * 16);
                    let online = !rng.chance(0.05);
                    if !online {
                        dev_offline += 1;
                    }
                    let streams: Vec<Value> = [("HD", 1920, 1080, 15.0, 2_000_000), ("SD", 640, 360, 7.5, 400_000)]
                        .iter()
                        .take(1 + rng.below(2) as usize)
                        .map(|(sname, w, h, fps, bps)| {
                            json!({
                                "id": rng.uuid(),
                                "name": sname,
                                "retention": RETENTIONS[rng.below(4) as usize],
                                "dimensions": {"width": w, "height": h},
                                "fps": fps,
                                "average_bps": bps + rng.below(100_000),
                                "earliestSegmentDate": format!("{}", 1_735_689_600_000u64 + rng.below(30 * DAY_MS as u64)),
                            })
                        })
                        .collect();
                    let known = rng.chance(0.8);
                    cameras.push(json!({
                        "id": cam_id,
                        "deviceId": device_id,
                        "name": name,
                        "status": if online { "online" } else { "offline" },
                        "siteId": site_id,
                        "streams": streams,
                        "ip": format!("10.{}.{}.{}", s % 250, d * 16 + c / 250, 10 + c),
                        "manufacturer": if known { Value::from("Axis") } else { Value::Null },
                        "model": if known { Value::from(format!("P32{}", 10 + rng.below(80))) } else { Value::Null },
                        "serialNumber": if known { Value::from(format!("ACCC8E{:06X}", rng.below(1 << 24))) } else { Value::Null },
                    }));
                    site_cams.push(cams.len() as u32);
                    cams.push(CamInfo {
                        site: s as u32,
                        device_id: device_id.clone(),
                        json: json!({"id": cam_id, "name": name}).to_string(),
                        name_json: json_contents(&name),
                        name,
                        zone,
                    });
                }
                cam_total += n_cams;
                cam_offline += dev_offline;
                devices.push(json!({
                    "id": device_id,
                    "customerId": customer,
                    "name": format!("NVR-{}", d + 1),
                    "status": if dev_offline == n_cams { "offline" } else { "online" },
                    "address": address,
                    "timezoneId": tz_name,
                    "totalCameras": n_cams,
                    "offlineCameras": dev_offline,
                    "siteId": site_id,
                }));
                device_ids.push(device_id);
            }
            let tags = vec![format!("Brand:{brand}"), format!("City:{city}")];
            let external = match rng.below(10) {
                0 => Value::Null,
                1 => Value::from(""),
                _ => Value::from(format!("STORE-{:04}", s + 1)),
            };
            let mut site_tags = vec!["cameras:ai"];
            if rng.chance(0.6) {
                site_tags.push("data-integration:pos");
            }
            sites.push(json!({
                "id": site_id,
                "customerId": customer,
                "primaryDeviceId": device_ids[0],
                "motionAlarmScheduleId": rng.uuid(),
                "cloudStoragePackageId": if rng.chance(0.7) { Value::from(rng.uuid()) } else { Value::Null },
                "name": format!("{brand} {city} #{}", s + 1),
                "address": address,
                "timezone": tz_name,
                "type": "STANDARD",
                "externalId": external,
                "status": if rng.chance(0.95) { "ACTIVE" } else { "VIRTUAL" },
                "visibilityStatus": "VISIBLE",
                "updatedAt": 1_767_225_600 + rng.below(90 * DAY_MS as u64 / 1000),
                "deletedAt": 0,
                "tags": site_tags,
                "locationTags": tags,
                "deviceCount": n_devices,
                "cameraCount": cam_total,
                "onlineCameraCount": cam_total - cam_offline,
                "offlineCameraCount": cam_offline,
            }));
            site_info.push(SiteInfo {
                id: site_id,
                tz,
                tags_json: format!("\"locationTags\":{}", Value::from(tags)),
                open_min,
                close_min,
                cameras: site_cams,
                weight: 0.5 + rng.unit(),
            });
        }

        let report_defs: [(Option<Zone>, bool, &str, &str); 4] = [
            (
                None,
                true,
                "All dwell-time events",
                "Tous les temps d'attente",
            ),
            (
                Some(Zone::DriveThru),
                true,
                "Drive-thru dwell time",
                "Temps d'attente au drive",
            ),
            (
                Some(Zone::Checkout),
                true,
                "Checkout queue",
                "File d'attente en caisse",
            ),
            (
                Some(Zone::Parking),
                false,
                "Loss prevention (restricted)",
                "Prévention des pertes",
            ),
        ];
        let reports = report_defs
            .iter()
            .map(|(zone, visible, en, fr)| {
                let id = rng.uuid();
                Report {
                    json: json!({
                        "id": id,
                        "name": {"en-US": en, "fr-FR": fr},
                        "description": {"en-US": format!("{en}, all sites"), "fr-FR": format!("{fr}, tous les sites")},
                    }),
                    id,
                    zone: *zone,
                    visible: *visible,
                }
            })
            .collect();

        let start_ms = cfg
            .start
            .and_hms_opt(0, 0, 0)
            .map(|d| d.and_utc().timestamp_millis())
            .unwrap_or(0);
        let mut data = Data {
            seed: cfg.seed,
            sites,
            devices,
            cameras,
            reports,
            site_info,
            cams,
            events: Vec::new(),
            report_index: Vec::new(),
            next_seq: 0,
            start_ms,
            end_ms: start_ms + cfg.days as i64 * DAY_MS,
        };
        if !data.site_info.is_empty() {
            for day in 0..cfg.days {
                data.generate_day(cfg, day);
            }
        }
        data.rebuild_index();
        data
    }

    /// Appends the events of UTC day `day` (sorted), exactly `events_per_day` of them.
    fn generate_day(&mut self, cfg: &DataConfig, day: u32) {
        let mut rng = Rng::new(cfg.seed, 1000 + day as u64);
        let day_ms = self.start_ms + day as i64 * DAY_MS;
        let first = self.events.len();
        let mut budget = cfg.events_per_day;
        // A dense burst: a camera reconnects and uploads its backlog stamped with one millisecond.
        if cfg.events_per_day >= 2000 {
            let size = 101 + rng.below(100);
            let s = rng.below(self.site_info.len() as u64) as usize;
            let at = day_ms + rng.below(DAY_MS as u64) as i64;
            for _ in 0..size {
                self.push_event(&mut rng, s, at);
            }
            budget -= size;
        }
        let total_weight: f64 = self.site_info.iter().map(|s| s.weight).sum();
        // Largest remainder: shares that add up to the budget exactly.
        let mut counts: Vec<(u64, f64, usize)> = self
            .site_info
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let share = budget as f64 * s.weight / total_weight;
                (share.floor() as u64, share - share.floor(), i)
            })
            .collect();
        let assigned: u64 = counts.iter().map(|c| c.0).sum();
        counts.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)));
        for c in counts.iter_mut().take((budget - assigned) as usize) {
            c.0 += 1;
        }
        counts.sort_by_key(|c| c.2);
        for (n, _, s) in counts {
            let info = &self.site_info[s];
            let (tz, open, close) = (info.tz, info.open_min, info.close_min);
            let off0 = offset_minutes(tz, day_ms);
            let off1 = offset_minutes(tz, day_ms + DAY_MS - 1);
            for _ in 0..n {
                // Rejection sampling: uniform over the UTC day, kept in proportion to how busy
                // the site's local hour is, so events follow local opening hours.
                let at = loop {
                    let t = day_ms + rng.below(DAY_MS as u64) as i64;
                    let off = if off0 == off1 {
                        off0
                    } else {
                        offset_minutes(tz, t)
                    };
                    let local_min =
                        (((t + off as i64 * 60_000).rem_euclid(DAY_MS)) / 60_000) as u32;
                    let open_now = if open <= close {
                        local_min >= open && local_min < close
                    } else {
                        local_min >= open || local_min < close
                    };
                    if open_now && rng.chance(hour_weight(local_min / 60)) {
                        break t;
                    }
                };
                self.push_event(&mut rng, s, at);
            }
        }
        self.events[first..].sort_unstable_by_key(|e| (e.start_ms, e.seq));
    }

    /// Appends one event of site `s` starting at `at` (the caller keeps the order).
    fn push_event(&mut self, rng: &mut Rng, s: usize, at: i64) {
        let info = &self.site_info[s];
        let cam = info.cameras[rng.below(info.cameras.len() as u64) as usize];
        let zone = self.cams[cam as usize].zone;
        let base_secs = match zone {
            Zone::DriveThru => 180.0,
            Zone::Checkout => 120.0,
            Zone::Entrance => 25.0,
            Zone::Lobby => 900.0,
            Zone::Parking => 300.0,
        };
        // Log-normal-ish dwell times: most short, a long tail.
        let factor = (-(1.0 - rng.unit()).ln()).powf(1.3) + 0.1;
        let dur_ms = ((base_secs * factor * 1000.0) as u32).clamp(1000, 4 * 3_600_000);
        let confirmed_present = rng.chance(0.9);
        let confirmed = rng.chance(0.8);
        let marker = rng.below(MARKERS.len() as u64) as u8;
        let flags = (confirmed_present as u8) | ((confirmed as u8) << 1) | (marker << 2);
        let ev = Ev {
            start_ms: at,
            seq: self.next_seq,
            dur_ms,
            create_delay_ms: 500 + rng.below(30_000) as i32,
            cam,
            offset_min: offset_minutes(info.tz, at),
            flags,
        };
        self.next_seq += 1;
        self.events.push(ev);
    }

    /// Rebuilds the per-report positions after the events changed.
    pub fn rebuild_index(&mut self) {
        let zones: Vec<Option<Zone>> = self.reports.iter().map(|r| r.zone).collect();
        self.report_index = zones
            .iter()
            .map(|zone| match zone {
                None => Vec::new(),
                Some(z) => self
                    .events
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| self.cams[e.cam as usize].zone == *z)
                    .map(|(i, _)| i as u32)
                    .collect(),
            })
            .collect();
    }

    /// Inserts `count` events starting exactly at `at_ms` at site `site` (or a chosen one) and
    /// returns their ids. Used by tests for dense bursts and late-created events.
    pub fn add_events(&mut self, at_ms: i64, count: u32, site: Option<usize>) -> Vec<String> {
        self.add_events_created(at_ms, count, site, None)
    }

    /// As `add_events`; with `created_ms`, every new event has exactly that `createTime` (an
    /// event created late, e.g. inside an ETL job's settle period), its dwell time shortened
    /// when needed so that it ends by then. A `created_ms` before `at_ms` is taken as `at_ms`.
    pub fn add_events_created(
        &mut self,
        at_ms: i64,
        count: u32,
        site: Option<usize>,
        created_ms: Option<i64>,
    ) -> Vec<String> {
        if self.site_info.is_empty() {
            return Vec::new();
        }
        let mut rng = Rng::new(self.seed, 0xADD0_0000 + self.next_seq as u64);
        let s = site.unwrap_or_else(|| rng.below(self.site_info.len() as u64) as usize);
        let pos = self.events.partition_point(|e| e.start_ms <= at_ms);
        let mut tail = self.events.split_off(pos);
        let before = self.events.len();
        for _ in 0..count {
            self.push_event(&mut rng, s, at_ms);
        }
        if let Some(created) = created_ms {
            let span = u32::try_from(created.max(at_ms) - at_ms).unwrap_or(u32::MAX);
            for e in &mut self.events[before..] {
                e.dur_ms = e.dur_ms.min(span);
                e.create_delay_ms = i32::try_from(span - e.dur_ms).unwrap_or(i32::MAX);
            }
        }
        let ids = self.events[before..]
            .iter()
            .map(|e| self.event_id(e))
            .collect();
        self.events.append(&mut tail);
        self.rebuild_index();
        ids
    }

    /// Changes the event `id` as the service revises one (its dwell ended later, a person
    /// confirmed it, it was filed under another site): its id, startTime and createTime stay,
    /// the fields that follow from the change move with it (endTime, `details.duration_sec`
    /// and the subtitle with the end; deviceId, cameras, zone, tags and offsets with the
    /// site), and every later read serves the new version. The service's event has no update
    /// time, so nothing else tells the change. Returns the event's JSON as now served, or what
    /// is wrong with the change.
    pub fn update_event(&mut self, id: &str, change: Change) -> Result<String, String> {
        let pos = self
            .events
            .iter()
            .position(|e| self.event_id(e).eq_ignore_ascii_case(id))
            .ok_or_else(|| format!("no event `{id}`"))?;
        let e = self.events[pos];
        let mut new = e;
        if let Some(end) = change.end_ms {
            let dur = end
                .checked_sub(e.start_ms)
                .filter(|d| *d >= 0)
                .ok_or("`end_time` must not be before the event's startTime")?;
            new.dur_ms = u32::try_from(dur)
                .map_err(|_| "`end_time` must be within 49 days of the event's startTime")?;
            let created = e.start_ms + i64::from(e.dur_ms) + i64::from(e.create_delay_ms);
            new.create_delay_ms = (created - end).clamp(i32::MIN.into(), i32::MAX.into()) as i32;
        }
        if let Some(confirmed) = change.confirmed {
            new.flags = (new.flags & !3) | 1 | (u8::from(confirmed) << 1);
        }
        if let Some(s) = change.site {
            let info = self
                .site_info
                .get(s)
                .ok_or_else(|| format!("no site number {s}"))?;
            let zone = self.cams[e.cam as usize].zone;
            new.cam = info
                .cameras
                .iter()
                .copied()
                .find(|c| self.cams[*c as usize].zone == zone)
                .or_else(|| info.cameras.first().copied())
                .ok_or("that site has no camera")?;
            new.offset_min = offset_minutes(info.tz, e.start_ms);
        }
        let moved = self.cams[new.cam as usize].zone != self.cams[e.cam as usize].zone;
        self.events[pos] = new;
        if moved {
            self.rebuild_index();
        }
        let mut out = String::new();
        self.render_event(&new, &mut out);
        Ok(out)
    }

    /// The id of an event.
    pub fn event_id(&self, e: &Ev) -> String {
        let mut out = String::with_capacity(36);
        self.push_event_id(e, &mut out);
        out
    }

    fn push_event_id(&self, e: &Ev, out: &mut String) {
        let h = mix(self.seed ^ 0xE7E7_0000_0000 ^ e.seq as u64);
        push_uuid(out, h, mix(h ^ e.seq as u64));
    }

    /// Index of a report by id.
    pub fn report_by_id(&self, id: &str) -> Option<usize> {
        self.reports
            .iter()
            .position(|r| r.id.eq_ignore_ascii_case(id))
    }

    /// Number of events in the base sequence (all, or a report's).
    pub fn base_len(&self, report: Option<usize>) -> usize {
        match self.zone_index(report) {
            Some(ix) => ix.len(),
            None => self.events.len(),
        }
    }

    fn zone_index(&self, report: Option<usize>) -> Option<&Vec<u32>> {
        let r = report?;
        self.reports.get(r)?.zone?;
        self.report_index.get(r)
    }

    /// The event at position `i` of the base sequence.
    pub fn base_event(&self, report: Option<usize>, i: usize) -> &Ev {
        match self.zone_index(report) {
            Some(ix) => &self.events[ix[i] as usize],
            None => &self.events[i],
        }
    }

    /// First position in the base sequence whose start is `>= t` (or `> t` when `after`).
    pub fn lower_bound(&self, report: Option<usize>, t: i64, after: bool) -> usize {
        let key = |e: &Ev| {
            if after {
                e.start_ms <= t
            } else {
                e.start_ms < t
            }
        };
        match self.zone_index(report) {
            Some(ix) => ix.partition_point(|&p| key(&self.events[p as usize])),
            None => self.events.partition_point(key),
        }
    }

    /// Ids of events with `start <= startTime < end`, sorted by (startTime, id).
    pub fn truth(&self, start_ms: i64, end_ms: i64, report: Option<usize>) -> Vec<String> {
        let a = self.lower_bound(report, start_ms, false);
        let b = self.lower_bound(report, end_ms, false).max(a);
        let mut out: Vec<(i64, String)> = (a..b)
            .map(|i| {
                let e = self.base_event(report, i);
                (e.start_ms, self.event_id(e))
            })
            .collect();
        out.sort();
        out.into_iter().map(|(_, id)| id).collect()
    }

    /// Appends the JSON of one event to `out` (by pieces, without `format!`: every page served
    /// renders a hundred of them).
    pub fn render_event(&self, e: &Ev, out: &mut String) {
        let cam = &self.cams[e.cam as usize];
        let site = &self.site_info[cam.site as usize];
        let end = e.start_ms + e.dur_ms as i64;
        let created = end + e.create_delay_ms as i64;
        let dur_sec = e.dur_ms / 1000;
        let marker = MARKERS[((e.flags >> 2) & 3) as usize];
        let mut num = itoa::Buffer::new();
        out.push_str("{\"id\":\"");
        self.push_event_id(e, out);
        out.push_str("\",\"startTime\":\"");
        push_time(out, e.start_ms, e.offset_min);
        out.push_str("\",\"endTime\":\"");
        push_time(out, end, e.offset_min);
        out.push_str("\",\"type\":\"bookmark\",\"subtype\":\"ai-dwellTime\",\"siteId\":\"");
        out.push_str(&site.id);
        out.push_str("\",\"deviceId\":\"");
        out.push_str(&cam.device_id);
        out.push_str("\",\"title\":\"Dwell time: ");
        out.push_str(cam.zone.label());
        out.push_str("\",\"subtitle\":\"");
        out.push_str(&cam.name_json);
        out.push_str(" · ");
        out.push_str(num.format(dur_sec));
        out.push_str(" s\",");
        out.push_str(&site.tags_json);
        out.push_str(",\"createTime\":\"");
        push_time(out, created, e.offset_min);
        out.push_str("\",\"details\":{\"duration_sec\":");
        out.push_str(num.format(dur_sec));
        out.push(',');
        if e.flags & 1 != 0 {
            out.push_str(if e.flags & 2 != 0 {
                "\"confirmed\":true,"
            } else {
                "\"confirmed\":false,"
            });
        }
        out.push_str("\"origin\":\"ai-dwell-time\",\"localTime\":");
        out.push_str(num.format(e.start_ms + e.offset_min as i64 * 60_000));
        out.push_str(",\"generatedByEventStandard\":true,\"marker\":\"");
        out.push_str(marker);
        out.push_str("\",\"zone\":\"");
        out.push_str(cam.zone.label());
        out.push_str("\",\"visitors\":");
        out.push_str(num.format(1 + (e.seq % 3)));
        out.push_str("},\"cameras\":[");
        out.push_str(&cam.json);
        out.push_str("]}");
    }
}

/// `text` as the contents of a JSON string: escaped, without the enclosing quotes (which are
/// the first and last characters; a quote inside is escaped, so it stays).
fn json_contents(text: &str) -> String {
    let quoted = Value::from(text).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

#[cfg(test)]
mod tests {
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
