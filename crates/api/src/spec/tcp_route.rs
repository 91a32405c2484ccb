//! The MeshTCPRoute kind: Kuma's weighted TCP routing per destination.
//!
//! Owns the spec's shape (`targetRef`, `to[]{targetRef, rules[]{default{
//! backendRefs}}}`) and its validation. A MeshHTTPRoute for the same
//! destination wins over it (Kuma's rule, applied by the translator). How
//! several MeshTCPRoutes combine belongs to `crate::policy`; meshlink-proxy
//! does not route by them yet.

use serde::{Deserialize, Serialize};

use super::policy_target::{self, ROUTE_TO_KINDS, ROUTE_TOP_KINDS};
use super::route_backend::{self, RouteBackendRef};
use super::target_ref::TargetRef;
use crate::validate::Errors;

/// `spec` of a MeshTCPRoute.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshTcpRouteSpec {
    /// The proxies whose outbound traffic is routed (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Routes per destination.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<TcpRouteTo>,
}

/// One destination and its rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpRouteTo {
    /// The destination.
    pub target_ref: TargetRef,
    /// At most one rule (Kuma reads only the first); none sends
    /// everything to `targetRef` itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<TcpRouteRule>,
}

/// One rule: where connections go.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpRouteRule {
    /// The backends.
    #[serde(rename = "default")]
    pub default_: TcpRuleConf,
}

/// `rules[].default`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpRuleConf {
    /// Weighted backends.
    #[serde(default)]
    pub backend_refs: Vec<RouteBackendRef>,
}

// === impl MeshTcpRouteSpec ===

impl MeshTcpRouteSpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), ROUTE_TOP_KINDS);
        policy_target::validate_to_list(
            errs,
            self.to.iter().map(|t| &t.target_ref),
            ROUTE_TO_KINDS,
        );
        for (i, to) in self.to.iter().enumerate() {
            let at = format!("spec.to[{i}].rules");
            if to.rules.len() > 1 {
                errs.add(
                    format!("{at}[1]"),
                    format!(
                        "Kuma uses only the first rule and ignores the other {}; put every \
                         backendRef in one rule",
                        to.rules.len() - 1
                    ),
                );
            }
            for (j, rule) in to.rules.iter().enumerate() {
                let refs = &rule.default_.backend_refs;
                let path = format!("{at}[{j}].default.backendRefs");
                if refs.is_empty() {
                    errs.add(&path, "at least one backendRef is required");
                }
                route_backend::validate_list(errs, &path, refs);
            }
        }
    }
}
