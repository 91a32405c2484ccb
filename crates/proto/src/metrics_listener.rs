//! The carrier of a sidecar's MeshMetric: a Listener named
//! [`LISTENER_NAME`] whose one filter, [`FILTER_NAME`], holds a
//! [`MetricsConfig`](crate::certify::MetricsConfig). Sent only to
//! meshlink-proxy, which reads it instead of binding it.

/// The carrier Listener's name (inbound and outbound Listeners are named
/// `inbound:` and `outbound:`, so it never collides).
pub const LISTENER_NAME: &str = "meshlink:metrics";

/// The name of the carrier's one filter.
pub const FILTER_NAME: &str = "meshlink.metrics";
