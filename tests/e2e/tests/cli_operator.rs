//! What a new operator tripped on (issue 9 §6), through the real CLI against
//! a real control plane: deleting a Mesh in use, revoking a mistyped token
//! id, errors that name the input they came from, and all-or-nothing apply.

use std::process::{Command, Stdio};

use meshlink_e2e::{ControlPlane, StoreKind, fixture, run_cli};

const MESH_WITH_USERS: &str = "\
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: shop}
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {name: web-1, mesh: shop}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{port: 10001, servicePort: 8080, tags: {kuma.io/service: web}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {name: backend-1, mesh: shop}
spec:
  networking:
    address: 127.0.0.2
    inbound: [{port: 10002, servicePort: 8080, tags: {kuma.io/service: backend}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: MeshTrafficPermission
metadata: {name: web-to-backend, mesh: shop}
spec:
  targetRef: {kind: MeshService, name: backend}
  from: [{targetRef: {kind: MeshService, name: web}, default: {action: Allow}}]
";

#[test]
fn deleting_a_mesh_in_use_is_refused_naming_its_users_and_cascade_deletes_all() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    cp.cli_stdin(&["apply", "-f", "-"], Some(MESH_WITH_USERS))
        .success();

    let out = cp.cli(&["delete", "mesh", "shop"]);
    assert_eq!(out.code, 1, "{out:#?}");
    for expected in [
        "Mesh \"shop\" is in use by Dataplane/backend-1, Dataplane/web-1 and \
         MeshTrafficPermission/web-to-backend",
        "delete them first, or use --cascade",
    ] {
        assert!(
            out.stderr.contains(expected),
            "missing {expected:?}: {out:#?}"
        );
    }
    // Nothing was deleted.
    cp.cli(&["get", "mesh", "shop"]).success();
    let dps = cp.cli(&["get", "dp", "-m", "shop", "-o", "json"]).success();
    assert!(dps.stdout.contains("web-1") && dps.stdout.contains("backend-1"));

    // REST refuses the same way, with 409 InUse.
    let (status, body) = cp.api("DELETE", "/api/v1/meshes/shop", None);
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["reason"], "InUse", "{body}");

    let out = cp.cli(&["delete", "mesh", "shop", "--cascade"]).success();
    for expected in [
        "dataplane/backend-1 (mesh shop) deleted",
        "dataplane/web-1 (mesh shop) deleted",
        "meshtrafficpermission/web-to-backend (mesh shop) deleted",
        "mesh/shop deleted",
    ] {
        assert!(
            out.stdout.contains(expected),
            "missing {expected:?}: {out:#?}"
        );
    }
    assert_eq!(cp.cli(&["get", "mesh", "shop"]).code, 1);
    let (status, body) = cp.api("GET", "/api/v1/dataplanes?mesh=shop", None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["items"].as_array().map(Vec::len), Some(0), "{body}");
    let (status, body) = cp.api("GET", "/api/v1/meshtrafficpermissions?mesh=shop", None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["items"].as_array().map(Vec::len), Some(0), "{body}");

    // An empty mesh deletes without --cascade.
    cp.cli_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {name: empty}\n"),
    )
    .success();
    cp.cli(&["delete", "mesh", "empty"]).success();
}

#[test]
fn revoking_a_token_id_never_issued_fails() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    cp.cli_stdin(&["apply", "-f", "-"], Some(MESH_WITH_USERS))
        .success();

    let out = cp.cli(&["token", "revoke", "nope"]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(
        out.stderr.contains("no token with id nope"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("revoked"), "{out:#?}");

    // A real id revokes, once; the second time says so.
    let issued = cp
        .cli(&["token", "dataplane", "--mesh", "shop", "--name", "web-1"])
        .success();
    let id = issued
        .stderr
        .split_whitespace()
        .nth(1)
        .expect("token id in stderr")
        .to_string();
    let out = cp.cli(&["token", "revoke", &id]).success();
    assert_eq!(out.stdout.trim(), format!("token {id} revoked"));
    let out = cp.cli(&["token", "revoke", &id]).success();
    assert_eq!(out.stdout.trim(), format!("token {id} was already revoked"));

    // --force revokes an id this control plane has no record of.
    let out = cp
        .cli(&["token", "revoke", "legacy-id", "--force"])
        .success();
    assert_eq!(out.stdout.trim(), "token legacy-id revoked");
}

#[test]
fn a_refused_admin_token_names_where_it_came_from() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let server = cp.server();
    let token_file = cp.data_dir().join("admin-token");
    let token_file = token_file.display().to_string();

    let out = run_cli(
        &["get", "meshes"],
        &[("MESHLINK_SERVER", &server), ("MESHLINK_TOKEN", "stale")],
        None,
    );
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(
        out.stderr
            .contains("the admin token from MESHLINK_TOKEN was refused")
            && out.stderr.contains("unset it or export the token from")
            && out.stderr.contains(&token_file),
        "{}",
        out.stderr
    );

    let out = run_cli(
        &["--server", &server, "--token", "stale", "get", "meshes"],
        &[],
        None,
    );
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(
        out.stderr
            .contains("the admin token given with --token was refused")
            && out.stderr.contains(&token_file),
        "{}",
        out.stderr
    );

    // The default token file, in the working directory.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(dir.path().join("meshlink-data")).expect("mkdir");
    std::fs::write(dir.path().join("meshlink-data/admin-token"), "stale\n").expect("write");
    let out = Command::new(meshlink_e2e::bin_path("meshlink"))
        .args(["--server", &server, "get", "meshes"])
        .env_remove("MESHLINK_SERVER")
        .env_remove("MESHLINK_TOKEN")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run meshlink");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the admin token read from meshlink-data/admin-token was refused"),
        "{stderr}"
    );
}

