//! Configuration: the settings as given (the Python layer's one resolver reads the
//! `SURVEILLANCE_*` variables, the config file and its profiles), the defaults of those left
//! out; base URL checks (https, or http on loopback only); secrets that never print.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use url::Url;

use super::error::{Error, Result, Wording};
use super::limits::Limits;

/// A value that must never appear in a log, a repr or an error.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("'***'")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// What the caller gave, each setting as resolved (the variable named beside it is read by the
/// Python layer's resolver, never here); `None` means its default.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// `x-api-key` (`SURVEILLANCE_API_KEY`).
    pub api_key: Option<Secret>,
    /// OAuth client id (`SURVEILLANCE_CLIENT_ID`).
    pub client_id: Option<String>,
    /// OAuth client secret (`SURVEILLANCE_CLIENT_SECRET`).
    pub client_secret: Option<Secret>,
    /// `us` or `eu` (`SURVEILLANCE_REGION`), the default route of publishing.
    pub region: Option<String>,
    /// Base URL without `/v2` (`SURVEILLANCE_BASE_URL`).
    pub base_url: Option<String>,
    /// EU webhook base URL (`SURVEILLANCE_EU_BASE_URL`).
    pub eu_base_url: Option<String>,
    /// Token audience (`SURVEILLANCE_AUDIENCE`); defaults to the base URL.
    pub audience: Option<String>,
    /// Whole-request timeout.
    pub timeout: Option<Duration>,
    /// Retries per request.
    pub max_retries: Option<u32>,
    /// Client-side limits; None = the provider's published limits.
    pub limits: Option<Limits>,
    /// Extra trusted certificates (PEM).
    pub ca_bundle: Option<PathBuf>,
    /// Honour `HTTPS_PROXY`/`NO_PROXY` and `SSL_CERT_FILE`/`REQUESTS_CA_BUNDLE`.
    pub trust_env: Option<bool>,
    /// Send the W3C `traceparent` of the caller's trace (`SURVEILLANCE_TRACE_CONTEXT`).
    pub trace_context: Option<bool>,
    /// Largest response body accepted, bytes.
    pub max_body_bytes: Option<usize>,
    /// Longest `Retry-After` of a 429 the client waits for; a longer one raises
    /// [`Error::Quota`] at once.
    pub max_wait: Option<Duration>,
    /// How long a call rides out the service being unreachable (connection refused, reset or
    /// timed out; 502, 503, 504) before it fails (`SURVEILLANCE_MAX_OUTAGE`); zero: at once.
    pub max_outage: Option<Duration>,
    /// The cache of settled events (`SURVEILLANCE_CACHE`): `0` (or `false`, `off`) turns it
    /// off, `1` (or `true`, `on`) asks for it in the default directory, anything else is the
    /// directory to use. Unset: on in the default directory, but for a loopback base URL.
    pub cache: Option<String>,
    /// How long after it starts an event may still change (default an hour): older events
    /// are settled, and kept by the cache.
    pub settle: Option<Duration>,
    /// The cap of the cache directory's size, bytes (default 2 GiB).
    pub cache_max_bytes: Option<u64>,
    /// Where the daily quota's ledger lives (`SURVEILLANCE_QUOTA_DIR`); None: the user's cache
    /// directory's.
    pub quota_dir: Option<PathBuf>,
}

/// The region whose webhook `publish` posts to by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// The US base.
    Us,
    /// The EU base.
    Eu,
}

impl Region {
    /// Every region, as its name, the default (`Us`) first.
    pub const NAMES: [&'static str; 2] = ["us", "eu"];

    /// Parses `us` or `eu` (any case).
    pub fn parse(s: &str) -> Result<Region> {
        match s.trim().to_ascii_lowercase().as_str() {
            "us" => Ok(Region::Us),
            "eu" => Ok(Region::Eu),
            _ => Err(Error::config(
                Wording::new()
                    .arg("region")
                    .text(format!(
                        " must be `us` or `eu`, got `{}` (argument ",
                        crate::text::shown(s)
                    ))
                    .arg("region")
                    .text(", variable `SURVEILLANCE_REGION`)"),
            )),
        }
    }

    /// `us` or `eu`.
    pub fn as_str(self) -> &'static str {
        match self {
            Region::Us => "us",
            Region::Eu => "eu",
        }
    }
}

