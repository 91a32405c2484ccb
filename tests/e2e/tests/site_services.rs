//! Issue 10 Acceptance 2-4 with the real binaries: each site is a control
//! plane plus a router on its own loopback address.
//! - a real TCP service (PostgreSQL, driven by `pgbench`) across two
//!   sites, then the other way over the same link;
//! - three sites in a line, A-B-C, the service in C reached from A;
//! - failover between connectors for one key in B and C when C's router
//!   is killed, with C's connector gone from status (the time it took is
//!   printed).

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use meshlink_e2e::app::{HttpApp, http_get_at};
use meshlink_e2e::site::{Site, free_port_on};

const DEADLINE: Duration = Duration::from_secs(60);

fn listener(name: &str, key: &str, port: u16) -> String {
    format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Listener\nmetadata: {{name: {name}}}\nspec: {{routingKey: {key}, host: {name}, port: {port}}}\n"
    )
}

fn connector(name: &str, key: &str, host: &str, port: u16) -> String {
    format!(
        "apiVersion: skupper.io/v2alpha1\nkind: Connector\nmetadata: {{name: {name}}}\nspec: {{routingKey: {key}, host: \"{host}\", port: {port}}}\n"
    )
}

/// user, password, host, port and database of a postgres:// URL.
fn pg_parts(url: &str) -> (String, String, String, u16, String) {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"));
    let rest = rest.expect("postgres URL");
    let (auth, rest) = rest.split_once('@').expect("user in URL");
    let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
    let (hostport, db) = rest.split_once('/').expect("database in URL");
    let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, "5432"));
    (
        user.into(),
        password.into(),
        host.into(),
        port.parse().expect("port"),
        db.split('?').next().unwrap().into(),
    )
}

