//! Auto-paging of the plain lists (sites, devices, cameras, reports): 100 records a page until a
//! short page; a list that reaches the offset ceiling is split (cameras) or refused, never cut.

use serde_json::value::RawValue;
use url::Url;

use super::error::{Error, Result};
use super::http::{Call, Http};

/// Records per page.
pub const PAGE: usize = 100;
/// The service refuses offsets at or above this.
pub const OFFSET_CEILING: usize = 10_000;

/// One record as the service sent it (JSON text, not parsed further).
pub type Record = Box<RawValue>;

/// The plain lists of the service, each with its name (as the bindings and the CLI call it),
/// its path, the route its requests are counted under, and (in `arrow.rs`) its Arrow layout:
/// the one table a new list endpoint is added to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    Sites,
    Devices,
    Cameras,
    Reports,
}

impl List {
    /// Every list, in the order the documentation gives them.
    pub const ALL: [List; 4] = [List::Sites, List::Devices, List::Cameras, List::Reports];

    /// Its name: `sites`, `devices`, `cameras`, `reports`.
    pub fn name(self) -> &'static str {
        match self {
            List::Sites => "sites",
            List::Devices => "devices",
            List::Cameras => "cameras",
            List::Reports => "reports",
        }
    }

    /// The list called `name`; an error naming the lists there are otherwise.
    pub fn named(name: &str) -> Result<List> {
        List::ALL
            .into_iter()
            .find(|l| l.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = List::ALL.iter().map(|l| l.name()).collect();
                Error::Config(format!(
                    "no list `{}`: the lists are {}",
                    crate::text::shown(name),
                    names.join(", ")
                ))
            })
    }

    /// Its path on the service.
    pub fn path(self) -> &'static str {
        match self {
            List::Sites => "/v2/sites",
            List::Devices => "/v2/devices",
            List::Cameras => "/v2/cameras",
            List::Reports => "/v2/reports",
        }
    }

    /// The route its requests are counted under in the stats.
    pub fn route(self) -> &'static str {
        match self {
            List::Sites => "GET /v2/sites",
            List::Devices => "GET /v2/devices",
            List::Cameras => "GET /v2/cameras",
            List::Reports => "GET /v2/reports",
        }
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

#[cfg(test)]
mod tests {
    use super::List;

    #[test]
    fn every_list_is_named_once_with_its_path_and_route() {
        for list in List::ALL {
            assert_eq!(List::named(list.name()).ok(), Some(list));
            assert_eq!(list.path(), format!("/v2/{}", list.name()));
            assert_eq!(list.route(), format!("GET {}", list.path()));
            assert!(!crate::client::arrow::Layout::of(list)
                .schema()
                .fields()
                .is_empty());
        }
        let refused = List::named("zones").err().map(|e| e.to_string());
        assert!(refused.is_some_and(|m| m.contains("zones") && m.contains("sites, devices")));
    }
}
