//! Framing of an ADS response stream on the xDS port: each message is
//! encoded into a buffer of exactly its gRPC frame's size and handed to h2,
//! which frees it once written; the stream's end status becomes the
//! trailers. The body itself is [`super::inline_body::InlineBody`].
//!
//! tonic's own response body encodes into one buffer per stream and keeps
//! it at the size of the largest message the stream ever sent (an Envoy's
//! first Listener or Secret response), for the stream's whole life. With
//! 10,000 mostly idle streams that was about 4 KiB of every connected
//! proxy's memory (heap profile of 2,000 proxies); here an idle stream
//! holds no encode buffer at all.

use bytes::{BufMut, Bytes, BytesMut};
use tonic::Status;
use tonic::codegen::http;

/// Length of the gRPC message prefix: a compression flag and a big-endian
/// u32 length.
pub(super) const PREFIX: usize = 5;

/// One message as a gRPC frame (uncompressed), in a buffer of its size.
pub(crate) fn frame<T: prost::Message>(msg: &T) -> Bytes {
    let len = msg.encoded_len();
    let mut buf = BytesMut::with_capacity(PREFIX + len);
    buf.put_u8(0);
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    msg.encode_raw(&mut buf);
    buf.freeze()
}

/// The trailers that end a stream with `status` (`grpc-status: 0` for OK).
pub(super) fn trailers(status: &Status) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    if status.add_header(&mut headers).is_err() {
        // Only a message that cannot be a header value gets here; end with
        // the code alone rather than with no status.
        let _ = Status::new(status.code(), "").add_header(&mut headers);
    }
    headers
}

/// The HTTP response for a served stream whose body runs the stream
/// ([`super::inline_body`]), or the trailers-only response of a refused
/// one.
pub(crate) fn inline_response<T: prost::Message + Send + 'static>(
    response: Result<super::inline_body::InlineBody<T>, Status>,
) -> http::Response<tonic::body::Body> {
    match response {
        Ok(body) => grpc_response(tonic::body::Body::new(body)),
        Err(status) => status.into_http(),
    }
}

/// A `200 OK` gRPC response with `body`.
fn grpc_response(body: tonic::body::Body) -> http::Response<tonic::body::Body> {
    let mut http = http::Response::new(body);
    http.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    http
}
