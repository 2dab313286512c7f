//! What every loopback test starts from: an emulator on a free port with seeded data, and a
//! client configured with its credentials and URLs.

use std::sync::Arc;

use surveillance::client::{Client, Config, Limits, Secret, Settings};
use surveillance::emulator::{spawn, DataConfig, Handle, State};

/// An emulator of `sites` sites over `days` days, `events_per_day` events a day, seed `seed`.
pub async fn emulator(seed: u64, sites: usize, days: u32, events_per_day: u64) -> Handle {
    let cfg = DataConfig {
        seed,
        sites,
        days,
        events_per_day,
        ..DataConfig::default()
    };
    spawn(Arc::new(State::new(&cfg)), 0)
        .await
        .expect("emulator listens")
}

/// A client of `h` (both regions) with `limits`, retrying `max_retries` times.
pub fn client_for(h: &Handle, limits: Limits, max_retries: u32) -> Client {
    let c = &h.state.creds;
    let settings = Settings {
        api_key: Some(Secret::new(c.api_key.clone())),
        client_id: Some(c.client_id.clone()),
        client_secret: Some(Secret::new(c.client_secret.clone())),
        base_url: Some(h.url()),
        eu_base_url: Some(h.eu_url()),
        audience: Some(c.audience.clone()),
        limits: Some(limits),
        max_retries: Some(max_retries),
        ..Settings::default()
    };
    let config = Config::resolve(settings, &|_| None).expect("config");
    Client::new(config, None).expect("client")
}
