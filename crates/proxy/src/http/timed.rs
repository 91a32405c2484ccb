//! The time bounds of HTTP streams and connections that run after the
//! response headers: a stream's idle timeout (route `idle_timeout`, else
//! the listener's `stream_idle_timeout`) and its longest life
//! (`max_stream_duration`) on the response body; a connection's idle
//! timeout (no request in flight) and longest life
//! (`max_connection_duration`), which end it gracefully (GOAWAY).

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::replay::BoxError;

/// A response body bounded by an idle timeout and a total deadline; when
/// either passes, the body fails, which resets the stream (HTTP/2) or
/// closes the connection (HTTP/1.1).
///
/// The timers are armed only when the body first has to wait: a body
/// whose frames are ready at once (most small answers) never touches the
/// timer wheel or the clock after it is made. Once armed, a frame records
/// when it moved, and the idle timer is moved on only when it fires early.
pub struct TimedBody<B> {
    inner: B,
    idle: Option<Duration>,
    /// When the body is due to end at the latest.
    deadline_at: Option<Instant>,
    /// Armed at the first wait.
    timers: Option<Box<Timers>>,
    _in_flight: Option<InFlight>,
    _stream: Option<super::pool::StreamSlot>,
    /// The request's place in its cluster's `max_requests`.
    _request: Option<crate::circuit::Slot>,
}

struct Timers {
    idle: Option<Pin<Box<Sleep>>>,
    deadline: Option<Pin<Box<Sleep>>>,
    /// When a frame last came (since the timers were armed).
    moved: Instant,
}

impl<B> TimedBody<B> {
    /// `inner` bounded by `idle` and `max` (none: unbounded), counted in
    /// flight on its connection until it ends.
    pub fn new(
        inner: B,
        idle: Option<Duration>,
        max: Option<Duration>,
        in_flight: Option<InFlight>,
    ) -> TimedBody<B> {
        TimedBody {
            inner,
            idle,
            deadline_at: max.map(|d| Instant::now() + d),
            timers: None,
            _in_flight: in_flight,
            _stream: None,
            _request: None,
        }
    }

    /// The same body, keeping `stream` (its upstream HTTP/2 stream's
    /// place on its connection) until it ends.
    pub fn holding(mut self, stream: Option<super::pool::StreamSlot>) -> TimedBody<B> {
        self._stream = stream;
        self
    }

    /// Keeps the request's circuit-breaker place until the body ends.
    pub fn keeping(mut self, request: crate::circuit::Slot) -> TimedBody<B> {
        self._request = Some(request);
        self
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(t) = this.timers.as_mut()
            && let Some(deadline) = t.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Some(Err("the stream's maximum duration passed".into())));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some(t) = this.timers.as_mut() {
                    t.moved = Instant::now();
                }
                Poll::Ready(frame.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => {
                if this.idle.is_none() && this.deadline_at.is_none() {
                    return Poll::Pending;
                }
                let (idle, deadline_at) = (this.idle, this.deadline_at);
                let t = this.timers.get_or_insert_with(|| {
                    let now = Instant::now();
                    Box::new(Timers {
                        idle: idle.map(|d| Box::pin(tokio::time::sleep_until(now + d))),
                        deadline: deadline_at.map(|at| Box::pin(tokio::time::sleep_until(at))),
                        moved: now,
                    })
                });
                if let Some(deadline) = t.deadline.as_mut()
                    && deadline.as_mut().poll(cx).is_ready()
                {
                    return Poll::Ready(Some(Err("the stream's maximum duration passed".into())));
                }
                let (Some(d), Some(sleep)) = (idle, t.idle.as_mut()) else {
                    return Poll::Pending;
                };
                while sleep.as_mut().poll(cx).is_ready() {
                    let due = t.moved + d;
                    if due <= Instant::now() {
                        return Poll::Ready(Some(Err("the stream was idle for too long".into())));
                    }
                    // A frame came since it was set: count from that one.
                    sleep.as_mut().reset(due);
                }
                Poll::Pending
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

/// Requests in flight on one downstream connection.
#[derive(Debug, Default)]
pub struct Activity {
    in_flight: AtomicUsize,
    /// Bumped whenever a request ends, so an idle check can tell that
    /// the connection was not idle for the whole period.
    ended: AtomicUsize,
}

/// One request in flight until dropped (with its response body).
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.0.ended.fetch_add(1, Ordering::Relaxed);
    }
}

impl Activity {
    /// Counts a request in flight.
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// Resolves once no request has been in flight for a whole `idle`
    /// period.
    pub async fn idle_for(&self, idle: Duration) {
        let mut seen = self.ended.load(Ordering::Relaxed);
        loop {
            tokio::time::sleep(idle).await;
            let now = self.ended.load(Ordering::Relaxed);
            if now == seen && self.in_flight.load(Ordering::Relaxed) == 0 {
                return;
            }
            seen = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_moving_fails_after_its_idle_timeout() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, BoxError>>(1);
        let inner = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
        let mut body = TimedBody::new(inner, Some(Duration::from_secs(10)), None, None);
        tx.send(Ok(Frame::data(Bytes::from("a")))).await.unwrap();
        assert!(body.frame().await.unwrap().is_ok());
        let started = Instant::now();
        assert!(body.frame().await.unwrap().is_err(), "idle timeout");
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        drop(tx);
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_body_still_ends_at_its_maximum_duration() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, BoxError>>(1);
        let inner = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
        let max = Duration::from_secs(5);
        let mut body = TimedBody::new(inner, Some(Duration::from_secs(2)), Some(max), None);
        let started = Instant::now();
        let feeder = tokio::spawn(async move {
            while tx.send(Ok(Frame::data(Bytes::from("x")))).await.is_ok() {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        loop {
            match body.frame().await {
                Some(Ok(_)) => continue,
                Some(Err(_)) => break,
                None => panic!("ended without the deadline"),
            }
        }
        assert_eq!(started.elapsed(), max);
        feeder.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_idle_only_with_no_request_for_a_whole_period() {
        let activity = Arc::new(Activity::default());
        let request = activity.start();
        let idle = Duration::from_secs(60);
        let started = Instant::now();
        let done = tokio::spawn({
            let activity = activity.clone();
            async move { activity.idle_for(idle).await }
        });
        tokio::time::sleep(Duration::from_secs(90)).await;
        drop(request);
        done.await.unwrap();
        // Busy until 90 s, then a full idle period from the next check.
        assert!(
            started.elapsed() >= Duration::from_secs(150),
            "{:?}",
            started.elapsed()
        );
    }
}
