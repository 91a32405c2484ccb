//! One endpoint's checks on the wire: an HTTP GET, a TCP send/receive or
//! a `grpc.health.v1.Health/Check` call, each over the connection every
//! request of the cluster would use ([`crate::http::pool::connect`]: TCP,
//! then mTLS verifying the destination's SPIFFE ID with the sidecar's own
//! identity), so a check reaches the destination's inbound exactly as a
//! caller's request does.
//!
//! Owns the kept connection (`reuse_connection`) and the tasks driving
//! its HTTP connection, which end when the [`Prober`] drops. It never
//! decides health: it says how one check went.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf as _, Bytes};
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::task::JoinSet;

use crate::http::pool::{Conn, connect};
use crate::model::health_check::{CheckKind, HealthCheckSpec};

/// Most bytes of an answer a check reads (a longer HTTP body closes the
/// connection instead of being kept).
const MAX_ANSWER: usize = 64 * 1024;

/// How one check failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckFailure {
    /// No connection (TCP or the mTLS handshake).
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The answer did not pass.
    #[error("unexpected answer: {0}")]
    Unexpected(String),
    /// The connection broke during the check.
    #[error("connection failed during the check: {0}")]
    Broken(String),
    /// No answer within `timeout`.
    #[error("no answer within the check's timeout")]
    Timeout,
}

impl CheckFailure {
    /// The `result` label of `health_check_total`.
    pub fn as_str(&self) -> &'static str {
        match self {
            CheckFailure::Connect(_) => "connect_failure",
            CheckFailure::Unexpected(_) => "unexpected_answer",
            CheckFailure::Broken(_) => "broken_connection",
            CheckFailure::Timeout => "timeout",
        }
    }
}

/// Where and how one endpoint is reached.
#[derive(Debug, Clone)]
pub struct Target {
    /// The endpoint.
    pub addr: SocketAddr,
    /// The cluster's name (the default `Host` / `:authority`).
    pub cluster: String,
    /// The cluster's connect timeout.
    pub connect_timeout: Duration,
    /// The cluster's mTLS, if it originates any.
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    /// The cluster speaks HTTP/2 to its endpoints.
    pub http2: bool,
}

/// A connection kept between checks.
enum Kept {
    Http1(http1::SendRequest<Full<Bytes>>),
    Http2(http2::SendRequest<Full<Bytes>>),
    Tcp(Box<Conn>),
}

/// Runs one endpoint's checks, keeping the connection when asked to.
pub struct Prober {
    kind: CheckKind,
    reuse: bool,
    kept: Option<Kept>,
    /// Tasks driving HTTP connections; aborted when the prober drops.
    drivers: JoinSet<()>,
}

impl Prober {
    /// A prober running `spec`'s check.
    pub fn new(spec: &HealthCheckSpec) -> Self {
        Prober {
            kind: spec.kind.clone(),
            reuse: spec.reuse_connection,
            kept: None,
            drivers: JoinSet::new(),
        }
    }

    /// One check of `target` within `timeout`. A failed check, or one
    /// without `reuse_connection`, closes its connection.
    pub async fn check(&mut self, target: &Target, timeout: Duration) -> Result<(), CheckFailure> {
        while self.drivers.try_join_next().is_some() {}
        let outcome = tokio::time::timeout(timeout, self.check_once(target))
            .await
            .unwrap_or(Err(CheckFailure::Timeout));
        if outcome.is_err() || !self.reuse {
            self.kept = None;
            self.drivers.abort_all();
        }
        outcome
    }

    async fn check_once(&mut self, target: &Target) -> Result<(), CheckFailure> {
        match self.kind.clone() {
            CheckKind::Http {
                path,
                host,
                headers,
                expected_statuses,
            } => {
                let mut req = request(target, &host, &path, Bytes::new(), target.http2)?;
                for (name, value) in &headers {
                    let (Ok(name), Ok(value)) = (
                        http::HeaderName::try_from(name.as_str()),
                        http::HeaderValue::try_from(value.as_str()),
                    ) else {
                        continue;
                    };
                    req.headers_mut().insert(name, value);
                }
                let (status, _, _) = self.exchange(target, req, target.http2).await?;
                if !HealthCheckSpec::status_passes(&expected_statuses, status.as_u16()) {
                    return Err(CheckFailure::Unexpected(format!("HTTP status {status}")));
                }
                Ok(())
            }
            CheckKind::Grpc {
                service_name,
                authority,
            } => {
                let body = super::grpc::request_frame(&service_name);
                let mut req = request(target, &authority, super::grpc::PATH, body, true)?;
                *req.method_mut() = http::Method::POST;
                let h = req.headers_mut();
                h.insert("content-type", "application/grpc".parse().expect("valid"));
                h.insert("te", "trailers".parse().expect("valid"));
                let (status, headers, (body, trailers)) = self.exchange(target, req, true).await?;
                super::grpc::verdict(status, &headers, trailers.as_ref(), &body)
                    .map_err(CheckFailure::Unexpected)
            }
            CheckKind::Tcp { send, receive } => self.tcp(target, &send, &receive).await,
        }
    }

