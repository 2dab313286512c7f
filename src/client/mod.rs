//! The pure Rust client of the service. Knows nothing of Python, nor of the emulator:
//! configuration (`config`), tokens and HTTP with retries (`http`), rate control by the
//! provider's limits (`limits`, over the crate's neutral `Limits`), the daily quota (`quota`),
//! the lists (`lists`: one table of their paths, filters and Arrow layouts), events in windows
//! past the offset ceiling (`events`, `plan`), their Arrow and Parquet forms (`arrow`,
//! `parquet`), and webhook publishing (`publish`, which checks records with the crate's
//! `webhook` module).

pub mod arrow;
pub mod cache;
pub mod config;
pub mod error;
pub mod events;
pub mod http;
pub mod limits;
pub mod lists;
pub mod parquet;
pub mod plan;
pub mod publish;
pub mod quota;
pub mod redact;
pub mod retry;
pub mod scope;
pub mod stats;
pub mod uses;
pub mod words;

#[cfg(test)]
mod fuzz;

use std::sync::Arc;

use serde::Deserialize;

pub use config::{Config, Region, Secret, Settings};
pub use error::{Error, Result, Wording};
pub use http::{want_debug, Fields, Level, LogSink};
pub use limits::Limits;
pub use lists::{List, Record};
pub use stats::Snapshot;

use http::Http;
use lists::list_all;

/// A client of the service: cheap to clone, shared by any number of tasks.
#[derive(Debug, Clone)]
pub struct Client {
    http: Arc<Http>,
    shape: Arc<std::sync::Mutex<events::EventsShape>>,
    held: Arc<std::sync::Mutex<events::Held>>,
    cache: Option<Arc<cache::Cache>>,
}

/// The query parameters of `list` for the filters given (`site_id`, `device_id`), each a
/// UUID; an error for a filter the list does not take.
fn filter_params<'a>(
    list: List,
    site_id: Option<&'a str>,
    device_id: Option<&'a str>,
) -> Result<Vec<(&'static str, &'a str)>> {
    let mut params = Vec::new();
    for (keyword, value) in [("site_id", site_id), ("device_id", device_id)] {
        let Some(value) = value else { continue };
        let Some(filter) = list.spec().filters.iter().find(|f| f.keyword == keyword) else {
            return Err(Error::config(
                Wording::new()
                    .text(format!("the {} list takes no ", list.name()))
                    .arg(keyword),
            ));
        };
        check_uuid(value, keyword)?;
        params.push((filter.param, value));
    }
    Ok(params)
}

pub(crate) fn check_uuid(value: &str, name: &str) -> Result<()> {
    let b = value.as_bytes();
    let ok = b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
    if ok {
        Ok(())
    } else {
        Err(Error::argument(Wording::new().arg(name).text(format!(
            " must be a UUID such as `3f2b8c1e-5d4a-4e6b-9c7d-2a1b0c9d8e7f`, got `{}`",
            crate::text::shown(value)
        ))))
    }
}

#[derive(Deserialize)]
struct SiteOfDevice<'a> {
    #[serde(rename = "siteId", borrow)]
    site_id: Option<&'a str>,
}

#[derive(Deserialize)]
struct IdOnly<'a> {
    #[serde(borrow)]
    id: &'a str,
}

impl Client {
    /// A client for `config`; `log` receives its log lines.
    pub fn new(config: Config, log: Option<LogSink>) -> Result<Client> {
        let cache = match &config.cache_dir {
            Some(dir) => Some(Arc::new(cache::Cache::open(
                dir,
                config.base_url.as_str(),
                config.api_key.expose(),
                &config.client_id,
                config.cache_max_bytes,
            )?)),
            None => None,
        };
        let shape = cache
            .as_ref()
            .and_then(|c| c.seen())
            .map(events::EventsShape::from_seen)
            .unwrap_or_default();
        Ok(Client {
            http: Arc::new(Http::new(config, log)?),
            shape: Arc::new(std::sync::Mutex::new(shape)),
            held: Arc::default(),
            cache,
        })
    }

    /// The resolved configuration.
    pub fn config(&self) -> &Config {
        &self.http.config
    }

    /// The transport (for the event windows and publishing).
    pub fn http(&self) -> &Http {
        &self.http
    }

    /// The read rate in force now, requests a second (None: unlimited).
    pub(crate) fn read_rate(&self) -> Option<f64> {
        self.http.gate(http::Class::Read).current_rate()
    }

