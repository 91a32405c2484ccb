//! The response body that runs its ADS stream: hyper's task for the
//! HTTP/2 stream polls the body, the body polls the stream's loop, and the
//! responses the loop queued are framed and returned in the same poll.
//!
//! With a stream task and a channel instead, a change woke two tasks per
//! proxy (the stream task, then hyper's), and each response crossed a
//! channel. The queue here is shared by the body and the loop only, and the
//! loop waits for the body to take everything it queued before it goes on
//! (backpressure: hyper polls the body only while the client's
//! flow-control window has room).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;

use http_body::{Body, Frame};
use tonic::Status;

use super::gate::Gated;
use super::response_body::{MAX_BATCH, take_frames, trailers};
use super::stream::{Message, Output};

/// The messages a stream's loop queued and its body has not taken yet.
type Queue<R> = Arc<Mutex<VecDeque<Message<R>>>>;

fn locked<R>(queue: &Queue<R>) -> std::sync::MutexGuard<'_, VecDeque<Message<R>>> {
    queue.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A queue for one stream: the loop's end and the body's.
pub(crate) fn queue<R>() -> (InlineOutput<R>, Queue<R>) {
    let queue = Queue::default();
    (
        InlineOutput {
            queue: queue.clone(),
        },
        queue,
    )
}

/// The loop's side of the queue.
pub(crate) struct InlineOutput<R> {
    queue: Queue<R>,
}

impl<R: Send> Output<R> for InlineOutput<R> {
    /// Queues `msg`; resolves at once while fewer than [`MAX_BATCH`]
    /// messages wait (the responses of one change or one request go out
    /// together, in one DATA frame), else once the body took them. The
    /// pending case registers no waker on purpose: the body polls the loop
    /// again after it took messages, and it returns a frame (never
    /// `Pending`) while the queue holds one.
    fn send(&mut self, msg: Message<R>) -> impl Future<Output = bool> + Send {
        locked(&self.queue).push_back(msg);
        std::future::poll_fn(|_| {
            if locked(&self.queue).len() < MAX_BATCH {
                Poll::Ready(true)
            } else {
                Poll::Pending
            }
        })
    }
}

/// The HTTP body of an ADS response stream that runs the stream's loop:
/// gRPC-framed responses, then `grpc-status` trailers.
pub(crate) struct InlineBody<R> {
    queue: Queue<R>,
    /// The stream's loop; `None` once it returned. hyper polls a body
    /// whenever its task wakes (send capacity, a reset, another frame's
    /// turn), and most of those polls have nothing for the loop: it is
    /// polled only when one of its own wakers fired.
    run: Option<Gated<Pin<Box<dyn Future<Output = ()> + Send>>>>,
    ended: bool,
}

impl<R> InlineBody<R> {
    /// A body taking `run`'s messages from `queue`.
    pub(crate) fn new(queue: Queue<R>, run: impl Future<Output = ()> + Send + 'static) -> Self {
        Self {
            queue,
            run: Some(Gated::new(Box::pin(run))),
            ended: false,
        }
    }

    /// Polls the loop if it was woken (or may go on: the body took what it
    /// queued); true once it returned.
    fn poll_run(&mut self, cx: &mut Context<'_>) -> bool {
        match &mut self.run {
            None => true,
            Some(run) => {
                let done = Pin::new(run).poll(cx).is_ready();
                if done {
                    self.run = None;
                }
                done
            }
        }
    }

    fn end(&mut self, status: &Status) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.ended = true;
        Poll::Ready(Some(Ok(Frame::trailers(trailers(status)))))
    }
}