/// Runs pgbench against `host:port` (the Listener) and returns its output.
fn pgbench(host: &str, port: u16, user: &str, password: &str, db: &str, args: &[&str]) -> String {
    let out = Command::new("pgbench")
        .args(["-h", host, "-p", &port.to_string(), "-U", user])
        .args(args)
        .arg(db)
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .expect("run pgbench (apt package postgresql-client)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "pgbench {args:?} failed:\n{text}");
    text
}

#[test]
fn postgres_with_pgbench_across_a_link_both_ways() {
    let url = meshlink_e2e::fresh_postgres_database();
    let (user, password, pg_host, pg_port, db) = pg_parts(&url);
    let a = Site::start("west", 2);
    let b = Site::start("east", 3);
    b.link_to(&a, None);

    // Connector in west, Listener in east.
    a.apply(&connector("pg", "pg", &pg_host, pg_port));
    let port = free_port_on(b.host());
    b.apply(&listener("pg", "pg", port));
    b.wait_listener_matched("pg", DEADLINE);
    pgbench(
        b.host(),
        port,
        &user,
        &password,
        &db,
        &["-i", "-s", "1", "-q"],
    );
    let out = pgbench(
        b.host(),
        port,
        &user,
        &password,
        &db,
        &["-c", "4", "-j", "2", "-t", "100"],
    );
    assert!(
        out.contains("number of transactions actually processed: 400/400"),
        "{out}"
    );
    assert!(out.contains("number of failed transactions: 0"), "{out}");

    // The other way on the same link: Connector in east, Listener in west.
    b.apply(&connector("pg-back", "pg-back", &pg_host, pg_port));
    let back = free_port_on(a.host());
    a.apply(&listener("pg-back", "pg-back", back));
    a.wait_listener_matched("pg-back", DEADLINE);
    let out = pgbench(
        a.host(),
        back,
        &user,
        &password,
        &db,
        &["-c", "4", "-j", "2", "-t", "100"],
    );
    assert!(
        out.contains("number of transactions actually processed: 400/400"),
        "{out}"
    );
    // One link carried both directions: east dialled, west accepted.
    let dump = a.router().config_dump();
    let links = dump["links"].as_object().expect("links");
    assert_eq!(links.len(), 1, "{dump}");
    let (_, link) = links.iter().next().unwrap();
    assert_eq!(link["direction"], "accepted", "{dump}");
    let (_, l) = b.cp.api("GET", "/api/v1/connectors/pg-back", None);
    assert_eq!(l["status"]["hasMatchingListener"], true, "{l}");
}

fn name_via(site: &Site, port: u16) -> Option<String> {
    let addr: SocketAddr = format!("{}:{port}", site.host()).parse().unwrap();
    http_get_at(addr, "/name")
        .ok()
        .filter(|r| r.status == 200)
        .map(|r| r.text().trim().to_owned())
}

#[test]
fn three_sites_in_a_line_reach_a_service_two_links_away() {
    let a = Site::start("line-a", 2);
    let b = Site::start("line-b", 3);
    let c = Site::start("line-c", 4);
    a.link_to(&b, None);
    b.link_to(&c, None);
    let app = HttpApp::start("in-c");
    c.apply(&connector("web", "web", "127.0.0.1", app.port()));
    let port = free_port_on(a.host());
    a.apply(&listener("web", "web", port));
    a.wait_listener_matched("web", DEADLINE);
    let name = meshlink_e2e::eventually("a request from A served in C", DEADLINE, || {
        name_via(&a, port)
    });
    assert_eq!(name, "in-c");
    // A's router reports the traffic at its listener (sampled every 10 s);
    // A's control plane serves it, never stored.
    let t = meshlink_e2e::eventually("A's traffic figures for web", DEADLINE, || {
        let (code, t) = a.cp.api("GET", "/api/v1/traffic", None);
        assert_eq!(code, 200, "{t}");
        let web = t["services"]
            .as_array()?
            .iter()
            .find(|k| k["routingKey"] == "web")?
            .clone();
        (web["flowsOpened"].as_u64() >= Some(1)).then_some((t, web))
    });
    let (all, web) = t;
    assert_eq!(all["site"], "line-a", "{all}");
    assert!(web["bytesToConnector"].as_u64() > Some(0), "{web}");
    assert!(web["bytesToListener"].as_u64() > Some(0), "{web}");
    // Every site sees all three.
    for s in [&a, &b, &c] {
        meshlink_e2e::eventually(&format!("{} sees 3 sites", s.name), DEADLINE, || {
            (s.site()["status"]["sitesInNetwork"] == 3).then_some(())
        });
    }
    // A has no link to C: the flow went through B.
    let dump = a.router().config_dump();
    assert_eq!(
        dump["links"].as_object().map(|m| m.len()),
        Some(1),
        "{dump}"
    );
}

#[test]
fn flows_fail_over_from_c_to_b_when_cs_router_dies() {
    let a = Site::start("fo-a", 2);
    let b = Site::start("fo-b", 3);
    let mut c = Site::start("fo-c", 4);
    a.link_to(&b, None);
    a.link_to(&c, None);
    let in_b = HttpApp::start("in-b");
    let in_c = HttpApp::start("in-c");
    b.apply(&connector("web", "web", "127.0.0.1", in_b.port()));
    c.apply(&connector("web", "web", "127.0.0.1", in_c.port()));
    let port = free_port_on(a.host());
    a.apply(&listener("web", "web", port));
    a.wait_listener_matched("web", DEADLINE);
    // Both serve while both are up (balanced over the cheapest).
    let mut seen = std::collections::BTreeSet::new();
    meshlink_e2e::eventually("both B and C serve", DEADLINE, || {
        seen.extend(name_via(&a, port));
        (seen.len() == 2).then_some(())
    });

    c.router.as_mut().unwrap().kill9();
    let killed = Instant::now();
    // A's Site status drops C's connector: C is no longer in the network.
    meshlink_e2e::eventually("C's connector gone from A's status", DEADLINE, || {
        let site = a.site();
        let services = site["status"]["network"].to_string();
        (!services.contains("fo-c")).then_some(())
    });
    // Measured, not asserted (no timing thresholds in tests): the issue's
    // 2 s figure is reported by this line and in docs/BENCHMARKS.md.
    eprintln!(
        "C's connector left A's status {:?} after the kill",
        killed.elapsed()
    );
    // Every request now goes to B.
    for _ in 0..20 {
        let name = meshlink_e2e::eventually("a request served", DEADLINE, || name_via(&a, port));
        assert_eq!(name, "in-b");
    }
}
