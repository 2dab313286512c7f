//! The lists of the service (sites, devices, cameras, reports: one table, [`List`]) and their
//! auto-paging: 100 records a page until a short page; a list that reaches the offset ceiling
//! is split (cameras) or refused, never cut.

use arrow_schema::{DataType, Field};
use serde_json::value::RawValue;
use url::Url;

use super::arrow::{list_of, locale_map, strukt, utc_s, Layout, Source};
use super::error::{Error, Result};
use super::http::{Call, Http};

/// Records per page.
pub const PAGE: usize = 100;
/// The service refuses offsets at or above this.
pub const OFFSET_CEILING: usize = 10_000;

/// One record as the service sent it (JSON text, not parsed further).
pub type Record = Box<RawValue>;

/// The lists of the service: the one table a new list endpoint is added to. Each one's
/// facts stand together in its [`Spec`]: its name (as the bindings and the CLI call it), its
/// path, the route its requests are counted under, what it holds, its filters and its Arrow
/// layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Sites,
    Devices,
    Cameras,
    Reports,
}

/// What the client knows of one list.
#[derive(Debug)]
pub struct Spec {
    /// `sites`, `devices`, ...
    pub name: &'static str,
    /// Its path on the service.
    pub path: &'static str,
    /// The route its requests are counted under in the stats.
    pub route: &'static str,
    /// What it holds, in a few words (the CLI's help).
    pub about: &'static str,
    /// The query parameters that narrow it.
    pub filters: &'static [Filter],
    /// Its Arrow layout.
    pub layout: fn() -> Layout,
}

/// A query parameter that narrows a list to the records of one site, device, ...
#[derive(Debug)]
pub struct Filter {
    /// The parameter, as the service names it (`siteId`).
    pub param: &'static str,
    /// The keyword the bindings and the CLI take it as (`site_id`).
    pub keyword: &'static str,
}

const SITE: Filter = Filter {
    param: "siteId",
    keyword: "site_id",
};
const DEVICE: Filter = Filter {
    param: "deviceId",
    keyword: "device_id",
};

const SITES: Spec = Spec {
    name: "sites",
    path: "/v2/sites",
    route: "GET /v2/sites",
    about: "every site",
    filters: &[],
    layout: site_layout,
};
const DEVICES: Spec = Spec {
    name: "devices",
    path: "/v2/devices",
    route: "GET /v2/devices",
    about: "every recording device",
    filters: &[],
    layout: device_layout,
};
const CAMERAS: Spec = Spec {
    name: "cameras",
    path: "/v2/cameras",
    route: "GET /v2/cameras",
    about: "every camera, or those of one site or device",
    filters: &[SITE, DEVICE],
    layout: camera_layout,
};
const REPORTS: Spec = Spec {
    name: "reports",
    path: "/v2/reports",
    route: "GET /v2/reports",
    about: "every report (its id is the report_id of events)",
    filters: &[],
    layout: report_layout,
};

impl List {
    /// Every list, in the order the documentation gives them.
    pub const ALL: [List; 4] = [List::Sites, List::Devices, List::Cameras, List::Reports];

    /// Its facts.
    pub fn spec(self) -> &'static Spec {
        match self {
            List::Sites => &SITES,
            List::Devices => &DEVICES,
            List::Cameras => &CAMERAS,
            List::Reports => &REPORTS,
        }
    }

    /// Its name: `sites`, `devices`, `cameras`, `reports`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The list called `name`; an error naming the lists there are otherwise.
    pub fn named(name: &str) -> Result<List> {
        List::ALL
            .into_iter()
            .find(|l| l.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = List::ALL.iter().map(|l| l.name()).collect();
                Error::config(format!(
                    "no list `{}`: the lists are {}",
                    crate::text::shown(name),
                    names.join(", ")
                ))
            })
    }

    /// Its path on the service.
    pub fn path(self) -> &'static str {
        self.spec().path
    }

    /// The route its requests are counted under in the stats.
    pub fn route(self) -> &'static str {
        self.spec().route
    }

    /// Its Arrow layout.
    pub fn layout(self) -> Layout {
        (self.spec().layout)()
    }
}

/// Parses a page: a JSON array of records.
pub fn parse_page(url: &Url, body: &[u8]) -> Result<Vec<Record>> {
    serde_json::from_slice::<Vec<Record>>(body).map_err(|e| page_error(url, body, e))
}

/// The error for a page that is not a JSON array of records, quoting its start.
pub fn page_error(url: &Url, body: &[u8], e: serde_json::Error) -> Error {
    let start = super::http::body_start(body);
    Error::Decode {
        url: url.path().to_string(),
        detail: format!("expected a JSON array of records ({e}); the answer starts with `{start}`"),
    }
}

/// Every record of `path` with `params`, page after page.
pub async fn list_all(
    http: &Http,
    path: &str,
    route: &'static str,
    params: &[(&str, &str)],
) -> Result<Vec<Record>> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let mut url = http.config.url(path);
        {
            let mut q = url.query_pairs_mut();
            for (k, v) in params {
                q.append_pair(k, v);
            }
            if offset > 0 {
                q.append_pair("offset", &offset.to_string());
            }
        }
        if url.query() == Some("") {
            url.set_query(None);
        }
        let page = http
            .send_checked(&Call::get(url.clone(), route), |body| {
                parse_page(&url, &body)
            })
            .await?;
        let n = page.len();
        out.extend(page);
        if n < PAGE {
            return Ok(out);
        }
        offset += PAGE;
        if offset >= OFFSET_CEILING {
            return Err(Error::Ceiling {
                path: path.to_string(),
            });
        }
    }
}

