//! A Listener: a local TCP port whose every connection becomes a flow to
//! the listener's routing key, or, for a multi-key listener, to the key
//! its strategy chooses ([`crate::multikey`]; the next candidate is tried
//! when a flow cannot be opened).
//!
//! Owns the accept loop and the per-connection splice, and counts flows
//! and bytes by routing key (the key the flow went to). A bind error is retried every second and
//! shown in the status; a connection for which no flow can be opened is
//! closed (the client sees a reset-free close, as with a refused backend).

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::config::{ListenerConfig, MultiKeyListenerConfig};
use crate::core::{BindKind, Core};
use crate::counted::Counted;
use crate::flows;
use crate::metrics::BytesLabels;
use crate::multikey::KeyChooser;
use crate::status::BindStatus;

/// Wait between bind attempts.
pub(crate) const BIND_RETRY: Duration = Duration::from_secs(1);

/// Pause after a failed accept.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// Where a listener's flows go.
enum Target {
    /// One routing key.
    Key(String),
    /// A key chosen per flow.
    Keys(KeyChooser),
}

impl Target {
    /// The routing keys to try for a new flow, in order.
    fn candidates(&self, core: &Core) -> Vec<String> {
        match self {
            Target::Key(key) => vec![key.clone()],
            Target::Keys(chooser) => chooser.candidates(|k| core.routing.has_destination(k)),
        }
    }
}

/// Binds `host:port` once; on failure reports the listener as warming
/// (retried every [`BIND_RETRY`] by the caller) and returns `None`.
pub(crate) async fn bind_once(
    host: &str,
    port: u16,
    set: &impl Fn(Option<BindStatus>),
) -> Option<TcpListener> {
    match TcpListener::bind((host, port)).await {
        Ok(l) => Some(l),
        Err(e) => {
            set(Some(BindStatus::Warming(format!(
                "binding {host}:{port}: {e}; retrying every second"
            ))));
            None
        }
    }
}

/// Accepts on `listener` until `stop` is cancelled and hands each
/// connection to `serve`; a failed accept (e.g. out of file descriptors)
/// is logged and paused on instead of spun on.
pub(crate) async fn accept_until(
    listener: &TcpListener,
    stop: &CancellationToken,
    name: &str,
    mut serve: impl FnMut(TcpStream, std::net::SocketAddr),
) {
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((tcp, peer)) => serve(tcp, peer),
            Err(e) => {
                tracing::warn!(listener = %name, error = %e, "accept failed");
                tokio::time::sleep(ACCEPT_PAUSE).await;
            }
        }
    }
}

/// What a listener binds.
struct Bind {
    name: String,
    host: String,
    port: u16,
}

/// Runs listener `cfg` until `stop` is cancelled.
pub(crate) async fn run_listener(
    core: Arc<Core>,
    cfg: ListenerConfig,
    generation: u64,
    stop: CancellationToken,
) {
    let bind = Bind {
        name: cfg.name,
        host: cfg.host,
        port: cfg.port,
    };
    run(core, bind, Target::Key(cfg.routing_key), generation, stop).await;
}

/// Runs multi-key listener `cfg` until `stop` is cancelled. Its bind
/// status is reported under its name among the listeners.
pub(crate) async fn run_multi_key_listener(
    core: Arc<Core>,
    cfg: MultiKeyListenerConfig,
    generation: u64,
    stop: CancellationToken,
) {
    let bind = Bind {
        name: cfg.name,
        host: cfg.host,
        port: cfg.port,
    };
    let target = Target::Keys(KeyChooser::new(cfg.strategy));
    run(core, bind, target, generation, stop).await;
}

