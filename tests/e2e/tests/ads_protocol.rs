//! The ADS server through the real control plane, with a raw xDS client:
//! ACK, NACK then fix, stale nonces, subscribe-before-exists, delta resume
//! and removal, make-before-break order, and SDS identity delivery.

use meshlink_e2e::ads::*;
use meshlink_e2e::{ControlPlane, eventually, fixture};
use serde_json::Value;
use std::time::Duration;

/// A control plane with `fixtures/xds-mesh.yaml` applied, and web-1's token.
fn setup() -> (ControlPlane, String) {
    let cp = start_xds_mesh();
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

const BACKEND_2: &str = "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {name: backend-2, mesh: default}\nspec:\n  networking:\n    address: 127.0.0.3\n    inbound: [{port: 10002, servicePort: 8080, tags: {kuma.io/service: backend}}]\n";

/// web-1 with outbounds to `services` (ports 9001, 9002, ...).
fn web_with_outbounds(services: &[&str]) -> String {
    let outbound: Vec<String> = services
        .iter()
        .enumerate()
        .map(|(i, s)| format!("{{port: {}, tags: {{kuma.io/service: {s}}}}}", 9001 + i))
        .collect();
    format!(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {{name: web-1, mesh: default}}\nspec:\n  networking:\n    address: 127.0.0.1\n    inbound: [{{port: 10001, servicePort: 8080, tags: {{kuma.io/service: web}}}}]\n    outbound: [{}]\n",
        outbound.join(", ")
    )
}

fn db_dataplane() -> &'static str {
    "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {name: db-1, mesh: default}\nspec:\n  networking:\n    address: 127.0.0.4\n    inbound: [{port: 5432, tags: {kuma.io/service: db}}]\n"
}

#[test]
fn nack_is_remembered_and_a_fix_is_pushed() {
    let (cp, token) = setup();
    let rt = runtime();
    let mut s = rt.block_on(async {
        let ch = connect(&cp, None).await;
        let mut s = Sotw::open(
            ch,
            Some(&token),
            node("default", "web-1", "envoy"),
            sotw_request(CLUSTER_TYPE, &[], "", ""),
        )
        .await
        .unwrap();
        let v1 = s.expect(CLUSTER_TYPE).await;
        s.send(sotw_nack(&v1, &[], "cluster backend: unsupported field"))
            .await;
        s
    });
    let r = eventually("the NACK in the report", Duration::from_secs(10), || {
        let r = report(&cp, "web-1");
        r["types"]["Cluster"]["lastNack"].is_object().then_some(r)
    });
    assert_eq!(
        r["types"]["Cluster"]["lastNack"]["detail"],
        "cluster backend: unsupported field"
    );
    assert!(r["types"]["Cluster"]["lastAckedVersion"].is_null(), "{r}");
    assert!(cp.metric(&["meshlink_xds_nacks_total", "type=\"Cluster\""]) >= 1.0);

    // The fix: a config change that alters the clusters. The NACKed version
    // is not re-sent in between: the next Cluster response is the new one.
    apply(&cp, &web_with_outbounds(&["backend", "db"]));
    rt.block_on(async {
        let fixed = s.expect(CLUSTER_TYPE).await;
        assert_eq!(
            fixed.resources.len(),
            3,
            "backend, db and the inbound cluster"
        );
        s.ack(&fixed, &[]).await;
    });
    let r = eventually("the fix ACKed", Duration::from_secs(10), || {
        let r = report(&cp, "web-1");
        let t = &r["types"]["Cluster"];
        (t["lastAckedVersion"] == t["lastSentVersion"]).then_some(r)
    });
    assert_eq!(
        r["types"]["Cluster"]["responses"], 2,
        "NACKed version never re-sent: {r}"
    );
    drop(s);
}

#[test]
fn stale_nonce_is_ignored() {
    let (cp, token) = setup();
    let rt = runtime();
    let _s = rt.block_on(async {
        let ch = connect(&cp, None).await;
        let mut s = Sotw::open(
            ch,
            Some(&token),
            node("default", "web-1", "envoy"),
            sotw_request(ENDPOINT_TYPE, &["backend"], "", ""),
        )
        .await
        .unwrap();
        let v1 = s.expect(ENDPOINT_TYPE).await;
        s.ack(&v1, &["backend"]).await;
        (s, v1)
    });
    let (mut s, v1) = _s;
    apply(&cp, BACKEND_2);
    rt.block_on(async {
        let v2 = s.expect(ENDPOINT_TYPE).await;
        assert_ne!(v1.version_info, v2.version_info);
        // A late NACK of v1 answers a response v2 replaced: ignored, even
        // though it also drops the subscription.
        s.send(sotw_nack(&v1, &[], "late")).await;
        s.ack(&v2, &["backend"]).await;
        // The stream still serves: a new subscription is answered next,
        // proving nothing was sent for the stale request.
        s.send(sotw_request(CLUSTER_TYPE, &[], "", "")).await;
        s.expect(CLUSTER_TYPE).await;
    });
    let r = report(&cp, "web-1");
    assert!(
        r["types"]["ClusterLoadAssignment"]["lastNack"].is_null(),
        "stale NACK ignored: {r}"
    );
    assert_eq!(
        r["types"]["ClusterLoadAssignment"]["lastAckedVersion"],
        r["types"]["ClusterLoadAssignment"]["lastSentVersion"]
    );
}

