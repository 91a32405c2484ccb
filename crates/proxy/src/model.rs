//! The proxy's own view of its configuration: what survived validation of
//! the xDS resources, in the shape the data path needs.
//!
//! Owns plain data only. It never does I/O and never holds anything the
//! control plane did not send (the workload identity lives in
//! `identity`). Everything here is immutable once built and shared as
//! `Arc`s through `watch` channels.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use meshlink_identity::TrustBundle;
use serde::Serialize;

pub mod access_log;
pub mod circuit_breaker;
pub mod dns;
pub mod fault;
pub mod hash_policy;
pub mod health_check;
pub mod http;
pub mod metrics;
pub mod rate_limit;
pub mod route;
pub mod trace;

use http::HttpListener;
use route::{RouteConfigSpec, WeightedBackend};

/// Which way traffic flows through a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From other proxies (mTLS) to the local application.
    Inbound,
    /// From the local application (plain TCP) to a destination service.
    Outbound,
}

impl Direction {
    /// `inbound` or `outbound`, for metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Inbound => "inbound",
            Direction::Outbound => "outbound",
        }
    }
}

/// Server-side TLS of an inbound listener: the proxy presents its identity
/// and requires a client certificate verified by the trust bundle secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DownstreamTls {
    /// SDS name of the identity certificate (served by the proxy's own
    /// Certify identity).
    pub identity_secret: String,
    /// SDS name of the trust bundle (validation context) secret.
    pub ca_secret: String,
    /// ALPN protocols offered, in preference order (`h2`, `http/1.1` on
    /// an HTTP inbound; none on a TCP one).
    pub alpn: Vec<String>,
}

impl DownstreamTls {
    /// The key of this context's server config in the data path's view:
    /// listeners with the same trust bundle and ALPN share one.
    pub fn server_key(&self) -> String {
        if self.alpn.is_empty() {
            self.ca_secret.clone()
        } else {
            format!("{}#{}", self.ca_secret, self.alpn.join(","))
        }
    }
}

/// Client-side TLS of a cluster: the proxy presents its identity, verifies
/// the server against the trust bundle and requires its SPIFFE ID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpstreamTls {
    /// SDS name of the identity certificate.
    pub identity_secret: String,
    /// SDS name of the trust bundle secret.
    pub ca_secret: String,
    /// The SPIFFE IDs the server may present (one of them), when the
    /// cluster names any: a MeshService's backends may have several.
    pub expected_spiffe_ids: Vec<String>,
    /// The TLS server name to send (`UpstreamTlsContext.sni`); `None`: a
    /// name derived from the cluster's (a site router's mesh ingress picks
    /// the routing key by it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    /// ALPN protocols to offer (`h2` to an HTTP destination's sidecar).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alpn: Vec<String>,
}

/// How a principal is matched against a peer's SPIFFE ID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PrincipalMatch {
    /// The ID equals this string.
    Exact(String),
    /// The ID starts with this string (a whole trust domain).
    Prefix(String),
}

impl PrincipalMatch {
    /// Whether `spiffe_id` matches.
    pub fn matches(&self, spiffe_id: &str) -> bool {
        match self {
            PrincipalMatch::Exact(id) => spiffe_id == id,
            PrincipalMatch::Prefix(prefix) => spiffe_id.starts_with(prefix.as_str()),
        }
    }
}

/// What a matching RBAC filter does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RbacAction {
    /// Matching peers are allowed; everyone else is denied.
    Allow,
    /// Matching peers are denied.
    Deny,
}

/// One network RBAC filter: an action and the principals it applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RbacFilter {
    /// Allow or deny.
    pub action: RbacAction,
    /// Principals (any of them matches). Empty with `Allow` denies all.
    pub principals: Vec<PrincipalMatch>,
}

/// The authorization decision for one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authorization {
    /// The connection may proceed.
    Allowed,
    /// The connection is refused; the reason names the rule.
    Denied(&'static str),
}

