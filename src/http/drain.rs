//! Shutdown without waiting for idle connections. hyper's graceful shutdown tells each
//! connection to finish (HTTP/1: no more keep-alive; HTTP/2: GOAWAY, then a PING round trip
//! before the final GOAWAY) and waits for it to end; an HTTP/2 client that never answers the PING
//! or never closes would hold the drain for its whole time limit. So each connection counts its
//! requests in flight (a request counts until its answer's body has been handed to the socket),
//! and once shutdown is asked for, a connection with none is closed at once; one with requests
//! in flight is closed as soon as they are done (or by the drain limit).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{watch, Notify};

/// A connection's requests in flight.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    count: AtomicUsize,
    /// Told each time the count falls to zero (a permit is kept if nobody waits).
    idle: Notify,
}

/// One request in flight; done when dropped.
#[derive(Debug)]
pub(crate) struct Entered(Arc<InFlight>);

impl InFlight {
    pub(crate) fn enter(self: &Arc<Self>) -> Entered {
        self.count.fetch_add(1, Ordering::AcqRel);
        Entered(Arc::clone(self))
    }

    pub(crate) fn is_idle(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_one();
        }
    }
}

/// A response body that keeps its request counted until it has been sent (or dropped).
#[derive(Debug)]
pub(crate) struct Tracked<B> {
    inner: B,
    _entered: Entered,
}

impl<B> Tracked<B> {
    pub(crate) fn new(inner: B, entered: Entered) -> Self {
        Tracked {
            inner,
            _entered: entered,
        }
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for Tracked<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Runs `connection` until it ends; once `stop` turns true, ends it as soon as it has no
/// request in flight.
pub(crate) async fn until_idle_after_stop<C, T, E>(
    connection: C,
    inflight: Arc<InFlight>,
    mut stop: watch::Receiver<bool>,
) -> Option<Result<T, E>>
where
    C: Future<Output = Result<T, E>>,
{
    tokio::pin!(connection);
    tokio::select! {
        done = &mut connection => return Some(done),
        _ = stop.wait_for(|s| *s) => {}
    }
    loop {
        if inflight.is_idle() {
            return None; // dropped: closed without waiting for the client
        }
        tokio::select! {
            done = &mut connection => return Some(done),
            () = inflight.idle.notified() => {}
        }
    }
}