/// The resolved configuration of a client.
#[derive(Debug, Clone)]
pub struct Config {
    /// `x-api-key`.
    pub api_key: Secret,
    /// OAuth client id.
    pub client_id: String,
    /// OAuth client secret.
    pub client_secret: Secret,
    /// Default publishing region.
    pub region: Region,
    /// Base URL, normalised, without `/v2` and without a trailing `/`.
    pub base_url: Url,
    /// EU webhook base URL.
    pub eu_base_url: Option<Url>,
    /// Token audience.
    pub audience: String,
    /// Whole-request timeout.
    pub timeout: Duration,
    /// Retries per request.
    pub max_retries: u32,
    /// Client-side limits.
    pub limits: Limits,
    /// Extra trusted certificates (PEM), explicit or from the environment.
    pub ca_bundle: Option<PathBuf>,
    /// Whether proxies and CA variables of the environment are honoured.
    pub trust_env: bool,
    /// Whether requests carry the W3C `traceparent` of the call's trace, when it has one.
    pub trace_context: bool,
    /// Largest response body accepted, bytes.
    pub max_body_bytes: usize,
    /// Longest `Retry-After` of a 429 the client waits for.
    pub max_wait: Duration,
    /// How long a call rides out the service being unreachable before it fails (zero: at once).
    pub max_outage: Duration,
    /// Where the daily quota's ledger lives (`SURVEILLANCE_QUOTA_DIR` or the user's cache
    /// directory); None: in the process's memory.
    pub quota_dir: Option<PathBuf>,
    /// The directory of the cache of settled events; None: no cache.
    pub cache_dir: Option<PathBuf>,
    /// How long after it starts an event may still change, ms: older events are settled.
    pub settle_ms: i64,
    /// The cap of the cache directory's size, bytes.
    pub cache_max_bytes: u64,
}

/// The default settle period, ms: an hour, as `sync_events`'s.
pub const DEFAULT_SETTLE_MS: i64 = 3_600_000;

/// The words of `cache` that turn it on (in the default directory) or off, any case; any other
/// text names the directory.
pub const CACHE_SWITCHES: [(&str, bool); 8] = [
    ("1", true),
    ("true", true),
    ("on", true),
    ("yes", true),
    ("0", false),
    ("false", false),
    ("off", false),
    ("no", false),
];

/// Whether `word` turns the cache on or off (see [`CACHE_SWITCHES`]); None: it names a
/// directory.
pub fn cache_switch(word: &str) -> Option<bool> {
    let word = word.trim().to_ascii_lowercase();
    CACHE_SWITCHES
        .iter()
        .find(|(w, _)| *w == word)
        .map(|(_, on)| *on)
}

/// The cache directory that `given` asks for; None: no cache. Left unset (or blank), a
/// loopback base URL (an emulator, whose data another seed on the same port changes) has none.
/// `env` gives the platform's variables of the user's cache directory.
fn cache_dir(
    given: Option<String>,
    env: &dyn Fn(&str) -> Option<String>,
    base_url: &Url,
) -> Option<PathBuf> {
    let asked = given.filter(|v| !v.trim().is_empty());
    match asked.as_deref().map(cache_switch) {
        Some(Some(false)) => None,
        Some(Some(true)) => super::cache::default_dir(env),
        None if is_loopback(base_url) => None,
        None => super::cache::default_dir(env),
        Some(None) => asked.map(|v| PathBuf::from(v.trim())),
    }
}

/// Default whole-request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default retries per request.
pub const DEFAULT_MAX_RETRIES: u32 = 5;
/// Default cap on a response body (a page of 100 events is about 100 KB).
pub const DEFAULT_MAX_BODY: usize = 64 * 1024 * 1024;
/// Default longest wait for a 429's `Retry-After`.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(60);
/// Default time a call rides out the service being unreachable (a restart, a deploy): a
/// minute, as the deadlines of google-api-core's retries are a minute or more.
pub const DEFAULT_MAX_OUTAGE: Duration = Duration::from_secs(60);
/// The longest `max_outage`, seconds (a day).
pub const MAX_OUTAGE_SECS: f64 = 86_400.0;
/// The longest `timeout`, seconds (a day): every wait of the client stays finite.
pub const MAX_TIMEOUT_SECS: f64 = 86_400.0;
/// The longest `settle`, seconds (30 days, as `sync_events` takes).
pub const MAX_SETTLE_SECS: f64 = 30.0 * 86_400.0;
/// The longest `max_wait`, seconds (a day).
pub const MAX_WAIT_SECS: f64 = 86_400.0;
/// The retries per request a client may make.
pub const RETRIES: (u64, u64) = (0, 100);
/// The body cap a client may set, bytes: from 1 KiB to 1 TiB.
pub const BODY_BYTES: (u64, u64) = (1024, 1 << 40);
/// The cache cap a client may set, bytes (0: nothing is kept).
pub const CACHE_BYTES: (u64, u64) = (0, 1 << 50);

