//! One established link connection, from the TLS handshake's end to its
//! close: the control stream, hellos and liveness, the neighbour entry,
//! and dispatching the peer's flow streams.
//!
//! The peer's first hello is checked against its verified certificate
//! ([`crate::identity`]): a certificate that names routers admits only
//! those router ids, and any other claim ends the link.
//!
//! The dialer opens the control stream first; the acceptor takes the
//! first inbound stream as the control stream. Both send a hello at once
//! and every [`HELLO_INTERVAL`]; a link whose control stream carried
//! nothing for [`DEAD_AFTER`] is down. The session only ever removes the
//! neighbour entry it added itself (by connection id), so a replacement
//! connection is never torn down by an old one's cleanup.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use crate::connection_end::{ConnectionEnd, DriverError, SessionEnd};
use crate::core::Core;
use crate::counted::Counted;
use crate::flows;
use crate::identity;
use crate::link_state::PeerConn;
use crate::metrics::IdentityLabels;
use crate::mux::{self, LinkStream};
use crate::routing::LinkDirection;
use crate::traffic::ConnectionBytes;
use crate::wire::{ControlMessage, StreamHeader, read_frame, write_frame};

/// How often each side sends a hello.
pub const HELLO_INTERVAL: Duration = Duration::from_secs(1);
/// How long a link may stay silent before it is declared down.
pub const DEAD_AFTER: Duration = Duration::from_secs(3);

/// What the caller knows about the connection before the session starts.
pub(crate) struct SessionInfo {
    /// `true` for the dialling side.
    pub(crate) dialer: bool,
    /// Path cost.
    pub(crate) cost: u32,
    /// The Link's name when dialled; the role's when accepted (the link
    /// is then named `<role>/<peer router id>`).
    pub(crate) name: String,
    /// The router ids the peer's verified certificate names (empty: none).
    pub(crate) peer_router_ids: Vec<String>,
}

/// The peer, once its first hello arrived.
#[derive(Clone, Debug)]
pub(crate) struct Peer {
    pub(crate) router: String,
    pub(crate) site: String,
    pub(crate) conn: u64,
    /// The link's cost: the dialler's own, or what its hello says.
    pub(crate) cost: u32,
}

