//! Validation of a cluster's `lb_policy` and its `lb_config` (what Kuma's
//! MeshLoadBalancingStrategy `loadBalancer` becomes): `ROUND_ROBIN`,
//! `LEAST_REQUEST` (with `choice_count`), `RANDOM`, `RING_HASH` (ring
//! sizes; xxHash, as meshlink-proxy hashes) and `MAGLEV` (its table size,
//! served by the same consistent-hash ring). Other policies are refused.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    LbConfig, LbPolicy as PbLbPolicy, ring_hash_lb_config::HashFunction,
};

use super::{Invalid, invalid};
use crate::hash_ring::{DEFAULT_MAX_RING, DEFAULT_MIN_RING};
use crate::model::LbPolicy;

/// Maglev's default table size (Envoy's).
const DEFAULT_MAGLEV_TABLE: u64 = 65_537;

/// Reads `c.lb_policy` and `c.lb_config`.
pub(super) fn lb_policy(c: &Cluster) -> Result<LbPolicy, Invalid> {
    let config = c.lb_config.as_ref();
    let policy = match PbLbPolicy::try_from(c.lb_policy) {
        Ok(PbLbPolicy::RoundRobin) => LbPolicy::RoundRobin,
        Ok(PbLbPolicy::LeastRequest) => {
            let choices = match config {
                Some(LbConfig::LeastRequestLbConfig(l)) => l.choice_count.map_or(2, |v| v.value),
                _ => 2,
            };
            if choices < 2 {
                return Err(invalid(
                    "least_request_lb_config.choice_count",
                    "must be at least 2",
                ));
            }
            if choices == 2 {
                LbPolicy::LeastRequest
            } else {
                LbPolicy::LeastRequestOf(choices)
            }
        }
        Ok(PbLbPolicy::Random) => LbPolicy::Random,
        Ok(PbLbPolicy::RingHash) => {
            let (min, max) = match config {
                Some(LbConfig::RingHashLbConfig(r)) => {
                    if r.hash_function == HashFunction::MurmurHash2 as i32 {
                        return Err(invalid(
                            "ring_hash_lb_config.hash_function",
                            "MURMUR_HASH_2 is not supported by meshlink-proxy; use XX_HASH",
                        ));
                    }
                    (
                        r.minimum_ring_size.map_or(DEFAULT_MIN_RING, |v| v.value),
                        r.maximum_ring_size.map_or(DEFAULT_MAX_RING, |v| v.value),
                    )
                }
                _ => (DEFAULT_MIN_RING, DEFAULT_MAX_RING),
            };
            if min == 0 || max < min || max > DEFAULT_MAX_RING {
                return Err(invalid(
                    "ring_hash_lb_config",
                    format!("ring sizes {min}..{max}: need 1 <= minimum <= maximum <= 8388608"),
                ));
            }
            LbPolicy::RingHash { min, max }
        }
        Ok(PbLbPolicy::Maglev) => {
            let table = match config {
                Some(LbConfig::MaglevLbConfig(m)) => {
                    m.table_size.map_or(DEFAULT_MAGLEV_TABLE, |v| v.value)
                }
                _ => DEFAULT_MAGLEV_TABLE,
            };
            if table == 0 || table > 5_000_011 {
                return Err(invalid(
                    "maglev_lb_config.table_size",
                    "must be 1 to 5000011",
                ));
            }
            LbPolicy::RingHash {
                min: table,
                max: table,
            }
        }
        _ => {
            return Err(invalid(
                "lb_policy",
                format!(
                    "policy {} is not supported; use ROUND_ROBIN, LEAST_REQUEST, RANDOM, \
                     RING_HASH or MAGLEV",
                    c.lb_policy
                ),
            ));
        }
    };
    let config_matches = match (config, &policy) {
        (None, _) => true,
        (
            Some(LbConfig::LeastRequestLbConfig(_)),
            LbPolicy::LeastRequest | LbPolicy::LeastRequestOf(_),
        ) => true,
        (Some(LbConfig::RingHashLbConfig(_)), LbPolicy::RingHash { .. }) => {
            c.lb_policy == PbLbPolicy::RingHash as i32
        }
        (Some(LbConfig::MaglevLbConfig(_)), LbPolicy::RingHash { .. }) => {
            c.lb_policy == PbLbPolicy::Maglev as i32
        }
        (Some(LbConfig::RoundRobinLbConfig(_)), LbPolicy::RoundRobin) => true,
        _ => false,
    };
    if !config_matches {
        return Err(invalid(
            "lb_config",
            "does not match lb_policy (or is not supported by meshlink-proxy)",
        ));
    }
    Ok(policy)
}
