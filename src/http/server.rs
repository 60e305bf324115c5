//! The accept loop: one task per connection, HTTP/1.1 and HTTP/2 (prior knowledge) on the same
//! port through hyper-util's auto builder, and a graceful shutdown that lets requests in flight
//! finish (bounded). Each request goes through `pipeline::answer`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::cors::Cors;
use super::drain::{self, InFlight, Tracked};
use super::fault::{ConnFault, FaultError, FaultIo};
use super::idle::IdleTimeout;
use super::journal::Journal;
use super::per_ip::PerIp;
use super::pipeline;
use super::router::Context;
use crate::metrics::Metrics;
use crate::store::Store;
use crate::token::Token;
use crate::writes::Writes;

/// How long requests in flight may take to finish once shutdown is asked for.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What a server answers from.
#[derive(Debug, Clone)]
pub struct Service {
    pub(crate) store: Arc<Store>,
    pub(crate) metrics: Arc<Metrics>,
    /// Write one `eventbox::access` log line per request.
    pub(crate) access_log: bool,
    /// Send compressed bodies when clients accept them.
    pub(crate) compression: bool,
    /// Which origins may read answers.
    pub(crate) cors: Cors,
    pub(crate) limits: Limits,
    /// Obey the `X-Eventbox-Delay`, `X-Eventbox-Status`, `X-Eventbox-Fault` and
    /// `X-Eventbox-Retry-After` request headers
    /// (`--allow-control-headers`; off by default: they are ignored).
    pub(crate) allow_control_headers: bool,
    /// The longest simulated delay, from a control header or `[simulate]` (`--max-delay`).
    pub(crate) max_delay: Duration,
    /// The request journal served at `/_journal` (`--journal N`); `None`: off.
    pub(crate) journal: Option<Arc<Journal>>,
    /// The writes, shared by every server of the app.
    pub(crate) writes: Arc<Writes>,
    /// The admin token (`--admin-token`); `None`: the admin routes answer loopback peers only.
    pub(crate) admin_token: Option<Token>,
    /// The room for request bodies held at once (`router::body_room`).
    pub(crate) body_room: Arc<Semaphore>,
}

/// Protection against slow, idle or greedy clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Time allowed for a request's headers to arrive (HTTP/1). hyper starts this clock when a
    /// connection waits for a request, so it also bounds an idle HTTP/1 keep-alive connection.
    /// A new connection whose protocol is not known that long after it was accepted (silent,
    /// or sending HTTP/2's preface a byte at a time) is closed too.
    pub(crate) header_timeout: Duration,
    /// A connection with no traffic for this long is closed (HTTP/1 and HTTP/2).
    pub(crate) idle_timeout: Duration,
    /// The largest request head: HTTP/1 (at least 8 KiB, hyper's floor) answers 431 beyond it,
    /// HTTP/2 refuses the stream.
    pub(crate) max_header_bytes: usize,
    /// Connections served at once; further ones wait in the listen queue.
    pub(crate) max_connections: usize,
    /// Connections one client address may hold at once; a further one is closed as soon as it
    /// is accepted, so one client cannot take every slot.
    pub(crate) max_connections_per_ip: usize,
    /// Time allowed for a request body to arrive whole, from when the handler starts reading
    /// it; a body still incomplete then answers 408 and the connection closes.
    pub(crate) body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_header_bytes: 16 * 1024,
            max_connections: 4096,
            max_connections_per_ip: 64,
            body_timeout: Duration::from_secs(10),
        }
    }
}

/// What every request of one server shares: the one `Arc` a request clones.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) store: Arc<Store>,
    pub(crate) access_log: bool,
    pub(crate) ctx: Context,
    /// `--body-timeout`.
    pub(crate) body_timeout: Duration,
}

impl Service {
    /// What every request of a server listening at `local` shares.
    fn shared(
        &self,
        local: std::net::SocketAddr,
        stopping: tokio::sync::watch::Receiver<bool>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            store: Arc::clone(&self.store),
            access_log: self.access_log,
            body_timeout: self.limits.body_timeout,
            ctx: Context {
                local,
                metrics: Arc::clone(&self.metrics),
                compression: self.compression,
                cors: self.cors.clone(),
                allow_control_headers: self.allow_control_headers,
                max_delay: self.max_delay,
                journal: self.journal.clone(),
                writes: Arc::clone(&self.writes),
                admin_token: self.admin_token.clone(),
                stopping,
                body_room: Arc::clone(&self.body_room),
            },
        })
    }
}

/// The HTTP/1.1 and HTTP/2 connection settings of `limits`.
fn connection_builder(limits: &Limits) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(crate::config::MIN_HEADER_BYTES));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
    builder
}