/// A duration setting `name` given in seconds: finite, above 0 when `positive` (else from 0),
/// at most `max`; in words naming it if not.
pub fn seconds(name: &str, value: f64, positive: bool, max: f64) -> Result<Duration> {
    let low = if positive { value > 0.0 } else { value >= 0.0 };
    if !(value.is_finite() && low && value <= max) {
        let from = if positive { "above 0" } else { "from 0" };
        return Err(Error::config(Wording::new().arg(name).text(format!(
            " must be a number of seconds {from} up to {max}, got `{value}`"
        ))));
    }
    Ok(Duration::from_secs_f64(value))
}

/// A count setting `name` from `low` to `high` (see [`crate::limits::check_count`]).
pub fn count(name: &str, value: i128, bounds: (u64, u64)) -> Result<u64> {
    crate::limits::check_count(name, value, bounds).map_err(Error::config)?;
    u64::try_from(value)
        .map_err(|_| Error::config(Wording::new().arg(name).text(" must not be negative")))
}

fn from_env(env: &dyn Fn(&str) -> Option<String>, var: &str) -> Option<String> {
    env(var).filter(|v| !v.trim().is_empty())
}

/// The setting `arg`, given; its absence named with its argument and its variable.
fn required<T>(given: Option<T>, arg: &str, var: &str) -> Result<T> {
    given.ok_or_else(|| {
        Error::config(
            Wording::new()
                .text("missing ")
                .arg(arg)
                .text(": pass ")
                .keyword(arg)
                .text(format!(" or set the environment variable `{var}`")),
        )
    })
}

/// Refuses a credential an HTTP header cannot carry (empty, or with control characters: a
/// newline pasted with a key), naming it but never showing it: such a value would only fail
/// later, as a transport error, after every retry.
fn header_safe(value: &str, arg: &str, var: &str) -> Result<()> {
    if value.trim().is_empty() {
        return Err(Error::config(
            Wording::new()
                .arg(arg)
                .text(" is empty: pass ")
                .keyword(arg)
                .text(format!(" or set the environment variable `{var}`")),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::config(
            Wording::new()
                .arg(arg)
                .text(
                    " contains control characters (a newline, a tab?), which no HTTP header can \
                     carry: check argument ",
                )
                .arg(arg)
                .text(format!(" or variable `{var}`")),
        ));
    }
    Ok(())
}

/// True for 127.0.0.0/8, ::1 and `localhost`.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

/// `raw` with any `user:password@` part hidden, for messages.
fn redacted(raw: &str) -> String {
    match (raw.find("://"), raw.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &raw[..scheme], &raw[at + 1..])
        }
        _ => raw.to_string(),
    }
}

/// Parses and normalises a base URL: https, or http on loopback; `/v2` and `/` at the end dropped.
pub fn parse_base_url(raw: &str, arg: &str, var: &str) -> Result<Url> {
    let shown = crate::text::shown(&redacted(raw.trim()));
    let trimmed = shown.as_str();
    let raw = raw.trim();
    let mut url = Url::parse(raw).map_err(|e| {
        Error::config(
            Wording::new()
                .arg(arg)
                .text(format!(" is not a URL (`{trimmed}`: {e}); argument "))
                .arg(arg)
                .text(format!(", variable `{var}`")),
        )
    })?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(&url) => {}
        "http" => {
            return Err(Error::config(Wording::new().arg(arg).text(format!(
            " must use https (plain http is allowed for loopback addresses only), got `{trimmed}`"
        ))))
        }
        other => {
            return Err(Error::config(
                Wording::new()
                    .arg(arg)
                    .text(format!(" must be an https URL, got scheme `{other}`")),
            ))
        }
    }
    if url.host().is_none() {
        return Err(Error::config(
            Wording::new()
                .arg(arg)
                .text(format!(" has no host: `{trimmed}`")),
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::config(
            Wording::new().arg(arg).text(" must not carry credentials"),
        ));
    }
    url.set_query(None);
    url.set_fragment(None);
    let mut path = url.path().trim_end_matches('/').to_string();
    if path.ends_with("/v2") {
        path.truncate(path.len() - 3);
    }
    url.set_path(&path);
    Ok(url)
}

