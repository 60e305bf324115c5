//! Shutdown without waiting for idle connections. hyper's graceful shutdown tells each
//! connection to finish (HTTP/1: no more keep-alive; HTTP/2: GOAWAY, then a PING round trip
//! before the final GOAWAY) and waits for it to end; an HTTP/2 client that never answers the PING
//! or never closes would hold the drain for its whole time limit. So each connection counts its
//! requests in flight (a request counts until hyper has taken its answer's last bytes) and
//! notes its traffic, and once shutdown is asked for, a connection is closed when it has no
//! request in flight, no write waiting for the client, and neither read nor written anything
//! for [`SETTLE`] (or by the drain limit); one that ends by itself meanwhile (hyper's graceful
//! shutdown closes an HTTP/1 one once its answer is out) ends sooner. hyper may still hold an
//! answer it has taken whole (a prepared answer is one buffer): over HTTP/1 it writes it as the
//! client reads (writes move, or wait); over HTTP/2 as the client's window allows, which the
//! client opens with `WINDOW_UPDATE` frames as it reads (reads move). A request done counts as
//! traffic too, so an answer finished after shutdown is written before the connection goes.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

/// How long a connection without requests in flight must have been quiet (nothing read,
/// nothing written) before a shutdown closes it: a transfer still under way moves bytes, or
/// window updates, far more often than this. Over HTTP/1 a client that pauses its reading is
/// waited for anyway (the write waits); over HTTP/2 one that pauses for longer than this may
/// be cut, since h2 holding unsent data for a shut window cannot be told from a connection with
/// nothing left to send.
pub(crate) const SETTLE: Duration = Duration::from_secs(1);

/// A connection's requests in flight, and its writes.
#[derive(Debug)]
pub(crate) struct InFlight {
    count: AtomicUsize,
    /// Told each time the count falls to zero, and when a write that waited for the client
    /// moves again (a permit is kept if nobody waits).
    idle: Notify,
    /// The last write waited for the client to take bytes.
    write_waiting: AtomicBool,
    /// When bytes last moved either way, or a request was done, in microseconds after
    /// `since`.
    last_traffic: AtomicU64,
    since: Instant,
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight {
            count: AtomicUsize::new(0),
            idle: Notify::new(),
            write_waiting: AtomicBool::new(false),
            last_traffic: AtomicU64::new(0),
            since: Instant::now(),
        }
    }
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

    /// Records a write to the socket: whether it waited for the client, and when it moved
    /// bytes, if it did.
    pub(crate) fn wrote(&self, waiting: bool, moved: Option<Instant>) {
        if let Some(at) = moved {
            self.traffic(at);
        }
        let was = self.write_waiting.swap(waiting, Ordering::AcqRel);
        if was && !waiting {
            self.idle.notify_one();
        }
    }

    /// Records traffic at `at`: bytes read or written, or a request done.
    pub(crate) fn traffic(&self, at: Instant) {
        let at = at.saturating_duration_since(self.since).as_micros();
        self.last_traffic
            .store(u64::try_from(at).unwrap_or(u64::MAX), Ordering::Release);
    }

    /// How long until the connection has been quiet for [`SETTLE`]: `None` when it has no
    /// request in flight, no write waiting and no traffic for that long (it may close).
    fn settling(&self) -> Option<Duration> {
        if !self.is_idle() || self.write_waiting.load(Ordering::Acquire) {
            return Some(SETTLE);
        }
        let last = Duration::from_micros(self.last_traffic.load(Ordering::Acquire));
        let quiet = self.since.elapsed().saturating_sub(last);
        SETTLE.checked_sub(quiet).filter(|left| !left.is_zero())
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        // hyper has taken the answer's last bytes, not yet written them: the connection is
        // given a quiet time from now.
        self.0.traffic(Instant::now());
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
/// request in flight and has stopped writing (see [`InFlight::settling`]).
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
        let Some(wait) = inflight.settling() else {
            return None; // dropped: closed without waiting for the client
        };
        // Busy (a request in flight, a write waiting): until that changes; quiet but only
        // lately: until it has been quiet long enough. Either way the state is asked again.
        tokio::select! {
            done = &mut connection => return Some(done),
            () = inflight.idle.notified() => {}
            () = tokio::time::sleep(wait), if inflight.is_idle() => {}
        }
    }
}
