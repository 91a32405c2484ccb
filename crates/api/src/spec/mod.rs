//! Typed specs and statuses for every kind.
//!
//! Owns the [`Spec`] and [`StatusDetails`] enums and their dispatch to one
//! module per kind (or small group of kinds). Stored specs hold exactly what
//! the user wrote: defaults are never filled in, they are computed by
//! accessor methods (e.g. [`MeshSpec::trust_domain`]). Nothing here may drop
//! an unknown field: every type denies unknown fields so canonical output
//! round-trips unchanged.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::resource::deserialize_at;
use crate::{FieldError, Kind, Metadata};

mod access_log;
pub mod access_log_format;
mod circuit_breaker;
mod dataplane;
mod fault_injection;
mod gateway;
mod grant;
mod header_match;
mod health_check;
mod http_route;
mod http_route_filter;
mod http_route_match;
mod kuma_duration;
mod link;
mod load_balancing;
mod mesh;
mod mesh_service;
mod mesh_status;
mod metric;
mod multi_key;
mod permission_rules;
mod policy_target;
mod port;
mod rate_limit;
mod regex_check;
mod retry;
mod retry_validate;
mod route_backend;
mod secret;
mod service;
mod site;
mod spec_access;
mod string_enum;
mod tags;
mod target_ref;
mod tcp_route;
mod timeout;
mod trace;
mod traffic_permission;
mod transparent_proxying;
mod unknown_field_hint;

