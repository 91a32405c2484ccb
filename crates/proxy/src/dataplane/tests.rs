//! Unit tests of `Dataplane::warming_reason` (I2 on the proxy side): a
//! listener binds only when everything it references is present, and
//! otherwise names the missing piece: identity, trust bundle, cluster or
//! endpoints.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use meshlink_identity::{MeshCa, SpiffeId};

use super::*;
use crate::model::{
    Direction, Discovery, DownstreamTls, LbPolicy, ListenerProtocol, SecretSpec, UpstreamTls,
    Versioned,
};

const BUNDLE: &str = "mesh_ca:default";
const IDENTITY: &str = "identity_cert:web";

fn versioned<T>(value: T) -> Versioned<T> {
    Versioned {
        version: "v1".into(),
        value: Arc::new(value),
    }
}

/// A mesh CA and an identity it issued for `spiffe://default/web`.
fn ca_and_identity() -> (TrustBundle, Arc<WorkloadIdentity>) {
    let material =
        MeshCa::generate_builtin("default", "ca-1", "default", Duration::from_secs(3600))
            .expect("CA");
    let ca = MeshCa::load(&material).expect("load CA");
    let id = SpiffeId::parse("spiffe://default/web").expect("SPIFFE ID");
    let (cert, key_pem) = ca
        .issue_with_key(&id, Duration::from_secs(600), SystemTime::now())
        .expect("issue");
    (
        TrustBundle::new(vec![ca.cert_pem().to_owned()]),
        Arc::new(WorkloadIdentity { cert, key_pem }),
    )
}

/// The inbound mTLS listener of `web`, forwarding to cluster `local`.
fn inbound() -> ListenerSpec {
    ListenerSpec {
        name: "inbound:127.0.0.1:10001".into(),
        address: "127.0.0.1:10001".parse().unwrap(),
        direction: Direction::Inbound,
        tls: Some(DownstreamTls {
            identity_secret: IDENTITY.into(),
            ca_secret: BUNDLE.into(),
            alpn: Vec::new(),
        }),
        connection_rate_limit: None,
        rbac: Vec::new(),
        rbac_per_request: false,
        bind: true,
        original_dst: false,
        protocol: ListenerProtocol::Tcp {
            cluster: "local".into(),
            weighted: Vec::new(),
            max_connect_attempts: None,
            idle_timeout: None,
        },
    }
}

/// The outbound listener to `backend` (plain TCP from the app).
fn outbound() -> ListenerSpec {
    ListenerSpec {
        name: "outbound:127.0.0.1:9001".into(),
        address: "127.0.0.1:9001".parse().unwrap(),
        direction: Direction::Outbound,
        tls: None,
        connection_rate_limit: None,
        rbac: Vec::new(),
        rbac_per_request: false,
        bind: true,
        original_dst: false,
        protocol: ListenerProtocol::Tcp {
            cluster: "backend".into(),
            weighted: Vec::new(),
            max_connect_attempts: None,
            idle_timeout: None,
        },
    }
}

fn cluster(name: &str, discovery: Discovery, tls: bool) -> ClusterSpec {
    ClusterSpec {
        name: name.into(),
        discovery,
        tls: tls.then(|| UpstreamTls {
            sni: None,
            identity_secret: IDENTITY.into(),
            ca_secret: BUNDLE.into(),
            expected_spiffe_ids: vec!["spiffe://default/backend".into()],
            alpn: Vec::new(),
        }),
        connect_timeout: Duration::from_secs(5),
        lb: LbPolicy::RoundRobin,
        http2: false,
        circuit_breakers: None,
        outlier_detection: crate::model::circuit_breaker::OutlierSpec::builtin(),
        health_check: None,
    }
}

