//! Link client credential renewal with the real binaries: site B redeems a
//! grant of site A whose link certificates live 20 s (the AccessGrant label
//! `meshlink.dev/link-cert-lifetime`). B's control plane renews the Secret
//! at A's grant server before it expires, B's router takes each renewed
//! certificate over SDS, and the link that came up with the first
//! certificate stays up (same connection, no reconnect) and keeps carrying
//! requests after that first certificate's expiry.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use meshlink_e2e::app::{HttpApp, http_get_at};
use meshlink_e2e::site::{Site, free_port_on};

const DEADLINE: Duration = Duration::from_secs(60);
const EXPIRY: &str = "meshlink_link_credential_expiration_timestamp_seconds{credential=\"to-a\"}";

fn name_via(site: &Site, port: u16) -> Option<String> {
    let addr: SocketAddr = format!("{}:{port}", site.host()).parse().unwrap();
    http_get_at(addr, "/name")
        .ok()
        .filter(|r| r.status == 200)
        .map(|r| r.text().trim().to_owned())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn a_link_keeps_carrying_traffic_past_its_first_client_certificates_expiry() {
    let a = Site::start("renew-a", 2);
    let b = Site::start("renew-b", 3);
    a.apply(
        "apiVersion: skupper.io/v2alpha1\nkind: AccessGrant\nmetadata: {name: short, labels: {meshlink.dev/link-cert-lifetime: 20s}}\nspec: {redemptionsAllowed: 1}\n",
    );
    a.cp.cli(&["wait", "--for=condition=ready", "accessgrant/short"])
        .success();
    let (_, grant) = a.cp.api("GET", "/api/v1/accessgrants/short", None);
    let s = &grant["status"];
    let token = serde_json::json!({
        "apiVersion": "skupper.io/v2alpha1",
        "kind": "AccessToken",
        "metadata": {"name": "to-a"},
        "spec": {"url": s["url"], "code": s["code"], "ca": s["ca"]},
    });
    b.apply(&serde_yaml_ng::to_string(&token).unwrap());
    b.wait_link_operational("to-a", DEADLINE);

    let app = HttpApp::start("in-a");
    a.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {{name: web}}\nspec: {{routingKey: web, host: \"127.0.0.1\", port: {}}}\n",
        app.port()
    ));
    let port = free_port_on(b.host());
    b.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Listener\nmetadata: {{name: web}}\nspec: {{routingKey: web, host: web, port: {port}}}\n"
    ));
    b.wait_listener_matched("web", DEADLINE);
    let served = meshlink_e2e::eventually("a request from B served in A", DEADLINE, || {
        name_via(&b, port)
    });
    assert_eq!(served, "in-a");

    let before = b.router().config_dump()["links"]["to-a"].clone();
    assert_eq!(before["state"], "up", "{before}");
    let first_expiry = b.router().metric(EXPIRY);
    assert!(
        first_expiry > 0.0,
        "the router publishes the credential's notAfter"
    );
    // B's router holds a renewed certificate, then time passes the first
    // certificate's notAfter.
    meshlink_e2e::eventually("a renewed certificate at B's router", DEADLINE, || {
        (b.router().metric(EXPIRY) > first_expiry).then_some(())
    });
    meshlink_e2e::eventually("the first certificate's expiry", DEADLINE, || {
        (unix_now() > first_expiry + 1.0).then_some(())
    });
    let served = meshlink_e2e::eventually("a request after the expiry", DEADLINE, || {
        name_via(&b, port)
    });
    assert_eq!(served, "in-a");
    let after = b.router().config_dump()["links"]["to-a"].clone();
    assert_eq!(after["state"], "up", "{after}");
    assert_eq!(
        after["reconnects"], before["reconnects"],
        "{before} -> {after}"
    );
    assert_eq!(
        after["connection"], before["connection"],
        "{before} -> {after}"
    );
    assert!(
        b.router().metric(EXPIRY) > unix_now(),
        "B's router holds an unexpired certificate"
    );
    let (_, link) = b.cp.api("GET", "/api/v1/links/to-a", None);
    assert_eq!(
        meshlink_e2e::site::condition(&link, "Operational"),
        Some(true),
        "{link}"
    );
}