    /// What this client's fetches found of the service's events (see [`events::Shape`]).
    pub(crate) fn shape(&self) -> std::sync::MutexGuard<'_, events::EventsShape> {
        self.shape.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pages of settled ranges a plan read, for the fetch that follows it (see
    /// [`events::Held`]).
    pub(crate) fn held(&self) -> std::sync::MutexGuard<'_, events::Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps in the cache (if the client has one) what its fetches found of the service's
    /// order and density, where that tells more than the cache holds, for the clients of later
    /// processes (see [`cache::Seen`]). A cache that cannot be written only costs them requests.
    pub(crate) fn keep_shape(&self) {
        let Some(cache) = self.cache() else { return };
        let seen = {
            let shape = self.shape();
            if !shape.untold() {
                return;
            }
            shape.seen()
        };
        if let Ok(kept) = cache.keep_seen(seen) {
            self.shape().set_kept(kept);
        }
    }

    /// The cache of settled events of this client's account, if it has one.
    pub fn cache(&self) -> Option<&cache::Cache> {
        self.cache.as_deref()
    }

    /// What the cache directory of this client holds (None without a cache).
    pub fn cache_info(&self) -> Result<Option<cache::Info>> {
        self.cache().map(|c| cache::info(c.root())).transpose()
    }

    /// Empties the cache directory of this client; the files removed.
    pub fn clear_cache(&self) -> Result<u64> {
        self.cache().map_or(Ok(0), |c| cache::clear(c.root()))
    }

    /// Whether the webhook takes arrays, as far as this client's publishes have found out.
    pub fn webhook_arrays(&self) -> http::Arrays {
        self.http.webhook.arrays()
    }

    /// A valid access token (fetched or reused).
    pub async fn access_token(&self) -> Result<Secret> {
        Ok(self.http.token().await?.0)
    }

    /// Every record of `list`, narrowed by the filters it takes (`site_id`, `device_id`: see
    /// [`Spec::filters`](lists::Spec); cameras past the offset ceiling: [`Client::cameras`]).
    pub async fn list(
        &self,
        list: List,
        site_id: Option<&str>,
        device_id: Option<&str>,
    ) -> Result<Vec<Record>> {
        if list == List::Cameras {
            return self.cameras(site_id, device_id).await;
        }
        let params = filter_params(list, site_id, device_id)?;
        list_all(&self.http, list.path(), list.route(), &params).await
    }

    /// Every record of a list that takes no filter (not through [`Client::list`], which the
    /// cameras' split calls back into).
    async fn plain(&self, list: List) -> Result<Vec<Record>> {
        list_all(&self.http, list.path(), list.route(), &[]).await
    }

    /// Every site.
    pub async fn sites(&self) -> Result<Vec<Record>> {
        self.plain(List::Sites).await
    }

    /// Every device.
    pub async fn devices(&self) -> Result<Vec<Record>> {
        self.plain(List::Devices).await
    }

    /// Every report the caller may read.
    pub async fn reports(&self) -> Result<Vec<Record>> {
        self.plain(List::Reports).await
    }

    /// Every camera, of a site and/or a device. A list past the offset ceiling is fetched per
    /// site (and a site past it per device), so the result is never cut.
    pub async fn cameras(
        &self,
        site_id: Option<&str>,
        device_id: Option<&str>,
    ) -> Result<Vec<Record>> {
        let params = filter_params(List::Cameras, site_id, device_id)?;
        match list_all(
            &self.http,
            List::Cameras.path(),
            List::Cameras.route(),
            &params,
        )
        .await
        {
            Err(Error::Ceiling { .. }) if device_id.is_none() => {}
            other => return other,
        }
        // Past the ceiling: per site when no site was given, per device of the site otherwise.
        let sites = match site_id {
            Some(site) => vec![site.to_string()],
            None => self
                .sites()
                .await?
                .iter()
                .map(|s| record_id(s, List::Sites.path()))
                .collect::<Result<_>>()?,
        };
        let mut tasks = tokio::task::JoinSet::new();
        for (i, site) in sites.into_iter().enumerate() {
            let me = self.clone();
            let per_device = site_id.is_some();
            tasks.spawn(scope::inherit(async move {
                (i, me.site_cameras(site, per_device).await)
            }));
        }
        let mut chunks = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let (i, result) =
                joined.map_err(|e| Error::Transport(format!("a camera page task failed: {e}")))?;
            chunks.push((i, result?));
        }
        chunks.sort_by_key(|(i, _)| *i);
        Ok(chunks.into_iter().flat_map(|(_, c)| c).collect())
    }