async fn run(core: Arc<Core>, cfg: Bind, target: Target, generation: u64, stop: CancellationToken) {
    let target = Arc::new(target);
    let set = |status: Option<BindStatus>| {
        core.update_bind(BindKind::Listener, &cfg.name, generation, status)
    };
    let listener = loop {
        if let Some(l) = bind_once(&cfg.host, cfg.port, &set).await {
            break l;
        }
        tokio::select! {
            _ = stop.cancelled() => return set(None),
            _ = tokio::time::sleep(BIND_RETRY) => {}
        }
    };
    if let Ok(addr) = listener.local_addr() {
        set(Some(BindStatus::Bound(addr)));
    }
    accept_until(&listener, &stop, &cfg.name, |tcp, _| {
        core.tasks
            .spawn(serve_client(core.clone(), tcp, target.clone()));
    })
    .await;
    set(None);
}

/// The most client bytes taken before a flow is opened (see [`early`]).
const EARLY_MAX: usize = 8 * 1024;

/// The bytes the client has already sent (none if it has not, or speaks
/// second), taken without waiting: they travel with the flow header, so
/// the first request does not wait for the destination's reply. Reading
/// never consumes an end of stream (a later read sees it again).
fn early(tcp: &TcpStream) -> Vec<u8> {
    let mut buf = [0u8; EARLY_MAX];
    match tcp.try_read(&mut buf) {
        Ok(n) => buf[..n].to_vec(),
        Err(_) => Vec::new(),
    }
}

/// One client connection: open a flow and splice until both sides closed.
/// Bytes are counted as they pass, whatever way the flow ends.
async fn serve_client(core: Arc<Core>, tcp: TcpStream, target: Arc<Target>) {
    let _ = tcp.set_nodelay(true);
    let early = early(&tcp);
    let mut opened = None;
    for routing_key in target.candidates(&core) {
        match flows::open(&core, &routing_key, &early).await {
            Ok(f) => {
                opened = Some((f, routing_key));
                break;
            }
            Err(e) => tracing::debug!(routing_key, error = %e, "flow refused"),
        }
    }
    let Some((mut flow, routing_key)) = opened else {
        return;
    };
    // Counts the flow down however the splice ends (even dropped unrun
    // by a link that ended).
    let (active, to_connector, to_listener) = count_flow(&core, &routing_key);
    to_connector.inc_by(early.len() as u64);
    let mut tcp = Counted::new(tcp, to_connector, to_listener);
    let driver = flow.driver();
    let splice = async move {
        let result = flows::splice(&core, &mut tcp, &mut flow).await;
        drop(active);
        if let Err(e) = result {
            tracing::debug!(routing_key, error = %e, "flow ended with an error");
        }
    };
    flows::run_on(driver, Box::pin(splice)).await;
}

/// One active flow in `meshlink_link_flows_active`, counted down on drop.
pub(crate) struct ActiveFlow(Gauge);

/// Counts a flow opened to `routing_key`: `meshlink_link_flows_opened_total`
/// now, `meshlink_link_flows_active` until the returned guard drops; and
/// its byte counters (to the connector, to the listener).
pub(crate) fn count_flow(core: &Core, routing_key: &str) -> (ActiveFlow, Counter, Counter) {
    let m = &core.metrics;
    let labels = m.key(routing_key);
    m.flows_opened.get_or_create(&labels).inc();
    let active = m.flows_active.get_or_create(&labels).clone();
    active.inc();
    let bytes = |direction| {
        m.flow_bytes
            .get_or_create(&BytesLabels {
                routing_key: routing_key.to_owned(),
                direction,
            })
            .clone()
    };
    let (to_connector, to_listener) = (bytes("to_connector"), bytes("to_listener"));
    core.traffic
        .remember(routing_key, || crate::traffic::KeyCounters {
            opened: m.flows_opened.get_or_create(&labels).clone(),
            active: active.clone(),
            to_connector: to_connector.clone(),
            to_listener: to_listener.clone(),
        });
    (ActiveFlow(active), to_connector, to_listener)
}

impl Drop for ActiveFlow {
    fn drop(&mut self) {
        self.0.dec();
    }
}
