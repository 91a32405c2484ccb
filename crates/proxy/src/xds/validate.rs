//! Validation of xDS resources into the proxy's model.
//!
//! Owns the answer to "can meshlink-proxy run this?". Every resource is
//! decoded and checked before anything is applied; a rejection names the
//! resource, the field path and what is supported, and becomes the NACK's
//! `error_detail` (I3). It must never panic on any input and never accept
//! a field it would silently ignore when ignoring it changes behaviour.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::core::v3::{
    Address, DataSource, TransportSocket, address, data_source, socket_address, transport_socket,
};
use envoy_types::pb::envoy::config::endpoint::v3::{ClusterLoadAssignment, lb_endpoint};
use envoy_types::pb::envoy::config::listener::v3::{Filter, Listener, filter};
use envoy_types::pb::envoy::config::rbac::v3::{principal, rbac};
use envoy_types::pb::envoy::extensions::filters::network::local_ratelimit::v3::LocalRateLimit as PbConnectionRateLimit;
use envoy_types::pb::envoy::extensions::filters::network::rbac::v3::Rbac;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, Secret, UpstreamTlsContext,
    common_tls_context::ValidationContextType, secret, subject_alt_name_matcher::SanType,
};
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use envoy_types::pb::google::protobuf::Any;
use meshlink_identity::TrustBundle;
use prost::{Message, Name};

use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;

use crate::model::{
    ClusterSpec, Direction, Discovery, DownstreamTls, LbPolicy, ListenerProtocol, ListenerSpec,
    PrincipalMatch, RbacAction, RbacFilter, SecretSpec, UpstreamTls, route::WeightedBackend,
};

mod access_log;
mod circuit_breaker;
mod dns;
mod fault;
mod hash_policy;
mod health_check;
mod http_listener;
mod lb_policy;
mod local_rate_limit;
mod metrics;
mod route;
mod trace;

pub use dns::dns_listener;
pub use metrics::metrics_listener;
pub use route::route_configuration;

/// Connect timeout when a cluster sets none (Envoy's default).
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why one resource was rejected: a field path and a reason with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct Invalid {
    /// Field path inside the resource, e.g. `filter_chains[0].filters[1]`.
    pub field: String,
    /// What is wrong and what is supported.
    pub reason: String,
}

