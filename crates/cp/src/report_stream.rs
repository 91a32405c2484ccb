//! What the control plane's client-streaming report RPCs share
//! (`RouterStatus/Report`, `DataplaneHealth/Report`): reading the next
//! report until the client ends the stream or the control plane shuts
//! down, and telling the receivers when the stream ends, however it ends
//! (tonic drops the handler's future when the client goes away).

use std::fmt::Display;

use meshlink_runtime::Shutdown;
use tonic::{Status, Streaming};

/// The next report on `inbound`: `Ok(None)` once the client ended the
/// stream or it broke (logged at debug, naming `who`'s `what`), `Err`
/// (UNAVAILABLE, "reconnect") when the control plane shuts down.
pub(crate) async fn next_report<T>(
    shutdown: &Shutdown,
    inbound: &mut Streaming<T>,
    what: &str,
    who: &(dyn Display + Sync),
) -> Result<Option<T>, Status> {
    let next = tokio::select! {
        () = shutdown.wait() => {
            return Err(Status::unavailable("control plane shutting down; reconnect"));
        }
        next = inbound.message() => next,
    };
    match next {
        Ok(m) => Ok(m),
        Err(status) => {
            tracing::debug!(%status, %who, "{what} stream broke");
            Ok(None)
        }
    }
}

/// Runs its closure when dropped: at a report stream's end, however it
/// ends.
pub(crate) struct OnEnd<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OnEnd<F> {
    /// Runs `f` when the guard is dropped.
    pub(crate) fn new(f: F) -> Self {
        OnEnd(Some(f))
    }
}

impl<F: FnOnce()> Drop for OnEnd<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}
