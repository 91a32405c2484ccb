//! Issue 11 acceptance with real `meshlink-cp` replicas on the PostgreSQL
//! server that `.ci/run` starts: one CA whoever starts first, leader
//! failover with singleton jobs run once per period, the presence race
//! across replicas, and grant counting across replicas.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use meshlink_e2e::ads::{Delta, connect, delta_request, node, runtime};
use meshlink_e2e::replicas::{Replicas, dataplane_history};
use meshlink_e2e::{eventually, fresh_postgres_database};
use rand::Rng;
use serde_json::Value;
use sqlx::Connection;

const READY: Duration = Duration::from_secs(60);

const MESH_AND_SITE: &str = "\
type: Mesh
name: default
mtls:
  enabledBackend: ca-1
  backends:
    - name: ca-1
      type: builtin
---
apiVersion: skupper.io/v2alpha1
kind: Site
metadata: {name: ha}
spec: {linkAccess: default}
";

/// `SELECT count(*)` of objects of `kind`, and of their creations in the
/// change feed (a regenerated CA would be created twice).
fn count(url: &str, kind: &str) -> (i64, i64) {
    runtime().block_on(async {
        let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
        let objects: i64 = sqlx::query_scalar("SELECT count(*) FROM objects WHERE kind = $1")
            .bind(kind)
            .fetch_one(&mut c)
            .await
            .expect("count objects");
        let created: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM changes WHERE kind = $1 AND change_type = 'created'",
        )
        .bind(kind)
        .fetch_one(&mut c)
        .await
        .expect("count creations");
        (objects, created)
    })
}

#[test]
fn three_replicas_starting_at_once_agree_on_one_of_every_ca_and_key() {
    let db = fresh_postgres_database();
    let mut r = Replicas::prepare(3, &db, "3s");
    r.start_all();
    let read = |i: usize, f: &str| {
        std::fs::read_to_string(r.cps[i].data_dir().join(f)).expect("read data-dir file")
    };
    for i in 1..3 {
        assert_eq!(
            read(i, "cp-tls/ca.pem"),
            read(0, "cp-tls/ca.pem"),
            "one --cp-ca for every replica"
        );
        assert_eq!(
            r.cps[i].token(),
            r.cps[0].token(),
            "one admin token for every replica"
        );
    }
    // Every replica answers with the shared token.
    for cp in &r.cps {
        cp.cli(&["get", "meshes"]).success();
    }
    // The Mesh and Site arrive on one replica; all three controllers race
    // to create their CAs.
    r.cps[0]
        .cli_stdin(&["apply", "-f", "-"], Some(MESH_AND_SITE))
        .success();
    let bundles: Vec<String> = r
        .cps
        .iter()
        .map(|cp| {
            eventually("the mesh CA's trust bundle", READY, || {
                let (status, body) = cp.api("GET", "/api/v1/meshes/default/ca", None);
                (status == 200 && !body["trustBundle"].is_null())
                    .then(|| body["trustBundle"].to_string())
            })
        })
        .collect();
    assert!(bundles.iter().all(|b| b == &bundles[0]), "{bundles:?}");
    // The site CA has issued the Site's router credentials.
    eventually("the site's router credentials", READY, || {
        (r.cps[2]
            .api("GET", "/api/v1/secrets/skupper-site-server", None)
            .0
            == 200)
            .then_some(())
    });
    for kind in [
        "internal.MeshCA",
        "internal.SiteCA",
        "internal.TokenKey",
        "internal.ControlPlaneCA",
        "internal.AdminToken",
        "internal.GrantServerCA",
    ] {
        assert_eq!(count(&db, kind), (1, 1), "{kind}: objects, creations");
    }
    let cps = r.controlplanes(1);
    let items = cps["items"].as_array().expect("items");
    assert_eq!(items.len(), 3, "{cps}");
    let leaders = items.iter().filter(|i| i["leader"] == true).count();
    assert_eq!(leaders, 1, "{cps}");
}

