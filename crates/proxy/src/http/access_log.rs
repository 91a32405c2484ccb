//! The data path's side of access logging: what a request looked like on
//! arrival (kept only when its listener logs) and the values of Envoy's
//! command operators once its answer is known. The line is formatted and
//! queued by [`crate::model::access_log::AccessLog::write`], which never
//! blocks.
//!
//! The entry is written when the response's headers are sent: `DURATION`
//! is the time to them, and `BYTES_RECEIVED`/`BYTES_SENT` are the bodies'
//! `content-length` (`0` for a body without one, e.g. a stream).

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, Method, Request, Response, Uri, Version};
use meshlink_api::spec::access_log_format::Operator;

use super::forward::ConnectionContext;
use super::metrics::RequestLabels;
use super::respond::ResponseBody;
use crate::model::access_log::AccessLog;

/// The upstream endpoint that answered, set on a response by
/// [`super::forward::try_once`].
#[derive(Debug, Clone, Copy)]
pub struct UpstreamHost(pub SocketAddr);

/// A request as it arrived.
pub struct RequestSnapshot {
    start: SystemTime,
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
}

impl RequestSnapshot {
    /// Copies what the operators read from `request`.
    pub fn of<B>(request: &Request<B>) -> RequestSnapshot {
        RequestSnapshot {
            start: SystemTime::now(),
            method: request.method().clone(),
            uri: request.uri().clone(),
            version: request.version(),
            headers: request.headers().clone(),
        }
    }
}

/// Writes the entry of one request to each of `logs`, counting dropped
/// ones.
pub fn write(
    logs: &[AccessLog],
    ctx: &ConnectionContext,
    request: &RequestSnapshot,
    response: &Response<ResponseBody>,
    labels: &RequestLabels,
    took: Duration,
) {
    let value = |op: &Operator| operator(op, ctx, request, response, labels, took);
    for log in logs {
        if !log.write(value) {
            ctx.metrics.access_log_dropped.inc();
        }
    }
}

fn operator(
    op: &Operator,
    ctx: &ConnectionContext,
    req: &RequestSnapshot,
    resp: &Response<ResponseBody>,
    labels: &RequestLabels,
    took: Duration,
) -> Option<String> {
    let millis = || Some(took.as_millis().to_string());
    let length = |h: &HeaderMap| {
        h.get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .map_or_else(|| "0".to_owned(), str::to_owned)
    };
    let upstream = resp.extensions().get::<UpstreamHost>().map(|h| h.0);
    match op.name.as_str() {
        "START_TIME" => Some(match op.arg.as_deref() {
            Some("%s") => req
                .start
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs()
                .to_string(),
            _ => humantime::format_rfc3339_millis(req.start).to_string(),
        }),
        "REQ" => header(&req.headers, op.arg.as_deref()?, |pseudo| match pseudo {
            ":method" => Some(req.method.to_string()),
            ":path" => req.uri.path_and_query().map(ToString::to_string),
            ":authority" => req
                .uri
                .authority()
                .map(ToString::to_string)
                .or_else(|| value_of(&req.headers, "host")),
            ":scheme" => req.uri.scheme_str().map(str::to_owned),
            _ => None,
        }),
        "RESP" => header(resp.headers(), op.arg.as_deref()?, |_| None),
        "TRAILER" => None,
        "PROTOCOL" => Some(format!("{:?}", req.version)),
        "RESPONSE_CODE" => Some(resp.status().as_u16().to_string()),
        "RESPONSE_CODE_DETAILS" => Some(
            if upstream.is_some() {
                "via_upstream"
            } else {
                "local_reply"
            }
            .to_owned(),
        ),
        "RESPONSE_FLAGS" => Some(if upstream.is_some() { "-" } else { "LR" }.to_owned()),
        "BYTES_RECEIVED" => Some(length(&req.headers)),
        "BYTES_SENT" => Some(length(resp.headers())),
        "DURATION" | "RESPONSE_DURATION" => millis(),
        "REQUEST_DURATION" => None,
        "UPSTREAM_HOST" => upstream.map(|a| a.to_string()),
        "UPSTREAM_CLUSTER" => Some(labels.cluster.clone()).filter(|c| !c.is_empty()),
        "UPSTREAM_TRANSPORT_FAILURE_REASON" => None,
        "DOWNSTREAM_REMOTE_ADDRESS" | "DOWNSTREAM_DIRECT_REMOTE_ADDRESS" => {
            Some(ctx.peer.to_string())
        }
        "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT"
        | "DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT" => Some(ctx.peer.ip().to_string()),
        "DOWNSTREAM_PEER_URI_SAN" => ctx.peer_id.clone(),
        "ROUTE_NAME" => Some(labels.route.clone()).filter(|r| !r.is_empty()),
        "HOSTNAME" => std::env::var("HOSTNAME").ok(),
        _ => None,
    }
}

/// `%REQ(A?B)%`: header `A`, else `B`; pseudo-headers from `pseudo`.
fn header(
    headers: &HeaderMap,
    names: &str,
    pseudo: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    names.split('?').find_map(|n| {
        let n = n.to_ascii_lowercase();
        if n.starts_with(':') {
            pseudo(&n)
        } else {
            value_of(headers, &n)
        }
    })
}

fn value_of(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}
