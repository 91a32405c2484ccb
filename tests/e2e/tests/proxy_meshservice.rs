//! Kuma's MeshService flow through real sidecars (mTLS, builtin CA), from
//! one Kuma universal file listing the MeshService and Dataplanes before
//! their Mesh:
//!
//! - backend-1 (tagged `kuma.io/service: backend`) and backend-2 (an
//!   inbound without tags) carry the label `app: backend`; other-1 is
//!   tagged `backend` too but labelled `app: other`;
//! - MeshService `backend` selects `app: backend`, port 80 targeting the
//!   inbound named `http`;
//! - the client's outbound with `backendRef` reaches backend-1 and backend-2
//!   only; its tag outbound (mode Disabled) reaches all three;
//! - a backendRef naming a port the MeshService lacks is refused at apply
//!   time with its field path; one naming a MeshService that does not exist
//!   yet is accepted, its proxy gets ready, and the outbound serves once
//!   that MeshService is applied;
//! - the MeshService's status lists backend-1 and backend-2, both
//!   connected;
//! - with `meshServices.mode: Exclusive` the tag outbound stops working
//!   while the backendRef outbound keeps serving.

use std::collections::BTreeSet;
use std::time::Duration;

use meshlink_e2e::app::{HttpApp, http_get};
use meshlink_e2e::proxy::Sidecar;
use meshlink_e2e::{ControlPlane, StoreKind, eventually, free_port};

const READY: Duration = Duration::from_secs(30);

struct Ports {
    b1: (u16, u16),
    b2: (u16, u16),
    other: (u16, u16),
    client_inbound: u16,
    via_mesh_service: u16,
    via_tag: u16,
}

fn mesh(mode: &str) -> String {
    format!(
        "type: Mesh\nname: default\nmeshServices:\n  mode: {mode}\nmtls:\n  enabledBackend: ca-1\n  \
         backends:\n    - name: ca-1\n      type: builtin\n"
    )
}

/// The MeshService, the four Dataplanes and an allow-all permission, then
/// the Mesh last.
fn universal(p: &Ports) -> String {
    format!(
        r#"
type: MeshService
name: backend
mesh: default
spec:
  selector:
    dataplaneLabels:
      matchLabels:
        app: backend
  ports:
    - port: 80
      targetPort: http
      appProtocol: http
---
type: Dataplane
name: backend-1
mesh: default
labels:
  app: backend
networking:
  address: 127.0.0.1
  inbound:
    - port: {b1_in}
      name: http
      servicePort: {b1_app}
      tags:
        kuma.io/service: backend
---
type: Dataplane
name: backend-2
mesh: default
labels:
  app: backend
networking:
  address: 127.0.0.1
  inbound:
    - port: {b2_in}
      name: http
      servicePort: {b2_app}
---
type: Dataplane
name: other-1
mesh: default
labels:
  app: other
networking:
  address: 127.0.0.1
  inbound:
    - port: {o_in}
      name: http
      servicePort: {o_app}
      tags:
        kuma.io/service: backend
---
type: Dataplane
name: client-1
mesh: default
networking:
  address: 127.0.0.1
  inbound:
    - port: {c_in}
      tags:
        kuma.io/service: client
  outbound:
    - port: {via_ms}
      backendRef:
        kind: MeshService
        name: backend
        port: 80
    - port: {via_tag}
      tags:
        kuma.io/service: backend
---
type: MeshTrafficPermission
name: allow-all
mesh: default
spec:
  targetRef:
    kind: Mesh
  from:
    - targetRef:
        kind: Mesh
      default:
        action: Allow
---
{mesh}"#,
        b1_in = p.b1.0,
        b1_app = p.b1.1,
        b2_in = p.b2.0,
        b2_app = p.b2.1,
        o_in = p.other.0,
        o_app = p.other.1,
        c_in = p.client_inbound,
        via_ms = p.via_mesh_service,
        via_tag = p.via_tag,
        mesh = mesh("Disabled"),
    )
}

/// Who answers `/name` through local `port`, `n` times (every request
/// must succeed).
fn answers(port: u16, n: usize) -> BTreeSet<String> {
    (0..n)
        .map(|_| {
            let r = http_get(port, "/name").expect("request through the outbound");
            assert_eq!(r.status, 200);
            r.text().trim().to_owned()
        })
        .collect()
}

/// Waits until requests through `port` have been answered by every app
/// of `expected` (and by no other); returns who answered.
fn reaches(port: u16, expected: &[&str]) -> BTreeSet<String> {
    let want: BTreeSet<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    let mut seen = BTreeSet::new();
    eventually(&format!("{port} to reach {expected:?}"), READY, || {
        if let Ok(r) = http_get(port, "/name") {
            seen.insert(r.text().trim().to_owned());
        }
        (seen == want).then_some(())
    });
    assert!(seen.is_subset(&want), "{seen:?}");
    seen
}

