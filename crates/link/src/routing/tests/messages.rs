//! What a router does with each kind of LSA: new, duplicate, stale, from a
//! restarted router, its own from an earlier life, and invalid ones; and
//! the wire format.

use super::check::assert_converged;
use super::sim::Sim;
use crate::routing::{
    LinkAdvert, LinkDirection, LinkStateRouter, Lsa, LsaError, PROTOCOL_VERSION, ReceivedKind,
    RouterId, RouterInfo, ServiceAdvert, Version,
};

fn id(s: &str) -> RouterId {
    RouterId::from(s)
}

fn router(name: &str, incarnation: u64) -> LinkStateRouter {
    LinkStateRouter::new(
        RouterInfo::new(name, format!("site-{name}"), false),
        incarnation,
    )
    .unwrap()
}

fn link_to(peer: &str, cost: u32) -> LinkAdvert {
    LinkAdvert {
        name: format!("to-{peer}"),
        peer: id(peer),
        peer_name: format!("site-{peer}"),
        cost,
        direction: LinkDirection::Outgoing,
    }
}

/// `b`'s LSA after it set `services`, linked to `a`.
fn lsa_of_b(b: &mut LinkStateRouter, key: &str) -> Lsa {
    let _ = b.set_links(vec![link_to("a", 1)]).unwrap();
    let update = b
        .set_services(vec![ServiceAdvert {
            routing_key: key.into(),
            connectors: vec!["c1".into()],
            listeners: vec![],
        }])
        .unwrap();
    update.flood.expect("changed services are flooded")
}

#[test]
fn duplicate_and_stale_lsas_are_ignored_and_not_flooded_on() {
    let mut a = router("a", 1);
    let mut b = router("b", 1);
    let _ = a.set_links(vec![link_to("b", 1)]).unwrap();
    let old = b.set_links(vec![link_to("a", 1)]).unwrap().flood.unwrap();
    let new = lsa_of_b(&mut b, "db");

    let first = a.receive(new.clone()).unwrap();
    assert_eq!(first.kind, ReceivedKind::Installed);
    assert_eq!(first.flood.as_ref(), Some(&new), "a new LSA is flooded on");
    assert!(!first.diff.is_empty());
    let changes = a.route_changes();

    let again = a.receive(new.clone()).unwrap();
    assert_eq!(again.kind, ReceivedKind::Duplicate);
    assert_eq!((again.flood, again.reply), (None, None));

    let stale = a.receive(old).unwrap();
    assert_eq!(stale.kind, ReceivedKind::Stale);
    assert_eq!(stale.flood, None, "a stale LSA is not flooded");
    assert_eq!(stale.reply, Some(new), "the sender gets the newer one back");
    assert!(stale.diff.is_empty());
    assert_eq!(a.route_changes(), changes, "nothing changed");
    assert_eq!(a.destinations("db").len(), 1);
}

#[test]
fn a_restarted_router_with_a_new_incarnation_is_accepted_with_lower_seqs() {
    let mut sim = Sim::default();
    for r in ["a", "b", "c"] {
        sim.add(r, false);
    }
    sim.link_up("a", "b", 1).unwrap();
    sim.link_up("b", "c", 1).unwrap();
    for n in 0..5 {
        sim.set_connectors("c", &[("db", n + 1)]);
    }
    sim.settle();
    let before = sim.router("a").destinations("db")[0].clone();
    assert_eq!(before.weight, 5);
    let old_version = sim.router("c").own_lsa().version;

    sim.restart(&id("c"));
    sim.set_connectors("c", &[("cache", 1)]);
    sim.settle();
    let new_version = sim.router("c").own_lsa().version;
    assert!(
        new_version.seq < old_version.seq,
        "seq started again: {new_version:?}"
    );
    assert!(new_version > old_version, "and still wins by incarnation");
    let a = sim.router("a");
    assert!(
        a.destinations("db").is_empty(),
        "the old life's keys are gone"
    );
    assert_eq!(a.destinations("cache")[0].router, id("c"));
    assert_converged(&sim, true);
}

#[test]
fn a_router_whose_clock_stepped_back_reoriginates_above_its_old_lsa() {
    let mut a = router("a", 1_000);
    let mut b = router("b", 1);
    let _ = b.set_links(vec![link_to("a", 1)]).unwrap();
    let old_a = a.set_links(vec![link_to("b", 1)]).unwrap().flood.unwrap();
    let _ = b.receive(old_a).unwrap();

    // `a` restarts with a smaller incarnation: `b` finds its LSA stale ...
    let mut a = router("a", 10);
    let fresh = a.set_links(vec![link_to("b", 1)]).unwrap().flood.unwrap();
    let stale = b.receive(fresh).unwrap();
    assert_eq!(stale.kind, ReceivedKind::Stale);
    // ... and sends back the old one, which `a` takes as a cue to jump.
    let back = a.receive(stale.reply.unwrap()).unwrap();
    assert_eq!(back.kind, ReceivedKind::Reoriginated);
    let jumped = back.flood.clone().unwrap();
    assert_eq!(back.reply.as_ref(), Some(&jumped), "the sender gets it too");
    assert_eq!(
        jumped.version,
        Version {
            incarnation: 1_000,
            seq: 3
        }
    );
    assert_eq!(b.receive(jumped).unwrap().kind, ReceivedKind::Installed);
    assert_eq!(b.route(&id("a")).map(|r| r.cost), Some(1));
}

