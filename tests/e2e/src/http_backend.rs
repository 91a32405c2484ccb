//! An HTTP/1.1 and HTTP/2 (cleartext, auto-detected) backend for the L7
//! tests, on hyper in a thread of its own. It reports what it received so
//! a test can assert what crossed the mesh. Routes:
//! - `/status/N` → status N;
//! - `/delay/MS` → 200 after MS milliseconds;
//! - `/flaky/K` → 503 for the first K requests of every K+1 to this
//!   route (so K consecutive failures at most), then 200;
//! - `/unavailable/P` → 503 with probability P % (drawn per request),
//!   else 200;
//! - `/hold` → 200 once the test calls [`HttpBackend::release`] (until
//!   then [`HttpBackend::held`] counts it);
//! - `/health` → the status [`HttpBackend::set_health_status`] set (200
//!   until then);
//! - `/grpc.health.v1.Health/Check` → a gRPC `HealthCheckResponse`,
//!   `SERVING` unless [`HttpBackend::set_grpc_serving`] turned it off
//!   (`NOT_SERVING`), with `grpc-status: 0` in the trailers;
//! - anything else → 200.
//!
//! While [`HttpBackend::set_sick`] is on, every answer is a 503 (body as
//! usual, so the caller still sees which backend answered).
//!
//! [`HttpBackend::log`] is the backend's own request log: every request's
//! path and the status it was answered, in the order they arrived.
//!
//! Every answer's body is JSON: `{"name", "method", "path", "version",
//! "bodyLen", "bodySum", "headers": {name: value}}` (`bodySum`: the sum of
//! the body's bytes, to compare a replay byte for byte without storing it).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::json;

/// A running backend; stops when dropped.
pub struct HttpBackend {
    addr: SocketAddr,
    hits: Arc<AtomicUsize>,
    state: Arc<State>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

/// What the test switches while the backend runs.
#[derive(Default)]
struct State {
    sick: AtomicBool,
    held: AtomicUsize,
    released: AtomicBool,
    release: tokio::sync::Notify,
    /// `/health`'s status (0: 200).
    health: AtomicU16,
    /// The gRPC health check answers `NOT_SERVING`.
    not_serving: AtomicBool,
    /// (path, status) of every request, in arrival order.
    log: Mutex<Vec<(String, u16)>>,
}

impl HttpBackend {
    /// Starts `name` on 127.0.0.1:`port` (0: any free port).
    pub fn start(name: &str, port: u16) -> HttpBackend {
        let std_listener = std::net::TcpListener::bind(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("backend {name}: bind port {port}: {e}"));
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("local addr");
        let hits = Arc::new(AtomicUsize::new(0));
        let state = Arc::new(State::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (name, counted, shared) = (name.to_owned(), hits.clone(), state.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("backend runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(std_listener).expect("listener");
                let flaky = Arc::new(AtomicUsize::new(0));
                let serve = async {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            continue;
                        };
                        let (name, hits, flaky) = (name.clone(), counted.clone(), flaky.clone());
                        let state = shared.clone();
                        tokio::spawn(async move {
                            let service = service_fn(move |req| {
                                answer(
                                    req,
                                    name.clone(),
                                    hits.clone(),
                                    flaky.clone(),
                                    state.clone(),
                                )
                            });
                            let _ =
                                hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                                    .serve_connection(TokioIo::new(stream), service)
                                    .await;
                        });
                    }
                };
                tokio::select! {
                    () = serve => {}
                    _ = stopped => {}
                }
            });
        });
        HttpBackend {
            addr,
            hits,
            state,
            _stop: stop,
        }
    }

    /// While `sick`, every request is answered 503.
    pub fn set_sick(&self, sick: bool) {
        self.state.sick.store(sick, Ordering::SeqCst);
    }

    /// Requests to `/hold` waiting for [`HttpBackend::release`].
    pub fn held(&self) -> usize {
        self.state.held.load(Ordering::SeqCst)
    }

    /// Answers every held `/hold` request, and any later one at once.
    pub fn release(&self) {
        self.state.released.store(true, Ordering::SeqCst);
        self.state.release.notify_waiters();
    }

    /// Answers `/health` with `status` from now on.
    pub fn set_health_status(&self, status: u16) {
        self.state.health.store(status, Ordering::SeqCst);
    }

    /// Whether the gRPC health check answers `SERVING` from now on.
    pub fn set_grpc_serving(&self, serving: bool) {
        self.state.not_serving.store(!serving, Ordering::SeqCst);
    }

    /// Every request so far: its path and the status it was answered, in
    /// the order they arrived.
    pub fn log(&self) -> Vec<(String, u16)> {
        self.state.log.lock().expect("log lock").clone()
    }

    /// The listening port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Requests answered so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

