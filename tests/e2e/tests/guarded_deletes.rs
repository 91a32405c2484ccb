//! Issue 35 §3, with the real control plane and CLI: nothing is deleted out
//! from under live state. A Site, a Secret, a MeshService port and an
//! AccessGrant that others use are refused with each user listed as
//! `Kind/name` and the fix, nothing is deleted (the Site keeps its
//! `siteId`), and `--cascade` deletes them all, users first.

use meshlink_e2e::{ControlPlane, StoreKind};
use serde_json::Value;

const SITE: &str = "\
apiVersion: skupper.io/v2alpha1
kind: Site
metadata: {name: west}
spec: {linkAccess: default}
---
apiVersion: skupper.io/v2alpha1
kind: Listener
metadata: {name: db}
spec: {routingKey: db, host: 127.0.0.1, port: 15432}
---
apiVersion: skupper.io/v2alpha1
kind: Connector
metadata: {name: db}
spec: {routingKey: db, host: 127.0.0.1, port: 5432}
---
apiVersion: skupper.io/v2alpha1
kind: AccessGrant
metadata: {name: east}
spec: {redemptionsAllowed: 1, expirationWindow: 1h}
";

const MESH: &str = "\
type: Mesh
name: shop
---
type: MeshService
name: backend
mesh: shop
spec:
  selector: {dataplaneTags: {kuma.io/service: backend}}
  ports: [{port: 80, targetPort: 8080}]
---
type: Dataplane
name: web
mesh: shop
networking:
  address: 127.0.0.1
  inbound: [{port: 18080, servicePort: 8080, tags: {kuma.io/service: web}}]
  outbound:
    - port: 10080
      backendRef: {kind: MeshService, name: backend, port: 80}
";

fn json(cp: &ControlPlane, args: &[&str]) -> Value {
    let out = cp.cli(args).success();
    serde_json::from_str(&out.stdout).expect("-o json is JSON")
}

fn site_id(cp: &ControlPlane) -> String {
    json(cp, &["get", "site", "west", "-o", "json"])["status"]["siteId"]
        .as_str()
        .unwrap_or_else(|| panic!("no siteId yet"))
        .to_owned()
}

fn assert_mentions(text: &str, expected: &[&str]) {
    for e in expected {
        assert!(text.contains(e), "missing {e:?} in:\n{text}");
    }
}

#[test]
fn a_site_in_use_is_refused_keeping_its_site_id_and_cascade_deletes_everything_listed() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    cp.cli_stdin(&["apply", "-f", "-"], Some(SITE)).success();
    // The controller adds the default RouterAccess and its Secret (the
    // Site is then Configured; Ready needs a router, not started here) and
    // makes the grant redeemable.
    cp.cli(&["wait", "--for=condition=Configured", "site/west"])
        .success();
    cp.cli(&["wait", "--for=condition=ready", "accessgrant/east"])
        .success();
    let id = site_id(&cp);

    let out = cp.cli(&["delete", "site", "west"]);
    assert_eq!(
        out.code, 1,
        "a refused delete is a runtime failure: {out:#?}"
    );
    assert_mentions(
        &out.stderr,
        &[
            "Site \"west\" is in use by RouterAccess/skupper-router, Listener/db, Connector/db \
             and AccessGrant/east",
            "delete them first, or use --cascade",
        ],
    );
    // REST says the same with 409 InUse.
    let (status, body) = cp.api("DELETE", "/api/v1/sites/west", None);
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["reason"], "InUse", "{body}");
    // Nothing was deleted and the Site is the same Site.
    assert_eq!(site_id(&cp), id);
    for kind in ["routeraccess", "listener", "connector", "accessgrant"] {
        let items = json(&cp, &["get", kind, "-o", "json"]);
        assert_eq!(items["items"].as_array().map(Vec::len), Some(1), "{kind}");
    }

    // The RouterAccess's generated Secret is in use by it.
    let out = cp.cli(&["delete", "secret", "skupper-site-server"]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert_mentions(
        &out.stderr,
        &["RouterAccess/skupper-router (spec.tlsCredentials)"],
    );

    // A grant another site may still redeem is in use by that redemption.
    let out = cp.cli(&["delete", "accessgrant", "east"]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert_mentions(
        &out.stderr,
        &[
            "AccessGrant \"east\" is in use by a pending redemption (1 of 1 left, until ",
            "or use --cascade",
        ],
    );

    let out = cp.cli(&["delete", "site", "west", "--cascade"]).success();
    assert_mentions(
        &out.stdout,
        &[
            "routeraccess/skupper-router deleted",
            "listener/db deleted",
            "connector/db deleted",
            "accessgrant/east deleted",
            "site/west deleted",
        ],
    );
    let last = out.stdout.lines().last().unwrap_or_default();
    assert_eq!(last, "site/west deleted", "users first:\n{}", out.stdout);
    for kind in [
        "site",
        "routeraccess",
        "listener",
        "connector",
        "accessgrant",
    ] {
        let items = json(&cp, &["get", kind, "-o", "json"]);
        assert_eq!(items["items"], Value::Array(vec![]), "{kind}");
    }
}

#[test]
fn a_mesh_service_port_a_dataplane_names_is_kept_and_cascade_deletes_the_dataplane() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    cp.cli_stdin(&["apply", "-f", "-"], Some(MESH)).success();

    let out = cp.cli(&["delete", "meshservice", "backend", "-m", "shop"]);
    assert_eq!(out.code, 1, "{out:#?}");
    assert_mentions(
        &out.stderr,
        &[
            "MeshService \"backend\" in mesh \"shop\" is in use by Dataplane/web \
             (spec.networking.outbound[0].backendRef.port)",
            "delete them first, or use --cascade",
        ],
    );
    // Re-applying it without the port is refused too (bad input, exit 2),
    // at spec.ports, naming the Dataplane.
    let fewer = MESH.replace(
        "[{port: 80, targetPort: 8080}]",
        "[{port: 81, targetPort: 8080}]",
    );
    let out = cp.cli_stdin(&["apply", "-f", "-"], Some(&fewer));
    assert_eq!(out.code, 2, "{out:#?}");
    assert_mentions(
        &out.stderr,
        &["spec.ports: this change takes away what Dataplane/web \
           (spec.networking.outbound[0].backendRef.port = 80) still use"],
    );
    let ms = json(
        &cp,
        &["get", "meshservice", "backend", "-m", "shop", "-o", "json"],
    );
    assert_eq!(ms["spec"]["ports"][0]["port"], 80, "unchanged: {ms}");

    let out = cp
        .cli(&[
            "delete",
            "meshservice",
            "backend",
            "-m",
            "shop",
            "--cascade",
        ])
        .success();
    assert_eq!(
        out.stdout,
        "dataplane/web (mesh shop) deleted\nmeshservice/backend (mesh shop) deleted\n"
    );
    assert_eq!(cp.cli(&["get", "dp", "web", "-m", "shop"]).code, 1);
}