pub use access_log::{
    AccessLogBackend, AccessLogConf, AccessLogEntry, AccessLogRule, DEFAULT_HTTP_FORMAT,
    DEFAULT_TCP_FORMAT, FileBackend, KeyValue, LogFormat, MeshAccessLogSpec, OtelBackend,
    TcpBackend,
};
pub use circuit_breaker::{
    CircuitBreakerConf, CircuitBreakerEntry, CircuitBreakerRule, ConnectionLimits, Consecutive,
    Decimal, Detectors, FailurePercentage, MeshCircuitBreakerSpec, OutlierDetection, SuccessRate,
};
pub use dataplane::{
    DataplaneAdmin, DataplaneMtlsStatus, DataplaneSpec, DataplaneStatus, Inbound, InboundHealth,
    Networking, Outbound, SERVICE_TAG, SERVICE_TAG_ALIAS, UnhealthyEndpoint, UnreachableApp,
    service_from_tags,
};
pub use fault_injection::{
    AbortFault, Bandwidth, BandwidthFault, DelayFault, FaultConf, FaultEntry, HttpFault,
    MeshFaultInjectionSpec, Percentage,
};
pub use gateway::{Gateway, GatewayType, builtin_warning};
pub use grant::{
    AccessGrantSpec, AccessGrantStatus, AccessTokenSpec, AccessTokenStatus,
    DEFAULT_EXPIRATION_WINDOW, DEFAULT_REDEMPTIONS_ALLOWED, LINK_CERT_LIFETIME_LABEL,
    MAX_LINK_CERT_LIFETIME, MIN_LINK_CERT_LIFETIME,
};
pub use header_match::{HeaderMatch, HeaderMatchType};
pub use health_check::{
    GrpcCheck, HealthCheckConf, HealthCheckTo, HttpCheck, MeshHealthCheckSpec, TcpCheck,
};
pub use http_route::{HttpRouteRule, HttpRouteTo, HttpRuleConf, MeshHttpRouteSpec};
pub use http_route_filter::{
    Filter, FilterType, HeaderKeyValue, HeaderModifier, MAX_HEADER_MODIFICATIONS, PathRewrite,
    PathRewriteType, RequestMirror, RequestRedirect, UrlRewrite,
};
pub use http_route_match::{
    HttpMethod, HttpRouteMatch, PathMatch, PathMatchType, QueryParamMatch, QueryParamMatchType,
};
pub use kuma_duration::parse_kuma_duration;
pub use link::{LinkEndpoint, LinkSpec, LinkStatus};
pub use load_balancing::{
    Cookie as HashCookie, HashPolicy, LeastRequest, LoadBalancer, LoadBalancingConf,
    LoadBalancingTo, Maglev, MeshLoadBalancingStrategySpec, RingHash, decimal,
};
pub use mesh::{
    CaCertConf, CaConf, CaType, DEFAULT_CA_CERT_LIFETIME, DEFAULT_DP_CERT_LIFETIME, DataSource,
    DataSourceContents, DpCert, MIN_DP_CERT_LIFETIME, MeshNetworking, MeshOutbound, MeshSpec, Mtls,
    MtlsBackend, Rotation,
};
pub(crate) use mesh_service::mesh_services_mode_warning;
pub use mesh_service::{
    BackendRef, DataplaneProxies, DataplaneRef, IdentityType, LabelSelector, MeshServiceIdentity,
    MeshServicePort, MeshServiceSelector, MeshServiceSpec, MeshServiceStatus, MeshServices,
    MeshServicesMode, TargetPort,
};
pub use mesh_status::MeshStatus;
pub use metric::{
    MeshMetricSpec, MetricApplication, MetricBackend, MetricConf, Selector as MetricSelectorSpec,
    SidecarMetrics,
};
pub use multi_key::{
    MAX_ROUTING_KEYS, MultiKeyListenerSpec, MultiKeyListenerStatus, MultiKeyStrategy,
    PriorityStatus, PriorityStrategy, StrategyStatus, WeightedStatus, WeightedStrategy,
};
pub use permission_rules::{
    ClientMatch, PermissionRule, RuleConf, SpiffeIdMatch, SpiffeIdMatchType,
};
pub use port::Port;
pub use rate_limit::{
    HeaderChanges, HttpLimit, LocalLimits, MeshRateLimitSpec, NameValue, OnRateLimit, Rate,
    RateLimitConf, RateLimitFrom, RateLimitRule, TcpLimit,
};
pub use regex_check::REGEX_SIZE_LIMIT;
pub use retry::{
    BackOff, GrpcRetry, GrpcRetryOn, HTTP_RETRY_ON, HostPredicate, HostSelection, HttpRetry,
    MeshRetrySpec, RETRY_STATUS_CODES, RateLimitedBackOff, ResetHeader, ResetHeaderFormat,
    RetryConf, RetryTo, TcpRetry, default_grpc_retry_on, default_http_retry_on,
};
pub use route_backend::{MAX_WEIGHT, RouteBackendRef};
pub use secret::{
    CA_CRT, KUMA_GLOBAL_SECRET_TYPE, KUMA_SECRET_TYPE, SecretSpec, TLS_CRT, TLS_KEY,
    TLS_SECRET_TYPE, VALUE,
};
pub use service::{
    ConnectorSpec, ConnectorStatus, ListenerSpec, ListenerStatus, SelectedPod, ServiceType,
    TagRequirement, TagSelector,
};
pub use site::{
    DEFAULT_ISSUER, EDGE_PORT, Endpoint, INTER_ROUTER_PORT, IncomingLink, NetworkLink,
    NetworkService, NetworkSite, REQUIRE_ROUTER_IDENTITY_LABEL, RouterAccessSpec,
    RouterAccessStatus, RouterRole, RouterRoleName, SiteSpec, SiteStatus, requires_router_identity,
};
pub use tags::Tags;
pub use target_ref::{InboundTarget, NAMESPACE_LABEL, ProxyType, TargetRef, TargetRefKind};
pub use tcp_route::{MeshTcpRouteSpec, TcpRouteRule, TcpRouteTo, TcpRuleConf};
pub use timeout::{
    HttpTimeouts, MeshTimeoutSpec, TimeoutConf, TimeoutDefaults, TimeoutFrom, TimeoutRule,
    TimeoutTo,
};
pub use trace::{
    DatadogBackend, HeaderTag, MeshTraceSpec, OtelTraceBackend, Percentage as TracePercentage,
    Sampling, TraceBackend, TraceConf, TraceTag, ZipkinBackend, url_host_port,
};
pub use traffic_permission::{Action, FromRule, MeshTrafficPermissionSpec, PermissionConf};
pub use transparent_proxying::{
    DEFAULT_REDIRECT_PORT_INBOUND, DEFAULT_REDIRECT_PORT_OUTBOUND, IpFamilyMode,
    TransparentProxying,
};

/// What secret values are replaced with by the `redacted()` methods.
///
/// A server that receives this exact value back for a secret field (because a
/// user re-applied the output of `get -o yaml`) should keep the stored secret.
pub const REDACTED: &str = "<redacted>";

