//! The proxy's model of an Envoy RouteConfiguration (RDS): what the L7
//! router needs per request, as validated from the control plane.
//!
//! Owns plain, immutable data: matchers with their regular expressions
//! compiled once at validation, weighted backends, timeouts, retry policy
//! and header changes. It never matches a request itself and never does
//! I/O; the HTTP router reads it.

use std::sync::Arc;
use std::time::Duration;

use serde::{Serialize, Serializer};

/// A validated RouteConfiguration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteConfigSpec {
    /// xDS resource name (what a listener's RDS reference names).
    pub name: String,
    /// Virtual hosts, in order.
    pub virtual_hosts: Vec<VirtualHostSpec>,
}

/// A virtual host: the routes of the requests whose `:authority` matches
/// one of its domains.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VirtualHostSpec {
    /// Name, for metrics and messages.
    pub name: String,
    /// Domains (`*`, `*.suffix`, `prefix.*` or exact, with an optional port).
    pub domains: Vec<String>,
    /// Routes, first match wins.
    pub routes: Vec<RouteSpec>,
}

/// One route: a match and what to do with matching requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteSpec {
    /// Route name (metric label; never the path).
    pub name: String,
    /// What a request must look like.
    pub matcher: RouteMatch,
    /// Forward or redirect.
    pub action: RouteAction,
    /// Changes to the request's headers before it is forwarded.
    pub request_headers: HeaderMutation,
    /// Changes to the response's headers before it is returned.
    pub response_headers: HeaderMutation,
}

/// A route's match: all parts must hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RouteMatch {
    /// The path condition.
    pub path: PathMatch,
    /// Case-sensitive path comparison (Envoy's default: true).
    pub case_sensitive: bool,
    /// Header conditions (`:method` included).
    pub headers: Vec<HeaderMatch>,
    /// Query parameter conditions.
    pub query: Vec<QueryMatch>,
}

/// How the path (without the query) is compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathMatch {
    /// Starts with this (`""` matches everything).
    Prefix(String),
    /// Equals this.
    Exact(String),
    /// Starts with this, ending at a `/` or the path's end.
    Segments(String),
    /// The whole path matches this RE2-safe expression.
    Regex(Pattern),
}

/// One header condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeaderMatch {
    /// Header name, lower-case (`:method` for the method).
    pub name: String,
    /// How its value is compared.
    pub kind: ValueMatch,
    /// The match is inverted (`Absent` is an inverted `Present`).
    pub invert: bool,
}

/// One query-parameter condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueryMatch {
    /// Parameter name.
    pub name: String,
    /// How its value is compared.
    pub kind: ValueMatch,
}

/// How a header or query value is compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueMatch {
    /// Present, whatever its value.
    Present,
    /// Equals this.
    Exact(String),
    /// Starts with this.
    Prefix(String),
    /// Ends with this.
    Suffix(String),
    /// Contains this.
    Contains(String),
    /// The whole value matches this expression.
    Regex(Pattern),
}

/// What a matching route does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RouteAction {
    /// Forward to one of the backends (boxed: it is most of a route).
    Forward(Box<ForwardAction>),
    /// Answer with a redirect.
    Redirect(Redirect),
}

/// Forwarding: weighted backends, timeouts, retries, rewrites, mirrors.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForwardAction {
    /// Clusters with weights (one with weight 1 for a single cluster).
    pub backends: Vec<WeightedBackend>,
    /// The whole request's deadline, retries included; `None`: no limit
    /// (Envoy's `0s`). Envoy's default when unset is 15 s.
    #[serde(serialize_with = "crate::model::optional_duration")]
    pub timeout: Option<Duration>,
    /// How long a stream may see no activity.
    #[serde(serialize_with = "crate::model::optional_duration")]
    pub idle_timeout: Option<Duration>,
    /// The longest a stream may live.
    #[serde(serialize_with = "crate::model::optional_duration")]
    pub max_stream_duration: Option<Duration>,
    /// Retries, if any.
    pub retry: Option<RetrySpec>,
    /// Path and host rewrites.
    pub rewrite: Rewrite,
    /// Shadow copies of the request.
    pub mirrors: Vec<Mirror>,
    /// What the request's hash is made of, for a ring hash or Maglev
    /// cluster (`hash_policy`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hash_policies: Vec<super::hash_policy::HashPolicy>,
}

/// A backend cluster and its weight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WeightedBackend {
    /// Cluster name.
    pub cluster: String,
    /// Relative weight (0: never picked).
    pub weight: u32,
    /// Header changes for requests sent to this backend.
    pub request_headers: HeaderMutation,
}

/// Path and host rewrites before forwarding.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Rewrite {
    /// Replace the matched prefix with this.
    pub prefix: Option<String>,
    /// Replace the whole path with this (Envoy's `regex_rewrite` of `^.*$`).
    pub full_path: Option<String>,
    /// Replace `:authority` with this.
    pub host: Option<String>,
}

/// A shadow copy of matching requests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mirror {
    /// Cluster the copy goes to.
    pub cluster: String,
    /// Share of requests mirrored, in millionths (1,000,000: all).
    pub per_million: u32,
}

/// A redirect answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Redirect {
    /// New scheme.
    pub scheme: Option<String>,
    /// New host.
    pub host: Option<String>,
    /// New port.
    pub port: Option<u16>,
    /// New path (the whole path).
    pub path: Option<String>,
    /// New path prefix (replaces the matched prefix).
    pub prefix: Option<String>,
    /// 301, 302, 303, 307 or 308.
    pub status: u16,
}

