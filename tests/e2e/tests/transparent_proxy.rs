//! Issue 37 acceptance: an unmodified client in a workload's network
//! namespace calls `http://backend.mesh/` and gets mTLS, authorization and
//! routing from its sidecar (so does a call to the backend's own address),
//! with the traffic captured by
//! `meshlink install transparent-proxy` and the name answered by the
//! sidecar's DNS.
//!
//! Two namespaces made here, `web` and `backend`, each with its app, its
//! sidecar (run as uid 5678, which the rules exclude) and the rules, joined
//! by a veth pair (`192.168.77.1` and `.2`); each also has a veth pair to
//! the root namespace, where the control plane and the test's own DNS
//! resolver and plain server run. `/etc/netns/<ns>/resolv.conf` names the
//! test's resolver (`ip netns exec` mounts it over `/etc/resolv.conf`).
//!
//! Needs root, iptables, python3, curl and getent (scripts/setup-test-deps).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use meshlink_e2e::netns::{Netns, Veth};
use meshlink_e2e::proxy::{MESH, Sidecar, write_token};
use meshlink_e2e::{ControlPlane, StoreKind, bin_path, eventually};

const PYTHON: &str = "/usr/bin/python3";
const PROXY_UID: u32 = 5678;
const WEB_ADDR: &str = "192.168.77.1";
const BACKEND_ADDR: &str = "192.168.77.2";
const APP_PORT: u16 = 8080;
const DEADLINE: Duration = Duration::from_secs(60);

/// An HTTP app answering every GET with NAME (argv[2]) on 0.0.0.0:PORT
/// (argv[1]); prints `ready` once bound.
const APP: &str = r#"
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = sys.argv[2].encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H)
print("ready", flush=True)
s.serve_forever()
"#;

/// A DNS resolver on UDP ADDR:53 (argv[1]) answering `external.test` A
/// 192.0.2.55 and every other name NXDOMAIN; prints `ready` once bound.
const RESOLVER: &str = r#"
import socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 53))
print("ready", flush=True)
while True:
    q, peer = s.recvfrom(512)
    ident, flags, qd = struct.unpack(">HHH", q[:6])
    i, labels = 12, []
    while q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode().lower())
        i += 1 + q[i]
    question = q[12:i + 5]
    qtype = struct.unpack(">H", q[i + 1:i + 3])[0]
    if ".".join(labels) == "external.test" and qtype == 1:
        answer = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 30, 4) + socket.inet_aton("192.0.2.55")
        head = struct.pack(">HHHHHH", ident, 0x8180, 1, 1, 0, 0)
    else:
        answer = b""
        head = struct.pack(">HHHHHH", ident, 0x8183, 1, 0, 0, 0)
    s.sendto(head + question + answer, peer)
"#;

/// `ip ARGS` in the root namespace; panics unless it succeeds.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A Python program in `ns` (root namespace without), killed on drop;
/// returns once it printed `ready`.
struct Program(Child);

impl Program {
    fn start(ns: Option<&Netns>, script: &str, args: &[&str]) -> Program {
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns.name(), PYTHON]);
                c
            }
            None => Command::new(PYTHON),
        };
        let mut child = cmd
            .arg("-c")
            .arg(script)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start python3");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("stdout"))
            .read_line(&mut line)
            .expect("read ready");
        assert_eq!(line.trim(), "ready", "the program did not start");
        Program(child)
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `/etc/netns/<ns>/resolv.conf`, removed on drop.
struct ResolvConf(PathBuf);

impl ResolvConf {
    fn write(ns: &Netns, nameserver: &str) -> ResolvConf {
        let dir = Path::new("/etc/netns").join(ns.name());
        std::fs::create_dir_all(&dir).expect("create /etc/netns/<ns>");
        std::fs::write(
            dir.join("resolv.conf"),
            format!("nameserver {nameserver}\n"),
        )
        .expect("write resolv.conf");
        ResolvConf(dir)
    }
}

