//! Paths over small topologies: two routers, a line, a triangle, link
//! removal, one-way links and edge routers.

use super::check::assert_converged;
use super::sim::Sim;
use crate::routing::{AdjacencyError, RouterId};

fn id(s: &str) -> RouterId {
    RouterId::from(s)
}

fn next_hop(sim: &Sim, from: &str, to: &str) -> Option<String> {
    sim.router(from)
        .route(&id(to))
        .map(|r| r.next_hop.0.clone())
}

fn line(a_edge: bool, c_edge: bool) -> Sim {
    let mut sim = Sim::default();
    sim.add("a", a_edge);
    sim.add("b", false);
    sim.add("c", c_edge);
    sim.link_up("a", "b", 1).unwrap();
    sim.link_up("b", "c", 1).unwrap();
    sim.settle();
    sim
}

#[test]
fn two_routers_see_each_other_over_one_link() {
    let mut sim = Sim::default();
    sim.add("a", false);
    sim.add("b", false);
    sim.link_up("a", "b", 3).unwrap();
    sim.settle();

    let route = sim.router("a").route(&id("b")).expect("a reaches b");
    assert_eq!(
        (route.next_hop.as_str(), route.cost, route.hops),
        ("b", 3, 1)
    );
    let view = sim.router("b").network_view();
    assert_eq!(view.sites_in_network(), 2);
    assert_eq!(view.sites[0].id, id("b"), "own site first");
    let link = &view.site(&id("a")).unwrap().links[0];
    assert_eq!(
        (link.remote_site_name.as_str(), link.operational),
        ("site-b", true)
    );
    assert_converged(&sim, true);
}

#[test]
fn a_reaches_c_through_b_on_a_line() {
    let sim = line(false, false);
    assert_eq!(next_hop(&sim, "a", "c").as_deref(), Some("b"));
    assert_eq!(next_hop(&sim, "c", "a").as_deref(), Some("b"));
    assert_eq!(next_hop(&sim, "b", "c").as_deref(), Some("c"));
    assert_eq!(sim.router("a").route(&id("c")).unwrap().hops, 2);
    assert_eq!(sim.router("a").network_view().sites_in_network(), 3);
    assert_converged(&sim, true);
}

#[test]
fn the_cheaper_two_hop_path_wins_over_an_expensive_direct_link() {
    let mut sim = Sim::default();
    for r in ["a", "b", "c"] {
        sim.add(r, false);
    }
    sim.link_up("a", "c", 10).unwrap();
    sim.link_up("a", "b", 2).unwrap();
    sim.link_up("b", "c", 3).unwrap();
    sim.settle();
    let route = sim.router("a").route(&id("c")).unwrap();
    assert_eq!((route.next_hop.as_str(), route.cost), ("b", 5));

    // Make the two-hop path dearer than the direct link: a goes direct.
    let (b, c) = (id("b"), id("c"));
    sim.link_down(&b, &c);
    sim.link_up("b", "c", 9).unwrap();
    sim.settle();
    let route = sim.router("a").route(&id("c")).unwrap();
    assert_eq!((route.next_hop.as_str(), route.cost), ("c", 10));
    assert_converged(&sim, true);
}

#[test]
fn a_removed_link_drops_the_far_site_from_routes_view_and_keys_at_once() {
    let mut sim = line(false, false);
    sim.set_connectors("c", &[("db", 1)]);
    sim.settle();
    assert_eq!(sim.router("a").destinations("db").len(), 1);

    sim.link_down(&id("b"), &id("c"));
    sim.settle();
    let a = sim.router("a");
    assert!(a.route(&id("c")).is_none());
    assert!(
        a.network_view().site(&id("c")).is_none(),
        "no stale site in the view"
    );
    assert_eq!(a.network_view().sites_in_network(), 2);
    assert!(
        a.network_view()
            .site(&id("b"))
            .unwrap()
            .links
            .iter()
            .all(|l| l.remote_site_id != id("c"))
    );
    assert!(a.destinations("db").is_empty(), "no stale connector");
    assert!(sim.router_mut("a").pick("db").is_none());
    let removed = sim
        .received
        .iter()
        .filter(|(at, _)| at == &id("a"))
        .flat_map(|(_, r)| &r.diff.routes)
        .any(|change| change.router == id("c") && change.after.is_none());
    assert!(removed, "a's diff reports c's route gone");
    assert_converged(&sim, false);

    // Swept twice, the unreachable LSA is gone too.
    assert_eq!(sim.router("a").database_len(), 3);
    sim.sweep_all();
    assert_eq!(sim.router("a").database_len(), 2);
    assert_converged(&sim, true);
}

