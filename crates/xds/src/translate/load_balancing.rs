//! MeshLoadBalancingStrategy as Envoy sees it: the `loadBalancer` becomes
//! the destination Cluster's `lb_policy` and its config
//! (`ring_hash_lb_config`, `maglev_lb_config`, `least_request_lb_config`),
//! and `hashPolicies` become each route's `hash_policy` (Envoy hashes on
//! the route, balances on the cluster).

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    LbConfig, LbPolicy, LeastRequestLbConfig, MaglevLbConfig, RingHashLbConfig,
    ring_hash_lb_config::HashFunction,
};
use envoy_types::pb::envoy::config::core::v3::RuntimeDouble;
use envoy_types::pb::envoy::config::route::v3::route_action::{HashPolicy, hash_policy};
use envoy_types::pb::google::protobuf::{UInt32Value, UInt64Value};
use meshlink_api::spec::{LoadBalancingConf, decimal};

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

/// Sets `cluster`'s `lb_policy` and its config from `conf` (unchanged
/// without a `loadBalancer`).
pub(super) fn apply(conf: Option<&LoadBalancingConf>, cluster: &mut Cluster) {
    let Some(lb) = conf.and_then(|c| c.load_balancer.as_ref()) else {
        return;
    };
    let u32v = |v: Option<u32>| v.map(|value| UInt32Value { value });
    let u64v = |v: Option<u32>| {
        v.map(|value| UInt64Value {
            value: value.into(),
        })
    };
    match lb.type_.as_str() {
        "RoundRobin" => cluster.lb_policy = LbPolicy::RoundRobin as i32,
        "Random" => cluster.lb_policy = LbPolicy::Random as i32,
        "LeastRequest" => {
            cluster.lb_policy = LbPolicy::LeastRequest as i32;
            if let Some(l) = &lb.least_request {
                cluster.lb_config = Some(LbConfig::LeastRequestLbConfig(LeastRequestLbConfig {
                    choice_count: u32v(l.choice_count),
                    active_request_bias: l.active_request_bias.as_ref().and_then(decimal).map(
                        |default_value| RuntimeDouble {
                            default_value,
                            runtime_key: String::new(),
                        },
                    ),
                    ..Default::default()
                }));
            }
        }
        "RingHash" => {
            cluster.lb_policy = LbPolicy::RingHash as i32;
            let r = lb.ring_hash.clone().unwrap_or_default();
            let function = match r.hash_function.as_deref() {
                Some("MurmurHash2") => HashFunction::MurmurHash2,
                _ => HashFunction::XxHash,
            };
            cluster.lb_config = Some(LbConfig::RingHashLbConfig(RingHashLbConfig {
                minimum_ring_size: u64v(r.min_ring_size),
                maximum_ring_size: u64v(r.max_ring_size),
                hash_function: function as i32,
            }));
        }
        "Maglev" => {
            cluster.lb_policy = LbPolicy::Maglev as i32;
            let m = lb.maglev.clone().unwrap_or_default();
            cluster.lb_config = Some(LbConfig::MaglevLbConfig(MaglevLbConfig {
                table_size: u64v(m.table_size),
            }));
        }
        _ => {}
    }
}