/// Evaluates `filters` in order, as Envoy does: a DENY filter that matches
/// refuses; an ALLOW filter that does not match refuses. A peer without an
/// identity never matches a principal.
pub fn authorize(filters: &[RbacFilter], peer: Option<&str>) -> Authorization {
    for filter in filters {
        let matched = peer.is_some_and(|id| filter.principals.iter().any(|p| p.matches(id)));
        match (filter.action, matched) {
            (RbacAction::Deny, true) => {
                return Authorization::Denied("a deny rule matches the peer");
            }
            (RbacAction::Allow, false) => {
                return Authorization::Denied("no allow rule matches the peer");
            }
            _ => {}
        }
    }
    Authorization::Allowed
}

/// A validated listener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListenerSpec {
    /// xDS resource name.
    pub name: String,
    /// Where to bind.
    pub address: SocketAddr,
    /// Inbound or outbound.
    pub direction: Direction,
    /// TLS to terminate (inbound with mTLS).
    pub tls: Option<DownstreamTls>,
    /// Connections admitted per interval (network local rate limit); one
    /// over the limit is closed before its TLS handshake.
    pub connection_rate_limit: Option<rate_limit::ConnectionRateLimit>,
    /// RBAC filters, in order: network filters on a TCP listener, and on
    /// an HTTP listener the network and HTTP filters (all decide on the
    /// peer's SPIFFE ID; HTTP ones answer a denied request with a 403).
    pub rbac: Vec<RbacFilter>,
    /// Whether `rbac` is applied per request (HTTP RBAC filters: a denied
    /// request gets 403 or `PERMISSION_DENIED`) or per connection.
    pub rbac_per_request: bool,
    /// What the listener does with a connection.
    pub protocol: ListenerProtocol,
    /// Whether it binds its address (`bind_to_port`, default true). One
    /// that does not receives connections from a capture listener
    /// ([`ListenerSpec::original_dst`]) whose original destination it is.
    pub bind: bool,
    /// `use_original_dst` (with the `original_dst` listener filter): a
    /// transparent proxy's capture listener, which hands each redirected
    /// connection to the listener of its original destination.
    pub original_dst: bool,
}

impl ListenerSpec {
    /// The cluster of a TCP listener; `None` for HTTP (its routes name
    /// clusters per request).
    pub fn tcp_cluster(&self) -> Option<&str> {
        match &self.protocol {
            ListenerProtocol::Tcp { cluster, .. } => Some(cluster),
            ListenerProtocol::Http(_) => None,
        }
    }

    /// Every cluster a TCP listener may forward to (one, or each of its
    /// weighted clusters); none for HTTP.
    pub fn tcp_clusters(&self) -> Vec<&str> {
        match &self.protocol {
            ListenerProtocol::Tcp { weighted, .. } if !weighted.is_empty() => {
                weighted.iter().map(|w| w.cluster.as_str()).collect()
            }
            ListenerProtocol::Tcp { cluster, .. } => vec![cluster],
            ListenerProtocol::Http(_) => Vec::new(),
        }
    }
}

/// What a listener does with an accepted connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ListenerProtocol {
    /// Copy bytes to one cluster (`tcp_proxy`).
    Tcp {
        /// The cluster `tcp_proxy` forwards to (with `weighted`: the
        /// first of them).
        cluster: String,
        /// `tcp_proxy.weighted_clusters` (a MeshTCPRoute split): each
        /// connection goes to one of these, picked by weight; empty for
        /// a single cluster.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        weighted: Vec<WeightedBackend>,
        /// `tcp_proxy.max_connect_attempts` (MeshRetry's `tcp`): connect
        /// attempts per connection; `None`: the built-in 3.
        #[serde(skip_serializing_if = "Option::is_none")]
        max_connect_attempts: Option<u32>,
        /// `tcp_proxy.idle_timeout` (MeshTimeout's `idleTimeout`): `None`
        /// when unset (the built-in 1 h), zero to disable it.
        #[serde(
            serialize_with = "optional_duration",
            skip_serializing_if = "Option::is_none"
        )]
        idle_timeout: Option<Duration>,
    },
    /// Serve HTTP/1.1 and HTTP/2 and route each request
    /// (`http_connection_manager` with RDS).
    Http(HttpListener),
}