impl<R: prost::Message + Send + 'static> Body for InlineBody<R> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        loop {
            // The responses at the front in one frame, or else the end
            // status if that is next.
            let (data, end) = {
                let mut queue = locked(&this.queue);
                match take_frames(&mut queue) {
                    Some(data) => (Some(data), None),
                    None => (None, queue.pop_front().and_then(Result::err)),
                }
            };
            if let Some(data) = data {
                // The loop may be waiting for room in the queue (it
                // registered no waker for that).
                if let Some(run) = &mut this.run {
                    run.reopen();
                }
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            match end {
                Some(status) => {
                    // The end status: the loop only has its cleanup left,
                    // which one more poll runs (were it to wait, the
                    // cleanup runs when the body is dropped).
                    this.poll_run(cx);
                    return this.end(&status);
                }
                None => {
                    let done = this.poll_run(cx);
                    if locked(&this.queue).is_empty() {
                        return if done {
                            this.end(&Status::ok(""))
                        } else {
                            Poll::Pending
                        };
                    }
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ads::response_body::PREFIX;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
    use http_body_util::BodyExt;

    fn response(version: &str) -> DiscoveryResponse {
        DiscoveryResponse {
            version_info: version.to_owned(),
            ..Default::default()
        }
    }

    /// A body whose loop sends `messages` one by one.
    fn body_sending(messages: Vec<Message<DiscoveryResponse>>) -> InlineBody<DiscoveryResponse> {
        let (mut output, queue) = queue();
        InlineBody::new(queue, async move {
            for msg in messages {
                output.send(msg).await;
            }
        })
    }

    #[tokio::test]
    async fn messages_are_framed_and_the_end_status_becomes_trailers() {
        let mut body = body_sending(vec![
            Ok(Box::new(response("1"))),
            Ok(Box::new(response("2"))),
            Err(Box::new(Status::unavailable(
                "control plane shutting down; reconnect",
            ))),
        ]);
        let mut data = Vec::new();
        let mut trailer = None;
        while let Some(frame) = body.frame().await {
            let frame = frame.unwrap();
            match frame.into_data() {
                Ok(d) => data.push(d),
                Err(f) => trailer = f.into_trailers().ok(),
            }
        }
        assert_eq!(
            data.len(),
            1,
            "messages queued together go out in one DATA frame"
        );
        let mut bytes = &data[0][..];
        for version in ["1", "2"] {
            assert_eq!(bytes[0], 0, "not compressed");
            let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
            let decoded =
                <DiscoveryResponse as prost::Message>::decode(&bytes[PREFIX..PREFIX + len])
                    .unwrap();
            assert_eq!(decoded, response(version));
            bytes = &bytes[PREFIX + len..];
        }
        assert!(bytes.is_empty(), "the buffer is exactly the two frames");
        let trailer = trailer.expect("trailers end the body");
        assert_eq!(trailer["grpc-status"], "14");
        // grpc-message is percent-encoded on the wire.
        assert_eq!(
            trailer["grpc-message"],
            "control%20plane%20shutting%20down;%20reconnect"
        );
        assert!(body.is_end_stream());
        assert!(body.run.is_none(), "the loop ran to its end");
    }

    #[tokio::test]
    async fn a_stream_that_ends_cleanly_sends_status_ok() {
        let mut body = body_sending(Vec::new());
        let frame = body.frame().await.unwrap().unwrap();
        let trailer = frame.into_trailers().unwrap();
        assert_eq!(trailer["grpc-status"], "0");
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn the_loop_waits_for_the_body_once_a_batch_is_queued() {
        let (mut output, queue) = queue::<DiscoveryResponse>();
        let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = sent.clone();
        let mut body = InlineBody::new(queue.clone(), async move {
            for v in 0..MAX_BATCH + 3 {
                output.send(Ok(Box::new(response(&v.to_string())))).await;
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            std::future::pending::<()>().await;
        });
        let sent_now = || sent.load(std::sync::atomic::Ordering::SeqCst);
        let frame = body.frame().await.unwrap().unwrap();
        let first = frame.into_data().unwrap();
        assert_eq!(
            sent_now(),
            MAX_BATCH - 1,
            "the loop waits while a full batch is queued"
        );
        assert_eq!(locked(&queue).len(), 0, "the body took the whole batch");
        let one = response("0");
        assert_eq!(
            first.len(),
            MAX_BATCH * (PREFIX + prost::Message::encoded_len(&one)),
            "one DATA frame holds the batch"
        );
        let second = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(sent_now(), MAX_BATCH + 3);
        assert!(!second.is_empty());
    }
}
