//! One HTTP request through the proxy: authorization, the route from the
//! current configuration, then tries with the route's timeouts and retry
//! policy against endpoints the balancer picks per try.
//!
//! Reads the listener spec and the data-path view as they are when the
//! request arrives (not when its connection was accepted), so a route
//! change reaches the next request of a long-lived HTTP/2 connection.
//! Never panics on request input; every failure becomes an answer (see
//! [`super::respond`]) and a count.

use std::net::SocketAddr;
use std::sync::Arc;

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri, Version};
use hyper::body::Incoming;
use tokio::sync::watch;
use tokio::time::Instant;

use meshlink_runtime::{ErrorKind, ProxyError};

use super::metrics::{Outcome, RequestLabels};
use super::pool::Sender;
use super::replay::ReplayBody;
use super::respond::{self, ResponseBody};
use super::{headers, retry, route_select};
use crate::dataplane::{ClusterRuntime, Dataplane};
use crate::lb::Event;
use crate::metrics::ProxyMetrics;
use crate::model::route::{ForwardAction, PathMatch, RouteAction, RouteSpec};
use crate::model::{Authorization, ListenerProtocol, ListenerSpec, authorize};

/// What every request of one downstream connection shares.
pub struct ConnectionContext {
    /// The listener's current spec.
    pub spec: watch::Receiver<Arc<ListenerSpec>>,
    /// The current data-path view.
    pub view: watch::Receiver<Arc<Dataplane>>,
    /// The downstream peer.
    pub peer: SocketAddr,
    /// The calling sidecar's SPIFFE ID (inbound, from its certificate).
    pub peer_id: Option<String>,
    /// Metrics.
    pub metrics: Arc<ProxyMetrics>,
    /// Requests in flight on the connection (its idle timeout reads it).
    pub activity: Arc<super::timed::Activity>,
    /// The peer's address as an `x-forwarded-for` entry, made on first use.
    pub forwarded_for: std::sync::OnceLock<HeaderValue>,
}

/// Handles one request to its answer.
pub async fn handle(
    ctx: Arc<ConnectionContext>,
    request: Request<Incoming>,
) -> Result<Response<ResponseBody>, std::convert::Infallible> {
    let started = Instant::now();
    let spec = ctx.spec.borrow().clone();
    let view = ctx.view.borrow().clone();
    let grpc = respond::is_grpc(request.headers());
    let mut labels = RequestLabels::new(spec.direction);
    let _active = ctx.metrics.http.active(spec.direction);
    let in_flight = ctx.activity.start();
    let mut request = request;
    let traced = match &spec.protocol {
        ListenerProtocol::Http(h) => h
            .tracing
            .as_ref()
            .and_then(|t| super::trace::start(t, spec.direction, &mut request)),
        _ => None,
    };
    let logged = match &spec.protocol {
        ListenerProtocol::Http(h) if !h.access_logs.is_empty() => Some(
            super::access_log::RequestSnapshot::of(&request, &h.access_logs),
        ),
        _ => None,
    };
    // Boxed: this future is what a server moves (HTTP/2 spawns one task
    // per stream), so it stays small and the large routing state machine
    // is moved once, into its box.
    let routed = Box::pin(route_and_send(
        &ctx,
        &spec,
        &view,
        request,
        &mut labels,
        in_flight,
    ));
    let response = match routed.await {
        Ok(response) => response,
        Err(e) => {
            tracing::debug!(listener = %spec.name, peer = %ctx.peer, "request failed: {e}");
            if let ErrorKind::Overflow(limit) = e.kind() {
                ctx.metrics.overflowed(&labels.cluster, limit);
            }
            respond::error(&e, grpc)
        }
    };
    let took = started.elapsed();
    ctx.metrics.http.record(&labels, &response, took);
    if let (Some(snapshot), ListenerProtocol::Http(h)) = (&logged, &spec.protocol) {
        super::access_log::write(&h.access_logs, &ctx, snapshot, &response, &labels, took);
    }
    if let (Some(span), ListenerProtocol::Http(h)) = (traced, &spec.protocol)
        && let Some(tracing) = &h.tracing
    {
        // The labels' last use: the span takes the cluster's name.
        let cluster = std::mem::take(&mut labels.cluster);
        let status = response.status();
        span.finish(tracing, spec.direction, status, cluster, took, &ctx.metrics);
    }
    Ok(response)
}

