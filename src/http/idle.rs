//! An idle timeout for connections: a connection without traffic (no byte read or written) for
//! the timeout is closed. hyper's header-read timeout only guards HTTP/1 request heads; this also
//! covers HTTP/2 and keep-alive connections left open by clients that went away.
//!
//! Until its protocol is known a connection gets the (shorter) header timeout instead, counted
//! from when it was accepted: hyper's own does not start before then (hyper-util reads the
//! first bytes to tell HTTP/1 from HTTP/2, and waits while they could be HTTP/2's preface), so a
//! client that connects and sends nothing, or the preface a byte at a time, would otherwise hold
//! its connection for the whole idle timeout, or for ever. The protocol is known at the first
//! byte that is not the preface's (HTTP/1, whose head hyper's header timeout then bounds) or at
//! the preface's last (HTTP/2, idle from then on as any connection).
//!
//! A simulated delay is the server's silence, not the client's: while the connection has a
//! request in flight and no write waits for the client, a read that waits gets `grace` more
//! (`--max-delay`, the longest delay), so a delay never closes its connection. The grace is
//! bounded, so nothing else in flight (an HTTP/2 client that stops granting window, a sync
//! that hangs) can hold a connection for ever. A write that the client does not take (it stops
//! reading its answer) times out after the timeout alone.
//!
//! Activity only records an `Instant`; the timer is re-armed when it fires, not on every read or
//! write, so the cost on the hot path is one clock read per I/O call.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use super::drain::InFlight;

/// HTTP/2's connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A connection whose protocol is not known yet.
#[derive(Debug)]
struct Opening {
    /// When it was accepted: the header timeout counts from then.
    began: Instant,
    /// The idle timeout, in force once the protocol is known.
    idle: Duration,
    /// How many bytes of [`PREFACE`] have come.
    preface: usize,
}

impl Opening {
    /// Takes the bytes read next; whether the protocol is known now.
    fn known_after(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            if PREFACE.get(self.preface) != Some(&b) {
                return true;
            }
            self.preface += 1;
        }
        self.preface == PREFACE.len()
    }
}

/// A stream closed after `idle` without traffic.
#[derive(Debug)]
pub(crate) struct IdleTimeout<S> {
    inner: S,
    /// The timeout in force: the header timeout until the protocol is known, then the idle one.
    idle: Duration,
    /// While the protocol is not known.
    opening: Option<Opening>,
    last_activity: Instant,
    timer: Pin<Box<Sleep>>,
    /// What a waiting read gets beyond `idle` while a request is in flight.
    grace: Duration,
    /// The connection's requests in flight (see `grace`).
    in_flight: Arc<InFlight>,
    /// The last write waited for the client to take bytes.
    write_stalled: bool,
}

impl<S> IdleTimeout<S> {
    /// A connection closed when its protocol is not known `first` (at most `idle`) after it
    /// was accepted, and after `idle` without traffic from then on.
    pub(crate) fn new(
        inner: S,
        first: Duration,
        idle: Duration,
        grace: Duration,
        in_flight: Arc<InFlight>,
    ) -> Self {
        let now = Instant::now();
        let first = first.min(idle);
        IdleTimeout {
            inner,
            idle: first,
            opening: Some(Opening {
                began: now,
                idle,
                preface: 0,
            }),
            last_activity: now,
            timer: Box::pin(tokio::time::sleep_until(now + first)),
            grace,
            in_flight,
            write_stalled: false,
        }
    }

    /// Whether the connection has been idle too long; re-arms the timer otherwise.
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return false;
            }
            let since = self
                .opening
                .as_ref()
                .map_or(self.last_activity, |o| o.began);
            let deadline = since + self.idle;
            if deadline <= Instant::now() {
                return true;
            }
            self.timer.as_mut().reset(deadline);
        }
    }

    /// [`Self::expired`] for a read that waits: while a request is in flight and no write
    /// waits for the client, the timer is put off to the end of the grace instead (and
    /// polled, to wake then). While the last write waited for the client, the write decides
    /// (polled in the same turn, as a connection flushes what it holds): the client may have
    /// taken those bytes since, and a stall that is over closes nothing.
    fn read_expired(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.expired(cx) || self.write_stalled {
            return false;
        }
        let end = self.last_activity + self.idle + self.grace;
        if self.in_flight.is_idle() || end <= Instant::now() {
            return true;
        }
        self.timer.as_mut().reset(end);
        let _ = self.timer.as_mut().poll(cx);
        false
    }
}

