//! The RouteConfiguration of an HTTP outbound: MeshHTTPRoute rules, then
//! the destination itself, each route with its MeshTimeout and MeshRetry.
//!
//! Owns route order (Gateway API precedence, one route per match, then
//! the `default` route), where each route sends requests (the
//! destination, or `backendRefs` as weighted clusters), and which extra
//! clusters a sidecar therefore needs ([`Backend`]). It never builds the
//! clusters themselves (`sidecar`, `mesh_service`).

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteAction, RouteConfiguration, WeightedCluster, route,
    route_action, weighted_cluster::ClusterWeight,
};
use envoy_types::pb::google::protobuf::UInt32Value;
use meshlink_api::Resource;
use meshlink_api::spec::{
    HttpRouteRule, RouteBackendRef, Tags, TargetRefKind, TcpRuleConf, TimeoutDefaults,
};

use super::http::{self, kuma_duration, or_default};
use super::policies::{Destination, OutboundPolicies};
use super::protocol::Protocol;
use super::route_match::{self, precedence};
use super::{MeshView, load_balancing, names, retry};

/// A cluster a route sends to besides its listener's destination; the
/// sidecar must emit it (and its load assignment).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Backend {
    /// A `kuma.io/service`.
    Service(String),
    /// A port of a MeshService.
    MeshService(String, u16),
    /// The inbounds of a `kuma.io/service` that carry these tags too
    /// (Kuma's `MeshServiceSubset`).
    Subset(String, Tags),
}

// === impl Backend ===

impl Backend {
    pub(super) fn cluster(&self) -> String {
        match self {
            Backend::Service(s) => names::service_cluster(s),
            Backend::MeshService(n, p) => names::mesh_service_cluster(n, *p),
            Backend::Subset(s, tags) => names::subset_cluster(s, tags),
        }
    }

    /// The backend a route's `backendRef` names, if meshlink can reach it:
    /// a `MeshService` with a name (a MeshService port when it names a
    /// port of one, else the `kuma.io/service` of that name), or a
    /// `MeshServiceSubset` (a `kuma.io/service` and tags; without tags,
    /// the whole service).
    pub(super) fn of(view: &MeshView, r: &RouteBackendRef) -> Option<Backend> {
        let name = r.name.clone()?;
        match r.kind {
            TargetRefKind::MeshService => match r.port {
                Some(p) if view.mesh_service(&name).is_some() => {
                    Some(Backend::MeshService(name, p.get()))
                }
                _ => Some(Backend::Service(name)),
            },
            TargetRefKind::MeshServiceSubset if r.tags.is_empty() => Some(Backend::Service(name)),
            TargetRefKind::MeshServiceSubset => Some(Backend::Subset(name, r.tags.clone())),
            _ => None,
        }
    }
}

/// Every backend a MeshHTTPRoute or MeshTCPRoute selecting Dataplane
/// `name` may send to (`backendRefs` and mirrors), whatever the
/// destination: what its routes can name, a superset of what they do
/// name. The hub indexes the proxy under them, so their endpoint changes
/// reach it.
pub(crate) fn route_backends(view: &MeshView, name: &str) -> BTreeSet<Backend> {
    let Some(dp) = view.dataplane_resource(name) else {
        return BTreeSet::new();
    };
    view.policies()
        .iter()
        .filter(|p| {
            meshlink_api::policy::selects_dataplane(
                &p.input.target_ref,
                name,
                dp.labels(),
                &dp.spec,
            )
        })
        .flat_map(|p| backend_refs(&p.resource))
        .filter_map(|r| Backend::of(view, r))
        .collect()
}

/// Whether a MeshHTTPRoute or MeshTCPRoute of `view` names a
/// `MeshServiceSubset` of `service` (then the tags of that service's
/// inbounds decide its endpoints).
pub(crate) fn routes_to_subsets_of(view: &MeshView, service: &str) -> bool {
    view.policies()
        .iter()
        .flat_map(|p| backend_refs(&p.resource))
        .any(|r| r.kind == TargetRefKind::MeshServiceSubset && r.name.as_deref() == Some(service))
}

