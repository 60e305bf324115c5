//! The accept loop: one task per connection, HTTP/1.1 and HTTP/2 (prior knowledge) on the same
//! port through hyper-util's auto builder, and a graceful shutdown that lets requests in flight
//! finish (bounded).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use super::router::{self, ConnInfo};
use crate::store::Store;

/// How long requests in flight may take to finish once shutdown is asked for.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `store` on an already bound listener until `shutdown` completes, then drains.
pub async fn serve(
    listener: TcpListener,
    store: Arc<Store>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let conn = ConnInfo {
        local: listener.local_addr()?,
    };
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
        let store = Arc::clone(&store);
        let service = service_fn(move |req| {
            let store = Arc::clone(&store);
            async move {
                let snapshot = store.snapshot();
                Ok::<_, Infallible>(router::handle(req, &snapshot, &conn).await)
            }
        });
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
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
