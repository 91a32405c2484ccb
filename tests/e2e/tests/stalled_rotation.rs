//! Stalled-rotation detection against the real control plane, with 20 s
//! workload certificates: two real meshlink-proxy sidecars renew on their
//! own; a raw client holds its ADS stream and got one certificate from
//! Certify but never asks again. The stalled one is flagged (metric, Mesh
//! condition naming it, one warning); the healthy ones are never flagged
//! across the whole run (5 minutes by default; set
//! `MESHLINK_E2E_STALL_RUN_SECS` to change it).

use std::time::{Duration, Instant};

use meshlink_e2e::ads::*;
use meshlink_e2e::certify::{certify, csr};
use meshlink_e2e::proxy::{PairPorts, apply_pair, start_pair_sidecars};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};
use serde_json::Value;

const STALLED: &str = "meshlink_dataplane_certificate_rotation_stalled{mesh=\"default\"}";
const EXPIRY: &str = "meshlink_dataplane_certificate_expiration_timestamp_seconds{";

fn run_for() -> Duration {
    let secs = std::env::var("MESHLINK_E2E_STALL_RUN_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    Duration::from_secs(secs)
}

/// The Mesh's CertificateRotationStalled condition.
fn stalled_condition(cp: &ControlPlane) -> Option<Value> {
    let (code, mesh) = cp.api("GET", "/api/v1/meshes/default", None);
    assert_eq!(code, 200, "{mesh}");
    mesh["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "CertificateRotationStalled")
        .cloned()
}

fn expiry(cp: &ControlPlane, name: &str) -> f64 {
    cp.metric(&[EXPIRY, &format!("dataplane=\"{name}\"")])
}

#[test]
fn a_proxy_that_stops_renewing_is_flagged_and_healthy_ones_never_are() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    apply_pair(&cp, &PairPorts::free(), "20s");
    let stuck_yaml = "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\n\
        metadata: {name: stuck-1, mesh: default}\n\
        spec: {networking: {address: 127.0.0.1, inbound: [{port: 10009, tags: {kuma.io/service: stuck}}]}}\n";
    cp.cli_stdin(&["apply", "-f", "-"], Some(stuck_yaml))
        .success();
    let dir = tempfile::tempdir().expect("tempdir");
    let (web, backend) = start_pair_sidecars(&cp, dir.path(), Duration::from_secs(20));

    // Nothing is stalled while everyone renews.
    let c = eventually("the condition written", Duration::from_secs(20), || {
        stalled_condition(&cp)
    });
    assert_eq!(c["status"], "False", "{c}");
    assert_eq!(c["reason"], "AllRenewing", "{c}");

    // The stuck proxy: holds its stream, one certificate, never renews.
    let (token, _) = cp.dataplane_token(&["--mesh", "default", "--name", "stuck-1"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let stream = rt.block_on(async {
        let mut s = Sotw::open(
            connect(&cp, None).await,
            Some(&token),
            node("default", "stuck-1", "meshlink-proxy"),
            sotw_request(CLUSTER_TYPE, &[], "", ""),
        )
        .await
        .expect("stream");
        let cds = s.expect(CLUSTER_TYPE).await;
        s.ack(&cds, &[]).await;
        s
    });
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = certify(
        &cp,
        Some(&token),
        "default",
        "stuck-1",
        "stuck",
        csr(&key, None),
    )
    .expect("certify");
    let issued = Instant::now();

    // Flagged once past 80 % of its 20 s lifetime (16 s).
    let c = eventually("stuck-1 flagged", Duration::from_secs(40), || {
        let c = stalled_condition(&cp)?;
        (c["status"] == "True").then_some(c)
    });
    let flagged_after = issued.elapsed();
    let message = c["message"].as_str().unwrap_or_default();
    assert!(message.contains("stuck-1"), "{c}");
    assert!(
        !message.contains("web-1") && !message.contains("backend-1"),
        "{c}"
    );
    assert_eq!(cp.metric(&[STALLED]), 1.0);
    assert_eq!(
        expiry(&cp, "stuck-1"),
        cert.not_after as f64,
        "the expiry metric carries the Certify-issued certificate"
    );
    eprintln!("stuck-1 flagged {flagged_after:?} after its certificate was issued");

    // The run: the healthy proxies keep renewing and are never flagged;
    // the stuck one stays flagged.
    let run = run_for();
    let (web_first, backend_first) = (expiry(&cp, "web-1"), expiry(&cp, "backend-1"));
    assert!(
        web_first > 0.0 && backend_first > 0.0,
        "sidecars have expiry series"
    );
    let end = Instant::now() + run;
    let mut samples = 0u32;
    while Instant::now() < end {
        // One sample a second: this observes an invariant over the run.
        std::thread::sleep(Duration::from_secs(1));
        let c = stalled_condition(&cp).expect("condition");
        let message = c["message"].as_str().unwrap_or_default().to_owned();
        assert_eq!(c["status"], "True", "{c}");
        assert!(message.contains("stuck-1"), "{c}");
        assert!(
            !message.contains("web-1") && !message.contains("backend-1"),
            "a healthy proxy was flagged after {:?}: {c}",
            run - (end - Instant::now())
        );
        assert_eq!(cp.metric(&[STALLED]), 1.0, "after {samples} samples");
        samples += 1;
    }

    // The healthy proxies did rotate during the run (so the check above
    // could have failed), and the stuck one's warning was logged once.
    assert!(expiry(&cp, "web-1") >= web_first + run.as_secs_f64() / 2.0);
    assert!(expiry(&cp, "backend-1") >= backend_first + run.as_secs_f64() / 2.0);
    let logs = cp.logs();
    let warnings = logs
        .lines()
        .filter(|l| l.contains("certificate rotation stalled") && l.contains("stuck-1"))
        .count();
    assert_eq!(warnings, 1, "one warning per stalled certificate");
    assert!(
        !logs
            .lines()
            .any(|l| l.contains("certificate rotation stalled") && !l.contains("stuck-1")),
        "no warning for healthy proxies"
    );

    // Once it goes away, nothing is stalled.
    rt.block_on(async move { drop(stream) });
    let c = eventually("AllRenewing again", Duration::from_secs(20), || {
        let c = stalled_condition(&cp)?;
        (c["status"] == "False").then_some(c)
    });
    assert_eq!(c["reason"], "AllRenewing");
    assert_eq!(cp.metric(&[STALLED]), 0.0);
    drop((web, backend));
}