async fn route_and_send(
    ctx: &ConnectionContext,
    spec: &ListenerSpec,
    view: &Dataplane,
    request: Request<Incoming>,
    labels: &mut RequestLabels,
    in_flight: super::timed::InFlight,
) -> Result<Response<ResponseBody>, ProxyError> {
    let grpc = respond::is_grpc(request.headers());
    if request.method() == Method::CONNECT {
        labels.route = "connect".into();
        return Ok(respond::status(
            StatusCode::METHOD_NOT_ALLOWED,
            "CONNECT is not supported through the mesh",
            grpc,
        ));
    }
    if spec.rbac_per_request
        && let Authorization::Denied(why) = authorize(&spec.rbac, ctx.peer_id.as_deref())
    {
        ctx.metrics.rbac_denied_on(&spec.name);
        tracing::info!(listener = %spec.name, peer = ?ctx.peer_id, "RBAC denied the request: {why}");
        return Err(ProxyError::downstream(
            ErrorKind::Denied,
            format!("RBAC denied {:?}: {why}", ctx.peer_id),
        ));
    }
    let ListenerProtocol::Http(http) = &spec.protocol else {
        return Err(ProxyError::internal(
            ErrorKind::Internal,
            "an HTTP request on a TCP listener",
        ));
    };
    if let Some(limit) = &http.local_rate_limit
        && !limit.admit(tokio::time::Instant::now())
    {
        labels.route = "rate_limited".into();
        ctx.metrics
            .rate_limited
            .get_or_create(&crate::metrics::NameLabels {
                listener: spec.name.clone(),
            })
            .inc();
        let mut response = respond::rate_limited(limit.status, grpc);
        super::headers::apply(response.headers_mut(), &limit.response_headers);
        return Ok(response);
    }
    let peer_id = ctx.peer_id.as_deref();
    let throttle = match super::fault::inject(
        &http.faults,
        peer_id,
        &spec.name,
        &ctx.metrics,
        labels,
        grpc,
    )
    .await
    {
        super::fault::Injected::Abort(response) => return Ok(response),
        super::fault::Injected::Forward(throttle) => throttle,
    };
    let routes = view.config.routes.get(&http.route_config).ok_or_else(|| {
        ProxyError::internal(
            ErrorKind::NotReady,
            format!("RouteConfiguration {:?} has not arrived", http.route_config),
        )
    })?;
    let (mut parts, body) = request.into_parts();
    let Some(route) = route_select::select(&routes.value, &parts) else {
        labels.route = "no_route".into();
        return Ok(respond::status(
            StatusCode::NOT_FOUND,
            "no route matches the request",
            grpc,
        ));
    };
    labels.route = route.name.clone();
    let forward = match &route.action {
        RouteAction::Redirect(r) => return Ok(super::redirect::answer(r, route, &parts)),
        RouteAction::Forward(f) => f,
    };
    let backend =
        route_select::pick_backend(&forward.backends, rand::random()).ok_or_else(|| {
            ProxyError::internal(ErrorKind::NoEndpoints, "every backend has weight 0")
        })?;
    labels.cluster = backend.cluster.clone();
    let cluster = view.clusters.get(&backend.cluster).ok_or_else(|| {
        ProxyError::internal(
            ErrorKind::NotReady,
            format!("cluster {:?} is not ready", backend.cluster),
        )
    })?;

    let upgrade = super::upgrade::requested(&parts);
    headers::strip_hop_by_hop(&mut parts.headers);
    if http.use_remote_address {
        let peer = ctx
            .forwarded_for
            .get_or_init(|| headers::forwarded_for_entry(ctx.peer.ip()));
        headers::append_forwarded_for(&mut parts.headers, peer);
    }
    headers::ensure_request_id(&mut parts.headers);
    headers::apply(&mut parts.headers, &route.request_headers);
    headers::apply(&mut parts.headers, &backend.request_headers);
    rewrite(&mut parts, route, forward);
    if let Some(hash) = crate::model::hash_policy::request_hash(
        &forward.hash_policies,
        &parts.headers,
        parts.uri.query(),
        ctx.peer,
    ) {
        parts.extensions.insert(RequestHash(hash));
    }

    // Envoy's max_requests: a request over it is answered 503 at once;
    // its place is held until its response body ends.
    let request_slot = super::pool::admit(&cluster.circuit, meshlink_runtime::Limit::MaxRequests)?;
    if let Some(protocol) = upgrade {
        let pool = cluster.http_pool();
        let Some(endpoint) = cluster.balancer.pick(Instant::now()) else {
            return Err(ProxyError::upstream(
                ErrorKind::NoEndpoints,
                format!("cluster {:?} has no endpoints", cluster.spec.name),
            ));
        };
        let response =
            super::upgrade::forward(&pool, endpoint.addr, parts, protocol, ReplayBody::new(body))
                .await?;
        drop(request_slot);
        return Ok(response.map(|b| {
            use http_body_util::BodyExt;
            b.map_err(Into::into).boxed_unsync()
        }));
    }
    let retriable = forward.retry.as_ref().filter(|r| {
        r.num_retries > 0 && retry::request_is_retriable(r, parts.method.as_str(), &parts.headers)
    });
    let body = ReplayBody::new(body);
    super::mirror::spawn(view, forward, &parts, &body);
    let mut response = send(ctx, cluster, forward, retriable, parts, body, labels).await?;
    let stream = response
        .extensions_mut()
        .remove::<super::pool::StreamSlot>();
    headers::strip_hop_by_hop(response.headers_mut());
    headers::apply(response.headers_mut(), &route.response_headers);
    // The route's idle timeout overrides the listener's (Envoy's rule).
    let idle = forward.idle_timeout.or(http.stream_idle_timeout);
    let max = forward.max_stream_duration;
    let response = response.map(|b| {
        use http_body_util::BodyExt;
        super::timed::TimedBody::new(b, idle, max, Some(in_flight))
            .holding(stream)
            .keeping(request_slot)
            .boxed_unsync()
    });
    Ok(super::fault::throttle(response, throttle))
}

