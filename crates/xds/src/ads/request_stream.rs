//! The request half of an ADS stream: gRPC-framed messages decoded from
//! the HTTP/2 request body.
//!
//! tonic's `Streaming` keeps one decode buffer per stream for the stream's
//! life, at the size of the largest message it decoded. An Envoy's first
//! request carries its node (build version, metadata, the list of its
//! extensions: often several KiB), so every connected Envoy held that much
//! of idle buffer; with a 1 KiB floor even a small client held 1 KiB. Here
//! a stream holds a buffer only while a message is arriving: bytes are
//! gathered until a whole message is there, the message is decoded, and
//! an emptied buffer is released. An idle stream holds none.

use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::Stream;
use http_body::Body;
use tonic::Status;
use tonic::codegen::StdError;

use super::response_body::PREFIX;

/// Largest request accepted, as tonic's default (4 MiB).
pub(crate) const MAX_REQUEST: usize = 4 * 1024 * 1024;

/// Decoded requests of one stream.
pub(crate) struct Requests<B, T> {
    body: B,
    /// The rest of the last data frame, not yet decoded. A frame that
    /// holds whole messages (an ACK is one small message per frame) is
    /// decoded from here without a copy.
    data: Bytes,
    /// Bytes of a message that spans frames; empty (unallocated) between
    /// messages.
    buf: BytesMut,
    done: bool,
    _message: PhantomData<fn() -> T>,
}

impl<B, T> Requests<B, T> {
    /// Decodes the messages of `body`.
    pub(crate) fn new(body: B) -> Self {
        Self {
            body,
            data: Bytes::new(),
            buf: BytesMut::new(),
            done: false,
            _message: PhantomData,
        }
    }
}

/// The length of the message whose gRPC prefix starts `bytes`, once the
/// prefix is there.
fn message_len(bytes: &[u8]) -> Result<Option<usize>, Status> {
    if bytes.len() < PREFIX {
        return Ok(None);
    }
    if bytes[0] != 0 {
        return Err(Status::unimplemented(
            "compressed request message; this control plane accepts uncompressed requests only",
        ));
    }
    let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
    if len > MAX_REQUEST {
        return Err(Status::resource_exhausted(format!(
            "request of {len} bytes is larger than the {MAX_REQUEST}-byte limit"
        )));
    }
    Ok(Some(len))
}

fn decode<T: prost::Message + Default>(message: impl Buf) -> Result<T, Status> {
    T::decode(message).map_err(|e| Status::internal(format!("cannot decode request: {e}")))
}

impl<B, T: prost::Message + Default> Requests<B, T> {
    /// The next whole message received, if one is there.
    fn decode_one(&mut self) -> Result<Option<T>, Status> {
        if self.buf.is_empty() {
            // Straight from the frame when it holds the whole message.
            match message_len(&self.data)? {
                Some(len) if self.data.len() >= PREFIX + len => {
                    self.data.advance(PREFIX);
                    return decode(self.data.split_to(len)).map(Some);
                }
                _ if self.data.is_empty() => return Ok(None),
                _ => {}
            }
        }
        // A message that spans frames: gather its bytes.
        if !self.data.is_empty() {
            self.buf.put(std::mem::take(&mut self.data));
        }
        let Some(len) = message_len(&self.buf)? else {
            return Ok(None);
        };
        if self.buf.len() < PREFIX + len {
            self.buf.reserve(PREFIX + len - self.buf.len());
            return Ok(None);
        }
        self.buf.advance(PREFIX);
        let message = decode(self.buf.split_to(len))?;
        if self.buf.is_empty() {
            // Release the buffer: an idle stream holds none.
            self.buf = BytesMut::new();
        }
        Ok(Some(message))
    }
}

impl<B, T> Stream for Requests<B, T>
where
    B: Body + Unpin,
    B::Error: Into<StdError>,
    T: prost::Message + Default,
{
    type Item = Result<T, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            match this.decode_one() {
                Ok(Some(message)) => return Poll::Ready(Some(Ok(message))),
                Ok(None) => {}
                Err(status) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(status)));
                }
            }
            match ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(mut data) = frame.into_data() {
                        // No copy when the body's data is `Bytes` (h2's).
                        this.data = data.copy_to_bytes(data.remaining());
                    }
                }
                Some(Err(e)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(Status::from_error(e.into()))));
                }
                None => {
                    this.done = true;
                    if !this.buf.is_empty() || !this.data.is_empty() {
                        return Poll::Ready(Some(Err(Status::internal(
                            "request stream ended in the middle of a message",
                        ))));
                    }
                    return Poll::Ready(None);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
    use futures::StreamExt;
    use http_body::Frame;
    use http_body_util::StreamBody;
    use prost::Message;

    use super::*;

    fn framed(msg: &DeltaDiscoveryRequest) -> Vec<u8> {
        let body = msg.encode_to_vec();
        let mut out = vec![0];
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    fn request(t: &str) -> DeltaDiscoveryRequest {
        DeltaDiscoveryRequest {
            type_url: t.to_owned(),
            response_nonce: "7".into(),
            ..Default::default()
        }
    }

    type Chunks =
        StreamBody<futures::stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, std::io::Error>>>>;

    fn body(chunks: Vec<Vec<u8>>) -> Chunks {
        StreamBody::new(futures::stream::iter(
            chunks
                .into_iter()
                .map(|c| Ok(Frame::data(Bytes::from(c))))
                .collect::<Vec<_>>(),
        ))
    }

    #[tokio::test]
    async fn messages_split_and_joined_across_data_frames_decode_and_the_buffer_is_released() {
        let (a, b, c) = (
            request("a"),
            request("b"),
            request("c".repeat(5000).as_str()),
        );
        let mut bytes = framed(&a);
        bytes.extend(framed(&b));
        bytes.extend(framed(&c));
        // Two messages and a bit in one frame, the rest of the large one in
        // 7-byte pieces.
        let split = framed(&a).len() + framed(&b).len() + 3;
        let mut chunks = vec![bytes[..split].to_vec()];
        chunks.extend(bytes[split..].chunks(7).map(<[u8]>::to_vec));
        let mut requests = Requests::<_, DeltaDiscoveryRequest>::new(body(chunks));
        assert_eq!(requests.next().await.unwrap().unwrap(), a);
        assert_eq!(requests.next().await.unwrap().unwrap(), b);
        assert_eq!(requests.next().await.unwrap().unwrap(), c);
        assert_eq!(requests.buf.capacity(), 0, "an idle stream holds no buffer");
        assert!(requests.next().await.is_none());
    }

    #[tokio::test]
    async fn compressed_oversized_and_truncated_messages_are_errors() {
        let mut compressed = framed(&request("a"));
        compressed[0] = 1;
        let mut requests = Requests::<_, DeltaDiscoveryRequest>::new(body(vec![compressed]));
        let err = requests.next().await.unwrap().unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unimplemented);
        assert!(
            requests.next().await.is_none(),
            "the stream ends after an error"
        );

        let mut huge = vec![0];
        huge.extend_from_slice(&((MAX_REQUEST + 1) as u32).to_be_bytes());
        let mut requests = Requests::<_, DeltaDiscoveryRequest>::new(body(vec![huge]));
        let err = requests.next().await.unwrap().unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted);

        let whole = framed(&request("a"));
        let mut requests = Requests::<_, DeltaDiscoveryRequest>::new(body(vec![
            whole[..whole.len() - 1].to_vec(),
        ]));
        let err = requests.next().await.unwrap().unwrap_err();
        assert_eq!(err.code(), tonic::Code::Internal);
        assert!(err.message().contains("middle of a message"), "{err}");
    }
}