impl Config {
    /// Checks `settings` and gives those left out their defaults; `env` (normally
    /// `std::env::var`) gives only the platform's variables: the user's cache directory
    /// (`XDG_CACHE_HOME`, `HOME`, `LOCALAPPDATA`) and, with `trust_env`, `SSL_CERT_FILE` and
    /// `REQUESTS_CA_BUNDLE`. No `SURVEILLANCE_*` variable is read here.
    pub fn resolve(s: Settings, env: &dyn Fn(&str) -> Option<String>) -> Result<Config> {
        let api_key = required(s.api_key, "api_key", "SURVEILLANCE_API_KEY")?;
        let client_id = required(s.client_id, "client_id", "SURVEILLANCE_CLIENT_ID")?;
        let client_secret = required(
            s.client_secret,
            "client_secret",
            "SURVEILLANCE_CLIENT_SECRET",
        )?;
        header_safe(api_key.expose(), "api_key", "SURVEILLANCE_API_KEY")?;
        header_safe(&client_id, "client_id", "SURVEILLANCE_CLIENT_ID")?;
        header_safe(
            client_secret.expose(),
            "client_secret",
            "SURVEILLANCE_CLIENT_SECRET",
        )?;
        let base_raw = required(s.base_url, "base_url", "SURVEILLANCE_BASE_URL")?;
        let base_url = parse_base_url(&base_raw, "base_url", "SURVEILLANCE_BASE_URL")?;
        let eu_base_url = match s.eu_base_url {
            Some(raw) => Some(parse_base_url(
                &raw,
                "eu_base_url",
                "SURVEILLANCE_EU_BASE_URL",
            )?),
            None => None,
        };
        let region = match s.region {
            Some(r) => Region::parse(&r)?,
            None => Region::Us,
        };
        if region == Region::Eu && eu_base_url.is_none() {
            return Err(Error::config(
                Wording::new()
                    .text("region `eu` needs the EU base URL: pass ")
                    .keyword("eu_base_url")
                    .text(" or set `SURVEILLANCE_EU_BASE_URL`"),
            ));
        }
        let audience = s
            .audience
            .unwrap_or_else(|| format!("{}/", base_url.as_str().trim_end_matches('/')));
        header_safe(&audience, "audience", "SURVEILLANCE_AUDIENCE")?;
        // Each setting against its one bound (the bindings check a value as given, before it
        // becomes a Duration or an unsigned number, with the same functions).
        let timeout = s.timeout.unwrap_or(DEFAULT_TIMEOUT);
        seconds("timeout", timeout.as_secs_f64(), true, MAX_TIMEOUT_SECS)?;
        let max_wait = s.max_wait.unwrap_or(DEFAULT_MAX_WAIT);
        seconds("max_wait", max_wait.as_secs_f64(), false, MAX_WAIT_SECS)?;
        let max_outage = s.max_outage.unwrap_or(DEFAULT_MAX_OUTAGE);
        seconds(
            "max_outage",
            max_outage.as_secs_f64(),
            false,
            MAX_OUTAGE_SECS,
        )?;
        let max_retries = s.max_retries.unwrap_or(DEFAULT_MAX_RETRIES);
        count("max_retries", max_retries.into(), RETRIES)?;
        let max_body_bytes = s.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY);
        count("max_body_bytes", max_body_bytes as i128, BODY_BYTES)?;
        let cache_max_bytes = s.cache_max_bytes.unwrap_or(super::cache::DEFAULT_MAX_BYTES);
        count("cache_max_bytes", cache_max_bytes.into(), CACHE_BYTES)?;
        let trust_env = s.trust_env.unwrap_or(true);
        let ca_bundle = s.ca_bundle.or_else(|| {
            if trust_env {
                from_env(env, "SSL_CERT_FILE")
                    .or_else(|| from_env(env, "REQUESTS_CA_BUNDLE"))
                    .map(PathBuf::from)
            } else {
                None
            }
        });
        let limits = s.limits.unwrap_or(Limits::PUBLISHED);
        limits.check().map_err(Error::config)?;
        let cache_dir = cache_dir(s.cache, env, &base_url);
        Ok(Config {
            api_key,
            client_id,
            client_secret,
            region,
            base_url,
            eu_base_url,
            audience,
            timeout,
            max_retries,
            limits,
            ca_bundle,
            trust_env,
            trace_context: s.trace_context.unwrap_or(true),
            max_body_bytes,
            max_wait,
            max_outage,
            quota_dir: super::quota::ledger_dir(s.quota_dir, env),
            cache_dir,
            settle_ms: s.settle.map_or(DEFAULT_SETTLE_MS, |d| {
                i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
            }),
            cache_max_bytes,
        })
    }

    /// Checks `settings`, the platform's variables read from the process environment.
    pub fn from_settings(s: Settings) -> Result<Config> {
        Config::resolve(s, &|var| std::env::var(var).ok())
    }

    /// The URL of `path` (starting with `/v2/`) on the base.
    pub fn url(&self, path: &str) -> Url {
        join(&self.base_url, path)
    }

    /// The webhook URL of `region`.
    pub fn webhook_url(&self, region: Region) -> Result<Url> {
        match region {
            Region::Us => Ok(self.url("/v2/webhook")),
            Region::Eu => self
                .eu_base_url
                .as_ref()
                .map(|b| join(b, "/v2/webhook"))
                .ok_or_else(|| {
                    Error::config(
                        Wording::new()
                            .text("region `eu` needs ")
                            .arg("eu_base_url")
                            .text(" (or `SURVEILLANCE_EU_BASE_URL`)"),
                    )
                }),
        }
    }
}