#[test]
fn backend_ref_outbound_reaches_only_the_selected_backends() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let apps = [
        HttpApp::start("backend-1"),
        HttpApp::start("backend-2"),
        HttpApp::start("other-1"),
    ];
    let p = Ports {
        b1: (free_port(), apps[0].port()),
        b2: (free_port(), apps[1].port()),
        other: (free_port(), apps[2].port()),
        client_inbound: free_port(),
        via_mesh_service: free_port(),
        via_tag: free_port(),
    };
    // Mesh, Dataplanes and MeshService in one file, the Mesh last.
    cp.cli_stdin(&["apply", "-f", "-"], Some(&universal(&p)))
        .success();
    let listed = cp.cli(&["get", "msvc", "-m", "default"]).success().stdout;
    assert!(
        listed.contains("backend") && listed.contains("80"),
        "{listed}"
    );

    let tokens = tempfile::tempdir().expect("tempdir");
    let mut sidecars: Vec<Sidecar> = ["backend-1", "backend-2", "other-1", "client-1"]
        .iter()
        .map(|n| Sidecar::start(&cp, tokens.path(), n))
        .collect();
    for s in &mut sidecars {
        s.wait_ready(READY);
    }

    // Status: the selected Dataplanes, both connected.
    let status = eventually("MeshService status to count 2 connected", READY, || {
        let yaml = cp
            .cli(&["get", "msvc", "backend", "-m", "default", "-o", "yaml"])
            .success()
            .stdout;
        yaml.contains("connected: 2").then_some(yaml)
    });
    assert!(
        status.contains("total: 2")
            && status.contains("- backend-1\n")
            && status.contains("- backend-2\n")
            && !status.contains("other-1"),
        "{status}"
    );

    // backendRef: only the MeshService's selected backends answer.
    reaches(p.via_mesh_service, &["backend-1", "backend-2"]);
    let more = answers(p.via_mesh_service, 20);
    assert!(!more.contains("other-1"), "{more:?}");
    // The tag outbound (mode Disabled) reaches every `backend`-tagged
    // inbound, other-1 included; backend-2 has no tag.
    reaches(p.via_tag, &["backend-1", "other-1"]);

    // Strictness: a port the MeshService does not have is refused with
    // its path; a MeshService that does not exist yet is accepted.
    let client2_outbound = free_port();
    let bad = format!(
        "type: Dataplane\nname: client-2\nmesh: default\nnetworking:\n  address: 127.0.0.1\n  \
         inbound: [{{port: {}, tags: {{kuma.io/service: client}}}}]\n  outbound:\n    \
         - port: {client2_outbound}\n      backendRef: {{kind: MeshService, name: backend, port: 81}}\n",
        free_port(),
    );
    let out = cp.cli_stdin(&["apply", "-f", "-"], Some(&bad));
    assert_ne!(out.code, 0, "{out:?}");
    assert!(
        out.stderr
            .contains("networking.outbound[0].backendRef.port: MeshService \"backend\" in mesh \"default\" has no port 81"),
        "{}",
        out.stderr
    );
    let later = bad.replace("name: backend, port: 81", "name: not-yet, port: 81");
    cp.cli_stdin(&["apply", "-f", "-"], Some(&later)).success();
    // Its proxy starts and is ready (I2); the outbound serves once the
    // MeshService is applied.
    let mut client2 = Sidecar::start(&cp, tokens.path(), "client-2");
    client2.wait_ready(READY);
    assert!(http_get(client2_outbound, "/name").is_err());
    let not_yet = "type: MeshService\nname: not-yet\nmesh: default\nspec:\n  selector:\n    \
                   dataplaneRef: {name: backend-1}\n  ports: [{port: 81, targetPort: http}]\n";
    cp.cli_stdin(&["apply", "-f", "-"], Some(not_yet)).success();
    reaches(client2_outbound, &["backend-1"]);

    // Exclusive: tag outbounds get no endpoints, MeshServices still serve.
    cp.cli_stdin(&["apply", "-f", "-"], Some(&mesh("Exclusive")))
        .success();
    eventually("the tag outbound to stop serving", READY, || {
        http_get(p.via_tag, "/name").err()
    });
    let seen = answers(p.via_mesh_service, 10);
    assert!(
        seen.is_subset(&BTreeSet::from(["backend-1".into(), "backend-2".into()])),
        "{seen:?}"
    );
}
