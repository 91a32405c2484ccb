//! Framing of an ADS response stream on the xDS port: the messages queued
//! at once are encoded into one buffer of exactly their gRPC frames' size
//! and handed to h2, which frees it once written; the stream's end status becomes the
//! trailers. The body itself is [`super::inline_body::InlineBody`].
//!
//! tonic's own response body encodes into one buffer per stream and keeps
//! it at the size of the largest message the stream ever sent (an Envoy's
//! first Listener or Secret response), for the stream's whole life. With
//! 10,000 mostly idle streams that was about 4 KiB of every connected
//! proxy's memory (heap profile of 2,000 proxies); here an idle stream
//! holds no encode buffer at all.

use std::collections::VecDeque;

use bytes::{BufMut, Bytes, BytesMut};
use tonic::Status;
use tonic::codegen::http;

/// Length of the gRPC message prefix: a compression flag and a big-endian
/// u32 length.
pub(super) const PREFIX: usize = 5;

/// Most messages framed into one DATA frame.
pub(crate) const MAX_BATCH: usize = 8;

/// The responses at the front of `queue` (up to the first end status, at
/// most [`MAX_BATCH`]) as gRPC frames (uncompressed) in one buffer of
/// exactly their size, taken off the queue; `None` if the queue does not
/// start with a response. One DATA frame for the four or five responses a
/// new stream gets is one frame queued in h2 and one write, not five.
pub(crate) fn take_frames<T: prost::Message>(
    queue: &mut VecDeque<Result<Box<T>, Box<Status>>>,
) -> Option<Bytes> {
    let mut lens = [0usize; MAX_BATCH];
    let mut n = 0;
    for (slot, msg) in lens.iter_mut().zip(queue.iter()) {
        let Ok(msg) = msg else { break };
        *slot = msg.encoded_len();
        n += 1;
    }
    if n == 0 {
        return None;
    }
    let total = lens[..n].iter().map(|len| PREFIX + len).sum();
    let mut buf = BytesMut::with_capacity(total);
    for (msg, len) in queue.drain(..n).zip(lens) {
        if let Ok(msg) = msg {
            buf.put_u8(0);
            buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
            msg.encode_raw(&mut buf);
        }
    }
    Some(buf.freeze())
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
