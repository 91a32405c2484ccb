//! The HTTP data path in process, on real sockets: an outbound HTTP
//! listener of the proxy's listener manager, routing to in-process hyper
//! backends by a hand-built RouteConfiguration. No control plane, no
//! binaries. What a client observes: which backend answered, the status,
//! the body the backend received, and the proxy's metrics.

mod support;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use meshlink_proxy::dataplane::Dataplane;
use meshlink_proxy::drain::ConnectionDrain;
use meshlink_proxy::listeners::{ListenerManager, SharedListenerStates};
use meshlink_proxy::metrics::ProxyMetrics;
use meshlink_proxy::model::fault::{Callers, Fault, Fraction};
use meshlink_proxy::model::http::HttpListener;
use meshlink_proxy::model::rate_limit::{LocalRateLimit, TokenBucket};
use meshlink_proxy::model::route::{
    ForwardAction, HeaderMatch, HeaderMutation, PathMatch, RetryOn, RetrySpec, Rewrite,
    RouteAction, RouteConfigSpec, RouteMatch, RouteSpec, ValueMatch, VirtualHostSpec,
    WeightedBackend,
};
use meshlink_proxy::model::{
    ClusterSpec, Direction, Discovery, LbPolicy, ListenerProtocol, ListenerSpec, ProxyConfig,
    Versioned,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use support::{dead_port, eventually};

fn versioned<T>(value: T) -> Versioned<T> {
    Versioned {
        version: "v1".into(),
        value: Arc::new(value),
    }
}

/// What a test backend does with a request.
#[derive(Clone)]
struct Behaviour {
    name: &'static str,
    /// Answer 503 unless `hits % fail_every == fail_every - 1` (1: never fail).
    fail_every: usize,
    /// Wait this long before answering.
    delay: Duration,
    hits: Arc<AtomicUsize>,
    /// Bytes of every request body received, in order.
    bodies: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl Behaviour {
    fn new(name: &'static str) -> Behaviour {
        Behaviour {
            name,
            fail_every: 1,
            delay: Duration::ZERO,
            hits: Arc::default(),
            bodies: Arc::default(),
        }
    }
}

/// An HTTP/1.1 backend on a free port.
async fn backend(b: Behaviour) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let b = b.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let b = b.clone();
                    async move {
                        let hit = b.hits.fetch_add(1, Ordering::SeqCst);
                        let headers = req.headers().clone();
                        let body = req.into_body().collect().await.map(|c| c.to_bytes());
                        let body = body.unwrap_or_default();
                        b.bodies.lock().unwrap().push(body.to_vec());
                        tokio::time::sleep(b.delay).await;
                        let status = if hit % b.fail_every == b.fail_every - 1 {
                            StatusCode::OK
                        } else {
                            StatusCode::SERVICE_UNAVAILABLE
                        };
                        let xff = headers
                            .get("x-forwarded-for")
                            .map(|v| v.to_str().unwrap_or_default().to_owned())
                            .unwrap_or_default();
                        let rid = headers.contains_key("x-request-id");
                        let text = format!("{} len={} xff={xff} rid={rid}", b.name, body.len());
                        Ok::<_, Infallible>(
                            Response::builder()
                                .status(status)
                                .body(Full::new(Bytes::from(text)))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

fn forward(
    backends: &[(&str, u32)],
    timeout: Option<Duration>,
    retry: Option<RetrySpec>,
) -> RouteAction {
    RouteAction::Forward(Box::new(ForwardAction {
        backends: backends
            .iter()
            .map(|(c, w)| WeightedBackend {
                cluster: (*c).to_owned(),
                weight: *w,
                request_headers: HeaderMutation::default(),
            })
            .collect(),
        timeout,
        idle_timeout: None,
        max_stream_duration: None,
        retry,
        rewrite: Rewrite::default(),
        mirrors: Vec::new(),
        hash_policies: Vec::new(),
    }))
}

fn route(name: &str, path: PathMatch, headers: Vec<HeaderMatch>, action: RouteAction) -> RouteSpec {
    RouteSpec {
        name: name.into(),
        matcher: RouteMatch {
            path,
            case_sensitive: true,
            headers,
            query: Vec::new(),
        },
        action,
        request_headers: HeaderMutation::default(),
        response_headers: HeaderMutation::default(),
    }
}

fn retry_5xx(num_retries: u32) -> RetrySpec {
    RetrySpec {
        retry_on: vec![RetryOn::FiveXx],
        retriable_status_codes: Vec::new(),
        num_retries,
        per_try_timeout: None,
        backoff_base: Some(Duration::from_millis(1)),
        backoff_max: Some(Duration::from_millis(2)),
        rate_limited_reset_headers: Vec::new(),
        rate_limited_max: None,
        retriable_request_headers: Vec::new(),
        retriable_response_headers: Vec::new(),
    }
}

/// The proxy with one outbound HTTP listener and the given routes and
/// clusters (static, plain HTTP/1.1).
struct Proxy {
    addr: SocketAddr,
    metrics: Arc<ProxyMetrics>,
    _stop: tokio_util::sync::DropGuard,
}

async fn proxy(routes: Vec<RouteSpec>, clusters: &[(&str, SocketAddr)]) -> Proxy {
    proxy_limited(routes, clusters, None).await
}

/// [`proxy`], with fault filters on the listener.
async fn proxy_faulty(
    routes: Vec<RouteSpec>,
    clusters: &[(&str, SocketAddr)],
    faults: Vec<Fault>,
) -> Proxy {
    proxy_with(routes, clusters, None, faults).await
}

/// [`proxy`], with a local rate limit on the listener.
async fn proxy_limited(
    routes: Vec<RouteSpec>,
    clusters: &[(&str, SocketAddr)],
    local_rate_limit: Option<LocalRateLimit>,
) -> Proxy {
    proxy_with(routes, clusters, local_rate_limit, Vec::new()).await
}

async fn proxy_with(
    routes: Vec<RouteSpec>,
    clusters: &[(&str, SocketAddr)],
    local_rate_limit: Option<LocalRateLimit>,
    faults: Vec<Fault>,
) -> Proxy {
    let listen: SocketAddr = format!("127.0.0.1:{}", dead_port()).parse().unwrap();
    let config = ProxyConfig {
        listeners: BTreeMap::from([(
            "out".to_owned(),
            versioned(ListenerSpec {
                name: "out".into(),
                address: listen,
                direction: Direction::Outbound,
                tls: None,
                rbac: Vec::new(),
                rbac_per_request: false,
                connection_rate_limit: None,
                bind: true,
                original_dst: false,
                protocol: ListenerProtocol::Http(HttpListener {
                    route_config: "out".into(),
                    use_remote_address: true,
                    idle_timeout: None,
                    stream_idle_timeout: None,
                    request_headers_timeout: None,
                    max_connection_duration: None,
                    local_rate_limit,
                    access_logs: Vec::new(),
                    faults,
                    tracing: None,
                }),
            }),
        )]),
        clusters: clusters
            .iter()
            .map(|(name, addr)| {
                (
                    (*name).to_owned(),
                    versioned(ClusterSpec {
                        name: (*name).into(),
                        discovery: Discovery::Static(vec![*addr]),
                        tls: None,
                        connect_timeout: Duration::from_secs(5),
                        lb: LbPolicy::LeastRequest,
                        http2: false,
                        circuit_breakers: None,
                        outlier_detection:
                            meshlink_proxy::model::circuit_breaker::OutlierSpec::builtin(),
                        health_check: None,
                    }),
                )
            })
            .collect(),
        routes: BTreeMap::from([(
            "out".to_owned(),
            versioned(RouteConfigSpec {
                name: "out".into(),
                virtual_hosts: vec![VirtualHostSpec {
                    name: "all".into(),
                    domains: vec!["*".into()],
                    routes,
                }],
            }),
        )]),
        ..ProxyConfig::default()
    };
    let (config_tx, config_rx) = watch::channel(Arc::new(config));
    let (identity_tx, identity_rx) = watch::channel(None);
    let (dataplane_tx, _dataplane_rx) = watch::channel(Arc::new(Dataplane::default()));
    let metrics = Arc::new(ProxyMetrics::default());
    let stop = CancellationToken::new();
    tokio::spawn({
        let manager = ListenerManager {
            config: config_rx,
            identity: identity_rx,
            dataplane: dataplane_tx,
            states: SharedListenerStates::default(),
            connections: TaskTracker::new(),
            drain: ConnectionDrain::default(),
            metrics: metrics.clone(),
            apps: Default::default(),
            table: Default::default(),
        };
        let stop = stop.clone();
        async move {
            manager.run(stop).await;
            drop((config_tx, identity_tx));
        }
    });
    eventually("the HTTP listener to accept", || async {
        TcpStream::connect(listen).await.ok()
    })
    .await;
    Proxy {
        addr: listen,
        metrics,
        _stop: stop.drop_guard(),
    }
}

#[tokio::test]
async fn a_local_rate_limit_lets_five_through_and_answers_the_rest_with_its_status_and_header() {
    // Kuma's MeshRateLimit example: 5 requests per window, 423 with a
    // header. The window is an hour here, so no refill can land mid-test.
    let hits = Behaviour::new("a");
    let a = backend(hits.clone()).await;
    let every = Duration::from_secs(3600);
    let limit = LocalRateLimit {
        max_tokens: 5,
        tokens_per_fill: 5,
        fill_interval: every,
        status: 423,
        response_headers: HeaderMutation {
            add: vec![("x-kuma-rate-limited".into(), "true".into())],
            ..HeaderMutation::default()
        },
        bucket: Arc::new(TokenBucket::new(5, every, tokio::time::Instant::now())),
    };
    let p = proxy_limited(
        vec![route(
            "all",
            PathMatch::Prefix("/".into()),
            Vec::new(),
            forward(&[("a", 1)], None, None),
        )],
        &[("a", a)],
        Some(limit),
    )
    .await;
    // Two connections share the listener's bucket.
    let mut clients = [Client::connect(p.addr).await, Client::connect(p.addr).await];
    let mut answers = Vec::new();
    for i in 0..8 {
        let c = &mut clients[i % 2];
        c.0.ready().await.unwrap();
        let req = Request::get("/")
            .header("host", "backend")
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = c.0.send_request(req).await.unwrap();
        let (status, limited) = (
            resp.status(),
            resp.headers().get("x-kuma-rate-limited").cloned(),
        );
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        answers.push((status, limited, String::from_utf8_lossy(&body).into_owned()));
    }
    let passed = answers
        .iter()
        .filter(|(s, _, _)| *s == StatusCode::OK)
        .count();
    assert_eq!(passed, 5, "{answers:?}");
    assert_eq!(
        hits.hits.load(Ordering::SeqCst),
        5,
        "refused requests never reach the app"
    );
    for (status, header, body) in &answers[5..] {
        assert_eq!(status.as_u16(), 423);
        assert_eq!(header.as_ref().map(|v| v.to_str().unwrap()), Some("true"));
        assert_eq!(body.trim_end(), "local_rate_limited");
    }
    assert!(
        metrics_text(&p.metrics)
            .contains("meshlink_proxy_http_rate_limited_total{listener=\"out\"} 3"),
        "{}",
        metrics_text(&p.metrics)
    );
}

/// A backend answering every request with `size` bytes.
async fn big_backend(size: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = service_fn(move |_req: Request<Incoming>| async move {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(vec![b'x'; size]))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn faults_abort_with_envoys_body_and_throttle_a_response_body() {
    let every = Fraction {
        numerator: 100,
        denominator: 100,
    };
    let a = big_backend(16 * 1024).await;
    let all = || {
        route(
            "all",
            PathMatch::Prefix("/".into()),
            Vec::new(),
            forward(&[("a", 1)], None, None),
        )
    };
    // 4 KiB/s on every response, sent in 256-byte slices each followed by
    // its 62.5 ms: the 64th slice leaves after 63 pauses, so 16 KiB cannot
    // arrive before 3.9375 s (timers never fire early).
    let throttled = Fault {
        callers: Callers::All,
        abort: None,
        delay: None,
        response_bytes_per_second: Some((4 * 1024, every)),
    };
    let p = proxy_faulty(vec![all()], &[("a", a)], vec![throttled]).await;
    let mut c = Client::connect(p.addr).await;
    let started = tokio::time::Instant::now();
    let (status, body) = c.get("/", None).await;
    let took = started.elapsed();
    assert_eq!((status, body.len()), (StatusCode::OK, 16 * 1024));
    assert!(
        took >= Duration::from_micros(3_937_500),
        "16 KiB at 4 KiB/s took {took:?}"
    );
    assert!(
        metrics_text(&p.metrics).contains(
            "meshlink_proxy_http_faults_total{listener=\"out\",kind=\"response_rate_limit\"} 1"
        ),
        "{}",
        metrics_text(&p.metrics)
    );

    // An abort for callers without a certificate's SPIFFE ID (every caller
    // but web): answered by the proxy, Envoy's body, never forwarded.
    let aborted = Fault {
        callers: Callers::Except(vec!["spiffe://default/web".into()]),
        abort: Some((503, every)),
        delay: None,
        response_bytes_per_second: None,
    };
    let p = proxy_faulty(vec![all()], &[("a", a)], vec![aborted]).await;
    let mut c = Client::connect(p.addr).await;
    let (status, body) = c.get("/", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body.trim_end(), "fault filter abort");
}

/// One HTTP/1.1 keep-alive connection to the proxy.
struct Client(hyper::client::conn::http1::SendRequest<Full<Bytes>>);

impl Client {
    async fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(conn);
        Client(send)
    }

    async fn send(&mut self, req: Request<Full<Bytes>>) -> (StatusCode, String) {
        self.0.ready().await.unwrap();
        let resp = self.0.send_request(req).await.unwrap();
        let status = resp.status();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    async fn get(&mut self, path: &str, header: Option<(&str, &str)>) -> (StatusCode, String) {
        let mut b = Request::get(path).header("host", "backend");
        if let Some((n, v)) = header {
            b = b.header(n, v);
        }
        self.send(b.body(Full::new(Bytes::new())).unwrap()).await
    }

    async fn post(&mut self, path: &str, body: Vec<u8>) -> (StatusCode, String) {
        let req = Request::post(path)
            .header("host", "backend")
            .header("content-length", body.len())
            .body(Full::new(Bytes::from(body)))
            .unwrap();
        self.send(req).await
    }
}

#[tokio::test]
async fn a_header_match_wins_and_a_90_10_split_holds_over_one_connection() {
    let a = backend(Behaviour::new("a")).await;
    let b = backend(Behaviour::new("b")).await;
    let canary = HeaderMatch {
        name: "x-canary".into(),
        kind: ValueMatch::Exact("1".into()),
        invert: false,
    };
    let p = proxy(
        vec![
            route(
                "canary",
                PathMatch::Prefix("/".into()),
                vec![canary],
                forward(&[("b", 1)], None, None),
            ),
            route(
                "split",
                PathMatch::Prefix("/".into()),
                Vec::new(),
                forward(&[("a", 90), ("b", 10)], None, None),
            ),
        ],
        &[("a", a), ("b", b)],
    )
    .await;
    let mut client = Client::connect(p.addr).await;
    for _ in 0..50 {
        let (status, body) = client.get("/x", Some(("x-canary", "1"))).await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.starts_with("b "), "the header match goes to b: {body}");
    }
    let n = 1000;
    let mut to_a = 0;
    for _ in 0..n {
        let (status, body) = client.get("/x", None).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            body.contains("xff=127.0.0.1"),
            "x-forwarded-for set: {body}"
        );
        assert!(body.contains("rid=true"), "x-request-id set: {body}");
        if body.starts_with("a ") {
            to_a += 1;
        }
    }
    // Binomial(1000, 0.9): sd 9.5; five sd either side.
    println!("90/10 split over one connection: {to_a}/{n} to a");
    assert!((852..=948).contains(&to_a), "{to_a} of {n} to a");
}

#[tokio::test]
async fn retries_replay_a_32_kib_post_and_a_1_mib_post_streams_once_unretried() {
    let mut flaky = Behaviour::new("flaky");
    flaky.fail_every = 3; // two 503s, then 200
    let bodies = flaky.bodies.clone();
    let addr = backend(flaky).await;
    let p = proxy(
        vec![route(
            "all",
            PathMatch::Prefix("/".into()),
            Vec::new(),
            forward(&[("flaky", 1)], None, Some(retry_5xx(5))),
        )],
        &[("flaky", addr)],
    )
    .await;
    let mut client = Client::connect(p.addr).await;
    let small: Vec<u8> = (0..32 * 1024).map(|i| (i % 251) as u8).collect();
    let (status, body) = client.post("/upload", small.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    {
        let seen = bodies.lock().unwrap();
        assert_eq!(seen.len(), 3, "two retries");
        assert!(
            seen.iter().all(|b| *b == small),
            "every try got the same 32 KiB"
        );
    }
    bodies.lock().unwrap().clear();
    let large = vec![9u8; 1024 * 1024];
    let (status, _) = client.post("/upload", large.clone()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "not retried");
    let seen = bodies.lock().unwrap();
    assert_eq!(seen.len(), 1, "one try only");
    assert_eq!(seen[0], large, "the 1 MiB body streamed through whole");
    let text = metrics_text(&p.metrics);
    assert!(text.contains("meshlink_proxy_http_retries_total{direction=\"outbound\",cluster=\"flaky\",route=\"all\"} 2"), "{text}");
}

#[tokio::test]
async fn a_slow_answer_past_the_route_timeout_is_a_504_and_counted() {
    let mut slow = Behaviour::new("slow");
    slow.delay = Duration::from_secs(3);
    let addr = backend(slow).await;
    let p = proxy(
        vec![route(
            "slow",
            PathMatch::Prefix("/".into()),
            Vec::new(),
            forward(&[("slow", 1)], Some(Duration::from_millis(200)), None),
        )],
        &[("slow", addr)],
    )
    .await;
    let mut client = Client::connect(p.addr).await;
    let (status, body) = client.get("/", None).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT, "{body}");
    let text = metrics_text(&p.metrics);
    assert!(text.contains("meshlink_proxy_http_timeouts_total{direction=\"outbound\",cluster=\"slow\",route=\"slow\"} 1"), "{text}");
    assert!(text.contains("code=\"504\""), "{text}");
}

#[tokio::test]
async fn connect_no_route_garbage_and_huge_headers_get_clear_answers_and_the_proxy_stays_up() {
    let a = backend(Behaviour::new("a")).await;
    let p = proxy(
        vec![route(
            "api",
            PathMatch::Prefix("/api".into()),
            Vec::new(),
            forward(&[("a", 1)], None, None),
        )],
        &[("a", a)],
    )
    .await;
    let mut client = Client::connect(p.addr).await;
    let (status, _) = client.get("/other", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let connect = Request::connect("backend:443")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let mut c2 = Client::connect(p.addr).await;
    let (status, _) = c2.send(connect).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

    let raw = |bytes: Vec<u8>| async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        s.write_all(&bytes).await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
        String::from_utf8_lossy(&out).into_owned()
    };
    let garbage = raw(b"\x16\x03\x01garbage that is not HTTP\r\n\r\n".to_vec()).await;
    assert!(garbage.starts_with("HTTP/1.1 400"), "{garbage:?}");
    let mut huge = b"GET /api HTTP/1.1\r\nhost: backend\r\nx-big: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 200 * 1024));
    huge.extend(b"\r\n\r\n");
    let answer = raw(huge).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "{answer:?}");

    let (status, body) = client.get("/api", None).await;
    assert_eq!(status, StatusCode::OK, "the proxy still serves: {body}");
}

fn metrics_text(m: &ProxyMetrics) -> String {
    let mut registry = prometheus_client::registry::Registry::with_prefix("meshlink_proxy");
    m.register(&mut registry);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
    out
}

/// A backend that answers `Upgrade: echo` with 101 and then echoes bytes.
async fn echo_upgrade_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = service_fn(|mut req: Request<Incoming>| async move {
                    if req.headers().get("upgrade").is_none_or(|v| v != "echo") {
                        return Ok::<_, Infallible>(
                            Response::builder()
                                .status(StatusCode::BAD_REQUEST)
                                .body(Full::new(Bytes::from("no upgrade header arrived")))
                                .unwrap(),
                        );
                    }
                    let on = hyper::upgrade::on(&mut req);
                    tokio::spawn(async move {
                        let Ok(up) = on.await else { return };
                        let (mut r, mut w) = tokio::io::split(TokioIo::new(up));
                        let _ = tokio::io::copy(&mut r, &mut w).await;
                    });
                    Ok(Response::builder()
                        .status(StatusCode::SWITCHING_PROTOCOLS)
                        .header("connection", "upgrade")
                        .header("upgrade", "echo")
                        .body(Full::new(Bytes::new()))
                        .unwrap())
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    addr
}

#[tokio::test]
async fn an_http_1_1_upgrade_switches_and_bytes_flow_both_ways() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let echo = echo_upgrade_backend().await;
    let p = proxy(
        vec![route(
            "ws",
            PathMatch::Prefix("/".into()),
            Vec::new(),
            forward(
                &[("echo", 1)],
                Some(Duration::from_secs(1)),
                Some(retry_5xx(2)),
            ),
        )],
        &[("echo", echo)],
    )
    .await;
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    s.write_all(
        b"GET /chat HTTP/1.1\r\nhost: echo\r\nconnection: Upgrade\r\nupgrade: echo\r\n\r\n",
    )
    .await
    .unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8; 1];
        assert_eq!(
            s.read(&mut byte).await.unwrap(),
            1,
            "closed before the head ended: {head:?}"
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: echo"), "{head}");
    // Past the route's 1 s timeout: an upgraded connection has none.
    for i in 0..3 {
        let msg = format!("ping {i}");
        s.write_all(msg.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; msg.len()];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(buf, msg.as_bytes());
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
}

#[tokio::test]
async fn a_mirrored_route_sends_a_copy_of_the_request_and_answers_from_its_backend() {
    let main = backend(Behaviour::new("main")).await;
    let shadow = Behaviour::new("shadow");
    let shadow_bodies = shadow.bodies.clone();
    let shadow_addr = backend(shadow).await;
    let mut action = forward(&[("main", 1)], None, None);
    if let RouteAction::Forward(f) = &mut action {
        f.mirrors.push(meshlink_proxy::model::route::Mirror {
            cluster: "shadow".into(),
            per_million: 1_000_000,
        });
    }
    let p = proxy(
        vec![route(
            "mirrored",
            PathMatch::Prefix("/".into()),
            Vec::new(),
            action,
        )],
        &[("main", main), ("shadow", shadow_addr)],
    )
    .await;
    let mut client = Client::connect(p.addr).await;
    let body: Vec<u8> = (0..10_000).map(|i| (i % 7) as u8).collect();
    let (status, text) = client.post("/copy", body.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        text.starts_with("main "),
        "the answer comes from the route's backend: {text}"
    );
    let seen = eventually("the mirror to arrive", || {
        let bodies = shadow_bodies.clone();
        async move { bodies.lock().unwrap().first().cloned() }
    })
    .await;
    assert_eq!(seen, body, "the mirror carries the same body");
}
