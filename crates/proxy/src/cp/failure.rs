//! What a failed control-plane attempt says about the control plane, and
//! how soon the next attempt may go.
//!
//! Owns the classification only: a control plane that is going away
//! (it ended the stream with `UNAVAILABLE` "control plane shutting down;
//! reconnect", or the connection was refused or reset) is worth leaving
//! at once for another URL; anything else waits for the caller's backoff.
//! It never decides which URL comes next ([`super::endpoints`] does).

use std::error::Error;
use std::io::ErrorKind;

/// The words of the status a control plane ends its streams with when it
/// drains ([`meshlink_proto::hints::SHUTTING_DOWN_MESSAGE`], "control plane
/// shutting down; reconnect"); the unit test below keeps the two in step.
pub const SHUTTING_DOWN: &str = "shutting down";

/// What a failure says about the control plane that was tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// It is going away or nothing listens: `UNAVAILABLE` "... shutting
    /// down ...", or the connection was refused, reset or aborted. Another
    /// URL may be tried at once.
    GoingAway,
    /// Anything else (a timeout, a TLS failure, a refusal): the next
    /// attempt waits for the backoff.
    Other,
}

/// When the next attempt may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// Now: the failed control plane is going away and the next attempt
    /// goes to another URL that has not failed in this run of failures.
    Immediate,
    /// After the caller's jittered backoff (as with a single URL).
    Backoff,
}

// === impl FailureKind ===

impl FailureKind {
    /// Classifies a gRPC status that ended a call or a stream.
    pub fn of_status(status: &tonic::Status) -> Self {
        if status.code() == tonic::Code::Unavailable && status.message().contains(SHUTTING_DOWN) {
            return FailureKind::GoingAway;
        }
        Self::of_error(status)
    }

    /// Classifies a transport error by the I/O error somewhere in its chain.
    pub fn of_error(error: &(dyn Error + 'static)) -> Self {
        let mut next = Some(error);
        while let Some(e) = next {
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && matches!(
                    io.kind(),
                    ErrorKind::ConnectionRefused
                        | ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted
                )
            {
                return FailureKind::GoingAway;
            }
            next = e.source();
        }
        FailureKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrapper(std::io::Error);
    impl std::fmt::Display for Wrapper {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("tcp connect error")
        }
    }
    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_draining_control_plane_is_going_away() {
        assert!(meshlink_proto::hints::SHUTTING_DOWN_MESSAGE.contains(SHUTTING_DOWN));
        let drained = tonic::Status::unavailable(meshlink_proto::hints::SHUTTING_DOWN_MESSAGE);
        assert_eq!(FailureKind::of_status(&drained), FailureKind::GoingAway);
        let busy = tonic::Status::unavailable("not ready");
        assert_eq!(FailureKind::of_status(&busy), FailureKind::Other);
        let other = tonic::Status::aborted("a newer stream took over; shutting down");
        assert_eq!(FailureKind::of_status(&other), FailureKind::Other);
    }

    #[test]
    fn refused_and_reset_connections_are_going_away() {
        for kind in [ErrorKind::ConnectionRefused, ErrorKind::ConnectionReset] {
            let e = Wrapper(std::io::Error::from(kind));
            assert_eq!(
                FailureKind::of_error(&e),
                FailureKind::GoingAway,
                "{kind:?}"
            );
        }
        let timeout = Wrapper(std::io::Error::from(ErrorKind::TimedOut));
        assert_eq!(FailureKind::of_error(&timeout), FailureKind::Other);
    }
}
