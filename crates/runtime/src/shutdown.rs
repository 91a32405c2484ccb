//! One shutdown path: SIGTERM, SIGINT and programmatic triggers all resolve
//! the same [`Shutdown`] future.

use std::sync::Arc;

use tokio::sync::watch;

/// A cloneable shutdown trigger and waiter. Every server and task that must
/// stop with the process holds a clone and awaits [`Shutdown::wait`].
#[derive(Clone, Debug)]
pub struct Shutdown {
    tx: Arc<watch::Sender<bool>>,
    rx: watch::Receiver<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    /// A new, untriggered shutdown.
    pub fn new() -> Self {
        let (tx, rx) = watch::channel(false);
        Shutdown {
            tx: Arc::new(tx),
            rx,
        }
    }

    /// Starts shutdown; every waiter wakes. Idempotent.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    /// Whether shutdown has started.
    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once shutdown has started.
    pub async fn wait(&self) {
        let mut rx = self.rx.clone();
        // An error means the sender is gone, which only happens when every
        // clone is dropped: nothing can trigger any more, so treat as shut down.
        let _ = rx.wait_for(|v| *v).await;
    }

    /// Triggers this shutdown when the process gets SIGTERM or SIGINT.
    /// The listener lives until the signal or until shutdown starts otherwise.
    pub fn trigger_on_signals(&self) {
        let this = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                sig = shutdown_signal() => {
                    tracing::info!(signal = sig, "shutting down");
                    this.trigger();
                }
                _ = this.wait() => {}
            }
        });
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C) and names the signal.
pub async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn trigger_wakes_every_waiter() {
        let s = Shutdown::new();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let s = s.clone();
                tokio::spawn(async move { s.wait().await })
            })
            .collect();
        assert!(!s.is_triggered());
        s.trigger();
        for w in waiters {
            w.await.unwrap();
        }
        assert!(s.is_triggered());
    }
}
