//! Issue 10 Acceptance 5, second half: the link's path is taken down (an
//! interface of a network namespace) while both routers and both control
//! planes keep running. Link and Site status show the outage, then the
//! recovery once the interface is back, and flows resume.
//!
//! Site B runs in its own network namespace with two veth pairs to the
//! root namespace: one carries B's control-plane traffic (the test's API
//! calls, B's router to B's control plane stays inside the namespace),
//! the other the link to site A. Only the link's interface goes down.

use std::net::SocketAddr;
use std::time::Duration;

use meshlink_e2e::app::{HttpApp, http_get_at};
use meshlink_e2e::netns::Netns;
use meshlink_e2e::site::{Site, condition};

const DEADLINE: Duration = Duration::from_secs(60);

fn name_via(site: &Site, port: u16) -> Option<String> {
    let addr: SocketAddr = format!("{}:{port}", site.host()).parse().unwrap();
    http_get_at(addr, "/name")
        .ok()
        .filter(|r| r.status == 200)
        .map(|r| r.text().trim().to_owned())
}

fn link_operational(site: &Site, link: &str) -> Option<bool> {
    let (_, l) = site.cp.api("GET", &format!("/api/v1/links/{link}"), None);
    condition(&l, "Operational")
}

#[test]
fn cutting_the_links_path_shows_the_outage_and_flows_resume_when_it_returns() {
    let ns = Netns::create("b");
    let control = ns.veth(0);
    let path = ns.veth(1);
    // A in the root namespace on the link veth's outer address; B inside.
    let mut a = Site::start_at("ns-a", &path.outer_addr, None);
    let b = Site::start_at("ns-b", &control.inner_addr, Some(ns.name()));
    let link = b.link_to(&a, None);
    let app = HttpApp::start("in-a");
    a.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {{name: web}}\nspec: {{routingKey: web, host: 127.0.0.1, port: {}}}\n",
        app.port()
    ));
    let port = 18080;
    b.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Listener\nmetadata: {{name: web}}\nspec: {{routingKey: web, host: web, port: {port}}}\n"
    ));
    b.wait_listener_matched("web", DEADLINE);
    let name = meshlink_e2e::eventually("a flow from B to A", DEADLINE, || name_via(&b, port));
    assert_eq!(name, "in-a");

    ns.set_link(&path.inner, false);
    meshlink_e2e::eventually("B's Link not operational", DEADLINE, || {
        (link_operational(&b, &link) == Some(false)).then_some(())
    });
    meshlink_e2e::eventually("A's Site sees one site", DEADLINE, || {
        (a.site()["status"]["sitesInNetwork"] == 1).then_some(())
    });
    meshlink_e2e::eventually("B's Site sees one site", DEADLINE, || {
        (b.site()["status"]["sitesInNetwork"] == 1).then_some(())
    });
    let dump = b.router().config_dump();
    assert_ne!(dump["links"][&link]["state"], "up", "{dump}");
    assert!(
        name_via(&b, port).is_none(),
        "no flow while the path is down"
    );

    ns.set_link(&path.inner, true);
    b.wait_link_operational(&link, DEADLINE);
    for s in [&a, &b] {
        meshlink_e2e::eventually(&format!("{} sees two sites", s.name), DEADLINE, || {
            (s.site()["status"]["sitesInNetwork"] == 2).then_some(())
        });
    }
    let name = meshlink_e2e::eventually("flows resume", DEADLINE, || name_via(&b, port));
    assert_eq!(name, "in-a");
    assert!(b.router().metric("meshlink_link_reconnects_total") >= 1.0);
    assert!(a.router.as_mut().unwrap().exit_status().is_none());
}
