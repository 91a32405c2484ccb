//! The routing and L7 policies of a mesh (MeshHTTPRoute, MeshTCPRoute,
//! MeshTimeout, MeshRetry, MeshRateLimit, MeshCircuitBreaker, MeshHealthCheck,
//! MeshFaultInjection's `to[]`) as the translator reads them for one proxy.
//!
//! Owns which policies select a Dataplane or an inbound, and which folded
//! entries apply to one destination or route. Folding itself is the
//! policy engine's (`meshlink_api::policy`, Kuma's merge semantics); this
//! module never reimplements it, and never emits Envoy resources.

use std::collections::BTreeMap;

use meshlink_api::policy::{self, Entry, PolicyInput, RuleSet, Section};
use meshlink_api::spec::{
    AccessLogConf, CircuitBreakerConf, DataplaneSpec, FaultConf, HealthCheckConf, HttpFault,
    HttpLimit, HttpRouteRule, InboundTarget, LoadBalancingConf, RateLimitConf, RetryConf,
    TargetRef, TargetRefKind, TcpLimit, TcpRouteRule, TcpRuleConf, TimeoutConf,
};
use meshlink_api::{Kind, Resource};
use serde_json::Value;

/// One stored policy and its engine input (converted once, when the view
/// takes it, not once per translation).
#[derive(Debug, Clone)]
pub(crate) struct ViewPolicy {
    pub(crate) resource: Resource,
    pub(crate) input: PolicyInput,
}

/// Whether the view keeps policies of `kind`.
pub(crate) fn kept(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::MeshHTTPRoute
            | Kind::MeshTCPRoute
            | Kind::MeshTimeout
            | Kind::MeshRetry
            | Kind::MeshRateLimit
            | Kind::MeshAccessLog
            | Kind::MeshLoadBalancingStrategy
            | Kind::MeshHealthCheck
            | Kind::MeshFaultInjection
            | Kind::MeshCircuitBreaker
            | Kind::MeshTrace
            | Kind::MeshMetric
    )
}

/// The `default` of every single-item policy of `kind` (one top-level
/// `targetRef`, no `to`/`from`: MeshTrace, MeshMetric) that selects
/// Dataplane `name`, folded least specific first
/// ([`policy::compare_policies`]) with JSON merge patch, as Kuma folds
/// single-item policies; `Null` when none selects it.
pub(crate) fn single_item_default(
    policies: &[ViewPolicy],
    kind: Kind,
    name: &str,
    labels: &BTreeMap<String, String>,
    dp: &DataplaneSpec,
) -> Value {
    let mut selected: Vec<&PolicyInput> = policies
        .iter()
        .map(|p| &p.input)
        .filter(|p| p.kind == kind && !p.is_shadow())
        .filter(|p| policy::selects_dataplane(&p.target_ref, name, labels, dp))
        .collect();
    selected.sort_by(|a, b| policy::compare_policies(a, b));
    let mut conf = Value::Null;
    for p in selected {
        if let Some(d) = p.spec.get("default") {
            policy::merge_patch::apply(&mut conf, d);
        }
    }
    conf
}

// === impl ViewPolicy ===

impl ViewPolicy {
    /// `r` as the view keeps it; `None` for kinds it does not keep.
    pub(crate) fn of(r: Resource) -> Option<Self> {
        if !kept(r.kind()) {
            return None;
        }
        let input = PolicyInput::from_resource(&r)?;
        Some(Self { resource: r, input })
    }
}

/// A destination as `to[].targetRef` entries name it: a `kuma.io/service`
/// (`port` `None`) or a MeshService port (its number and name).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Destination<'a> {
    pub(crate) name: &'a str,
    pub(crate) port: Option<(u16, Option<&'a str>)>,
}

/// The `to[]` rules of every L7 kind for one Dataplane.
#[derive(Debug)]
pub(crate) struct OutboundPolicies {
    routes: RuleSet,
    tcp_routes: RuleSet,
    timeouts: RuleSet,
    retries: RuleSet,
    access_logs: RuleSet,
    load_balancing: RuleSet,
    circuit_breakers: RuleSet,
    health_checks: RuleSet,
    faults: RuleSet,
}

/// A MeshHTTPRoute rule for one destination, with the policy it came from.
#[derive(Debug, Clone)]
pub(crate) struct RouteRule {
    /// The MeshHTTPRoute that set the rule's `matches`.
    pub(crate) policy: String,
    /// The rule, its `default` folded across policies.
    pub(crate) rule: HttpRouteRule,
}

// === impl OutboundPolicies ===

