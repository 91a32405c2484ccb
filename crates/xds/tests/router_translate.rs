//! The router translator: golden output for the seed's site, I2 (a
//! RouterAccess or Link is sent only with its Secret), edge sites, and
//! Connector selectors over online and offline Dataplanes.
//!
//! `UPDATE_GOLDEN=1 cargo test -p meshlink-xds --test router_translate`
//! rewrites the golden file; review the diff before committing.

mod router_fixtures;
mod translate_fixtures;

use meshlink_xds::router::{ca_secret_name, certificate_secret_name, translate_router};
use meshlink_xds::translate::{CONNECTOR_TYPE, LINK_TYPE, ROUTER_ACCESS_TYPE, SECRET_TYPE};
use prost::Message;
use router_fixtures::{dataplane, full_view, link, selector_connector, site};
use translate_fixtures::{assert_golden, render};

#[test]
fn seed_site_golden() {
    let config = translate_router(&full_view());
    assert!(config.withheld.is_empty(), "{:?}", config.withheld);
    assert_golden("router_seed_site", &render(&config.snapshot));
}

#[test]
fn translation_does_not_depend_on_input_order() {
    let a = translate_router(&full_view());
    let mut view = full_view();
    // Re-inserting in another order changes nothing.
    let links: Vec<_> = view.links.values().cloned().collect();
    view.links.clear();
    for l in links.into_iter().rev() {
        view.upsert(l);
    }
    assert_eq!(a, translate_router(&view));
}

#[test]
fn a_link_without_its_secret_is_withheld_and_says_what_is_missing() {
    let mut view = full_view();
    view.upsert(link("to-dmz-c", "dmz-c-client", 20));
    let config = translate_router(&view);
    assert!(config.snapshot.get(LINK_TYPE, "to-dmz-c").is_none());
    assert!(
        config
            .snapshot
            .get(SECRET_TYPE, &certificate_secret_name("dmz-c-client"))
            .is_none()
    );
    let w = &config.withheld[0];
    assert_eq!((w.kind, w.name.as_str()), ("Link", "to-dmz-c"));
    assert!(
        w.reason.contains("Secret \"dmz-c-client\" not found"),
        "{}",
        w.reason
    );

    // The Secret arrives: the Link is sent, with both SDS Secrets.
    view.upsert_secret("dmz-c-client", router_fixtures::material("c"), 21);
    let config = translate_router(&view);
    assert!(config.withheld.is_empty());
    assert!(config.snapshot.get(LINK_TYPE, "to-dmz-c").is_some());
    for name in [
        certificate_secret_name("dmz-c-client"),
        ca_secret_name("dmz-c-client"),
    ] {
        assert!(config.snapshot.get(SECRET_TYPE, &name).is_some(), "{name}");
    }
}

#[test]
fn an_incomplete_secret_withholds_and_names_the_missing_entries() {
    let mut view = full_view();
    let mut m = router_fixtures::material("server");
    m.ca_pem.clear();
    m.private_key_pem = "  ".into();
    view.upsert_secret("skupper-site-server", m, 30);
    let config = translate_router(&view);
    assert!(config.snapshot.resources(ROUTER_ACCESS_TYPE).is_empty());
    let w = &config.withheld[0];
    assert_eq!(w.kind, "RouterAccess");
    assert!(w.reason.contains("has no tls.key, ca.crt"), "{}", w.reason);
}

#[test]
fn an_edge_site_gets_no_router_access() {
    let mut view = full_view();
    view.upsert(site(true));
    let config = translate_router(&view);
    assert!(config.snapshot.resources(ROUTER_ACCESS_TYPE).is_empty());
    assert!(config.withheld[0].reason.contains("edge site"));
    // Its links are still dialled.
    assert!(config.snapshot.get(LINK_TYPE, "to-dmz-b").is_some());
}

fn targets(config: &meshlink_xds::router::RouterConfig, name: &str) -> Vec<String> {
    let r = config
        .snapshot
        .get(CONNECTOR_TYPE, name)
        .expect("connector");
    meshlink_xds::certify::Connector::decode(r.resource.value.as_slice())
        .expect("decodes")
        .targets
}

#[test]
fn selector_picks_online_dataplanes_by_tag_and_follows_them() {
    let mut view = full_view();
    let config = translate_router(&view);
    assert_eq!(targets(&config, "backend"), ["10.0.0.11:8080"]);
    let pods = &config.selected["backend"];
    assert_eq!(pods.len(), 1);
    assert_eq!(
        (pods[0].name.as_str(), pods[0].ip.as_str()),
        ("default/backend-1", "10.0.0.11")
    );
    assert_eq!(targets(&config, "pg"), ["db.internal:5432"]);

    // backend-2 comes online; backend-1 goes offline.
    view.upsert(dataplane("backend-2", "10.0.0.12", "backend", true, 40));
    view.upsert(dataplane("backend-1", "10.0.0.11", "backend", false, 41));
    assert_eq!(
        targets(&translate_router(&view), "backend"),
        ["10.0.0.12:8080"]
    );

    // includeNotReady counts offline ones too.
    view.upsert(selector_connector(
        "backend",
        "backend",
        "app=backend",
        true,
    ));
    assert_eq!(
        targets(&translate_router(&view), "backend"),
        ["10.0.0.11:8080", "10.0.0.12:8080"]
    );
    // An older state of a Dataplane never overwrites a newer one.
    view.upsert(dataplane("backend-2", "10.0.0.99", "backend", true, 39));
    assert!(targets(&translate_router(&view), "backend").contains(&"10.0.0.12:8080".to_owned()));
}

#[test]
fn a_dataplane_change_no_selector_can_see_leaves_the_view_unchanged() {
    let mut view = full_view();
    // The same Dataplane again, at a newer revision with a label: nothing
    // a selector reads (inbound tags and addresses, online) changed.
    let mut same = dataplane("backend-1", "10.0.0.11", "backend", true, 50);
    same.metadata.labels.insert("team".into(), "a".into());
    assert!(
        !view.upsert(same),
        "a change no selector reads is no change"
    );
    // Going offline is one.
    assert!(view.upsert(dataplane("backend-1", "10.0.0.11", "backend", false, 51)));
    // So is a new address.
    assert!(view.upsert(dataplane("backend-1", "10.0.0.21", "backend", false, 52)));
    let held = &view.dataplanes[&("default".to_owned(), "backend-1".to_owned())];
    assert!(!held.online);
    assert_eq!(held.inbounds[0].address, "10.0.0.21");
}
