//! Lowering a Mesh's certificate lifetime (issue 35 §2): a sidecar holding
//! a 24 h certificate gets one of the new lifetime soon after the Mesh
//! changes (spread over the first fifth of the new lifetime), not at its
//! next half-life renewal 12 h later. Observed as users do: the Dataplane
//! status (serial, `mtls.certificateExpirationTime`) and the sidecar's own
//! `/config_dump` (its identity policy and certificate).

use std::time::{Duration, SystemTime};

use meshlink_e2e::proxy::{self, PairPorts, Sidecar};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};
use serde_json::Value;

const READY: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(60);

fn mtls(cp: &ControlPlane, name: &str) -> Value {
    let (_, dp) = cp.api(
        "GET",
        &format!("/api/v1/dataplanes/{name}?mesh=default"),
        None,
    );
    dp["status"]["mtls"].clone()
}

fn expiry(mtls: &Value) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(mtls["certificateExpirationTime"].as_str()?).ok()
}

/// The certificate lifetime the sidecar holds as its mesh's identity
/// policy (from its `/config_dump`).
fn policy_lifetime(sidecar: &Sidecar) -> Option<String> {
    sidecar.config_dump()["secrets"]
        .as_array()?
        .iter()
        .find_map(|s| s["type"]["identity_policy"]["certificate_lifetime"].as_str())
        .map(str::to_owned)
}

#[test]
fn lowering_the_lifetime_renews_a_sidecar_within_the_new_lifetime() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "24h");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut web = Sidecar::start(&cp, dir.path(), "web-1");
    web.wait_ready(READY);
    let old = web.serial().expect("web-1 holds a certificate");
    eventually(
        "web-1's status to name its 24h certificate",
        DEADLINE,
        || {
            let m = mtls(&cp, "web-1");
            (m["serial"].as_str() == Some(old.as_str())).then_some(())
        },
    );
    let old_expiry = expiry(&mtls(&cp, "web-1")).expect("an expiration time");
    assert!(
        old_expiry > SystemTime::now() + Duration::from_secs(23 * 3600),
        "a 24h certificate: {old_expiry:?}"
    );
    eventually("web-1 to hold the mesh's identity policy", DEADLINE, || {
        (policy_lifetime(&web).as_deref() == Some("1day")).then_some(())
    });

    proxy::apply_pair(&cp, &ports, "30s");
    let lowered_at = SystemTime::now();

    let (serial, expires) = eventually("web-1 to renew with the new lifetime", DEADLINE, || {
        let m = mtls(&cp, "web-1");
        let serial = m["serial"].as_str()?.to_owned();
        (serial != old).then(|| (serial, expiry(&m).expect("an expiration time")))
    });
    let observed = SystemTime::now();
    println!("web-1: serial {old} -> {serial}, expires {expires:?}");
    // Within the new lifetime: issued after the Mesh changed, so it
    // expires at most 30 s after it was observed (whole seconds).
    assert!(
        expires <= observed + Duration::from_secs(31),
        "{expires:?} is within 30s of {observed:?}"
    );
    assert!(expires > lowered_at, "{expires:?}");
    assert_eq!(policy_lifetime(&web).as_deref(), Some("30s"));
    // The sidecar holds a renewed certificate (it may have renewed again
    // since: 30 s certificates renew every 15 s or so).
    assert_ne!(web.serial().as_deref(), Some(old.as_str()));
    assert!(web.exit_status().is_none(), "{}", web.logs());
    assert!(
        web.logs().contains("renewing it early"),
        "the sidecar says why it renewed:\n{}",
        web.logs()
    );
}
