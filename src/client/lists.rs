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
