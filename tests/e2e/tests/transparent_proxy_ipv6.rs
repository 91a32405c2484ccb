//! Issue 37, dual stack: with `meshlink install transparent-proxy` in its
//! default `--ip-family-mode dualstack` and a Dataplane in the default
//! `ipFamilyMode: DualStack`, an unmodified client's IPv6 traffic goes
//! through its sidecar as its IPv4 traffic does:
//! - `curl -6` to a server outside the mesh (a ULA address in the root
//!   namespace) is passed through by `outbound:passthrough:ipv6`, and
//!   refused (counted) once the Mesh's `networking.outbound.passthrough`
//!   is off;
//! - DNS to an IPv6 nameserver is redirected to `[::1]:15053`, where the
//!   sidecar's `meshlink:dns:ipv6` answers mesh names (A: the VIP; AAAA:
//!   NOERROR without answers, since VIPs are IPv4) and forwards the rest
//!   to that nameserver;
//! - a connection from outside to the workload's own IPv6 address and
//!   inbound port meets its inbound listener (mTLS), through
//!   `inbound:passthrough:ipv6`.
//!
//! One namespace made here, with a veth pair to the root namespace
//! carrying an IPv4 /30 (the control plane, the sidecar's admin) and an
//! IPv6 ULA /64 (the outside server and the test's resolver).
//!
//! Needs root, iptables/ip6tables, python3, curl and dig
//! (scripts/setup-test-deps).

use std::process::Command;

use meshlink_e2e::netns::Netns;
use meshlink_e2e::proxy::MESH;
use meshlink_e2e::transparent::{
    APP, APP_PORT, DEADLINE, Program, RESOLVER, ResolvConf, app_answer, apply, ip, mesh,
    start_sidecar,
};
use meshlink_e2e::{ControlPlane, StoreKind, bin_path, eventually};

/// `curl -6` in `ns` (as root, so captured): (HTTP status, body), status
/// 0 when the connection failed.
fn curl6(ns: &Netns, url: &str) -> (u16, String) {
    let (_, out, _) = ns.run(&["curl", "-6", "-s", "-m", "5", "-w", "\n%{http_code}", url]);
    let (body, code) = out.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_owned())
}

