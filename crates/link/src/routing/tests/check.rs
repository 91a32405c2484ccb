//! The convergence check: after flooding quiets down, every router's
//! routes, key destinations and network view equal what a reference
//! all-pairs computation over the simulator's true links says.

use std::collections::{BTreeMap, BTreeSet};

use super::sim::{Sim, key, reference_distances};
use crate::routing::RouterId;

/// Asserts that every router agrees with the reference. With `swept`, also
/// that no router holds an LSA of a router it cannot reach.
pub(super) fn assert_converged(sim: &Sim, swept: bool) {
    let dist = reference_distances(sim);
    for (me, router) in &sim.routers {
        let expected: BTreeMap<&RouterId, u64> = dist[me]
            .iter()
            .filter(|(id, _)| *id != me)
            .map(|(id, d)| (id, *d))
            .collect();
        let got: BTreeMap<&RouterId, u64> =
            router.routes().iter().map(|(id, r)| (id, r.cost)).collect();
        assert_eq!(got, expected, "route costs at {me}");
        for (dest, route) in router.routes() {
            assert_path(sim, &dist, me, dest, route.cost);
        }
        if swept {
            assert_eq!(
                router.database_len(),
                1 + expected.len(),
                "LSAs held at {me}"
            );
        }
        assert_destinations(sim, &dist, me);
        assert_view(sim, me, &expected.keys().copied().cloned().collect());
    }
}

/// Following next hops router by router from `from` reaches `to` at
/// `cost`, through interior routers only.
fn assert_path(
    sim: &Sim,
    dist: &BTreeMap<RouterId, BTreeMap<RouterId, u64>>,
    from: &RouterId,
    to: &RouterId,
    cost: u64,
) {
    let mut at = from.clone();
    let mut walked = 0;
    let mut seen = BTreeSet::from([at.clone()]);
    while &at != to {
        if &at != from {
            assert!(
                !sim.routers[&at].me().edge,
                "{from}->{to} transits edge router {at}"
            );
        }
        let route = sim.routers[&at]
            .route(to)
            .unwrap_or_else(|| panic!("{at} has no route to {to} on the way from {from}"));
        let link_cost = sim
            .links
            .get(&key(&at, &route.next_hop))
            .unwrap_or_else(|| panic!("{at}'s next hop {} is not a neighbour", route.next_hop));
        walked += u64::from(*link_cost);
        at = route.next_hop.clone();
        assert!(
            seen.insert(at.clone()),
            "routing loop from {from} to {to} at {at}"
        );
    }
    assert_eq!(walked, cost, "cost walked from {from} to {to}");
    assert_eq!(Some(&cost), dist[from].get(to));
}

fn assert_destinations(
    sim: &Sim,
    dist: &BTreeMap<RouterId, BTreeMap<RouterId, u64>>,
    me: &RouterId,
) {
    let router = &sim.routers[me];
    let mut expected: BTreeMap<String, Vec<(RouterId, u64, u32)>> = BTreeMap::new();
    for (id, d) in &dist[me] {
        for service in &sim.routers[id].own_lsa().services {
            if !service.connectors.is_empty() {
                let weight = service.connectors.len() as u32;
                expected
                    .entry(service.routing_key.clone())
                    .or_default()
                    .push((id.clone(), *d, weight));
            }
        }
    }
    for list in expected.values_mut() {
        list.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    }
    let got: BTreeMap<String, Vec<(RouterId, u64, u32)>> = router
        .routing_keys()
        .map(|k| {
            let list = router
                .destinations(k)
                .iter()
                .map(|d| (d.router.clone(), d.cost, d.weight))
                .collect();
            (k.to_owned(), list)
        })
        .collect();
    assert_eq!(got, expected, "key destinations at {me}");
}

fn assert_view(sim: &Sim, me: &RouterId, reachable: &BTreeSet<RouterId>) {
    let view = sim.routers[me].network_view();
    let ids: BTreeSet<RouterId> = view.sites.iter().map(|s| s.id.clone()).collect();
    let mut expected_ids = reachable.clone();
    expected_ids.insert(me.clone());
    assert_eq!(ids, expected_ids, "sites in the view at {me}");
    assert_eq!(&view.sites[0].id, me, "the view starts with this site");
    for site in &view.sites {
        let truth = sim.routers[&site.id].own_lsa();
        let services: Vec<(&str, &[String])> = truth
            .services
            .iter()
            .map(|s| (s.routing_key.as_str(), s.connectors.as_slice()))
            .collect();
        let shown: Vec<(&str, &[String])> = site
            .services
            .iter()
            .map(|s| (s.routing_key.as_str(), s.connectors.as_slice()))
            .collect();
        assert_eq!(shown, services, "services of {} at {me}", site.id);
        let mut expected_links: BTreeSet<(RouterId, u64, bool)> = BTreeSet::new();
        for ((a, b), cost) in &sim.links {
            let peer = if a == &site.id {
                b
            } else if b == &site.id {
                a
            } else {
                continue;
            };
            if expected_ids.contains(peer) {
                expected_links.insert((peer.clone(), u64::from(*cost), true));
            }
        }
        for ((advertiser, peer), cost) in &sim.one_way {
            if advertiser == &site.id && expected_ids.contains(peer) {
                expected_links.insert((peer.clone(), u64::from(*cost), false));
            }
        }
        let shown_links: BTreeSet<(RouterId, u64, bool)> = site
            .links
            .iter()
            .map(|l| (l.remote_site_id.clone(), l.cost, l.operational))
            .collect();
        assert_eq!(shown_links, expected_links, "links of {} at {me}", site.id);
    }
}