/// Load-balancing policy of a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LbPolicy {
    /// Endpoints in turn.
    RoundRobin,
    /// The less loaded of two random endpoints (power of two choices).
    LeastRequest,
    /// The least loaded of this many random endpoints.
    LeastRequestOf(u32),
    /// A random endpoint.
    Random,
    /// Consistent hashing of the request's hash (its route's
    /// `hash_policy`) on a ring of `min` to `max` points (`RING_HASH`;
    /// `MAGLEV` is served by a ring of its table size).
    RingHash {
        /// Least ring size.
        min: u64,
        /// Largest ring size.
        max: u64,
    },
}

/// Where a cluster's endpoints come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Discovery {
    /// Listed in the cluster itself.
    Static(Vec<SocketAddr>),
    /// From the ClusterLoadAssignment of the same name (EDS).
    Eds,
    /// Each connection's original destination (`ORIGINAL_DST`, with
    /// `lb_policy: CLUSTER_PROVIDED`): a transparent proxy's pass-through.
    OriginalDst,
}

/// A validated cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterSpec {
    /// xDS resource name.
    pub name: String,
    /// Static endpoints or EDS.
    pub discovery: Discovery,
    /// TLS to originate, if any.
    pub tls: Option<UpstreamTls>,
    /// How long a TCP connect may take.
    #[serde(with = "humantime_serde_duration")]
    pub connect_timeout: Duration,
    /// How an endpoint is chosen.
    pub lb: LbPolicy,
    /// HTTP requests to this cluster travel as HTTP/2 (Envoy's
    /// `HttpProtocolOptions.explicit_http_config.http2_protocol_options`);
    /// otherwise HTTP/1.1.
    pub http2: bool,
    /// `circuit_breakers` (Envoy's defaults for unset limits); `None`:
    /// none configured, no limit (the retry budget bounds retries).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub circuit_breakers: Option<circuit_breaker::Thresholds>,
    /// `outlier_detection` with `common_lb_config.healthy_panic_threshold`;
    /// without one, [`circuit_breaker::OutlierSpec::builtin`].
    pub outlier_detection: circuit_breaker::OutlierSpec,
    /// `health_checks` (at most one); `None`: no active checks, every
    /// endpoint is eligible.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health_check: Option<health_check::HealthCheckSpec>,
}

/// A validated SDS secret (only trust bundles are used by meshlink-proxy;
/// identity certificates come from Certify).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSpec {
    /// A validation context: the roots peers are verified against.
    TrustBundle(TrustBundle),
    /// A certificate and key sent over SDS (Envoy mode). Accepted and
    /// ignored: meshlink-proxy generates its own key.
    TlsCertificate,
    /// The mesh's identity policy (`identity_policy:<mesh>`): the lifetime
    /// of the certificates the mesh issues now. A certificate that outlives
    /// a lowered lifetime is renewed early (`identity.rs`).
    IdentityPolicy(meshlink_proto::identity_policy::Policy),
}

/// One resource as accepted, with the version the control plane gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned<T> {
    /// The control plane's version string for this resource.
    pub version: String,
    /// The validated resource.
    pub value: Arc<T>,
}

/// Everything accepted from the control plane so far (last good config).
#[derive(Debug, Clone, Default)]
pub struct ProxyConfig {
    /// Listeners by name.
    pub listeners: BTreeMap<String, Versioned<ListenerSpec>>,
    /// Clusters by name.
    pub clusters: BTreeMap<String, Versioned<ClusterSpec>>,
    /// Endpoints by cluster name (EDS).
    pub endpoints: BTreeMap<String, Versioned<Vec<SocketAddr>>>,
    /// Secrets by name.
    pub secrets: BTreeMap<String, Versioned<SecretSpec>>,
    /// RouteConfigurations (RDS) by name.
    pub routes: BTreeMap<String, Versioned<RouteConfigSpec>>,
    /// The MeshMetric that selects the sidecar, by the name of the
    /// Listener that carried it (`meshlink:metrics`; at most one).
    pub metrics: BTreeMap<String, Versioned<metrics::MetricsPolicy>>,
    /// The mesh DNS, by the name of the Listener that carried it
    /// (`meshlink:dns`, and `meshlink:dns:ipv6` for a dual-stack proxy).
    pub dns: BTreeMap<String, Versioned<dns::DnsSpec>>,
    /// Type URLs for which at least one response has been accepted.
    pub received: std::collections::BTreeSet<String>,
}