/// Every replica's `meshlink_cp_singleton_runs_total{job}`.
fn runs(r: &Replicas, alive: &[usize], job: &str) -> f64 {
    alive
        .iter()
        .map(|&i| r.cps[i].metric(&["meshlink_cp_singleton_runs_total", job]))
        .sum()
}

#[test]
fn a_killed_leader_is_replaced_within_its_lease_and_each_job_runs_once_per_period() {
    let db = fresh_postgres_database();
    // Lease 2 s: the jobs run every 4 s.
    let mut r = Replicas::prepare(3, &db, "2s");
    r.start_all();
    let leader = r.wait_leader(0, READY);
    let leads = |r: &Replicas, i: usize| r.cps[i].metric(&["meshlink_cp_leader"]);
    assert_eq!(leads(&r, leader), 1.0);
    // Let the first leader run a few periods.
    eventually("three periods of dataplane-gc", READY, || {
        let jobs = r.controlplanes(leader)["jobs"].clone();
        jobs.as_array()?
            .iter()
            .find(|j| j["job"] == "dataplane-gc")
            .filter(|j| j["runs"].as_u64() >= Some(3))
            .map(|_| ())
    });
    let before: Vec<f64> = ["dataplane-gc", "grant-expiry"]
        .iter()
        .map(|j| r.cps[leader].metric(&["meshlink_cp_singleton_runs_total", j]))
        .collect();
    r.cps[leader].kill9();
    let killed = Instant::now();
    let others: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let next = eventually("another replica leads", READY, || {
        others.iter().copied().find(|&i| leads(&r, i) == 1.0)
    });
    println!(
        "cp-{} took over {:.2} s after cp-{} was killed (lease 2 s)",
        next + 1,
        killed.elapsed().as_secs_f64(),
        leader + 1
    );
    assert_eq!(
        others.iter().filter(|&&i| leads(&r, i) == 1.0).count(),
        1,
        "exactly one leader"
    );
    // Three more periods under the new leader.
    let first_after = r.controlplanes(next)["jobs"][0]["runs"]
        .as_u64()
        .unwrap_or(0);
    eventually("three more periods", READY, || {
        let v = r.controlplanes(next);
        let j = v["jobs"]
            .as_array()?
            .iter()
            .find(|j| j["job"] == "dataplane-gc")?;
        (j["runs"].as_u64()? >= first_after + 3 && j["instance"] == format!("cp-{}", next + 1))
            .then_some(())
    });
    let v = r.controlplanes(next);
    for (k, name) in ["dataplane-gc", "grant-expiry"].iter().enumerate() {
        let j = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["job"] == *name)
            .unwrap_or_else(|| panic!("{name} in {v}"));
        let (first, last, runs_stored) = (
            j["firstPeriod"].as_u64().unwrap(),
            j["lastPeriod"].as_u64().unwrap(),
            j["runs"].as_u64().unwrap(),
        );
        assert_eq!(
            runs_stored,
            last - first + 1,
            "{name}: every period from {first} to {last} ran exactly once: {j}"
        );
        // The counters agree: the killed leader's runs plus the others'.
        // Neither read is atomic with the store: the killed leader can
        // store one more run after its counter was read (or be killed
        // between storing a run and counting it), and a survivor can count
        // a run after `v` was read. So they differ by at most one run.
        let counted = before[k] + runs(&r, &others, name);
        assert!(
            (counted - runs_stored as f64).abs() <= 1.0,
            "{name}: counters {counted} vs stored runs {runs_stored}"
        );
    }
}

/// Opens a delta ADS stream for `default/web-1` on `cp` and waits for its
/// first response (the stream is registered once it answers), ACKing it.
fn open_web_stream(
    rt: &tokio::runtime::Runtime,
    cp: &meshlink_e2e::ControlPlane,
    token: &str,
) -> Delta {
    rt.block_on(async {
        let ch = connect(cp, None).await;
        let mut d = Delta::open(
            ch,
            Some(token),
            node("default", "web-1", "envoy"),
            delta_request(meshlink_e2e::ads::CLUSTER_TYPE, &[]),
        )
        .await
        .expect("stream opens");
        let first = d.next().await.expect("a first response");
        d.ack(&first).await;
        d
    })
}

