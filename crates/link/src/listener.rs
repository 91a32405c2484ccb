//! A Listener: a local TCP port whose every connection becomes a flow to
//! the listener's routing key.
//!
//! Owns the accept loop and the per-connection splice, and counts flows
//! and bytes by routing key. A bind error is retried every second and
//! shown in the status; a connection for which no flow can be opened is
//! closed (the client sees a reset-free close, as with a refused backend).

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::config::ListenerConfig;
use crate::core::{BindKind, Core};
use crate::counted::Counted;
use crate::flows;
use crate::metrics::BytesLabels;
use crate::status::BindStatus;

/// Wait between bind attempts.
const BIND_RETRY: Duration = Duration::from_secs(1);

/// Runs listener `cfg` until `stop` is cancelled.
pub(crate) async fn run_listener(
    core: Arc<Core>,
    cfg: ListenerConfig,
    generation: u64,
    stop: CancellationToken,
) {
    let set = |status: Option<BindStatus>| {
        core.update_bind(BindKind::Listener, &cfg.name, generation, status)
    };
    let listener = loop {
        match TcpListener::bind((cfg.host.as_str(), cfg.port)).await {
            Ok(l) => break l,
            Err(e) => set(Some(BindStatus::Warming(format!(
                "binding {}:{}: {e}; retrying every second",
                cfg.host, cfg.port
            )))),
        }
        tokio::select! {
            _ = stop.cancelled() => return set(None),
            _ = tokio::time::sleep(BIND_RETRY) => {}
        }
    };
    if let Ok(addr) = listener.local_addr() {
        set(Some(BindStatus::Bound(addr)));
    }
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((tcp, _)) => {
                core.tasks
                    .spawn(serve_client(core.clone(), tcp, cfg.routing_key.clone()));
            }
            Err(e) => {
                tracing::warn!(listener = %cfg.name, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    set(None);
}

/// One client connection: open a flow and splice until both sides closed.
/// Bytes are counted as they pass, whatever way the flow ends.
async fn serve_client(core: Arc<Core>, tcp: TcpStream, routing_key: String) {
    let _ = tcp.set_nodelay(true);
    let mut flow = match flows::open(&core, &routing_key).await {
        Ok(f) => f,
        Err(e) => return tracing::debug!(routing_key, error = %e, "flow refused"),
    };
    let m = &core.metrics;
    let labels = m.key(&routing_key);
    m.flows_opened.get_or_create(&labels).inc();
    let active = m.flows_active.get_or_create(&labels).clone();
    let bytes = |direction| {
        m.flow_bytes
            .get_or_create(&BytesLabels {
                routing_key: routing_key.clone(),
                direction,
            })
            .clone()
    };
    let mut tcp = Counted::new(tcp, bytes("to_connector"), bytes("to_listener"));
    active.inc();
    let result = flows::splice(&core, &mut tcp, &mut flow).await;
    active.dec();
    if let Err(e) = result {
        tracing::debug!(routing_key, error = %e, "flow ended with an error");
    }
}
