//! The body-read timeout: a request body whose next bytes do not arrive
//! within the port's header-read timeout fails with [`BodyTimeout`], so
//! the handler reading it answers (400, naming the timeout) and hyper
//! closes the connection (the body was not read to its end). Counted as
//! `reason="body_timeout"`.
//!
//! A request whose body has ended, or that has none, is never timed out
//! here: a handler may take as long as it needs to answer (a long-poll
//! watch).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

use super::{CloseReason, Port};

/// The request body as the ports' services receive it.
pub(crate) struct TimedBody {
    inner: Incoming,
    limit: Duration,
    timer: Pin<Box<Sleep>>,
    port: Option<Port>,
}

/// The error a [`TimedBody`] fails with when its bytes stop arriving.
#[derive(Debug, thiserror::Error)]
#[error(
    "no byte of the request body arrived for {0:?} (the port's header-read timeout); the connection is closed"
)]
pub(crate) struct BodyTimeout(Duration);

impl TimedBody {
    /// `inner`, timed out after `port`'s header-read timeout without bytes.
    pub(super) fn new(inner: Incoming, port: &Port) -> Self {
        let limit = port.limits.header_read_timeout;
        TimedBody {
            inner,
            limit,
            timer: Box::pin(tokio::time::sleep(limit)),
            port: Some(port.clone()),
        }
    }
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let at = Instant::now() + this.limit;
                this.timer.as_mut().reset(at);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(other) => Poll::Ready(other.map(|r| r.map_err(Into::into))),
            Poll::Pending => {
                if this.timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if let Some(port) = this.port.take() {
                    tracing::debug!(port = port.name, limit = ?this.limit,
                        "request body stalled; answering 400 and closing the connection");
                    port.metrics.closed(port.name, CloseReason::BodyTimeout);
                }
                Poll::Ready(Some(Err(Box::new(BodyTimeout(this.limit)))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
