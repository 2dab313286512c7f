//! What a call's observer is told of a request sent again, over loopback: each send says how
//! many times the same request was sent before (a span's `http.request.resend_count`), whether
//! a 429, a refused token or a failed token request sent it again.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use surveillance::client::scope::{within, Exchange, Observer, Scope, WaitKind};
use surveillance::client::Limits;
use surveillance::emulator::{Hostile, HostileRule};

use crate::common;

/// An exchange as told: its path, status, earlier sends and whether it asked for a token.
type Seen = (String, Option<u16>, u32, bool);

/// Each exchange told.
#[derive(Debug, Default)]
struct Told(Mutex<Vec<Seen>>);

impl Told {
    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.0.lock().expect("told"))
    }
}

impl Observer for Told {
    fn exchange(&self, e: &Exchange<'_>) {
        let seen = (e.template.to_string(), e.status, e.resend, e.token);
        self.0.lock().expect("told").push(seen);
    }
    fn wait(&self, _: WaitKind, _: &str, _: Duration) {}
    fn token(&self) {}
    fn retry(&self) {}
    fn events(&self, _: u64) {}
}

fn rule(status: u16, path: &str, count: u64) -> Option<HostileRule> {
    Some(HostileRule {
        mode: Hostile::Status(status),
        path: path.into(),
        remaining: Some(count),
    })
}

#[tokio::test]
async fn each_send_of_a_request_says_how_many_times_it_was_sent_before() {
    let h = common::emulator(3, 2, 1, 10).await;
    let client = common::client_for(&h, Limits::unlimited(), 5);
    let told = Arc::new(Told::default());
    let observer: Arc<dyn Observer> = told.clone();
    let observed = || Scope::observed(None, Some(observer.clone()), None);
    let sites = |status, resend| ("/v2/sites".to_string(), Some(status), resend, false);
    let token = |status, resend| ("/v2/oauth/token".to_string(), Some(status), resend, true);

    // A token request that fails once is sent again.
    h.state.set_hostile(rule(500, "/v2/oauth/token", 1));
    within(Some(observed()), client.access_token())
        .await
        .expect("a token");
    assert_eq!(told.take(), [token(500, 0), token(200, 1)]);

    // A read refused with 429 twice: its third send was sent twice before.
    h.state.set_hostile(rule(429, "/v2/sites", 2));
    within(Some(observed()), client.sites())
        .await
        .expect("sites");
    assert_eq!(told.take(), [sites(429, 0), sites(429, 1), sites(200, 2)]);

    // A read refused with a token that worked, renewed: sent again with the new one.
    h.state.set_hostile(None);
    h.state.revoke_tokens();
    within(Some(observed()), client.sites())
        .await
        .expect("sites");
    assert_eq!(told.take(), [sites(401, 0), token(200, 0), sites(200, 1)]);
}
