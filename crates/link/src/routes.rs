//! The route table the flow code reads: for each routing key the cheapest
//! destination routers, and for each destination the neighbour to send
//! its flows to.
//!
//! Until link-state routing (`crate::routing`, another module) fills it,
//! [`RouteTable::direct`] computes it from the neighbours alone: a key is
//! reachable at a neighbour that advertised it in its hello, over the
//! cheapest link to that neighbour. Owns the table and the pick; never
//! touches links.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What the router knows about one neighbour, from its hellos.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neighbour {
    /// The neighbour's router id.
    pub router: String,
    /// The cheapest up link's cost to it.
    pub cost: u32,
    /// Routing keys it has connectors for.
    pub routing_keys: Vec<String>,
}

/// A destination for a routing key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    /// The router with a connector for the key.
    pub router: String,
    /// Total path cost to it (0 for this router).
    pub cost: u32,
}

/// Cheapest destinations per key and the next hop per destination.
#[derive(Debug, Default)]
pub struct RouteTable {
    /// Per routing key, the destinations at the lowest cost (ties are
    /// balanced round robin).
    pub destinations: BTreeMap<String, Vec<Destination>>,
    /// Per destination router, the neighbour that carries its flows.
    pub next_hop: BTreeMap<String, String>,
    turn: AtomicUsize,
}

impl PartialEq for RouteTable {
    fn eq(&self, other: &Self) -> bool {
        self.destinations == other.destinations && self.next_hop == other.next_hop
    }
}

// === impl RouteTable ===

impl RouteTable {
    /// A table from its parts (the routing module builds it this way).
    pub fn new(
        destinations: BTreeMap<String, Vec<Destination>>,
        next_hop: BTreeMap<String, String>,
    ) -> Self {
        RouteTable {
            destinations,
            next_hop,
            turn: AtomicUsize::new(0),
        }
    }

    /// Routes to `local_keys` at this router (`me`) and to what the
    /// neighbours advertise, keeping only the cheapest per key.
    pub fn direct(me: &str, local_keys: &[String], neighbours: &[Neighbour]) -> Self {
        let mut all: BTreeMap<String, Vec<Destination>> = BTreeMap::new();
        let mut next_hop = BTreeMap::new();
        for key in local_keys {
            all.entry(key.clone()).or_default().push(Destination {
                router: me.to_owned(),
                cost: 0,
            });
        }
        for n in neighbours {
            next_hop.insert(n.router.clone(), n.router.clone());
            for key in &n.routing_keys {
                all.entry(key.clone()).or_default().push(Destination {
                    router: n.router.clone(),
                    cost: n.cost,
                });
            }
        }
        for dests in all.values_mut() {
            let best = dests.iter().map(|d| d.cost).min().unwrap_or(0);
            dests.retain(|d| d.cost == best);
            dests.sort_by(|a, b| a.router.cmp(&b.router));
            dests.dedup();
        }
        RouteTable::new(all, next_hop)
    }

    /// The destination for a new flow to `routing_key`, balancing round
    /// robin over the cheapest ones.
    pub fn pick(&self, routing_key: &str) -> Option<&Destination> {
        let dests = self.destinations.get(routing_key)?;
        if dests.is_empty() {
            return None;
        }
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        dests.get(turn % dests.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(router: &str, cost: u32, keys: &[&str]) -> Neighbour {
        Neighbour {
            router: router.into(),
            cost,
            routing_keys: keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn cheapest_destinations_are_balanced_and_local_wins() {
        let t = RouteTable::direct(
            "a",
            &["local".into()],
            &[
                n("b", 1, &["db", "local"]),
                n("c", 1, &["db"]),
                n("d", 5, &["db"]),
            ],
        );
        let picks: Vec<_> = (0..4)
            .map(|_| t.pick("db").unwrap().router.clone())
            .collect();
        assert_eq!(picks, ["b", "c", "b", "c"]);
        assert_eq!(t.pick("local").unwrap().router, "a");
        assert!(t.pick("nothing").is_none());
        assert_eq!(t.next_hop["d"], "d");
    }
}