/// The spec of a resource; the variant decides the kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Spec {
    /// A [`MeshSpec`].
    Mesh(MeshSpec),
    /// A [`DataplaneSpec`].
    Dataplane(DataplaneSpec),
    /// A [`MeshTrafficPermissionSpec`].
    MeshTrafficPermission(MeshTrafficPermissionSpec),
    /// A [`SiteSpec`].
    Site(SiteSpec),
    /// A [`RouterAccessSpec`].
    RouterAccess(RouterAccessSpec),
    /// An [`AccessGrantSpec`].
    AccessGrant(AccessGrantSpec),
    /// An [`AccessTokenSpec`].
    AccessToken(AccessTokenSpec),
    /// A [`LinkSpec`].
    Link(LinkSpec),
    /// A [`ListenerSpec`].
    Listener(ListenerSpec),
    /// A [`MultiKeyListenerSpec`].
    MultiKeyListener(MultiKeyListenerSpec),
    /// A [`ConnectorSpec`].
    Connector(ConnectorSpec),
    /// A [`SecretSpec`].
    Secret(SecretSpec),
    /// A [`MeshServiceSpec`].
    MeshService(MeshServiceSpec),
    /// A [`MeshHttpRouteSpec`].
    MeshHTTPRoute(MeshHttpRouteSpec),
    /// A [`MeshTcpRouteSpec`].
    MeshTCPRoute(MeshTcpRouteSpec),
    /// A [`MeshTimeoutSpec`].
    MeshTimeout(MeshTimeoutSpec),
    /// A [`MeshRetrySpec`].
    MeshRetry(MeshRetrySpec),
    /// A [`MeshRateLimitSpec`].
    MeshRateLimit(MeshRateLimitSpec),
    /// A [`MeshAccessLogSpec`].
    MeshAccessLog(MeshAccessLogSpec),
    /// A [`MeshLoadBalancingStrategySpec`].
    MeshLoadBalancingStrategy(MeshLoadBalancingStrategySpec),
    /// A [`MeshHealthCheckSpec`].
    MeshHealthCheck(MeshHealthCheckSpec),
    /// A [`MeshMetricSpec`].
    MeshMetric(MeshMetricSpec),
    /// A [`MeshFaultInjectionSpec`].
    MeshFaultInjection(MeshFaultInjectionSpec),
    /// A [`MeshCircuitBreakerSpec`].
    MeshCircuitBreaker(MeshCircuitBreakerSpec),
    /// A [`MeshTraceSpec`].
    MeshTrace(MeshTraceSpec),
}

/// Applies `$body` to the inner value of every [`Spec`] variant.
macro_rules! each_spec {
    ($spec:expr, $inner:ident => $body:expr) => {
        match $spec {
            Spec::Mesh($inner) => $body,
            Spec::Dataplane($inner) => $body,
            Spec::MeshTrafficPermission($inner) => $body,
            Spec::Site($inner) => $body,
            Spec::RouterAccess($inner) => $body,
            Spec::AccessGrant($inner) => $body,
            Spec::AccessToken($inner) => $body,
            Spec::Link($inner) => $body,
            Spec::Listener($inner) => $body,
            Spec::MultiKeyListener($inner) => $body,
            Spec::Connector($inner) => $body,
            Spec::Secret($inner) => $body,
            Spec::MeshService($inner) => $body,
            Spec::MeshHTTPRoute($inner) => $body,
            Spec::MeshTCPRoute($inner) => $body,
            Spec::MeshTimeout($inner) => $body,
            Spec::MeshRetry($inner) => $body,
            Spec::MeshRateLimit($inner) => $body,
            Spec::MeshAccessLog($inner) => $body,
            Spec::MeshLoadBalancingStrategy($inner) => $body,
            Spec::MeshHealthCheck($inner) => $body,
            Spec::MeshMetric($inner) => $body,
            Spec::MeshFaultInjection($inner) => $body,
            Spec::MeshCircuitBreaker($inner) => $body,
            Spec::MeshTrace($inner) => $body,
        }
    };
}

// === impl Spec ===

