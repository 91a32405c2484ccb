//! What the control plane tells a client in a gRPC status, and the client
//! reads back: both ends must spell these the same.

/// The gRPC metadata key carrying the retry hint in milliseconds on a
/// `RESOURCE_EXHAUSTED` refusal (admission control).
pub const RETRY_AFTER_MS: &str = "retry-after-ms";

/// The message of the `UNAVAILABLE` every stream ends with when a control
/// plane instance drains; clients move to another control plane on seeing
/// it.
pub const SHUTTING_DOWN_MESSAGE: &str = "control plane shutting down; reconnect";

/// Words of the `ABORTED` status that ends a stream when a newer stream
/// for the same proxy took its key over. A meshlink-proxy that reads them
/// on its own live stream knows another process holds its identity, and
/// backs off instead of taking the key straight back.
pub const TAKEN_OVER: &str = "took over from this one";