/// Serves one connection's bytes as the server does (the same settings and pipeline; no
/// faults, idle timeout or connection limits; a half-close ends the input) and returns what it
/// answered: the request
/// pipeline driven without a socket, for the fuzzer and its regression test.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) async fn answer_bytes(service: &Service, request: &[u8]) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let local = std::net::SocketAddr::from(([127, 0, 0, 1], 8080));
    let peer = std::net::SocketAddr::from(([127, 0, 0, 1], 40000));
    let (_running, stopping) = tokio::sync::watch::channel(false);
    let shared = service.shared(local, stopping);
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let svc = service_fn(move |req| {
        let shared = Arc::clone(&shared);
        async move { pipeline::answer(req, &shared, None, peer).await }
    });
    let mut builder = connection_builder(&service.limits);
    // The input ends with a half-close: pipelined requests before it are still answered.
    builder.http1().half_close(true);
    let connection = tokio::spawn(async move {
        let _ = builder.serve_connection(TokioIo::new(server), svc).await;
    });
    let (mut reader, mut writer) = tokio::io::split(&mut client);
    let written = async {
        let _ = writer.write_all(request).await;
        let _ = writer.shutdown().await;
    };
    let mut answered = Vec::new();
    let (_, read) = tokio::join!(written, reader.read_to_end(&mut answered));
    read?;
    let _ = connection.await;
    Ok(answered)
}

/// The least time between two warnings about connections over the per-address limit.
const PER_IP_WARNING: Duration = Duration::from_secs(10);

/// Serves until `shutdown` completes, then stops accepting and lets requests in flight finish
/// (up to [`DRAIN_TIMEOUT`]). Takes an already bound listener, so tests bind `127.0.0.1:0`.
pub async fn serve(
    listener: TcpListener,
    service: Service,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let (stopping, stop) = tokio::sync::watch::channel(false);
    let shared = service.shared(listener.local_addr()?, stop.clone());
    let limits = service.limits;
    let builder = connection_builder(&limits);
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let per_ip = PerIp::new(limits.max_connections_per_ip);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    // Connections closed over the per-address limit since the last warning (at most one a
    // PER_IP_WARNING): a client's lost connections are said, a flood is not echoed line by line.
    let (mut closed, mut warned) = (0u64, None::<tokio::time::Instant>);
    loop {
        // At the connection cap, wait for one to close before accepting (the kernel queues).
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, ip_slot, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => match per_ip.claim(peer.ip()) {
                    Some(slot) => (stream, slot, peer),
                    None => {
                        // Closed at once, freeing the slot for other clients.
                        closed += 1;
                        if warned.is_none_or(|at| at.elapsed() >= PER_IP_WARNING) {
                            tracing::warn!(
                                client = %peer.ip(),
                                closed,
                                "connections closed at once: over --max-connections-per-ip {} from one address (a test client, a NAT or a proxy may need more)",
                                limits.max_connections_per_ip
                            );
                            (closed, warned) = (0, Some(tokio::time::Instant::now()));
                        }
                        continue;
                    }
                },
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let shared = Arc::clone(&shared);
        // Any request may be given a fault (`X-Eventbox-Fault`, a bundle's `fault_rate`): every
        // connection has the state to act on one (an atomic byte).
        let fault = ConnFault::default();
        let inflight = Arc::new(InFlight::default());
        let io = TokioIo::new(IdleTimeout::new(
            FaultIo::new(stream, fault.clone()),
            limits.header_timeout,
            limits.idle_timeout,
            shared.ctx.max_delay,
            Arc::clone(&inflight),
        ));
        let counted = Arc::clone(&inflight);
        let svc = service_fn(move |req| {
            let shared = Arc::clone(&shared);
            let fault = fault.clone();
            let entered = counted.enter();
            async move {
                let res = pipeline::answer(req, &shared, Some(&fault), peer).await?;
                Ok::<_, FaultError>(res.map(|body| Tracked::new(body, entered)))
            }
        });
        let connection = builder.serve_connection(io, svc).into_owned();
        let connection = graceful.watch(connection);
        let stop = stop.clone();
        tokio::spawn(async move {
            let ended = drain::until_idle_after_stop(connection, inflight, stop).await;
            if let Some(Err(e)) = ended {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(permit);
            drop(ip_slot);
        });
    }
    drop(listener);
    let _ = stopping.send(true);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(DRAIN_TIMEOUT) => {
            tracing::warn!("requests still in flight after {DRAIN_TIMEOUT:?}; closing them");
        }
    }
    Ok(())
}
