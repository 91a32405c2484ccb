//! Fault injection on the HTTP data path (`envoy.filters.http.fault`):
//! after RBAC and the local rate limit, a request from a caller the
//! listener's fault filters apply to may wait (a delay), be answered by
//! the proxy (an abort, with Envoy's body `fault filter abort`), and have
//! its response body sent at a limited rate.
//!
//! Owns the waiting, the answer, the counts and the throttled body; what
//! to inject is decided by [`crate::model::fault::decide`]. A delay is a
//! plain sleep in the request's future, so a client that goes away
//! cancels it (the future is dropped) and nothing is forwarded.

use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::time::{Instant, Sleep};

use super::metrics::RequestLabels;
use super::replay::BoxError;
use super::respond::{self, ResponseBody};
use crate::metrics::{FaultLabels, ProxyMetrics};
use crate::model::fault::{Fault, decide};

/// What the request does after the faults.
pub enum Injected {
    /// Go on, with the response body limited to this many bytes per second
    /// (if any).
    Forward(Option<u64>),
    /// Answer with this instead.
    Abort(Response<ResponseBody>),
}

/// Applies `faults` to one request from `peer` on `listener`.
pub async fn inject(
    faults: &[Fault],
    peer: Option<&str>,
    listener: &str,
    metrics: &ProxyMetrics,
    labels: &mut RequestLabels,
    grpc: bool,
) -> Injected {
    if faults.is_empty() {
        return Injected::Forward(None);
    }
    let decision = decide(faults, peer, |d| rand::random_range(0..d));
    let count = |kind: &'static str, n: u32| {
        if n > 0 {
            metrics
                .faults
                .get_or_create(&FaultLabels {
                    listener: listener.to_owned(),
                    kind,
                })
                .inc_by(u64::from(n));
        }
    };
    count("delay", decision.counts.delays);
    count("abort", decision.counts.aborts);
    count("response_rate_limit", decision.counts.throttles);
    if !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    match decision.abort {
        Some(status) => {
            labels.route = "fault_abort".into();
            Injected::Abort(respond::fault_abort(status, grpc))
        }
        None => Injected::Forward(decision.throttle),
    }
}

/// `response` with its body limited to `bytes_per_second` (unchanged when
/// `None`).
pub fn throttle(
    response: Response<ResponseBody>,
    bytes_per_second: Option<u64>,
) -> Response<ResponseBody> {
    let Some(rate) = bytes_per_second else {
        return response;
    };
    response.map(|inner| {
        Throttled {
            inner,
            rate: rate.max(1),
            pending: Bytes::new(),
            pause: None,
            started: None,
            sent: 0,
        }
        .boxed_unsync()
    })
}

/// A body sent in slices of a sixteenth of a second's worth of bytes
/// (Envoy's slice); after each, it waits until the bytes sent so far fit
/// the rate since the first slice (a schedule, so timer rounding never
/// adds up).
struct Throttled {
    inner: ResponseBody,
    rate: u64,
    pending: Bytes,
    pause: Option<Pin<Box<Sleep>>>,
    started: Option<Instant>,
    sent: u64,
}

impl Body for Throttled {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(pause) = &mut this.pause {
            ready!(pause.as_mut().poll(cx));
            this.pause = None;
        }
        while this.pending.is_empty() {
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.pending = data,
                    Err(other) => return Poll::Ready(Some(Ok(other))),
                },
                end => return Poll::Ready(end),
            }
        }
        let slice = usize::try_from((this.rate / 16).max(1)).unwrap_or(usize::MAX);
        let out = this.pending.split_to(slice.min(this.pending.len()));
        let started = *this.started.get_or_insert_with(Instant::now);
        this.sent += out.len() as u64;
        let due = started + Duration::from_secs_f64(this.sent as f64 / this.rate as f64);
        this.pause = Some(Box::pin(tokio::time::sleep_until(due)));
        Poll::Ready(Some(Ok(Frame::data(out))))
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.inner.size_hint();
        let pending = self.pending.len() as u64;
        hint.set_lower(hint.lower() + pending);
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper + pending);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 4 KiB at 1 KiB/s: 64 slices of 64 bytes, each followed by its
    /// 62.5 ms, so the body ends after its size over the rate (paused
    /// time, so exact).
    #[tokio::test(start_paused = true)]
    async fn a_throttled_body_takes_its_size_over_the_rate() {
        let body = respond::full(vec![b'x'; 4096]);
        let response = throttle(Response::new(body), Some(1024));
        let started = tokio::time::Instant::now();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(bytes.len(), 4096);
        assert_eq!(started.elapsed(), Duration::from_secs(4));
    }

    #[tokio::test(start_paused = true)]
    async fn no_limit_leaves_the_body_alone() {
        let response = throttle(Response::new(respond::full("hello")), None);
        let started = tokio::time::Instant::now();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"hello");
        assert_eq!(started.elapsed(), Duration::ZERO);
    }
}
