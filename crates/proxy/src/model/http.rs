//! The proxy's model of an Envoy `http_connection_manager`: what an HTTP
//! listener needs besides its routes (which come over RDS, see
//! [`super::route`]).

use std::time::Duration;

use serde::Serialize;

/// A validated HTTP connection manager.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HttpListener {
    /// The RouteConfiguration (RDS) that routes this listener's requests.
    pub route_config: String,
    /// Append the peer's address to `x-forwarded-for` (Envoy's
    /// `use_remote_address`; set on inbound listeners).
    pub use_remote_address: bool,
    /// A connection with no request in flight for this long is closed
    /// (`common_http_protocol_options.idle_timeout`; Kuma's default 1h).
    #[serde(serialize_with = "crate::model::optional_duration")]
    pub idle_timeout: Option<Duration>,
    /// A stream that moves nothing for this long is reset
    /// (`stream_idle_timeout`; Kuma's default 30m).
    #[serde(serialize_with = "crate::model::optional_duration")]
    pub stream_idle_timeout: Option<Duration>,
    /// The request's headers must arrive within this
    /// (`request_headers_timeout`; none by default).
    #[serde(serialize_with = "crate::model::optional_duration")]
    pub request_headers_timeout: Option<Duration>,
    /// A connection is ended gracefully (GOAWAY) once it is this old
    /// (`common_http_protocol_options.max_connection_duration`).
    #[serde(serialize_with = "crate::model::optional_duration")]
    pub max_connection_duration: Option<Duration>,
    /// The local rate limit filter (`envoy.filters.http.local_ratelimit`),
    /// checked for every request after RBAC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_rate_limit: Option<crate::model::rate_limit::LocalRateLimit>,
    /// Access logs written for every request (`access_log`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub access_logs: Vec<crate::model::access_log::AccessLog>,
    /// The fault filters (`envoy.filters.http.fault`), in order, applied
    /// after RBAC and the local rate limit.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<crate::model::fault::Fault>,
    /// Request tracing (`tracing`): a span per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracing: Option<Box<crate::model::trace::Tracing>>,
}
