//! Picking destinations for new flows: balanced by connector count over
//! the cheapest routers, local first, and failover when one goes.

use std::collections::BTreeMap;

use super::sim::Sim;
use crate::routing::RouterId;

fn id(s: &str) -> RouterId {
    RouterId::from(s)
}

/// a in the middle, linked to b, c and d at the given costs.
fn star(costs: [u32; 3]) -> Sim {
    let mut sim = Sim::default();
    for r in ["a", "b", "c", "d"] {
        sim.add(r, false);
    }
    for (peer, cost) in ["b", "c", "d"].into_iter().zip(costs) {
        sim.link_up("a", peer, cost).unwrap();
    }
    sim.settle();
    sim
}

fn picks(sim: &mut Sim, key: &str, n: usize) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for _ in 0..n {
        let d = sim.router_mut("a").pick(key).expect("a destination");
        *counts.entry(d.router.0).or_insert(0) += 1;
    }
    counts
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(r, n)| ((*r).to_owned(), *n)).collect()
}

#[test]
fn equal_cost_destinations_share_flows_by_connector_count() {
    let mut sim = star([1, 1, 5]);
    sim.set_connectors("b", &[("db", 2)]);
    sim.set_connectors("c", &[("db", 1)]);
    sim.set_connectors("d", &[("db", 4)]);
    sim.settle();

    let order: Vec<String> = (0..6)
        .map(|_| sim.router_mut("a").pick("db").unwrap().router.0)
        .collect();
    assert_eq!(order, ["b", "c", "b", "b", "c", "b"], "smooth, not bursty");
    assert_eq!(
        picks(&mut sim, "db", 300),
        counts(&[("b", 200), ("c", 100)]),
        "d is dearer"
    );
    let d = sim.router("a").destinations("db");
    let listed: Vec<(&str, u64, Option<&str>)> = d
        .iter()
        .map(|d| {
            (
                d.router.as_str(),
                d.cost,
                d.next_hop.as_ref().map(RouterId::as_str),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("b", 1, Some("b")),
            ("c", 1, Some("c")),
            ("d", 5, Some("d"))
        ]
    );
}

#[test]
fn flows_fail_over_to_the_rest_of_the_tier_then_to_the_next_cheapest() {
    let mut sim = star([1, 1, 5]);
    for r in ["b", "c", "d"] {
        sim.set_connectors(r, &[("db", 1)]);
    }
    sim.settle();
    assert_eq!(picks(&mut sim, "db", 4), counts(&[("b", 2), ("c", 2)]));

    sim.link_down(&id("a"), &id("c"));
    sim.settle();
    assert_eq!(
        picks(&mut sim, "db", 4),
        counts(&[("b", 4)]),
        "c's link went"
    );

    sim.set_connectors("b", &[]);
    sim.settle();
    assert_eq!(
        picks(&mut sim, "db", 4),
        counts(&[("d", 4)]),
        "b's connector went"
    );

    sim.link_up("a", "c", 1).unwrap();
    sim.settle();
    assert_eq!(
        picks(&mut sim, "db", 2),
        counts(&[("c", 2)]),
        "c is back and cheaper"
    );
}

#[test]
fn a_flow_that_failed_to_reach_a_destination_goes_to_the_next() {
    let mut sim = star([1, 2, 3]);
    for r in ["b", "c", "d"] {
        sim.set_connectors(r, &[("db", 1)]);
    }
    sim.settle();
    let a = sim.router_mut("a");
    assert_eq!(a.pick("db").unwrap().router, id("b"));
    assert_eq!(a.pick_excluding("db", &[id("b")]).unwrap().router, id("c"));
    assert_eq!(
        a.pick_excluding("db", &[id("b"), id("c")]).unwrap().router,
        id("d")
    );
    assert!(
        a.pick_excluding("db", &[id("b"), id("c"), id("d")])
            .is_none()
    );
    assert!(a.pick("unknown-key").is_none());
}

#[test]
fn local_connectors_cost_nothing_and_take_every_flow() {
    let mut sim = star([1, 1, 1]);
    sim.set_connectors("a", &[("db", 1)]);
    sim.set_connectors("b", &[("db", 3)]);
    sim.settle();
    let local = sim.router_mut("a").pick("db").unwrap();
    assert_eq!(
        (local.router.as_str(), local.cost, local.next_hop),
        ("a", 0, None)
    );
    assert_eq!(picks(&mut sim, "db", 5), counts(&[("a", 5)]));
    // b, one hop away, still prefers its own connector over a's.
    assert_eq!(sim.router_mut("b").pick("db").unwrap().router, id("b"));
}

#[test]
fn a_transit_destination_is_reached_through_its_next_hop() {
    let mut sim = Sim::default();
    for r in ["a", "b", "c"] {
        sim.add(r, false);
    }
    sim.link_up("a", "b", 1).unwrap();
    sim.link_up("b", "c", 1).unwrap();
    sim.set_connectors("c", &[("db", 1)]);
    sim.settle();
    let d = sim.router_mut("a").pick("db").unwrap();
    assert_eq!(
        (d.router.as_str(), d.cost, d.next_hop.unwrap().as_str()),
        ("c", 2, "b")
    );
    let view = sim.router("a").network_view();
    let c = view.site(&id("c")).unwrap();
    assert_eq!(c.services[0].routing_key, "db");
    assert_eq!(c.services[0].connectors, ["db-c-0"]);
}