impl Spec {
    /// The kind this spec belongs to.
    pub fn kind(&self) -> Kind {
        match self {
            Spec::Mesh(_) => Kind::Mesh,
            Spec::Dataplane(_) => Kind::Dataplane,
            Spec::MeshTrafficPermission(_) => Kind::MeshTrafficPermission,
            Spec::Site(_) => Kind::Site,
            Spec::RouterAccess(_) => Kind::RouterAccess,
            Spec::AccessGrant(_) => Kind::AccessGrant,
            Spec::AccessToken(_) => Kind::AccessToken,
            Spec::Link(_) => Kind::Link,
            Spec::Listener(_) => Kind::Listener,
            Spec::MultiKeyListener(_) => Kind::MultiKeyListener,
            Spec::Connector(_) => Kind::Connector,
            Spec::Secret(_) => Kind::Secret,
            Spec::MeshService(_) => Kind::MeshService,
            Spec::MeshHTTPRoute(_) => Kind::MeshHTTPRoute,
            Spec::MeshTCPRoute(_) => Kind::MeshTCPRoute,
            Spec::MeshTimeout(_) => Kind::MeshTimeout,
            Spec::MeshRetry(_) => Kind::MeshRetry,
            Spec::MeshRateLimit(_) => Kind::MeshRateLimit,
            Spec::MeshAccessLog(_) => Kind::MeshAccessLog,
            Spec::MeshLoadBalancingStrategy(_) => Kind::MeshLoadBalancingStrategy,
            Spec::MeshHealthCheck(_) => Kind::MeshHealthCheck,
            Spec::MeshMetric(_) => Kind::MeshMetric,
            Spec::MeshFaultInjection(_) => Kind::MeshFaultInjection,
            Spec::MeshCircuitBreaker(_) => Kind::MeshCircuitBreaker,
            Spec::MeshTrace(_) => Kind::MeshTrace,
        }
    }

    /// Parses a `spec` value of `kind`, rejecting unknown fields and wrong
    /// types. Paths start with `spec`. Port ranges and enum values are left
    /// to [`Spec::validate`], so they are reported with every other error.
    pub fn from_value(kind: Kind, value: Value) -> Result<Spec, Vec<FieldError>> {
        // A missing or `null` spec means "all defaults".
        let value = match value {
            Value::Null => Value::Object(Default::default()),
            v => v,
        };
        let parsed = match kind {
            Kind::Mesh => parse(value).map(Spec::Mesh),
            Kind::Dataplane => parse(value).map(Spec::Dataplane),
            Kind::MeshTrafficPermission => parse(value).map(Spec::MeshTrafficPermission),
            Kind::Site => parse(value).map(Spec::Site),
            Kind::RouterAccess => parse(value).map(Spec::RouterAccess),
            Kind::AccessGrant => parse(value).map(Spec::AccessGrant),
            Kind::AccessToken => parse(value).map(Spec::AccessToken),
            Kind::Link => parse(value).map(Spec::Link),
            Kind::Listener => parse(value).map(Spec::Listener),
            Kind::MultiKeyListener => parse(value).map(Spec::MultiKeyListener),
            Kind::Connector => parse(value).map(Spec::Connector),
            Kind::Secret => parse(value).map(Spec::Secret),
            Kind::MeshService => parse(value).map(Spec::MeshService),
            Kind::MeshHTTPRoute => policy(value).map(Spec::MeshHTTPRoute),
            Kind::MeshTCPRoute => policy(value).map(Spec::MeshTCPRoute),
            Kind::MeshTimeout => policy(value).map(Spec::MeshTimeout),
            Kind::MeshRetry => policy(value).map(Spec::MeshRetry),
            Kind::MeshRateLimit => policy(value).map(Spec::MeshRateLimit),
            Kind::MeshAccessLog => policy(value).map(Spec::MeshAccessLog),
            Kind::MeshLoadBalancingStrategy => policy(value).map(Spec::MeshLoadBalancingStrategy),
            Kind::MeshHealthCheck => policy(value).map(Spec::MeshHealthCheck),
            Kind::MeshMetric => policy(value).map(Spec::MeshMetric),
            Kind::MeshFaultInjection => policy(value).map(Spec::MeshFaultInjection),
            Kind::MeshCircuitBreaker => policy(value).map(Spec::MeshCircuitBreaker),
            Kind::MeshTrace => policy(value).map(Spec::MeshTrace),
        };
        parsed.map_err(|e| vec![e])
    }

    /// Canonical JSON of the spec: only the fields the user set.
    pub fn to_value(&self) -> Value {
        each_spec!(self, s => to_value(s))
    }

