//! The accept loop: one task per connection, HTTP/1.1 and HTTP/2 (prior knowledge) on the same
//! port through hyper-util's auto builder, and a graceful shutdown that lets requests in flight
//! finish (bounded). Around the router it measures each request (metrics) and, when asked,
//! writes the access log.

use std::convert::Infallible;
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

use super::cors::Cors;
use super::idle::IdleTimeout;
use super::router::{self, Context, Route};
use crate::metrics::Metrics;
use crate::problem::token_hint;
use crate::store::Store;

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

/// Serves until `shutdown` completes, then stops accepting and lets requests in flight finish
/// (up to [`DRAIN_TIMEOUT`]). Takes an already bound listener, so tests bind `127.0.0.1:0`.
pub async fn serve(
    listener: TcpListener,
    service: Service,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let ctx = Arc::new(Context {
        local: listener.local_addr()?,
        metrics: Arc::clone(&service.metrics),
        compression: service.compression,
        cors: service.cors.clone(),
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
        let service = service.clone();
        let ctx = Arc::clone(&ctx);
        let svc = service_fn(move |req| {
            let service = service.clone();
            let ctx = Arc::clone(&ctx);
            async move { Ok::<_, Infallible>(answer(req, &service, &ctx).await) }
        });
        let io = TokioIo::new(IdleTimeout::new(stream, limits.idle_timeout));
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

async fn answer(
    req: Request<Incoming>,
    service: &Service,
    ctx: &Context,
) -> hyper::Response<http_body_util::Full<bytes::Bytes>> {
    let start = Instant::now();
    let route = Route::of(req.uri().path());
    let access = service.access_log.then(|| {
        let token = String::from_utf8_lossy(router::token_of(&req)).into_owned();
        (req.method().clone(), req.uri().path().to_string(), token)
    });
    let origin = req.headers().get(ORIGIN).cloned();
    let preflight = req.method() == Method::OPTIONS && route.is_some();
    let snapshot = service.store.snapshot();
    let mut res = router::handle(req, route, &snapshot, ctx).await;
    res.headers_mut().insert(SERVER, SERVER_NAME);
    if preflight && res.status() == hyper::StatusCode::NO_CONTENT {
        ctx.cors.apply_preflight(origin.as_ref(), res.headers_mut());
    } else {
        ctx.cors.apply(origin.as_ref(), res.headers_mut());
    }
    let took = start.elapsed();
    let endpoint = Route::label(route);
    ctx.metrics
        .observe_request(endpoint, res.status().as_u16(), took);
    if let Some((method, path, token)) = access {
        let bundle = snapshot
            .bundle(&token)
            .map(|b| b.name.as_ref())
            .unwrap_or("-");
        let token = if token.is_empty() {
            "-".to_string()
        } else {
            token_hint(&token)
        };
        tracing::info!(
            target: "eventbox::access",
            %method,
            %path,
            status = res.status().as_u16(),
            duration_us = took.as_micros() as u64,
            bundle,
            token = %token,
            "request"
        );
    }
    res
}
