//! The sidecar's mesh DNS asked by a real client, `dig` (scripts/
//! setup-test-deps installs it): the `meshlink:dns` Listener as the
//! control plane's builder writes it, through the proxy's validator, into
//! the DNS server, then A, AAAA, NXDOMAIN and NODATA over UDP and TCP.
//!
//! A dual-stack sidecar's second Listener, `meshlink:dns:ipv6` on `[::1]`,
//! is served by a server of its own, answering and closing with it.
//!
//! The server runs in process on 127.0.0.1 with port 0 (the validated
//! spec's port is replaced, so nothing races for a port). The end-to-end
//! form (namespaces, the redirect, `getent hosts backend.mesh`) needs the
//! control plane's table and lives with the e2e tests.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::util::pack_any;
use meshlink_proto::dns_listener::{LISTENER_NAME, LISTENER_NAME_IPV6, listener};
use meshlink_proxy::dns::{DnsMetrics, DnsServer, Outcome};
use meshlink_proxy::model::{ProxyConfig, Versioned};
use meshlink_proxy::xds::validate::dns_listener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A failure timeout, not a performance bound.
const DEADLINE: Duration = Duration::from_secs(30);

/// Runs `dig @server -p PORT args…` and gives its output.
async fn dig(server: SocketAddr, args: &[&str]) -> String {
    let out = tokio::time::timeout(
        DEADLINE,
        tokio::process::Command::new("dig")
            .arg(format!("@{}", server.ip()))
            .args(["-p", &server.port().to_string(), "+time=5", "+tries=1"])
            .args(args)
            .output(),
    )
    .await
    .expect("dig finishes")
    .expect("dig runs (scripts/setup-test-deps installs dnsutils)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn the_dns_server_answers_dig_with_mesh_names_nxdomain_and_nodata_over_udp_and_tcp() {
    let v4: IpAddr = "240.0.0.1".parse().unwrap();
    let v6: IpAddr = "fd00:fd00::1".parse().unwrap();
    let any = pack_any(listener(
        LISTENER_NAME,
        "127.0.0.1:15053".parse().unwrap(),
        &[
            ("backend.mesh", vec![v4, v6]),
            ("web.mesh", vec!["240.0.0.2".parse().unwrap()]),
        ],
        &["mesh"],
        Duration::from_secs(1),
    ));
    let mut spec = dns_listener(&any).expect("the builder's Listener validates");
    spec.bind.set_port(0);
    let mut config = ProxyConfig::default();
    config.dns.insert(
        LISTENER_NAME.to_owned(),
        Versioned {
            version: "1".into(),
            value: Arc::new(spec),
        },
    );
    let (_config_tx, config_rx) = watch::channel(Arc::new(config));
    let (bound_tx, mut bound) = watch::channel(None);
    let metrics = Arc::new(DnsMetrics::default());
    let stop = CancellationToken::new();
    let server = tokio::spawn(
        DnsServer {
            config: config_rx,
            listener: LISTENER_NAME,
            upstreams: Vec::new(),
            metrics: metrics.clone(),
            bound: bound_tx,
        }
        .run(stop.clone()),
    );
    let addr = tokio::time::timeout(DEADLINE, bound.wait_for(Option::is_some))
        .await
        .expect("the DNS server binds")
        .unwrap()
        .unwrap();

    assert_eq!(
        dig(addr, &["+short", "backend.mesh", "A"]).await.trim(),
        "240.0.0.1"
    );
    assert_eq!(
        dig(addr, &["+short", "+tcp", "BACKEND.mesh.", "AAAA"])
            .await
            .trim(),
        "fd00:fd00::1"
    );
    let full = dig(addr, &["backend.mesh", "A"]).await;
    assert!(full.contains("status: NOERROR"), "{full}");
    assert!(
        full.contains("backend.mesh.\t\t1\tIN\tA\t240.0.0.1"),
        "the TTL is the control plane's: {full}"
    );
    let nx = dig(addr, &["+tcp", "nope.mesh", "A"]).await;
    assert!(nx.contains("status: NXDOMAIN"), "{nx}");
    let nodata = dig(addr, &["web.mesh", "AAAA"]).await;
    assert!(
        nodata.contains("status: NOERROR") && nodata.contains("ANSWER: 0"),
        "{nodata}"
    );
    let txt = dig(addr, &["+notcp", "web.mesh", "TXT"]).await;
    assert!(txt.contains("ANSWER: 0"), "{txt}");

    assert_eq!(metrics.counted(Outcome::NxDomain), 1);
    assert_eq!(metrics.counted(Outcome::Mesh), 5);
    stop.cancel();
    tokio::time::timeout(DEADLINE, server)
        .await
        .expect("the server stops")
        .unwrap();
}

/// The validated spec of a DNS Listener on `bind` naming `web.mesh`
/// (IPv4 only), its port then replaced by 0.
fn web_only(bind: &str) -> Versioned<meshlink_proxy::model::dns::DnsSpec> {
    let any = pack_any(listener(
        LISTENER_NAME,
        bind.parse().unwrap(),
        &[("web.mesh", vec!["240.0.0.2".parse::<IpAddr>().unwrap()])],
        &["mesh"],
        Duration::from_secs(1),
    ));
    let mut spec = dns_listener(&any).expect("the builder's Listener validates");
    spec.bind.set_port(0);
    Versioned {
        version: "1".into(),
        value: Arc::new(spec),
    }
}

#[tokio::test]
async fn the_ipv6_dns_listener_is_served_on_ipv6_loopback_by_its_own_server() {
    let mut config = ProxyConfig::default();
    config
        .dns
        .insert(LISTENER_NAME.to_owned(), web_only("127.0.0.1:15053"));
    config
        .dns
        .insert(LISTENER_NAME_IPV6.to_owned(), web_only("[::1]:15053"));
    let (config_tx, config_rx) = watch::channel(Arc::new(config.clone()));
    let metrics = Arc::new(DnsMetrics::default());
    let stop = CancellationToken::new();
    let mut servers = Vec::new();
    let mut bound = Vec::new();
    for name in [LISTENER_NAME, LISTENER_NAME_IPV6] {
        let (bound_tx, rx) = watch::channel(None);
        bound.push(rx);
        servers.push(tokio::spawn(
            DnsServer {
                config: config_rx.clone(),
                listener: name,
                upstreams: Vec::new(),
                metrics: metrics.clone(),
                bound: bound_tx,
            }
            .run(stop.clone()),
        ));
    }
    let mut addrs = Vec::new();
    for b in &mut bound {
        let addr = tokio::time::timeout(DEADLINE, b.wait_for(Option::is_some))
            .await
            .expect("each DNS server binds")
            .unwrap()
            .unwrap();
        addrs.push(addr);
    }
    let v6 = addrs[1];
    assert_eq!(v6.ip(), "::1".parse::<IpAddr>().unwrap());
    // The mesh name over IPv6: A is the VIP, AAAA NOERROR without
    // answers (never NXDOMAIN), over UDP and TCP.
    assert_eq!(
        dig(v6, &["+short", "web.mesh", "A"]).await.trim(),
        "240.0.0.2"
    );
    for transport in ["+notcp", "+tcp"] {
        let nodata = dig(v6, &[transport, "web.mesh", "AAAA"]).await;
        assert!(
            nodata.contains("status: NOERROR") && nodata.contains("ANSWER: 0"),
            "{transport}: {nodata}"
        );
    }
    assert_eq!(metrics.counted(Outcome::Mesh), 3);

    // The control plane drops the IPv6 Listener (the Dataplane went
    // IPv4): its server closes, the IPv4 one keeps serving.
    config.dns.remove(LISTENER_NAME_IPV6);
    config_tx.send_replace(Arc::new(config));
    tokio::time::timeout(DEADLINE, bound[1].wait_for(Option::is_none))
        .await
        .expect("the IPv6 server closes")
        .unwrap();
    assert_eq!(*bound[0].borrow(), Some(addrs[0]));
    assert_eq!(
        dig(addrs[0], &["+short", "web.mesh", "A"]).await.trim(),
        "240.0.0.2"
    );
    stop.cancel();
    for s in servers {
        tokio::time::timeout(DEADLINE, s)
            .await
            .expect("the servers stop")
            .unwrap();
    }
}