/// Every `backendRef` a MeshHTTPRoute (its rules' backends and mirrors)
/// or a MeshTCPRoute (its rules' backends) names; none for other kinds.
fn backend_refs(r: &Resource) -> impl Iterator<Item = &RouteBackendRef> {
    let http = r.spec.as_mesh_http_route().into_iter();
    let http = http.flat_map(|spec| &spec.to).flat_map(|to| &to.rules);
    let http = http.flat_map(|rule| {
        let conf = &rule.default_;
        let mirrors = conf
            .filters
            .iter()
            .flatten()
            .filter_map(|f| f.request_mirror.as_ref().map(|m| &m.backend_ref));
        conf.backend_refs.iter().flatten().chain(mirrors)
    });
    let tcp = r.spec.as_mesh_tcp_route().into_iter();
    let tcp = tcp
        .flat_map(|spec| &spec.to)
        .flat_map(|to| &to.rules)
        .flat_map(|rule| &rule.default_.backend_refs);
    http.chain(tcp)
}

/// What an HTTP outbound listener routes to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Outbound<'a> {
    /// The destination (as policies name it).
    pub(super) dest: Destination<'a>,
    /// Its cluster (the `default` route's).
    pub(super) cluster: &'a str,
    /// Its protocol (for the retry block).
    pub(super) protocol: Protocol,
    /// The client is proxyless gRPC: it reads a route's deadline from
    /// `max_stream_duration` (gRFC A31), not from `timeout`.
    pub(super) proxyless: bool,
}

/// The RouteConfiguration `name` of an HTTP outbound to `out`; the
/// clusters its routes need besides `out.cluster` go into `backends`.
pub(super) fn outbound_routes(
    name: String,
    view: &MeshView,
    policies: &OutboundPolicies,
    out: Outbound<'_>,
    backends: &mut BTreeSet<Backend>,
) -> RouteConfiguration {
    let mut routes: Vec<(Route, _)> = Vec::new();
    let rules = policies.routes(out.dest);
    // A MeshHTTPRoute wins over a MeshTCPRoute (Kuma's rule); without
    // one, a MeshTCPRoute's backends serve every request.
    let tcp = match rules.is_empty() {
        true => policies.tcp_route(out.dest),
        false => None,
    };
    for rule in rules {
        for m in &rule.rule.matches {
            let mut r = rule_route(view, policies, out, &rule.policy, &rule.rule, backends);
            r.r#match = Some(route_match::route_match(m));
            routes.push((r, precedence(m)));
        }
    }
    routes.sort_by(|a, b| a.1.cmp(&b.1));
    let mut routes: Vec<Route> = routes.into_iter().map(|(r, _)| r).collect();
    let mut default = Route {
        name: "default".to_owned(),
        r#match: Some(http::prefix_all()),
        ..Default::default()
    };
    let cluster_specifier = match tcp {
        Some(TcpRuleConf { backend_refs }) if !backend_refs.is_empty() => {
            weighted(view, &backend_refs, backends)
        }
        _ => Some(route_action::ClusterSpecifier::Cluster(
            out.cluster.to_owned(),
        )),
    };
    default.action = Some(match cluster_specifier {
        Some(cluster_specifier) => {
            let mut action = RouteAction {
                cluster_specifier: Some(cluster_specifier),
                ..Default::default()
            };
            policy_fields(policies, out, None, &mut action);
            route::Action::Route(action)
        }
        None => no_backend(),
    });
    routes.push(default);
    http::route_configuration(name, out.dest.name, routes)
}