impl OutboundPolicies {
    /// The folded `to[]` rules of the policies of `policies` that select
    /// Dataplane `name`.
    pub(crate) fn new(
        policies: &[ViewPolicy],
        name: &str,
        labels: &BTreeMap<String, String>,
        dp: &DataplaneSpec,
    ) -> Self {
        let selected: Vec<PolicyInput> = policies
            .iter()
            .map(|p| &p.input)
            .filter(|p| policy::selects_dataplane(&p.target_ref, name, labels, dp))
            .cloned()
            .collect();
        let fold = |kind| policy::merge(kind, &selected, Section::To).applied;
        Self {
            routes: fold(Kind::MeshHTTPRoute),
            tcp_routes: fold(Kind::MeshTCPRoute),
            timeouts: fold(Kind::MeshTimeout),
            retries: fold(Kind::MeshRetry),
            access_logs: fold(Kind::MeshAccessLog),
            load_balancing: fold(Kind::MeshLoadBalancingStrategy),
            circuit_breakers: fold(Kind::MeshCircuitBreaker),
            health_checks: fold(Kind::MeshHealthCheck),
            faults: fold(Kind::MeshFaultInjection),
        }
    }

    /// The MeshHTTPRoute rules for `dest`, highest priority first (the
    /// engine's order).
    pub(crate) fn routes(&self, dest: Destination<'_>) -> Vec<RouteRule> {
        let Some(merged) = self.routes.merged_where(|e| applies(e, dest, None)) else {
            return Vec::new();
        };
        let rules = merged.conf.get("rules").and_then(Value::as_array);
        rules
            .into_iter()
            .flatten()
            .enumerate()
            .filter_map(|(k, raw)| {
                let rule: HttpRouteRule = serde_json::from_value(raw.clone()).ok()?;
                let policy = merged
                    .origins
                    .get(&format!("/rules/{k}/matches"))
                    .map(|o| o.policy.clone())?;
                Some(RouteRule { policy, rule })
            })
            .collect()
    }

    /// The MeshTCPRoute rule for `dest` (its first rule, folded across
    /// policies); `None` when no MeshTCPRoute routes it.
    pub(crate) fn tcp_route(&self, dest: Destination<'_>) -> Option<TcpRuleConf> {
        typed::<TcpRouteRule>(&self.tcp_routes, |e| applies(e, dest, None)).map(|r| r.default_)
    }

    /// The MeshTimeout conf for `dest` (and its route from MeshHTTPRoute
    /// `route`, if any); empty when none applies.
    pub(crate) fn timeout(&self, dest: Destination<'_>, route: Option<&str>) -> TimeoutConf {
        typed(&self.timeouts, |e| applies(e, dest, route)).unwrap_or_default()
    }

    /// The MeshRetry conf for `dest` (and `route`); `None` when no
    /// MeshRetry applies (Kuma's default policy then stands in).
    pub(crate) fn retry(&self, dest: Destination<'_>, route: Option<&str>) -> Option<RetryConf> {
        typed(&self.retries, |e| applies(e, dest, route))
    }

    /// The MeshLoadBalancingStrategy conf for `dest`; `None` when none
    /// applies.
    pub(crate) fn load_balancing(&self, dest: Destination<'_>) -> Option<LoadBalancingConf> {
        typed(&self.load_balancing, |e| applies(e, dest, None))
    }

    /// The MeshAccessLog conf for `dest`; `None` when none applies.
    pub(crate) fn access_log(&self, dest: Destination<'_>) -> Option<AccessLogConf> {
        typed(&self.access_logs, |e| applies(e, dest, None))
    }

    /// The MeshCircuitBreaker conf for the Cluster of `dest`; `None` when
    /// none applies.
    pub(crate) fn circuit_breaker(&self, dest: Destination<'_>) -> Option<CircuitBreakerConf> {
        typed(&self.circuit_breakers, |e| applies(e, dest, None))
    }

    /// The MeshHealthCheck conf for the Cluster of `dest`; `None` when
    /// none applies.
    pub(crate) fn health_check(&self, dest: Destination<'_>) -> Option<HealthCheckConf> {
        typed(&self.health_checks, |e| applies(e, dest, None))
    }

    /// MeshFaultInjection's `to[]` faults on calls to `dest`, in the order
    /// they apply (the caller's own faults: a proxyless client's); empty
    /// when none applies.
    pub(crate) fn faults(&self, dest: Destination<'_>) -> Vec<HttpFault> {
        typed::<FaultConf>(&self.faults, |e| applies(e, dest, None))
            .and_then(|c| c.http)
            .unwrap_or_default()
    }
}

fn typed<T: serde::de::DeserializeOwned>(
    set: &RuleSet,
    applies: impl Fn(&Entry) -> bool,
) -> Option<T> {
    set.merged_where(applies)?.typed().ok()
}

