//! Issue 10 Acceptance 5, first half: `kill -9` the dialling site's
//! router while flows run, then restart it. Link and Site status show the
//! outage and then the recovery, on both sides (the accepting site lists
//! the link as incoming, down while the dialling router is dead, with the
//! cause named); flows resume once the link is back.
//! (The second half, the link's path cut in a network namespace, is
//! `site_netns.rs`.)

use std::net::SocketAddr;
use std::time::Duration;

use meshlink_e2e::app::{HttpApp, http_get_at};
use meshlink_e2e::site::{Site, condition, free_port_on};

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

fn network_links_up(site: &Site) -> usize {
    site.site()["status"]["network"]
        .as_array()
        .map(|sites| {
            sites
                .iter()
                .flat_map(|s| s["links"].as_array().cloned().unwrap_or_default())
                .filter(|l| l["operational"] == true)
                .count()
        })
        .unwrap_or(0)
}

/// The state of the incoming link from `peer` in `site`'s status.
fn incoming_from(site: &Site, peer: &str) -> Option<String> {
    site.site()["status"]["incomingLinks"]
        .as_array()?
        .iter()
        .find(|l| l["remoteSiteName"] == peer)
        .and_then(|l| l["status"].as_str().map(str::to_owned))
}

#[test]
fn kill9_of_a_router_shows_the_outage_and_flows_resume_after_restart() {
    let mut a = Site::start("out-a", 2);
    let mut b = Site::start("out-b", 3);
    let link = b.link_to(&a, None);
    let app = HttpApp::start("in-a");
    a.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {{name: web}}\nspec: {{routingKey: web, host: 127.0.0.1, port: {}}}\n",
        app.port()
    ));
    let port = free_port_on(b.host());
    b.apply(&format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Listener\nmetadata: {{name: web}}\nspec: {{routingKey: web, host: web, port: {port}}}\n"
    ));
    b.wait_listener_matched("web", DEADLINE);
    meshlink_e2e::eventually("a flow from B to A", DEADLINE, || name_via(&b, port));

    // The accepting side sees the link too: incoming, from out-b, up.
    meshlink_e2e::eventually("A lists the incoming link up", DEADLINE, || {
        (incoming_from(&a, "out-b").as_deref() == Some("Operational")).then_some(())
    });
    let out = a.cp.cli(&["get", "links"]);
    assert!(
        out.stdout.contains("INCOMING (dialled by other sites)") && out.stdout.contains("out-b"),
        "{}",
        out.stdout
    );

    b.router.as_mut().unwrap().kill9();
    meshlink_e2e::eventually("B's Link not operational", DEADLINE, || {
        (link_operational(&b, &link) == Some(false)).then_some(())
    });
    let (_, l) = b.cp.api("GET", &format!("/api/v1/links/{link}"), None);
    let op = l["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Operational").cloned())
        .unwrap_or_default();
    // The cause is named, with since when, and the peer is kept: in the
    // API, and in `network status` (not "(down), (down)" with blank
    // names).
    let message = op["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("this site's router is not reporting to this control plane (since "),
        "{l}"
    );
    assert_eq!(l["status"]["status"], "Down", "{l}");
    assert_eq!(l["status"]["remoteSiteName"], "out-a", "{l}");
    let out = b.cp.cli(&["network", "status"]);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stdout.contains("out-a (down)") && !out.stdout.contains(" (down),  (down)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("this site's router is not reporting"),
        "{}",
        out.stdout
    );
    let links = out
        .stdout
        .lines()
        .find(|line| line.starts_with(&link))
        .unwrap_or_default()
        .to_owned();
    assert!(links.contains("Down") && links.contains("out-a"), "{links}");
    // ... and goes down there when the dialling site dies.
    meshlink_e2e::eventually("A lists the incoming link down", DEADLINE, || {
        (incoming_from(&a, "out-b").as_deref() == Some("Down")).then_some(())
    });
    let out = a.cp.cli(&["get", "links"]);
    let row = out
        .stdout
        .lines()
        .find(|l| l.starts_with("out-b"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        row.contains("Down") && row.contains("no link from out-b since"),
        "{}",
        out.stdout
    );
    meshlink_e2e::eventually("A sees no operational link", DEADLINE, || {
        let site = a.site();
        (site["status"]["sitesInNetwork"] == 1 && network_links_up(&a) == 0).then_some(())
    });
    meshlink_e2e::eventually("B's Site not Ready", DEADLINE, || {
        (b.site()["status"]["status"] != "Ready").then_some(())
    });
    assert!(
        name_via(&b, port).is_none(),
        "nothing listens while B's router is down"
    );

    // Restart: same token, same configuration from the control plane.
    b.spawn_router();
    b.router.as_mut().unwrap().wait_ready(DEADLINE);
    b.wait_link_operational(&link, DEADLINE);
    meshlink_e2e::eventually("A sees the link again", DEADLINE, || {
        (a.site()["status"]["sitesInNetwork"] == 2 && network_links_up(&a) > 0).then_some(())
    });
    meshlink_e2e::eventually("A lists the incoming link up again", DEADLINE, || {
        (incoming_from(&a, "out-b").as_deref() == Some("Operational")).then_some(())
    });
    meshlink_e2e::eventually("B's Site Ready again", DEADLINE, || {
        (b.site()["status"]["status"] == "Ready").then_some(())
    });
    let name = meshlink_e2e::eventually("flows resume", DEADLINE, || name_via(&b, port));
    assert_eq!(name, "in-a");
    assert!(
        a.router.as_mut().unwrap().exit_status().is_none(),
        "A's router stayed up"
    );
}