async fn answer(
    req: Request<Incoming>,
    name: String,
    hits: Arc<AtomicUsize>,
    flaky: Arc<AtomicUsize>,
    state: Arc<State>,
) -> Result<Response<BoxBody<Bytes, Infallible>>, Infallible> {
    hits.fetch_add(1, Ordering::SeqCst);
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let arg = |prefix: &str| -> Option<u64> { path.strip_prefix(prefix)?.parse().ok() };
    let mut status = StatusCode::OK;
    if let Some(code) = arg("/status/") {
        status = StatusCode::from_u16(code as u16).unwrap_or(StatusCode::BAD_REQUEST);
    } else if let Some(ms) = arg("/delay/") {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    } else if let Some(p) = arg("/unavailable/") {
        if rand::random_range(0..100) < p {
            status = StatusCode::SERVICE_UNAVAILABLE;
        }
    } else if let Some(k) = arg("/flaky/") {
        let n = flaky.fetch_add(1, Ordering::SeqCst) as u64;
        if n % (k + 1) < k {
            status = StatusCode::SERVICE_UNAVAILABLE;
        }
    } else if path == "/hold" {
        state.held.fetch_add(1, Ordering::SeqCst);
        loop {
            let released = state.release.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if state.released.load(Ordering::SeqCst) {
                break;
            }
            released.await;
        }
        state.held.fetch_sub(1, Ordering::SeqCst);
    } else if path == "/health" {
        let set = state.health.load(Ordering::SeqCst);
        if set != 0 {
            status = StatusCode::from_u16(set).unwrap_or(StatusCode::BAD_REQUEST);
        }
    }
    if state.sick.load(Ordering::SeqCst) {
        status = StatusCode::SERVICE_UNAVAILABLE;
    }
    state
        .log
        .lock()
        .expect("log lock")
        .push((path.clone(), status.as_u16()));
    if path == GRPC_HEALTH {
        return Ok(grpc_health(!state.not_serving.load(Ordering::SeqCst)));
    }
    let headers: BTreeMap<String, String> = parts
        .headers
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("<binary>").to_owned()))
        .collect();
    let text = json!({
        "name": name,
        "method": parts.method.as_str(),
        "path": path,
        "version": format!("{:?}", parts.version),
        "bodyLen": body.len(),
        "bodySum": body.iter().map(|b| u64::from(*b)).sum::<u64>(),
        "headers": headers,
    })
    .to_string();
    Ok(Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(text)).boxed())
        .expect("response"))
}

/// The gRPC health check's method.
const GRPC_HEALTH: &str = "/grpc.health.v1.Health/Check";

/// A `grpc.health.v1.HealthCheckResponse` (`status` 1 `SERVING`, 2
/// `NOT_SERVING`) with `grpc-status: 0` in the trailers.
fn grpc_health(serving: bool) -> Response<BoxBody<Bytes, Infallible>> {
    let status = if serving { 1 } else { 2 };
    // One uncompressed message of 2 bytes: field 1, varint `status`.
    let frame = Bytes::from(vec![0, 0, 0, 0, 2, 0x08, status]);
    let mut trailers = hyper::HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().expect("valid"));
    let body = Full::new(frame)
        .with_trailers(async move { Some(Ok(trailers)) })
        .boxed();
    Response::builder()
        .header("content-type", "application/grpc")
        .body(body)
        .expect("response")
}
