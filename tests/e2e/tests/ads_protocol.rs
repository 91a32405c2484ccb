//! The ADS server through the real control plane, with a raw xDS client:
//! ACK, NACK then fix, stale nonces, subscribe-before-exists, delta resume
//! and removal, make-before-break order, and SDS identity delivery.

use meshlink_e2e::ads::*;
use meshlink_e2e::{ControlPlane, StoreKind, eventually, fixture};
use serde_json::Value;
use std::time::Duration;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A control plane with `fixtures/xds-mesh.yaml` applied, and web-1's token.
fn setup() -> (ControlPlane, String) {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    cp.cli(&["apply", "-f", fixture("xds-mesh.yaml").to_str().unwrap()])
        .success();
    let (token, _) = cp.dataplane_token(&["--mesh", "default", "--name", "web-1"]);
    (cp, token)
}

fn apply(cp: &ControlPlane, yaml: &str) {
    cp.cli_stdin(&["apply", "-f", "-"], Some(yaml)).success();
}

fn report(cp: &ControlPlane, name: &str) -> Value {
    let (s, v) = cp.api(
        "GET",
        &format!("/api/v1/dataplanes/{name}/xds?mesh=default"),
        None,
    );
    assert_eq!(s, 200, "{v}");
    v
}

#[test]
fn sotw_serves_secrets_clusters_listeners_and_records_acks() {
    let (cp, token) = setup();
    let rt = runtime();
    let _stream = rt.block_on(async {
        let ch = connect(&cp, None).await;
        let mut s = Sotw::open(
            ch,
            Some(&token),
            node("default", "web-1", "envoy"),
            sotw_request(CLUSTER_TYPE, &[], "", ""),
        )
        .await
        .expect("stream");
        let cds = s.expect(CLUSTER_TYPE).await;
        assert_eq!(cds.resources.len(), 2, "backend + inbound cluster: {cds:?}");
        s.ack(&cds, &[]).await;
        s.send(sotw_request(
            SECRET_TYPE,
            &["identity_cert:web", "mesh_ca:default"],
            "",
            "",
        ))
        .await;
        let sds = s.expect(SECRET_TYPE).await;
        assert_eq!(sds.resources.len(), 2, "{sds:?}");
        s.ack(&sds, &["identity_cert:web", "mesh_ca:default"]).await;
        s
    });
    let r = eventually("ACKs in the report", Duration::from_secs(10), || {
        let r = report(&cp, "web-1");
        (r["types"]["Secret"]["lastAckedVersion"].is_string()).then_some(r)
    });
    assert_eq!(r["connected"], true, "{r}");
    assert_eq!(r["protocol"], "sotw");
    assert_eq!(r["client"], "envoy");
    assert_eq!(r["certificate"]["spiffeId"], "spiffe://default/web", "{r}");
    assert_eq!(
        r["types"]["Cluster"]["lastAckedVersion"],
        r["types"]["Cluster"]["lastSentVersion"]
    );
}
