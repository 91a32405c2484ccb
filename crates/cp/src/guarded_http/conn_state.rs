//! What one connection is doing (reading a header, serving requests, or
//! idle between them), kept up to date by a wrapper around its stream
//! ([`Watched`]: bytes arrived) and one around the service ([`Tracked`]: a
//! request began, its response ended), and the watchdog that closes the
//! connection when the phase it is in has lasted too long.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use hyper::body::{Body, Frame, SizeHint};
use hyper::service::Service;
use hyper::{Request, Response};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::timed_body::TimedBody;
use super::{CloseReason, ConnLimits};

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for a request header to complete, since this instant (the
    /// accept, or the first byte after an idle wait).
    Head(Instant),
    /// This many requests in flight (their responses not yet fully sent).
    Busy(usize),
    /// Between requests, nothing received, since this instant.
    Idle(Instant),
}

/// A connection's phase, shared by its stream, its service and its
/// watchdog.
#[derive(Debug)]
pub(super) struct ConnState {
    phase: Mutex<Phase>,
    changed: Notify,
}

impl ConnState {
    /// A connection just accepted: its header is due.
    pub(super) fn new() -> Self {
        ConnState {
            phase: Mutex::new(Phase::Head(Instant::now())),
            changed: Notify::new(),
        }
    }

    fn update(&self, f: impl FnOnce(Phase) -> Phase) {
        let mut phase = self.phase.lock().expect("connection phase lock poisoned");
        *phase = f(*phase);
        drop(phase);
        self.changed.notify_one();
    }

    /// Bytes arrived: after an idle wait, a new request header has begun.
    fn received(&self) {
        let idle = matches!(
            *self.phase.lock().expect("connection phase lock poisoned"),
            Phase::Idle(_)
        );
        if idle {
            self.update(|p| match p {
                Phase::Idle(_) => Phase::Head(Instant::now()),
                other => other,
            });
        }
    }

    fn request_began(&self) {
        self.update(|p| match p {
            Phase::Busy(n) => Phase::Busy(n + 1),
            Phase::Head(_) | Phase::Idle(_) => Phase::Busy(1),
        });
    }

    fn response_ended(&self) {
        self.update(|p| match p {
            Phase::Busy(n) if n > 1 => Phase::Busy(n - 1),
            _ => Phase::Idle(Instant::now()),
        });
    }

    /// When the current phase runs out, and what closing then is called.
    fn deadline(&self, limits: ConnLimits) -> Option<(Instant, CloseReason)> {
        match *self.phase.lock().expect("connection phase lock poisoned") {
            Phase::Head(since) => Some((
                since + limits.header_read_timeout,
                CloseReason::HeaderTimeout,
            )),
            Phase::Idle(since) => Some((since + limits.idle_timeout, CloseReason::IdleTimeout)),
            Phase::Busy(_) => None,
        }
    }

    /// Resolves, with the reason, once a phase outlasts its limit.
    pub(super) async fn watchdog(&self, limits: ConnLimits) -> CloseReason {
        loop {
            // Registered before reading the phase, so no change is missed.
            let changed = self.changed.notified();
            match self.deadline(limits) {
                Some((at, _)) => tokio::select! {
                    () = tokio::time::sleep_until(at) => {
                        // A change may have raced the timer: only the
                        // phase still in force decides.
                        if let Some((at, reason)) = self.deadline(limits)
                            && at <= Instant::now()
                        {
                            return reason;
                        }
                    }
                    () = changed => {}
                },
                None => changed.await,
            }
        }
    }
}

/// A connection's stream, telling its [`ConnState`] when bytes arrive.
pub(super) struct Watched<IO> {
    inner: IO,
    state: Arc<ConnState>,
}

impl<IO> Watched<IO> {
    pub(super) fn new(inner: IO, state: Arc<ConnState>) -> Self {
        Watched { inner, state }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.state.received();
        }
        polled
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A service that marks each request in flight on its connection until its
/// response body has been sent (or dropped).
/// Its requests' bodies are [`TimedBody`]s.
#[derive(Clone)]
pub(super) struct Tracked<S> {
    inner: S,
    state: Arc<ConnState>,
    port: super::Port,
}

impl<S> Tracked<S> {
    pub(super) fn new(inner: S, state: Arc<ConnState>, port: super::Port) -> Self {
        Tracked { inner, state, port }
    }
}

/// Ends the request in flight when dropped: with the response body, or
/// with the handler's future if it never answered.
struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.response_ended();
    }
}

impl<S, B> Service<Request<hyper::body::Incoming>> for Tracked<S>
where
    S: Service<Request<TimedBody>, Response = Response<B>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Body + Unpin + Send + 'static,
{
    type Response = Response<TrackedBody<B>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn call(&self, req: Request<hyper::body::Incoming>) -> Self::Future {
        self.state.request_began();
        let in_flight = InFlight(self.state.clone());
        let answer = self
            .inner
            .call(req.map(|body| TimedBody::new(body, &self.port)));
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|inner| TrackedBody {
                inner,
                _in_flight: in_flight,
            }))
        })
    }
}

/// A response body whose end (or drop) ends its request's time in flight.
pub(super) struct TrackedBody<B> {
    inner: B,
    _in_flight: InFlight,
}

impl<B: Body + Unpin> Body for TrackedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const LIMITS: ConnLimits = ConnLimits {
        header_read_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
        max_connections: 1,
    };

    #[tokio::test(start_paused = true)]
    async fn a_header_that_never_completes_times_out_as_a_header() {
        let state = ConnState::new();
        assert_eq!(state.watchdog(LIMITS).await, CloseReason::HeaderTimeout);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_in_flight_is_never_timed_out_and_idleness_follows_it() {
        let state = Arc::new(ConnState::new());
        state.request_began();
        let s = state.clone();
        let dog = tokio::spawn(async move { s.watchdog(LIMITS).await });
        // Far past both limits, the request is still in flight.
        tokio::time::sleep(Duration::from_secs(600)).await;
        assert!(!dog.is_finished());
        state.response_ended();
        assert_eq!(dog.await.unwrap(), CloseReason::IdleTimeout);
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_after_an_idle_wait_start_the_header_clock() {
        let state = Arc::new(ConnState::new());
        state.request_began();
        state.response_ended();
        state.received();
        assert_eq!(state.watchdog(LIMITS).await, CloseReason::HeaderTimeout);
    }
}