/// What has arrived so far.
#[derive(Default)]
struct Arrived {
    bundle: Option<TrustBundle>,
    identity: Option<Arc<WorkloadIdentity>>,
    clusters: Vec<ClusterSpec>,
    endpoints: Vec<(&'static str, u16)>,
}

fn build(arrived: Arrived) -> Dataplane {
    let mut config = ProxyConfig {
        listeners: BTreeMap::from([
            (inbound().name, versioned(inbound())),
            (outbound().name, versioned(outbound())),
        ]),
        ..Default::default()
    };
    if let Some(b) = arrived.bundle {
        config
            .secrets
            .insert(BUNDLE.into(), versioned(SecretSpec::TrustBundle(b)));
    }
    for c in arrived.clusters {
        config.clusters.insert(c.name.clone(), versioned(c));
    }
    for (name, port) in arrived.endpoints {
        config
            .endpoints
            .insert(name.into(), versioned(vec![([127, 0, 0, 1], port).into()]));
    }
    Dataplane::build(Arc::new(config), arrived.identity, None)
}

fn reason(dp: &Dataplane, l: &ListenerSpec) -> String {
    dp.warming_reason(l).expect("warming")
}

#[test]
fn nothing_arrived_names_the_trust_bundle_and_the_cluster() {
    let dp = build(Arrived::default());
    let r = reason(&dp, &inbound());
    assert!(r.contains("trust bundle") && r.contains(BUNDLE), "{r}");
    let r = reason(&dp, &outbound());
    assert_eq!(r, "waiting for cluster \"backend\"");
}

#[test]
fn a_trust_bundle_without_an_identity_names_the_identity() {
    let (bundle, _) = ca_and_identity();
    let dp = build(Arrived {
        bundle: Some(bundle),
        ..Default::default()
    });
    let r = reason(&dp, &inbound());
    assert!(r.contains("identity certificate"), "{r}");
}

#[test]
fn an_identity_without_a_trust_bundle_names_the_trust_bundle() {
    let (_, identity) = ca_and_identity();
    let dp = build(Arrived {
        identity: Some(identity),
        ..Default::default()
    });
    let r = reason(&dp, &inbound());
    assert!(r.contains("trust bundle"), "{r}");
}

#[test]
fn tls_in_place_but_no_cluster_names_the_cluster() {
    let (bundle, identity) = ca_and_identity();
    let dp = build(Arrived {
        bundle: Some(bundle),
        identity: Some(identity),
        ..Default::default()
    });
    assert_eq!(reason(&dp, &inbound()), "waiting for cluster \"local\"");
}

#[test]
fn an_eds_cluster_without_endpoints_names_its_load_assignment() {
    let (bundle, identity) = ca_and_identity();
    let dp = build(Arrived {
        bundle: Some(bundle),
        identity: Some(identity),
        clusters: vec![
            cluster("local", Discovery::Eds, false),
            cluster("backend", Discovery::Eds, true),
        ],
        ..Default::default()
    });
    for (l, name) in [(inbound(), "local"), (outbound(), "backend")] {
        let r = reason(&dp, &l);
        assert!(
            r.starts_with(&format!("cluster {name:?}:"))
                && r.contains(&format!("ClusterLoadAssignment {name:?}")),
            "{r}"
        );
    }
}

#[test]
fn an_mtls_cluster_without_identity_names_the_identity() {
    let (bundle, _) = ca_and_identity();
    let dp = build(Arrived {
        bundle: Some(bundle),
        clusters: vec![cluster("backend", Discovery::Eds, true)],
        endpoints: vec![("backend", 10002)],
        ..Default::default()
    });
    let r = reason(&dp, &outbound());
    assert!(
        r.starts_with("cluster \"backend\":") && r.contains("identity certificate"),
        "{r}"
    );
}

#[test]
fn everything_present_means_ready() {
    let (bundle, identity) = ca_and_identity();
    let dp = build(Arrived {
        bundle: Some(bundle),
        identity: Some(identity),
        clusters: vec![
            cluster(
                "local",
                Discovery::Static(vec![([127, 0, 0, 1], 8080).into()]),
                false,
            ),
            cluster("backend", Discovery::Eds, true),
        ],
        endpoints: vec![("backend", 10002)],
    });
    assert_eq!(dp.warming_reason(&inbound()), None);
    assert_eq!(dp.warming_reason(&outbound()), None);
}

#[test]
fn a_weighted_tcp_listener_waits_for_every_cluster_it_may_pick() {
    use crate::model::route::WeightedBackend;
    let (bundle, identity) = ca_and_identity();
    let mut split = outbound();
    let weighted = ["backend", "canary"].map(|c| WeightedBackend {
        cluster: c.into(),
        weight: 50,
        request_headers: Default::default(),
    });
    split.protocol = ListenerProtocol::Tcp {
        cluster: "backend".into(),
        weighted: weighted.to_vec(),
        max_connect_attempts: None,
        idle_timeout: None,
    };
    let only_backend = build(Arrived {
        bundle: Some(bundle.clone()),
        identity: Some(identity.clone()),
        clusters: vec![cluster("backend", Discovery::Eds, true)],
        endpoints: vec![("backend", 10002)],
    });
    assert_eq!(
        reason(&only_backend, &split),
        "waiting for cluster \"canary\""
    );
    let both = build(Arrived {
        bundle: Some(bundle),
        identity: Some(identity),
        clusters: vec![
            cluster("backend", Discovery::Eds, true),
            cluster("canary", Discovery::Eds, true),
        ],
        endpoints: vec![("backend", 10002), ("canary", 10003)],
    });
    assert_eq!(both.warming_reason(&split), None);
}

/// The view after `change` is applied to `dp`'s configuration.
fn rebuild(
    dp: &Dataplane,
    identity: Option<Arc<WorkloadIdentity>>,
    change: impl FnOnce(&mut ProxyConfig),
) -> Dataplane {
    let mut config = dp.config.as_ref().clone();
    change(&mut config);
    Dataplane::build(Arc::new(config), identity, Some(dp))
}

#[test]
fn a_change_rebuilds_only_what_it_touched() {
    let (bundle, identity) = ca_and_identity();
    let before = build(Arrived {
        bundle: Some(bundle),
        identity: Some(identity.clone()),
        clusters: vec![
            cluster("backend", Discovery::Eds, true),
            cluster("other", Discovery::Eds, true),
        ],
        endpoints: vec![("backend", 10002), ("other", 10003)],
    });
    let tls = |dp: &Dataplane, c: &str| dp.clusters[c].tls.clone().expect("mTLS cluster");

    // Endpoints of one cluster change: its balancer is new, its TLS config
    // (and session cache) is kept; the other cluster is kept whole.
    let after = rebuild(&before, Some(identity.clone()), |c| {
        c.endpoints.insert(
            "backend".into(),
            versioned(vec![([127, 0, 0, 1], 10004).into()]),
        );
    });
    assert!(Arc::ptr_eq(
        &tls(&before, "backend"),
        &tls(&after, "backend")
    ));
    assert!(!Arc::ptr_eq(
        &before.clusters["backend"],
        &after.clusters["backend"]
    ));
    assert!(Arc::ptr_eq(
        &before.clusters["other"],
        &after.clusters["other"]
    ));
    assert!(Arc::ptr_eq(&before.servers[BUNDLE], &after.servers[BUNDLE]));

    // A new identity (rotation) rebuilds every TLS config.
    let (_, rotated) = ca_and_identity();
    let rotated_view = rebuild(&after, Some(rotated), |_| {});
    assert!(!Arc::ptr_eq(
        &tls(&after, "other"),
        &tls(&rotated_view, "other")
    ));
    assert!(!Arc::ptr_eq(
        &after.servers[BUNDLE],
        &rotated_view.servers[BUNDLE]
    ));

    // A new trust bundle does too, even with the same identity.
    let (new_bundle, _) = ca_and_identity();
    let new_ca = rebuild(&after, Some(identity), |c| {
        c.secrets.insert(
            BUNDLE.into(),
            versioned(SecretSpec::TrustBundle(new_bundle)),
        );
    });
    assert!(!Arc::ptr_eq(
        &tls(&after, "backend"),
        &tls(&new_ca, "backend")
    ));
    assert!(!Arc::ptr_eq(
        &after.servers[BUNDLE],
        &new_ca.servers[BUNDLE]
    ));
}