impl ProxyConfig {
    /// The mesh DNS server's configuration (`meshlink:dns`), if the
    /// control plane sent one.
    pub fn dns(&self) -> Option<&Arc<dns::DnsSpec>> {
        self.dns_of(meshlink_proto::dns_listener::LISTENER_NAME)
    }

    /// The configuration of DNS Listener `listener` (one of
    /// `meshlink_proto::dns_listener::LISTENER_NAMES`), if sent.
    pub fn dns_of(&self, listener: &str) -> Option<&Arc<dns::DnsSpec>> {
        self.dns.get(listener).map(|v| &v.value)
    }

    /// The trust bundle held in secret `name`, if it has arrived.
    pub fn trust_bundle(&self, name: &str) -> Option<&TrustBundle> {
        match self.secrets.get(name).map(|s| s.value.as_ref()) {
            Some(SecretSpec::TrustBundle(b)) => Some(b),
            _ => None,
        }
    }

    /// The identity policy of `mesh`, if it has arrived.
    pub fn identity_policy(&self, mesh: &str) -> Option<&meshlink_proto::identity_policy::Policy> {
        let name = meshlink_proto::identity_policy::secret_name(mesh);
        match self.secrets.get(&name).map(|s| s.value.as_ref()) {
            Some(SecretSpec::IdentityPolicy(p)) => Some(p),
            _ => None,
        }
    }

    /// The endpoints of `cluster`: its static list, or its EDS assignment
    /// (`None` while the assignment has not arrived).
    pub fn endpoints_of(&self, cluster: &ClusterSpec) -> Option<Vec<SocketAddr>> {
        match &cluster.discovery {
            Discovery::Static(list) => Some(list.clone()),
            // Known per connection, never ahead of it.
            Discovery::OriginalDst => Some(Vec::new()),
            Discovery::Eds => self
                .endpoints
                .get(&cluster.name)
                .map(|e| e.value.as_ref().clone()),
        }
    }
}

/// Serializes an optional `Duration` as a humantime string ("5s"), or
/// null; every optional duration of the model uses it.
pub(crate) fn optional_duration<S: serde::Serializer>(
    d: &Option<Duration>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
        None => s.serialize_none(),
    }
}

/// Serializes a `Duration` as a humantime string ("5s").
pub(crate) mod humantime_serde_duration {
    use std::time::Duration;

    pub(crate) fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow(ids: &[&str]) -> RbacFilter {
        RbacFilter {
            action: RbacAction::Allow,
            principals: ids
                .iter()
                .map(|s| PrincipalMatch::Exact(s.to_string()))
                .collect(),
        }
    }

    #[test]
    fn empty_allow_filter_denies_everyone() {
        assert_ne!(
            authorize(&[allow(&[])], Some("spiffe://d/web")),
            Authorization::Allowed
        );
    }

    #[test]
    fn allow_matches_exact_ids_and_prefixes() {
        let filters = [allow(&["spiffe://d/web"])];
        assert_eq!(
            authorize(&filters, Some("spiffe://d/web")),
            Authorization::Allowed
        );
        assert_ne!(
            authorize(&filters, Some("spiffe://d/other")),
            Authorization::Allowed
        );
        assert_ne!(authorize(&filters, None), Authorization::Allowed);
        let td = [RbacFilter {
            action: RbacAction::Allow,
            principals: vec![PrincipalMatch::Prefix("spiffe://d/".into())],
        }];
        assert_eq!(
            authorize(&td, Some("spiffe://d/any")),
            Authorization::Allowed
        );
        assert_ne!(
            authorize(&td, Some("spiffe://e/any")),
            Authorization::Allowed
        );
    }

    #[test]
    fn deny_wins_over_allow() {
        let filters = [
            RbacFilter {
                action: RbacAction::Deny,
                principals: vec![PrincipalMatch::Exact("spiffe://d/web".into())],
            },
            allow(&["spiffe://d/web", "spiffe://d/api"]),
        ];
        assert_ne!(
            authorize(&filters, Some("spiffe://d/web")),
            Authorization::Allowed
        );
        assert_eq!(
            authorize(&filters, Some("spiffe://d/api")),
            Authorization::Allowed
        );
    }

    #[test]
    fn no_filters_allow_everyone() {
        assert_eq!(authorize(&[], None), Authorization::Allowed);
    }
}
