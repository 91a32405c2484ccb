//! One dialled Link: wait for its credential, connect, handshake, run the
//! session, and reconnect with jittered exponential backoff.
//!
//! The credential is read at every dial, so a rotated credential is used by
//! the next handshake and never disturbs the connection that is up. A link
//! without its credential stays warming (I2) and dials as soon as it
//! arrives. Owns the link's status entry (by generation) and removes it
//! when the link is removed.

use std::sync::Arc;
use std::time::Duration;

use meshlink_runtime::backoff::Backoff;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_util::sync::CancellationToken;

use crate::config::LinkConfig;
use crate::connection_end::{ConnectionEnd, SessionEnd};
use crate::core::Core;
use crate::cork::{LinkTcp, buffered};
use crate::credentials::{LinkCredential, leaf_serial};
use crate::identity::router_ids;
use crate::session::{self, SessionInfo};
use crate::status::{Direction, LinkState, LinkStatus};

/// First reconnect delay; doubles up to [`BACKOFF_MAX`], ±20% jitter.
const BACKOFF_INITIAL: Duration = Duration::from_millis(100);
/// Longest reconnect delay (before jitter).
const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// TCP connect and TLS handshake, each.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs link `cfg` until `stop` is cancelled; `generation` owns its status.
pub(crate) async fn run_link(
    core: Arc<Core>,
    cfg: LinkConfig,
    generation: u64,
    stop: CancellationToken,
) {
    let name = cfg.name.clone();
    let init = || LinkStatus::new(Direction::Dialled, cfg.cost);
    let mut backoff = Backoff::new(BACKOFF_INITIAL, BACKOFF_MAX);
    let mut creds = core.credentials.subscribe();
    let mut ever_up = false;
    'outer: loop {
        let cred = loop {
            if let Some(c) = creds.borrow_and_update().get(&cfg.credential).cloned() {
                break c;
            }
            let missing = format!(
                "waiting for credential {:?} (a kubernetes.io/tls Secret)",
                cfg.credential
            );
            core.update_link(&name, generation, init, |s| {
                s.state = LinkState::Warming;
                s.last_error = Some(missing);
            });
            tokio::select! {
                _ = stop.cancelled() => break 'outer,
                changed = creds.changed() => if changed.is_err() { break 'outer },
            }
        };
        core.update_link(&name, generation, init, |s| {
            s.state = LinkState::Connecting;
        });
        let connected = tokio::select! {
            _ = stop.cancelled() => break 'outer,
            c = connect(&cfg, &cred) => c,
        };
        let error = match connected {
            Err(e) => e,
            Ok((tls, serial, peer_router_ids)) => {
                let mut up = false;
                let info = SessionInfo {
                    dialer: true,
                    cost: cfg.cost,
                    name: name.clone(),
                    peer_router_ids,
                };
                let reason = session::run(core.clone(), tls, info, stop.clone(), |peer| {
                    up = true;
                    let reconnected = ever_up;
                    if reconnected {
                        core.metrics
                            .reconnects
                            .get_or_create(&core.metrics.link(&name))
                            .inc();
                    }
                    core.update_link(&name, generation, init, |s| {
                        s.state = LinkState::Up;
                        s.peer = Some(peer.router.clone());
                        s.peer_site = Some(peer.site.clone());
                        s.peer_certificate_serial = serial;
                        s.connection = peer.conn;
                        s.last_error = None;
                        s.reconnects += u64::from(reconnected);
                    });
                })
                .await;
                if up {
                    ever_up = true;
                    backoff.reset();
                    reason.reason
                } else {
                    closed_before_hello(reason)
                }
            }
        };
        if stop.is_cancelled() {
            break;
        }
        tracing::debug!(link = %name, error = %error, "link down");
        core.update_link(&name, generation, init, |s| {
            s.state = LinkState::Down;
            s.last_error = Some(error);
        });
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(backoff.next_delay()) => {}
        }
    }
    core.remove_link(&name, generation);
}

/// Explains a session that broke before the peer's hello: the peer's
/// `access_denied` alert (it requires link certificates that name a
/// router), or a reset or broken pipe (in TLS 1.3 the server checks the
/// client certificate after the client's side of the handshake is done,
/// so a refused certificate can reach the dialer as a closed connection
/// instead of an alert). Decided by the typed end, never the words.
fn closed_before_hello(session: SessionEnd) -> String {
    let reason = session.reason;
    match session.end {
        ConnectionEnd::AccessDenied => {
            format!("{reason}: {}", crate::peer_policy::UNBOUND_REFUSED)
        }
        ConnectionEnd::Reset => format!(
            "{reason}: the peer closed the connection right after the TLS handshake, before its hello; \
             it most likely refused this link's client certificate (check that the Link's credential \
             was issued by the other site's CA)"
        ),
        ConnectionEnd::Other => reason,
    }
}

/// TCP connect and TLS handshake; returns the stream, the serial of the
/// server's certificate and the router ids it names.
async fn connect(
    cfg: &LinkConfig,
    cred: &LinkCredential,
) -> Result<(TlsStream<LinkTcp>, Option<String>, Vec<String>), String> {
    let at = format!("{}:{}", cfg.host, cfg.port);
    let server_name = ServerName::try_from(cfg.host.clone())
        .map_err(|e| format!("host {:?} is not a DNS name or IP address: {e}", cfg.host))?;
    let tcp = match timeout(
        HANDSHAKE_TIMEOUT,
        TcpStream::connect((cfg.host.as_str(), cfg.port)),
    )
    .await
    {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(e)) => return Err(format!("connecting to {at}: {e}")),
        Err(_) => return Err(format!("connecting to {at}: no answer within 5s")),
    };
    let _ = tcp.set_nodelay(true);
    let connector = TlsConnector::from(cred.client_config());
    let tls = match timeout(
        HANDSHAKE_TIMEOUT,
        connector.connect(server_name, buffered(tcp)),
    )
    .await
    {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => return Err(format!("TLS handshake with {at}: {e}")),
        Err(_) => return Err(format!("TLS handshake with {at}: no answer within 5s")),
    };
    let peer_certs = tls.get_ref().1.peer_certificates();
    let serial = peer_certs.and_then(leaf_serial);
    let ids = peer_certs.map(router_ids).unwrap_or_default();
    Ok((tls, serial, ids))
}

#[cfg(test)]
mod closed_before_hello_tests {
    use super::closed_before_hello;
    use crate::connection_end::{ConnectionEnd, SessionEnd};

    fn end(reason: &str, end: ConnectionEnd) -> SessionEnd {
        SessionEnd {
            reason: reason.into(),
            end,
        }
    }

    #[test]
    fn a_reset_or_a_denial_before_the_hello_names_the_likely_refused_certificate() {
        let e = closed_before_hello(end("link failed: i/o error", ConnectionEnd::Reset));
        assert!(e.contains("refused this link's client certificate"), "{e}");
        let e = closed_before_hello(end("link failed: alert", ConnectionEnd::AccessDenied));
        assert!(e.ends_with(crate::peer_policy::UNBOUND_REFUSED), "{e}");
        // The words do not decide: a reason that only says "reset" is left alone.
        let other =
            closed_before_hello(end("connection reset; AccessDenied", ConnectionEnd::Other));
        assert_eq!(other, "connection reset; AccessDenied");
    }
}