/// `dig` in `ns` for `name` of `qtype` at the IPv6 `nameserver`: the
/// status and the answers' data.
fn dig(ns: &Netns, nameserver: &str, name: &str, qtype: &str) -> (String, Vec<String>) {
    let at = format!("@{nameserver}");
    let (_, out, _) = ns.run(&[
        "dig",
        &at,
        name,
        qtype,
        "+tries=1",
        "+time=3",
        "+noall",
        "+comments",
        "+answer",
    ]);
    let status = out
        .split("status: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or("no answer")
        .to_owned();
    let answers = out
        .lines()
        .filter(|l| !l.starts_with(';') && !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().last().map(str::to_owned))
        .collect();
    (status, answers)
}

#[test]
fn ipv6_traffic_of_a_dual_stack_workload_goes_through_its_sidecar() {
    let ns = Netns::create("tp6");
    let link = ns.veth(0);
    // A ULA /64 on the same veth: ::1 outside, ::2 the workload.
    let prefix = format!("fd77:{:x}", std::process::id() & 0xffff);
    let (outer6, inner6) = (format!("{prefix}::1"), format!("{prefix}::2"));
    ip(&[
        "-6",
        "addr",
        "add",
        &format!("{outer6}/64"),
        "dev",
        &link.outer,
        "nodad",
    ]);
    ns.exec(&[
        "ip",
        "-6",
        "addr",
        "add",
        &format!("{inner6}/64"),
        "dev",
        &link.inner,
        "nodad",
    ]);
    let cp = ControlPlane::start_on(StoreKind::Sqlite, &link.outer_addr);
    let _resolver = Program::python(None, RESOLVER, &[&outer6]);
    let _resolv = ResolvConf::write(&ns, &outer6);
    let outside_port = meshlink_e2e::ports::claim(&link.outer_addr);
    let _outside = Program::python(None, APP, &[&outside_port.to_string(), "outside6", &outer6]);
    let _app = Program::python(Some(&ns), APP, &[&APP_PORT.to_string(), "web", "::"]);

    // web-1 on its IPv6 address, dual stack (the default); backend is
    // declared so that it gets a VIP and a name.
    apply(
        &cp,
        &format!(
            "{}---\ntype: Dataplane\nmesh: {MESH}\nname: web-1\nnetworking:\n  address: {inner6}\n  inbound:\n    - port: {APP_PORT}\n      tags: {{kuma.io/service: web}}\n  transparentProxying: {{}}\n---\ntype: Dataplane\nmesh: {MESH}\nname: backend-1\nnetworking:\n  address: 192.0.2.10\n  inbound:\n    - port: {APP_PORT}\n      tags: {{kuma.io/service: backend}}\n",
            mesh(true),
        ),
    );
    let bin = bin_path("meshlink");
    let (code, out, err) = ns.run(&[
        bin.to_str().expect("utf-8"),
        "install",
        "transparent-proxy",
        "--redirect-dns",
    ]);
    assert_eq!(
        code, 0,
        "install transparent-proxy (dual stack):\n{out}\n{err}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("let the sidecar in");
    }
    let admin = (ns.name(), link.inner_addr.as_str());
    let mut proxy = start_sidecar(&cp, &dir.path().join("web"), admin, 0, "web-1");
    proxy.wait_ready(DEADLINE);

    // Outbound IPv6 to a server outside the mesh: passed through, on the
    // IPv6 capture listener.
    let outside = format!("http://[{outer6}]:{outside_port}/");
    let (code, body) = eventually("curl -6 to the outside server answers", DEADLINE, || {
        let r = curl6(&ns, &outside);
        (r.0 == 200).then_some(r)
    });
    assert_eq!((code, app_answer(&body).0), (200, "outside6"));
    let through = r#"listener_rx_bytes_total{listener="outbound:passthrough:ipv6"}"#;
    assert!(
        proxy.metric(through) > 0.0,
        "the connection went through the sidecar's IPv6 capture listener"
    );

    // DNS to the IPv6 nameserver is answered by the sidecar on [::1]:
    // the mesh name's A is its VIP, its AAAA NOERROR without answers
    // (the test's resolver would say NXDOMAIN), and other names are
    // forwarded to the nameserver.
    let vip = eventually("backend's VIP in the Mesh status", DEADLINE, || {
        let (_, m) = cp.api("GET", "/api/v1/meshes/default", None);
        m["status"]["vips"]["backend"].as_str().map(str::to_owned)
    });
    let a = eventually("backend.mesh A over IPv6 DNS", DEADLINE, || {
        let r = dig(&ns, &outer6, "backend.mesh", "A");
        (r.0 == "NOERROR" && !r.1.is_empty()).then_some(r)
    });
    assert_eq!(a, ("NOERROR".to_owned(), vec![vip]));
    assert_eq!(
        dig(&ns, &outer6, "backend.mesh", "AAAA"),
        ("NOERROR".to_owned(), Vec::new()),
        "AAAA of a mesh name is NODATA (VIPs are IPv4), never NXDOMAIN"
    );
    assert_eq!(dig(&ns, &outer6, "nope.mesh", "AAAA").0, "NXDOMAIN");
    assert!(proxy.metric(r#"dns_queries_total{result="mesh"}"#) >= 2.0);
    let forwarded = proxy.metric(r#"dns_queries_total{result="forwarded"}"#);
    // An outside name: forwarded over IPv6 to the nameserver, and then
    // reached by name with curl -6.
    let by_name = format!("http://external6.test:{outside_port}/");
    let (code, body) = curl6(&ns, &by_name);
    assert_eq!((code, app_answer(&body).0), (200, "outside6"));
    assert!(proxy.metric(r#"dns_queries_total{result="forwarded"}"#) > forwarded);

    // Inbound IPv6 to the workload's own address and port meets its
    // inbound listener (mTLS), not the app: a plain client from outside
    // gets nothing, and the inbound listener saw its bytes.
    let inbound = format!("inbound:{inner6}:{APP_PORT}");
    let from_root = Command::new("curl")
        .args([
            "-6",
            "-s",
            "-m",
            "5",
            "-w",
            "%{http_code}",
            "-o",
            "/dev/null",
        ])
        .arg(format!("http://[{inner6}]:{APP_PORT}/"))
        .output()
        .expect("curl from the root namespace");
    assert_eq!(
        String::from_utf8_lossy(&from_root.stdout),
        "000",
        "a plain client got an answer from the app past its sidecar"
    );
    assert!(
        proxy.metric(&format!(
            r#"listener_rx_bytes_total{{listener="{inbound}"}}"#
        )) > 0.0,
        "the plain client's connection reached {inbound} through inbound:passthrough:ipv6"
    );

    // Passthrough off: the outside server is refused, counted on the
    // disabled cluster; back on, reached again.
    apply(&cp, &mesh(false));
    eventually(
        "passthrough off refuses the outside IPv6 server",
        DEADLINE,
        || (curl6(&ns, &outside).0 == 0).then_some(()),
    );
    assert!(
        proxy.metric(
            r#"meshlink_proxy_upstream_none_healthy_total{cluster="outbound:passthrough:disabled"}"#
        ) > 0.0,
        "the refusal is counted on the disabled pass-through cluster"
    );
    apply(&cp, &mesh(true));
    eventually(
        "passthrough on reaches the outside IPv6 server again",
        DEADLINE,
        || (curl6(&ns, &outside).0 == 200).then_some(()),
    );
}
