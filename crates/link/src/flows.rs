//! Flows: opening one towards a routing key, and serving the flow streams
//! a neighbour opens (to a local connector, or on to the next hop).
//!
//! A flow stream starts with one [`StreamHeader::Flow`] frame, then raw
//! bytes both ways; end of stream in one direction is a half-close that
//! is passed on (yamux FIN <-> TCP FIN). Owns the splice; never decides
//! routes (it asks the routing state) and never touches link state.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::core::Core;
use crate::mux::{FlowTask, LinkStream, MuxOpener};
use crate::wire::{FlowReply, StreamHeader, encode_frame, read_frame, write_frame};

/// How long a flow's destination may take to answer (its connect
/// included).
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a flow stream may take to send its header.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a flow could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    /// No router is known to have a connector for the key.
    #[error(
        "no router has a connector for routing key {0:?}; add a Connector for it in a linked site"
    )]
    NoRoute(String),
    /// The destination is known but no link to its next hop is up.
    #[error("no link is up towards router {0:?}; check the Links on the path")]
    NoLink(String),
    /// The link failed while the flow was opened; a retry may succeed.
    #[error("opening the flow on the link to {peer:?} failed: {reason}")]
    Link {
        /// The neighbour.
        peer: String,
        /// What failed.
        reason: String,
    },
    /// The destination router refused the flow (its connector target is
    /// down, or it has no route onwards).
    #[error("router {router:?} refused the flow: {reason}")]
    Refused {
        /// The destination router.
        router: String,
        /// Its reason.
        reason: String,
    },
    /// The local connector's target refused or timed out.
    #[error("connecting to connector target {target}: {reason}")]
    Connect {
        /// `host:port`.
        target: String,
        /// What failed.
        reason: String,
    },
}

/// One flow's byte stream: a yamux stream on a link, or a direct
/// connection when the connector is on this router.
#[derive(Debug)]
pub struct Flow {
    io: FlowIo,
    /// The router whose connector serves it.
    pub destination: String,
    /// The driver of the link the flow's stream is on.
    driver: Option<MuxOpener>,
}

#[derive(Debug)]
enum FlowIo {
    Link(LinkStream),
    Local(TcpStream),
}

/// Most destinations one new flow tries before it gives up.
const MAX_ATTEMPTS: usize = 3;

/// Opens a flow to `routing_key`: the routing state picks a destination
/// (balanced over the cheapest); when it cannot be reached, the flow fails
/// over to the next pick, at most [`MAX_ATTEMPTS`] destinations.
///
/// `early` are bytes the client already sent: they leave with the flow
/// header (in the stream's first frame) instead of after the
/// destination's reply, and are sent again to the next destination when
/// one refuses the flow.
pub(crate) async fn open(core: &Core, routing_key: &str, early: &[u8]) -> Result<Flow, FlowError> {
    let mut excluded = Vec::new();
    let mut last = None;
    while excluded.len() < MAX_ATTEMPTS {
        let Some(dest) = core.routing.pick(routing_key, &excluded) else {
            break;
        };
        let router = dest.router.as_str().to_owned();
        let attempt = if dest.next_hop.is_none() {
            match connect_local(core, routing_key).await {
                Ok(mut tcp) => write_early(&mut tcp, early)
                    .await
                    .map(|()| (FlowIo::Local(tcp), None)),
                Err(e) => Err(e),
            }
        } else {
            let header = StreamHeader::Flow {
                routing_key: routing_key.to_owned(),
                destination: router.clone(),
                origin: core.id.clone(),
                flow_id: core.next_id(),
            };
            match open_towards(core, &router, &header, early).await {
                Ok((mut stream, driver)) => await_reply(&mut stream, &router)
                    .await
                    .map(|()| (FlowIo::Link(stream), Some(driver))),
                Err(e) => Err(e),
            }
        };
        match attempt {
            Ok((io, driver)) => {
                return Ok(Flow {
                    io,
                    destination: router,
                    driver,
                });
            }
            Err(e) => {
                tracing::debug!(routing_key, destination = %router, error = %e, "failing over");
                excluded.push(dest.router);
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| FlowError::NoRoute(routing_key.to_owned())))
}

/// Serves a flow stream a neighbour opened: to a local connector when the
/// flow is for this router, else on to the next hop (transit).
pub(crate) async fn serve_inbound(core: Arc<Core>, mut stream: LinkStream) {
    let header = match timeout(HEADER_TIMEOUT, read_frame(&mut stream)).await {
        Ok(Ok(Some(h))) => h,
        Ok(Ok(None)) => return,
        Ok(Err(e)) => return tracing::debug!(error = %e, "bad flow stream header"),
        Err(_) => return tracing::debug!("flow stream sent no header"),
    };
    let StreamHeader::Flow {
        routing_key,
        destination,
        ..
    } = &header
    else {
        return tracing::debug!("a second control stream was refused");
    };
    if core.edge && *destination != core.id {
        // Routes never pass through an edge router; refuse a flow that
        // tries to.
        let reason = format!("edge router {:?} carries no transit", core.id);
        return refuse(&mut stream, reason).await;
    }
    let result = if *destination == core.id {
        match connect_local(&core, routing_key).await {
            Ok(mut tcp) => match write_frame(&mut stream, &FlowReply::Accepted).await {
                Ok(()) => splice(&core, &mut stream, &mut tcp).await.map(|_| ()),
                Err(e) => Err(io::Error::other(e.to_string())),
            },
            Err(e) => {
                let reason = format!("router {:?}: {e}", core.id);
                return refuse(&mut stream, reason).await;
            }
        }
    } else {
        // Transit: the destination's reply passes through the splice.
        match open_towards(&core, destination, &header, &[]).await {
            Ok((mut out, _)) => splice(&core, &mut stream, &mut out).await.map(|_| ()),
            Err(e) => {
                let reason = format!("router {:?}: {e}", core.id);
                return refuse(&mut stream, reason).await;
            }
        }
    };
    if let Err(e) = result {
        tracing::debug!(routing_key, destination, error = %e, "flow ended with an error");
    }
}

/// Copies both ways until both directions ended, passing half-closes on.
/// Returns (bytes a to b, bytes b to a). Ends early on shutdown.
pub(crate) async fn splice<A, B>(core: &Core, a: &mut A, b: &mut B) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    tokio::select! {
        r = crate::splice::bidirectional(a, b) => r,
        _ = core.shutdown.cancelled() => Err(io::Error::other("router shutting down")),
    }
}

