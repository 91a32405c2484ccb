//! The HTTP/2 body of an ADS response stream: each message is encoded into
//! a buffer of exactly its gRPC frame's size and handed to h2, which frees
//! it once written; the stream's end status becomes the trailers.
//!
//! tonic's own response body encodes into one buffer per stream and keeps
//! it at the size of the largest message the stream ever sent (an Envoy's
//! first Listener or Secret response), for the stream's whole life. With
//! 10,000 mostly idle streams that was about 4 KiB of every connected
//! proxy's memory (heap profile of 2,000 proxies); here an idle stream
//! holds no encode buffer at all.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::{Body, Frame};
use tonic::Status;
use tonic::codegen::http;

use super::ResponseStream;

/// Length of the gRPC message prefix: a compression flag and a big-endian
/// u32 length.
pub(super) const PREFIX: usize = 5;

/// A response stream as an HTTP body of gRPC-framed messages, ending with
/// `grpc-status` trailers.
pub(crate) struct ResponseBody<T> {
    messages: Option<ResponseStream<T>>,
}

impl<T> ResponseBody<T> {
    pub(crate) fn new(messages: ResponseStream<T>) -> Self {
        Self {
            messages: Some(messages),
        }
    }
}

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
fn trailers(status: &Status) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    if status.add_header(&mut headers).is_err() {
        // Only a message that cannot be a header value gets here; end with
        // the code alone rather than with no status.
        let _ = Status::new(status.code(), "").add_header(&mut headers);
    }
    headers
}

impl<T: prost::Message + Send + 'static> Body for ResponseBody<T> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let Some(messages) = self.messages.as_mut() else {
            return Poll::Ready(None);
        };
        let end = match messages.as_mut().poll_next(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(Some(Ok(msg))) => return Poll::Ready(Some(Ok(Frame::data(frame(&msg))))),
            Poll::Ready(Some(Err(status))) => status,
            Poll::Ready(None) => Status::ok(""),
        };
        self.messages = None;
        Poll::Ready(Some(Ok(Frame::trailers(trailers(&end)))))
    }

    fn is_end_stream(&self) -> bool {
        self.messages.is_none()
    }
}

/// The HTTP response for a served stream, or the trailers-only response
/// of a refused one.
pub(crate) fn http_response<T: prost::Message + Send + 'static>(
    response: Result<tonic::Response<ResponseStream<T>>, Status>,
) -> http::Response<tonic::body::Body> {
    let response = match response {
        Ok(r) => r,
        Err(status) => return status.into_http(),
    };
    let (metadata, messages, extensions) = response.into_parts();
    let mut http = http::Response::new(tonic::body::Body::new(ResponseBody::new(messages)));
    *http.headers_mut() = metadata.into_headers();
    *http.extensions_mut() = extensions;
    http.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    http
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
    use http_body_util::BodyExt;

    fn response(version: &str) -> DiscoveryResponse {
        DiscoveryResponse {
            version_info: version.to_owned(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn messages_are_framed_and_the_end_status_becomes_trailers() {
        let messages: ResponseStream<DiscoveryResponse> = Box::pin(futures::stream::iter(vec![
            Ok(response("1")),
            Ok(response("2")),
            Err(Status::unavailable(
                "control plane shutting down; reconnect",
            )),
        ]));
        let mut body = ResponseBody::new(messages);
        let mut data = Vec::new();
        let mut trailer = None;
        while let Some(frame) = body.frame().await {
            let frame = frame.unwrap();
            match frame.into_data() {
                Ok(d) => data.push(d),
                Err(f) => trailer = f.into_trailers().ok(),
            }
        }
        assert_eq!(data.len(), 2);
        for (bytes, version) in data.iter().zip(["1", "2"]) {
            assert_eq!(bytes[0], 0, "not compressed");
            let len = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
            assert_eq!(len, bytes.len() - PREFIX, "the buffer is exactly one frame");
            let decoded = <DiscoveryResponse as prost::Message>::decode(&bytes[PREFIX..]).unwrap();
            assert_eq!(decoded, response(version));
        }
        let trailer = trailer.expect("trailers end the body");
        assert_eq!(trailer["grpc-status"], "14");
        // grpc-message is percent-encoded on the wire.
        assert_eq!(
            trailer["grpc-message"],
            "control%20plane%20shutting%20down;%20reconnect"
        );
        assert!(body.is_end_stream());
    }

    #[tokio::test]
    async fn a_stream_that_ends_cleanly_sends_status_ok() {
        let messages: ResponseStream<DiscoveryResponse> = Box::pin(futures::stream::empty());
        let mut body = ResponseBody::new(messages);
        let frame = body.frame().await.unwrap().unwrap();
        let trailer = frame.into_trailers().unwrap();
        assert_eq!(trailer["grpc-status"], "0");
        assert!(body.frame().await.is_none());
    }
}
