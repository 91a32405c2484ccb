//! Issue 11 acceptance: proxies on control-plane replicas sharing the
//! PostgreSQL server that `.ci/run` starts. `kill -9` of the replica two
//! sidecars are connected to, and a rolling restart (SIGTERM) of three
//! replicas, both under continuous traffic: no request fails, the
//! sidecars move to another replica, their Dataplanes are never written
//! offline, and certificates keep renewing afterwards.

use std::time::{Duration, Instant};

use meshlink_e2e::app::{HttpApp, Traffic};
use meshlink_e2e::proxy::{self, PairPorts, Sidecar, SidecarOptions};
use meshlink_e2e::replicas::{Replicas, dataplane_history, offline_after_online};
use meshlink_e2e::{eventually, fresh_postgres_database};

const READY: Duration = Duration::from_secs(60);

const ROTATED_MESH: &str = "apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: default}
spec:
  mtls:
    enabledBackend: ca-2
    backends:
      - {name: ca-1, type: builtin, dpCert: {rotation: {expiration: 40s}}}
      - {name: ca-2, type: builtin, dpCert: {rotation: {expiration: 40s}}}
";

/// The pair's sidecars, given every replica's URL.
fn sidecars(r: &Replicas, dir: &std::path::Path) -> (Sidecar, Sidecar) {
    let start = |name: &str| {
        let token = dir.join(format!("{name}.token"));
        proxy::write_token(&r.cps[0], &token, name);
        let mut opts = SidecarOptions::new(&r.cps[0], &token, name);
        opts.cp_url = r.xds_urls();
        Sidecar::spawn(&opts)
    };
    let (mut web, mut backend) = (start("web-1"), start("backend-1"));
    web.wait_ready(READY);
    backend.wait_ready(READY);
    (web, backend)
}

/// The replica instance the Dataplane's status names, if online.
fn held_by(r: &Replicas, ask: usize, name: &str) -> Option<String> {
    let (_, dp) = r.cps[ask].api(
        "GET",
        &format!("/api/v1/dataplanes/{name}?mesh=default"),
        None,
    );
    (dp["status"]["online"] == true)
        .then(|| {
            dp["status"]["controlPlaneInstance"]
                .as_str()
                .map(str::to_owned)
        })
        .flatten()
}

fn assert_never_offline(r: &Replicas, ask: usize) {
    for name in ["web-1", "backend-1"] {
        let (history, deleted) = dataplane_history(&r.cps[ask], name);
        assert!(!deleted, "{name} was deleted");
        let offline = offline_after_online(&history);
        assert!(
            offline.is_empty(),
            "{name} was written offline while its proxy ran: {offline:?}"
        );
    }
}

