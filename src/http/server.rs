//! The accept loop: one task per connection, HTTP/1.1 and HTTP/2 (prior knowledge) on the same
//! port through hyper-util's auto builder, and a graceful shutdown that lets requests in flight
//! finish (bounded). Around the router it measures each request (metrics) and, when asked,
//! writes the access log and the request journal, also for a request whose client went away
//! before its answer was ready (status 499); it turns the faults a request asked for into a
//! failed request (see `fault`).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::header::{HeaderValue, ORIGIN, SERVER};
use hyper::service::service_fn;
use hyper::Method;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use super::control::{Fault, DEFAULT_MAX_DELAY};
use super::cors::Cors;
use super::details;
use super::fault::{ConnFault, FaultError, FaultIo, ReplyBody};
use super::idle::IdleTimeout;
use super::journal::{self, Journal};
use super::router::{self, Context, Reference, Route, Unanswered};
use crate::api::Operation;
use crate::metrics::Metrics;
use crate::problem::token_head;
use crate::store::{Snapshot, Store};
use crate::token::Token;

/// The `Server` header of every answer.
const SERVER_NAME: HeaderValue =
    HeaderValue::from_static(concat!("eventbox/", env!("CARGO_PKG_VERSION")));

/// How long requests in flight may take to finish once shutdown is asked for.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What a server answers from.
#[derive(Debug, Clone)]
pub struct Service {
    pub store: Arc<Store>,
    pub metrics: Arc<Metrics>,
    /// Write one `eventbox::access` log line per request.
    pub access_log: bool,
    /// Send compressed bodies when clients accept them.
    pub compression: bool,
    /// Which origins may read answers.
    pub cors: Cors,
    pub limits: Limits,
    /// Obey the `X-Eventbox-Delay`, `X-Eventbox-Status` and `X-Eventbox-Fault` request headers
    /// (`--allow-control-headers`; off by default: they are ignored).
    pub allow_control_headers: bool,
    /// The longest simulated delay, from a control header or `[simulate]` (`--max-delay`).
    pub max_delay: Duration,
    /// The request journal served at `/_journal` (`--journal N`); `None`: off.
    pub journal: Option<Arc<Journal>>,
}

impl Service {
    /// Turns the control headers on or off.
    pub fn with_control_headers(mut self, allow: bool) -> Self {
        self.allow_control_headers = allow;
        self
    }

    /// Keeps the last `capacity` requests in a journal (0: off).
    pub fn with_journal(mut self, capacity: usize) -> Self {
        self.journal = Journal::with_capacity(capacity);
        self
    }

    /// The default cap of simulated delays.
    pub const DEFAULT_MAX_DELAY: Duration = DEFAULT_MAX_DELAY;
}

/// Protection against slow, idle or greedy clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Time allowed for a request's headers to arrive (HTTP/1). hyper starts this clock when a
    /// connection waits for a request, so it also bounds an idle HTTP/1 keep-alive connection.
    pub header_timeout: Duration,
    /// A connection with no traffic for this long is closed (HTTP/1 and HTTP/2).
    pub idle_timeout: Duration,
    /// The largest request head: HTTP/1 (at least 8 KiB, hyper's floor) answers 431 beyond it,
    /// HTTP/2 refuses the stream.
    pub max_header_bytes: usize,
    /// Connections served at once; further ones wait in the listen queue.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_header_bytes: 16 * 1024,
            max_connections: 4096,
        }
    }
}

/// What every request of one server shares: the one `Arc` a request clones.
#[derive(Debug)]
struct Shared {
    store: Arc<Store>,
    access_log: bool,
    ctx: Context,
}

/// Serves until `shutdown` completes, then stops accepting and lets requests in flight finish
/// (up to [`DRAIN_TIMEOUT`]). Takes an already bound listener, so tests bind `127.0.0.1:0`.
pub async fn serve(
    listener: TcpListener,
    service: Service,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let shared = Arc::new(Shared {
        store: Arc::clone(&service.store),
        access_log: service.access_log,
        ctx: Context {
            local: listener.local_addr()?,
            metrics: Arc::clone(&service.metrics),
            compression: service.compression,
            cors: service.cors.clone(),
            allow_control_headers: service.allow_control_headers,
            max_delay: service.max_delay,
            journal: service.journal.clone(),
        },
    });
    let limits = service.limits;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(limits.max_header_bytes.max(8192));
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        // At the connection cap, wait for one to close before accepting (the kernel queues).
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
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
        // Only a connection that may ask for faults gets the state to act on them.
        let fault = shared.ctx.allow_control_headers.then(ConnFault::default);
        let io = TokioIo::new(IdleTimeout::new(
            FaultIo::new(stream, fault.clone()),
            limits.idle_timeout,
        ));
        let svc = service_fn(move |req| {
            let shared = Arc::clone(&shared);
            let fault = fault.clone();
            async move { answer(req, &shared, fault.as_ref()).await }
        });
        let connection = builder.serve_connection(io, svc).into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(DRAIN_TIMEOUT) => {
            tracing::warn!("requests still in flight after {DRAIN_TIMEOUT:?}; closing them");
        }
    }
    Ok(())
}