    /// Sends `req` on the kept connection or a new one and reads the whole
    /// answer (at most [`MAX_ANSWER`] bytes), keeping the connection.
    async fn exchange(
        &mut self,
        target: &Target,
        req: http::Request<Full<Bytes>>,
        http2: bool,
    ) -> Result<Answer, CheckFailure> {
        let kept = match self.kept.take() {
            Some(Kept::Http2(s)) if http2 && !s.is_closed() => Kept::Http2(s),
            Some(Kept::Http1(s)) if !http2 && !s.is_closed() => Kept::Http1(s),
            _ => self.dial_http(target, http2).await?,
        };
        let broken = |e: hyper::Error| CheckFailure::Broken(e.to_string());
        let (response, kept) = match kept {
            Kept::Http2(mut s) => {
                s.ready().await.map_err(broken)?;
                (s.send_request(req).await.map_err(broken)?, Kept::Http2(s))
            }
            Kept::Http1(mut s) => {
                s.ready().await.map_err(broken)?;
                (s.send_request(req).await.map_err(broken)?, Kept::Http1(s))
            }
            Kept::Tcp(_) => unreachable!("dial_http makes HTTP connections"),
        };
        let (parts, mut body) = response.into_parts();
        let mut data = Vec::new();
        let mut trailers = None;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(broken)?;
            if let Some(chunk) = frame.data_ref() {
                data.extend_from_slice(chunk.chunk());
                if data.len() > MAX_ANSWER {
                    // Too long to read: judged on what came, not kept.
                    return Ok((parts.status, parts.headers, (data.into(), None)));
                }
            } else if let Ok(t) = frame.into_trailers() {
                trailers = Some(t);
            }
        }
        self.kept = Some(kept);
        Ok((parts.status, parts.headers, (data.into(), trailers)))
    }

    async fn dial_http(&mut self, target: &Target, http2: bool) -> Result<Kept, CheckFailure> {
        let io = TokioIo::new(self.dial(target).await?);
        let failed = |e: hyper::Error| CheckFailure::Connect(format!("HTTP handshake: {e}"));
        if http2 {
            let (send, conn) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .handshake(io)
                .await
                .map_err(failed)?;
            self.drivers.spawn(async move {
                let _ = conn.await;
            });
            return Ok(Kept::Http2(send));
        }
        let (send, conn) = http1::Builder::new().handshake(io).await.map_err(failed)?;
        self.drivers.spawn(async move {
            let _ = conn.await;
        });
        Ok(Kept::Http1(send))
    }

    async fn dial(&self, target: &Target) -> Result<Conn, CheckFailure> {
        connect(target.addr, target.connect_timeout, target.tls.as_ref())
            .await
            .map_err(|e| CheckFailure::Connect(e.to_string()))
    }

    /// Connect, write `send`, read until every block of `receive` was
    /// seen in order.
    async fn tcp(
        &mut self,
        target: &Target,
        send: &[u8],
        receive: &[Vec<u8>],
    ) -> Result<(), CheckFailure> {
        let mut conn = match self.kept.take() {
            Some(Kept::Tcp(c)) => c,
            _ => Box::new(self.dial(target).await?),
        };
        let broken = |e: std::io::Error| CheckFailure::Broken(e.to_string());
        if !send.is_empty() {
            conn.write_all(send).await.map_err(broken)?;
            conn.flush().await.map_err(broken)?;
        }
        let mut seen = Vec::new();
        let mut next = 0;
        let mut buf = [0u8; 4096];
        while next < receive.len() {
            let n = conn.read(&mut buf).await.map_err(broken)?;
            if n == 0 {
                return Err(CheckFailure::Unexpected(format!(
                    "the connection closed after {} bytes, before block {next} of receive",
                    seen.len()
                )));
            }
            seen.extend_from_slice(&buf[..n]);
            while let Some(at) = find(&seen, &receive[next]) {
                seen.drain(..at + receive[next].len());
                next += 1;
                if next == receive.len() {
                    break;
                }
            }
            if seen.len() > MAX_ANSWER {
                return Err(CheckFailure::Unexpected(format!(
                    "block {next} of receive not in the first {MAX_ANSWER} bytes"
                )));
            }
        }
        self.kept = Some(Kept::Tcp(conn));
        Ok(())
    }
}

/// An answer: status, headers, body and trailers.
type Answer = (
    http::StatusCode,
    http::HeaderMap,
    (Bytes, Option<http::HeaderMap>),
);

/// A GET of `path` with `authority` (empty: the cluster's name): an
/// absolute URI for HTTP/2, a `Host` header for HTTP/1.1.
fn request(
    target: &Target,
    authority: &str,
    path: &str,
    body: Bytes,
    http2: bool,
) -> Result<http::Request<Full<Bytes>>, CheckFailure> {
    let authority = if authority.is_empty() {
        &target.cluster
    } else {
        authority
    };
    let uri = format!("http://{authority}{path}")
        .parse::<http::Uri>()
        .or_else(|_| format!("http://{}{path}", target.addr).parse())
        .map_err(|e| CheckFailure::Unexpected(format!("path {path:?}: {e}")))?;
    let host = uri.authority().map(|a| a.to_string()).unwrap_or_default();
    let mut req = http::Request::new(Full::new(body));
    if http2 {
        *req.uri_mut() = uri;
    } else {
        *req.uri_mut() = uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .expect("a path");
        if let Ok(v) = http::HeaderValue::try_from(host) {
            req.headers_mut().insert(http::header::HOST, v);
        }
    }
    Ok(req)
}

/// Where `needle` first starts in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}
