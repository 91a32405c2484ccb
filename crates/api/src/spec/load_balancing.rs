//! The MeshLoadBalancingStrategy kind: how a caller's sidecar picks an
//! endpoint of a destination (`to[]`): `RoundRobin`, `LeastRequest`
//! (`choiceCount`, `activeRequestBias`), `RingHash` and `Maglev` (with
//! `hashPolicies` on a header, a cookie, the connection's source address, a
//! query parameter or filter state) or `Random`; and `localityAwareness`.
//!
//! Owns the spec's shape and its validation (Kuma's bounds: ring sizes up
//! to 8M, a prime Maglev table up to 5,000,011, `choiceCount` at least 2).
//! How policies combine belongs to `crate::policy`; what the proxy does is
//! the translator's (`meshlink_xds::translate`).

use serde::{Deserialize, Serialize};

use super::kuma_duration;
use super::policy_target::{self, ROUTE_TOP_KINDS};
use super::target_ref::TargetRef;
use crate::validate::Errors;

/// The largest ring (Envoy's limit).
const MAX_RING: u32 = 8_000_000;
/// The largest Maglev table (Envoy's limit).
const MAX_TABLE: u32 = 5_000_011;

/// `spec` of a MeshLoadBalancingStrategy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MeshLoadBalancingStrategySpec {
    /// The callers configured (default: the mesh).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<TargetRef>,
    /// Per set of destinations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub to: Vec<LoadBalancingTo>,
}

/// `to[]`: destinations and how to balance over them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancingTo {
    /// `Mesh`, a `MeshService`, ….
    pub target_ref: TargetRef,
    /// The configuration.
    #[serde(rename = "default", default)]
    pub default_: LoadBalancingConf,
}

/// `default`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancingConf {
    /// Prefer endpoints near the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locality_awareness: Option<serde_json::Value>,
    /// The algorithm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancer>,
}

/// `loadBalancer`: `type` names the algorithm; its block is optional.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LoadBalancer {
    /// `RoundRobin`, `LeastRequest`, `RingHash`, `Random` or `Maglev`.
    #[serde(rename = "type")]
    pub type_: String,
    /// No settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_robin: Option<Empty>,
    /// `LeastRequest` settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub least_request: Option<LeastRequest>,
    /// `RingHash` settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_hash: Option<RingHash>,
    /// No settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub random: Option<Empty>,
    /// `Maglev` settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maglev: Option<Maglev>,
}

/// A block without fields.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// `leastRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeastRequest {
    /// Endpoints drawn per pick (2 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice_count: Option<u32>,
    /// How strongly requests in flight count against an endpoint (a
    /// decimal, as a string or a number; 1 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_request_bias: Option<serde_json::Value>,
}

/// `ringHash`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RingHash {
    /// `XXHash` (default) or `MurmurHash2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_function: Option<String>,
    /// The least ring size (1024 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ring_size: Option<u32>,
    /// The largest ring size (8M by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ring_size: Option<u32>,
    /// What a request's hash is made of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_policies: Option<Vec<HashPolicy>>,
}

/// `maglev`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Maglev {
    /// The lookup table's size, a prime (65,537 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_size: Option<u32>,
    /// What a request's hash is made of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash_policies: Option<Vec<HashPolicy>>,
}

/// One `hashPolicies[]` entry: `type` names the one block that is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HashPolicy {
    /// `Header`, `Cookie`, `Connection`, `SourceIP`, `QueryParameter` or
    /// `FilterState`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Stop at this policy when it produced a hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminal: Option<bool>,
    /// `{name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<Named>,
    /// `{name, ttl?, path?}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie: Option<Cookie>,
    /// `{sourceIP}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<Connection>,
    /// `{name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_parameter: Option<Named>,
    /// `{key}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter_state: Option<FilterState>,
}

/// A block with a name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Named {
    /// The header or query parameter.
    pub name: String,
}

/// `cookie`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Cookie {
    /// The cookie.
    pub name: String,
    /// When set, a cookie with this lifetime is made when missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    /// The made cookie's path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// `connection`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Connection {
    /// Hash the caller's address.
    #[serde(default, rename = "sourceIP", skip_serializing_if = "Option::is_none")]
    pub source_ip: Option<bool>,
}

/// `filterState`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FilterState {
    /// The filter state object's key.
    pub key: String,
}

// === impl MeshLoadBalancingStrategySpec ===

impl MeshLoadBalancingStrategySpec {
    pub(crate) fn validate(&self, errs: &mut Errors) {
        policy_target::validate_top(errs, self.target_ref.as_ref(), ROUTE_TOP_KINDS);
        policy_target::validate_to_entries(
            errs,
            &self.to,
            "[{targetRef: {kind: MeshService, name: backend}, default: {loadBalancer: {type: \
             RoundRobin}}}]",
            |e| &e.target_ref,
            |errs, e, at| {
                if let Some(lb) = &e.default_.load_balancer {
                    lb.validate(errs, &format!("{at}.loadBalancer"));
                }
            },
        );
    }
}

