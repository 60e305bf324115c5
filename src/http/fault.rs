//! Delivering a [`Fault`] (`X-Eventbox-Fault`, or a bundle's `[simulate] fault_rate`) below
//! hyper, so a client sees what a broken server really does.
//!
//! hyper always writes a well-formed answer, so each fault is made by the piece that can make it:
//! - `reset` and `empty`: the service fails the request ([`FaultError`]). HTTP/1 then closes the
//!   connection without writing a byte; for `reset` the service first marks the connection's
//!   [`ConnFault`], and [`FaultIo`] (the connection's socket) turns the close into a TCP RST
//!   with `SO_LINGER 0`;
//! - `truncate`: the answer keeps its status, headers and full `Content-Length`, and its
//!   [`ReplyBody`] yields half the bytes. Over HTTP/1 it then waits and marks the connection, and
//!   [`FaultIo`] fails hyper's next flush, which comes once everything buffered (head and half
//!   the body) has been written: hyper drops the connection and the client reads EOF. (A body
//!   that simply failed would make hyper drop its unflushed buffer: nothing would be sent.)
//! - over HTTP/2 every fault resets only its stream (`RST_STREAM`), so other requests on the
//!   connection carry on; for `truncate` the reset may overtake the queued head and data.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::prepare::Payload;

pub(crate) use super::control::Fault;

/// A request failed on purpose; hyper sends no answer for it.
#[derive(Debug, thiserror::Error)]
#[error("fault {} (X-Eventbox-Fault, or the bundle's [simulate] fault_rate)", .0.as_str())]
pub(crate) struct FaultError(pub Fault);

/// The body of every answer: whole, or cut in half by `X-Eventbox-Fault: truncate`.
#[derive(Debug)]
pub(crate) struct ReplyBody {
    /// What to send, the index of its next part, and how many bytes are left.
    data: Payload,
    next: usize,
    left: u64,
    /// For a truncated body: the length announced; the body fails once `data` is sent.
    truncated: Option<u64>,
    /// For a truncated HTTP/1 body: the connection to cut once `data` is written.
    cut: Option<ConnFault>,
}

impl ReplyBody {
    /// The whole body.
    pub(crate) fn full(data: Payload) -> ReplyBody {
        ReplyBody {
            left: data.len(),
            data,
            next: 0,
            truncated: None,
            cut: None,
        }
    }

    /// Half of `data`, announced at its full length, then an error.
    pub(crate) fn truncated(data: Payload) -> ReplyBody {
        let full = data.len();
        ReplyBody {
            truncated: Some(full),
            ..ReplyBody::full(data.prefix(full / 2))
        }
    }

    /// The body bytes that will be sent (half of a truncated body, whose `Content-Length` says
    /// the whole).
    pub(crate) fn to_send(&self) -> u64 {
        self.left
    }

    /// Over HTTP/1: instead of failing after half the body (which would lose it in hyper's
    /// buffer), cut `connection` once it has been written. No effect on a whole body.
    pub(crate) fn cut_after_half(&mut self, connection: &ConnFault) {
        if self.truncated.is_some() {
            self.cut = Some(connection.clone());
        }
    }
}

impl Body for ReplyBody {
    type Data = Bytes;
    type Error = FaultError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, FaultError>>> {
        let next = self.next;
        if let Some(part) = self.data.take_part(next) {
            self.next += 1;
            self.left -= part.len() as u64;
            return Poll::Ready(Some(Ok(Frame::data(part))));
        }
        if let Some(connection) = &self.cut {
            // The half is in hyper's buffer now; the next flush writes it, then fails.
            connection.mark(CUT);
            return Poll::Pending;
        }
        match self.truncated.take() {
            Some(_) => Poll::Ready(Some(Err(FaultError(Fault::Truncate)))),
            None => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0 && self.truncated.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.truncated.unwrap_or(self.left))
    }
}

const RESET: u8 = 1;
const CUT: u8 = 2;

/// What the service asked of one HTTP/1 connection's socket: nothing, an RST when it is closed
/// (`reset`), or failing the next flush (`truncate`). Shared by the service and [`FaultIo`].
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnFault(Arc<AtomicU8>);

impl ConnFault {
    /// Close this connection with an RST (`X-Eventbox-Fault: reset`).
    pub(crate) fn reset_on_close(&self) {
        self.mark(RESET);
    }

    fn mark(&self, what: u8) {
        self.0.fetch_or(what, Ordering::Relaxed);
    }

    fn is(&self, what: u8) -> bool {
        self.0.load(Ordering::Relaxed) & what != 0
    }
}

/// A connection's socket, acting on its [`ConnFault`]: closed with a TCP RST instead of a FIN
/// after `reset`, and failing the flush that follows a truncated body.
#[derive(Debug)]
pub(crate) struct FaultIo {
    inner: TcpStream,
    fault: ConnFault,
}

impl FaultIo {
    pub(crate) fn new(inner: TcpStream, fault: ConnFault) -> Self {
        FaultIo { inner, fault }
    }

    fn is(&self, what: u8) -> bool {
        self.fault.is(what)
    }
}

impl Drop for FaultIo {
    fn drop(&mut self) {
        if self.is(RESET) {
            // Linger 0: closing discards what is unsent and sends RST. Nothing is left to send.
            if let Err(e) = self.inner.set_zero_linger() {
                tracing::debug!(error = %e, "cannot reset the connection; it is closed instead");
            }
        }
    }
}

impl AsyncRead for FaultIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for FaultIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, data)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        super::sendfile::poll_write_vectored(&mut self.inner, cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    /// hyper flushes the socket once everything it buffered is written: after a truncated body,
    /// failing here ends the connection with exactly the head and half the body sent.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.inner).poll_flush(cx);
        if self.is(CUT) && matches!(flushed, Poll::Ready(Ok(()))) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "answer truncated on purpose (fault truncate)",
            )));
        }
        flushed
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