impl Drop for ResolvConf {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One workload: its namespace, the veth to the root namespace, and the
/// resolv.conf its namespace sees.
struct Workload {
    ns: Netns,
    cp_link: Veth,
    _resolv: ResolvConf,
}

/// Files the sidecar (uid 5678) reads: its token and the control plane's
/// CA, in a directory it may read.
fn sidecar_files(cp: &ControlPlane, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir).expect("the sidecar's dir");
    let token = dir.join(format!("{name}.token"));
    write_token(cp, &token, name);
    let ca = dir.join("cp-ca.pem");
    std::fs::copy(cp.data_dir().join("cp-tls").join("ca.pem"), &ca).expect("copy the CA");
    for f in [&token, &ca] {
        std::os::unix::fs::chown(f, Some(PROXY_UID), Some(PROXY_UID)).expect("chown");
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    (token, ca)
}

fn start_sidecar(cp: &ControlPlane, w: &Workload, dir: &Path, name: &str) -> Sidecar {
    let (token, ca) = sidecar_files(cp, dir, name);
    let args: Vec<std::ffi::OsString> = vec![
        "--cp".into(),
        format!("https://{}:{}", cp.host(), cp.xds_port()).into(),
        "--cp-ca".into(),
        ca.into(),
        "--token-file".into(),
        token.into(),
        "--mesh".into(),
        MESH.into(),
        "--name".into(),
        name.into(),
    ];
    Sidecar::spawn_as(
        Some((w.ns.name(), &w.cp_link.inner_addr)),
        Some(PROXY_UID),
        name,
        0,
        &args,
    )
}

fn install_rules(ns: &Netns) {
    let bin = bin_path("meshlink");
    let (code, out, err) = ns.run(&[
        bin.to_str().expect("utf-8"),
        "install",
        "transparent-proxy",
        "--redirect-dns",
        "--ip-family-mode",
        "ipv4",
    ]);
    assert_eq!(code, 0, "install transparent-proxy:\n{out}\n{err}");
}

/// `curl` in `ns` (as root, so captured): (HTTP status, body), status 0
/// when the connection failed.
fn curl(ns: &Netns, url: &str) -> (u16, String) {
    let (_, out, _) = ns.run(&["curl", "-s", "-m", "5", "-w", "\n%{http_code}", url]);
    let (body, code) = out.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// `getent hosts NAME` in `ns`: the first address, if any.
fn resolve(ns: &Netns, name: &str) -> Option<String> {
    let (code, out, _) = ns.run(&["getent", "hosts", name]);
    (code == 0).then(|| out.split_whitespace().next().unwrap_or_default().to_owned())
}

fn apply(cp: &ControlPlane, yaml: &str) {
    let out = cp.cli_stdin(&["apply", "-f", "-"], Some(yaml));
    assert_eq!(out.code, 0, "apply:\n{}\n{}", out.stdout, out.stderr);
}

fn dataplane(name: &str, address: &str, service: &str) -> String {
    format!(
        "type: Dataplane\nmesh: {MESH}\nname: {name}\nnetworking:\n  address: {address}\n  inbound:\n    - port: {APP_PORT}\n      tags: {{kuma.io/service: {service}, kuma.io/protocol: http}}\n  transparentProxying: {{}}\n"
    )
}

fn mesh(passthrough: bool) -> String {
    format!(
        "type: Mesh\nname: {MESH}\nmtls:\n  enabledBackend: ca-1\n  backends:\n    - name: ca-1\n      type: builtin\nnetworking:\n  outbound:\n    passthrough: {passthrough}\n"
    )
}

const PERMISSION: &str = "type: MeshTrafficPermission\nmesh: default\nname: web-to-backend\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n    - targetRef: {kind: MeshService, name: web}\n      default: {action: Allow}\n";

#[test]
fn an_unmodified_client_calls_backend_mesh_through_its_sidecar() {
    // Namespaces, the link between them, and their links to the root.
    let web_ns = Netns::create("tpw");
    let backend_ns = Netns::create("tpb");
    let web_cp = web_ns.veth(0);
    let backend_cp = backend_ns.veth(1);
    let (wl, bl) = (
        format!("tw{}", std::process::id()),
        format!("tb{}", std::process::id()),
    );
    ip(&["link", "add", &wl, "type", "veth", "peer", "name", &bl]);
    ip(&["link", "set", &wl, "netns", web_ns.name()]);
    ip(&["link", "set", &bl, "netns", backend_ns.name()]);
    web_ns.exec(&["ip", "addr", "add", &format!("{WEB_ADDR}/30"), "dev", &wl]);
    web_ns.exec(&["ip", "link", "set", &wl, "up"]);
    backend_ns.exec(&[
        "ip",
        "addr",
        "add",
        &format!("{BACKEND_ADDR}/30"),
        "dev",
        &bl,
    ]);
    backend_ns.exec(&["ip", "link", "set", &bl, "up"]);
    // The VIPs must be routable for a connect to reach the rules.
    web_ns.exec(&["ip", "route", "add", "default", "via", BACKEND_ADDR]);
    // The control plane listens on web's outer address; backend reaches it
    // through its own link (the root namespace owns the address).
    backend_ns.exec(&[
        "ip",
        "route",
        "add",
        &format!("{}/32", web_cp.outer_addr),
        "via",
        &backend_cp.outer_addr,
    ]);
    let cp = ControlPlane::start_on(StoreKind::Sqlite, &web_cp.outer_addr);
    // The namespaces' own resolver: the test's, in the root namespace.
    let _resolver = Program::start(None, RESOLVER, &[&web_cp.outer_addr]);
    let web = Workload {
        _resolv: ResolvConf::write(&web_ns, &web_cp.outer_addr),
        ns: web_ns,
        cp_link: web_cp,
    };
    let backend = Workload {
        _resolv: ResolvConf::write(&backend_ns, &web.cp_link.outer_addr),
        ns: backend_ns,
        cp_link: backend_cp,
    };

    let dir = tempfile::tempdir().expect("tempdir");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("let the sidecars in");
    }
    let log_dir = dir.path().join("logs");
    std::fs::create_dir(&log_dir).expect("log dir");
    std::os::unix::fs::chown(&log_dir, Some(PROXY_UID), Some(PROXY_UID)).expect("chown");
    let access_log = log_dir.join("backend-access.log");
    apply(
        &cp,
        &format!(
            "{}---\n{}---\n{}---\n{PERMISSION}---\ntype: MeshAccessLog\nmesh: default\nname: backend-inbound\nspec:\n  targetRef: {{kind: MeshService, name: backend}}\n  from:\n    - targetRef: {{kind: Mesh}}\n      default:\n        backends:\n          - type: File\n            file:\n              path: {}\n              format:\n                type: Json\n                json:\n                  - {{key: peer, value: \"%DOWNSTREAM_PEER_URI_SAN%\"}}\n                  - {{key: code, value: \"%RESPONSE_CODE%\"}}\n",
            mesh(true),
            dataplane("web-1", WEB_ADDR, "web"),
            dataplane("backend-1", BACKEND_ADDR, "backend"),
            access_log.display(),
        ),
    );
    install_rules(&web.ns);
    install_rules(&backend.ns);
    let _app = Program::start(Some(&backend.ns), APP, &[&APP_PORT.to_string(), "backend"]);
    let mut web_proxy = start_sidecar(&cp, &web, &dir.path().join("web"), "web-1");
    let mut backend_proxy = start_sidecar(&cp, &backend, &dir.path().join("backend"), "backend-1");
    web_proxy.wait_ready(DEADLINE);
    backend_proxy.wait_ready(DEADLINE);

    // The VIP, from the Mesh's status, and the name that resolves to it.
    let vip = eventually("backend's VIP in the Mesh status", DEADLINE, || {
        let (_, m) = cp.api("GET", "/api/v1/meshes/default", None);
        m["status"]["vips"]["backend"].as_str().map(str::to_owned)
    });
    let first: u8 = vip
        .split('.')
        .next()
        .and_then(|o| o.parse().ok())
        .unwrap_or(0);
    assert!(first >= 240, "{vip} is in the default range 240.0.0.0/4");
    let resolved = eventually("backend.mesh resolves in web's namespace", DEADLINE, || {
        resolve(&web.ns, "backend.mesh")
    });
    assert_eq!(resolved, vip);

    // An unmodified curl reaches the backend app through both sidecars,
    // over mTLS: the backend's sidecar logs web's SPIFFE ID.
    let (code, body) = eventually("curl http://backend.mesh/ answers", DEADLINE, || {
        let r = curl(&web.ns, "http://backend.mesh/");
        (r.0 == 200).then_some(r)
    });
    assert_eq!((code, body.as_str()), (200, "backend"));
    let line = eventually("the backend sidecar's access log line", DEADLINE, || {
        std::fs::read_to_string(&access_log)
            .ok()?
            .lines()
            .next()
            .map(str::to_owned)
    });
    let logged: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(logged["peer"], "spiffe://default/web", "{line}");
    assert_eq!(logged["code"], "200", "{line}");

    // The backend's own address and port is captured the same way: the
    // second line of its sidecar's log names web again.
    let direct = format!("http://{BACKEND_ADDR}:{APP_PORT}/");
    assert_eq!(curl(&web.ns, &direct), (200, "backend".to_owned()));
    let second = eventually("a second access log line", DEADLINE, || {
        std::fs::read_to_string(&access_log)
            .ok()?
            .lines()
            .nth(1)
            .map(str::to_owned)
    });
    assert!(second.contains("spiffe://default/web"), "{second}");

    // An external name is answered by the namespace's own resolver,
    // through the sidecar.
    assert_eq!(
        resolve(&web.ns, "external.test").as_deref(),
        Some("192.0.2.55")
    );

    // A client outside the mesh cannot reach the backend app past its
    // sidecar: on its own address and port, it meets the inbound's mTLS.
    let from_root = Command::new("curl")
        .args(["-s", "-m", "5", "-w", "%{http_code}", "-o", "/dev/null"])
        .arg(format!("http://{}:{APP_PORT}/", backend.cp_link.inner_addr))
        .output()
        .expect("curl from the root namespace");
    assert_eq!(
        String::from_utf8_lossy(&from_root.stdout),
        "000",
        "a plain client got an answer from the backend app"
    );

    // Passthrough: a destination outside the mesh (the test's resolver
    // host, a plain server in the root namespace) is reached while the
    // Mesh allows it, and refused once it does not.
    let plain_port = meshlink_e2e::ports::claim(&web.cp_link.outer_addr);
    let _plain = Program::start(None, APP, &[&plain_port.to_string(), "outside"]);
    let outside = format!("http://{}:{plain_port}/", web.cp_link.outer_addr);
    assert_eq!(curl(&web.ns, &outside), (200, "outside".to_owned()));
    apply(&cp, &mesh(false));
    eventually(
        "passthrough off refuses the outside server",
        DEADLINE,
        || (curl(&web.ns, &outside).0 == 0).then_some(()),
    );
    assert!(
        web_proxy.metric(
            r#"meshlink_proxy_upstream_none_healthy_total{cluster="outbound:passthrough:disabled"}"#
        ) > 0.0,
        "the refusal is counted on the disabled pass-through cluster"
    );
    apply(&cp, &mesh(true));

    // Authorization still applies: without the permission, 403.
    let out = cp.cli(&[
        "delete",
        "meshtrafficpermission",
        "web-to-backend",
        "-m",
        "default",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    eventually(
        "web is denied once the permission is gone",
        DEADLINE,
        || (curl(&web.ns, "http://backend.mesh/").0 == 403).then_some(()),
    );

    // A deleted service stops resolving.
    let out = cp.cli(&["delete", "dataplane", "backend-1", "-m", "default"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let deleted = Instant::now();
    eventually("backend.mesh stops resolving", DEADLINE, || {
        resolve(&web.ns, "backend.mesh").is_none().then_some(())
    });
    eprintln!(
        "backend.mesh stopped resolving {:?} after its Dataplane was deleted",
        deleted.elapsed()
    );
}
