//! The DNS server on real sockets: a table, a fake upstream resolver (a
//! UDP and TCP socket answering a canned hickory-built response), and a
//! client asking over UDP and TCP.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use meshlink_proto::dns_listener::LISTENER_NAME;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::answer::tests::spec_with;
use super::*;
use crate::model::Versioned;

/// How long a test waits for anything; a failure bound, not a timing.
const PATIENCE: Duration = Duration::from_secs(10);

/// The address the fake upstream gives every name.
const UPSTREAM_ANSWER: &str = "192.0.2.7";

fn config_with(spec: DnsSpec) -> Arc<ProxyConfig> {
    let mut c = ProxyConfig::default();
    c.dns.insert(
        LISTENER_NAME.to_owned(),
        Versioned {
            version: "1".into(),
            value: Arc::new(spec),
        },
    );
    Arc::new(c)
}

struct Running {
    config: watch::Sender<Arc<ProxyConfig>>,
    bound: watch::Receiver<Option<SocketAddr>>,
    metrics: Arc<DnsMetrics>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn start(spec: DnsSpec, upstreams: Vec<SocketAddr>) -> Self {
        let (config, rx) = watch::channel(config_with(spec));
        let (bound_tx, bound) = watch::channel(None);
        let metrics = Arc::new(DnsMetrics::default());
        let stop = CancellationToken::new();
        let server = DnsServer {
            config: rx,
            listener: LISTENER_NAME,
            upstreams,
            metrics: metrics.clone(),
            bound: bound_tx,
        };
        let task = tokio::spawn(server.run(stop.clone()));
        let running = Self {
            config,
            bound,
            metrics,
            stop,
            task,
        };
        running.addr().await;
        running
    }

    /// The bound address, once there is one.
    async fn addr(&self) -> SocketAddr {
        let mut bound = self.bound.clone();
        let addr = tokio::time::timeout(PATIENCE, bound.wait_for(Option::is_some))
            .await
            .expect("the server binds")
            .expect("the server runs");
        addr.expect("bound")
    }

    async fn stop(self) {
        self.stop.cancel();
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("the server stops")
            .expect("without panicking");
    }
}

fn query_bytes(id: u16, name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = id;
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

async fn ask_udp(server: SocketAddr, id: u16, name: &str, qtype: RecordType) -> Message {
    let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    socket
        .send_to(&query_bytes(id, name, qtype), server)
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(PATIENCE, socket.recv(&mut buf))
        .await
        .expect("an answer")
        .unwrap();
    Message::from_vec(&buf[..n]).expect("a DNS message")
}

async fn ask_tcp(stream: &mut TcpStream, id: u16, name: &str, qtype: RecordType) -> Message {
    let q = query_bytes(id, name, qtype);
    stream.write_u16(q.len() as u16).await.unwrap();
    stream.write_all(&q).await.unwrap();
    let read = async {
        let n = stream.read_u16().await.unwrap();
        let mut buf = vec![0u8; usize::from(n)];
        stream.read_exact(&mut buf).await.unwrap();
        buf
    };
    let buf = tokio::time::timeout(PATIENCE, read)
        .await
        .expect("an answer");
    Message::from_vec(&buf).expect("a DNS message")
}

fn addresses(m: &Message) -> Vec<IpAddr> {
    m.answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect()
}

/// The canned answer to `query`: its id and question, one A record.
fn canned(query: &[u8]) -> Vec<u8> {
    let q = Message::from_vec(query).unwrap();
    let mut r = Message::response(q.metadata.id, q.metadata.op_code);
    r.metadata.recursion_desired = q.metadata.recursion_desired;
    r.metadata.recursion_available = true;
    r.queries = q.queries.clone();
    let name = q.queries[0].name().clone();
    r.add_answer(Record::from_rdata(
        name,
        60,
        RData::A(A(UPSTREAM_ANSWER.parse().unwrap())),
    ));
    r.to_vec().unwrap()
}

/// A resolver on UDP and TCP (one port) that answers every query with
/// [`canned`].
async fn fake_upstream() -> SocketAddr {
    // The kernel picks a free UDP port; its TCP twin may be taken by
    // another test's socket meanwhile, so pick again when it is.
    let mut attempts = 0;
    let (udp, addr, tcp) = loop {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = udp.local_addr().unwrap();
        match TcpListener::bind(addr).await {
            Ok(tcp) => break (udp, addr, tcp),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && attempts < 20 => attempts += 1,
            Err(e) => panic!("bind TCP {addr}: {e}"),
        }
    };
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok((n, peer)) = udp.recv_from(&mut buf).await {
            let _ = udp.send_to(&canned(&buf[..n]), peer).await;
        }
    });
    tokio::spawn(async move {
        while let Ok((mut s, _)) = tcp.accept().await {
            tokio::spawn(async move {
                let n = s.read_u16().await.unwrap();
                let mut q = vec![0u8; usize::from(n)];
                s.read_exact(&mut q).await.unwrap();
                let a = canned(&q);
                s.write_u16(a.len() as u16).await.unwrap();
                s.write_all(&a).await.unwrap();
            });
        }
    });
    addr
}

