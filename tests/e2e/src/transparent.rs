//! Two workloads in network namespaces with transparent proxying, for
//! issue 37's tests: `web` and `backend`, each with its own namespace, a
//! veth pair between them (`192.168.77.1` and `.2`), and a veth pair to the
//! root namespace, where the control plane (on web's outer address) and
//! the test's own DNS resolver run. `/etc/netns/<ns>/resolv.conf` names the
//! test's resolver (`ip netns exec` mounts it over `/etc/resolv.conf`).
//!
//! Sidecars run as uid [`PROXY_UID`], which the rules exclude. Needs root,
//! iptables, python3, curl and getent (scripts/setup-test-deps).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::netns::{Netns, Veth};
use crate::proxy::{MESH, Sidecar, write_token};
use crate::{ControlPlane, StoreKind, bin_path};

/// The interpreter of the test's apps.
pub const PYTHON: &str = "/usr/bin/python3";
/// The sidecars' uid (the rules' `--kuma-dp-user` default).
pub const PROXY_UID: u32 = 5678;
/// Web's address on the link between the workloads.
pub const WEB_ADDR: &str = "192.168.77.1";
/// Backend's address on the link between the workloads.
pub const BACKEND_ADDR: &str = "192.168.77.2";
/// Every HTTP app's port.
pub const APP_PORT: u16 = 8080;
/// How long any wait here may take.
pub const DEADLINE: Duration = Duration::from_secs(60);
/// The sidecars' admin port (in their own namespaces, so always free).
pub const ADMIN_PORT: u16 = 19901;

/// An HTTP app on PORT (argv[1]) of ADDR (argv[3]; 0.0.0.0 without it,
/// IPv6 when it has a colon) answering every GET with `NAME from PEER`
/// (NAME argv[2], PEER the connection's source address); prints `ready`
/// once bound.
pub const APP: &str = r#"
import socket, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = f"{sys.argv[2]} from {self.client_address[0]}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
addr = sys.argv[3] if len(sys.argv) > 3 else "0.0.0.0"
class S(ThreadingHTTPServer):
    address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = S((addr, int(sys.argv[1])), H)
print("ready", flush=True)
s.serve_forever()
"#;

/// A DNS resolver on UDP port 53 of ADDR (argv[1]; IPv6 when it has a
/// colon) answering `external.test` A 192.0.2.55, `external6.test` AAAA
/// ADDR (an IPv6 ADDR only), the other type of either with no answer, and
/// every other name NXDOMAIN; prints `ready` once bound.
pub const RESOLVER: &str = r#"
import socket, struct, sys
addr = sys.argv[1]
family = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = socket.socket(family, socket.SOCK_DGRAM)
s.bind((addr, 53))
records = {("external.test", 1): socket.inet_aton("192.0.2.55")}
if family == socket.AF_INET6:
    records[("external6.test", 28)] = socket.inet_pton(socket.AF_INET6, addr)
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
    name = ".".join(labels)
    answer, count, code = b"", 0, 0x8180
    if (name, qtype) in records:
        rdata = records[(name, qtype)]
        answer = b"\xc0\x0c" + struct.pack(">HHIH", qtype, 1, 30, len(rdata)) + rdata
        count = 1
    elif name not in {n for n, _ in records}:
        code = 0x8183
    s.sendto(struct.pack(">HHHHHH", ident, code, 1, count, 0, 0) + question + answer, peer)
"#;

/// `ip ARGS` in the root namespace; panics unless it succeeds.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A program in `ns` (the root namespace without), killed on drop.
pub struct Program(Child);

impl Program {
    /// Starts the Python `script` with `args`; returns once it printed
    /// `ready`.
    pub fn python(ns: Option<&Netns>, script: &str, args: &[&str]) -> Program {
        let mut program = Program::spawn(ns, PYTHON, &["-c", script], args, Stdio::piped());
        let mut line = String::new();
        BufReader::new(program.0.stdout.as_mut().expect("stdout"))
            .read_line(&mut line)
            .expect("read ready");
        assert_eq!(line.trim(), "ready", "the program did not start");
        program
    }

