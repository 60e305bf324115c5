//! A deadline for a request body (`--body-timeout`): a body still incomplete that long after it
//! is first read fails with [`BodyTimedOut`], answered 408 with the connection closed. The idle
//! timeout alone cannot bound a body: a client dripping one byte every few seconds is never
//! idle, and would hold its connection slot for ever.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::Sleep;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body did not arrive whole within the deadline.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub(crate) struct BodyTimedOut(pub Duration);

/// A body that fails once `limit` has passed since its first read.
#[derive(Debug)]
pub(crate) struct DeadlineBody<B> {
    inner: B,
    limit: Duration,
    /// Armed on the first read: a body nobody reads costs no timer.
    timer: Option<Pin<Box<Sleep>>>,
    /// Set once the body was read to its end ([`DeadlineBody::telling`]).
    ended: Option<Arc<AtomicBool>>,
}

impl<B> DeadlineBody<B> {
    pub(crate) fn new(inner: B, limit: Duration) -> Self {
        DeadlineBody {
            inner,
            limit,
            timer: None,
            ended: None,
        }
    }

    /// The same, setting `ended` once the body was read to its end: whether the connection
    /// (HTTP/1) is ready for the next request once this one is answered.
    pub(crate) fn telling(self, ended: Option<Arc<AtomicBool>>) -> Self {
        DeadlineBody { ended, ..self }
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            // The end, or the last frame of a body whose length was known; not an error.
            let end = match &frame {
                None => true,
                Some(Ok(_)) => this.inner.is_end_stream(),
                Some(Err(_)) => false,
            };
            if let (true, Some(ended)) = (end, &this.ended) {
                ended.store(true, Ordering::Release);
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let limit = this.limit;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimedOut(limit))))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
