//! The MeshHTTPRoute kind: Kuma's HTTP routing (matches, filters and
//! weighted backends per destination).
//!
//! Owns the spec's shape (`targetRef`, `to[]{targetRef, rules[], hostnames}`)
//! and its validation; matches and filters live in `http_route_match` and
//! `http_route_filter`. How routes of several policies combine (rules
//! merged by identical `matches`) belongs to `crate::policy`; meshlink-proxy
//! does not route by them yet.

use serde::{Deserialize, Serialize};

use super::http_route_filter::Filter;
use super::http_route_match::HttpRouteMatch;
use super::policy_target::{self, ROUTE_TO_KINDS, ROUTE_TOP_KINDS};
use super::route_backend::{self, RouteBackendRef};
use super::target_ref::TargetRef;
use crate::validate::Errors;

/// `spec` of a MeshHTTPRoute.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshHttpRouteSpec {
    /// The proxies whose outbound traffic is routed (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Routes per destination.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<HttpRouteTo>,
}

/// One destination and its rules.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteTo {
    /// The destination: a `MeshService` (or Kuma's `MeshExternalService`,
    /// `MeshMultiZoneService`).
    pub target_ref: TargetRef,
    /// Rules, the first matching one wins (after Gateway API ordering).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<HttpRouteRule>,
    /// Kuma's MeshGateway-only host filter; refused by validation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hostnames: Vec<String>,
}

/// One rule: which requests, and what to do with them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteRule {
    /// Any one of these selects a request (at least one).
    pub matches: Vec<HttpRouteMatch>,
    /// Filters and backends, merged across policies for identical matches.
    #[serde(rename = "default")]
    pub default_: HttpRuleConf,
}

/// `rules[].default`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRuleConf {
    /// Filters applied in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filters: Option<Vec<Filter>>,
    /// Weighted backends; the destination itself when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_refs: Option<Vec<RouteBackendRef>>,
}

// === impl MeshHttpRouteSpec ===

impl MeshHttpRouteSpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), ROUTE_TOP_KINDS);
        policy_target::validate_to_list(
            errs,
            self.to.iter().map(|t| &t.target_ref),
            ROUTE_TO_KINDS,
        );
        for (i, to) in self.to.iter().enumerate() {
            let at = format!("spec.to[{i}]");
            if !to.hostnames.is_empty() {
                errs.add(
                    format!("{at}.hostnames"),
                    "must not be defined: hostnames apply only to a MeshGateway (as in Kuma), \
                     which meshlink does not have",
                );
            }
            for (j, rule) in to.rules.iter().enumerate() {
                rule.validate(errs, &format!("{at}.rules[{j}]"));
            }
        }
    }
}

// === impl HttpRouteRule ===

impl HttpRouteRule {
    fn validate(&self, errs: &mut Errors, at: &str) {
        if self.matches.is_empty() {
            errs.add(
                format!("{at}.matches"),
                "at least one match is required, e.g. matches: [{path: {type: PathPrefix, value: /}}]",
            );
        }
        for (i, m) in self.matches.iter().enumerate() {
            m.validate(errs, &format!("{at}.matches[{i}]"));
        }
        let conf = &self.default_;
        for (i, f) in conf.filters.iter().flatten().enumerate() {
            f.validate(errs, &format!("{at}.default.filters[{i}]"), &self.matches);
        }
        if let Some(refs) = &conf.backend_refs {
            route_backend::validate_list(errs, &format!("{at}.default.backendRefs"), refs);
        }
    }
}
