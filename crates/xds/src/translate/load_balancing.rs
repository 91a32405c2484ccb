//! MeshLoadBalancingStrategy as Envoy sees it: the `loadBalancer` becomes
//! the destination Cluster's `lb_policy` and its config
//! (`ring_hash_lb_config`, `maglev_lb_config`, `least_request_lb_config`),
//! and `hashPolicies` become each route's `hash_policy` (Envoy hashes on
//! the route, balances on the cluster).

use envoy_types::pb::envoy::config::route::v3::route_action::{HashPolicy, hash_policy};
use meshlink_api::spec::LoadBalancingConf;

/// The route `hash_policy` of `conf` (RingHash or Maglev `hashPolicies`).
pub(super) fn hash_policies(conf: Option<&LoadBalancingConf>) -> Vec<HashPolicy> {
    let Some(lb) = conf.and_then(|c| c.load_balancer.as_ref()) else {
        return Vec::new();
    };
    let policies = match lb.type_.as_str() {
        "RingHash" => lb.ring_hash.as_ref().and_then(|r| r.hash_policies.as_ref()),
        "Maglev" => lb.maglev.as_ref().and_then(|m| m.hash_policies.as_ref()),
        _ => None,
    };
    policies
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let specifier = match p.type_.as_str() {
                "Header" => hash_policy::PolicySpecifier::Header(hash_policy::Header {
                    header_name: p.header.as_ref()?.name.clone(),
                    ..Default::default()
                }),
                "Cookie" => {
                    let c = p.cookie.as_ref()?;
                    hash_policy::PolicySpecifier::Cookie(hash_policy::Cookie {
                        name: c.name.clone(),
                        ttl: super::http::kuma_duration(c.ttl.as_deref()),
                        path: c.path.clone().unwrap_or_default(),
                        ..Default::default()
                    })
                }
                "Connection" | "SourceIP" => hash_policy::PolicySpecifier::ConnectionProperties(
                    hash_policy::ConnectionProperties {
                        source_ip: p
                            .connection
                            .as_ref()
                            .and_then(|c| c.source_ip)
                            .unwrap_or(true),
                    },
                ),
                "QueryParameter" => {
                    hash_policy::PolicySpecifier::QueryParameter(hash_policy::QueryParameter {
                        name: p.query_parameter.as_ref()?.name.clone(),
                    })
                }
                "FilterState" => {
                    hash_policy::PolicySpecifier::FilterState(hash_policy::FilterState {
                        key: p.filter_state.as_ref()?.key.clone(),
                    })
                }
                _ => return None,
            };
            Some(HashPolicy {
                terminal: p.terminal.unwrap_or(false),
                policy_specifier: Some(specifier),
            })
        })
        .collect()
}
