//! The drain every connection is handed: one signal when the proxy starts
//! draining, and a hard stop at the drain deadline.
//!
//! Owns the two signals only. A TCP connection keeps copying while the
//! proxy drains and is closed at the deadline; an HTTP/2 connection (the
//! L7 path) sends GOAWAY when draining starts and is closed at the
//! deadline. Either way no connection task outlives [`crate::run`]: it
//! fires the deadline and then waits for every task to end.

use std::future::Future;

use tokio_util::sync::CancellationToken;

/// The drain signals of the proxy's connections. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ConnectionDrain {
    draining: CancellationToken,
    deadline: CancellationToken,
}

/// How a connection's work ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Ended<T> {
    /// It finished by itself.
    Done(T),
    /// The drain deadline cut it.
    Cut,
}

// === impl ConnectionDrain ===

impl ConnectionDrain {
    /// Signals that draining has started: finish what is in flight, take
    /// no new work (HTTP/2: GOAWAY).
    pub fn start(&self) {
        self.draining.cancel();
    }

    /// Signals the deadline: every connection stops now. Implies
    /// [`ConnectionDrain::start`].
    pub fn force(&self) {
        self.draining.cancel();
        self.deadline.cancel();
    }

    /// Whether draining has started.
    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// Resolves once draining has started.
    pub async fn draining(&self) {
        self.draining.cancelled().await;
    }

    /// Runs `work` until it ends or the deadline fires; at the deadline it
    /// is dropped, which closes its sockets.
    pub async fn until_deadline<F: Future>(&self, work: F) -> Ended<F::Output> {
        tokio::select! {
            biased;
            () = self.deadline.cancelled() => Ended::Cut,
            out = work => Ended::Done(out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn work_runs_to_its_end_until_the_deadline_cuts_it() {
        let drain = ConnectionDrain::default();
        assert_eq!(drain.until_deadline(async { 7 }).await, Ended::Done(7));
        drain.start();
        assert!(drain.is_draining());
        // Draining alone does not stop work.
        assert_eq!(drain.until_deadline(async { 8 }).await, Ended::Done(8));
        let pending = tokio::spawn({
            let drain = drain.clone();
            async move { drain.until_deadline(std::future::pending::<()>()).await }
        });
        drain.force();
        assert_eq!(pending.await.unwrap(), Ended::Cut);
    }
}