/// The route of one rule (without its match).
fn rule_route(
    view: &MeshView,
    policies: &OutboundPolicies,
    out: Outbound<'_>,
    policy: &str,
    rule: &HttpRouteRule,
    backends: &mut BTreeSet<Backend>,
) -> Route {
    let filters = rule.default_.filters.as_deref().unwrap_or_default();
    let mut r = Route {
        name: policy.to_owned(),
        ..Default::default()
    };
    route_match::apply_header_filters(filters, &mut r);
    if let Some(redirect) = filters.iter().find_map(|f| f.request_redirect.as_ref()) {
        r.action = Some(route::Action::Redirect(route_match::redirect(redirect)));
        return r;
    }
    let cluster_specifier = match &rule.default_.backend_refs {
        None => Some(route_action::ClusterSpecifier::Cluster(
            out.cluster.to_owned(),
        )),
        Some(refs) => weighted(view, refs, backends),
    };
    let Some(cluster_specifier) = cluster_specifier else {
        r.action = Some(no_backend());
        return r;
    };
    let mut action = RouteAction {
        cluster_specifier: Some(cluster_specifier),
        ..Default::default()
    };
    for f in filters {
        if let Some(u) = &f.url_rewrite {
            route_match::rewrite(u, &mut action);
        }
        if let Some(m) = &f.request_mirror
            && let Some(b) = Backend::of(view, &m.backend_ref)
        {
            action
                .request_mirror_policies
                .push(route_match::mirror(m, b.cluster()));
            backends.insert(b);
        }
    }
    policy_fields(policies, out, Some(policy), &mut action);
    r.action = Some(route::Action::Route(action));
    r
}

/// What a route without a reachable backend (or with all weights 0)
/// does: Gateway API answers 500.
fn no_backend() -> route::Action {
    route::Action::DirectResponse(DirectResponseAction {
        status: 500,
        ..Default::default()
    })
}

/// Weighted clusters of `refs`; `None` when no reachable backend has a
/// weight.
fn weighted(
    view: &MeshView,
    refs: &[RouteBackendRef],
    backends: &mut BTreeSet<Backend>,
) -> Option<route_action::ClusterSpecifier> {
    let mut clusters = Vec::new();
    for r in refs {
        let Some(b) = Backend::of(view, r) else {
            continue;
        };
        clusters.push(ClusterWeight {
            name: b.cluster(),
            weight: Some(UInt32Value {
                value: r.effective_weight(),
            }),
            ..Default::default()
        });
        backends.insert(b);
    }
    let total: u64 = clusters
        .iter()
        .map(|c| u64::from(c.weight.as_ref().map_or(0, |w| w.value)))
        .sum();
    (total > 0).then(|| {
        route_action::ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters,
            ..Default::default()
        })
    })
}

/// MeshTimeout and MeshRetry of a route from MeshHTTPRoute `route` (or
/// the `default` route).
fn policy_fields(
    policies: &OutboundPolicies,
    out: Outbound<'_>,
    route: Option<&str>,
    action: &mut RouteAction,
) {
    let timeouts = policies.timeout(out.dest, route);
    let http = timeouts.http.as_ref();
    action.timeout = Some(http::request_timeout(&timeouts));
    action.idle_timeout = Some(or_default(
        http.and_then(|h| h.stream_idle_timeout.as_deref()),
        TimeoutDefaults::KUMA.stream_idle_timeout,
    ));
    action.max_stream_duration = kuma_duration(http.and_then(|h| h.max_stream_duration.as_deref()))
        .map(|d| route_action::MaxStreamDuration {
            max_stream_duration: Some(d),
            ..Default::default()
        });
    // A proxyless gRPC client takes its deadline from max_stream_duration,
    // and only from a policy that sets one: Kuma's 15 s default request
    // timeout would otherwise end every long stream.
    if out.proxyless
        && action.max_stream_duration.is_none()
        && let Some(d) = kuma_duration(http.and_then(|h| h.request_timeout.as_deref()))
    {
        action.max_stream_duration = Some(route_action::MaxStreamDuration {
            max_stream_duration: Some(d),
            ..Default::default()
        });
    }
    let retries = policies.retry(out.dest, route);
    action.retry_policy = retry::retry_policy(retries.as_ref(), out.protocol);
    action.hash_policy = load_balancing::hash_policies(policies.load_balancing(out.dest).as_ref());
}