#[test]
fn a_proxy_flapping_between_replicas_is_never_shown_offline_or_deleted() {
    let db = fresh_postgres_database();
    let mut r = Replicas::prepare(2, &db, "3s");
    r.start_all();
    r.cps[0]
        .cli(&[
            "apply",
            "-f",
            meshlink_e2e::fixture("xds-mesh.yaml").to_str().unwrap(),
        ])
        .success();
    let (token, _) = r.cps[0].dataplane_token(&["--mesh", "default", "--name", "web-1"]);
    let rt = runtime();
    let mut rng = rand::rng();
    let open = |i: usize| open_web_stream(&rt, &r.cps[i], &token);
    let mut held = open(0);
    let mut on = 0;
    // Online on cp-1 before the flapping starts.
    eventually("web-1 online on cp-1", READY, || {
        let (_, dp) = r.cps[1].api("GET", "/api/v1/dataplanes/web-1?mesh=default", None);
        (dp["status"]["online"] == true && dp["status"]["controlPlaneInstance"] == "cp-1")
            .then_some(())
    });
    for _ in 0..50 {
        // Make before break: the new stream opens, then the old closes.
        let other = 1 - on;
        let next = open(other);
        drop(held);
        held = next;
        on = other;
        std::thread::sleep(Duration::from_millis(rng.random_range(0..1500)));
    }
    let last = format!("cp-{}", on + 1);
    eventually("web-1 online on the last replica", READY, || {
        let (_, dp) = r.cps[0].api("GET", "/api/v1/dataplanes/web-1?mesh=default", None);
        (dp["status"]["online"] == true && dp["status"]["controlPlaneInstance"] == last.as_str())
            .then_some(())
    });
    // A closed stream's replica waits 3 s before it writes (or, seeing a
    // newer stream elsewhere, does not write) the close: wait until both
    // replicas have nothing left to write, then read the whole history.
    // Each close ends in one outcome once its 3 s grace is over: written
    // offline, yielded to the newer stream elsewhere, or superseded by a
    // reconnect to the same replica. 50 flaps close 25 streams on each.
    let closes = |cp: &meshlink_e2e::ControlPlane, outcome: &str| {
        cp.metric(&["meshlink_dataplane_stream_closes_total", outcome])
    };
    for cp in &r.cps {
        eventually("every close to have its outcome", READY, || {
            let all: f64 = ["written", "yielded", "superseded", "unchanged"]
                .iter()
                .map(|o| closes(cp, o))
                .sum();
            (all >= 25.0).then_some(())
        });
        assert_eq!(
            closes(cp, "written"),
            0.0,
            "a close was written offline:\n{}",
            cp.logs()
        );
    }
    let (statuses, deleted) = dataplane_history(&r.cps[1], "web-1");
    assert!(!deleted, "web-1 was deleted while connected");
    let first_online = statuses
        .iter()
        .position(|s| s["online"] == true)
        .expect("web-1 was online at some point");
    let offline: Vec<&Value> = statuses[first_online..]
        .iter()
        .filter(|s| s["online"] != true)
        .collect();
    assert!(
        offline.is_empty(),
        "web-1 was written offline {} time(s) while connected somewhere: {:?}",
        offline.len(),
        offline.first()
    );
    let generations: Vec<u64> = statuses[first_online..]
        .iter()
        .filter_map(|s| s["connectionGeneration"].as_u64())
        .collect();
    assert!(
        generations.windows(2).all(|w| w[0] <= w[1]),
        "the connection generation never goes back: {generations:?}"
    );
    println!(
        "{} status writes, generations {:?}..{:?}",
        statuses.len(),
        generations.first(),
        generations.last()
    );
    drop(held);
}