#[test]
fn killing_the_replica_under_two_sidecars_moves_them_without_a_failed_request() {
    let db = fresh_postgres_database();
    let mut r = Replicas::prepare(2, &db, "3s");
    // Only cp-1 runs when the sidecars start, so both connect to it.
    r.cps[0].restart();
    let backend_app = HttpApp::start("backend app");
    let web_app = HttpApp::start("web app");
    let ports = PairPorts::with_apps(web_app.port(), backend_app.port());
    proxy::apply_pair(&r.cps[0], &ports, "40s");
    let dir = tempfile::tempdir().unwrap();
    let (web, backend) = sidecars(&r, dir.path());
    r.cps[1].restart();
    for name in ["web-1", "backend-1"] {
        eventually("the Dataplane online on cp-1", READY, || {
            (held_by(&r, 1, name).as_deref() == Some("cp-1")).then_some(())
        });
    }
    let serials = [web.serial(), backend.serial()];
    let to_backend = Traffic::start(ports.web_outbound, "/name", b"backend app\n");
    let to_web = Traffic::start(ports.backend_outbound, "/name", b"web app\n");
    eventually("traffic flowing", READY, || {
        (to_backend.snapshot().ok > 20 && to_web.snapshot().ok > 20).then_some(())
    });
    // The sidecars' traffic figures live on cp-1, which holds their
    // streams; cp-2 asks it and answers with them.
    eventually("backend-1's inbound traffic, asked of cp-2", READY, || {
        let (code, t) = r.cps[1].api("GET", "/api/v1/traffic", None);
        assert_eq!(code, 200, "{t}");
        let dp = t["dataplanes"]
            .as_array()?
            .iter()
            .find(|d| d["name"] == "backend-1")?
            .clone();
        assert_eq!(dp["reportedTo"], "cp-1", "{t}");
        let inbound = dp["inbounds"]
            .as_array()?
            .iter()
            .find(|i| i["port"] == ports.backend_inbound)?
            .clone();
        (inbound["connectionsOpened"].as_u64() > Some(0)
            && inbound["bytesReceived"].as_u64() > Some(0)
            && inbound["bytesSent"].as_u64() > Some(0))
        .then_some(())
    });

    r.cps[0].kill9();
    let killed = Instant::now();
    for name in ["web-1", "backend-1"] {
        eventually("the Dataplane online on cp-2", READY, || {
            (held_by(&r, 1, name).as_deref() == Some("cp-2")).then_some(())
        });
        println!(
            "{name} online on cp-2 {:.2} s after cp-1 was killed",
            killed.elapsed().as_secs_f64()
        );
    }
    // The next certificate rotation goes through cp-2.
    for (s, before) in [&web, &backend].into_iter().zip(serials) {
        eventually("a renewed certificate", Duration::from_secs(120), || {
            let now = s.serial();
            (now.is_some() && now != before).then_some(())
        });
    }
    println!("both certificates renewed through cp-2");
    // A CA rotation on the surviving replica: both sidecars take the new
    // root and renew from the new CA, and the rotation ends (the leader,
    // now cp-2, ends it once no proxy holds a certificate of the old CA).
    let renewed = [web.serial(), backend.serial()];
    r.cps[1]
        .cli_stdin(&["apply", "-f", "-"], Some(ROTATED_MESH))
        .success();
    for (s, old) in [&web, &backend].into_iter().zip(renewed) {
        eventually("the new root", READY, || {
            (s.trust_roots().len() == 2).then_some(())
        });
        eventually("a certificate from the new CA", READY, || {
            s.serial().filter(|now| Some(now) != old.as_ref())
        });
    }
    for s in [&web, &backend] {
        eventually(
            "the rotation to end (old root dropped)",
            Duration::from_secs(120),
            || (s.trust_roots().len() == 1).then_some(()),
        );
    }
    println!(
        "CA rotation through cp-2 done {:.1} s after the kill",
        killed.elapsed().as_secs_f64()
    );
    let (a, b) = (to_backend.stop(), to_web.stop());
    assert_eq!(
        (a.failed, b.failed),
        (0, 0),
        "failed requests: {:?} {:?}",
        a.failures,
        b.failures
    );
    println!("{} + {} requests, none failed", a.ok, b.ok);
    assert_never_offline(&r, 1);
}

#[test]
fn a_rolling_restart_of_three_replicas_fails_no_request() {
    let db = fresh_postgres_database();
    let mut r = Replicas::prepare(3, &db, "3s");
    r.start_all();
    let backend_app = HttpApp::start("backend app");
    let web_app = HttpApp::start("web app");
    let ports = PairPorts::with_apps(web_app.port(), backend_app.port());
    proxy::apply_pair(&r.cps[0], &ports, "1h");
    let dir = tempfile::tempdir().unwrap();
    let (mut web, mut backend) = sidecars(&r, dir.path());
    let to_backend = Traffic::start(ports.web_outbound, "/name", b"backend app\n");
    let to_web = Traffic::start(ports.backend_outbound, "/name", b"web app\n");
    for i in 0..3 {
        let began = Instant::now();
        let stopped = format!("cp-{}", i + 1);
        assert_eq!(r.cps[i].terminate(), Some(0), "{stopped} exits cleanly");
        let ask = (i + 1) % 3;
        // With the replica down, both proxies are connected elsewhere.
        for (s, name) in [(&web, "web-1"), (&backend, "backend-1")] {
            eventually("the proxy connected to a running replica", READY, || {
                let on = held_by(&r, ask, name)?;
                (on != stopped && s.metric("meshlink_proxy_xds_connected") == 1.0).then_some(on)
            });
        }
        let moved = began.elapsed();
        r.cps[i].restart();
        let (a, b) = (to_backend.snapshot().ok, to_web.snapshot().ok);
        eventually("traffic flowing after the restart", READY, || {
            (to_backend.snapshot().ok > a + 50 && to_web.snapshot().ok > b + 50).then_some(())
        });
        println!(
            "{stopped}: proxies on another replica {:.2} s after SIGTERM; restarted; {} + {} requests so far",
            moved.as_secs_f64(),
            to_backend.snapshot().ok,
            to_web.snapshot().ok
        );
    }
    let failovers = web.metric("meshlink_proxy_cp_failovers_total")
        + backend.metric("meshlink_proxy_cp_failovers_total");
    assert!(failovers >= 1.0, "the proxies moved at least once");
    let (a, b) = (to_backend.stop(), to_web.stop());
    assert_eq!(
        (a.failed, b.failed),
        (0, 0),
        "failed requests: {:?} {:?}",
        a.failures,
        b.failures
    );
    for s in [&mut web, &mut backend] {
        assert_eq!(s.exit_status(), None, "{}", s.logs());
        assert_eq!(s.ready().0, 200);
    }
    println!("{} + {} requests, none failed", a.ok, b.ok);
    assert_never_offline(&r, 0);
}
