//! A request body that can be sent again: the first try streams the
//! downstream body and keeps a copy of what passed, up to a cap; a retry
//! replays the copy and then goes on reading the downstream body where
//! the first try stopped.
//!
//! Owns the copy. Nothing is buffered ahead of the upstream: a try gets
//! each chunk as it arrives, so a gRPC stream or a large upload is never
//! held back. A body larger than the cap streams through and is not
//! retried (linkerd2-proxy's rule, 64 KiB). A request without
//! `content-length` (every gRPC call) is retryable as long as it stays
//! under the cap.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};

/// The most a request body may hold and still be retried.
pub const REPLAY_CAP: usize = 64 * 1024;

/// The error a body yields (the downstream's, boxed).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The downstream body as it arrives.
type Inner = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// One try's view of a shared request body.
pub struct ReplayBody {
    shared: Arc<Mutex<Shared>>,
    /// Index of the next copied chunk this try sends.
    position: usize,
    /// Whether this try has sent the trailers or the end.
    done: bool,
}

struct Shared {
    inner: Option<Inner>,
    /// Every chunk read from the downstream so far, while under the cap.
    copy: Vec<Bytes>,
    copied: usize,
    /// The copy was dropped: the body is larger than the cap.
    overflowed: bool,
    trailers: Option<HeaderMap>,
    /// The downstream body has ended.
    ended: bool,
    /// A hint from the first try's view: the downstream's size.
    hint: SizeHint,
}

impl ReplayBody {
    /// The first try's body over `inner`.
    pub fn new<B>(inner: B) -> ReplayBody
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        use http_body_util::BodyExt;
        let hint = inner.size_hint();
        let ended = inner.is_end_stream();
        let known_too_large = hint.lower() > REPLAY_CAP as u64;
        ReplayBody {
            shared: Arc::new(Mutex::new(Shared {
                inner: Some(inner.map_err(Into::into).boxed_unsync()),
                copy: Vec::new(),
                copied: 0,
                overflowed: known_too_large,
                trailers: None,
                ended,
                hint,
            })),
            position: 0,
            done: false,
        }
    }

    /// An empty body.
    pub fn empty() -> ReplayBody {
        ReplayBody::new(http_body_util::Empty::<Bytes>::new())
    }

    /// A handle on the shared body that only makes the bodies of
    /// retries ([`ReplayBody::try_clone`]); it is never sent itself.
    pub fn handle(&self) -> ReplayBody {
        ReplayBody {
            shared: self.shared.clone(),
            position: 0,
            done: false,
        }
    }

    /// The body for another try, or `None` when this one cannot be sent
    /// again (it outgrew [`REPLAY_CAP`]).
    pub fn try_clone(&self) -> Option<ReplayBody> {
        let shared = self.shared.lock().expect("replay body lock");
        (!shared.overflowed).then(|| ReplayBody {
            shared: self.shared.clone(),
            position: 0,
            done: false,
        })
    }

    /// Whether another try could still replay this body.
    pub fn is_replayable(&self) -> bool {
        !self.shared.lock().expect("replay body lock").overflowed
    }
}

impl Body for ReplayBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        let mut shared = this.shared.lock().expect("replay body lock");
        if this.position < shared.copy.len() {
            let chunk = shared.copy[this.position].clone();
            this.position += 1;
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if shared.overflowed && this.position > 0 && this.position != usize::MAX {
            // This try replayed a copy that has since been dropped by a
            // later read; it cannot go on consistently.
            this.done = true;
            return Poll::Ready(Some(Err("request body outgrew the retry buffer".into())));
        }
        if shared.ended {
            this.done = true;
            return Poll::Ready(shared.trailers.clone().map(|t| Ok(Frame::trailers(t))));
        }
        let Some(inner) = shared.inner.as_mut() else {
            this.done = true;
            return Poll::Ready(None);
        };
        match Pin::new(inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                shared.ended = true;
                shared.inner = None;
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(e))) => {
                shared.ended = true;
                shared.inner = None;
                shared.overflowed = true;
                this.done = true;
                Poll::Ready(Some(Err(e)))
            }
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(chunk) => {
                    if !shared.overflowed {
                        shared.copied += chunk.len();
                        if shared.copied > REPLAY_CAP {
                            shared.overflowed = true;
                            shared.copy = Vec::new();
                            // From here on this try streams straight through.
                            this.position = usize::MAX;
                        } else {
                            shared.copy.push(chunk.clone());
                            this.position = shared.copy.len();
                        }
                    }
                    Poll::Ready(Some(Ok(Frame::data(chunk))))
                }
                Err(frame) => {
                    if let Some(trailers) = frame.trailers_ref() {
                        shared.trailers = Some(trailers.clone());
                    }
                    shared.ended = true;
                    shared.inner = None;
                    this.done = true;
                    Poll::Ready(Some(Ok(frame)))
                }
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        if self.done {
            return true;
        }
        let shared = self.shared.lock().expect("replay body lock");
        shared.ended && self.position >= shared.copy.len() && shared.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.shared.lock().expect("replay body lock").hint
    }
}

#[cfg(test)]
mod tests;