/// Opens a stream towards router `dest` on the link to its next hop and
/// writes `header`, then `early` (the client's first bytes) in the same
/// first frame.
async fn open_towards(
    core: &Core,
    dest: &str,
    header: &StreamHeader,
    early: &[u8],
) -> Result<(LinkStream, MuxOpener), FlowError> {
    let peer = core
        .routing
        .next_hop(dest)
        .ok_or_else(|| FlowError::NoLink(dest.to_owned()))?;
    let failed = |reason: String| FlowError::Link {
        peer: peer.router.clone(),
        reason,
    };
    let mut first = encode_frame(header).map_err(|e| failed(e.to_string()))?;
    first.extend_from_slice(early);
    let stream = peer.opener.open_with(first).await.map_err(failed)?;
    Ok((stream, peer.opener))
}

/// Waits for the destination's [`FlowReply`] on a stream opened by
/// [`open_towards`].
async fn await_reply(stream: &mut LinkStream, dest: &str) -> Result<(), FlowError> {
    let refused = |reason: String| FlowError::Refused {
        router: dest.to_owned(),
        reason,
    };
    match timeout(REPLY_TIMEOUT, read_frame::<_, FlowReply>(stream)).await {
        Ok(Ok(Some(FlowReply::Accepted))) => Ok(()),
        Ok(Ok(Some(FlowReply::Refused { reason }))) => Err(refused(reason)),
        Ok(Ok(None)) => Err(refused("the stream closed without an answer".into())),
        Ok(Err(e)) => Err(refused(e.to_string())),
        Err(_) => Err(refused(format!("no answer within {REPLY_TIMEOUT:?}"))),
    }
}

/// Tells the opener the flow is refused, then ends the stream.
async fn refuse(stream: &mut LinkStream, reason: String) {
    let _ = write_frame(stream, &FlowReply::Refused { reason }).await;
    let _ = tokio::io::AsyncWriteExt::shutdown(stream).await;
}

/// Writes the client's early bytes to a local connector's target.
async fn write_early(tcp: &mut TcpStream, early: &[u8]) -> Result<(), FlowError> {
    if early.is_empty() {
        return Ok(());
    }
    match tokio::io::AsyncWriteExt::write_all(tcp, early).await {
        Ok(()) => Ok(()),
        Err(e) => Err(FlowError::Connect {
            target: tcp
                .peer_addr()
                .map_or_else(|_| "the connector target".to_owned(), |a| a.to_string()),
            reason: e.to_string(),
        }),
    }
}

/// Connects to the next local target for `routing_key`; the outcome is
/// recorded as the target's health ([`crate::connector_health`]).
async fn connect_local(core: &Core, routing_key: &str) -> Result<TcpStream, FlowError> {
    let target = core
        .connector_target(routing_key)
        .ok_or_else(|| FlowError::NoRoute(routing_key.to_owned()))?;
    let tcp = crate::connector_health::connect(core, &target)
        .await
        .map_err(|reason| FlowError::Connect {
            target: target.addr(),
            reason,
        })?;
    let _ = tcp.set_nodelay(true);
    Ok(tcp)
}

/// Runs `splice` (a flow's copying) on `driver`, the driver of the link
/// the flow's stream is on ([`Flow::driver`]), so its bytes meet yamux
/// without a task hand-off; without one (a local flow, or the link
/// ended), here.
pub(crate) async fn run_on(driver: Option<MuxOpener>, splice: FlowTask) {
    match driver {
        Some(driver) => {
            if let Err(splice) = driver.run(splice) {
                splice.await;
            }
        }
        None => splice.await,
    }
}

impl Flow {
    /// The driver of the link this flow's stream is on (none for a flow
    /// to a local connector).
    pub(crate) fn driver(&self) -> Option<MuxOpener> {
        self.driver.clone()
    }
}

// === impl Flow ===

impl AsyncRead for Flow {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.io {
            FlowIo::Link(s) => Pin::new(s).poll_read(cx, buf),
            FlowIo::Local(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Flow {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.io {
            FlowIo::Link(s) => Pin::new(s).poll_write(cx, buf),
            FlowIo::Local(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            FlowIo::Link(s) => Pin::new(s).poll_flush(cx),
            FlowIo::Local(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.io {
            FlowIo::Link(s) => Pin::new(s).poll_shutdown(cx),
            FlowIo::Local(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}