/// A protobuf duration as a `Duration`; a negative one is refused at
/// `field`. Every duration the validators read goes through here.
fn duration(
    d: &envoy_types::pb::google::protobuf::Duration,
    field: impl Into<String>,
) -> Result<Duration, Invalid> {
    if d.seconds < 0 || d.nanos < 0 || d.nanos >= 1_000_000_000 {
        return Err(invalid(field, "must not be negative"));
    }
    Ok(Duration::new(d.seconds as u64, d.nanos as u32))
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Decodes `any` as `M`, checking its type URL first.
pub fn decode<M: Message + Name + Default>(any: &Any, field: &str) -> Result<M, Invalid> {
    let want = M::type_url();
    if any.type_url != want {
        return Err(invalid(
            field,
            format!(
                "type {:?} is not supported here; expected {want:?}",
                any.type_url
            ),
        ));
    }
    M::decode(any.value.as_slice())
        .map_err(|e| invalid(field, format!("cannot decode {want}: {e}")))
}

// === Listener ===

/// Validates a Listener.
pub fn listener(any: &Any) -> Result<ListenerSpec, Invalid> {
    let l: Listener = decode(any, "resource")?;
    if l.api_listener.is_some() {
        return Err(invalid(
            "api_listener",
            "API listeners are for proxyless gRPC clients; meshlink-proxy needs a socket listener",
        ));
    }
    let original_dst = original_dst(&l)?;
    let bind = l.bind_to_port.is_none_or(|b| b.value);
    let address = socket(l.address.as_ref(), "address")?;
    if ipv4_compat(l.address.as_ref()) {
        return Err(invalid(
            "address.socket_address.ipv4_compat",
            "is not supported by meshlink-proxy: an IPv6 listener receives IPv6 only; send a \
             second listener on 0.0.0.0 for IPv4 (as a dual-stack transparent proxy's \
             outbound:passthrough:ipv4 and :ipv6)",
        ));
    }
    let [chain] = l.filter_chains.as_slice() else {
        return Err(invalid(
            "filter_chains",
            format!(
                "{} filter chains; meshlink-proxy supports exactly one",
                l.filter_chains.len()
            ),
        ));
    };
    if chain.filter_chain_match.is_some() {
        return Err(invalid(
            "filter_chains[0].filter_chain_match",
            "filter chain matching is not supported by meshlink-proxy",
        ));
    }
    let tls = chain
        .transport_socket
        .as_ref()
        .map(|t| downstream_tls(t, "filter_chains[0].transport_socket"))
        .transpose()?;
    let ChainFilters {
        rbac,
        rbac_per_request,
        protocol,
        connection_rate_limit,
    } = filters(&chain.filters)?;
    let direction = match (l.traffic_direction, &tls) {
        (1, _) => Direction::Inbound,
        (2, _) => Direction::Outbound,
        (_, Some(_)) => Direction::Inbound,
        (_, None) => Direction::Outbound,
    };
    if !rbac.is_empty() && tls.is_none() {
        return Err(invalid(
            "filter_chains[0].filters",
            "an RBAC filter needs TLS on the listener: without a client certificate there is no identity to authorize",
        ));
    }
    Ok(ListenerSpec {
        name: l.name,
        address,
        direction,
        tls,
        connection_rate_limit,
        rbac,
        rbac_per_request,
        protocol,
        bind,
        original_dst,
    })
}

/// Envoy's name of the listener filter that reads a redirected
/// connection's original destination.
const ORIGINAL_DST_FILTER: &str = "envoy.filters.listener.original_dst";

/// `use_original_dst` and the listener filters: none, or exactly the
/// `original_dst` filter together with `use_original_dst: true` (a
/// transparent proxy's capture listener).
fn original_dst(l: &Listener) -> Result<bool, Invalid> {
    let use_original_dst = l.use_original_dst.is_some_and(|b| b.value);
    match l.listener_filters.as_slice() {
        [] if use_original_dst => Err(invalid(
            "listener_filters",
            format!(
                "use_original_dst needs the {ORIGINAL_DST_FILTER} listener filter, which reads \
                 the original destination"
            ),
        )),
        [] => Ok(false),
        [f] if f.name == ORIGINAL_DST_FILTER => {
            if !use_original_dst {
                return Err(invalid(
                    "use_original_dst",
                    format!(
                        "the {ORIGINAL_DST_FILTER} listener filter is only supported with \
                         use_original_dst: true (a capture listener)"
                    ),
                ));
            }
            if l.bind_to_port.is_some_and(|b| !b.value) {
                return Err(invalid(
                    "bind_to_port",
                    "a capture listener (use_original_dst) must bind its port",
                ));
            }
            Ok(true)
        }
        [f] => Err(invalid(
            "listener_filters[0]",
            format!(
                "listener filter {:?} is not supported by meshlink-proxy (only {ORIGINAL_DST_FILTER})",
                f.name
            ),
        )),
        more => Err(invalid(
            "listener_filters",
            format!(
                "{} listener filters; meshlink-proxy supports only {ORIGINAL_DST_FILTER}",
                more.len()
            ),
        )),
    }
}

/// What a filter chain's filters configure.
struct ChainFilters {
    rbac: Vec<RbacFilter>,
    rbac_per_request: bool,
    protocol: ListenerProtocol,
    connection_rate_limit: Option<crate::model::rate_limit::ConnectionRateLimit>,
}

/// RBAC filters (in order), at most one connection rate limit, then
/// exactly one `tcp_proxy` or `http_connection_manager`, last.
fn filters(filters: &[Filter]) -> Result<ChainFilters, Invalid> {
    let mut rbac_filters = Vec::new();
    let mut connection_rate_limit = None;
    let mut protocol = None;
    let mut per_request = false;
    for (i, f) in filters.iter().enumerate() {
        let field = format!("filter_chains[0].filters[{i}]");
        let Some(filter::ConfigType::TypedConfig(any)) = &f.config_type else {
            return Err(invalid(
                field,
                format!("filter {:?} has no typed_config", f.name),
            ));
        };
        if protocol.is_some() {
            return Err(invalid(
                field,
                "tcp_proxy or http_connection_manager must be the last filter",
            ));
        }
        if any.type_url == Rbac::type_url() {
            let r: Rbac = decode(any, &field)?;
            rbac_filters.push(rbac_rules(r.rules, &format!("{field}.typed_config"))?);
        } else if any.type_url == PbConnectionRateLimit::type_url() {
            if connection_rate_limit.is_some() {
                return Err(invalid(
                    field,
                    "a second network local rate limit filter; meshlink-proxy supports one per listener",
                ));
            }
            connection_rate_limit = Some(local_rate_limit::connection_rate_limit(
                any,
                &format!("{field}.typed_config"),
            )?);
        } else if any.type_url == TcpProxy::type_url() {
            let proxy: TcpProxy = decode(any, &field)?;
            let idle_timeout = proxy
                .idle_timeout
                .as_ref()
                .map(|d| duration(d, format!("{field}.typed_config.idle_timeout")))
                .transpose()?;
            let max_connect_attempts = match proxy.max_connect_attempts.map(|v| v.value) {
                Some(0) => {
                    return Err(invalid(
                        format!("{field}.typed_config.max_connect_attempts"),
                        "must be at least 1",
                    ));
                }
                n => n,
            };
            let (cluster, weighted) =
                tcp_clusters(proxy.cluster_specifier, &format!("{field}.typed_config"))?;
            protocol = Some(ListenerProtocol::Tcp {
                cluster,
                weighted,
                max_connect_attempts,
                idle_timeout,
            });
        } else if any.type_url == HttpConnectionManager::type_url() {
            let (http_rbac, http) =
                http_listener::connection_manager(any, &format!("{field}.typed_config"))?;
            per_request = !http_rbac.is_empty();
            rbac_filters.extend(http_rbac);
            protocol = Some(ListenerProtocol::Http(http));
        } else {
            return Err(invalid(
                format!("{field}.typed_config"),
                format!(
                    "unsupported filter type {:?}; meshlink-proxy supports network RBAC, network local_ratelimit, tcp_proxy and http_connection_manager",
                    any.type_url
                ),
            ));
        }
    }
    let protocol = protocol.ok_or_else(|| {
        invalid(
            "filter_chains[0].filters",
            "no tcp_proxy or http_connection_manager filter; the chain must end with one",
        )
    })?;
    Ok(ChainFilters {
        rbac: rbac_filters,
        rbac_per_request: per_request,
        protocol,
        connection_rate_limit,
    })
}

/// Reads RBAC rules (of a network or an HTTP RBAC filter).
pub(crate) fn rbac_rules(
    rules: Option<envoy_types::pb::envoy::config::rbac::v3::Rbac>,
    field: &str,
) -> Result<RbacFilter, Invalid> {
    let rules = rules.unwrap_or_default();
    let action = match rules.action {
        a if a == rbac::Action::Allow as i32 => RbacAction::Allow,
        a if a == rbac::Action::Deny as i32 => RbacAction::Deny,
        other => {
            return Err(invalid(
                format!("{field}.rules.action"),
                format!("action {other} is not supported; use ALLOW or DENY"),
            ));
        }
    };
    let mut principals = Vec::new();
    let mut names: Vec<_> = rules.policies.keys().cloned().collect();
    names.sort();
    for name in names {
        let policy = &rules.policies[&name];
        let pfield = format!("{field}.rules.policies[{name:?}]");
        let any_permission = policy.permissions.iter().all(|p| {
            matches!(
                p.rule,
                Some(envoy_types::pb::envoy::config::rbac::v3::permission::Rule::Any(true))
            )
        });
        if !any_permission || policy.permissions.is_empty() {
            return Err(invalid(
                format!("{pfield}.permissions"),
                "only `any: true` permissions are supported (authorization is by SPIFFE ID)",
            ));
        }
        for (i, p) in policy.principals.iter().enumerate() {
            let field = format!("{pfield}.principals[{i}]");
            let Some(principal::Identifier::Authenticated(auth)) = &p.identifier else {
                return Err(invalid(
                    field,
                    "only `authenticated.principal_name` principals are supported",
                ));
            };
            let pattern = auth
                .principal_name
                .as_ref()
                .and_then(|m| m.match_pattern.as_ref());
            principals.push(match pattern {
                Some(MatchPattern::Exact(s)) => PrincipalMatch::Exact(s.clone()),
                Some(MatchPattern::Prefix(s)) => PrincipalMatch::Prefix(s.clone()),
                _ => {
                    return Err(invalid(
                        format!("{field}.authenticated.principal_name"),
                        "only exact and prefix matchers are supported",
                    ));
                }
            });
        }
    }
    Ok(RbacFilter { action, principals })
}

/// Whether a listener's address asks for `ipv4_compat` (an IPv6 socket
/// that takes IPv4 too), which meshlink-proxy never binds.
fn ipv4_compat(address: Option<&Address>) -> bool {
    matches!(
        address.and_then(|a| a.address.as_ref()),
        Some(address::Address::SocketAddress(sa)) if sa.ipv4_compat
    )
}

fn socket(address: Option<&Address>, field: &str) -> Result<SocketAddr, Invalid> {
    let Some(address::Address::SocketAddress(sa)) = address.and_then(|a| a.address.as_ref()) else {
        return Err(invalid(
            field,
            "missing or not a socket address (pipes and internal addresses are not supported)",
        ));
    };
    let ip: IpAddr = sa.address.parse().map_err(|_| {
        invalid(
            format!("{field}.socket_address.address"),
            format!("{:?} is not an IP address", sa.address),
        )
    })?;
    let port = match sa.port_specifier {
        Some(socket_address::PortSpecifier::PortValue(p)) if p > 0 && p <= 65535 => p as u16,
        _ => {
            return Err(invalid(
                format!("{field}.socket_address.port_value"),
                "a port between 1 and 65535 is required (named ports are not supported)",
            ));
        }
    };
    Ok(SocketAddr::new(ip, port))
}

// === TLS ===

fn tls_any<'a>(t: &'a TransportSocket, field: &str) -> Result<&'a Any, Invalid> {
    match &t.config_type {
        Some(transport_socket::ConfigType::TypedConfig(any)) => Ok(any),
        _ => Err(invalid(field, "transport socket has no typed_config")),
    }
}

