//! Issue 37 acceptance, L7 through capture: an unmodified
//! `curl http://backend.mesh/` is split by a MeshHTTPRoute between
//! backend's `version: v1` and `v2` inbounds, the grpcio client dials a
//! MeshService's hostname and port (`greeter.svc.mesh.local:9090`, no
//! `xds:` scheme) and is answered by the real gRPC server behind backend's
//! sidecar, and a name outside web's `reachableServices` does not resolve
//! in its namespace. The set-up is [`meshlink_e2e::transparent::Pair`].
//!
//! Needs root, iptables, python3 with grpcio (tests/interop/.venv), curl
//! and getent (scripts/setup-test-deps).

use std::collections::BTreeMap;

use meshlink_e2e::eventually;
use meshlink_e2e::interop::{interop_python, script};
use meshlink_e2e::transparent::{
    APP, APP_PORT, BACKEND_ADDR, DEADLINE, Pair, Program, WEB_ADDR, app_answer, dataplane, http,
    mesh,
};

const V2_PORT: u16 = 8081;
const GREETER_PORT: u16 = 9090;
const HIDDEN_PORT: u16 = 8082;

/// Every service may call every other.
const ALLOW_ALL: &str = "type: MeshTrafficPermission\nmesh: default\nname: allow-all\nspec:\n  targetRef: {kind: Mesh}\n  from:\n    - targetRef: {kind: Mesh}\n      default: {action: Allow}\n";

/// A MeshHTTPRoute from web splitting `backend` evenly between its
/// versions.
const SPLIT: &str = "type: MeshHTTPRoute\nname: backend-split\nmesh: default\nspec:\n  targetRef: {kind: MeshService, name: web}\n  to:\n    - targetRef: {kind: MeshService, name: backend}\n      rules:\n        - matches: [{path: {type: PathPrefix, value: /}}]\n          default:\n            backendRefs:\n              - {kind: MeshServiceSubset, name: backend, tags: {version: v1}, weight: 50}\n              - {kind: MeshServiceSubset, name: backend, tags: {version: v2}, weight: 50}\n";

/// The MeshService of the gRPC server on backend's port 9090.
const GREETER: &str = "type: MeshService\nname: greeter\nmesh: default\nspec:\n  selector:\n    dataplaneRef: {name: backend-1}\n  ports:\n    - {port: 9090, targetPort: 9090, appProtocol: grpc}\n";

#[test]
fn captured_calls_are_routed_split_and_spoken_grpc_and_reachable_services_limit_names() {
    let pair = Pair::new();
    let (web, backend) = (&pair.web, &pair.backend);
    // One workload serving backend (two versions), the gRPC greeter and
    // hidden: one sidecar, one identity (its first inbound's service).
    pair.apply(&format!(
        "{}---\n{}---\n{}---\n{ALLOW_ALL}---\n{GREETER}",
        mesh(true),
        dataplane(
            "web-1",
            WEB_ADDR,
            &[(APP_PORT, &http("web"))],
            "{reachableServices: [backend, greeter]}"
        ),
        dataplane(
            "backend-1",
            BACKEND_ADDR,
            &[
                (APP_PORT, &format!("{}, version: v1", http("backend"))),
                (V2_PORT, &format!("{}, version: v2", http("backend"))),
                (
                    GREETER_PORT,
                    "kuma.io/service: greeter, kuma.io/protocol: grpc"
                ),
                (HIDDEN_PORT, &http("hidden")),
            ],
            "{}"
        ),
    ));
    web.install_rules();
    backend.install_rules();
    let _v1 = Program::python(Some(&backend.ns), APP, &[&APP_PORT.to_string(), "v1"]);
    let _v2 = Program::python(Some(&backend.ns), APP, &[&V2_PORT.to_string(), "v2"]);
    let python = interop_python();
    let greeter_script = script("greeter_server.py");
    let port = GREETER_PORT.to_string();
    let mut greeter = Program::spawn(
        Some(&backend.ns),
        python.to_str().expect("utf-8"),
        &[greeter_script.to_str().expect("utf-8")],
        &["--id", "greeter-1", "--host", "0.0.0.0", "--port", &port],
        std::process::Stdio::piped(),
    );
    {
        use std::io::BufRead as _;
        let mut line = String::new();
        std::io::BufReader::new(greeter.child().stdout.as_mut().expect("stdout"))
            .read_line(&mut line)
            .expect("greeter_server.py's listening line");
        assert!(line.contains("listening"), "greeter_server.py: {line}");
    }
    let mut web_proxy = pair.start_sidecar(web, "web-1");
    let mut backend_proxy = pair.start_sidecar(backend, "backend-1");
    web_proxy.wait_ready(DEADLINE);
    backend_proxy.wait_ready(DEADLINE);
    let greeter_vip = pair.mesh_service_vip("greeter");

    // Without a route, backend.mesh is either version.
    let (code, body) = eventually("curl http://backend.mesh/ answers", DEADLINE, || {
        let r = web.curl("http://backend.mesh/");
        (r.0 == 200).then_some(r)
    });
    assert_eq!(code, 200);
    assert!(["v1", "v2"].contains(&app_answer(&body).0), "{body}");

    // The split: both versions answer the same unmodified URL.
    pair.apply(SPLIT);
    eventually("v2 answers backend.mesh", DEADLINE, || {
        let (code, body) = web.curl("http://backend.mesh/");
        (code == 200 && app_answer(&body).0 == "v2").then_some(())
    });
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..40 {
        let (code, body) = web.curl("http://backend.mesh/");
        assert_eq!(code, 200, "{body}");
        *seen.entry(app_answer(&body).0.to_owned()).or_default() += 1;
    }
    println!("40 calls to backend.mesh under a 50/50 split: {seen:?}");
    // Each version has probability 2^-40 of never being picked.
    assert_eq!(
        seen.keys().map(String::as_str).collect::<Vec<_>>(),
        ["v1", "v2"],
        "{seen:?}"
    );

    // grpcio, unmodified, by the MeshService's name and port.
    assert_eq!(
        web.resolve("greeter.svc.mesh.local").as_deref(),
        Some(greeter_vip.as_str())
    );
    let (code, out, err) = web.ns.run(&[
        python.to_str().expect("utf-8"),
        script("sidecar_client.py").to_str().expect("utf-8"),
        "--target",
        "greeter.svc.mesh.local:9090",
        "--calls",
        "20",
    ]);
    assert_eq!(code, 0, "sidecar_client.py:\n{out}\n{err}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON line");
    assert_eq!(report["unary"]["greeter-1"], 20, "{report}");
    assert_eq!(report["unary_errors"], serde_json::json!([]), "{report}");

    // reachableServices: hidden has a VIP, but web is not sent it.
    pair.vip("hidden");
    assert_eq!(web.resolve("hidden.mesh"), None, "hidden is not reachable");
    assert!(
        backend.resolve("hidden.mesh").is_some(),
        "backend reaches every service"
    );
}