/// Tries the request until an answer, the retries run out or the
/// route's deadline passes.
async fn send(
    ctx: &ConnectionContext,
    cluster: &ClusterRuntime,
    forward: &ForwardAction,
    retry_spec: Option<&crate::model::route::RetrySpec>,
    parts: http::request::Parts,
    body: ReplayBody,
    labels: &RequestLabels,
) -> Result<Response<Incoming>, ProxyError> {
    let deadline = forward.timeout.map(|t| Instant::now() + t);
    let tries = 1 + retry_spec.map_or(0, |r| r.num_retries);
    let pool = cluster.http_pool();
    let _in_flight = pool.budget.request();
    let mut _retry_slot = None;
    // The first try sends the body itself; `handle` only makes the
    // replays of later tries.
    let handle = body.handle();
    let mut first = Some(body);
    let mut last: Option<Result<Response<Incoming>, ProxyError>> = None;
    for attempt in 0..tries {
        if attempt > 0 {
            let spec = retry_spec.expect("a retry has a policy");
            // A rate-limited answer says when to come back; else back off.
            let told = match &last {
                Some(Ok(r)) => {
                    retry::rate_limited_wait(spec, r.headers(), std::time::SystemTime::now())
                }
                _ => None,
            };
            let wait = told.unwrap_or_else(|| retry::backoff(spec, attempt, rand::random()));
            if deadline.is_some_and(|d| Instant::now() + wait >= d) {
                break;
            }
            tokio::time::sleep(wait).await;
        }
        let Some(this_body) = first.take().or_else(|| handle.try_clone()) else {
            break;
        };
        if attempt > 0 {
            // Within the cluster's retry budget, or the last answer stands.
            // One request holds one retry slot at most: the previous
            // retry's goes back first.
            _retry_slot = None;
            let Some(slot) = cluster.circuit.retry(&pool.budget) else {
                ctx.metrics.http.retry_overflowed(labels);
                if cluster.circuit.is_limited() {
                    ctx.metrics
                        .overflowed(&cluster.spec.name, meshlink_runtime::Limit::MaxRetries);
                }
                break;
            };
            _retry_slot = Some(slot);
            ctx.metrics.http.retried(labels);
        }
        let per_try = retry_spec.and_then(|r| r.per_try_timeout);
        let try_deadline = match (deadline, per_try) {
            (Some(d), Some(p)) => Some(d.min(Instant::now() + p)),
            (Some(d), None) => Some(d),
            (None, Some(p)) => Some(Instant::now() + p),
            (None, None) => None,
        };
        let request = upstream_request(&parts, pool.is_http2(), this_body)?;
        let outcome = try_once(cluster, &pool, request, try_deadline, Some(&*ctx.metrics)).await;
        let last_try = attempt + 1 == tries;
        match (&outcome, retry_spec) {
            (Ok(r), Some(spec))
                if !last_try && retry::retries_response(spec, r.status().as_u16(), r.headers()) => {
            }
            (Err(e), Some(spec)) if !last_try && retry::retries_error(spec, e) => {}
            _ => return finish(ctx, outcome, labels),
        }
        if let Err(e) = &outcome {
            tracing::debug!(cluster = %cluster.spec.name, "try {} failed, retrying: {e}", attempt + 1);
        }
        last = Some(outcome);
    }
    let outcome = last.unwrap_or_else(|| {
        Err(ProxyError::upstream(
            ErrorKind::Timeout,
            "the route's timeout passed before a try could start",
        ))
    });
    finish(ctx, outcome, labels)
}

