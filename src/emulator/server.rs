//! The emulator's accept loop: one hyper connection per socket, each of which a fault can close
//! without an answer, and a handle that stops the server (idempotent).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;
use tokio_rustls::rustls;
use tower::ServiceExt;

use super::routes::{router, ConnDrop};
use super::state::State;

/// A running emulator: its address and the means to stop it.
#[derive(Debug)]
pub struct Handle {
    /// Its state (data, faults, statistics, ...).
    pub state: Arc<State>,
    /// The loopback address it listens on.
    pub addr: SocketAddr,
    /// With HTTPS: the PEM of the certificate authority that signed its certificate.
    pub ca_pem: Option<String>,
    shutdown: watch::Sender<bool>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Host names the HTTPS certificate is valid for (besides `127.0.0.1`); `emulator.test` lets a
/// test reach the emulator through a proxy by a name that is not loopback.
pub const TLS_NAMES: [&str; 2] = ["localhost", "emulator.test"];

/// A server TLS configuration for a certificate made now, and the PEM of the authority that
/// signed it (to give clients as their CA bundle).
pub fn make_tls() -> std::io::Result<(Arc<rustls::ServerConfig>, String)> {
    let err = |e: rcgen::Error| std::io::Error::other(format!("cannot make a certificate: {e}"));
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "surveillance emulator CA");
    let ca_key = rcgen::KeyPair::generate().map_err(err)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(err)?;
    let mut names: Vec<String> = TLS_NAMES.iter().map(|n| n.to_string()).collect();
    names.push("127.0.0.1".into());
    names.extend(loopback_names(
        &std::fs::read_to_string("/etc/hosts").unwrap_or_default(),
    ));
    names.sort();
    names.dedup();
    let leaf = rcgen::CertificateParams::new(names).map_err(err)?;
    let leaf_key = rcgen::KeyPair::generate().map_err(err)?;
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).map_err(err)?;
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(std::io::Error::other)?
    .with_no_client_auth()
    .with_single_cert(vec![leaf_cert.der().clone()], key)
    .map_err(std::io::Error::other)?;
    Ok((Arc::new(config), ca_cert.pem()))
}

/// The host names a hosts file gives to loopback addresses (`127.0.0.0/8`, `::1`): the
/// certificate is valid for them too, so a client can reach the emulator by a name that it
/// does not itself take for loopback (to test proxies and `NO_PROXY` without any DNS).
pub fn loopback_names(hosts: &str) -> Vec<String> {
    hosts
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default())
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let addr: std::net::IpAddr = words.next()?.parse().ok()?;
            addr.is_loopback()
                .then(|| words.map(str::to_string).collect::<Vec<_>>())
        })
        .flatten()
        .filter(|n| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        })
        .collect()
}

impl Handle {
    /// Base URL of the service, e.g. `http://127.0.0.1:PORT` (paths start with `/v2`), or
    /// `https://` when it serves TLS.
    pub fn url(&self) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
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
    spawn_with(state, port, false).await
}

/// As [`spawn`]; with `tls`, serves HTTPS with a certificate made now ([`make_tls`]).
pub async fn spawn_with(state: Arc<State>, port: u16, tls: bool) -> std::io::Result<Handle> {
    let (acceptor, ca_pem) = if tls {
        let (config, pem) = make_tls()?;
        (Some(tokio_rustls::TlsAcceptor::from(config)), Some(pem))
    } else {
        (None, None)
    };
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = watch::channel(false);
    let app = router(state.clone());
    let task = tokio::spawn(accept_loop(listener, acceptor, app, state.clone(), rx));
    Ok(Handle {
        state,
        addr,
        ca_pem,
        shutdown: tx,
        task: Mutex::new(Some(task)),
    })
}

/// What stopped the accept loop's wait.
enum Woke {
    Accepted(std::io::Result<(tokio::net::TcpStream, SocketAddr)>),
    Outage(Duration),
    Stop,
    Joined,
}

async fn accept_loop(
    mut listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: Router,
    state: Arc<State>,
    mut stop: watch::Receiver<bool>,
) {
    let mut conns = JoinSet::new();
    let mut outages = state.take_outages();
    loop {
        let woke = tokio::select! {
            accepted = listener.accept() => Woke::Accepted(accepted),
            Some(d) = next_outage(&mut outages) => Woke::Outage(d),
            _ = stop.changed() => Woke::Stop,
            Some(_) = conns.join_next(), if !conns.is_empty() => Woke::Joined,
        };
        match woke {
            Woke::Stop => break,
            Woke::Joined => {}
            Woke::Outage(duration) => {
                // A restart: the port closed (connections refused) and every connection with
                // it, then the same port again.
                let addr = listener.local_addr();
                drop(listener);
                conns.shutdown().await;
                state.connections_open.store(0, Ordering::SeqCst);
                tokio::select! {
                    _ = tokio::time::sleep(duration) => {}
                    _ = stop.changed() => return,
                }
                let Ok(addr) = addr else { return };
                listener = match rebind(addr).await {
                    Some(l) => l,
                    None => return,
                };
            }
            Woke::Accepted(accepted) => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                state.connections_total.fetch_add(1, Ordering::SeqCst);
                state.connections_open.fetch_add(1, Ordering::SeqCst);
                let (app, state, stop) = (app.clone(), state.clone(), stop.clone());
                match tls.clone() {
                    None => conns.spawn(serve_connection(stream, app, state, stop)),
                    Some(acceptor) => conns.spawn(async move {
                        // A client that refuses the certificate ends the handshake: no answer.
                        let handshake = tokio::time::timeout(
                            std::time::Duration::from_secs(10),
                            acceptor.accept(stream),
                        );
                        match handshake.await {
                            Ok(Ok(tls_stream)) => {
                                serve_connection(tls_stream, app, state, stop).await
                            }
                            _ => {
                                state.tls_failures.fetch_add(1, Ordering::SeqCst);
                                state.connections_open.fetch_sub(1, Ordering::SeqCst);
                            }
                        }
                    }),
                };
            }
        }
    }
    // Dropping the set aborts the connections still open.
    conns.shutdown().await;
}

/// The next outage asked for (never, without a receiver).
async fn next_outage(
    outages: &mut Option<tokio::sync::mpsc::UnboundedReceiver<Duration>>,
) -> Option<Duration> {
    match outages {
        Some(o) => o.recv().await,
        None => std::future::pending().await,
    }
}

/// Listens on `addr` again after an outage (a moment's retry while the old socket goes).
async fn rebind(addr: SocketAddr) -> Option<TcpListener> {
    for _ in 0..100 {
        if let Ok(l) = TcpListener::bind(addr).await {
            return Some(l);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

async fn serve_connection<S>(
    stream: S,
    app: Router,
    state: Arc<State>,
    mut stop: watch::Receiver<bool>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let kill = Arc::new(Notify::new());
    let conn_drop = ConnDrop::new(kill.clone());
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        req.extensions_mut().insert(conn_drop.clone());
        app.clone().oneshot(req.map(axum::body::Body::new))
    });
    // The router stamps every answer with the emulator's clock (`routes::router`); hyper's own
    // `date`, from real time, is off, so that hyper's refusals of malformed HTTP carry none
    // rather than one that contradicts the emulator's clock.
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .auto_date_header(false)
        .serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = conn => {}
        _ = kill.notified() => {}
        _ = stop.changed() => {}
    }
    state.connections_open.fetch_sub(1, Ordering::SeqCst);
}