/// Sites: `updatedAt`/`deletedAt` as timestamps in seconds; a `deletedAt` of 0 ("not
/// deleted", as the service documents it) is null.
fn site_layout() -> Layout {
    use Source::*;
    let text = |n: &'static str| (n, DataType::Utf8, Key(n));
    let int = |n: &'static str| (n, DataType::Int64, Key(n));
    Layout::new(
        "site",
        vec![
            text("id"),
            text("customerId"),
            text("primaryDeviceId"),
            text("motionAlarmScheduleId"),
            text("cloudStoragePackageId"),
            text("name"),
            text("address"),
            text("timezone"),
            text("type"),
            text("externalId"),
            text("status"),
            text("visibilityStatus"),
            ("updatedAt", utc_s(), Key("updatedAt")),
            ("deletedAt", utc_s(), ZeroIsNone("deletedAt")),
            ("tags", list_of(DataType::Utf8), Key("tags")),
            ("locationTags", list_of(DataType::Utf8), Key("locationTags")),
            int("deviceCount"),
            int("cameraCount"),
            int("onlineCameraCount"),
            int("offlineCameraCount"),
        ],
    )
}

/// Devices.
fn device_layout() -> Layout {
    use Source::*;
    let text = |n: &'static str| (n, DataType::Utf8, Key(n));
    Layout::new(
        "device",
        vec![
            text("id"),
            text("customerId"),
            text("name"),
            text("status"),
            text("address"),
            text("timezoneId"),
            ("totalCameras", DataType::Int64, Key("totalCameras")),
            ("offlineCameras", DataType::Int64, Key("offlineCameras")),
            text("siteId"),
        ],
    )
}

/// Cameras, with their nested streams.
fn camera_layout() -> Layout {
    use Source::*;
    let text = |n: &'static str| (n, DataType::Utf8, Key(n));
    let stream = strukt(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("retention", DataType::Int64, true),
        Field::new(
            "dimensions",
            strukt(vec![
                Field::new("width", DataType::Int64, true),
                Field::new("height", DataType::Int64, true),
            ]),
            true,
        ),
        Field::new("fps", DataType::Float64, true),
        Field::new("average_bps", DataType::Int64, true),
        Field::new("earliestSegmentDate", DataType::Utf8, true),
    ]);
    Layout::new(
        "camera",
        vec![
            text("id"),
            text("deviceId"),
            text("name"),
            text("status"),
            text("siteId"),
            ("streams", list_of(stream), Key("streams")),
            text("ip"),
            text("manufacturer"),
            text("model"),
            text("serialNumber"),
        ],
    )
}

/// Reports: locale maps as `map<utf8, utf8>`.
fn report_layout() -> Layout {
    use Source::*;
    Layout::new(
        "report",
        vec![
            ("id", DataType::Utf8, Key("id")),
            ("name", locale_map(), Key("name")),
            ("description", locale_map(), Key("description")),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::List;

    #[test]
    fn every_list_is_named_once_with_its_path_and_route() {
        for list in List::ALL {
            assert_eq!(List::named(list.name()).ok(), Some(list));
            assert_eq!(list.path(), format!("/v2/{}", list.name()));
            assert_eq!(list.route(), format!("GET {}", list.path()));
            assert!(!list.layout().schema().fields().is_empty());
        }
        let refused = List::named("zones").err().map(|e| e.to_string());
        assert!(refused.is_some_and(|m| m.contains("zones") && m.contains("sites, devices")));
    }

    #[test]
    fn a_site_deleted_at_0_is_not_deleted_and_its_deleted_at_is_null() {
        use arrow_array::{Array, TimestampSecondArray};
        let sites = [
            r#"{"id":"a","deletedAt":0,"updatedAt":1767600000}"#,
            r#"{"id":"b","deletedAt":1767600000,"updatedAt":0}"#,
            r#"{"id":"c"}"#,
        ];
        let batch = List::Sites
            .layout()
            .batch(sites.into_iter())
            .expect("batch");
        let column = |name: &str| {
            let i = batch.schema().index_of(name).expect("column");
            batch
                .column(i)
                .as_any()
                .downcast_ref::<TimestampSecondArray>()
                .expect("timestamps")
                .clone()
        };
        let deleted = column("deletedAt");
        assert!(deleted.is_null(0), "0 means not deleted");
        assert_eq!(deleted.value(1), 1_767_600_000);
        assert!(deleted.is_null(2));
        // Only deletedAt reads 0 as none: an updatedAt of 0 is the instant 0.
        assert!(!column("updatedAt").is_null(1));
    }

    #[test]
    fn the_start_of_an_answer_leaves_no_part_of_a_secret_cut_at_4_kib() {
        let key = "AK6+key/with~\"start\" cut=%41";
        crate::client::redact::register(key);
        let url = url::Url::parse("http://127.0.0.1/v2/sites").expect("url");
        // Control characters are left out of the start shown: what the cut left of the key
        // would come first.
        for at in [1, 9, 15, 30] {
            let body = format!("{{\"error\": {}\"{key}\"}}", "\n".repeat(4096 - 10 - at));
            let e = super::parse_page(&url, body.as_bytes()).expect_err("not a page");
            let shown = e.to_string();
            for run in key.as_bytes().windows(crate::client::redact::MIN_RUN) {
                let run = std::str::from_utf8(run).expect("ascii");
                assert!(!shown.contains(run), "{at}: {shown}");
            }
        }
    }
}
