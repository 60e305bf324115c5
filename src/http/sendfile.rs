//! Writing to a client's socket: what lies in a memory file ([`crate::memfile`]) is sent from
//! the file (`sendfile`), without copying it into the socket; the rest is written as it is.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use tokio::net::TcpStream;

/// Writes `bufs` to `stream` as `poll_write_vectored` does: some of them, from the first,
/// returning how many bytes were written. Buffers before one that lies in a memory file are
/// written first (the kernel told that more follows), then that one is sent from its file.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
pub(crate) fn poll_write_vectored(
    stream: &mut TcpStream,
    cx: &mut Context<'_>,
    bufs: &[IoSlice<'_>],
) -> Poll<io::Result<usize>> {
    use crate::memfile::MIN_LEN;
    use rustix::net::SendFlags;
    use tokio::io::Interest;

    // Smaller buffers (the head, short bodies, HTTP/2 frames) are written without looking.
    let locate = |b: &IoSlice<'_>| (b.len() >= MIN_LEN).then(|| crate::memfile::locate(b))?;
    let Some((before, file)) = bufs
        .iter()
        .enumerate()
        .find_map(|(i, b)| Some((i, locate(b)?)))
    else {
        return Pin::new(stream).poll_write_vectored(cx, bufs);
    };
    let sent = loop {
        std::task::ready!(stream.poll_write_ready(cx))?;
        let socket = &*stream;
        let sent = socket.try_io(Interest::WRITABLE, || {
            if before == 0 {
                file.send(socket)
            } else {
                let flags = SendFlags::MORE | SendFlags::NOSIGNAL;
                rustix::net::sendmsg(socket, &bufs[..before], &mut Default::default(), flags)
                    .map_err(Into::into)
            }
        });
        match sent {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            sent => break sent,
        }
    };
    match sent {
        // Nothing was sent: the same buffers are written instead.
        Err(e) if crate::memfile::refused(&e) => Pin::new(stream).poll_write_vectored(cx, bufs),
        sent => Poll::Ready(sent),
    }
}

#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
pub(crate) fn poll_write_vectored(
    stream: &mut TcpStream,
    cx: &mut Context<'_>,
    bufs: &[IoSlice<'_>],
) -> Poll<io::Result<usize>> {
    Pin::new(stream).poll_write_vectored(cx, bufs)
}
