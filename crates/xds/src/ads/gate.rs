//! A future or stream that is polled only when it has something to say.
//!
//! A stream's loop waits on four things at once (its stop token, its
//! renewal timer, its proxy's state, and its client's requests), and every
//! wake-up of the loop used to poll all four. Each of those polls takes a
//! lock: the cancellation token's tree node and its `Notify`, the watch
//! channel's `Notify` (registered and removed again on every turn), and
//! the h2 connection's stream store, which all streams of a connection and
//! its connection task share. [`Gated`] gives its inner future or stream a
//! waker of its own and polls it only if that waker fired since it last
//! returned `Pending` (or if it never was polled, or the caller changed
//! it): a turn of the loop woken by a state change polls the state, not
//! the three others.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures::Stream;
use futures::task::{ArcWake, AtomicWaker, waker_ref};

/// Whether the inner value's waker fired, and the task to wake.
struct Flag {
    open: AtomicBool,
    task: AtomicWaker,
}

impl ArcWake for Flag {
    fn wake_by_ref(this: &Arc<Self>) {
        this.open.store(true, Ordering::Release);
        this.task.wake();
    }
}

/// A future or stream polled only when its own waker fired (see the
/// module docs).
pub(crate) struct Gated<F> {
    inner: F,
    flag: Arc<Flag>,
}

impl<F> Gated<F> {
    /// Wraps `inner`; the first poll polls it.
    pub(crate) fn new(inner: F) -> Self {
        Self {
            inner,
            flag: Arc::new(Flag {
                open: AtomicBool::new(true),
                task: AtomicWaker::new(),
            }),
        }
    }

    /// The inner value, to change it (e.g. reset a timer); the next poll
    /// polls it.
    pub(crate) fn get_mut(&mut self) -> &mut F {
        self.reopen();
        &mut self.inner
    }

    /// Makes the next poll poll the inner value, as if its waker fired
    /// (for a wait it registered no waker for).
    pub(crate) fn reopen(&mut self) {
        self.flag.open.store(true, Ordering::Release);
    }

    fn poll_inner<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut F, &mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        // Registered before the flag is read: a wake after the read wakes
        // this task.
        self.flag.task.register(cx.waker());
        if !self.flag.open.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let waker = waker_ref(&self.flag);
        let ready = poll(&mut self.inner, &mut Context::from_waker(&waker));
        if ready.is_ready() {
            // A stream may have more without a wake; a finished future is
            // not polled again.
            self.flag.open.store(true, Ordering::Release);
        }
        ready
    }
}

impl<F: Future + Unpin> Future for Gated<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.get_mut().poll_inner(cx, |f, cx| Pin::new(f).poll(cx))
    }
}

impl<S: Stream + Unpin> Stream for Gated<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.get_mut()
            .poll_inner(cx, |s, cx| Pin::new(s).poll_next(cx))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use futures::StreamExt;
    use futures::task::noop_waker_ref;

    use super::*;

    /// A stream that counts its polls and yields what the test pushed.
    struct Counted {
        polls: Arc<AtomicUsize>,
        rx: futures::channel::mpsc::UnboundedReceiver<u32>,
    }

    impl Stream for Counted {
        type Item = u32;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<u32>> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            self.rx.poll_next_unpin(cx)
        }
    }

    #[test]
    fn the_inner_stream_is_polled_only_after_its_own_waker_fired() {
        let polls = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut gated = Gated::new(Counted {
            polls: polls.clone(),
            rx,
        });
        let mut cx = Context::from_waker(noop_waker_ref());
        assert!(gated.poll_next_unpin(&mut cx).is_pending());
        assert_eq!(
            polls.load(Ordering::Relaxed),
            1,
            "the first poll goes through"
        );
        for _ in 0..5 {
            assert!(gated.poll_next_unpin(&mut cx).is_pending());
        }
        assert_eq!(
            polls.load(Ordering::Relaxed),
            1,
            "polls without a wake of the inner stream do not reach it"
        );
        tx.unbounded_send(7).unwrap();
        tx.unbounded_send(8).unwrap();
        assert_eq!(gated.poll_next_unpin(&mut cx), Poll::Ready(Some(7)));
        assert_eq!(
            gated.poll_next_unpin(&mut cx),
            Poll::Ready(Some(8)),
            "after an item the stream is polled again without a wake"
        );
        assert!(gated.poll_next_unpin(&mut cx).is_pending());
        let before = polls.load(Ordering::Relaxed);
        gated.get_mut();
        assert!(gated.poll_next_unpin(&mut cx).is_pending());
        assert_eq!(
            polls.load(Ordering::Relaxed),
            before + 1,
            "a changed inner value is polled"
        );
        drop(tx);
        assert_eq!(gated.poll_next_unpin(&mut cx), Poll::Ready(None));
    }

    #[tokio::test]
    async fn a_wake_of_the_inner_future_wakes_the_task() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let waiter = tokio::spawn(Gated::new(rx));
        tokio::task::yield_now().await;
        tx.send(3).unwrap();
        assert_eq!(waiter.await.unwrap().unwrap(), 3);
    }
}
