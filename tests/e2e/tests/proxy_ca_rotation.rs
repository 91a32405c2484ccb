//! A mesh CA rotation under traffic: switching the Mesh's enabled backend
//! to a new builtin CA adds its root to the trust bundle the sidecars get
//! over SDS; each sidecar then renews its identity at once (its 1 h
//! certificate would otherwise wait about 30 minutes), and requests in
//! both directions keep succeeding throughout.

use std::time::Duration;

use meshlink_e2e::app::{HttpApp, Traffic};
use meshlink_e2e::proxy::{self, PairPorts};
use meshlink_e2e::{ControlPlane, StoreKind, eventually};

const READY: Duration = Duration::from_secs(30);
const ROTATION: Duration = Duration::from_secs(20);

const ROTATED_MESH: &str = "apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: default}
spec:
  mtls:
    enabledBackend: ca-2
    backends:
      - {name: ca-1, type: builtin, dpCert: {rotation: {expiration: 1h}}}
      - {name: ca-2, type: builtin, dpCert: {rotation: {expiration: 1h}}}
";

#[test]
fn a_ca_rotation_renews_every_sidecar_at_once_without_failed_requests() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let backend_app = HttpApp::start("backend app");
    let web_app = HttpApp::start("web app");
    let ports = PairPorts::with_apps(web_app.port(), backend_app.port());
    proxy::apply_pair(&cp, &ports, "1h");
    let tokens = tempfile::tempdir().expect("tempdir");
    let (mut web, mut backend) = proxy::start_pair_sidecars(&cp, tokens.path(), READY);
    let before = [web.serial(), backend.serial()];
    assert_eq!(web.trust_roots().len(), 1, "{}", web.config_dump());

    let to_backend = Traffic::start(ports.web_outbound, "/name", b"backend app\n");
    let to_web = Traffic::start(ports.backend_outbound, "/name", b"web app\n");
    eventually("traffic to flow", READY, || {
        (to_backend.snapshot().ok > 0 && to_web.snapshot().ok > 0).then_some(())
    });

    cp.cli_stdin(&["apply", "-f", "-"], Some(ROTATED_MESH))
        .success();

    for (s, old) in [(&web, &before[0]), (&backend, &before[1])] {
        eventually("the sidecar to get the new root", ROTATION, || {
            (s.trust_roots().len() == 2).then_some(())
        });
        let serial = eventually("the sidecar to renew its identity", ROTATION, || {
            s.serial().filter(|now| Some(now) != old.as_ref())
        });
        println!("{}: serial {old:?} -> {serial}", s.name());
    }
    // Requests keep flowing on the new certificates.
    let mark = (to_backend.snapshot().ok, to_web.snapshot().ok);
    eventually("requests after the rotation", READY, || {
        (to_backend.snapshot().ok > mark.0 + 10 && to_web.snapshot().ok > mark.1 + 10).then_some(())
    });
    let (a, b) = (to_backend.stop(), to_web.stop());
    println!("web -> backend: {a:?}\nbackend -> web: {b:?}");
    assert_eq!(a.failed + b.failed, 0, "failed requests: {a:?} {b:?}");
    assert!(web.exit_status().is_none() && backend.exit_status().is_none());
}