/// Runs a session until the link fails, the peer goes silent or `stop`
/// is cancelled. `on_up` runs once the peer's hello arrived. Returns why
/// it ended.
pub(crate) async fn run<T>(
    core: Arc<Core>,
    io: T,
    info: SessionInfo,
    stop: CancellationToken,
    on_up: impl FnOnce(&Peer),
) -> SessionEnd
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let close = stop.child_token();
    // Every byte of the link's connection counts towards the link's
    // traffic once the peer's hello names the link.
    let bytes = ConnectionBytes::default();
    let io = Counted::new(io, bytes.received.clone(), bytes.sent.clone());
    let mut counted_as: Option<String> = None;
    let flow_core = core.clone();
    let mut end = ConnectionEnd::Other;
    let mut mux = mux::start(io, info.dialer, close.clone(), move |stream| {
        Box::pin(flows::serve_inbound(flow_core.clone(), stream))
    });
    let control = if info.dialer {
        match mux.opener.open().await {
            Ok(mut s) => match write_frame(&mut s, &StreamHeader::Control).await {
                Ok(()) => s,
                Err(e) => {
                    let what = format!("opening the control stream: {e}");
                    return failure(&mut mux, what, &mut end).await.ended(end);
                }
            },
            Err(e) => {
                let what = format!("opening the control stream: {e}");
                return failure(&mut mux, what, &mut end).await.ended(end);
            }
        }
    } else {
        match timeout(DEAD_AFTER, first_control(&mut mux.inbound)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return failure(&mut mux, e, &mut end).await.ended(end),
            Err(_) => return format!("no control stream within {DEAD_AFTER:?}").ended(end),
        }
    };
    let (mut reader, mut writer) = tokio::io::split(control);
    let (msg_tx, mut msg_rx) = mpsc::channel::<Result<ControlMessage, String>>(16);
    let read_task = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
        loop {
            let msg = match read_frame::<_, ControlMessage>(&mut reader).await {
                Ok(Some(m)) => Ok(m),
                Ok(None) => Err("peer closed the control stream".to_owned()),
                Err(e) => Err(e.to_string()),
            };
            let end = msg.is_err();
            if msg_tx.send(msg).await.is_err() || end {
                return;
            }
        }
    }));

    let conn = core.next_id();
    let (control_tx, mut control_rx) = mpsc::unbounded_channel::<ControlMessage>();
    let routing_hello = core.routing.hello();
    let mut seq = 0u64;
    let hello = |seq: &mut u64| {
        *seq += 1;
        ControlMessage::Hello {
            router_id: core.id.clone(),
            site: core.site.clone(),
            link_cost: info.dialer.then_some(info.cost),
            routing: Some(routing_hello.clone()),
            seq: *seq - 1,
        }
    };
    if let Err(e) = send(&mut writer, &hello(&mut seq), Instant::now() + DEAD_AFTER).await {
        let what = format!("sending hello: {e}");
        return failure(&mut mux, what, &mut end).await.ended(end);
    }
    let mut peer: Option<Peer> = None;
    let mut on_up = Some(on_up);
    let mut deadline = Instant::now() + DEAD_AFTER;
    let mut next_hello = Instant::now() + HELLO_INTERVAL;
    let mut driver_done = false;
    let reason = loop {
        tokio::select! {
            _ = stop.cancelled() => break "link removed".to_owned(),
            _ = sleep_until(deadline) => break format!("no hello from the peer for {DEAD_AFTER:?}"),
            _ = sleep_until(next_hello) => {
                next_hello += HELLO_INTERVAL;
                if let Err(e) = send(&mut writer, &hello(&mut seq), deadline).await {
                    break format!("sending hello: {e}");
                }
            }
            Some(out) = control_rx.recv() => {
                if let Err(e) = send(&mut writer, &out, deadline).await {
                    break format!("sending a routing message: {e}");
                }
            }
            msg = msg_rx.recv() => {
                let msg = match msg {
                    Some(Ok(m)) => m,
                    Some(Err(e)) => {
                        driver_done = true;
                        break failure(&mut mux, e, &mut end).await;
                    }
                    None => break "control stream reader ended".to_owned(),
                };
                deadline = Instant::now() + DEAD_AFTER;
                match msg {
                    ControlMessage::Hello { router_id, site, link_cost, routing, .. } => {
                        if router_id == core.id {
                            break format!("the peer has this router's own id {router_id:?}; each router needs its own id");
                        }
                        if let Some(p) = &peer {
                            if p.router != router_id {
                                break format!("the peer changed its id from {:?} to {router_id:?}", p.router);
                            }
                            continue;
                        }
                        match identity::check(&info.peer_router_ids, &router_id) {
                            Ok(binding) => {
                                core.metrics.peer_identity
                                    .get_or_create(&IdentityLabels { result: binding.label() })
                                    .inc();
                            }
                            Err(e) => {
                                core.metrics.peer_identity
                                    .get_or_create(&IdentityLabels { result: "refused" })
                                    .inc();
                                tracing::warn!(link = %info.name, error = %e, "link refused");
                                break format!("link refused: {e}");
                            }
                        }
                        let Some(routing) = routing else {
                            break format!("router {router_id:?} sent no routing hello; upgrade it");
                        };
                        let cost = if info.dialer { info.cost } else { link_cost.unwrap_or(info.cost) };
                        let name = if info.dialer { info.name.clone() } else { format!("{}/{router_id}", info.name) };
                        core.link_traffic.attach(&name, &router_id, conn, bytes.clone());
                        counted_as = Some(name.clone());
                        let up = core.routing.peer_up(PeerConn {
                            conn,
                            router: router_id.clone(),
                            site: site.clone(),
                            name,
                            cost,
                            direction: if info.dialer { LinkDirection::Outgoing } else { LinkDirection::Incoming },
                            opener: mux.opener.clone(),
                            control: control_tx.clone(),
                        }, &routing);
                        if let Err(e) = up {
                            break format!("link refused: {e}");
                        }
                        let p = Peer { router: router_id, site, conn, cost };
                        if let Some(f) = on_up.take() {
                            f(&p);
                        }
                        peer = Some(p);
                    }
                    ControlMessage::Routing { payload } => {
                        if peer.is_some() {
                            core.routing.received(conn, payload);
                        }
                    }
                }
            }
            stream = mux.inbound.recv() => match stream {
                Some(stream) => {
                    let core2 = core.clone();
                    core.tasks.spawn(flows::serve_inbound(core2, stream));
                }
                // The driver dropped the channel: its result says why.
                None => {
                    driver_done = true;
                    break driver_end((&mut mux.driver).await, &mut end);
                }
            },
            ended = &mut mux.driver => {
                driver_done = true;
                break driver_end(ended, &mut end);
            }
        }
    };
    core.routing.peer_down(conn);
    drop(read_task);
    if stop.is_cancelled() && !driver_done {
        // Removed or shutting down: give the graceful close a chance.
        close.cancel();
        let _ = timeout(Duration::from_secs(2), &mut mux.driver).await;
    }
    if let Some(name) = counted_as {
        core.link_traffic.detach(&name, conn);
    }
    reason.ended(end)
}