fn join(base: &Url, path: &str) -> Url {
    let mut u = base.clone();
    let p = format!("{}{}", base.path().trim_end_matches('/'), path);
    u.set_path(&p);
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    /// The credentials and base URL, as the Python layer's resolver hands them over.
    fn given(base_url: &str) -> Settings {
        Settings {
            api_key: Some(Secret::new("k")),
            client_id: Some("id".into()),
            client_secret: Some(Secret::new("s3cret")),
            base_url: Some(base_url.into()),
            ..Settings::default()
        }
    }

    /// Every variable of a setting, each set to what would change the configuration.
    const EVERY_VARIABLE: &[(&str, &str)] = &[
        ("SURVEILLANCE_API_KEY", "env-k"),
        ("SURVEILLANCE_CLIENT_ID", "env-id"),
        ("SURVEILLANCE_CLIENT_SECRET", "env-s3cret"),
        ("SURVEILLANCE_BASE_URL", "https://env.example.test"),
        ("SURVEILLANCE_EU_BASE_URL", "https://eu.example.test"),
        ("SURVEILLANCE_REGION", "eu"),
        ("SURVEILLANCE_AUDIENCE", "env-audience"),
        ("SURVEILLANCE_MAX_OUTAGE", "5"),
        ("SURVEILLANCE_CACHE", "/env/cache"),
        ("SURVEILLANCE_QUOTA_DIR", "/env/quota"),
        ("HOME", "/h"),
        ("XDG_CACHE_HOME", "/h/.cache"),
    ];

    #[test]
    fn normalises_base() {
        let c =
            Config::resolve(given("https://api.example.test/v2/"), &env_of(&[])).expect("config");
        assert_eq!(c.base_url.as_str(), "https://api.example.test/");
        assert_eq!(
            c.url("/v2/sites").as_str(),
            "https://api.example.test/v2/sites"
        );
        assert_eq!(c.audience, "https://api.example.test/");
        assert_eq!(c.region, Region::Us);
    }

    #[test]
    fn reads_no_variable_of_a_setting() {
        // The Python layer's resolver reads them; the core takes what it resolved.
        let env = env_of(EVERY_VARIABLE);
        let err = Config::resolve(Settings::default(), &env).expect_err("missing");
        let msg = err.to_string();
        assert!(
            msg.contains("`api_key`") && msg.contains("SURVEILLANCE_API_KEY"),
            "{msg}"
        );
        let c = Config::resolve(given("https://api.example.test"), &env).expect("config");
        assert_eq!(c.api_key.expose(), "k");
        assert_eq!(c.client_id, "id");
        assert_eq!(c.base_url.as_str(), "https://api.example.test/");
        assert_eq!(c.eu_base_url, None);
        assert_eq!(c.region, Region::Us);
        assert_eq!(c.audience, "https://api.example.test/");
        assert_eq!(c.max_outage, DEFAULT_MAX_OUTAGE);
        if cfg!(all(unix, not(target_os = "macos"))) {
            let cache = Some(PathBuf::from("/h/.cache/surveillance/events"));
            assert_eq!(c.cache_dir, cache);
            let quota = Some(PathBuf::from("/h/.cache/surveillance/quota"));
            assert_eq!(c.quota_dir, quota);
        }
    }

    #[test]
    fn missing_names_argument_and_variable() {
        let err = Config::resolve(Settings::default(), &env_of(&[])).expect_err("missing");
        let msg = err.to_string();
        assert!(
            msg.contains("`api_key`") && msg.contains("SURVEILLANCE_API_KEY"),
            "{msg}"
        );
    }

    #[test]
    fn plain_http_only_on_loopback() {
        assert!(parse_base_url("http://127.0.0.1:8080", "base_url", "V").is_ok());
        assert!(parse_base_url("http://[::1]:8080/v2", "base_url", "V").is_ok());
        assert!(parse_base_url("http://localhost", "base_url", "V").is_ok());
        let err = parse_base_url("http://api.example.test", "base_url", "V").expect_err("refused");
        assert!(matches!(err, Error::Config(_)));
        let err = parse_base_url("http://u:hunter2@api.example.test", "base_url", "V")
            .expect_err("refused");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert!(parse_base_url("ftp://x", "base_url", "V").is_err());
    }

    #[test]
    fn secrets_do_not_print() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s} {s:?}"), "*** '***'");
        let c = Config::resolve(given("https://api.example.test"), &env_of(&[])).expect("config");
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn the_cache_is_on_by_default_but_for_loopback_unless_asked() {
        const HOME: &[(&str, &str)] = &[("HOME", "/h"), ("XDG_CACHE_HOME", "/h/.cache")];
        let env = env_of(HOME);
        let of = |cache: Option<&str>, base: &str| {
            let s = Settings {
                cache: cache.map(String::from),
                ..given(base)
            };
            Config::resolve(s, &env).expect("config").cache_dir
        };
        let default = Some(PathBuf::from("/h/.cache/surveillance/events"));
        if cfg!(all(unix, not(target_os = "macos"))) {
            assert_eq!(of(None, "https://api.example.test"), default);
            assert_eq!(of(Some("1"), "http://127.0.0.1:1"), default);
            assert_eq!(of(Some(" On "), "http://127.0.0.1:1"), default);
        }
        assert_eq!(of(None, "http://127.0.0.1:1"), None);
        assert_eq!(of(Some("0"), "https://api.example.test"), None);
        assert_eq!(of(Some("NO"), "https://api.example.test"), None);
        assert_eq!(
            of(Some("/tmp/c"), "http://127.0.0.1:1"),
            Some(PathBuf::from("/tmp/c"))
        );
    }

    #[test]
    fn the_cache_switches_are_eight_words() {
        let on: Vec<_> = CACHE_SWITCHES.iter().filter(|(_, on)| *on).collect();
        assert_eq!(on.len(), 4);
        assert_eq!(cache_switch(" TRUE "), Some(true));
        assert_eq!(cache_switch("off"), Some(false));
        assert_eq!(cache_switch("/var/cache"), None);
    }

    #[test]
    fn max_outage_is_a_minute_unless_given() {
        let c = Config::resolve(given("https://api.example.test"), &env_of(&[])).expect("config");
        assert_eq!(c.max_outage, Duration::from_secs(60));
        let s = Settings {
            max_outage: Some(Duration::ZERO),
            ..given("https://api.example.test")
        };
        let c = Config::resolve(s, &env_of(&[])).expect("config");
        assert_eq!(c.max_outage, Duration::ZERO);
        let s = Settings {
            max_outage: Some(Duration::from_secs(2 * 86_400)),
            ..given("https://api.example.test")
        };
        let err = Config::resolve(s, &env_of(&[])).expect_err("refused");
        assert!(err.to_string().contains("`max_outage`"), "{err}");
    }

    #[test]
    fn eu_region_needs_eu_base() {
        let s = Settings {
            region: Some("EU".into()),
            ..given("https://api.example.test")
        };
        assert!(Config::resolve(s, &env_of(&[])).is_err());
    }
}
