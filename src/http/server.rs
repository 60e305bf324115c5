//! The accept loop: one task per connection, HTTP/1.1 and HTTP/2 (prior knowledge) on the same
//! port through hyper-util's auto builder, and a graceful shutdown that lets requests in flight
//! finish (bounded). Around the router it measures each request (metrics) and, when asked,
//! writes the access log.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::header::{HeaderValue, SERVER};
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

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
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
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
        let connection = builder
            .serve_connection(TokioIo::new(stream), svc)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
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
    let snapshot = service.store.snapshot();
    let mut res = router::handle(req, route, &snapshot, ctx).await;
    res.headers_mut().insert(SERVER, SERVER_NAME);
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
