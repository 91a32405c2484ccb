//! The `grpc.health.v1.Health/Check` call of a gRPC health check: the
//! request frame, and the verdict on the answer (`SERVING` with
//! `grpc-status` 0 passes), with the two messages of
//! `grpc/health/v1/health.proto` declared here.

use bytes::{BufMut as _, Bytes, BytesMut};
use prost::Message as _;

/// The method's path.
pub(super) const PATH: &str = "/grpc.health.v1.Health/Check";

/// `HealthCheckResponse.ServingStatus.SERVING`.
const SERVING: i32 = 1;

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckRequest {
    /// The service asked about (empty: the server).
    #[prost(string, tag = "1")]
    service: String,
}

/// `grpc.health.v1.HealthCheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckResponse {
    /// `ServingStatus`.
    #[prost(int32, tag = "1")]
    status: i32,
}

/// The request's one length-prefixed, uncompressed message.
pub(super) fn request_frame(service: &str) -> Bytes {
    let msg = HealthCheckRequest {
        service: service.to_owned(),
    }
    .encode_to_vec();
    let mut out = BytesMut::with_capacity(5 + msg.len());
    out.put_u8(0);
    out.put_u32(msg.len() as u32);
    out.put_slice(&msg);
    out.freeze()
}

/// Whether an answer (HTTP status, headers, trailers, body) says
/// `SERVING`; otherwise why not.
pub(super) fn verdict(
    status: http::StatusCode,
    headers: &http::HeaderMap,
    trailers: Option<&http::HeaderMap>,
    body: &[u8],
) -> Result<(), String> {
    if status != http::StatusCode::OK {
        return Err(format!("HTTP status {status}"));
    }
    // A trailers-only answer carries grpc-status in its headers.
    let grpc_status = trailers
        .and_then(|t| t.get("grpc-status"))
        .or_else(|| headers.get("grpc-status"))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if grpc_status != "0" {
        let message = trailers
            .and_then(|t| t.get("grpc-message"))
            .or_else(|| headers.get("grpc-message"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        return Err(format!("grpc-status {grpc_status:?} {message}"));
    }
    let Some(msg) = body.get(5..) else {
        return Err("no HealthCheckResponse in the answer".into());
    };
    if body[0] != 0 {
        return Err("a compressed HealthCheckResponse (none was asked for)".into());
    }
    let answer = HealthCheckResponse::decode(msg)
        .map_err(|e| format!("the HealthCheckResponse does not decode: {e}"))?;
    if answer.status != SERVING {
        return Err(format!(
            "status {} (1 is SERVING; 2 NOT_SERVING, 3 SERVICE_UNKNOWN)",
            answer.status
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: i32) -> Vec<u8> {
        let msg = HealthCheckResponse { status }.encode_to_vec();
        let mut out = vec![0];
        out.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        out.extend_from_slice(&msg);
        out
    }

    #[test]
    fn serving_with_status_0_passes_and_anything_else_fails() {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", "0".parse().unwrap());
        let ok = http::StatusCode::OK;
        let none = http::HeaderMap::new();
        assert_eq!(verdict(ok, &none, Some(&trailers), &answer(1)), Ok(()));
        let err = verdict(ok, &none, Some(&trailers), &answer(2)).unwrap_err();
        assert!(err.contains("status 2"), "{err}");
        let mut unimplemented = http::HeaderMap::new();
        unimplemented.insert("grpc-status", "12".parse().unwrap());
        let err = verdict(ok, &unimplemented, None, &[]).unwrap_err();
        assert!(err.contains("\"12\""), "{err}");
        let frame = request_frame("echo");
        assert_eq!(&frame[..5], &[0, 0, 0, 0, 6]);
        assert_eq!(&frame[5..], b"\x0a\x04echo");
    }
}