#[test]
fn a_server_without_scheme_suggests_http() {
    let out = run_cli(&["--server", "127.0.0.1:5681", "get", "meshes"], &[], None);
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(
        out.stderr.contains("--server \"127.0.0.1:5681\"")
            && out.stderr.contains("did you mean http://127.0.0.1:5681?"),
        "{}",
        out.stderr
    );
    let out = run_cli(
        &["get", "meshes"],
        &[("MESHLINK_SERVER", "localhost:5681")],
        None,
    );
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(
        out.stderr.contains("MESHLINK_SERVER \"localhost:5681\"")
            && out.stderr.contains("did you mean http://localhost:5681?"),
        "{}",
        out.stderr
    );
}

#[test]
fn apply_is_all_or_nothing_when_the_server_rejects_one_document() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    // Document 1 is valid; document 2 names a mesh that does not exist
    // (only the server can tell); document 3 is valid.
    let docs = "\
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: first}
---
apiVersion: meshlink.dev/v1alpha1
kind: Dataplane
metadata: {name: web-1, mesh: nowhere}
spec:
  networking:
    address: 127.0.0.1
    inbound: [{port: 10001, servicePort: 8080, tags: {kuma.io/service: web}}]
---
apiVersion: meshlink.dev/v1alpha1
kind: Mesh
metadata: {name: third}
";
    let out = cp.cli_stdin(&["apply", "-f", "-"], Some(docs));
    assert_eq!(out.code, 2, "{out:#?}");
    assert!(
        out.stderr.contains("<stdin>[1] metadata.mesh")
            && out.stderr.contains("mesh \"nowhere\" does not exist"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("nothing was applied"), "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{out:#?}");
    let meshes = cp.cli(&["get", "meshes", "-o", "json"]).success();
    assert!(
        !meshes.stdout.contains("first") && !meshes.stdout.contains("third"),
        "{meshes:#?}"
    );

    // A mesh and its dataplane in one file still apply together: the
    // dry run sees the mesh the same file creates.
    let f = fixture("xds-mesh.yaml");
    cp.cli(&["apply", "-f", f.to_str().unwrap()]).success();
}

#[test]
fn the_proxy_reports_every_bad_flag_value_at_once() {
    let out = Command::new(meshlink_e2e::bin_path("meshlink-proxy"))
        .args([
            "run",
            "--cp-ca",
            "ca.pem",
            "--token-file",
            "token",
            "--name",
            "web",
            "--admin-addr",
            "localhost",
            "--drain-timeout",
            "soon",
            "--mode",
            "gateway",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run meshlink-proxy");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for flag in ["--admin-addr", "--drain-timeout", "--mode"] {
        assert!(
            stderr
                .lines()
                .any(|l| l.starts_with(&format!("error: {flag} "))),
            "{flag} missing from:\n{stderr}"
        );
    }
}

/// docs/cli.md quotes the warning for a field meshlink ignores; the binary
/// must print exactly that line.
#[test]
fn cli_md_quotes_the_real_ignored_field_warning() {
    let docs = std::fs::read_to_string(meshlink_e2e::workspace_root().join("docs/cli.md"))
        .expect("read docs/cli.md");
    let quoted = docs
        .lines()
        .find(|l| l.starts_with("warning: mesh.yaml[0] "))
        .expect("docs/cli.md quotes a warning for mesh.yaml[0]");
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("mesh.yaml"),
        "type: Mesh\nname: default\nmetrics:\n  enabledBackend: prometheus-1\n",
    )
    .expect("write mesh.yaml");
    let out = Command::new(meshlink_e2e::bin_path("meshlink"))
        .args(["--server", &cp.server(), "--token", cp.token()])
        .args(["apply", "-f", "mesh.yaml"])
        .env_remove("MESHLINK_SERVER")
        .env_remove("MESHLINK_TOKEN")
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .expect("run meshlink");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.lines().any(|l| l == quoted),
        "docs/cli.md quotes {quoted:?} but the CLI printed:\n{stderr}"
    );
}

/// docs/quickstart.md must not claim that everything listens on 127.0.0.1
/// while the xDS port binds every interface by default.
#[test]
fn quickstart_states_where_the_xds_port_binds() {
    let docs = std::fs::read_to_string(meshlink_e2e::workspace_root().join("docs/quickstart.md"))
        .expect("read docs/quickstart.md");
    let help = Command::new(meshlink_e2e::bin_path("meshlink-cp"))
        .args(["run", "--help"])
        .output()
        .expect("run meshlink-cp run --help");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("0.0.0.0:5678"), "xds default changed? {help}");
    assert!(
        docs.contains("0.0.0.0:5678") && !docs.contains("listens on 127.0.0.1."),
        "quickstart.md must say xDS binds 0.0.0.0:5678"
    );
}