impl<S> IdleTimeout<S> {
    /// Records a write that moved bytes, or turns a stalled one into a timeout once idle too long.
    fn after_write(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        self.write_stalled = written.is_pending();
        let moved = match written {
            Poll::Ready(Ok(n)) if n > 0 => Some(Instant::now()),
            _ => None,
        };
        self.in_flight.wrote(self.write_stalled, moved);
        match written {
            Poll::Ready(Ok(n)) => {
                if let Some(now) = moved {
                    self.last_activity = now;
                    // A read past the deadline left the timer spent while this write stalled
                    // (see `read_expired`): armed again, or nothing would wake a connection
                    // that falls silent after this write.
                    if self.timer.is_elapsed() {
                        self.timer.as_mut().reset(self.last_activity + self.idle);
                        let _ = self.timer.as_mut().poll(cx);
                    }
                }
                Poll::Ready(Ok(n))
            }
            Poll::Pending if self.expired(cx) => Poll::Ready(Err(timed_out())),
            other => other,
        }
    }
}

fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "connection idle for too long")
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleTimeout<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    let now = Instant::now();
                    let read = &buf.filled()[before..];
                    if let Some(idle) = self
                        .opening
                        .as_mut()
                        .and_then(|o| o.known_after(read).then_some(o.idle))
                    {
                        self.idle = idle;
                        self.opening = None;
                    }
                    self.last_activity = now;
                    self.in_flight.traffic(now);
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending if self.read_expired(cx) => Poll::Ready(Err(timed_out())),
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for IdleTimeout<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, data);
        self.after_write(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.after_write(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;

    const IDLE: Duration = Duration::from_secs(1);

    /// A server side whose client (the other end, `client`) holds 64 bytes unread at most.
    fn pair() -> (
        IdleTimeout<tokio::io::DuplexStream>,
        tokio::io::DuplexStream,
    ) {
        let (server, client) = tokio::io::duplex(64);
        let in_flight = Arc::new(InFlight::default());
        (
            IdleTimeout::new(server, IDLE, IDLE, Duration::ZERO, in_flight),
            client,
        )
    }

    /// Polls once, as a connection's task does when woken.
    async fn poll_once<T>(f: impl FnMut(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
        let mut f = f;
        poll_fn(|cx| Poll::Ready(f(cx))).await
    }

    async fn read_once(io: &mut IdleTimeout<DuplexStream>) -> Poll<io::Result<()>> {
        let mut buf = [0u8; 8];
        poll_once(|cx| Pin::new(&mut *io).poll_read(cx, &mut ReadBuf::new(&mut buf))).await
    }

    async fn write_once(io: &mut IdleTimeout<DuplexStream>) -> Poll<io::Result<usize>> {
        poll_once(|cx| Pin::new(&mut *io).poll_write(cx, &[b'x'; 64])).await
    }

    #[tokio::test(start_paused = true)]
    async fn until_the_protocol_is_known_the_first_timeout_counts_from_the_start() {
        const FIRST: Duration = Duration::from_millis(100);
        let open = || {
            let (server, client) = tokio::io::duplex(64);
            let io = IdleTimeout::new(server, FIRST, IDLE, Duration::ZERO, Arc::default());
            (io, client)
        };
        let (mut trickle, mut trickling) = open();
        let (mut http1, mut http1_client) = open();
        let (mut http2, mut http2_client) = open();
        http1_client.write_all(b"G").await.expect("write");
        assert!(matches!(read_once(&mut http1).await, Poll::Ready(Ok(()))));
        http2_client.write_all(PREFACE).await.expect("write");
        for _ in 0..PREFACE.len().div_ceil(8) {
            assert!(matches!(read_once(&mut http2).await, Poll::Ready(Ok(()))));
        }
        // HTTP/2's preface a byte at a time: each byte is traffic, yet the protocol is unknown.
        for byte in &PREFACE[..2] {
            trickling.write_all(&[*byte]).await.expect("write");
            assert!(matches!(read_once(&mut trickle).await, Poll::Ready(Ok(()))));
            tokio::time::advance(FIRST / 2).await;
        }
        tokio::time::advance(Duration::from_millis(1)).await;

        match read_once(&mut trickle).await {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut),
            other => panic!("a connection whose protocol is unknown is closed: {other:?}"),
        }
        for (what, io) in [("HTTP/1", &mut http1), ("HTTP/2", &mut http2)] {
            assert!(
                read_once(io).await.is_pending(),
                "{what} waits for the idle timeout"
            );
        }
        tokio::time::advance(IDLE).await;
        assert!(matches!(read_once(&mut http1).await, Poll::Ready(Err(_))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_the_client_never_takes_times_out() {
        let (mut io, _client) = pair();
        assert!(matches!(write_once(&mut io).await, Poll::Ready(Ok(64))));
        assert!(
            write_once(&mut io).await.is_pending(),
            "the client's side is full"
        );

        tokio::time::advance(IDLE + Duration::from_millis(1)).await;

        // The read polled first leaves it to the write, which closes the connection.
        assert!(read_once(&mut io).await.is_pending());
        match write_once(&mut io).await {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut),
            other => panic!("{other:?}"),
        }
    }

    /// A write the client does not take at first, then does (before the connection's task runs
    /// again), and the deadline passed meanwhile.
    async fn stall_ended(io: &mut IdleTimeout<DuplexStream>, client: &mut DuplexStream) {
        assert!(matches!(write_once(io).await, Poll::Ready(Ok(64))));
        assert!(
            write_once(io).await.is_pending(),
            "the client's side is full"
        );
        let mut taken = [0u8; 64];
        client
            .read_exact(&mut taken)
            .await
            .expect("the client reads");
        tokio::time::advance(IDLE + Duration::from_millis(1)).await;
    }

    /// The read polled first must not close the connection for a stall that is over; the write
    /// goes on.
    #[tokio::test(start_paused = true)]
    async fn a_stall_the_client_ended_does_not_close_the_connection() {
        let (mut io, mut client) = pair();
        stall_ended(&mut io, &mut client).await;

        assert!(
            read_once(&mut io).await.is_pending(),
            "closed by a stale stall"
        );
        assert!(matches!(write_once(&mut io).await, Poll::Ready(Ok(64))));
    }

    /// Counts the wake-ups of the task that polled with it.
    struct Wakes(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// After the stall the client ended, a connection that then falls silent is still woken by
    /// the timer (to be closed): the write that went on arms it again.
    #[tokio::test(start_paused = true)]
    async fn a_connection_silent_after_an_ended_stall_is_still_woken() {
        let (mut io, mut client) = pair();
        stall_ended(&mut io, &mut client).await;
        let wakes = Arc::new(Wakes(Default::default()));
        let waker = std::task::Waker::from(Arc::clone(&wakes));
        let mut cx = Context::from_waker(&waker);
        let mut buf = [0u8; 8];
        let read = Pin::new(&mut io).poll_read(&mut cx, &mut ReadBuf::new(&mut buf));
        assert!(read.is_pending());
        let written = Pin::new(&mut io).poll_write(&mut cx, &[b'x'; 64]);
        assert!(matches!(written, Poll::Ready(Ok(64))));
        let before = wakes.0.load(std::sync::atomic::Ordering::Relaxed);

        tokio::time::advance(IDLE * 10).await;

        assert!(
            wakes.0.load(std::sync::atomic::Ordering::Relaxed) > before,
            "nothing wakes the silent connection"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_silent_for_the_timeout_is_closed_on_read() {
        let (mut io, _client) = pair();
        assert!(read_once(&mut io).await.is_pending());
        tokio::time::advance(IDLE + Duration::from_millis(1)).await;
        match read_once(&mut io).await {
            Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::TimedOut),
            other => panic!("{other:?}"),
        }
    }
}