/// A resolver that never answers (its socket is kept open, so queries
/// are not refused).
async fn silent_upstream() -> (SocketAddr, UdpSocket) {
    let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    (s.local_addr().unwrap(), s)
}

fn table() -> DnsSpec {
    spec_with(&[
        ("backend.mesh", &["240.0.0.1", "fd00:fd00::1"]),
        ("web.mesh", &["240.0.0.2"]),
    ])
}

#[tokio::test]
async fn mesh_names_are_answered_and_others_forwarded_with_their_id() {
    let upstream = fake_upstream().await;
    let dns = Running::start(table(), vec![upstream]).await;
    let server = dns.addr().await;

    let a = ask_udp(server, 7, "backend.mesh.", RecordType::A).await;
    assert_eq!(addresses(&a), ["240.0.0.1".parse::<IpAddr>().unwrap()]);
    let aaaa = ask_udp(server, 8, "Backend.Mesh.", RecordType::AAAA).await;
    assert_eq!(
        addresses(&aaaa),
        ["fd00:fd00::1".parse::<IpAddr>().unwrap()]
    );
    let none = ask_udp(server, 9, "web.mesh.", RecordType::AAAA).await;
    assert_eq!(
        (none.metadata.response_code, none.answers.len()),
        (ResponseCode::NoError, 0)
    );
    let nx = ask_udp(server, 10, "nope.mesh.", RecordType::A).await;
    assert_eq!(nx.metadata.response_code, ResponseCode::NXDomain);

    let out = ask_udp(server, 0xBEEF, "example.com.", RecordType::A).await;
    assert_eq!(out.metadata.id, 0xBEEF, "relayed with the caller's id");
    assert_eq!(
        addresses(&out),
        [UPSTREAM_ANSWER.parse::<IpAddr>().unwrap()]
    );

    assert_eq!(dns.metrics.counted(Outcome::Mesh), 3);
    assert_eq!(dns.metrics.counted(Outcome::NxDomain), 1);
    assert_eq!(dns.metrics.counted(Outcome::Forwarded), 1);
    dns.stop().await;
}

#[tokio::test]
async fn tcp_queries_are_answered_in_order_on_one_connection_and_forwarded_over_tcp() {
    let upstream = fake_upstream().await;
    let dns = Running::start(table(), vec![upstream]).await;
    let mut stream = TcpStream::connect(dns.addr().await).await.unwrap();
    let a = ask_tcp(&mut stream, 1, "backend.mesh.", RecordType::A).await;
    assert_eq!((a.metadata.id, addresses(&a).len()), (1, 1));
    let out = ask_tcp(&mut stream, 2, "example.org.", RecordType::A).await;
    assert_eq!(out.metadata.id, 2);
    assert_eq!(
        addresses(&out),
        [UPSTREAM_ANSWER.parse::<IpAddr>().unwrap()]
    );
    let nx = ask_tcp(&mut stream, 3, "gone.mesh.", RecordType::A).await;
    assert_eq!(nx.metadata.response_code, ResponseCode::NXDomain);
    dns.stop().await;
}

#[tokio::test]
async fn a_silent_upstream_is_passed_over_and_servfail_when_all_are_silent() {
    let (silent, _keep) = silent_upstream().await;
    let upstream = fake_upstream().await;
    let dns = Running::start(table(), vec![silent, upstream]).await;
    let out = ask_udp(dns.addr().await, 5, "example.com.", RecordType::A).await;
    assert_eq!(addresses(&out).len(), 1, "the second resolver answered");
    dns.stop().await;

    let dns = Running::start(table(), vec![silent]).await;
    let failed = ask_udp(dns.addr().await, 6, "example.com.", RecordType::A).await;
    assert_eq!(
        (failed.metadata.id, failed.metadata.response_code),
        (6, ResponseCode::ServFail)
    );
    assert_eq!(failed.queries.len(), 1, "the question is kept");
    assert_eq!(dns.metrics.counted(Outcome::ForwardFailed), 1);
    dns.stop().await;
}

