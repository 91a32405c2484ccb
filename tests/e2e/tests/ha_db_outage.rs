//! Issue 11 acceptance: PostgreSQL stops for 30 s (`MESHLINK_OUTAGE_SECS`)
//! under traffic, with two replicas on it. The test runs its own server
//! (`scripts/pg-test-server` in a private directory), so stopping it
//! disturbs no other test.
//!
//! Proxies see no failed request; API writes during the outage get 503
//! naming the database; a writer that keeps applying through the outage
//! finds every write it was told succeeded; and after the server returns
//! the API and Certify work again without restarting a control plane.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use meshlink_e2e::app::{HttpApp, Traffic};
use meshlink_e2e::proxy::{self, PairPorts, Sidecar, SidecarOptions};
use meshlink_e2e::replicas::Replicas;
use meshlink_e2e::{PrivatePostgres, eventually, free_port, run_cli};

const READY: Duration = Duration::from_secs(60);

fn mesh(name: &str) -> String {
    format!("type: Mesh\nname: {name}\n")
}

#[test]
fn a_database_outage_drops_no_request_refuses_writes_clearly_and_loses_nothing() {
    let outage = Duration::from_secs(
        std::env::var("MESHLINK_OUTAGE_SECS")
            .ok()
            .map(|s| s.parse().expect("MESHLINK_OUTAGE_SECS is seconds"))
            .unwrap_or(30),
    );
    let pg = PrivatePostgres::start(free_port());
    pg.create("ha");
    let mut r = Replicas::prepare(2, &pg.database_url("ha"), "3s");
    r.start_all();
    let backend_app = HttpApp::start("backend app");
    let web_app = HttpApp::start("web app");
    let ports = PairPorts::with_apps(web_app.port(), backend_app.port());
    // Certificates outlive the outage several times over: a proxy cannot
    // serve mTLS with an expired certificate, whatever the control plane.
    proxy::apply_pair(&r.cps[0], &ports, &format!("{}s", outage.as_secs() * 4));
    let dir = tempfile::tempdir().unwrap();
    let start = |r: &Replicas, name: &str| {
        let token = dir.path().join(format!("{name}.token"));
        proxy::write_token(&r.cps[0], &token, name);
        let mut opts = SidecarOptions::new(&r.cps[0], &token, name);
        opts.cp_url = r.xds_urls();
        let mut s = Sidecar::spawn(&opts);
        s.wait_ready(READY);
        s
    };
    let (mut web, mut backend) = (start(&r, "web-1"), start(&r, "backend-1"));
    let to_backend = Traffic::start(ports.web_outbound, "/name", b"backend app\n");
    let to_web = Traffic::start(ports.backend_outbound, "/name", b"web app\n");

    // A writer that keeps applying new Meshes through the outage and
    // remembers which ones the API acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let (server, token) = (r.cps[0].server(), r.cps[0].token().to_owned());
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut acked, mut refused, mut n) = (Vec::new(), Vec::new(), 0);
            while !stop.load(Ordering::Relaxed) {
                let name = format!("m-{n}");
                n += 1;
                let out = run_cli(
                    &["apply", "-f", "-"],
                    &[("MESHLINK_SERVER", &server), ("MESHLINK_TOKEN", &token)],
                    Some(&mesh(&name)),
                );
                if out.code == 0 {
                    acked.push(name);
                } else {
                    refused.push(out.stderr);
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
            (acked, refused)
        })
    };
    eventually("a few acknowledged writes", READY, || {
        (r.cps[0].cli(&["get", "meshes"]).stdout.lines().count() > 5).then_some(())
    });

    pg.pause();
    let paused = Instant::now();
    println!("PostgreSQL stopped");
    // A write now gets 503 naming the database.
    let (status, body) = eventually("a 503 from the API", READY, || {
        let (status, body) = r.cps[1].api(
            "POST",
            "/api/v1/meshes",
            Some(&serde_json::json!({
                "apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
                "metadata": {"name": "during-outage"}, "spec": {}
            })),
        );
        assert!(
            status == 503 || status == 0 || status == 201,
            "unexpected answer during the outage: {status} {body}"
        );
        (status == 503).then_some((status, body))
    });
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("database is unavailable") && message.contains("retry"),
        "{status} {body}"
    );
    println!("API write during the outage: {status} {message}");
    // The leader cannot renew its lease: it steps down.
    for cp in &r.cps {
        eventually("no replica to lead without the database", READY, || {
            (cp.metric(&["meshlink_cp_leader"]) == 0.0).then_some(())
        });
    }
    println!(
        "no leader {:.1} s into the outage",
        paused.elapsed().as_secs_f64()
    );
    while paused.elapsed() < outage {
        for s in [&mut web, &mut backend] {
            assert_eq!(s.exit_status(), None, "{}", s.logs());
        }
        for cp in &mut r.cps {
            assert_eq!(cp.exit_status(), None, "{}", cp.logs());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    pg.resume();
    let resumed = Instant::now();
    println!(
        "PostgreSQL back after {:.1} s",
        paused.elapsed().as_secs_f64()
    );
    eventually("API writes to work again", READY, || {
        (r.cps[1]
            .cli_stdin(&["apply", "-f", "-"], Some(&mesh("after-outage")))
            .code
            == 0)
            .then_some(())
    });
    println!(
        "API writes work again {:.1} s after the database returned",
        resumed.elapsed().as_secs_f64()
    );
    eventually("one leader again", READY, || {
        let leaders: f64 = r
            .cps
            .iter()
            .map(|cp| cp.metric(&["meshlink_cp_leader"]))
            .sum();
        (leaders == 1.0).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    let (acked, refused) = writer.join().expect("writer");
    let (a, b) = (to_backend.stop(), to_web.stop());
    assert_eq!(
        (a.failed, b.failed),
        (0, 0),
        "failed requests: {:?} {:?}",
        a.failures,
        b.failures
    );
    println!(
        "{} + {} requests, none failed; {} writes acknowledged, {} refused",
        a.ok,
        b.ok,
        acked.len(),
        refused.len()
    );
    assert!(!refused.is_empty(), "the writer ran into the outage");
    assert!(
        refused.iter().all(|e| e.contains("database")),
        "every refusal names the database: {:?}",
        refused.first()
    );
    let meshes = r.cps[0].cli(&["get", "meshes", "-o", "json"]).success();
    let listed: serde_json::Value = serde_json::from_str(&meshes.stdout).unwrap();
    let names: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["metadata"]["name"].as_str().or(m["name"].as_str()))
        .collect();
    let lost: Vec<&String> = acked
        .iter()
        .filter(|n| !names.contains(&n.as_str()))
        .collect();
    assert!(lost.is_empty(), "acknowledged writes lost: {lost:?}");

    // Certify works again: a restarted sidecar gets a new certificate.
    let before = web.serial();
    web.kill9();
    let web = start(&r, "web-1");
    assert_ne!(web.serial(), before, "a new certificate from Certify");
    assert_eq!(web.ready().0, 200);
    println!("a restarted sidecar got its certificate after the outage");
}

#[test]
fn a_replica_started_before_its_database_waits_for_it_instead_of_exiting() {
    let pg = PrivatePostgres::start(free_port());
    pg.create("late");
    pg.pause();
    let mut r = Replicas::prepare(1, &pg.database_url("late"), "3s");
    r.cps[0].spawn();
    eventually(
        "the replica to say it waits for the database",
        READY,
        || {
            assert_eq!(r.cps[0].exit_status(), None, "{}", r.cps[0].logs());
            r.cps[0]
                .logs()
                .contains("waiting for the database to accept connections")
                .then_some(())
        },
    );
    pg.resume();
    r.cps[0].wait_ready();
    r.cps[0].cli(&["get", "meshes"]).success();
}
