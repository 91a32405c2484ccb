//! The UDP loop of one binding: a datagram is answered at once from the
//! table, or handed to a forward task (at most `max_pending_lookups` in
//! flight) that sends the upstream's answer back from the same socket.
//!
//! It never stops on a bad datagram or a receive error, only when its
//! binding ends.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::UdpSocket;

use super::answer::{self, Handled, Transport};
use super::forward::PendingSlot;
use super::{Outcome, Serving};

/// The largest datagram read (larger ones are cut, and fail to parse).
const MAX_DATAGRAM: usize = 65_535;

/// Serves `socket` until the binding's `stop` fires.
pub(crate) async fn serve(socket: Arc<UdpSocket>, ctx: Serving) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let (n, peer) = tokio::select! {
            _ = ctx.stop.cancelled() => return,
            received = socket.recv_from(&mut buf) => match received {
                Ok(r) => r,
                Err(e) => {
                    // E.g. an ICMP error from an earlier send; the socket
                    // is still good.
                    tracing::debug!(error = %e, "mesh DNS: UDP receive failed");
                    continue;
                }
            },
        };
        let query = &buf[..n];
        let Some(spec) = ctx.spec() else {
            ctx.metrics.count(Outcome::Dropped);
            continue;
        };
        match answer::handle(query, &spec, Transport::Udp) {
            Handled::Answer { bytes, outcome } => {
                ctx.metrics.count(outcome);
                send(&socket, &bytes, peer).await;
            }
            Handled::Drop => ctx.metrics.count(Outcome::Dropped),
            Handled::Forward(request) => {
                let Some(slot) = PendingSlot::take(&ctx.metrics, spec.max_pending) else {
                    ctx.metrics.count(Outcome::Dropped);
                    continue;
                };
                let query = query.to_vec();
                let (socket, task) = (socket.clone(), ctx.clone());
                ctx.tasks.spawn(async move {
                    let bytes = tokio::select! {
                        _ = task.stop.cancelled() => return,
                        bytes = task.forwarded(&query, &request, &spec, Transport::Udp) => bytes,
                    };
                    // The upstream part is over: free the slot before the
                    // client can see the answer.
                    drop(slot);
                    send(&socket, &bytes, peer).await;
                });
            }
        }
    }
}

async fn send(socket: &UdpSocket, bytes: &[u8], peer: SocketAddr) {
    if let Err(e) = socket.send_to(bytes, peer).await {
        tracing::debug!(%peer, error = %e, "mesh DNS: UDP send failed");
    }
}
