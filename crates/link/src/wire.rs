//! What travels on a link besides flow bytes: the header that opens every
//! yamux stream, and the control messages on the control stream.
//!
//! Framing: a 4-byte big-endian length, then that many bytes of JSON
//! (`tokio_util`'s `LengthDelimitedCodec` format), at most
//! [`MAX_FRAME`] bytes. JSON keeps the protocol readable in captures and
//! lets either side add fields; a control message is sent once a second,
//! so its cost does not matter. A flow stream carries one frame each way
//! (its [`StreamHeader`] out, the destination's [`FlowReply`] back) and
//! then raw bytes until half-close.
//!
//! Owns the message types and their encoding; never interprets them.

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

/// The largest frame either side accepts (64 KiB).
pub const MAX_FRAME: usize = 64 * 1024;

/// The first frame of every yamux stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum StreamHeader {
    /// The control stream: the first stream the dialer opens.
    Control,
    /// A flow: raw bytes of one TCP connection follow.
    #[serde(rename_all = "camelCase")]
    Flow {
        /// The routing key the flow's listener named.
        routing_key: String,
        /// The router whose connector serves the flow.
        destination: String,
        /// The router whose listener accepted the flow.
        origin: String,
        /// Unique per origin router, for logs.
        flow_id: u64,
    },
}

/// The destination's answer on a flow stream, its first frame back: the
/// flow is connected to a connector target, or refused with the reason.
/// Transit routers pass it through; the opener waits for it, so it can
/// fail over, and it is also what acknowledges the yamux stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum FlowReply {
    /// Connected; raw bytes follow.
    Accepted,
    /// Not connected; the stream ends.
    Refused {
        /// Why, naming the router and target.
        reason: String,
    },
}

/// A message on the control stream, either way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum ControlMessage {
    /// Sent on connect and every second: who the sender is. The first one
    /// on a link brings the link up.
    #[serde(rename_all = "camelCase")]
    Hello {
        /// The sender's router id.
        router_id: String,
        /// The sender's site name.
        site: String,
        /// The link's cost, sent by the dialler (whose Link names it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        link_cost: Option<u32>,
        /// The sender's routing hello (router info and incarnation).
        routing: Option<crate::routing::Hello>,
        /// Counts hellos on this link from 0.
        seq: u64,
    },
    /// A routing-protocol message (an LSA), opaque to the transport.
    Routing {
        /// The routing module's own message.
        payload: serde_json::Value,
    },
}

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The stream failed or ended mid-frame.
    #[error("link stream: {0}")]
    Io(#[from] std::io::Error),
    /// The peer announced a frame over [`MAX_FRAME`].
    #[error("peer sent a {0}-byte frame; the limit is {MAX_FRAME}")]
    TooLarge(usize),
    /// The frame is not the expected JSON.
    #[error("peer sent a malformed frame: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// Writes one frame holding `value` as JSON.
pub async fn write_frame<W, T>(io: &mut W, value: &T) -> Result<(), WireError>
where
    W: AsyncWrite + Unpin,
    T: Serialize,
{
    let buf = encode_frame(value)?;
    io.write_all(&buf).await?;
    io.flush().await?;
    Ok(())
}

/// One frame holding `value` as JSON: the bytes [`write_frame`] writes.
pub fn encode_frame<T: Serialize>(value: &T) -> Result<Vec<u8>, WireError> {
    let mut buf = vec![0u8; 4];
    serde_json::to_writer(&mut buf, value)?;
    let len = buf.len() - 4;
    if len > MAX_FRAME {
        return Err(WireError::TooLarge(len));
    }
    buf[..4].copy_from_slice(&(len as u32).to_be_bytes());
    Ok(buf)
}

/// Reads one frame and decodes it as `T`. `Ok(None)` at a clean end of
/// stream before the frame starts.
pub async fn read_frame<R, T>(io: &mut R) -> Result<Option<T>, WireError>
where
    R: AsyncRead + Unpin,
    T: for<'de> Deserialize<'de>,
{
    let mut len = [0u8; 4];
    match io.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(WireError::TooLarge(len));
    }
    let mut body = vec![0u8; len];
    io.read_exact(&mut body).await?;
    Ok(Some(serde_json::from_slice(&body)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_round_trip_and_oversized_frames_are_refused() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let header = StreamHeader::Flow {
            routing_key: "db".into(),
            destination: "r2".into(),
            origin: "r1".into(),
            flow_id: 7,
        };
        write_frame(&mut a, &header).await.unwrap();
        let got: StreamHeader = read_frame(&mut b).await.unwrap().unwrap();
        assert_eq!(got, header);

        a.write_all(&(MAX_FRAME as u32 + 1).to_be_bytes())
            .await
            .unwrap();
        let err = read_frame::<_, StreamHeader>(&mut b).await.unwrap_err();
        assert!(matches!(err, WireError::TooLarge(_)), "{err}");

        drop(a);
        assert!(
            read_frame::<_, StreamHeader>(&mut b)
                .await
                .unwrap()
                .is_none()
        );
    }
}