#[tokio::test]
async fn forwards_beyond_max_pending_are_dropped_and_counted() {
    let (silent, _keep) = silent_upstream().await;
    let mut spec = table();
    spec.max_pending = 1;
    let dns = Running::start(spec, vec![silent]).await;
    let server = dns.addr().await;
    let client = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    client
        .send_to(&query_bytes(1, "a.example.", RecordType::A), server)
        .await
        .unwrap();
    client
        .send_to(&query_bytes(2, "b.example.", RecordType::A), server)
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(PATIENCE, client.recv(&mut buf))
        .await
        .expect("the first gets SERVFAIL")
        .unwrap();
    let first = Message::from_vec(&buf[..n]).unwrap();
    assert_eq!(
        (first.metadata.id, first.metadata.response_code),
        (1, ResponseCode::ServFail)
    );
    assert_eq!(dns.metrics.counted(Outcome::Dropped), 1);
    assert_eq!(dns.metrics.pending(), 0);
    dns.stop().await;
}

#[tokio::test]
async fn a_name_removed_from_the_table_is_nxdomain_on_the_next_query() {
    let dns = Running::start(table(), vec![]).await;
    let server = dns.addr().await;
    let a = ask_udp(server, 1, "web.mesh.", RecordType::A).await;
    assert_eq!(addresses(&a).len(), 1);
    let mut spec = table();
    spec.table.remove("web.mesh");
    dns.config.send_replace(config_with(spec));
    let gone = ask_udp(server, 2, "web.mesh.", RecordType::A).await;
    assert_eq!(gone.metadata.response_code, ResponseCode::NXDomain);
    assert_eq!(dns.addr().await, server, "a table change does not rebind");
    dns.stop().await;
}

#[tokio::test]
async fn a_new_address_rebinds_and_a_removed_dns_closes() {
    let dns = Running::start(table(), vec![]).await;
    let first = dns.addr().await;
    let mut spec = table();
    spec.bind = "127.0.0.2:0".parse().unwrap();
    dns.config.send_replace(config_with(spec));
    let mut bound = dns.bound.clone();
    let moved = tokio::time::timeout(
        PATIENCE,
        bound.wait_for(|b| b.is_some_and(|a| a.ip() != first.ip())),
    )
    .await
    .expect("rebinds")
    .unwrap()
    .unwrap();
    let a = ask_udp(moved, 1, "backend.mesh.", RecordType::A).await;
    assert_eq!(addresses(&a).len(), 1);
    dns.config.send_replace(Arc::new(ProxyConfig::default()));
    tokio::time::timeout(PATIENCE, bound.wait_for(Option::is_none))
        .await
        .expect("closes")
        .unwrap();
    dns.stop().await;
}

#[tokio::test]
async fn a_garbage_flood_is_survived_and_a_valid_query_still_answered() {
    let dns = Running::start(table(), vec![]).await;
    let server = dns.addr().await;
    let flood = UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for i in 0..10_000u32 {
        let len = rand::random_range(0..300usize);
        let mut bytes: Vec<u8> = (0..len).map(|_| rand::random()).collect();
        // Every other one looks like a query header, so the parser, not
        // just the header check, sees garbage.
        if i % 2 == 0 && bytes.len() > 2 {
            bytes[2] &= 0x7f;
        }
        let _ = flood.send_to(&bytes, server).await;
    }
    // Over TCP too: a length no query has, then a connection that stalls.
    let mut huge = TcpStream::connect(server).await.unwrap();
    huge.write_all(&[0xff, 0xff, 0, 0]).await.unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(PATIENCE, huge.read_to_end(&mut rest)).await;
    // Closed (a reset, when the server closes with bytes unread).
    assert!(
        matches!(closed, Ok(Ok(0) | Err(_))),
        "an oversized frame closes the connection: {closed:?}"
    );

    // UDP may lose datagrams under a flood; a stub resolver asks again,
    // and so does this test.
    let mut answered = None;
    for id in 0..5 {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        socket
            .send_to(&query_bytes(id, "backend.mesh.", RecordType::A), server)
            .await
            .unwrap();
        let mut buf = vec![0u8; 4096];
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(2), socket.recv(&mut buf)).await
        {
            answered = Some(Message::from_vec(&buf[..n]).unwrap());
            break;
        }
    }
    let a = answered.expect("a valid query is answered after the flood");
    assert_eq!(addresses(&a), ["240.0.0.1".parse::<IpAddr>().unwrap()]);
    let garbage = dns.metrics.counted(Outcome::Malformed) + dns.metrics.counted(Outcome::Dropped);
    assert!(garbage > 0, "the flood is counted");
    assert!(!dns.task.is_finished(), "the server still runs");
    dns.stop().await;
}
