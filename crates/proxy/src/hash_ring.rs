//! Consistent hashing over a cluster's endpoints, as Envoy's `RING_HASH`
//! load balancer does it (Kuma's MeshLoadBalancingStrategy `RingHash`):
//! each endpoint is placed on a ring of 64-bit hashes at
//! `ceil(min_ring_size / endpoints)` points (the ring has at least
//! `min_ring_size` and at most `max_ring_size` points), the point for
//! replica `i` of address `A` being `xxHash64("A_i")`; a request's hash
//! picks the first point at or after it, wrapping around. The same hash
//! therefore reaches the same endpoint while the endpoints stay; when one
//! goes, its keys move and a few of the others' (they gain points).

use std::net::SocketAddr;

use xxhash_rust::xxh64::xxh64;

/// Envoy's default least ring size.
pub const DEFAULT_MIN_RING: u64 = 1024;
/// Envoy's default (and largest) ring size.
pub const DEFAULT_MAX_RING: u64 = 8 * 1024 * 1024;

/// A ring over endpoints `0..n` (indices into the caller's list).
#[derive(Debug, Clone, Default)]
pub struct Ring {
    /// `(point, endpoint index)`, sorted by point.
    points: Vec<(u64, usize)>,
}

impl Ring {
    /// The ring over `addrs` with at least `min` and at most `max` points.
    pub fn new(addrs: &[SocketAddr], min: u64, max: u64) -> Ring {
        if addrs.is_empty() {
            return Ring::default();
        }
        let n = addrs.len() as u64;
        let size = min.max(n).min(max.max(n));
        let per_host = size.div_ceil(n);
        let mut points = Vec::with_capacity(usize::try_from(per_host * n).unwrap_or(0));
        for (index, addr) in addrs.iter().enumerate() {
            for i in 0..per_host {
                points.push((xxh64(format!("{addr}_{i}").as_bytes(), 0), index));
            }
        }
        points.sort_unstable();
        Ring { points }
    }

    /// The endpoint index for `hash`; `None` on an empty ring.
    pub fn pick(&self, hash: u64) -> Option<usize> {
        if self.points.is_empty() {
            return None;
        }
        let at = self.points.partition_point(|(p, _)| *p < hash);
        Some(self.points[at % self.points.len()].1)
    }

    /// The ring's points, in order of the ring from `hash`: the endpoint
    /// indices a request with `hash` tries, each once.
    pub fn order_from(&self, hash: u64, endpoints: usize) -> Vec<usize> {
        let mut seen = vec![false; endpoints];
        let mut order = Vec::with_capacity(endpoints);
        if self.points.is_empty() {
            return order;
        }
        let start = self.points.partition_point(|(p, _)| *p < hash);
        for k in 0..self.points.len() {
            let (_, index) = self.points[(start + k) % self.points.len()];
            if index < endpoints && !seen[index] {
                seen[index] = true;
                order.push(index);
                if order.len() == endpoints {
                    break;
                }
            }
        }
        order
    }
}

/// A request property's hash (Envoy hashes header values, cookies and
/// query parameters with xxHash64, seed 0).
pub fn hash_of(value: &[u8]) -> u64 {
    xxh64(value, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(n: u16) -> Vec<SocketAddr> {
        (0..n)
            .map(|i| SocketAddr::from(([127, 0, 0, 1], 9000 + i)))
            .collect()
    }

    #[test]
    fn a_key_always_reaches_the_same_endpoint_and_keys_spread() {
        let ring = Ring::new(&addrs(3), DEFAULT_MIN_RING, DEFAULT_MAX_RING);
        let mut per_endpoint = [0; 3];
        for k in 0..300 {
            let h = hash_of(format!("session-{k}").as_bytes());
            let e = ring.pick(h).unwrap();
            assert_eq!(ring.pick(h), Some(e), "stable");
            per_endpoint[e] += 1;
        }
        assert!(per_endpoint.iter().all(|&c| c > 50), "{per_endpoint:?}");
    }

    #[test]
    fn removing_an_endpoint_moves_few_keys_between_the_others() {
        // As in Envoy, the others get more points each (the ring keeps its
        // least size), so some of their keys move between them; most stay.
        let all = addrs(4);
        let before = Ring::new(&all, DEFAULT_MIN_RING, DEFAULT_MAX_RING);
        let after = Ring::new(&all[..3], DEFAULT_MIN_RING, DEFAULT_MAX_RING);
        let (mut staying, mut kept) = (0, 0);
        for k in 0..1000 {
            let h = hash_of(format!("k{k}").as_bytes());
            let was = before.pick(h).unwrap();
            if was < 3 {
                staying += 1;
                kept += usize::from(after.pick(h) == Some(was));
            }
        }
        assert!(kept * 100 >= staying * 80, "{kept} of {staying} kept");
    }

    #[test]
    fn the_order_from_a_hash_lists_each_endpoint_once_starting_with_the_pick() {
        let ring = Ring::new(&addrs(3), 16, 32);
        let h = hash_of(b"x");
        let order = ring.order_from(h, 3);
        assert_eq!(order.len(), 3);
        assert_eq!(order[0], ring.pick(h).unwrap());
        assert!(Ring::default().pick(1).is_none());
    }
}
