//! Issue 10 Acceptance 7, the network-to-mesh half: a Connector with only
//! `selector: app=backend` (no `host`) reaches the Dataplanes tagged
//! `app: backend` in its site, at each one's address and the Connector's
//! port (as Skupper reaches pods), and stops using one that goes offline;
//! and the mesh-to-network half, over the router's mTLS mesh ingress.

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::path::Path;
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
/// key; its sidecar opens an mTLS connection to this site's router mesh
/// ingress (the key chosen by SNI, the router's SPIFFE ID verified), and
/// the router carries it over the link to the Connector in the other site.
/// No Listener exists in the sidecar's site. The ingress refuses a plain
/// TCP client and a mesh identity that declares no outbound to the key.
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
    // Mesh workloads in B: mTLS mesh; client-1's outbound names the
    // routing key, client-2 has no outbound to it.
    let outbound = meshlink_e2e::free_port();
    b.apply(&format!(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {{name: default}}\nspec:\n  mtls:\n    enabledBackend: ca-1\n    backends: [{{name: ca-1, type: builtin}}]\n---\n{}---\n{}",
        mesh_dataplane("client-1", "client", &format!("[{{port: {outbound}, routingKey: web}}]")),
        mesh_dataplane("client-2", "other", "[]"),
    ));
    let token = dir.path().join("client-1.token");
    write_token(&b.cp, &token, "client-1");
    let mut sidecar = Sidecar::spawn(&SidecarOptions::new(&b.cp, &token, "client-1"));
    sidecar.wait_ready(DEADLINE);
    let name = meshlink_e2e::eventually("the workload reaches site A", DEADLINE, || {
        meshlink_e2e::app::http_get(outbound, "/name")
            .ok()
            .filter(|r| r.status == 200)
            .map(|r| r.text().trim().to_owned())
    });
    assert_eq!(name, "in-a");
    // The cluster is mTLS to the router's mesh ingress, SNI naming the key.
    let sni = meshlink_xds::translate::names::network_sni("web");
    let clusters = sidecar.config_dump()["clusters"].to_string();
    assert!(clusters.contains("network:web"), "{clusters}");
    assert!(clusters.contains(&sni), "{clusters}");
    assert!(
        clusters.contains("spiffe://default/meshlink.dev/router/m2n-b"),
        "{clusters}"
    );
    let (_, listeners) = b.cp.api("GET", "/api/v1/listeners", None);
    assert_eq!(
        listeners["items"].as_array().map(Vec::len),
        Some(0),
        "{listeners}"
    );
    let ingress = b.site()["status"]["meshIngress"]
        .as_str()
        .expect("the Site names the mesh ingress")
        .to_owned();
    let served = app.connections();

    // A plain TCP client on the mesh port gets no flow.
    let mut plain = std::net::TcpStream::connect(&ingress).unwrap();
    plain
        .set_read_timeout(Some(DEADLINE))
        .expect("read timeout");
    let _ = plain.write_all(b"GET /name HTTP/1.0\r\n\r\n");
    let mut reply = Vec::new();
    let _ = plain.read_to_end(&mut reply);
    assert!(!String::from_utf8_lossy(&reply).contains("in-a"));
    meshlink_e2e::eventually("the plain client is counted", DEADLINE, || {
        let n = b
            .router()
            .metric("meshlink_link_mesh_ingress_refused_total{reason=\"not_tls\"}");
        (n >= 1.0).then_some(())
    });

    // A mesh identity without an outbound to the key is refused; the
    // declared one passes (both certified from B's mesh CA with their own
    // Dataplane tokens, over real TLS with openssl).
    let bundle = dir.path().join("bundle.pem");
    let as_client = |dp: &str, service: &str| {
        let key = rcgen::KeyPair::generate().unwrap();
        let token = b.cp.dataplane_token(&["--mesh", "default", "--name", dp]).0;
        let r = meshlink_e2e::certify::certify(
            &b.cp,
            Some(&token),
            "default",
            dp,
            service,
            meshlink_e2e::certify::csr(&key, None),
        )
        .expect("certified");
        std::fs::write(&bundle, r.trust_bundle_pem.concat()).unwrap();
        let cert = dir.path().join(format!("{dp}.crt"));
        let key_file = dir.path().join(format!("{dp}.key"));
        std::fs::write(
            &cert,
            format!("{}{}", r.certificate_pem, r.chain_pem.concat()),
        )
        .unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        openssl_get(&ingress, &sni, &cert, &key_file, &bundle)
    };
    let refused = as_client("client-2", "other");
    assert!(!refused.contains("in-a"), "{refused}");
    meshlink_e2e::eventually("the undeclared identity is counted", DEADLINE, || {
        let n = b
            .router()
            .metric("meshlink_link_mesh_ingress_refused_total{reason=\"not_authorized\"}");
        (n >= 1.0).then_some(())
    });
    assert!(
        b.router()
            .logs()
            .contains("spiffe://default/other may not open flows to routing key \"web\""),
        "{}",
        b.router().logs()
    );
    let allowed = as_client("client-1", "client");
    assert!(allowed.contains("in-a"), "{allowed}");
    // Of these, only the declared identity's request reached the app.
    assert_eq!(app.connections(), served + 1);
}

fn mesh_dataplane(name: &str, service: &str, outbound: &str) -> String {
    format!(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {{name: {name}, mesh: default}}\nspec:\n  networking:\n    address: 127.0.0.1\n    inbound: [{{port: {}, servicePort: {}, tags: {{kuma.io/service: {service}}}}}]\n    outbound: {outbound}\n",
        meshlink_e2e::free_port(),
        meshlink_e2e::free_port()
    )
}

/// `GET /name` through `openssl s_client` with a client certificate and
/// SNI `sni`; returns what came back (empty when refused).
fn openssl_get(addr: &str, sni: &str, cert: &Path, key: &Path, ca: &Path) -> String {
    let mut child = std::process::Command::new("openssl")
        .args([
            "s_client",
            "-quiet",
            "-tls1_3",
            "-connect",
            addr,
            "-servername",
            sni,
        ])
        .arg("-cert")
        .arg(cert)
        .arg("-key")
        .arg(key)
        .arg("-CAfile")
        .arg(ca)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("openssl runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"GET /name HTTP/1.0\r\nConnection: close\r\n\r\n")
        .expect("request written");
    let out = child.wait_with_output().expect("openssl ends");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
