//! Two processes with one token: a sidecar started as `--name backend-1`
//! with web-1's token is refused on Certify as on xDS (it names the
//! mismatch and `--name`), gets no certificate, and web-1's status keeps
//! the real web-1 sidecar's certificate.

use std::time::Duration;

use meshlink_e2e::proxy::{self, PairPorts, Sidecar, SidecarOptions};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};

const DEADLINE: Duration = Duration::from_secs(60);

#[test]
fn a_sidecar_with_another_dataplanes_token_gets_no_certificate() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let dir = tempfile::tempdir().unwrap();
    let ports = PairPorts::free();
    proxy::apply_pair(&cp, &ports, "1h");
    let mut web = Sidecar::start(&cp, dir.path(), "web-1");
    web.wait_ready(DEADLINE);
    let serial = web.serial().expect("web-1 holds a certificate");
    let stored_serial = || {
        let (_, dp) = cp.api("GET", "/api/v1/dataplanes/web-1?mesh=default", None);
        dp["status"]["mtls"]["serial"].as_str().map(str::to_owned)
    };
    eventually("web-1's status names its certificate", DEADLINE, || {
        (stored_serial().as_deref() == Some(serial.as_str())).then_some(())
    });

    let imposter = Sidecar::spawn(&SidecarOptions::new(
        &cp,
        &dir.path().join("web-1.token"),
        "backend-1",
    ));
    let why = eventually("the imposter refused", DEADLINE, || {
        let (code, body) = imposter.ready();
        let text = body.to_string();
        (code != 200 && text.contains("the token is for dataplane \\\"web-1\\\"")).then_some(text)
    });
    assert!(why.contains("--name"), "{why}");
    assert_eq!(imposter.serial(), None, "{}", imposter.logs());
    // Refused means nothing issued: web-1's status still shows web-1's
    // own certificate, and the control plane issued nothing more.
    assert_eq!(stored_serial().as_deref(), Some(serial.as_str()));
    let issued = cp.metric(&[
        "meshlink_identity_certify_requests_total",
        "result=\"issued\"",
    ]);
    assert_eq!(issued, 1.0, "only web-1's certificate was issued");
}
