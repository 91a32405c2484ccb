//! kuma#6825 made visible: two Dataplanes of one service, one declaring
//! `kuma.io/protocol: http` and one `tcp`, leave the service on TCP, and
//! the control plane says so with a `ProtocolAgreed` condition: on each
//! Dataplane (tag-based `kuma.io/service`) and on the MeshService that
//! selects them, naming the other Dataplane and the fix, in `get -o json`,
//! the `get` tables' MESSAGE column and `inspect dataplane`. Declaring
//! `http` on the second one clears it: the Dataplanes' condition goes
//! away, the MeshService's turns `True`.

use std::time::Duration;

use meshlink_e2e::{ControlPlane, StoreKind, eventually};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(20);

const MESH: &str = "type: Mesh\nname: default\n";

/// Two Dataplanes of `api` (the second declaring `second`) and a MeshService
/// selecting them with `appProtocol: http`.
fn resources(second: &str) -> String {
    format!(
        r#"
type: Dataplane
mesh: default
name: api-1
networking:
  address: 127.0.0.1
  inbound:
    - port: 18080
      servicePort: 18081
      tags:
        kuma.io/service: api
        kuma.io/protocol: http
---
type: Dataplane
mesh: default
name: api-2
networking:
  address: 127.0.0.2
  inbound:
    - port: 18080
      servicePort: 18081
      tags:
        kuma.io/service: api
        kuma.io/protocol: {second}
---
type: MeshService
name: api
mesh: default
spec:
  selector:
    dataplaneTags:
      kuma.io/service: api
  ports:
    - port: 18080
      appProtocol: http
"#
    )
}

/// `kind/name` as `meshlink get -o json` prints it.
fn get(cp: &ControlPlane, kind: &str, name: &str) -> Value {
    let out = cp.cli(&["get", kind, name, "-o", "json"]).success();
    serde_json::from_str(&out.stdout).expect("JSON")
}

/// The `ProtocolAgreed` condition of `r`, if any.
fn agreed(r: &Value) -> Option<Value> {
    r["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ProtocolAgreed")
        .cloned()
}

#[test]
fn disagreeing_inbounds_show_a_condition_until_they_agree() {
    let cp = ControlPlane::start(StoreKind::Sqlite);
    cp.cli_stdin(&["apply", "-f", "-"], Some(MESH)).success();
    cp.cli_stdin(&["apply", "-f", "-"], Some(&resources("tcp")))
        .success();

    let c = eventually("api-1's ProtocolAgreed", WAIT, || {
        agreed(&get(&cp, "dataplane", "api-1"))
    });
    assert_eq!(c["status"], "False", "{c}");
    assert_eq!(c["reason"], "ProtocolMismatch", "{c}");
    let m = c["message"].as_str().expect("a message");
    for part in [
        "inbound 18080 of service api declares http",
        "api-2 (tcp)",
        "served as TCP",
        "kuma.io/protocol",
    ] {
        assert!(m.contains(part), "{part:?} in {m}");
    }
    let c = eventually("api-2's ProtocolAgreed", WAIT, || {
        agreed(&get(&cp, "dataplane", "api-2"))
    });
    assert!(
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains("api-1 (http)")),
        "{c}"
    );

    let c = eventually("the MeshService's mismatch", WAIT, || {
        agreed(&get(&cp, "meshservice", "api")).filter(|c| c["status"] == "False")
    });
    let m = c["message"].as_str().expect("a message");
    for part in [
        "port 18080 declares appProtocol http",
        "api-2 inbound 18080 says tcp",
        "served as tcp meanwhile",
        "set kuma.io/protocol: http on every inbound",
    ] {
        assert!(m.contains(part), "{part:?} in {m}");
    }

    // The tables and inspect show it too.
    let out = cp.cli(&["get", "dataplanes"]).success();
    assert!(
        out.stdout.contains("MESSAGE") && out.stdout.contains("declares http"),
        "{out:#?}"
    );
    let out = cp.cli(&["get", "meshservices"]).success();
    assert!(
        out.stdout.contains("port 18080 declares appProtocol http"),
        "{out:#?}"
    );
    let out = cp.cli(&["inspect", "dataplane", "api-1"]).success();
    assert!(
        out.stdout
            .contains("ProtocolAgreed: False (ProtocolMismatch): inbound 18080 of service api"),
        "{out:#?}"
    );

    // The fix: api-2 declares http too.
    cp.cli_stdin(&["apply", "-f", "-"], Some(&resources("http")))
        .success();
    for name in ["api-1", "api-2"] {
        eventually(&format!("{name}'s condition cleared"), WAIT, || {
            agreed(&get(&cp, "dataplane", name)).is_none().then_some(())
        });
    }
    let c = eventually("the MeshService agreed", WAIT, || {
        agreed(&get(&cp, "meshservice", "api")).filter(|c| c["status"] == "True")
    });
    assert_eq!(c["reason"], "ProtocolsAgree", "{c}");
    assert!(
        c["message"]
            .as_str()
            .is_some_and(|m| m.contains("18080 as http")),
        "{c}"
    );
    let out = cp.cli(&["get", "meshservices"]).success();
    assert!(out.stdout.contains(" OK "), "{out:#?}");
}