/// The identity secret name of a common TLS context.
fn identity_secret(common: &CommonTlsContext, field: &str) -> Result<String, Invalid> {
    match common.tls_certificate_sds_secret_configs.as_slice() {
        [one] => Ok(one.name.clone()),
        _ => Err(invalid(
            format!("{field}.common_tls_context.tls_certificate_sds_secret_configs"),
            "exactly one SDS identity certificate is required (inline certificates and certificate providers are not supported)",
        )),
    }
}

fn downstream_tls(t: &TransportSocket, field: &str) -> Result<DownstreamTls, Invalid> {
    let ctx: DownstreamTlsContext = decode(tls_any(t, field)?, field)?;
    let field = format!("{field}.typed_config");
    let common = ctx.common_tls_context.unwrap_or_default();
    let identity_secret = identity_secret(&common, &field)?;
    let ca_secret = match &common.validation_context_type {
        Some(ValidationContextType::ValidationContextSdsSecretConfig(s)) => s.name.clone(),
        Some(ValidationContextType::CombinedValidationContext(c)) => c
            .validation_context_sds_secret_config
            .as_ref()
            .map(|s| s.name.clone())
            .unwrap_or_default(),
        _ => String::new(),
    };
    if ca_secret.is_empty() {
        return Err(invalid(
            format!("{field}.common_tls_context.validation_context_sds_secret_config"),
            "an SDS trust bundle is required: meshlink-proxy only runs mutual TLS inbound",
        ));
    }
    if !ctx.require_client_certificate.is_some_and(|b| b.value) {
        return Err(invalid(
            format!("{field}.require_client_certificate"),
            "must be true: meshlink-proxy only runs mutual TLS inbound",
        ));
    }
    Ok(DownstreamTls {
        identity_secret,
        ca_secret,
        alpn: common.alpn_protocols,
    })
}

