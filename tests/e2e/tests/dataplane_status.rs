//! Dataplane status against the real control plane: the fields filled for a
//! meshlink-proxy sidecar (certificate through Certify) and for a raw
//! Envoy-style SotW client (certificate over SDS); the `get dataplanes`
//! columns; Offline and lastDisconnected after a disconnect; the Ready
//! condition with `meshlink wait`; MeshTrafficPermission `Valid`; and the
//! per-proxy maps back at baseline after 1,000 connect/disconnect cycles
//! with deletions.

use std::time::Duration;

use meshlink_e2e::ads::*;
use meshlink_e2e::app::HttpApp;
use meshlink_e2e::certify::{certify, csr};
use meshlink_e2e::proxy::{PairPorts, Sidecar, apply_pair};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

/// The Dataplane as `meshlink get -o json` prints it.
fn dataplane(cp: &ControlPlane, name: &str) -> Value {
    let out = cp.cli(&["get", "dataplane", name, "-o", "json"]).success();
    serde_json::from_str(&out.stdout).expect("JSON")
}

fn ready(dp: &Value) -> (String, String) {
    let c = dp["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or(Value::Null);
    (
        c["status"].as_str().unwrap_or("-").to_owned(),
        c["reason"].as_str().unwrap_or("-").to_owned(),
    )
}

/// `get dataplanes` as rows of (header -> cell).
fn get_table(cp: &ControlPlane) -> Vec<std::collections::HashMap<String, String>> {
    let out = cp.cli(&["get", "dataplanes"]).success();
    let split = |l: &str| -> Vec<String> {
        l.split("   ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut lines = out.stdout.lines();
    let header = split(lines.next().expect("header"));
    lines
        .map(|l| header.iter().cloned().zip(split(l)).collect())
        .collect()
}

fn row(cp: &ControlPlane, name: &str) -> std::collections::HashMap<String, String> {
    get_table(cp)
        .into_iter()
        .find(|r| r.get("NAME").map(String::as_str) == Some(name))
        .unwrap_or_else(|| panic!("no row for {name}"))
}

#[test]
fn sidecar_and_sds_client_fill_status_and_the_get_columns() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    // web-1's app listens: a sidecar whose app refuses connections is not
    // Ready (AppUnreachable, see app_unreachable.rs).
    let web_app = HttpApp::start("web");
    apply_pair(
        &cp,
        &PairPorts::with_apps(web_app.port(), meshlink_e2e::free_port()),
        "1h",
    );
    let dir = tempfile::tempdir().expect("tempdir");

    // web-1: a real sidecar, certificate through Certify.
    let mut web = Sidecar::start(&cp, dir.path(), "web-1");
    web.wait_ready(WAIT);
    let serial = web.serial().expect("the sidecar's certificate serial");
    let dp = eventually("web-1 status from Certify", WAIT, || {
        let dp = dataplane(&cp, "web-1");
        (dp["status"]["mtls"]["serial"] == serial.as_str()).then_some(dp)
    });
    let s = &dp["status"];
    assert_eq!(s["online"], true, "{s}");
    assert!(s["controlPlaneInstance"].is_string(), "{s}");
    assert!(
        s["lastConnected"]
            .as_str()
            .is_some_and(|t| t.starts_with("20")),
        "{s}"
    );
    let m = &s["mtls"];
    assert_eq!(m["delivery"], "certify", "{s}");
    assert_eq!(m["issuedBackend"], "ca-1", "{s}");
    assert_eq!(m["spiffeId"], "spiffe://default/web", "{s}");
    assert!(m["certificateRegenerations"].as_u64() >= Some(1), "{s}");
    assert!(m["certificateExpirationTime"].is_string(), "{s}");
    assert!(m["lastCertificateRegeneration"].is_string(), "{s}");
    let r = eventually("web-1 Ready", WAIT, || {
        let r = ready(&dataplane(&cp, "web-1"));
        (r.0 == "True").then_some(r)
    });
    assert_eq!(r.1, "Connected");

    // inspect shows the Certify-issued certificate from status.
    let out = cp.cli(&["inspect", "dataplane", "web-1"]).success();
    assert!(
        out.stdout.contains(&format!(
            "Certificate: spiffe://default/web serial {serial} expires "
        )),
        "{out:#?}"
    );
    assert!(
        out.stdout.contains("via certify by backend ca-1"),
        "{out:#?}"
    );
    assert!(!out.stdout.contains("none sent over SDS"), "{out:#?}");

    // backend-1: a raw Envoy-style client, certificate over SDS.
    let (token, _) = cp.dataplane_token(&["--mesh", "default", "--name", "backend-1"]);
    let rt = runtime();
    let secrets = ["identity_cert:backend", "mesh_ca:default"];
    let stream = rt.block_on(async {
        let mut s = Sotw::open(
            connect(&cp, None).await,
            Some(&token),
            node("default", "backend-1", "envoy"),
            sotw_request(CLUSTER_TYPE, &[], "", ""),
        )
        .await
        .expect("stream");
        let cds = s.expect(CLUSTER_TYPE).await;
        s.ack(&cds, &[]).await;
        s.send(sotw_request(SECRET_TYPE, &secrets, "", "")).await;
        let sds = s.expect(SECRET_TYPE).await;
        s.ack(&sds, &secrets).await;
        s
    });
    let body: Value = serde_json::from_str(
        &cp.cli(&["inspect", "dataplane", "backend-1", "-o", "json"])
            .success()
            .stdout,
    )
    .expect("JSON");
    let sds_serial = body["certificate"]["serial"]
        .as_str()
        .expect("SDS serial")
        .to_owned();
    let dp = eventually("backend-1 status from SDS", WAIT, || {
        let dp = dataplane(&cp, "backend-1");
        (dp["status"]["mtls"]["serial"] == sds_serial.as_str()).then_some(dp)
    });
    assert_eq!(dp["status"]["online"], true, "{dp}");
    assert_eq!(dp["status"]["mtls"]["delivery"], "sds", "{dp}");
    assert_eq!(
        dp["status"]["mtls"]["spiffeId"], "spiffe://default/backend",
        "{dp}"
    );
    assert_eq!(dp["status"]["mtls"]["certificateRegenerations"], 1, "{dp}");

    // The table: both Online with an expiry in the future, READY True.
    let both = eventually("both rows Online and Ready", WAIT, || {
        let t = get_table(&cp);
        t.iter()
            .all(|r| r["STATUS"] == "Online" && r["READY"] == "True")
            .then_some(t)
    });
    for r in &both {
        assert!(r["CERT EXPIRES"].starts_with("in "), "{r:?}");
        assert!(
            r["CERT EXPIRES"].ends_with('m') || r["CERT EXPIRES"].ends_with('h'),
            "{r:?}"
        );
        assert_eq!(r["LAST SEEN"], "now", "{r:?}");
    }

    // Disconnects: Offline, lastDisconnected, READY False (NotConnected).
    rt.block_on(async move { drop(stream) });
    web.terminate();
    for name in ["backend-1", "web-1"] {
        let dp = eventually(&format!("{name} Offline"), WAIT, || {
            let dp = dataplane(&cp, name);
            (dp["status"]["online"] == false).then_some(dp)
        });
        assert!(dp["status"]["lastDisconnected"].is_string(), "{dp}");
        let r = eventually(&format!("{name} not Ready"), WAIT, || {
            let r = ready(&dataplane(&cp, name));
            (r.0 == "False").then_some(r)
        });
        assert_eq!(r.1, "NotConnected");
        let row = row(&cp, name);
        assert_eq!(row["STATUS"], "Offline", "{row:?}");
        assert!(row["LAST SEEN"].ends_with(" ago"), "{row:?}");
        assert!(row["CERT EXPIRES"].starts_with("in "), "{row:?}");
    }
    // The expiry metric has no series for disconnected proxies.
    assert_eq!(
        cp.metric(&["meshlink_dataplane_certificate_expiration_timestamp_seconds{"]),
        0.0
    );

    // MeshTrafficPermissions carry Valid.
    let valid = eventually("MTP Valid", WAIT, || {
        let out = cp
            .cli(&[
                "get",
                "meshtrafficpermission",
                "web-to-backend",
                "-o",
                "json",
            ])
            .success();
        let v: Value = serde_json::from_str(&out.stdout).ok()?;
        v["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Valid")
            .cloned()
    });
    assert_eq!(valid["status"], "True", "{valid}");
}

#[test]
fn wait_for_ready_succeeds_when_connected_and_the_reason_names_what_is_missing() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let yaml = "apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {name: default}\n\
        spec: {mtls: {enabledBackend: ca-1, backends: [{name: ca-1, type: builtin}]}}\n---\n\
        apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {name: web, mesh: default}\n\
        spec: {networking: {address: 127.0.0.1, inbound: [{port: 10001, tags: {kuma.io/service: web}}]}}\n";
    cp.cli_stdin(&["apply", "-f", "-"], Some(yaml)).success();
    let wait = |timeout: &str| {
        cp.cli(&[
            "wait",
            "dataplane/web",
            "--for",
            "condition=Ready",
            "--timeout",
            timeout,
        ])
    };
    let reason = |want: &str| {
        eventually(&format!("Ready reason {want}"), WAIT, || {
            let r = ready(&dataplane(&cp, "web"));
            (r.1 == want).then_some(r)
        })
    };

    // Never connected.
    assert_eq!(reason("NotConnected").0, "False");
    let out = wait("1s");
    assert_ne!(out.code, 0, "{out:#?}");
    assert!(
        format!("{}{}", out.stdout, out.stderr).contains("NotConnected"),
        "{out:#?}"
    );

    // Connected, but no certificate yet (a meshlink-proxy client asks
    // Certify), and the configuration NACKed.
    let (token, _) = cp.dataplane_token(&["--mesh", "default", "--name", "web"]);
    let rt = runtime();
    let first = rt.block_on(async {
        let mut s = Sotw::open(
            connect(&cp, None).await,
            Some(&token),
            node("default", "web", "meshlink-proxy"),
            sotw_request(CLUSTER_TYPE, &[], "", ""),
        )
        .await
        .expect("stream");
        let cds = s.expect(CLUSTER_TYPE).await;
        s.send(sotw_nack(&cds, &[], "cluster rejected by the test"))
            .await;
        s
    });
    reason("NoCertificate");
    let key = rcgen::KeyPair::generate().expect("key");
    certify(&cp, Some(&token), "default", "web", "web", csr(&key, None)).expect("certify");
    let (_, msg) = eventually("ConfigRejected", WAIT, || {
        let dp = dataplane(&cp, "web");
        let c = dp["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Ready" && c["reason"] == "ConfigRejected")?
            .clone();
        Some(((), c["message"].as_str()?.to_owned()))
    });
    assert!(msg.contains("cluster rejected by the test"), "{msg}");

    // A new stream that ACKs: Ready, and `wait` succeeds.
    let second = rt.block_on(async {
        let mut s = Sotw::open(
            connect(&cp, None).await,
            Some(&token),
            node("default", "web", "meshlink-proxy"),
            sotw_request(CLUSTER_TYPE, &[], "", ""),
        )
        .await
        .expect("stream");
        let cds = s.expect(CLUSTER_TYPE).await;
        s.ack(&cds, &[]).await;
        s
    });
    let out = wait("30s");
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.contains("condition met: Ready=True"), "{out:#?}");
    rt.block_on(async move {
        drop(first);
        drop(second);
    });
}

