//! The published route table: what the link-state routing currently says,
//! as a snapshot for status, `/config_dump` and tests. Flows do not read
//! it: they ask the routing state directly, which also balances and fails
//! over. Owns only the snapshot type.

use std::collections::BTreeMap;

/// A router with connectors for a routing key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    /// The router with a connector for the key.
    pub router: String,
    /// Path cost to it (0 for this router).
    pub cost: u64,
}

/// Destinations per key and the next hop per reachable router.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteTable {
    /// Per routing key, every reachable destination, cheapest first.
    pub destinations: BTreeMap<String, Vec<Destination>>,
    /// Per reachable router (this one excluded), the neighbour that
    /// carries its flows.
    pub next_hop: BTreeMap<String, String>,
}
