//! A site router's Connector `selector` over a Dataplane whose matching
//! inbound has its own `address`: the router's target and the Connector's
//! `selectedPods` IP are that address, not the Dataplane's.

mod router_fixtures;
mod translate_fixtures;

use meshlink_api::Resource;
use meshlink_api::spec::Spec;
use meshlink_xds::router::translate_router;
use meshlink_xds::translate::CONNECTOR_TYPE;
use prost::Message;
use router_fixtures::{dataplane, full_view};

/// `r` (a fixture Dataplane) with its inbound on `address`.
fn on_address(mut r: Resource, address: &str) -> Resource {
    let Spec::Dataplane(dp) = &mut r.spec else {
        panic!("not a Dataplane")
    };
    dp.networking.inbound[0].address = Some(address.to_owned());
    r
}

#[test]
fn a_selected_inbound_is_reached_at_its_own_address() {
    let mut view = full_view();
    view.upsert(on_address(
        dataplane("backend-1", "10.0.0.11", "backend", true, 40),
        "10.0.1.11",
    ));
    let config = translate_router(&view);
    let connector = config
        .snapshot
        .get(CONNECTOR_TYPE, "backend")
        .expect("connector");
    let targets = meshlink_xds::certify::Connector::decode(connector.resource.value.as_slice())
        .expect("decodes")
        .targets;
    assert_eq!(targets, ["10.0.1.11:8080"]);
    assert_eq!(config.selected["backend"][0].ip, "10.0.1.11");
}
