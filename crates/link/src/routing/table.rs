//! The routing table: a route per reachable router, and for each routing
//! key the routers with connectors for it, cheapest first. Also the diff
//! between two tables, which the transport counts as route changes.
//!
//! Owns the derivation from the database and the routes; it never
//! balances (that is [`super::picker`]) and never changes the database.

use std::collections::BTreeMap;

use super::lsdb::LinkStateDb;
use super::spf::Route;
use super::wire::RouterId;

/// A router that has connectors for a routing key, as seen from here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// The router with the connectors.
    pub router: RouterId,
    /// The path cost to it; 0 for this router's own connectors.
    pub cost: u64,
    /// The neighbour to send the flow to; `None` for this router's own
    /// connectors.
    pub next_hop: Option<RouterId>,
    /// How many connectors it has for the key (its share of new flows
    /// among equal-cost destinations).
    pub weight: u32,
}

/// One router whose route appeared, went or changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteChange {
    /// The destination router.
    pub router: RouterId,
    /// Its route before (`None`: it was unreachable).
    pub before: Option<Route>,
    /// Its route now (`None`: it is unreachable now).
    pub after: Option<Route>,
}

/// What a database change did to the routing table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RouteDiff {
    /// Routers whose route appeared, went, or changed next hop or cost.
    pub routes: Vec<RouteChange>,
    /// Routing keys whose destinations (set, costs, next hops or weights)
    /// changed.
    pub keys: Vec<String>,
}

impl RouteDiff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty() && self.keys.is_empty()
    }
}

/// Routes and key destinations computed from one state of the database.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RoutingTable {
    pub(crate) routes: BTreeMap<RouterId, Route>,
    pub(crate) keys: BTreeMap<String, Vec<Destination>>,
}

impl RoutingTable {
    /// The table for `routes` (from [`super::spf::shortest_paths`]) over
    /// the LSAs in `db`.
    pub(crate) fn new(db: &LinkStateDb, routes: BTreeMap<RouterId, Route>) -> Self {
        let mut keys: BTreeMap<String, Vec<Destination>> = BTreeMap::new();
        let own = db.own();
        let reachable = std::iter::once((&own.origin.id, None))
            .chain(routes.iter().map(|(id, route)| (id, Some(route))));
        for (id, route) in reachable {
            let Some(lsa) = db.get(id) else { continue };
            for service in &lsa.services {
                if service.connectors.is_empty() {
                    continue;
                }
                keys.entry(service.routing_key.clone())
                    .or_default()
                    .push(Destination {
                        router: id.clone(),
                        cost: route.map_or(0, |r| r.cost),
                        next_hop: route.map(|r| r.next_hop.clone()),
                        weight: u32::try_from(service.connectors.len()).unwrap_or(u32::MAX),
                    });
            }
        }
        for destinations in keys.values_mut() {
            destinations.sort_by(|a, b| (a.cost, &a.router).cmp(&(b.cost, &b.router)));
        }
        Self { routes, keys }
    }

    /// What changed from `before` to `self`.
    pub(crate) fn diff(&self, before: &RoutingTable) -> RouteDiff {
        let mut diff = RouteDiff::default();
        for (router, old) in &before.routes {
            let new = self.routes.get(router);
            if new != Some(old) {
                diff.routes.push(RouteChange {
                    router: router.clone(),
                    before: Some(old.clone()),
                    after: new.cloned(),
                });
            }
        }
        for (router, new) in &self.routes {
            if !before.routes.contains_key(router) {
                diff.routes.push(RouteChange {
                    router: router.clone(),
                    before: None,
                    after: Some(new.clone()),
                });
            }
        }
        diff.routes.sort_by(|a, b| a.router.cmp(&b.router));
        for (key, old) in &before.keys {
            if self.keys.get(key) != Some(old) {
                diff.keys.push(key.clone());
            }
        }
        for key in self.keys.keys() {
            if !before.keys.contains_key(key) {
                diff.keys.push(key.clone());
            }
        }
        diff.keys.sort();
        diff
    }
}