#[test]
fn stream_reports_and_status_entries_return_to_baseline_after_1000_cycles_with_deletions() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let (code, _) = cp.api(
        "POST",
        "/api/v1/meshes",
        Some(
            &json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
            "metadata": {"name": "default"}, "spec": {}}),
        ),
    );
    assert_eq!(code, 201);
    let sizes = || {
        (
            cp.metric(&["meshlink_dataplane_stream_reports "]),
            cp.metric(&["meshlink_dataplane_status_tracked "]),
        )
    };
    let baseline = eventually("the status task's first flush", WAIT, || {
        let text = reqwest::blocking::get(format!("{}/metrics", cp.server()))
            .and_then(|r| r.text())
            .ok()?;
        text.contains("meshlink_dataplane_status_tracked ")
            .then(sizes)
    });
    assert_eq!(baseline, (0.0, 0.0));

    let rt = runtime();
    let channel = rt.block_on(connect(&cp, None));
    const CYCLES: usize = 1000;
    for i in 0..CYCLES {
        let name = format!("dp-{i}");
        let (code, body) = cp.api(
            "POST",
            "/api/v1/dataplanes",
            Some(
                &json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
                "metadata": {"name": name, "mesh": "default"},
                "spec": {"networking": {"address": "127.0.0.1",
                    "inbound": [{"port": 10001, "tags": {"kuma.io/service": "web"}}]}}}),
            ),
        );
        assert_eq!(code, 201, "{body}");
        let (code, body) = cp.api(
            "POST",
            "/api/v1/tokens/dataplane",
            Some(&json!({"mesh": "default", "name": name})),
        );
        assert_eq!(code, 200, "{body}");
        let token = body["token"].as_str().expect("token").to_owned();
        rt.block_on(async {
            let mut s = Sotw::open(
                channel.clone(),
                Some(&token),
                node("default", &name, "envoy"),
                sotw_request(CLUSTER_TYPE, &[], "", ""),
            )
            .await
            .expect("stream");
            let cds = s.expect(CLUSTER_TYPE).await;
            s.ack(&cds, &[]).await;
        });
        let (code, body) = cp.api(
            "DELETE",
            &format!("/api/v1/dataplanes/{name}?mesh=default"),
            None,
        );
        assert_eq!(code, 200, "{body}");
    }
    let after = eventually("maps back at baseline", Duration::from_secs(60), || {
        let s = sizes();
        (s == baseline).then_some(s)
    });
    assert_eq!(after, baseline);
    // Nothing is reported for the deleted dataplanes either.
    assert_eq!(
        cp.metric(&["meshlink_dataplane_certificate_expiration_timestamp_seconds{"]),
        0.0
    );
}
