//! How the CLI fails: a message for stderr and an exit code class.

/// A CLI failure. The exit code follows DESIGN.md §5: 1 for runtime
/// failures (server error, not found, timeout), 2 for bad input.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    /// Bad input: unparsable or invalid resources, bad arguments.
    #[error("{0}")]
    BadInput(String),
    /// Runtime failure: unreachable server, not found, conflict, timeout.
    #[error("{0}")]
    Runtime(String),
}

impl Failure {
    /// The process exit code.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Failure::BadInput(_) => 2,
            Failure::Runtime(_) => 1,
        }
    }
}
