//! The data path's side of access logging: what a request looked like on
//! arrival (kept only when its listener logs) and the values of Envoy's
//! command operators once its answer is known. The line is formatted and
//! queued by [`crate::model::access_log::AccessLog::write`], which never
//! blocks.
//!
//! The entry is written when the response's headers are sent: `DURATION`
//! is the time to them, and `BYTES_RECEIVED`/`BYTES_SENT` are the bodies'
//! `content-length` (`0` for a body without one, e.g. a stream).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, Uri, Version};
use meshlink_api::spec::access_log_format::Operator;

use super::forward::ConnectionContext;
use super::metrics::RequestLabels;
use super::respond::ResponseBody;
use crate::model::access_log::AccessLog;

/// The upstream endpoint that answered, set on a response by
/// [`super::forward::try_once`].
#[derive(Debug, Clone, Copy)]
pub struct UpstreamHost(pub SocketAddr);

/// A request as it arrived: what its listener's logs read of it.
pub struct RequestSnapshot {
    start: SystemTime,
    method: Method,
    uri: Uri,
    version: Version,
    /// Only the headers the logs name ([`AccessLog::request_headers`]).
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl RequestSnapshot {
    /// Copies what the operators of `logs` read from `request`.
    pub fn of<B>(request: &Request<B>, logs: &[AccessLog]) -> RequestSnapshot {
        let mut headers = Vec::new();
        for name in logs.iter().flat_map(|l| &l.request_headers) {
            if let Some(v) = request.headers().get(name)
                && !headers.iter().any(|(n, _)| n == name)
            {
                headers.push((name.clone(), v.clone()));
            }
        }
        RequestSnapshot {
            start: SystemTime::now(),
            method: request.method().clone(),
            uri: request.uri().clone(),
            version: request.version(),
            headers,
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.as_str() == name)
            .and_then(|(_, v)| v.to_str().ok())
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
    let upstream = response.extensions().get::<UpstreamHost>().map(|h| h.0);
    let entry = Entry {
        ctx,
        req: request,
        resp: response,
        labels,
        took,
        upstream,
    };
    for log in logs {
        if !log.write(|op, out| entry.operator(op, out)) {
            ctx.metrics.access_log_dropped.inc();
        }
    }
}

/// What one request's operators read.
struct Entry<'a> {
    ctx: &'a ConnectionContext,
    req: &'a RequestSnapshot,
    resp: &'a Response<ResponseBody>,
    labels: &'a RequestLabels,
    took: Duration,
    upstream: Option<SocketAddr>,
}

impl Entry<'_> {
    /// Appends the value of `op` to `out`; `false` when it has none.
    fn operator(&self, op: &Operator, out: &mut String) -> bool {
        let (req, resp) = (self.req, self.resp);
        let text = |out: &mut String, s: Option<&str>| s.map(|s| out.push_str(s)).is_some();
        match op.name.as_str() {
            "START_TIME" => match op.arg.as_deref() {
                Some("%s") => {
                    let secs = req.start.duration_since(SystemTime::UNIX_EPOCH);
                    display(out, secs.unwrap_or_default().as_secs())
                }
                _ => display(out, humantime::format_rfc3339_millis(req.start)),
            },
            "REQ" => op.arg.as_deref().is_some_and(|names| {
                names
                    .split('?')
                    .any(|n| match n.to_ascii_lowercase().as_str() {
                        ":method" => text(out, Some(req.method.as_str())),
                        ":path" => text(out, req.uri.path_and_query().map(|p| p.as_str())),
                        ":authority" => match req.uri.authority() {
                            Some(a) => text(out, Some(a.as_str())),
                            None => text(out, req.header("host")),
                        },
                        ":scheme" => text(out, req.uri.scheme_str()),
                        n if n.starts_with(':') => false,
                        n => text(out, req.header(n)),
                    })
            }),
            "RESP" => op.arg.as_deref().is_some_and(|names| {
                names.split('?').any(|n| {
                    let n = n.to_ascii_lowercase();
                    !n.starts_with(':') && text(out, value_of(resp.headers(), &n))
                })
            }),
            "TRAILER" => false,
            "PROTOCOL" => display(out, format_args!("{:?}", req.version)),
            "RESPONSE_CODE" => display(out, resp.status().as_u16()),
            "RESPONSE_CODE_DETAILS" => text(
                out,
                Some(if self.upstream.is_some() {
                    "via_upstream"
                } else {
                    "local_reply"
                }),
            ),
            "RESPONSE_FLAGS" => text(out, Some(if self.upstream.is_some() { "-" } else { "LR" })),
            "BYTES_RECEIVED" => text(out, Some(req.header("content-length").unwrap_or("0"))),
            "BYTES_SENT" => text(
                out,
                Some(value_of(resp.headers(), "content-length").unwrap_or("0")),
            ),
            "DURATION" | "RESPONSE_DURATION" => display(out, self.took.as_millis()),
            "REQUEST_DURATION" => false,
            "UPSTREAM_HOST" => self.upstream.is_some_and(|a| display(out, a)),
            "UPSTREAM_CLUSTER" => text(
                out,
                Some(self.labels.cluster.as_str()).filter(|c| !c.is_empty()),
            ),
            "UPSTREAM_TRANSPORT_FAILURE_REASON" => false,
            "DOWNSTREAM_REMOTE_ADDRESS" | "DOWNSTREAM_DIRECT_REMOTE_ADDRESS" => {
                display(out, self.ctx.peer)
            }
            "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT"
            | "DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT" => display(out, self.ctx.peer.ip()),
            "DOWNSTREAM_PEER_URI_SAN" => text(out, self.ctx.peer_id.as_deref()),
            "ROUTE_NAME" => text(
                out,
                Some(self.labels.route.as_str()).filter(|r| !r.is_empty()),
            ),
            "HOSTNAME" => std::env::var("HOSTNAME").is_ok_and(|h| text(out, Some(&h))),
            _ => false,
        }
    }
}

/// Appends `v` to `out`; `true` (a value).
fn display(out: &mut String, v: impl std::fmt::Display) -> bool {
    write!(out, "{v}").expect("writing into a String cannot fail");
    true
}

fn value_of<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
