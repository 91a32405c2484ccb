//! Bad input through the CLI: exit code 2 with every error located by file,
//! document index and field path; runtime failures exit 1 with a plain message.

use meshlink_e2e::{ControlPlane, StoreKind, fixture};

#[test]
fn invalid_documents_report_every_error_and_apply_nothing() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let f = fixture("invalid.yaml");
    let path = f.to_str().unwrap();
    let out = cp.cli(&["apply", "-f", path]);
    assert_eq!(out.code, 2, "{out:#?}");
    let err = &out.stderr;
    for expected in [
        format!("{path}[0] spec.mtls.backends[0].type: unknown CA type \"vault\""),
        format!("{path}[0] spec.mtls.backends[1].name"),
        format!("{path}[0] spec.mtls.backends[1].dpCert.rotation.expiration"),
        format!("{path}[1] spec.networking.inbound[0].port"),
        format!("{path}[1] spec.networking.inbound[0].tags"),
        format!("{path}[2] spec.redemptionsAllowed"),
    ] {
        assert!(err.contains(&expected), "missing {expected:?} in:\n{err}");
    }
    assert!(
        out.stdout.is_empty(),
        "nothing may be applied: {}",
        out.stdout
    );
    let meshes = cp.cli(&["get", "meshes"]).success();
    assert!(
        meshes.stdout.is_empty() && meshes.stderr.contains("No meshes"),
        "{meshes:#?}"
    );
}

#[test]
fn malformed_yaml_is_bad_input() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let out = cp.cli_stdin(
        &["apply", "-f", "-"],
        Some("kind: Mesh\nmetadata: [unclosed\n"),
    );
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("<stdin>[0]"), "{}", out.stderr);
}

#[test]
fn unknown_kind_lists_accepted_kinds() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let doc = "apiVersion: meshlink.dev/v1alpha1\nkind: Gateway\nmetadata:\n  name: g\nspec: {}\n";
    let out = cp.cli_stdin(&["apply", "-f", "-"], Some(doc));
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(out.stderr.contains("<stdin>[0] kind"), "{}", out.stderr);
    assert!(
        out.stderr.contains("MeshTrafficPermission"),
        "{}",
        out.stderr
    );

    let get = cp.cli(&["get", "gateways"]);
    assert_eq!(get.code, 2, "{get:#?}");
    assert!(get.stderr.contains("unknown kind"), "{}", get.stderr);

    let doc = "apiVersion: example.com/v9\nkind: Mesh\nmetadata:\n  name: m\n";
    let out = cp.cli_stdin(&["apply", "-f", "-"], Some(doc));
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(
        out.stderr.contains("apiVersion") && out.stderr.contains("meshlink.dev/v1alpha1"),
        "{}",
        out.stderr
    );
}

#[test]
fn missing_resource_is_a_runtime_failure() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let out = cp.cli(&["get", "mesh", "nope"]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(out.stderr.contains("not found"), "{}", out.stderr);
    let out = cp.cli(&["delete", "mesh", "nope"]);
    assert_eq!(out.code, 1, "{out:#?}");
}

#[test]
fn stopped_control_plane_is_reported_plainly() {
    let mut cp = ControlPlane::start(StoreKind::Sqlite);
    let server = cp.server();
    cp.kill9();
    let out = cp.cli(&["get", "mesh"]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(
        out.stderr
            .contains(&format!("cannot reach the control plane at {server}")),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("panicked") && out.stderr.lines().count() <= 2,
        "{}",
        out.stderr
    );
}

#[test]
fn wrong_token_is_refused() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let server = cp.server();
    let out = meshlink_e2e::run_cli(
        &[
            "--server",
            &server,
            "--token",
            "not-the-token",
            "get",
            "meshes",
        ],
        &[],
        None,
    );
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(
        out.stderr
            .contains("the admin token given with --token was refused"),
        "{}",
        out.stderr
    );
}

#[test]
fn network_status_without_a_site_exits_2_saying_to_apply_one() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let out = cp.cli(&["network", "status"]);
    assert_eq!(out.code, 2, "as cli.md says: {out:#?}");
    assert!(
        out.stderr
            .contains("this control plane has no Site; apply one"),
        "{out:#?}"
    );
}
