//! Answers the proxy writes itself: a failure, a denial, a redirect. A
//! gRPC client gets a trailers-only answer with `grpc-status` (HTTP 200,
//! as gRPC requires), never a bare reset or an HTTP error it cannot read.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};

use meshlink_runtime::ProxyError;

use super::replay::BoxError;

/// The body of every response the HTTP listener returns.
pub type ResponseBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BoxError>;

/// `x-meshlink-error`: the failure's bounded label, on every answer the
/// proxy writes for a failure.
pub const ERROR_HEADER: &str = "x-meshlink-error";

/// A body of `bytes`.
pub fn full(bytes: impl Into<Bytes>) -> ResponseBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// Whether a request is gRPC (by its content type).
pub fn is_grpc(headers: &http::HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// The answer to a request that failed with `error`.
pub fn error(error: &ProxyError, grpc: bool) -> Response<ResponseBody> {
    let summary = format!("meshlink-proxy: {}", error.label().replace('_', " "));
    let mut response = if grpc {
        grpc_answer(error.grpc_status(), &summary)
    } else {
        let status = StatusCode::from_u16(error.http_status()).unwrap_or(StatusCode::BAD_GATEWAY);
        text_answer(status, &summary)
    };
    response
        .headers_mut()
        .insert(ERROR_HEADER, HeaderValue::from_static(error.label()));
    if let meshlink_runtime::ErrorKind::Overflow(limit) = error.kind() {
        // Envoy's header, and which limit was hit.
        let h = response.headers_mut();
        h.insert("x-envoy-overloaded", HeaderValue::from_static("true"));
        h.insert(OVERFLOW_HEADER, HeaderValue::from_static(limit.as_str()));
    }
    response
}

/// `x-meshlink-overflow`: the circuit-breaking limit that refused the
/// request (`max_requests`, `max_pending_requests`, `max_connections`).
pub const OVERFLOW_HEADER: &str = "x-meshlink-overflow";

/// A plain answer with `status` and a one-line reason (CONNECT refused,
/// no route).
pub fn status(status: StatusCode, reason: &str, grpc: bool) -> Response<ResponseBody> {
    if grpc {
        let code = match status {
            StatusCode::NOT_FOUND => 12, // UNIMPLEMENTED: no route for the method
            _ => 13,
        };
        return grpc_answer(code, reason);
    }
    text_answer(status, &format!("meshlink-proxy: {reason}"))
}

/// The answer to a request the local rate limit refused: `status` with
/// Envoy's body `local_rate_limited`; for gRPC, UNAVAILABLE (14), as Envoy
/// maps it.
pub fn rate_limited(status: u16, grpc: bool) -> Response<ResponseBody> {
    if grpc {
        return grpc_answer(14, "local_rate_limited");
    }
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::TOO_MANY_REQUESTS);
    text_answer(status, "local_rate_limited")
}

/// The answer to a request a fault filter aborted: `status` with Envoy's
/// body `fault filter abort`; for gRPC, the status Envoy maps it to.
pub fn fault_abort(status: u16, grpc: bool) -> Response<ResponseBody> {
    if grpc {
        let code = match status {
            400 => 13,
            401 => 16,
            403 => 7,
            404 => 12,
            429 | 502..=504 => 14,
            _ => 2,
        };
        return grpc_answer(code, "fault filter abort");
    }
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    text_answer(status, "fault filter abort")
}

/// A gRPC trailers-only answer: HTTP 200 with `grpc-status` and
/// `grpc-message` in the headers, no body.
fn grpc_answer(code: i32, message: &str) -> Response<ResponseBody> {
    let mut r = Response::new(full(Bytes::new()));
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/grpc"),
    );
    h.insert("grpc-status", HeaderValue::from(code));
    if let Ok(v) = HeaderValue::from_str(message) {
        h.insert("grpc-message", v);
    }
    r
}

/// A `text/plain` answer with `status` and `line` (and a newline).
fn text_answer(status: StatusCode, line: &str) -> Response<ResponseBody> {
    let mut r = Response::new(full(format!("{line}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}