impl LoadBalancer {
    fn validate(&self, errs: &mut Errors, at: &str) {
        let blocks = [
            ("RoundRobin", "roundRobin", self.round_robin.is_some()),
            ("LeastRequest", "leastRequest", self.least_request.is_some()),
            ("RingHash", "ringHash", self.ring_hash.is_some()),
            ("Random", "random", self.random.is_some()),
            ("Maglev", "maglev", self.maglev.is_some()),
        ];
        let Some((_, own, _)) = blocks.iter().find(|(t, _, _)| *t == self.type_) else {
            errs.add(
                format!("{at}.type"),
                format!(
                    "{:?} is not a load balancer; use RoundRobin, LeastRequest, RingHash, Random \
                     or Maglev",
                    self.type_
                ),
            );
            return;
        };
        for (t, block, set) in blocks {
            if set && t != self.type_ {
                errs.add(
                    format!("{at}.{block}"),
                    format!("set, but type is {}: set {own} or nothing", self.type_),
                );
            }
        }
        if let Some(l) = &self.least_request {
            if l.choice_count.is_some_and(|c| c < 2) {
                errs.add(
                    format!("{at}.leastRequest.choiceCount"),
                    "must be at least 2",
                );
            }
            if let Some(b) = &l.active_request_bias
                && decimal(b).is_none_or(|v| v < 0.0)
            {
                errs.add(
                    format!("{at}.leastRequest.activeRequestBias"),
                    format!("{b} is not a decimal of 0 or more, e.g. \"1.3\""),
                );
            }
        }
        if let Some(r) = &self.ring_hash {
            let at = format!("{at}.ringHash");
            if let Some(f) = &r.hash_function
                && !["XXHash", "MurmurHash2"].contains(&f.as_str())
            {
                errs.add(
                    format!("{at}.hashFunction"),
                    format!("{f:?} is not a hash function; use XXHash or MurmurHash2"),
                );
            }
            for (name, v) in [
                ("minRingSize", r.min_ring_size),
                ("maxRingSize", r.max_ring_size),
            ] {
                if v.is_some_and(|v| v == 0 || v > MAX_RING) {
                    errs.add(format!("{at}.{name}"), "must be 1 to 8000000");
                }
            }
            if let (Some(min), Some(max)) = (r.min_ring_size, r.max_ring_size)
                && min > max
            {
                errs.add(
                    format!("{at}.minRingSize"),
                    format!("{min} is above maxRingSize {max}"),
                );
            }
            check_hash_policies(errs, &at, r.hash_policies.as_deref());
        }
        if let Some(m) = &self.maglev {
            let at = format!("{at}.maglev");
            if let Some(t) = m.table_size
                && (t > MAX_TABLE || !is_prime(t))
            {
                errs.add(
                    format!("{at}.tableSize"),
                    format!("{t} is not a prime up to 5000011 (e.g. 65537)"),
                );
            }
            check_hash_policies(errs, &at, m.hash_policies.as_deref());
        }
    }
}

fn check_hash_policies(errs: &mut Errors, at: &str, policies: Option<&[HashPolicy]>) {
    for (i, p) in policies.unwrap_or_default().iter().enumerate() {
        let at = format!("{at}.hashPolicies[{i}]");
        let blocks = [
            ("Header", "header", p.header.is_some()),
            ("Cookie", "cookie", p.cookie.is_some()),
            ("Connection", "connection", p.connection.is_some()),
            ("SourceIP", "connection", p.connection.is_some()),
            (
                "QueryParameter",
                "queryParameter",
                p.query_parameter.is_some(),
            ),
            ("FilterState", "filterState", p.filter_state.is_some()),
        ];
        let Some((_, own, present)) = blocks.iter().find(|(t, _, _)| *t == p.type_) else {
            errs.add(
                format!("{at}.type"),
                format!(
                    "{:?} is not a hash policy; use Header, Cookie, Connection, QueryParameter \
                     or FilterState",
                    p.type_
                ),
            );
            continue;
        };
        if !present {
            errs.add(
                format!("{at}.{own}"),
                format!("required when type is {}", p.type_),
            );
        }
        for (_, block, set) in blocks {
            if set && block != *own {
                errs.add(
                    format!("{at}.{block}"),
                    format!("set, but type is {}", p.type_),
                );
            }
        }
        let empty = |s: &str| s.is_empty();
        if p.header.as_ref().is_some_and(|h| empty(&h.name)) {
            errs.add(format!("{at}.header.name"), "required");
        }
        if p.query_parameter.as_ref().is_some_and(|q| empty(&q.name)) {
            errs.add(format!("{at}.queryParameter.name"), "required");
        }
        if let Some(c) = &p.cookie {
            if empty(&c.name) {
                errs.add(format!("{at}.cookie.name"), "required");
            }
            kuma_duration::check_opt(errs, &format!("{at}.cookie.ttl"), c.ttl.as_deref());
        }
    }
}

/// A decimal given as a number or a string.
pub fn decimal(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn is_prime(n: u32) -> bool {
    n >= 2
        && (2..)
            .take_while(|d| d * d <= n)
            .all(|d| !n.is_multiple_of(d))
}