#[test]
fn a_link_only_one_end_advertises_is_not_used() {
    let mut sim = Sim::default();
    for r in ["a", "b", "c"] {
        sim.add(r, false);
    }
    sim.link_up("a", "b", 1).unwrap();
    sim.link_up("a", "c", 1).unwrap();
    sim.one_way_link("b", "c", 1);
    sim.settle();
    let route = sim.router("b").route(&id("c")).unwrap();
    assert_eq!(
        (route.next_hop.as_str(), route.cost),
        ("a", 2),
        "not over the one-way link"
    );
    let view = sim.router("c").network_view();
    let claimed = view
        .site(&id("b"))
        .unwrap()
        .links
        .iter()
        .find(|l| l.remote_site_id == id("c"));
    assert_eq!(
        claimed.map(|l| l.operational),
        Some(false),
        "shown, not operational"
    );
    assert_converged(&sim, true);
}

#[test]
fn an_edge_router_reaches_another_edge_through_an_interior_router() {
    let sim = line(true, true);
    assert_eq!(next_hop(&sim, "a", "c").as_deref(), Some("b"));
    assert_eq!(next_hop(&sim, "c", "a").as_deref(), Some("b"));
    assert_converged(&sim, true);
}

#[test]
fn an_edge_router_never_carries_transit() {
    // b - a(edge) - c, plus a dear direct b - d - c detour.
    let mut sim = Sim::default();
    sim.add("a", true);
    for r in ["b", "c", "d"] {
        sim.add(r, false);
    }
    sim.link_up("a", "b", 1).unwrap();
    sim.link_up("a", "c", 1).unwrap();
    sim.settle();
    assert!(
        sim.router("b").route(&id("c")).is_none(),
        "b cannot reach c through edge a"
    );
    assert!(sim.router("b").network_view().site(&id("c")).is_none());
    assert_eq!(
        sim.router("a").routes().len(),
        2,
        "the edge router reaches both"
    );
    assert_converged(&sim, true);

    sim.link_up("b", "d", 5).unwrap();
    sim.link_up("d", "c", 5).unwrap();
    sim.settle();
    let route = sim.router("b").route(&id("c")).unwrap();
    assert_eq!(
        (route.next_hop.as_str(), route.cost),
        ("d", 10),
        "the detour, not a"
    );
    assert_converged(&sim, true);
}

#[test]
fn two_edge_routers_cannot_link() {
    let mut sim = Sim::default();
    sim.add("a", true);
    sim.add("b", true);
    let err = sim.link_up("a", "b", 1).unwrap_err();
    assert!(matches!(err, AdjacencyError::EdgeToEdge { .. }));
    assert!(
        err.to_string().contains("link only to interior routers"),
        "{err}"
    );
    assert!(sim.router("a").routes().is_empty());
}

#[test]
fn a_link_back_to_the_same_router_is_refused() {
    let mut sim = Sim::default();
    sim.add("a", false);
    let hello = sim.router("a").hello();
    let err = sim.router("a").check_neighbour(&hello).unwrap_err();
    assert_eq!(err, AdjacencyError::SelfLink(id("a")));
    assert!(err.to_string().contains("check the Link's endpoint"));
}
