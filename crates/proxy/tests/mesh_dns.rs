//! The sidecar's mesh DNS asked by a real client, `dig` (scripts/
//! setup-test-deps installs it): the `meshlink:dns` Listener as the
//! control plane's builder writes it, through the proxy's validator, into
//! the DNS server, then A, AAAA, NXDOMAIN and NODATA over UDP and TCP.
//!
//! The server runs in process on 127.0.0.1 with port 0 (the validated
//! spec's port is replaced, so nothing races for a port). The end-to-end
//! form (namespaces, the redirect, `getent hosts backend.mesh`) needs the
//! control plane's table and lives with the e2e tests.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::util::pack_any;
use meshlink_proto::dns_listener::{LISTENER_NAME, listener};
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