fn upstream_tls(t: &TransportSocket, field: &str) -> Result<UpstreamTls, Invalid> {
    let ctx: UpstreamTlsContext = decode(tls_any(t, field)?, field)?;
    let field = format!("{field}.typed_config");
    let common = ctx.common_tls_context.unwrap_or_default();
    let identity_secret = identity_secret(&common, &field)?;
    let vfield = format!("{field}.common_tls_context.combined_validation_context");
    let Some(ValidationContextType::CombinedValidationContext(combined)) =
        &common.validation_context_type
    else {
        return Err(invalid(
            vfield,
            "a combined validation context (SDS trust bundle + SAN match) is required",
        ));
    };
    let ca_secret = combined
        .validation_context_sds_secret_config
        .as_ref()
        .map(|s| s.name.clone())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            invalid(
                format!("{vfield}.validation_context_sds_secret_config"),
                "an SDS trust bundle is required",
            )
        })?;
    let sans = combined
        .default_validation_context
        .as_ref()
        .map(|v| v.match_typed_subject_alt_names.as_slice())
        .unwrap_or_default();
    // Any of several exact URI SANs (a MeshService's identities).
    let mut expected_spiffe_ids = Vec::with_capacity(sans.len());
    for (i, m) in sans.iter().enumerate() {
        let exact = match m.matcher.as_ref().and_then(|s| s.match_pattern.as_ref()) {
            Some(MatchPattern::Exact(id)) if m.san_type == SanType::Uri as i32 => id,
            _ => {
                return Err(invalid(
                    format!(
                        "{vfield}.default_validation_context.match_typed_subject_alt_names[{i}]"
                    ),
                    "only exact URI SAN (SPIFFE ID) matchers are supported",
                ));
            }
        };
        expected_spiffe_ids.push(exact.clone());
    }
    let sni = (!ctx.sni.is_empty()).then_some(ctx.sni);
    if let Some(name) = &sni
        && rustls_pki_types::ServerName::try_from(name.as_str()).is_err()
    {
        return Err(invalid(
            format!("{field}.sni"),
            format!("{name:?} is not a DNS name"),
        ));
    }
    Ok(UpstreamTls {
        identity_secret,
        ca_secret,
        expected_spiffe_ids,
        sni,
        alpn: common.alpn_protocols,
    })
}

