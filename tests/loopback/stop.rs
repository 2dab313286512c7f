//! A call that stops sends nothing more: its requests waiting for their turn, and those its
//! tasks get to late, never leave; the ones in flight are answered as usual.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use surveillance::client::scope::{self, Scope, Stop};
use surveillance::client::{Client, Limits};
use surveillance::emulator::{Faults, Handle};
use tokio::task::JoinHandle;

use crate::common;

fn arrived(h: &Handle) -> u64 {
    h.state.daily_json()["used"].as_u64().expect("a count")
}

fn read_in(call: &Arc<Scope>, client: &Client) -> JoinHandle<bool> {
    let client = client.clone();
    tokio::spawn(scope::within(Some(call.clone()), async move {
        client.sites().await.is_ok()
    }))
}

#[derive(Debug, Default)]
struct Signal(AtomicBool);

impl Stop for Signal {
    fn stopping(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_call_sends_no_request_after_the_stop_and_lets_those_in_flight_end() {
    let h = common::emulator(7, 2, 1, 200).await;
    h.state.set_faults(Faults {
        latency_ms: 200,
        ..Faults::default()
    });
    let one_at_a_time = Limits {
        read_concurrency: Some(1),
        ..Limits::unlimited()
    };
    let client = common::client_for(&h, one_at_a_time, 0);
    client.sites().await.expect("a token, and a first read");
    let before = arrived(&h);

    // Six reads of one call, one in flight: halted, the five waiting for its slot never leave.
    let call = Scope::stoppable(None, None);
    let reads: Vec<_> = (0..6).map(|_| read_in(&call, &client)).collect();
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(arrived(&h), before + 1, "the first read is in flight");
    call.halt();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(arrived(&h), before + 1, "no read left after the halt");
    let ended: Vec<_> = reads.iter().map(JoinHandle::is_finished).collect();
    assert_eq!(ended.iter().filter(|e| **e).count(), 1, "{ended:?}");
    for read in reads {
        if read.is_finished() {
            assert!(
                read.await.expect("the read's task"),
                "the read in flight is answered"
            );
        } else {
            read.abort();
        }
    }

    // A call whose stop fired (a signal) before its task ran: nothing leaves, and a call of
    // the same client outside it is not stopped.
    let signal = Arc::new(Signal::default());
    let call = Scope::stoppable(None, Some(signal.clone()));
    signal.0.store(true, Ordering::SeqCst);
    let late = read_in(&call, &client);
    let other = client.sites().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(other.is_ok() && !late.is_finished());
    assert_eq!(arrived(&h), before + 2, "only the read of the other call");
    late.abort();
    h.stop().await;
}