/// Whether a `to[]` entry applies to `dest` (and to the route from
/// MeshHTTPRoute `route`): `Mesh`, the destination's `MeshService`
/// (its port when `sectionName` is set), or that MeshHTTPRoute.
fn applies(e: &Entry, dest: Destination<'_>, route: Option<&str>) -> bool {
    let Some(t) = &e.target_ref else {
        return false;
    };
    match t.kind {
        TargetRefKind::Mesh => true,
        TargetRefKind::MeshService => {
            t.name.as_deref() == Some(dest.name) && section_matches(t, dest)
        }
        TargetRefKind::MeshHTTPRoute => route.is_some() && t.name.as_deref() == route,
        _ => false,
    }
}

fn section_matches(t: &TargetRef, dest: Destination<'_>) -> bool {
    match (&t.section_name, dest.port) {
        (None, _) => true,
        (Some(s), Some((port, name))) => *s == port.to_string() || Some(s.as_str()) == name,
        (Some(_), None) => false,
    }
}

/// The MeshTimeout conf of an inbound: the `from[]` entries for every
/// client (`Mesh`), then the `rules[]` entries without `matches`, of the
/// MeshTimeouts whose top-level `targetRef` selects it. Entries for some
/// clients only are not applied (one route serves every client).
pub(crate) fn inbound_timeout(policies: &[ViewPolicy], inbound: &InboundTarget<'_>) -> TimeoutConf {
    serde_json::from_value(inbound_conf(Kind::MeshTimeout, policies, inbound)).unwrap_or_default()
}

/// The MeshCircuitBreaker conf of an inbound's local application
/// cluster, folded as [`inbound_timeout`] folds MeshTimeouts (`from[]`
/// and `rules[]`); `None` when none applies.
pub(crate) fn inbound_circuit_breaker(
    policies: &[ViewPolicy],
    inbound: &InboundTarget<'_>,
) -> Option<CircuitBreakerConf> {
    let conf = inbound_conf(Kind::MeshCircuitBreaker, policies, inbound);
    if conf.is_null() {
        return None;
    }
    serde_json::from_value(conf).ok()
}

/// The MeshRateLimit `local.http` limit of an inbound, folded as
/// [`inbound_timeout`] folds MeshTimeouts; `None` when none applies or the
/// folded limit is `disabled`.
pub(crate) fn inbound_http_rate_limit(
    policies: &[ViewPolicy],
    inbound: &InboundTarget<'_>,
) -> Option<HttpLimit> {
    let conf: RateLimitConf =
        serde_json::from_value(inbound_conf(Kind::MeshRateLimit, policies, inbound)).ok()?;
    conf.local?
        .http
        .filter(|h| h.disabled != Some(true) && h.request_rate.is_some())
}

/// The MeshRateLimit `local.tcp` limit of an inbound, folded as
/// [`inbound_http_rate_limit`]; `None` when none applies or the folded
/// limit is `disabled`.
pub(crate) fn inbound_tcp_rate_limit(
    policies: &[ViewPolicy],
    inbound: &InboundTarget<'_>,
) -> Option<TcpLimit> {
    let conf: RateLimitConf =
        serde_json::from_value(inbound_conf(Kind::MeshRateLimit, policies, inbound)).ok()?;
    conf.local?
        .tcp
        .filter(|t| t.disabled != Some(true) && t.connection_rate.is_some())
}

/// The MeshAccessLog conf of an inbound, folded as
/// [`inbound_timeout`] folds MeshTimeouts; `None` when none applies.
pub(crate) fn inbound_access_log(
    policies: &[ViewPolicy],
    inbound: &InboundTarget<'_>,
) -> Option<AccessLogConf> {
    serde_json::from_value(inbound_conf(Kind::MeshAccessLog, policies, inbound)).ok()
}

/// The merged inbound conf of `kind` for `inbound`: the `from[]` entries
/// for every client (`Mesh`), then the `rules[]` entries without
/// `matches`, of the policies whose top-level `targetRef` selects it.
fn inbound_conf(kind: Kind, policies: &[ViewPolicy], inbound: &InboundTarget<'_>) -> Value {
    let selected: Vec<PolicyInput> = policies
        .iter()
        .map(|p| &p.input)
        .filter(|p| p.kind == kind && p.target_ref.selects(inbound))
        .cloned()
        .collect();
    if selected.is_empty() {
        return Value::Null;
    }
    let from = policy::merge(kind, &selected, Section::From).applied;
    let rules = policy::merge(kind, &selected, Section::Rules).applied;
    let mut conf = Value::Null;
    let everyone = |e: &Entry| {
        e.target_ref
            .as_ref()
            .is_some_and(|t| t.kind == TargetRefKind::Mesh)
    };
    for (set, pick) in [
        (&from, &everyone as &dyn Fn(&Entry) -> bool),
        (&rules, &|e: &Entry| e.key.is_null()),
    ] {
        if let Some(m) = set.merged_where(pick) {
            policy::merge_patch::apply(&mut conf, &m.conf);
        }
    }
    conf
}