#[test]
fn subscription_to_a_missing_resource_is_answered_when_it_appears() {
    let (cp, token) = setup();
    let rt = runtime();
    let mut sotw = rt.block_on(async {
        let ch = connect(&cp, None).await;
        let mut sotw = Sotw::open(
            ch,
            Some(&token),
            node("default", "web-1", "envoy"),
            sotw_request(ENDPOINT_TYPE, &["db"], "", ""),
        )
        .await
        .unwrap();
        // Nothing exists yet, so nothing is sent: the next response on the
        // stream answers a later request.
        sotw.send(sotw_request(CLUSTER_TYPE, &[], "", "")).await;
        sotw.expect(CLUSTER_TYPE).await;
        sotw
    });
    apply(&cp, db_dataplane());
    apply(&cp, &web_with_outbounds(&["backend", "db"]));
    rt.block_on(async {
        // The Cluster list changes too; EDS db must arrive among the next
        // responses (CDS is ordered before EDS when both change at once).
        let mut eds = None;
        for _ in 0..3 {
            let r = sotw.next().await.unwrap();
            if r.type_url == ENDPOINT_TYPE {
                eds = Some(r);
                break;
            }
        }
        let eds = eds.expect("EDS db pushed once it existed");
        assert_eq!(eds.resources.len(), 1);
    });
}

#[test]
fn delta_subscription_to_a_missing_resource_is_answered_when_it_appears() {
    let (cp, token) = setup();
    let rt = runtime();
    let mut d = rt.block_on(async {
        let ch = connect(&cp, None).await;
        let mut d = Delta::open(
            ch,
            Some(&token),
            node("default", "web-1", "envoy"),
            delta_request(ENDPOINT_TYPE, &["db"]),
        )
        .await
        .unwrap();
        let first = d.expect(ENDPOINT_TYPE).await;
        assert!(first.resources.is_empty(), "nothing yet: {first:?}");
        d.ack(&first).await;
        d
    });
    apply(&cp, db_dataplane());
    apply(&cp, &web_with_outbounds(&["backend", "db"]));
    rt.block_on(async {
        let r = d.expect(ENDPOINT_TYPE).await;
        assert_eq!(delta_names(&r), vec!["db"]);
    });
}

#[test]
fn delta_resume_sends_only_what_changed_and_removes_what_is_gone() {
    let (cp, token) = setup();
    let rt = runtime();
    let held = rt.block_on(async {
        let ch = connect(&cp, None).await;
        let mut d = Delta::open(
            ch,
            Some(&token),
            node("default", "web-1", "envoy"),
            delta_request(CLUSTER_TYPE, &[]),
        )
        .await
        .unwrap();
        let r = d.expect(CLUSTER_TYPE).await;
        d.ack(&r).await;
        r.resources
            .iter()
            .map(|r| (r.name.clone(), r.version.clone()))
            .collect::<std::collections::HashMap<_, _>>()
    });
    assert_eq!(held.len(), 2, "{held:?}");
    // While disconnected, a new outbound appears.
    apply(&cp, db_dataplane());
    apply(&cp, &web_with_outbounds(&["backend", "db"]));
    rt.block_on(async {
        let ch = connect(&cp, None).await;
        let mut initial = held.clone();
        initial.insert("retired-cluster".into(), "0123".into());
        let first = envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest {
            initial_resource_versions: initial,
            ..delta_request(CLUSTER_TYPE, &[])
        };
        let mut d = Delta::open(ch, Some(&token), node("default", "web-1", "envoy"), first)
            .await
            .unwrap();
        // The change may reach the hub just after the resume, so collect
        // responses until both the new cluster and the removal arrived.
        // What the client already held is never re-sent.
        let (mut added, mut removed) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            let r = d.expect(CLUSTER_TYPE).await;
            d.ack(&r).await;
            for res in &r.resources {
                assert_ne!(
                    held.get(&res.name),
                    Some(&res.version),
                    "re-sent {}",
                    res.name
                );
            }
            added.extend(delta_names(&r));
            removed.extend(r.removed_resources.clone());
            if added.contains(&"db".to_string()) && !removed.is_empty() {
                break;
            }
        }
        assert_eq!(added, vec!["db"], "only the new cluster");
        assert_eq!(removed, vec!["retired-cluster"]);
    });
}

