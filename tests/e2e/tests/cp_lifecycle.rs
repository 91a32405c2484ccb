//! Control-plane lifecycle: single instance per data dir, admin token file,
//! graceful SIGTERM, and `meshlink wait`.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use meshlink_e2e::{ControlPlane, StoreKind};
use serde_json::json;

#[test]
fn second_instance_on_same_data_dir_refuses_to_start() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    // Same data dir, another API port (any free one), so only the lock can stop it.
    let out = cp.command_on(0).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already running") && err.contains("--data-dir"),
        "{err}"
    );
    // The first one is unaffected.
    assert_eq!(cp.api("GET", "/api/v1/meshes", None).0, 200);
}

#[test]
fn admin_token_is_private_and_stable_across_restarts() {
    let mut cp = ControlPlane::start(StoreKind::Sqlite);
    let path = cp.data_dir().join("admin-token");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let before = cp.token().to_string();
    assert_eq!(cp.terminate(), Some(0), "SIGTERM exits 0:\n{}", cp.logs());
    cp.restart();
    assert_eq!(cp.token(), before);
}

#[test]
fn wait_returns_when_the_condition_is_met_and_fails_on_timeout() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    let site = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Site",
        "metadata": {"name": "west"}, "spec": {}});
    assert_eq!(cp.api("PUT", "/api/v1/sites/west", Some(&site)).0, 201);

    let timeout = cp.cli(&[
        "wait",
        "site/west",
        "--for",
        "condition=Ready",
        "--timeout",
        "1s",
    ]);
    assert_eq!(timeout.code, 1, "{timeout:#?}");
    assert!(timeout.stderr.contains("timed out"), "{}", timeout.stderr);

    let server = cp.server();
    let token = cp.token().to_string();
    let lists = &["method=\"GET\"", "route=\"/api/v1/{plural}\""];
    let before = cp.metric(lists);
    let waiter = std::thread::spawn(move || {
        meshlink_e2e::run_cli(
            &[
                "--server",
                &server,
                "--token",
                &token,
                "wait",
                "mesh/late",
                "--for",
                "condition=Ready",
                "--timeout",
                "60s",
            ],
            &[],
            None,
        )
    });
    // Create the Mesh only after the waiter has read the current state
    // (its list request completed, the Mesh absent), so its creation and
    // the CA controller's Ready reach the waiter through the watch.
    meshlink_e2e::eventually("the waiter's initial list", Duration::from_secs(30), || {
        (cp.metric(lists) > before).then_some(())
    });
    let mesh = json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
        "metadata": {"name": "late"}, "spec": {}});
    let (s, v) = cp.api("PUT", "/api/v1/meshes/late", Some(&mesh));
    assert_eq!(s, 201, "{v}");
    let out = waiter.join().unwrap();
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(out.stdout.contains("condition met"), "{}", out.stdout);
}

/// A VIP range the control plane cannot use is refused at start (exit 2)
/// naming the range and the clash: two ranges overlapping, a reserved
/// range, and a range holding an address of this host's interfaces (a
/// namespace made here, whose veth end has an address of a /30).
#[test]
fn an_unusable_vip_range_is_refused_at_start_naming_it() {
    let refused = |netns: Option<&str>, range: &str| {
        let mut cp = ControlPlane::prepare_on(StoreKind::Sqlite, "127.0.0.1", 0);
        if let Some(ns) = netns {
            cp.set_netns(ns);
        }
        cp.add_args(&["--vip-range", range]);
        let out = cp.command().output().expect("run meshlink-cp");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{range}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refused(None, "240.0.0.0/4,241.0.0.0/8");
    assert!(
        err.contains("invalid setting --vip-range: 241.0.0.0/8 overlaps 240.0.0.0/4"),
        "{err}"
    );
    let err = refused(None, "127.0.0.0/16");
    assert!(err.contains("127.0.0.0/16 overlaps 127.0.0.0/8"), "{err}");
    let ns = meshlink_e2e::netns::Netns::create("vip");
    let link = ns.veth(0);
    let octets: Vec<&str> = link.inner_addr.split('.').collect();
    let range = format!("{}.{}.{}.0/24", octets[0], octets[1], octets[2]);
    let err = refused(Some(ns.name()), &range);
    assert!(
        err.contains(&format!(
            "{range} holds {}, an address of this host's interfaces",
            link.inner_addr
        )),
        "{err}"
    );
}
