//! A RouterAccess role: bind its port once its server credential exists,
//! accept links, verify each client certificate against the site CA (TLS
//! 1.3 only), and run a session per connection.
//!
//! The server credential is read at every accept, so a rotated credential
//! is presented by the next handshake and connections already up are not
//! touched. A role without its credential stays warming and unbound (I2);
//! a bind error is retried every second, never fatal.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::config::RoleConfig;
use crate::core::{BindKind, Core};
use crate::cork::buffered;
use crate::credentials::leaf_serial;
use crate::identity::router_ids;
use crate::session::{self, SessionInfo};
use crate::status::{BindStatus, Direction, LinkState, LinkStatus};

/// How long a peer may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Wait between bind attempts.
const BIND_RETRY: Duration = Duration::from_secs(1);

/// Runs role `cfg` until `stop` is cancelled; `generation` owns its status.
pub(crate) async fn run_role(
    core: Arc<Core>,
    cfg: RoleConfig,
    generation: u64,
    stop: CancellationToken,
) {
    let warming = |reason: String| {
        core.update_bind(
            BindKind::Role,
            &cfg.name,
            generation,
            Some(BindStatus::Warming(reason)),
        )
    };
    let mut creds = core.credentials.subscribe();
    let listener = loop {
        let has_credential = creds.borrow_and_update().contains_key(&cfg.credential);
        if !has_credential {
            warming(format!(
                "waiting for server credential {:?} (a kubernetes.io/tls Secret)",
                cfg.credential
            ));
            tokio::select! {
                _ = stop.cancelled() => return core.update_bind(BindKind::Role, &cfg.name, generation, None),
                changed = creds.changed() => if changed.is_err() { return },
            }
            continue;
        }
        match TcpListener::bind((cfg.host.as_str(), cfg.port)).await {
            Ok(l) => break l,
            Err(e) => warming(format!(
                "binding {}:{}: {e}; retrying every second",
                cfg.host, cfg.port
            )),
        }
        tokio::select! {
            _ = stop.cancelled() => return core.update_bind(BindKind::Role, &cfg.name, generation, None),
            _ = tokio::time::sleep(BIND_RETRY) => {}
        }
    };
    if let Ok(addr) = listener.local_addr() {
        core.update_bind(
            BindKind::Role,
            &cfg.name,
            generation,
            Some(BindStatus::Bound(addr)),
        );
    }
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            a = listener.accept() => a,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // E.g. out of file descriptors: pause instead of spinning.
                tracing::warn!(role = %cfg.name, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(cred) = creds.borrow().get(&cfg.credential).cloned() else {
            continue;
        };
        let strict = core
            .require_router_identity
            .load(std::sync::atomic::Ordering::Relaxed);
        let acceptor = TlsAcceptor::from(if strict {
            cred.server_config_strict()
        } else {
            cred.server_config()
        });
        core.tasks.spawn(serve(
            core.clone(),
            tcp,
            acceptor,
            cfg.name.clone(),
            stop.child_token(),
        ));
    }
    core.update_bind(BindKind::Role, &cfg.name, generation, None);
}

/// One accepted connection: handshake, then a session named
/// `<role>/<peer router id>`.
async fn serve(
    core: Arc<Core>,
    tcp: TcpStream,
    acceptor: TlsAcceptor,
    role: String,
    stop: CancellationToken,
) {
    let _ = tcp.set_nodelay(true);
    let tls = match timeout(HANDSHAKE_TIMEOUT, acceptor.accept(buffered(tcp))).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) if crate::peer_policy::is_unbound_refusal(&e) => {
            core.metrics
                .peer_identity
                .get_or_create(&crate::metrics::IdentityLabels { result: "refused" })
                .inc();
            return tracing::warn!(
                role,
                "link refused: the client certificate names no router and this site requires \
                 one (meshlink.dev/require-router-identity)"
            );
        }
        Ok(Err(e)) => return tracing::info!(role, error = %e, "link handshake refused"),
        Err(_) => return tracing::info!(role, "link handshake timed out"),
    };
    let peer_certs = tls.get_ref().1.peer_certificates();
    let serial = peer_certs.and_then(leaf_serial);
    let peer_router_ids = peer_certs.map(router_ids).unwrap_or_default();
    let mut named: Option<(String, u64)> = None;
    let info = SessionInfo {
        dialer: false,
        cost: 1,
        name: role.clone(),
        peer_router_ids,
    };
    let ended = session::run(core.clone(), tls, info, stop, |peer| {
        let name = format!("{role}/{}", peer.router);
        core.update_link(
            &name,
            peer.conn,
            || LinkStatus::new(Direction::Accepted, peer.cost),
            |s| {
                s.cost = peer.cost;
                s.state = LinkState::Up;
                s.peer = Some(peer.router.clone());
                s.peer_site = Some(peer.site.clone());
                s.peer_certificate_serial = serial;
                s.connection = peer.conn;
            },
        );
        named = Some((name, peer.conn));
    })
    .await;
    tracing::debug!(role, reason = %ended.reason, "accepted link ended");
    if let Some((name, generation)) = named {
        core.remove_link(&name, generation);
    }
}