#[test]
fn delta_removal_comes_after_updates_in_reverse_type_order() {
    let (cp, token) = setup();
    let rt = runtime();
    let mut d = rt.block_on(async {
        let ch = connect(&cp, None).await;
        let mut d = Delta::open(
            ch,
            Some(&token),
            node("default", "web-1", "envoy"),
            delta_request(CLUSTER_TYPE, &[]),
        )
        .await
        .unwrap();
        let c = d.expect(CLUSTER_TYPE).await;
        d.ack(&c).await;
        d.send(delta_request(LISTENER_TYPE, &[])).await;
        let l = d.expect(LISTENER_TYPE).await;
        assert_eq!(l.resources.len(), 2, "inbound and outbound: {l:?}");
        d.ack(&l).await;
        d
    });
    // web-1 stops calling backend: its outbound listener and the backend
    // cluster go. The listener (which references the cluster) must be
    // removed before the cluster.
    apply(
        &cp,
        "apiVersion: meshlink.dev/v1alpha1\nkind: Dataplane\nmetadata: {name: web-1, mesh: default}\nspec:\n  networking:\n    address: 127.0.0.1\n    inbound: [{port: 10001, servicePort: 8080, tags: {kuma.io/service: web}}]\n",
    );
    rt.block_on(async {
        let first = d.next().await.unwrap();
        let second = d.next().await.unwrap();
        assert_eq!(first.type_url, LISTENER_TYPE, "{first:?}");
        assert_eq!(first.removed_resources, vec!["outbound:127.0.0.1:9001"]);
        assert_eq!(second.type_url, CLUSTER_TYPE, "{second:?}");
        assert_eq!(second.removed_resources, vec!["backend"]);
    });
}

#[test]
fn envoy_client_gets_its_identity_over_sds_and_a_new_one_after_ca_rotation() {
    let (cp, token) = setup();
    let rt = runtime();
    let names = ["identity_cert:web", "mesh_ca:default"];
    let (mut s, first) = rt.block_on(async {
        let ch = connect(&cp, None).await;
        let mut s = Sotw::open(
            ch,
            Some(&token),
            node("default", "web-1", "envoy"),
            sotw_request(SECRET_TYPE, &names, "", ""),
        )
        .await
        .unwrap();
        let r = s.expect(SECRET_TYPE).await;
        s.ack(&r, &names).await;
        (s, r)
    });
    let before = cp
        .api("GET", "/api/v1/dataplanes/web-1/xds?mesh=default", None)
        .1;
    let serial = before["certificate"]["serial"]
        .as_str()
        .expect("serial")
        .to_owned();
    let text: String = first
        .resources
        .iter()
        .map(|a| String::from_utf8_lossy(&a.value).into_owned())
        .collect();
    assert!(
        text.contains("BEGIN CERTIFICATE") && text.contains("PRIVATE KEY"),
        "identity with key over SDS"
    );
    // Rotate the CA: the proxy gets a new identity from ca-2 and a bundle
    // with both roots, without reconnecting.
    apply(
        &cp,
        &std::fs::read_to_string(fixture("xds-mesh.yaml"))
            .unwrap()
            .replace("enabledBackend: ca-1", "enabledBackend: ca-2"),
    );
    rt.block_on(async {
        let r = s.expect(SECRET_TYPE).await;
        s.ack(&r, &names).await;
    });
    let after = eventually("new identity reported", Duration::from_secs(10), || {
        let r = cp
            .api("GET", "/api/v1/dataplanes/web-1/xds?mesh=default", None)
            .1;
        (r["certificate"]["serial"] != serial.as_str()).then_some(r)
    });
    assert_ne!(
        after["certificate"]["caFingerprint"],
        before["certificate"]["caFingerprint"]
    );
    let dump = cp
        .api(
            "GET",
            "/api/v1/dataplanes/web-1/xds?mesh=default&configDump=true",
            None,
        )
        .1;
    let dump_text = dump["configDump"].to_string();
    assert!(dump_text.contains("identity_cert:web"));
    assert!(
        !dump_text.contains("PRIVATE KEY"),
        "config dump redacts keys"
    );
}