#[test]
fn twenty_redemptions_spread_over_three_replicas_succeed_exactly_ten_times() {
    let db = fresh_postgres_database();
    let mut r = Replicas::prepare(3, &db, "3s");
    r.start_all();
    r.cps[0]
        .cli_stdin(
            &["apply", "-f", "-"],
            Some(
                "apiVersion: skupper.io/v2alpha1\nkind: Site\nmetadata: {name: ha}\nspec: {linkAccess: default}\n---\napiVersion: skupper.io/v2alpha1\nkind: AccessGrant\nmetadata: {name: ten-uses}\nspec: {redemptionsAllowed: 10, expirationWindow: 1h}\n",
            ),
        )
        .success();
    r.cps[1]
        .cli(&[
            "wait",
            "--for=condition=ready",
            "accessgrant/ten-uses",
            "--timeout",
            "60s",
        ])
        .success();
    let (_, g) = r.cps[2].api("GET", "/api/v1/accessgrants/ten-uses", None);
    let (url, code) = (
        g["status"]["url"].as_str().expect("url").to_owned(),
        g["status"]["code"].as_str().expect("code").to_owned(),
    );
    let ca = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca.path(), g["status"]["ca"].as_str().unwrap()).unwrap();
    // The URL names one replica's grant server; send the same redemption
    // to every replica's.
    let uid = url.rsplit('/').next().expect("uid");
    let grant_addrs: Vec<String> = r.controlplanes(0)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["grantAddr"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(grant_addrs.len(), 3);
    let children: Vec<_> = (0..20)
        .map(|n| {
            let target = format!("https://{}/{uid}", grant_addrs[n % 3]);
            Command::new("curl")
                .args(["-sS", "--cacert"])
                .arg(ca.path())
                .args(["-w", "\n%{http_code}", "--data-binary", &code, &target])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn curl")
        })
        .collect();
    let (mut ok, mut used_up) = (0, 0);
    for c in children {
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
        match (status.trim(), body) {
            ("200", _) => ok += 1,
            ("404", "No such access granted") => used_up += 1,
            other => panic!(
                "unexpected answer {other:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }
    assert_eq!((ok, used_up), (10, 10));
    for cp in &r.cps {
        let (_, g) = cp.api("GET", "/api/v1/accessgrants/ten-uses", None);
        assert_eq!(g["status"]["redemptions"], 10, "{g}");
    }
}

#[test]
fn a_lone_control_plane_never_takes_its_own_proxies_for_departed() {
    // SQLite: one control plane, whose instance record is written once at
    // start. Its leader's dataplane-gc judges departed replicas only after
    // leading for 20 s; run it past that and check the connected proxy is
    // never written offline. (A 1 s lease: the job runs every 2 s.)
    let mut cp =
        meshlink_e2e::ControlPlane::prepare_on(meshlink_e2e::StoreKind::Sqlite, "127.0.0.1", 0);
    cp.add_args(&["--leader-lease", "1s"]);
    cp.restart();
    cp.cli(&[
        "apply",
        "-f",
        meshlink_e2e::fixture("xds-mesh.yaml").to_str().unwrap(),
    ])
    .success();
    let (token, _) = cp.dataplane_token(&["--mesh", "default", "--name", "web-1"]);
    let rt = runtime();
    let _held = open_web_stream(&rt, &cp, &token);
    eventually("web-1 online", READY, || {
        let (_, dp) = cp.api("GET", "/api/v1/dataplanes/web-1?mesh=default", None);
        (dp["status"]["online"] == true).then_some(())
    });
    // Wait for a run of the job after 22 s of leadership (runs every 2 s).
    let started = Instant::now();
    eventually(
        "a dataplane-gc run after 22 s of leading",
        Duration::from_secs(120),
        || {
            let (_, v) = cp.api("GET", "/api/v1/controlplanes", None);
            let j = v["jobs"]
                .as_array()?
                .iter()
                .find(|j| j["job"] == "dataplane-gc")?
                .clone();
            (started.elapsed() > Duration::from_secs(22) && j["runs"].as_u64()? >= 12).then_some(())
        },
    );
    let (history, deleted) = dataplane_history(&cp, "web-1");
    assert!(!deleted);
    let offline = meshlink_e2e::replicas::offline_after_online(&history);
    assert!(
        offline.is_empty(),
        "written offline while connected: {offline:?}"
    );
}
