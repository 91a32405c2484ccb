//! The MultiKeyListener kind (Skupper `v2alpha1`): one local port whose
//! flows go to one of several routing keys, chosen by a `strategy`.
//!
//! `priority` sends every new flow to the first routing key (in the order
//! given) that has a reachable Connector somewhere in the network;
//! `weighted` shares new flows among the reachable keys in proportion to
//! their weights. This module owns the shapes, Skupper's field names and
//! their validation; the choice itself is made by the router.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Port;
use super::service::{ServiceType, routing_key_at};
use crate::validate::{self, Errors};

/// Skupper's bound on the number of routing keys of one strategy.
pub const MAX_ROUTING_KEYS: usize = 256;

/// `spec` of a MultiKeyListener.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MultiKeyListenerSpec {
    /// Local address (or hostname) to listen on, as for a Listener.
    pub host: String,
    /// Local port to listen on.
    pub port: Port,
    /// How a new flow's routing key is chosen.
    pub strategy: MultiKeyStrategy,
    /// Protocol (default `tcp`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<ServiceType>,
}

/// `spec.strategy`: exactly one of `priority` and `weighted`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MultiKeyStrategy {
    /// Failover: the first reachable key takes every new flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<PriorityStrategy>,
    /// Sharing: reachable keys take new flows in proportion to weight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighted: Option<WeightedStrategy>,
}

/// `spec.strategy.priority`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriorityStrategy {
    /// Routing keys, highest priority first.
    #[serde(default)]
    pub routing_keys: Vec<String>,
}

/// `spec.strategy.weighted`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WeightedStrategy {
    /// Routing key → weight (at least 1).
    #[serde(default)]
    pub routing_keys: BTreeMap<String, u32>,
}

/// Status details of a MultiKeyListener (Skupper's names).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MultiKeyListenerStatus {
    /// Whether at least one of its routing keys has a reachable Connector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_destination: Option<bool>,
    /// Which keys are reachable, in the strategy's shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<StrategyStatus>,
}

/// `status.strategy`: the variant of the spec's strategy.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StrategyStatus {
    /// For `priority`: the reachable keys in priority order (the first
    /// takes new flows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<PriorityStatus>,
    /// For `weighted`: the reachable keys with their weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighted: Option<WeightedStatus>,
}

/// `status.strategy.priority`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PriorityStatus {
    /// Reachable routing keys, highest priority first.
    #[serde(default)]
    pub routing_keys_reachable: Vec<String>,
}

/// `status.strategy.weighted`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WeightedStatus {
    /// Reachable routing key → its weight.
    #[serde(default)]
    pub routing_keys_reachable: BTreeMap<String, u32>,
}

// === impl MultiKeyListenerSpec ===

impl MultiKeyListenerSpec {
    /// The routing keys with their weights: priority order (weight 1 each)
    /// for `priority`, key order for `weighted`.
    pub fn routing_keys(&self) -> Vec<(String, u32)> {
        match (&self.strategy.priority, &self.strategy.weighted) {
            (Some(p), _) => p.routing_keys.iter().map(|k| (k.clone(), 1)).collect(),
            (None, Some(w)) => w
                .routing_keys
                .iter()
                .map(|(k, v)| (k.clone(), *v))
                .collect(),
            (None, None) => Vec::new(),
        }
    }

    /// Whether the strategy is `weighted`.
    pub fn is_weighted(&self) -> bool {
        self.strategy.priority.is_none() && self.strategy.weighted.is_some()
    }

    /// The status `strategy` for the keys in `reachable` (any order).
    pub fn strategy_status(&self, reachable: &[String]) -> StrategyStatus {
        let keys = self.routing_keys();
        let up = keys.into_iter().filter(|(k, _)| reachable.contains(k));
        if self.is_weighted() {
            StrategyStatus {
                weighted: Some(WeightedStatus {
                    routing_keys_reachable: up.collect(),
                }),
                ..Default::default()
            }
        } else {
            StrategyStatus {
                priority: Some(PriorityStatus {
                    routing_keys_reachable: up.map(|(k, _)| k).collect(),
                }),
                ..Default::default()
            }
        }
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        validate::host(errs, "spec.host", &self.host);
        self.port.validate(errs, "spec.port");
        if let Some(t) = &self.type_ {
            t.validate(errs, "spec.type");
        }
        let s = &self.strategy;
        match (&s.priority, &s.weighted) {
            (None, None) => errs.add(
                "spec.strategy",
                "set one of priority (routingKeys in failover order) or weighted \
                 (routingKeys with weights)",
            ),
            (Some(_), Some(_)) => errs.add(
                "spec.strategy",
                "priority and weighted are both set; keep one of them",
            ),
            (Some(p), None) => {
                let at = "spec.strategy.priority.routingKeys";
                count(errs, at, p.routing_keys.len());
                for (i, k) in p.routing_keys.iter().enumerate() {
                    routing_key_at(errs, &format!("{at}[{i}]"), k);
                    if p.routing_keys[..i].contains(k) {
                        errs.add(
                            format!("{at}[{i}]"),
                            format!("routing key {k:?} appears twice; list each key once"),
                        );
                    }
                }
            }
            (None, Some(w)) => {
                let at = "spec.strategy.weighted.routingKeys";
                count(errs, at, w.routing_keys.len());
                for (k, weight) in &w.routing_keys {
                    routing_key_at(errs, &format!("{at}.{k}"), k);
                    if *weight == 0 {
                        errs.add(
                            format!("{at}.{k}"),
                            "weight must be at least 1; remove the key to send it no flows",
                        );
                    }
                }
            }
        }
    }
}

fn count(errs: &mut Errors, at: &str, n: usize) {
    if n == 0 {
        errs.add(at, "needs at least one routing key");
    } else if n > MAX_ROUTING_KEYS {
        errs.add(
            at,
            format!("has {n} routing keys; at most {MAX_ROUTING_KEYS} are allowed"),
        );
    }
}