trait Ended {
    fn ended(self, end: ConnectionEnd) -> SessionEnd;
}

impl Ended for String {
    fn ended(self, end: ConnectionEnd) -> SessionEnd {
        SessionEnd { reason: self, end }
    }
}

/// `what` failed on a stream; if the connection itself ended, its reason
/// (e.g. the peer's TLS alert) is the one worth reporting, and its typed
/// end goes to `end`.
async fn failure(mux: &mut mux::Mux, what: String, end: &mut ConnectionEnd) -> String {
    match timeout(Duration::from_secs(1), &mut mux.driver).await {
        Ok(ended) => format!("{what} ({})", driver_end(ended, end)),
        Err(_) => what,
    }
}

/// The words for how the driver ended; its typed end goes to `end`.
fn driver_end(
    ended: Result<Result<(), DriverError>, tokio::task::JoinError>,
    end: &mut ConnectionEnd,
) -> String {
    match ended {
        Ok(Ok(())) => "peer closed the link".to_owned(),
        Ok(Err(e)) => {
            *end = e.end;
            format!("link failed: {e}")
        }
        Err(e) => format!("link task failed: {e}"),
    }
}

/// Writes one control message, failing if the peer has not taken it by
/// `deadline` (a peer that stopped reading must not stall liveness).
async fn send<W: AsyncWrite + Unpin>(
    writer: &mut W,
    msg: &ControlMessage,
    deadline: Instant,
) -> Result<(), String> {
    match tokio::time::timeout_at(deadline, write_frame(writer, msg)).await {
        Ok(result) => result.map_err(|e| e.to_string()),
        Err(_) => Err(format!("the peer took no data for {DEAD_AFTER:?}")),
    }
}

/// The acceptor's first inbound stream, which must be the control stream.
async fn first_control(
    inbound: &mut mpsc::UnboundedReceiver<LinkStream>,
) -> Result<LinkStream, String> {
    let mut s = inbound
        .recv()
        .await
        .ok_or_else(|| "connection closed before the control stream".to_owned())?;
    match read_frame::<_, StreamHeader>(&mut s).await {
        Ok(Some(StreamHeader::Control)) => Ok(s),
        Ok(Some(other)) => Err(format!(
            "the first stream must be the control stream, got {other:?}"
        )),
        Ok(None) => Err("the control stream closed at once".to_owned()),
        Err(e) => Err(format!("reading the control stream header: {e}")),
    }
}