fn finish(
    ctx: &ConnectionContext,
    outcome: Result<Response<Incoming>, ProxyError>,
    labels: &RequestLabels,
) -> Result<Response<Incoming>, ProxyError> {
    if let Err(e) = &outcome
        && e.kind() == ErrorKind::Timeout
    {
        ctx.metrics.http.timed_out(labels);
    }
    outcome
}

/// One try on an endpoint the balancer picks, until the response's
/// headers or `deadline`; what happened feeds the cluster's outlier
/// detection (ejections counted in `metrics`).
pub(super) async fn try_once(
    cluster: &ClusterRuntime,
    pool: &super::pool::Pool,
    request: Request<ReplayBody>,
    deadline: Option<Instant>,
    metrics: Option<&ProxyMetrics>,
) -> Result<Response<Incoming>, ProxyError> {
    let now = Instant::now();
    let hash = request.extensions().get::<RequestHash>().map(|h| h.0);
    let Some(endpoint) = cluster.balancer.pick_hashed(hash, now) else {
        return Err(ProxyError::upstream(
            ErrorKind::NoEndpoints,
            format!("cluster {:?} has no endpoints", cluster.spec.name),
        ));
    };
    let _active = endpoint.start();
    let addr = endpoint.addr;
    let attempt = async {
        match pool.sender(addr).await? {
            Sender::Http2(mut send, slot) => {
                send.ready().await.map_err(upstream_reset)?;
                let mut response = send.send_request(request).await.map_err(upstream_reset)?;
                // The stream stays busy until the response body ends.
                response.extensions_mut().insert(slot);
                Ok(response)
            }
            Sender::Http1(mut send) => {
                send.ready().await.map_err(upstream_reset)?;
                let response = send.send_request(request);
                pool.give_back(addr, send);
                response.await.map_err(upstream_reset)
            }
        }
    };
    let outcome = match deadline {
        None => attempt.await,
        Some(d) => match tokio::time::timeout_at(d, attempt).await {
            Ok(outcome) => outcome,
            Err(_) => Err(ProxyError::upstream(
                ErrorKind::Timeout,
                format!("{addr} did not answer in time"),
            )),
        },
    };
    let outcome = outcome.map(|mut r| {
        r.extensions_mut()
            .insert(super::access_log::UpstreamHost(addr));
        r
    });
    let events = match &outcome {
        Ok(r) => [
            Some(Event::Connected { last: false }),
            Some(Event::Response(outlier_status(r))),
        ],
        Err(e) => match e.kind() {
            ErrorKind::ConnectFailed | ErrorKind::Handshake(_) | ErrorKind::Reset => {
                [Some(Event::ConnectFailed), None]
            }
            ErrorKind::ConnectTimeout | ErrorKind::HandshakeTimeout | ErrorKind::Timeout => {
                [Some(Event::TimedOut), None]
            }
            // Not the endpoint's doing (an overflow, a bad request).
            _ => [None, None],
        },
    };
    let now = Instant::now();
    for event in events.into_iter().flatten() {
        for (addr, detector) in cluster.balancer.record(&endpoint, event, now) {
            tracing::warn!(cluster = %cluster.spec.name, endpoint = %addr, detector = detector.as_str(), "endpoint ejected");
            if let Some(m) = metrics {
                m.ejected(&cluster.spec.name, detector);
            }
        }
    }
    outcome
}