    /// Starts `program` with `first` then `args` in `ns`, its stdout to
    /// `stdout`, its stderr inherited.
    pub fn spawn(
        ns: Option<&Netns>,
        program: &str,
        first: &[&str],
        args: &[&str],
        stdout: Stdio,
    ) -> Program {
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns.name(), program]);
                c
            }
            None => Command::new(program),
        };
        let child = cmd
            .args(first)
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {program}: {e}"));
        Program(child)
    }

    /// The child, to read its output.
    pub fn child(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `/etc/netns/<ns>/resolv.conf` (what `ip netns exec` mounts over
/// `/etc/resolv.conf`), removed on drop.
pub struct ResolvConf(PathBuf);

impl ResolvConf {
    /// Writes it naming `nameserver`.
    pub fn write(ns: &Netns, nameserver: &str) -> ResolvConf {
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
pub struct Workload {
    /// Its network namespace.
    pub ns: Netns,
    /// Its link to the root namespace (the sidecar's admin endpoint
    /// listens on its inner address).
    pub cp_link: Veth,
    _resolv: ResolvConf,
}

impl Workload {
    /// Installs the transparent-proxy rules (DNS redirected, IPv4).
    pub fn install_rules(&self) {
        self.transparent_proxy("install");
    }

    /// Removes them.
    pub fn uninstall_rules(&self) {
        self.transparent_proxy("uninstall");
    }

    fn transparent_proxy(&self, verb: &str) {
        let bin = bin_path("meshlink");
        let mut args = vec![bin.to_str().expect("utf-8"), verb, "transparent-proxy"];
        if verb == "install" {
            args.extend(["--redirect-dns", "--ip-family-mode", "ipv4"]);
        }
        let (code, out, err) = self.ns.run(&args);
        assert_eq!(code, 0, "{verb} transparent-proxy:\n{out}\n{err}");
    }

    /// `curl` in the namespace (as root, so captured): (HTTP status,
    /// body), status 0 when the connection failed.
    pub fn curl(&self, url: &str) -> (u16, String) {
        let (_, out, _) = self
            .ns
            .run(&["curl", "-s", "-m", "5", "-w", "\n%{http_code}", url]);
        let (body, code) = out.rsplit_once('\n').unwrap_or(("", "0"));
        (code.trim().parse().unwrap_or(0), body.to_owned())
    }

    /// `getent hosts NAME` in the namespace: the first address, if any.
    pub fn resolve(&self, name: &str) -> Option<String> {
        let (code, out, _) = self.ns.run(&["getent", "hosts", name]);
        (code == 0).then(|| out.split_whitespace().next().unwrap_or_default().to_owned())
    }

    /// The sidecar's admin address, from the root namespace and from its
    /// own.
    pub fn admin_addr(&self) -> String {
        format!("{}:{ADMIN_PORT}", self.cp_link.inner_addr)
    }
}

/// The two workloads, the control plane and the test's resolver.
pub struct Pair {
    /// Web (the client side).
    pub web: Workload,
    /// Backend (the server side).
    pub backend: Workload,
    /// The control plane.
    pub cp: ControlPlane,
    /// Files the sidecars may read (tokens, the CA, logs under `logs/`).
    pub dir: tempfile::TempDir,
    _resolver: Program,
}

impl Pair {
    /// Namespaces, links, the control plane and the resolver; nothing
    /// applied, no rules, no sidecar.
    pub fn new() -> Pair {
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
        for (ns, dev, addr) in [(&web_ns, &wl, WEB_ADDR), (&backend_ns, &bl, BACKEND_ADDR)] {
            ns.exec(&["ip", "addr", "add", &format!("{addr}/30"), "dev", dev]);
            ns.exec(&["ip", "link", "set", dev, "up"]);
        }
        // The VIPs must be routable for a connect to reach the rules.
        web_ns.exec(&["ip", "route", "add", "default", "via", BACKEND_ADDR]);
        // The control plane listens on web's outer address; backend
        // reaches it through its own link (the root namespace owns it).
        backend_ns.exec(&[
            "ip",
            "route",
            "add",
            &format!("{}/32", web_cp.outer_addr),
            "via",
            &backend_cp.outer_addr,
        ]);
        let cp = ControlPlane::start_on(StoreKind::Sqlite, &web_cp.outer_addr);
        let resolver = Program::python(None, RESOLVER, &[&web_cp.outer_addr]);
        let nameserver = web_cp.outer_addr.clone();
        let web = Workload {
            _resolv: ResolvConf::write(&web_ns, &nameserver),
            ns: web_ns,
            cp_link: web_cp,
        };
        let backend = Workload {
            _resolv: ResolvConf::write(&backend_ns, &nameserver),
            ns: backend_ns,
            cp_link: backend_cp,
        };
        let dir = tempfile::tempdir().expect("tempdir");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("let the sidecars in");
        let logs = dir.path().join("logs");
        std::fs::create_dir(&logs).expect("log dir");
        std::os::unix::fs::chown(&logs, Some(PROXY_UID), Some(PROXY_UID)).expect("chown");
        Pair {
            web,
            backend,
            cp,
            dir,
            _resolver: resolver,
        }
    }

    /// A file under `logs/` the sidecars may write.
    pub fn log_path(&self, name: &str) -> PathBuf {
        self.dir.path().join("logs").join(name)
    }

    /// `meshlink apply -f -` of `yaml`; panics unless it succeeds.
    pub fn apply(&self, yaml: &str) {
        apply(&self.cp, yaml);
    }

    /// Starts the sidecar of Dataplane `name` in workload `w`'s namespace
    /// as [`PROXY_UID`], its admin endpoint on [`Workload::admin_addr`].
    pub fn start_sidecar(&self, w: &Workload, name: &str) -> Sidecar {
        let dir = self.dir.path().join(name);
        let admin = (w.ns.name(), w.cp_link.inner_addr.as_str());
        start_sidecar(&self.cp, &dir, admin, ADMIN_PORT, name)
    }

    /// The VIP of `kuma.io/service` `service`, once the Mesh's status has
    /// one.
    pub fn vip(&self, service: &str) -> String {
        self.status_vip("vips", service)
    }

    /// The VIP of MeshService `name`, once the Mesh's status has one.
    pub fn mesh_service_vip(&self, name: &str) -> String {
        self.status_vip("meshServiceVips", name)
    }

    fn status_vip(&self, field: &str, name: &str) -> String {
        crate::eventually(
            &format!("{name}'s VIP in the Mesh status"),
            DEADLINE,
            || {
                let (_, m) = self.cp.api("GET", "/api/v1/meshes/default", None);
                m["status"][field][name].as_str().map(str::to_owned)
            },
        )
    }
}

/// `meshlink apply -f -` of `yaml` to `cp`; panics unless it succeeds.
pub fn apply(cp: &ControlPlane, yaml: &str) {
    let out = cp.cli_stdin(&["apply", "-f", "-"], Some(yaml));
    assert_eq!(out.code, 0, "apply:\n{}\n{}", out.stdout, out.stderr);
}

/// Starts the sidecar of Dataplane `name` in namespace `admin.0` as
/// [`PROXY_UID`] (which the rules exclude), its admin endpoint on
/// `admin.1:admin_port` (port 0: any), its token and the control plane's
/// CA written to `dir` readable by that user.
pub fn start_sidecar(
    cp: &ControlPlane,
    dir: &Path,
    admin: (&str, &str),
    admin_port: u16,
    name: &str,
) -> Sidecar {
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
    Sidecar::spawn_as(Some(admin), Some(PROXY_UID), name, admin_port, &args)
}

impl Default for Pair {
    fn default() -> Pair {
        Pair::new()
    }
}

/// A Dataplane `name` at `address` with transparent proxying
/// (`transparent_proxying`, the YAML flow mapping of its settings) and one
/// inbound per `(port, tags)` (`tags`, the inside of a YAML flow mapping,
/// e.g. `kuma.io/service: web, kuma.io/protocol: http`).
pub fn dataplane(
    name: &str,
    address: &str,
    inbounds: &[(u16, &str)],
    transparent_proxying: &str,
) -> String {
    let mut yaml = format!(
        "type: Dataplane\nmesh: {MESH}\nname: {name}\nnetworking:\n  address: {address}\n  inbound:\n"
    );
    for (port, tags) in inbounds {
        yaml.push_str(&format!("    - port: {port}\n      tags: {{{tags}}}\n"));
    }
    yaml.push_str(&format!("  transparentProxying: {transparent_proxying}\n"));
    yaml
}

/// The Mesh, mTLS on, with `networking.outbound.passthrough`.
pub fn mesh(passthrough: bool) -> String {
    format!(
        "type: Mesh\nname: {MESH}\nmtls:\n  enabledBackend: ca-1\n  backends:\n    - name: ca-1\n      type: builtin\nnetworking:\n  outbound:\n    passthrough: {passthrough}\n"
    )
}

/// The tags of an HTTP inbound of `service`.
pub fn http(service: &str) -> String {
    format!("kuma.io/service: {service}, kuma.io/protocol: http")
}

/// Web may call backend.
pub const PERMISSION: &str = "type: MeshTrafficPermission\nmesh: default\nname: web-to-backend\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from:\n    - targetRef: {kind: MeshService, name: web}\n      default: {action: Allow}\n";

/// The name in an [`APP`] answer (`NAME from PEER`), and the peer.
pub fn app_answer(body: &str) -> (&str, &str) {
    body.split_once(" from ").unwrap_or((body, ""))
}
