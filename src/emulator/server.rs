//! The emulator's accept loop: one hyper connection per socket, each of which a fault can close
//! without an answer, and a handle that stops the server (idempotent).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;
use tower::ServiceExt;

use super::state::State;

/// Lets a handler close its connection without answering (the `drop_rate` fault).
#[derive(Debug, Clone)]
pub struct ConnDrop(Arc<Notify>);

impl ConnDrop {
    /// Closes the connection this request came on.
    pub fn drop_now(&self) {
        self.0.notify_one();
    }
}

/// A running emulator: its address and the means to stop it.
#[derive(Debug)]
pub struct Handle {
    /// Its state (data, faults, statistics, ...).
    pub state: Arc<State>,
    /// The loopback address it listens on.
    pub addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Handle {
    /// Base URL of the service, e.g. `http://127.0.0.1:PORT` (paths start with `/v2`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Base URL of the EU webhook.
    pub fn eu_url(&self) -> String {
        format!("{}/eu", self.url())
    }

    /// Asks the server to stop, without waiting (safe from any thread, e.g. in `Drop`).
    pub fn signal_stop(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Stops accepting, closes every connection; later calls do nothing.
    pub async fn stop(&self) {
        self.signal_stop();
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = task.await;
        }
    }
}

/// Binds `127.0.0.1:port` (0 = a free port) and serves `state` until stopped.
pub async fn spawn(state: Arc<State>, port: u16) -> std::io::Result<Handle> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = watch::channel(false);
    let app = super::routes::router(state.clone());
    let task = tokio::spawn(accept_loop(listener, app, state.clone(), rx));
    Ok(Handle {
        state,
        addr,
        shutdown: tx,
        task: Mutex::new(Some(task)),
    })
}

async fn accept_loop(
    listener: TcpListener,
    app: Router,
    state: Arc<State>,
    mut stop: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                state.connections_total.fetch_add(1, Ordering::SeqCst);
                state.connections_open.fetch_add(1, Ordering::SeqCst);
                conns.spawn(serve_connection(stream, app.clone(), state.clone(), stop.clone()));
            }
            _ = stop.changed() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    // Dropping the set aborts the connections still open.
    conns.shutdown().await;
}

async fn serve_connection(
    stream: tokio::net::TcpStream,
    app: Router,
    state: Arc<State>,
    mut stop: watch::Receiver<bool>,
) {
    let kill = Arc::new(Notify::new());
    let conn_drop = ConnDrop(kill.clone());
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(conn_drop.clone());
        app.clone().oneshot(req.map(axum::body::Body::new))
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = conn => {}
        _ = kill.notified() => {}
        _ = stop.changed() => {}
    }
    state.connections_open.fetch_sub(1, Ordering::SeqCst);
}