/// Retry policy of a route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RetrySpec {
    /// Which failures are retried (Envoy `retry_on` tokens, validated).
    pub retry_on: Vec<RetryOn>,
    /// Status codes retried on with [`RetryOn::RetriableStatusCodes`].
    pub retriable_status_codes: Vec<u16>,
    /// Most retries (not counting the first try).
    pub num_retries: u32,
    /// Deadline of each try.
    #[serde(serialize_with = "crate::model::optional_duration")]
    pub per_try_timeout: Option<Duration>,
    /// Exponential back-off base and cap (Envoy: 25 ms, 10x base).
    #[serde(serialize_with = "crate::model::optional_duration")]
    pub backoff_base: Option<Duration>,
    /// Back-off cap.
    #[serde(serialize_with = "crate::model::optional_duration")]
    pub backoff_max: Option<Duration>,
    /// Response headers whose value says when to retry a rate-limited
    /// request (name, and whether the value is seconds or a Unix time).
    pub rate_limited_reset_headers: Vec<(String, ResetFormat)>,
    /// Cap of a rate-limited back-off.
    #[serde(serialize_with = "crate::model::optional_duration")]
    pub rate_limited_max: Option<Duration>,
    /// A request is retried only if it matches one of these (empty: any).
    pub retriable_request_headers: Vec<HeaderMatch>,
    /// A response is retried if it matches one of these.
    pub retriable_response_headers: Vec<HeaderMatch>,
}

/// How a rate-limit reset header's value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetFormat {
    /// Seconds to wait.
    Seconds,
    /// A Unix time to wait for.
    UnixTimestamp,
}

/// One retry condition: Envoy's `retry_on` tokens (x-envoy-retry-on and
/// x-envoy-retry-grpc-on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetryOn {
    /// Any 5xx, or a reset, or a connect failure.
    #[serde(rename = "5xx")]
    FiveXx,
    /// 502, 503 or 504.
    GatewayError,
    /// The upstream reset the stream or did not answer.
    Reset,
    /// The connection to the upstream could not be made.
    ConnectFailure,
    /// 409 (retriable 4xx).
    Retriable4xx,
    /// The upstream refused the stream (HTTP/2 REFUSED_STREAM).
    RefusedStream,
    /// A status listed in `retriable_status_codes`.
    RetriableStatusCodes,
    /// A response matching `retriable_headers`.
    RetriableHeaders,
    /// Envoy's local rate limit answered (429 with x-envoy-ratelimited).
    EnvoyRatelimited,
    /// A connect failure after an HTTP/3 connection (never here; kept so
    /// Kuma's value is understood).
    Http3PostConnectFailure,
    /// gRPC CANCELLED.
    Cancelled,
    /// gRPC DEADLINE_EXCEEDED.
    DeadlineExceeded,
    /// gRPC INTERNAL.
    Internal,
    /// gRPC RESOURCE_EXHAUSTED.
    ResourceExhausted,
    /// gRPC UNAVAILABLE.
    Unavailable,
}

impl RetryOn {
    /// Every condition and its Envoy token.
    pub const ALL: [(&'static str, RetryOn); 15] = [
        ("5xx", RetryOn::FiveXx),
        ("gateway-error", RetryOn::GatewayError),
        ("reset", RetryOn::Reset),
        ("connect-failure", RetryOn::ConnectFailure),
        ("retriable-4xx", RetryOn::Retriable4xx),
        ("refused-stream", RetryOn::RefusedStream),
        ("retriable-status-codes", RetryOn::RetriableStatusCodes),
        ("retriable-headers", RetryOn::RetriableHeaders),
        ("envoy-ratelimited", RetryOn::EnvoyRatelimited),
        (
            "http3-post-connect-failure",
            RetryOn::Http3PostConnectFailure,
        ),
        ("cancelled", RetryOn::Cancelled),
        ("deadline-exceeded", RetryOn::DeadlineExceeded),
        ("internal", RetryOn::Internal),
        ("resource-exhausted", RetryOn::ResourceExhausted),
        ("unavailable", RetryOn::Unavailable),
    ];

    /// The condition an Envoy token names.
    pub fn from_token(token: &str) -> Option<RetryOn> {
        RetryOn::ALL
            .iter()
            .find(|(t, _)| *t == token)
            .map(|(_, r)| *r)
    }
}

/// Header changes: set (replace), append, remove.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HeaderMutation {
    /// Headers set, replacing any value.
    pub set: Vec<(String, String)>,
    /// Headers appended to any value.
    pub add: Vec<(String, String)>,
    /// Headers removed.
    pub remove: Vec<String>,
}

impl HeaderMutation {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.add.is_empty() && self.remove.is_empty()
    }
}

/// A regular expression compiled once at validation (RE2 semantics: the
/// `regex` crate, linear time, with a size limit), compared and printed by
/// its source.
#[derive(Debug, Clone)]
pub struct Pattern {
    source: String,
    regex: Arc<regex::Regex>,
}

/// Most memory one compiled expression may take; a larger one (a "regex
/// bomb" such as `(a{1000}){1000}`) is refused.
pub const PATTERN_SIZE_LIMIT: usize = 256 * 1024;

impl Pattern {
    /// Compiles `source` anchored at both ends (Envoy's `safe_regex`
    /// matches the whole value).
    pub fn new(source: &str) -> Result<Pattern, regex::Error> {
        let regex = regex::RegexBuilder::new(&format!("^(?:{source})$"))
            .size_limit(PATTERN_SIZE_LIMIT)
            .build()?;
        Ok(Pattern {
            source: source.to_owned(),
            regex: Arc::new(regex),
        })
    }

    /// Whether the whole of `value` matches.
    pub fn is_match(&self, value: &str) -> bool {
        self.regex.is_match(value)
    }

    /// The expression as given.
    pub fn source(&self) -> &str {
        &self.source
    }
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Pattern {}

impl Serialize for Pattern {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}