/// Answers one request around the router: headers every answer carries, metrics, access log,
/// journal; a request that asked for no answer fails (HTTP/1 then closes the connection, after
/// `reset` with an RST; HTTP/2 resets the stream).
async fn answer(
    req: Request<Incoming>,
    shared: &Shared,
    connection: Option<&ConnFault>,
) -> Result<hyper::Response<ReplyBody>, FaultError> {
    let ctx = &shared.ctx;
    let route = Route::of(req.uri().path());
    let http1 = req.version() < hyper::Version::HTTP_2;
    let snapshot = shared.store.snapshot();
    // Recorded once: below, or when hyper drops this future first (the client went away).
    let mut outcome = Outcome::begin(&req, route, &snapshot, shared);
    let origin = req.headers().get(ORIGIN).cloned();
    let preflight = req.method() == Method::OPTIONS && route.is_some();
    let mut res = router::handle(req, route, &snapshot, ctx).await;
    let unanswered = res.extensions().get::<Unanswered>().map(|u| u.0);
    res.headers_mut().insert(SERVER, SERVER_NAME);
    if preflight && res.status() == hyper::StatusCode::NO_CONTENT {
        ctx.cors.apply_preflight(origin.as_ref(), res.headers_mut());
    } else {
        ctx.cors.apply(origin.as_ref(), res.headers_mut());
    }
    // No status line is sent for an unanswered request: it counts as status 0.
    let status = if unanswered.is_some() {
        0
    } else {
        res.status().as_u16()
    };
    let reference = res.extensions_mut().remove::<Reference>().map(|r| r.0);
    outcome.record(status, reference);
    match unanswered {
        Some(fault) => {
            if let (Fault::Reset, true, Some(connection)) = (fault, http1, connection) {
                connection.reset_on_close();
            }
            Err(FaultError(fault))
        }
        None => {
            if let (true, Some(connection)) = (http1, connection) {
                res.body_mut().cut_after_half(connection);
            }
            Ok(res)
        }
    }
}

/// The status recorded for a request whose client went away before its answer was ready (a
/// timeout during a simulated delay, say): nginx's "client closed request".
pub const CLIENT_CLOSED: u16 = 499;

/// What the access log and the journal show of a request (made only when one of them is on).
#[derive(Debug)]
struct Seen {
    /// When it arrived, for the journal only.
    arrived: Option<chrono::DateTime<chrono::Utc>>,
    method: Method,
    path: String,
    query: Option<String>,
    /// The token's first characters ([`token_head`]); none without a token. The whole token is
    /// only looked at, never kept.
    token: Option<String>,
    bundle: Option<Arc<str>>,
}

/// One request being answered: recorded (metrics, access log, journal) exactly once, by
/// [`Outcome::record`] when the answer is ready, or when dropped before that (hyper drops the
/// service's future when the client closes the connection or resets the stream) with status
/// [`CLIENT_CLOSED`] and the time taken so far.
struct Outcome<'a> {
    shared: &'a Shared,
    start: Instant,
    route: Option<Route>,
    /// The journal, when on and the request is not for `/_journal` itself.
    journal: Option<&'a Journal>,
    seen: Option<Seen>,
    recorded: bool,
}

impl<'a> Outcome<'a> {
    fn begin(
        req: &Request<Incoming>,
        route: Option<Route>,
        snapshot: &Snapshot,
        shared: &'a Shared,
    ) -> Outcome<'a> {
        let start = Instant::now();
        let journal = shared
            .ctx
            .journal
            .as_deref()
            .filter(|_| route.and_then(Route::operation) != Some(Operation::Journal));
        let seen = (shared.access_log || journal.is_some()).then(|| {
            let raw = router::token_of(req);
            let token = String::from_utf8_lossy(raw).into_owned();
            let bundle = Token::from_header(Some(raw))
                .ok()
                .flatten()
                .and_then(|t| snapshot.bundle(&t).map(|b| Arc::clone(&b.name)));
            Seen {
                arrived: journal.map(|_| chrono::Utc::now()),
                method: req.method().clone(),
                path: req.uri().path().to_string(),
                query: req.uri().query().map(str::to_string),
                bundle,
                token: (!token.is_empty()).then(|| token_head(&token)),
            }
        });
        Outcome {
            shared,
            start,
            route,
            journal,
            seen,
            recorded: false,
        }
    }

    /// Records the request as answered with `status` (0: no answer sent); `reference` is the
    /// payment reference the router found, for the journal.
    fn record(&mut self, status: u16, reference: Option<Box<str>>) {
        self.recorded = true;
        let took = self.start.elapsed();
        let endpoint = Route::label(self.route);
        self.shared
            .ctx
            .metrics
            .observe_request(endpoint, status, took);
        let Some(seen) = self.seen.take() else {
            return;
        };
        if self.shared.access_log {
            tracing::info!(
                target: "eventbox::access",
                method = %seen.method,
                path = %seen.path,
                status,
                duration_us = took.as_micros() as u64,
                bundle = seen.bundle.as_deref().unwrap_or("-"),
                token = %seen.token.as_deref().map_or("-".to_string(), |head| format!("{head}…")),
                "request"
            );
        }
        if let (Some(journal), Some(arrived)) = (self.journal, seen.arrived) {
            journal.record(journal::Entry {
                time: arrived,
                method: seen.method.to_string(),
                path: seen.path,
                query: seen.query,
                bundle: seen.bundle,
                token: seen.token,
                status,
                duration: took,
                reference,
            });
        }
    }
}

impl Drop for Outcome<'_> {
    fn drop(&mut self) {
        if self.recorded {
            return;
        }
        // As for a details request given no real answer: the query's reference, if any.
        let by_reference = self.route.is_some_and(Route::by_reference);
        let reference = match (&self.seen, self.journal) {
            (Some(seen), Some(_)) if by_reference => {
                details::from_query(seen.query.as_deref()).map(String::into_boxed_str)
            }
            _ => None,
        };
        self.record(CLIENT_CLOSED, reference);
    }
}