    /// Semantic validation; paths start with `spec`.
    pub fn validate(&self, meta: &Metadata) -> Vec<FieldError> {
        let _ = meta;
        let mut errs = crate::validate::Errors::default();
        match self {
            Spec::Mesh(s) => s.validate(&mut errs),
            Spec::Dataplane(s) => s.validate(&mut errs),
            Spec::MeshTrafficPermission(s) => s.validate(&mut errs),
            Spec::Site(s) => {
                s.validate(&mut errs);
                site::validate_labels(&meta.labels, &mut errs);
            }
            Spec::RouterAccess(s) => s.validate(&mut errs),
            Spec::AccessGrant(s) => {
                s.validate(&mut errs);
                grant::validate_labels(&meta.labels, &mut errs);
            }
            Spec::AccessToken(s) => s.validate(&mut errs),
            Spec::Link(s) => s.validate(&mut errs),
            Spec::Listener(s) => s.validate(&mut errs),
            Spec::MultiKeyListener(s) => s.validate(&mut errs),
            Spec::Connector(s) => s.validate(&mut errs),
            Spec::Secret(s) => s.validate(meta, &mut errs),
            Spec::MeshService(s) => s.validate(&mut errs),
            Spec::MeshHTTPRoute(s) => s.validate(&mut errs),
            Spec::MeshTCPRoute(s) => s.validate(&mut errs),
            Spec::MeshTimeout(s) => s.validate(&mut errs),
            Spec::MeshRetry(s) => s.validate(&mut errs),
            Spec::MeshRateLimit(s) => s.validate(&mut errs),
            Spec::MeshAccessLog(s) => s.validate(&mut errs),
            Spec::MeshLoadBalancingStrategy(s) => s.validate(&mut errs),
            Spec::MeshHealthCheck(s) => s.validate(&mut errs),
            Spec::MeshMetric(s) => s.validate(&mut errs),
            Spec::MeshFaultInjection(s) => s.validate(&mut errs),
            Spec::MeshCircuitBreaker(s) => s.validate(&mut errs),
            Spec::MeshTrace(s) => s.validate(&mut errs),
        }
        errs.into_vec()
    }

    /// A copy with secrets (AccessGrant and AccessToken `code`, Secret
    /// `tls.key`) replaced by [`REDACTED`].
    pub fn redacted(&self) -> Spec {
        match self {
            Spec::AccessGrant(s) => Spec::AccessGrant(s.redacted()),
            Spec::AccessToken(s) => Spec::AccessToken(s.redacted()),
            Spec::Secret(s) => Spec::Secret(s.redacted()),
            other => other.clone(),
        }
    }

    /// A copy with private keys (Secret `tls.key`) replaced by
    /// [`REDACTED`]: what every API read returns. Grant and token codes stay
    /// visible to the admin, as Skupper shows them to whoever may read the
    /// grant.
    pub fn without_private_keys(&self) -> Spec {
        match self {
            Spec::Secret(s) => Spec::Secret(s.redacted()),
            other => other.clone(),
        }
    }
}

/// Deserializes a spec; errors carry a path under `spec`.
fn parse<T: DeserializeOwned>(value: Value) -> Result<T, FieldError> {
    deserialize_at("spec", value)
}

/// Deserializes a policy spec; an unknown field that belongs one level
/// down gets a "did you mean" hint.
fn policy<T: DeserializeOwned>(value: Value) -> Result<T, FieldError> {
    unknown_field_hint::parse_policy(value)
}

/// Deserializes status details; errors carry a path under `status`.
fn parse_status<T: DeserializeOwned>(value: Value) -> Result<T, FieldError> {
    deserialize_at("status", value)
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("spec types serialize to JSON")
}

/// Kind-specific status fields.
///
/// Equality compares canonical JSON, so `None` equals a variant whose fields
/// are all unset (both print as no status details).
#[derive(Debug, Clone, Default)]
pub enum StatusDetails {
    /// No kind-specific status.
    #[default]
    None,
    /// Site: the network as this site sees it.
    Site(SiteStatus),
    /// RouterAccess: the endpoints it publishes.
    RouterAccess(RouterAccessStatus),
    /// AccessGrant: where and how to redeem it. Holds a secret `code`.
    AccessGrant(AccessGrantStatus),
    /// AccessToken: whether it was redeemed.
    AccessToken(AccessTokenStatus),
    /// Link: who is on the other end.
    Link(LinkStatus),
    /// Dataplane: its proxy's connection and certificate.
    Dataplane(DataplaneStatus),
    /// Listener: whether a Connector serves its key.
    Listener(ListenerStatus),
    /// MultiKeyListener: which of its keys are reachable.
    MultiKeyListener(MultiKeyListenerStatus),
    /// Connector: whether a Listener uses its key; selected Dataplanes.
    Connector(ConnectorStatus),
    /// MeshService: the Dataplanes it selects.
    MeshService(MeshServiceStatus),
    /// Mesh: the virtual IPs of its destinations.
    Mesh(MeshStatus),
}