/// The status outlier detection sees: a gRPC answer's `grpc-status`
/// mapped to HTTP as Envoy maps it, else the HTTP status.
fn outlier_status(r: &Response<Incoming>) -> u16 {
    let grpc = retry::grpc_status(r.headers()).filter(|_| respond::is_grpc(r.headers()));
    match grpc {
        None => r.status().as_u16(),
        Some(code) => match code {
            0 => 200,
            1 => 499,
            3 | 9 | 11 => 400,
            4 => 504,
            5 => 404,
            6 | 10 => 409,
            7 => 403,
            8 => 429,
            12 => 501,
            14 => 503,
            16 => 401,
            _ => 500,
        },
    }
}

fn upstream_reset(e: hyper::Error) -> ProxyError {
    ProxyError::upstream(
        ErrorKind::Reset,
        format!("the upstream ended the request: {e}"),
    )
}

/// The request as sent upstream: HTTP/2 with `:authority` (between
/// sidecars, or to an HTTP/2 app), or HTTP/1.1 with `Host`.
pub(super) fn upstream_request(
    parts: &http::request::Parts,
    http2: bool,
    body: ReplayBody,
) -> Result<Request<ReplayBody>, ProxyError> {
    let authority = headers::authority(parts).unwrap_or("localhost").to_owned();
    let path = parts
        .uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"));
    let mut builder = Request::builder().method(parts.method.clone());
    let mut headers = parts.headers.clone();
    if http2 {
        let authority = Authority::try_from(authority.as_str()).map_err(|_| {
            ProxyError::downstream(ErrorKind::BadRequest, "the request's authority is invalid")
        })?;
        let uri = Uri::builder()
            .scheme(Scheme::HTTP)
            .authority(authority)
            .path_and_query(path)
            .build()
            .map_err(|e| ProxyError::downstream(ErrorKind::BadRequest, e.to_string()))?;
        headers.remove(http::header::HOST);
        builder = builder.uri(uri).version(Version::HTTP_2);
    } else {
        let host = HeaderValue::from_str(&authority).map_err(|_| {
            ProxyError::downstream(ErrorKind::BadRequest, "the request's authority is invalid")
        })?;
        headers.insert(http::header::HOST, host);
        builder = builder.uri(Uri::from(path)).version(Version::HTTP_11);
    }
    let mut request = builder
        .body(body)
        .map_err(|e| ProxyError::downstream(ErrorKind::BadRequest, e.to_string()))?;
    *request.headers_mut() = headers;
    if let Some(hash) = parts.extensions.get::<RequestHash>() {
        request.extensions_mut().insert(*hash);
    }
    Ok(request)
}

/// A request's hash for a consistent-hash cluster (its route's
/// `hash_policy`), carried in the request's extensions to each try.
#[derive(Debug, Clone, Copy)]
pub struct RequestHash(pub u64);

/// Applies the route's path and host rewrites.
fn rewrite(parts: &mut http::request::Parts, route: &RouteSpec, forward: &ForwardAction) {
    let rw = &forward.rewrite;
    let query = parts.uri.query().map(str::to_owned);
    let new_path = if let Some(full) = &rw.full_path {
        Some(full.clone())
    } else if let Some(prefix) = &rw.prefix {
        match &route.matcher.path {
            PathMatch::Prefix(p) | PathMatch::Segments(p) => {
                let rest = parts.uri.path().get(p.len()..).unwrap_or_default();
                Some(format!("{prefix}{rest}"))
            }
            _ => None,
        }
    } else {
        None
    };
    if let Some(path) = new_path {
        let pq = match query {
            Some(q) => format!("{path}?{q}"),
            None => path,
        };
        let mut uri = parts.uri.clone().into_parts();
        uri.path_and_query = PathAndQuery::try_from(pq).ok();
        if let Ok(u) = Uri::from_parts(uri) {
            parts.uri = u;
        }
    }
    if let Some(host) = &rw.host
        && let Ok(v) = HeaderValue::from_str(host)
    {
        parts.headers.insert(http::header::HOST, v);
        if parts.uri.authority().is_some() {
            let mut uri = parts.uri.clone().into_parts();
            uri.authority = Authority::try_from(host.as_str()).ok();
            if let Ok(u) = Uri::from_parts(uri) {
                parts.uri = u;
            }
        }
    }
}

/// How a request ended, for the metrics.
impl From<&Response<ResponseBody>> for Outcome {
    fn from(r: &Response<ResponseBody>) -> Outcome {
        Outcome {
            status: r.status().as_u16(),
            grpc_status: retry::grpc_status(r.headers()),
        }
    }
}