    /// The cameras of one site; per device of the site when the site alone is past the ceiling.
    async fn site_cameras(&self, site: String, per_device: bool) -> Result<Vec<Record>> {
        if !per_device {
            match list_all(
                &self.http,
                List::Cameras.path(),
                List::Cameras.route(),
                &[("siteId", &site)],
            )
            .await
            {
                Err(Error::Ceiling { .. }) => {}
                other => return other,
            }
        }
        let mut out = Vec::new();
        for d in &self.devices().await? {
            let of: SiteOfDevice = serde_json::from_str(d.get()).map_err(|e| Error::Decode {
                url: List::Devices.path().into(),
                detail: format!("a device has no usable `siteId` ({e})"),
            })?;
            if of.site_id.is_some_and(|s| s.eq_ignore_ascii_case(&site)) {
                let device = record_id(d, List::Devices.path())?;
                let params = [("siteId", site.as_str()), ("deviceId", device.as_str())];
                out.extend(
                    list_all(
                        &self.http,
                        List::Cameras.path(),
                        List::Cameras.route(),
                        &params,
                    )
                    .await?,
                );
            }
        }
        Ok(out)
    }

    /// Where the daily quota of this client's key stands (counted by every client of the
    /// machine).
    pub fn quota(&self) -> quota::Quota {
        self.http.ledger.quota()
    }

    /// The daily quota's ledger of this client, and the allowance a shared budget grants it.
    pub fn ledger(&self) -> &quota::Ledger {
        &self.http.ledger
    }

    /// The counters of this client.
    pub fn stats(&self) -> Snapshot {
        self.http.stats.snapshot()
    }

    /// Stops every request in flight or waiting; the client refuses new ones.
    pub fn close(&self) {
        self.http.close();
    }

    /// A plain-text report of the effective settings and whether a token can be had.
    pub async fn diagnose(&self) -> String {
        let c = self.config();
        let l = c.limits;
        let fmt_rate = |r: Option<f64>| r.map_or("unlimited/s".to_string(), |v| format!("{v}/s"));
        let fmt_conc = |n: Option<usize>| n.map_or("unlimited".to_string(), |v| v.to_string());
        let proxy = if !c.trust_env {
            "ignored (trust_env=False)".to_string()
        } else if config::is_loopback(&c.base_url) {
            "not used for loopback".to_string()
        } else {
            let p = ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"]
                .iter()
                .find_map(|v| {
                    std::env::var(v)
                        .ok()
                        .filter(|s| !s.is_empty())
                        .map(|s| (v.to_string(), s))
                });
            match p {
                Some((var, value)) => {
                    let shown = url::Url::parse(&value)
                        .map(|mut u| {
                            let _ = u.set_password(None);
                            let _ = u.set_username("");
                            u.to_string()
                        })
                        .unwrap_or_else(|_| "(unparsable)".into());
                    format!(
                        "{shown} (from {var}; NO_PROXY={})",
                        std::env::var("NO_PROXY").unwrap_or_default()
                    )
                }
                None => "none".to_string(),
            }
        };
        let token = match self.http.token().await {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("FAILED: {e}"),
        };
        let q = self.quota();
        let resets = chrono::DateTime::from_timestamp_millis(q.resets_at_ms)
            .map_or_else(String::new, |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string());
        let ledger = self
            .http
            .ledger
            .path()
            .map_or("in this process's memory".to_string(), |p| {
                p.display().to_string()
            });
        let quota = match q.limit {
            Some(limit) => format!(
                "{} of {limit} requests a day used, {} left, resets at {resets} (ledger: {ledger})",
                q.used,
                q.remaining.unwrap_or(0)
            ),
            None => format!(
                "{} requests today, no daily limit set, day ends at {resets} (ledger: {ledger})",
                q.used
            ),
        };
        format!(
            "base_url:     {}\neu_base_url:  {}\nregion:       {}\naudience:     {}\ntls:          certificates verified (platform trust store{})\nproxy:        {}\ntimeout:      {:.1} s, max_retries {}, max_wait {:.0} s\nlimits:       reads {} and {} in flight, publish {} and {} in flight\nquota:        {}\ncredentials:  api_key ***, client_id {}, client_secret ***\ntoken:        {}\n",
            c.base_url,
            c.eu_base_url.as_ref().map_or("(not set)".to_string(), |u| u.to_string()),
            c.region.as_str(),
            c.audience,
            c.ca_bundle.as_ref().map_or(String::new(), |p| format!(" + {}", p.display())),
            proxy,
            c.timeout.as_secs_f64(),
            c.max_retries,
            c.max_wait.as_secs_f64(),
            fmt_rate(l.read_per_second),
            fmt_conc(l.read_concurrency),
            fmt_rate(l.publish_per_second),
            fmt_conc(l.publish_concurrency),
            quota,
            c.client_id,
            token,
        )
    }
}

fn record_id(r: &Record, path: &str) -> Result<String> {
    serde_json::from_str::<IdOnly>(r.get())
        .map(|i| i.id.to_string())
        .map_err(|e| Error::Decode {
            url: path.into(),
            detail: format!("a record has no string `id` ({e})"),
        })
}
