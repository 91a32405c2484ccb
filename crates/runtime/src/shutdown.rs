//! One shutdown path (STYLE habit 5): SIGTERM, SIGINT and programmatic
//! triggers all resolve the same [`Shutdown`], and a second signal forces
//! the exit.
//!
//! It owns only the trigger and the signal listener. It never decides how
//! long a drain may take; the binaries pass their `--drain-timeout` to
//! whatever waits for their tasks.

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

/// Exit code of a process whose drain was cut short by a second signal
/// (128 + SIGINT, as shells report an interrupted command).
pub const FORCED_EXIT_CODE: i32 = 130;

/// A cloneable shutdown trigger and waiter. Every server and task that must
/// stop with the process holds a clone and awaits [`Shutdown::wait`], or
/// selects on the [`CancellationToken`] from [`Shutdown::token`].
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    /// A new, untriggered shutdown.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts shutdown; every waiter wakes. Idempotent.
    pub fn trigger(&self) {
        self.token.cancel();
    }

    /// Whether shutdown has started.
    pub fn is_triggered(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves once shutdown has started.
    pub fn wait(&self) -> WaitForCancellationFuture<'_> {
        self.token.cancelled()
    }

    /// The token cancelled when shutdown starts, for libraries that take a
    /// [`CancellationToken`] (no bridging task needed).
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Triggers this shutdown on the first SIGTERM or SIGINT. A second
    /// signal during the drain ends the process at once with
    /// [`FORCED_EXIT_CODE`]: an operator who signals twice wants it gone.
    pub fn trigger_on_signals(&self) {
        let this = self.clone();
        tokio::spawn(async move {
            tokio::select! {
                sig = shutdown_signal() => {
                    tracing::info!(signal = sig, "shutting down; a second SIGTERM or SIGINT forces the exit");
                    this.trigger();
                }
                () = this.wait() => {}
            }
            let sig = shutdown_signal().await;
            tracing::warn!(
                signal = sig,
                code = FORCED_EXIT_CODE,
                "second signal during the drain; exiting now"
            );
            std::process::exit(FORCED_EXIT_CODE);
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
        assert!(s.token().is_cancelled());
    }
}