#[test]
fn an_edge_router_does_not_flood_other_routers_lsas() {
    let mut e = LinkStateRouter::new(RouterInfo::new("e", "site-e", true), 1).unwrap();
    let mut b = router("b", 1);
    let _ = e.set_links(vec![link_to("b", 1)]).unwrap();
    let got = e.receive(lsa_of_b(&mut b, "db")).unwrap();
    assert_eq!(got.kind, ReceivedKind::Installed);
    assert_eq!(got.flood, None);
    assert_eq!(
        e.sync_lsas(),
        vec![e.own_lsa().clone()],
        "it syncs only its own LSA"
    );
}

fn refused(lsa: &Lsa) -> String {
    let mut a = router("a", 1);
    let before = a.own_lsa().clone();
    let err = a.receive(lsa.clone()).unwrap_err();
    assert_eq!(a.own_lsa(), &before, "a refused LSA changes nothing");
    assert_eq!(a.database_len(), 1);
    err.to_string()
}

#[test]
fn each_class_of_invalid_lsa_is_refused_with_the_field_and_the_fix() {
    let mut b = router("b", 1);
    let good = lsa_of_b(&mut b, "db");
    let with = |f: &dyn Fn(&mut Lsa)| {
        let mut lsa = good.clone();
        f(&mut lsa);
        refused(&lsa)
    };
    let err = with(&|l| l.v = 2);
    assert!(
        err.contains("version 2 is not supported; this router speaks 1"),
        "{err}"
    );
    let err = with(&|l| l.origin.id = id(""));
    assert!(err.contains("router id must not be empty"), "{err}");
    let err = with(&|l| l.origin.name = "x".repeat(300));
    assert!(err.contains("router name is 300 bytes"), "{err}");
    let err = with(&|l| l.links[0].peer = id("b"));
    assert!(
        err.contains("links[0]: a router cannot link to itself"),
        "{err}"
    );
    let err = with(&|l| l.links[0].cost = 0);
    assert!(err.contains("links[0]: cost 0 is not allowed"), "{err}");
    let err = with(&|l| l.links.push(l.links[0].clone()));
    assert!(err.contains("links[1]: a second link to a"), "{err}");
    let err = with(&|l| l.services.push(l.services[0].clone()));
    assert!(
        err.contains("services[1]: routing key \"db\" appears twice"),
        "{err}"
    );
    let err = with(&|l| l.services[0].routing_key = "a\nb".into());
    assert!(
        err.contains("routing key contains a control character"),
        "{err}"
    );
}

#[test]
fn invalid_own_links_are_refused_and_the_lsa_stays_as_it_was() {
    let mut a = router("a", 1);
    let before = a.own_lsa().clone();
    let err = a.set_links(vec![link_to("b", 0)]).unwrap_err();
    assert!(matches!(err, LsaError::Field { .. }));
    assert_eq!(a.own_lsa(), &before);
    assert!(
        a.set_links(vec![]).unwrap().flood.is_none(),
        "no change, nothing to flood"
    );
}

#[test]
fn lsas_and_hellos_round_trip_as_versioned_json_and_ignore_unknown_fields() {
    let mut b = router("b", 7);
    let lsa = lsa_of_b(&mut b, "db");
    let json = serde_json::to_value(&lsa).unwrap();
    assert_eq!(json["v"], PROTOCOL_VERSION);
    assert_eq!(json["origin"]["id"], "b");
    assert_eq!(json["version"]["incarnation"], 7);
    assert_eq!(json["links"][0]["peerName"], "site-a");
    assert_eq!(json["links"][0]["direction"], "outgoing");
    assert_eq!(json["services"][0]["routingKey"], "db");
    let mut extended = json.clone();
    extended["futureField"] = serde_json::json!({"x": 1});
    assert_eq!(serde_json::from_value::<Lsa>(extended).unwrap(), lsa);

    let hello = b.hello();
    let json = serde_json::to_string(&hello).unwrap();
    assert_eq!(
        json,
        r#"{"v":1,"router":{"id":"b","name":"site-b","edge":false},"incarnation":7}"#
    );
    assert_eq!(
        serde_json::from_str::<crate::routing::Hello>(&json).unwrap(),
        hello
    );
}

#[test]
fn a_bad_router_identity_or_hello_is_refused_with_the_reason() {
    let err = LinkStateRouter::new(RouterInfo::new("", "site", false), 1).unwrap_err();
    assert_eq!(err.to_string(), "router id must not be empty");

    let a = router("a", 1);
    let mut hello = router("b", 1).hello();
    hello.v = 9;
    let err = a.check_neighbour(&hello).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("hello refused: routing protocol version 9"),
        "{err}"
    );
    hello.v = PROTOCOL_VERSION;
    hello.router.name.clear();
    let err = a.check_neighbour(&hello).unwrap_err();
    assert_eq!(
        err.to_string(),
        "hello refused: router name must not be empty"
    );
}