// === Cluster ===

/// Validates a Cluster.
pub fn cluster(any: &Any) -> Result<ClusterSpec, Invalid> {
    let c: Cluster = decode(any, "resource")?;
    let discovery = match &c.cluster_discovery_type {
        Some(cluster::ClusterDiscoveryType::Type(t))
            if *t == cluster::DiscoveryType::Eds as i32 =>
        {
            Discovery::Eds
        }
        Some(cluster::ClusterDiscoveryType::Type(t))
            if *t == cluster::DiscoveryType::Static as i32 =>
        {
            let cla = c.load_assignment.as_ref().ok_or_else(|| {
                invalid(
                    "load_assignment",
                    "a STATIC cluster needs a load_assignment",
                )
            })?;
            Discovery::Static(endpoints_of(cla, "load_assignment")?)
        }
        Some(cluster::ClusterDiscoveryType::Type(t))
            if *t == cluster::DiscoveryType::OriginalDst as i32 =>
        {
            if c.lb_policy != cluster::LbPolicy::ClusterProvided as i32 {
                return Err(invalid(
                    "lb_policy",
                    "an ORIGINAL_DST cluster needs lb_policy CLUSTER_PROVIDED (each connection \
                     goes to its own original destination)",
                ));
            }
            Discovery::OriginalDst
        }
        _ => {
            return Err(invalid(
                "type",
                "only STATIC, EDS and ORIGINAL_DST clusters are supported",
            ));
        }
    };
    let lb = if discovery == Discovery::OriginalDst {
        LbPolicy::RoundRobin
    } else {
        lb_policy::lb_policy(&c)?
    };
    let connect_timeout = match &c.connect_timeout {
        None => DEFAULT_CONNECT_TIMEOUT,
        Some(d) if d.seconds >= 0 && d.nanos >= 0 && (d.seconds > 0 || d.nanos > 0) => {
            Duration::new(d.seconds as u64, d.nanos as u32)
        }
        Some(_) => return Err(invalid("connect_timeout", "must be positive")),
    };
    let tls = c
        .transport_socket
        .as_ref()
        .map(|t| upstream_tls(t, "transport_socket"))
        .transpose()?;
    let http2 = http_listener::upstream_http2(&c.typed_extension_protocol_options)?;
    let circuit_breakers = c
        .circuit_breakers
        .as_ref()
        .map(circuit_breaker::thresholds)
        .transpose()?;
    let outlier_detection = match &c.outlier_detection {
        Some(od) => circuit_breaker::outlier(od, c.common_lb_config.as_ref())?,
        None => {
            let builtin = crate::model::circuit_breaker::OutlierSpec::builtin();
            let panic = circuit_breaker::panic_threshold(
                c.common_lb_config.as_ref(),
                builtin.healthy_panic_threshold,
            )?;
            crate::model::circuit_breaker::OutlierSpec {
                healthy_panic_threshold: panic,
                fail_traffic_on_panic: circuit_breaker::fail_traffic_on_panic(
                    c.common_lb_config.as_ref(),
                ),
                ..builtin
            }
        }
    };
    let health_check = health_check::health_checks(&c.health_checks)?;
    Ok(ClusterSpec {
        name: c.name,
        discovery,
        tls,
        connect_timeout,
        lb,
        http2,
        circuit_breakers,
        outlier_detection,
        health_check,
    })
}

// === ClusterLoadAssignment ===

/// Validates a ClusterLoadAssignment into its endpoint addresses.
pub fn load_assignment(any: &Any) -> Result<Vec<SocketAddr>, Invalid> {
    let cla: ClusterLoadAssignment = decode(any, "resource")?;
    endpoints_of(&cla, "")
}

