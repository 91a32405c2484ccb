//! What the control plane tells a client in a gRPC status, and the client
//! reads back: both ends must spell these the same.

/// The gRPC metadata key carrying the retry hint in milliseconds on a
/// `RESOURCE_EXHAUSTED` refusal (admission control).
pub const RETRY_AFTER_MS: &str = "retry-after-ms";

/// The message of the `UNAVAILABLE` every stream ends with when a control
/// plane instance drains; clients move to another control plane on seeing
/// it.
pub const SHUTTING_DOWN_MESSAGE: &str = "control plane shutting down; reconnect";