// === impl StatusDetails ===

impl StatusDetails {
    /// Parses the kind-specific part of `status` (everything but `conditions`).
    /// Paths start with `status`; unknown fields are errors.
    pub fn from_value(kind: Kind, value: Value) -> Result<StatusDetails, Vec<FieldError>> {
        if value.is_null() || value.as_object().is_some_and(|o| o.is_empty()) {
            return Ok(StatusDetails::None);
        }
        let parsed = match kind {
            Kind::Site => parse_status(value).map(StatusDetails::Site),
            Kind::RouterAccess => parse_status(value).map(StatusDetails::RouterAccess),
            Kind::AccessGrant => parse_status(value).map(StatusDetails::AccessGrant),
            Kind::AccessToken => parse_status(value).map(StatusDetails::AccessToken),
            Kind::Link => parse_status(value).map(StatusDetails::Link),
            Kind::Dataplane => parse_status(value).map(StatusDetails::Dataplane),
            Kind::Listener => parse_status(value).map(StatusDetails::Listener),
            Kind::MultiKeyListener => parse_status(value).map(StatusDetails::MultiKeyListener),
            Kind::Connector => parse_status(value).map(StatusDetails::Connector),
            Kind::MeshService => parse_status(value).map(StatusDetails::MeshService),
            Kind::Mesh => parse_status(value).map(StatusDetails::Mesh),
            _ => {
                let fields = value
                    .as_object()
                    .map(|o| o.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default();
                return Err(match fields.first() {
                    Some(f) => vec![FieldError::new(
                        format!("status.{f}"),
                        format!("unknown field; a {kind} status has only conditions"),
                    )],
                    None => vec![FieldError::new("status", "must be a mapping")],
                });
            }
        };
        parsed.map_err(|e| vec![e])
    }

    /// Canonical JSON of the details (an object; empty for none).
    pub fn to_value(&self) -> Value {
        match self {
            StatusDetails::None => Value::Object(Default::default()),
            StatusDetails::Site(s) => to_value(s),
            StatusDetails::RouterAccess(s) => to_value(s),
            StatusDetails::AccessGrant(s) => to_value(s),
            StatusDetails::AccessToken(s) => to_value(s),
            StatusDetails::Link(s) => to_value(s),
            StatusDetails::Dataplane(s) => to_value(s),
            StatusDetails::Listener(s) => to_value(s),
            StatusDetails::MultiKeyListener(s) => to_value(s),
            StatusDetails::Connector(s) => to_value(s),
            StatusDetails::MeshService(s) => to_value(s),
            StatusDetails::Mesh(s) => to_value(s),
        }
    }

    /// A copy with secrets (the AccessGrant `code`) replaced by [`REDACTED`].
    pub fn redacted(&self) -> StatusDetails {
        match self {
            StatusDetails::AccessGrant(s) => StatusDetails::AccessGrant(s.redacted()),
            other => other.clone(),
        }
    }

    /// The Dataplane details, if these are.
    pub fn as_dataplane(&self) -> Option<&DataplaneStatus> {
        match self {
            StatusDetails::Dataplane(s) => Some(s),
            _ => None,
        }
    }

    /// The Mesh details, if these are.
    pub fn as_mesh(&self) -> Option<&MeshStatus> {
        match self {
            StatusDetails::Mesh(s) => Some(s),
            _ => None,
        }
    }

    /// The Site details, if these are.
    pub fn as_site(&self) -> Option<&SiteStatus> {
        match self {
            StatusDetails::Site(s) => Some(s),
            _ => None,
        }
    }

    /// The Link details, if these are.
    pub fn as_link(&self) -> Option<&LinkStatus> {
        match self {
            StatusDetails::Link(s) => Some(s),
            _ => None,
        }
    }

    /// The AccessToken details, if these are.
    pub fn as_access_token(&self) -> Option<&AccessTokenStatus> {
        match self {
            StatusDetails::AccessToken(s) => Some(s),
            _ => None,
        }
    }

    /// The AccessGrant details, if these are.
    pub fn as_access_grant(&self) -> Option<&AccessGrantStatus> {
        match self {
            StatusDetails::AccessGrant(s) => Some(s),
            _ => None,
        }
    }
}

impl PartialEq for StatusDetails {
    fn eq(&self, other: &Self) -> bool {
        self.to_value() == other.to_value()
    }
}
