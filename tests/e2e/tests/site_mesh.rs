//! Issue 10 Acceptance 7, the network-to-mesh half: a Connector with only
//! `selector: app=backend` (no `host`) reaches the Dataplanes tagged
//! `app: backend` in its site, at each one's address and the Connector's
//! port (as Skupper reaches pods), and stops using one that goes offline.

use std::net::SocketAddr;
use std::time::Duration;

use meshlink_e2e::app::{HttpApp, http_get_at};
use meshlink_e2e::proxy::{Sidecar, SidecarOptions, write_token};
use meshlink_e2e::site::{Site, free_port_on, site_host};

const DEADLINE: Duration = Duration::from_secs(60);
const APP_PORT: u16 = 8080;

fn dataplane(name: &str, address: &str, inbound: u16) -> String {
    format!(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {{name: {name}, mesh: default}}\nspec:\n  networking:\n    address: {address}\n    inbound: [{{port: {inbound}, servicePort: {APP_PORT}, tags: {{kuma.io/service: backend, app: backend}}}}]\n"
    )
}

fn name_via(site: &Site, port: u16) -> Option<String> {
    let addr: SocketAddr = format!("{}:{port}", site.host()).parse().unwrap();
    http_get_at(addr, "/name")
        .ok()
        .filter(|r| r.status == 200)
        .map(|r| r.text().trim().to_owned())
}

fn selected(site: &Site) -> Vec<String> {
    let (_, c) = site.cp.api("GET", "/api/v1/connectors/backend", None);
    c["status"]["selectedPods"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_selector_connector_balances_over_online_dataplanes_and_drops_an_offline_one() {
    let dir = tempfile::tempdir().unwrap();
    let a = Site::start("mesh-a", 2);
    let b = Site::start("mesh-b", 3);
    b.link_to(&a, None);
    // Two workloads in site A, each on an address of its own, with a sidecar.
    let hosts = [site_host(5), site_host(6)];
    let apps: Vec<HttpApp> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| HttpApp::start_at(&format!("backend-{}", i + 1), h, APP_PORT))
        .collect();
    let mut yaml =
        "apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {name: default}\nspec: {}\n"
            .to_owned();
    for (i, h) in hosts.iter().enumerate() {
        yaml.push_str("---\n");
        yaml.push_str(&dataplane(
            &format!("backend-{}", i + 1),
            h,
            free_port_on(h),
        ));
    }
    a.apply(&yaml);
    let mut sidecars: Vec<Sidecar> = (1..=2)
        .map(|i| {
            let name = format!("backend-{i}");
            let token = dir.path().join(format!("{name}.token"));
            write_token(&a.cp, &token, &name);
            let mut s = Sidecar::spawn(&SidecarOptions::new(&a.cp, &token, &name));
            s.wait_ready(DEADLINE);
            s
        })
        .collect();

    a.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {{name: backend}}\nspec: {{routingKey: backend, selector: app=backend, port: {APP_PORT}}}\n"
    ));
    let port = free_port_on(b.host());
    b.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Listener\nmetadata: {{name: backend}}\nspec: {{routingKey: backend, host: backend, port: {port}}}\n"
    ));
    b.wait_listener_matched("backend", DEADLINE);
    meshlink_e2e::eventually("both Dataplanes selected", DEADLINE, || {
        (selected(&a) == ["default/backend-1", "default/backend-2"]).then_some(())
    });
    let mut seen = std::collections::BTreeSet::new();
    meshlink_e2e::eventually("both Dataplanes serve", DEADLINE, || {
        seen.extend(name_via(&b, port));
        (seen.len() == 2).then_some(())
    });

    // backend-2's proxy stops: its Dataplane goes offline and is dropped.
    sidecars[1].terminate();
    meshlink_e2e::eventually("backend-2 deselected", DEADLINE, || {
        (selected(&a) == ["default/backend-1"]).then_some(())
    });
    // The router follows its configuration; after that, only backend-1.
    meshlink_e2e::eventually("the router's connector has one target", DEADLINE, || {
        let dump = a.router().config_dump();
        let targets = dump["connectors"][0]["targets"].as_array()?.len();
        (targets == 1).then_some(())
    });
    for _ in 0..20 {
        let name = meshlink_e2e::eventually("a request served", DEADLINE, || name_via(&b, port));
        assert_eq!(name, "backend-1");
    }
    drop(apps);
}

/// The mesh-to-network half: a mesh Dataplane's outbound names a routing
/// key; its sidecar sends the connection to this site's router Listener for
/// the key, and the router carries it over the mTLS link to the Connector
/// in the other site.
#[test]
fn a_mesh_outbound_to_a_routing_key_reaches_a_connector_in_another_site() {
    let dir = tempfile::tempdir().unwrap();
    let a = Site::start("m2n-a", 2);
    let b = Site::start("m2n-b", 3);
    b.link_to(&a, None);
    let app = HttpApp::start("in-a");
    a.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {{name: web}}\nspec: {{routingKey: web, host: 127.0.0.1, port: {}}}\n",
        app.port()
    ));
    // A mesh workload in B: mTLS mesh, one Dataplane whose outbound names
    // the routing key instead of a mesh service.
    let outbound = meshlink_e2e::free_port();
    let inbound = meshlink_e2e::free_port();
    b.apply(&format!(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {{name: default}}\nspec:\n  mtls:\n    enabledBackend: ca-1\n    backends: [{{name: ca-1, type: builtin}}]\n---\napiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {{name: client-1, mesh: default}}\nspec:\n  networking:\n    address: 127.0.0.1\n    inbound: [{{port: {inbound}, servicePort: {}, tags: {{kuma.io/service: client}}}}]\n    outbound: [{{port: {outbound}, routingKey: web}}]\n",
        meshlink_e2e::free_port()
    ));
    let token = dir.path().join("client-1.token");
    write_token(&b.cp, &token, "client-1");
    let mut sidecar = Sidecar::spawn(&SidecarOptions::new(&b.cp, &token, "client-1"));
    sidecar.wait_ready(DEADLINE);
    // No Listener for the key yet: the outbound refuses connections.
    assert!(meshlink_e2e::app::http_get(outbound, "/name").is_err());
    // B's router listens for the key on B's own address; the sidecar's
    // outbound follows the new Listener.
    let listener_port = free_port_on(b.host());
    b.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Listener\nmetadata: {{name: web}}\nspec: {{routingKey: web, host: \"{}\", port: {listener_port}}}\n",
        b.host()
    ));
    b.wait_listener_matched("web", DEADLINE);
    let name = meshlink_e2e::eventually("the workload reaches site A", DEADLINE, || {
        meshlink_e2e::app::http_get(outbound, "/name")
            .ok()
            .filter(|r| r.status == 200)
            .map(|r| r.text().trim().to_owned())
    });
    assert_eq!(name, "in-a");
    let cluster = &sidecar.config_dump()["clusters"];
    assert!(cluster.to_string().contains("network:web"), "{cluster}");
}