fn endpoints_of(cla: &ClusterLoadAssignment, prefix: &str) -> Result<Vec<SocketAddr>, Invalid> {
    let dot = if prefix.is_empty() { "" } else { "." };
    let mut out = Vec::new();
    for (i, locality) in cla.endpoints.iter().enumerate() {
        for (j, lb) in locality.lb_endpoints.iter().enumerate() {
            let field = format!("{prefix}{dot}endpoints[{i}].lb_endpoints[{j}].endpoint.address");
            let Some(lb_endpoint::HostIdentifier::Endpoint(ep)) = &lb.host_identifier else {
                return Err(invalid(field, "named endpoints are not supported"));
            };
            out.push(socket(ep.address.as_ref(), &field)?);
        }
    }
    Ok(out)
}

// === Secret ===

pub(crate) fn pem_of(ds: Option<&DataSource>, field: &str) -> Result<String, Invalid> {
    match ds.and_then(|d| d.specifier.as_ref()) {
        Some(data_source::Specifier::InlineString(s)) => Ok(s.clone()),
        Some(data_source::Specifier::InlineBytes(b)) => String::from_utf8(b.clone())
            .map_err(|_| invalid(field, "inline bytes are not UTF-8 PEM")),
        _ => Err(invalid(
            field,
            "only inline PEM is supported (files are read by the control plane, not the proxy)",
        )),
    }
}

/// Validates a Secret.
pub fn secret(any: &Any) -> Result<SecretSpec, Invalid> {
    let s: Secret = decode(any, "resource")?;
    if let Some(policy) = meshlink_proto::identity_policy::from_secret(&s) {
        return policy
            .map(SecretSpec::IdentityPolicy)
            .map_err(|e| invalid("type", e.to_string()));
    }
    match s.r#type {
        Some(secret::Type::ValidationContext(v)) => {
            let pem = pem_of(v.trusted_ca.as_ref(), "validation_context.trusted_ca")?;
            let bundle = TrustBundle::from_pem(&pem).map_err(|e| {
                invalid(
                    "validation_context.trusted_ca",
                    format!("not a PEM certificate bundle: {e}"),
                )
            })?;
            if bundle.is_empty() {
                return Err(invalid(
                    "validation_context.trusted_ca",
                    "the trust bundle has no certificates",
                ));
            }
            meshlink_identity::tls::root_store(&bundle)
                .map_err(|e| invalid("validation_context.trusted_ca", e.to_string()))?;
            Ok(SecretSpec::TrustBundle(bundle))
        }
        Some(secret::Type::TlsCertificate(_)) => Ok(SecretSpec::TlsCertificate),
        _ => Err(invalid(
            "type",
            "only validation_context and tls_certificate secrets (and the identity policy's \
             generic_secret) are supported",
        )),
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod transparent_tests;

/// The cluster of a `tcp_proxy`, or its weighted clusters (the first
/// one's name beside them).
fn tcp_clusters(
    specifier: Option<ClusterSpecifier>,
    at: &str,
) -> Result<(String, Vec<WeightedBackend>), Invalid> {
    match specifier {
        Some(ClusterSpecifier::Cluster(c)) if !c.is_empty() => Ok((c, Vec::new())),
        Some(ClusterSpecifier::WeightedClusters(w)) => {
            let mut out = Vec::with_capacity(w.clusters.len());
            for (i, c) in w.clusters.into_iter().enumerate() {
                let field = format!("{at}.weighted_clusters.clusters[{i}]");
                if c.name.is_empty() {
                    return Err(invalid(format!("{field}.name"), "must name a cluster"));
                }
                if c.metadata_match.is_some() {
                    return Err(invalid(
                        format!("{field}.metadata_match"),
                        "is not supported by meshlink-proxy; name a cluster per subset",
                    ));
                }
                out.push(WeightedBackend {
                    cluster: c.name,
                    weight: c.weight,
                    request_headers: Default::default(),
                });
            }
            if out.iter().all(|b| b.weight == 0) {
                return Err(invalid(
                    format!("{at}.weighted_clusters.clusters"),
                    "needs at least one cluster with a weight above 0",
                ));
            }
            Ok((out[0].cluster.clone(), out))
        }
        _ => Err(invalid(
            format!("{at}.cluster"),
            "tcp_proxy needs a cluster name or weighted_clusters",
        )),
    }
}
