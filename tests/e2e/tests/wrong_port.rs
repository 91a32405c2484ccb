//! A client pointed at the wrong port of a control plane is told so: a
//! sidecar given the REST API port (plain HTTP) hears that the xDS port is
//! 5678 by default, and the CLI given the xDS port (gRPC over TLS) hears
//! that the REST API port is 5681 by default. Real binaries on both ends.

use std::time::Duration;

use meshlink_e2e::proxy::{Sidecar, SidecarOptions};
use meshlink_e2e::{ControlPlane, StoreKind, eventually, run_cli};

#[test]
fn the_cli_pointed_at_the_xds_port_is_told_to_use_the_rest_port() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let xds = format!("http://127.0.0.1:{}", cp.xds_port());
    let out = run_cli(
        &["get", "meshes"],
        &[("MESHLINK_SERVER", &xds), ("MESHLINK_TOKEN", cp.token())],
        None,
    );
    assert_eq!(out.code, 1, "{out:#?}");
    for expected in [
        "this looks like the control plane's xDS port",
        "the REST API port is 5681 by default",
        "--server http://127.0.0.1:5681",
    ] {
        assert!(out.stderr.contains(expected), "no {expected:?} in {out:#?}");
    }
    // The REST port itself still answers the same command.
    cp.cli(&["get", "meshes"]).success();
}

#[test]
fn a_sidecar_pointed_at_the_rest_port_is_told_to_use_the_xds_port() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let dir = tempfile::tempdir().expect("tempdir");
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {name: default}\nspec: {}\n",
        ),
    )
    .success();
    let (token_text, _) =
        cp.dataplane_token(&["--mesh", "default", "--name", "web", "--service", "web"]);
    let token = dir.path().join("web.token");
    std::fs::write(&token, token_text).expect("write the token file");
    let mut opts = SidecarOptions::new(&cp, &token, "web");
    opts.cp_url = cp.server().replace("http://", "https://");
    let sidecar = Sidecar::spawn(&opts);
    let line = eventually(
        "the sidecar's failed connection, with the hint",
        Duration::from_secs(60),
        || {
            sidecar
                .logs()
                .lines()
                .find(|l| l.contains("cannot connect to the control plane"))
                .map(str::to_owned)
        },
    );
    for expected in [
        "this looks like the control plane's REST API port",
        "the xDS port is 5678 by default",
        "--cp https://127.0.0.1:5678",
    ] {
        assert!(line.contains(expected), "no {expected:?} in {line}");
    }
    // `/ready` says it too, in the shape the docs show.
    let (code, body) = sidecar.admin_get("/ready");
    assert_eq!(code, 503, "{body}");
    assert!(
        body.starts_with("{\"missing\":[") && body.ends_with("],\"ready\":false}"),
        "{body}"
    );
    assert!(body.contains("the xDS port is 5678 by default"), "{body}");
}
