//! Issue 35 §4: Dataplane status is true whichever of three replicas is
//! asked, with real `meshlink-cp` replicas on the PostgreSQL server that
//! `.ci/run` starts. The proxy's stream is on cp-1, its certificate comes
//! from Certify on cp-2, and cp-3 (which serves neither) is asked:
//! - `Ready` names the certificate (not `NoCertificate`);
//! - `inspect` shows the stream report (cp-3 forwards to cp-1);
//! - the stalled-rotation condition and metric count the proxy on every
//!   replica;
//! - a newer stream on cp-2 that closes while the older one on cp-1 stays
//!   open leaves the proxy online on cp-1.

use std::time::Duration;

use meshlink_e2e::ads::{Sotw, connect, node, runtime, sotw_request};
use meshlink_e2e::certify::{certify, csr};
use meshlink_e2e::replicas::Replicas;
use meshlink_e2e::{ControlPlane, eventually, fresh_postgres_database};
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(60);
const STALLED: &str = "meshlink_dataplane_certificate_rotation_stalled{mesh=\"default\"}";

/// The xDS test mesh with 20 s workload certificates.
const SHORT_LIVED: &str = "\
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: default}
spec:
  mtls:
    enabledBackend: ca-1
    backends:
      - {name: ca-1, type: builtin, dpCert: {rotation: {expiration: 20s}}}
";

fn web(cp: &ControlPlane) -> Value {
    let (code, dp) = cp.api("GET", "/api/v1/dataplanes/web-1?mesh=default", None);
    assert_eq!(code, 200, "{dp}");
    dp
}

fn ready(dp: &Value) -> Value {
    dp["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .cloned()
        .unwrap_or(Value::Null)
}

fn stalled_condition(cp: &ControlPlane) -> Option<Value> {
    let (_, mesh) = cp.api("GET", "/api/v1/meshes/default", None);
    mesh["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "CertificateRotationStalled")
        .cloned()
}

/// Opens web-1's SotW stream on `cp` and ACKs its first clusters.
fn open_stream(rt: &tokio::runtime::Runtime, cp: &ControlPlane, token: &str) -> Sotw {
    rt.block_on(async {
        let mut s = Sotw::open(
            connect(cp, None).await,
            Some(token),
            node("default", "web-1", "meshlink-proxy"),
            sotw_request(meshlink_e2e::ads::CLUSTER_TYPE, &[], "", ""),
        )
        .await
        .expect("stream opens");
        let cds = s.expect(meshlink_e2e::ads::CLUSTER_TYPE).await;
        s.ack(&cds, &[]).await;
        s
    })
}

#[test]
fn dataplane_status_is_true_whichever_of_three_replicas_is_asked() {
    let db = fresh_postgres_database();
    let mut r = Replicas::prepare(3, &db, "3s");
    r.start_all();
    let fixture = meshlink_e2e::fixture("xds-mesh.yaml");
    r.cps[0]
        .cli(&["apply", "-f", fixture.to_str().unwrap()])
        .success();
    r.cps[0]
        .cli_stdin(&["apply", "-f", "-"], Some(SHORT_LIVED))
        .success();
    let (token, _) = r.cps[0].dataplane_token(&["--mesh", "default", "--name", "web-1"]);
    let rt = runtime();
    let older = open_stream(&rt, &r.cps[0], &token);
    eventually("web-1 online on cp-1", DEADLINE, || {
        let dp = web(&r.cps[2]);
        (dp["status"]["online"] == true && dp["status"]["controlPlaneInstance"] == "cp-1")
            .then_some(())
    });

    // The certificate comes from cp-2; cp-1 holds the stream and owns Ready.
    let key = rcgen::KeyPair::generate().expect("key");
    certify(
        &r.cps[1],
        Some(&token),
        "default",
        "web-1",
        "web",
        csr(&key, None),
    )
    .expect("certify on cp-2");
    let dp = eventually("web-1 Ready with cp-2's certificate", DEADLINE, || {
        let dp = web(&r.cps[2]);
        (ready(&dp)["status"] == "True" && !dp["status"]["mtls"]["serial"].is_null()).then_some(dp)
    });
    assert_eq!(dp["status"]["controlPlaneInstance"], "cp-1", "{dp}");
    assert_eq!(dp["status"]["mtls"]["delivery"], "certify", "{dp}");
    let r_ = ready(&dp);
    assert!(
        r_["message"]
            .as_str()
            .unwrap_or_default()
            .contains("certificate valid until"),
        "{r_}"
    );

    // inspect on cp-3: cp-1's report, forwarded.
    let (code, report) = r.cps[2].api("GET", "/api/v1/dataplanes/web-1/xds?mesh=default", None);
    assert_eq!(code, 200, "{report}");
    assert_eq!(report["connected"], true, "{report}");
    assert_eq!(report["controlPlane"], "cp-1", "{report}");
    assert_eq!(report["forwardedBy"], "cp-3", "{report}");
    assert!(
        report["types"].as_object().is_some_and(|t| !t.is_empty()),
        "{report}"
    );
    let out = r.cps[2]
        .cli(&["inspect", "dataplane", "web-1", "--mesh", "default"])
        .success()
        .stdout;
    assert!(out.contains("connected to cp-1"), "{out}");
    assert!(out.contains("cp-3 forwarded the request"), "{out}");

    // Nobody renews the 20 s certificate: past 16 s it is stalled, and
    // every replica counts it, whichever holds the stream or issued it.
    let c = eventually("web-1 flagged as stalled", DEADLINE, || {
        let c = stalled_condition(&r.cps[2])?;
        (c["status"] == "True").then_some(c)
    });
    assert!(
        c["message"].as_str().unwrap_or_default().contains("web-1"),
        "{c}"
    );
    for cp in &r.cps {
        eventually(
            "every replica's stalled gauge counts web-1",
            DEADLINE,
            || (cp.metric(&[STALLED]) == 1.0).then_some(()),
        );
    }

    // A newer stream on cp-2 takes the connection over, then closes while
    // the older one on cp-1 stays open: web-1 is online on cp-1 again.
    let newer = open_stream(&rt, &r.cps[1], &token);
    let taken = eventually("web-1 online on cp-2", DEADLINE, || {
        let dp = web(&r.cps[2]);
        (dp["status"]["controlPlaneInstance"] == "cp-2" && dp["status"]["online"] == true)
            .then_some(dp)
    });
    let generation = taken["status"]["connectionGeneration"]
        .as_u64()
        .expect("a generation");
    drop(newer);
    let dp = eventually("web-1 back online on cp-1", DEADLINE, || {
        let dp = web(&r.cps[2]);
        (dp["status"]["controlPlaneInstance"] == "cp-1"
            && dp["status"]["online"] == true
            && dp["status"]["connectionGeneration"]
                .as_u64()
                .is_some_and(|g| g > generation))
        .then_some(dp)
    });
    // Ready is about the connection no more (the unrenewed 20 s
    // certificate may have expired by now, which Ready then says).
    assert_ne!(ready(&dp)["reason"], "NotConnected", "{dp}");
    // And it stays there (cp-2's close was written before cp-1 took the
    // connection back, never after).
    let (code, report) = r.cps[1].api("GET", "/api/v1/dataplanes/web-1/xds?mesh=default", None);
    assert_eq!(code, 200, "{report}");
    assert_eq!(report["controlPlane"], "cp-1", "{report}");
    assert_eq!(report["connected"], true, "{report}");
    drop(older);
}
