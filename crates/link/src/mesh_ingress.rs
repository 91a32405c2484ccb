//! The mesh ingress: one TCP port on which mesh sidecars open flows to
//! routing keys over mTLS (issue 10 §5, "Mesh to network").
//!
//! Each connection's TLS server name (SNI) selects a routing key and with
//! it the mesh: the router presents its certificate in that mesh and
//! requires a client certificate from the mesh's trust bundle (TLS 1.3,
//! SPIFFE verification, `meshlink_identity::server_config`). The client's
//! SPIFFE ID must be one the configuration allows for the key (default
//! deny). Every refusal closes the connection without a flow, counts
//! `meshlink_link_mesh_ingress_refused_total{reason}` and is logged at
//! most once per [`LOG_INTERVAL`] and reason (with the count since the
//! last line).
//!
//! Owns the accept loop and the table (SNI → key, allowed IDs, TLS
//! config), which `Router::apply` swaps in place: a new certificate or key
//! list applies to the next handshake, connections up stay up. The port
//! stays warming (unbound, named on `/ready`) until every configured mesh
//! has its certificate and trust bundle (I2).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use meshlink_identity::{ClientAuth, IssuedCert, TrustBundle, peer_spiffe_id, server_config};
use rustls::ServerConfig;
use rustls::server::Acceptor;
use tokio::net::TcpStream;
use tokio_rustls::LazyConfigAcceptor;
use tokio_util::sync::CancellationToken;

use crate::config::{MeshIngressConfig, MeshIngressMesh};
use crate::core::{BindKind, Core};
use crate::counted::Counted;
use crate::flows;
use crate::listener;
use crate::metrics::ReasonLabels;
use crate::status::BindStatus;

/// The name the ingress's bind status has among the listeners (a resource
/// name has no `/`, so no Listener collides with it).
pub const MESH_INGRESS_NAME: &str = "mesh-ingress/mtls";

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// At most one refusal log line per interval.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// What one SNI leads to.
pub(crate) struct Entry {
    mesh: String,
    routing_key: String,
    /// Shared, so a connection takes it without copying the set.
    allowed: Arc<BTreeSet<String>>,
    tls: Arc<ServerConfig>,
}

/// SNI → entry, plus why the ingress cannot serve yet (`Some`: warming).
#[derive(Default)]
pub(crate) struct Table {
    by_sni: HashMap<String, Entry>,
    warming: Option<String>,
}

/// Builds the table of `cfg`; a mesh whose credential is missing or
/// unusable makes the ingress warm (the reason names it).
pub(crate) fn table(cfg: &MeshIngressConfig) -> Table {
    let mut out = Table::default();
    for mesh in &cfg.meshes {
        match tls_of(mesh) {
            Ok(tls) => {
                for k in &mesh.keys {
                    out.by_sni.insert(
                        k.sni.clone(),
                        Entry {
                            mesh: mesh.name.clone(),
                            routing_key: k.routing_key.clone(),
                            allowed: Arc::new(k.allowed.iter().cloned().collect()),
                            tls: tls.clone(),
                        },
                    );
                }
            }
            Err(why) => {
                out.warming.get_or_insert(why);
            }
        }
    }
    out
}

fn tls_of(mesh: &MeshIngressMesh) -> Result<Arc<ServerConfig>, String> {
    let Some(pem) = &mesh.credential else {
        return Err(format!(
            "waiting for the router's certificate and trust bundle in mesh {:?}",
            mesh.name
        ));
    };
    let end = "-----END CERTIFICATE-----";
    let split = pem
        .tls_crt
        .find(end)
        .map_or(pem.tls_crt.len(), |i| i + end.len());
    let (leaf, rest) = pem.tls_crt.split_at(split);
    let leaf = IssuedCert {
        cert_pem: leaf.to_owned(),
        chain_pem: if rest.trim().is_empty() {
            Vec::new()
        } else {
            vec![rest.to_owned()]
        },
        serial_hex: String::new(),
        spiffe_id: String::new(),
        not_before: std::time::UNIX_EPOCH,
        not_after: std::time::UNIX_EPOCH,
        ca_fingerprint: String::new(),
    };
    let bundle = TrustBundle::from_pem(&pem.ca_crt)
        .map_err(|e| format!("mesh {:?}: trust bundle: {e}", mesh.name))?;
    server_config(&leaf, &pem.tls_key, &bundle, ClientAuth::Required)
        .map_err(|e| format!("mesh {:?}: {e}", mesh.name))
}

/// Rate-limits the refusal log, per reason.
#[derive(Default)]
pub(crate) struct RefusalLog(Mutex<HashMap<&'static str, (Option<Instant>, u64)>>);

impl RefusalLog {
    /// Counts a refusal; returns how many to report if a line is due.
    fn hit(&self, reason: &'static str) -> Option<u64> {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (last, count) = g.entry(reason).or_default();
        *count += 1;
        let due = last.is_none_or(|t| t.elapsed() >= LOG_INTERVAL);
        due.then(|| {
            *last = Some(Instant::now());
            std::mem::take(count)
        })
    }
}

/// Runs the ingress on `host:port` until `stop` is cancelled.
pub(crate) async fn run(
    core: Arc<Core>,
    host: String,
    port: u16,
    generation: u64,
    stop: CancellationToken,
) {
    let set = |status: Option<BindStatus>| {
        core.update_bind(BindKind::Listener, MESH_INGRESS_NAME, generation, status)
    };
    let mut table = core.mesh_ingress.subscribe();
    let listener = loop {
        let warming = table.borrow_and_update().warming.clone();
        if let Some(why) = warming {
            set(Some(BindStatus::Warming(why)));
            tokio::select! {
                _ = stop.cancelled() => return set(None),
                changed = table.changed() => if changed.is_err() { return },
            }
            continue;
        }
        if let Some(l) = listener::bind_once(&host, port, &set).await {
            break l;
        }
        tokio::select! {
            _ = stop.cancelled() => return set(None),
            _ = tokio::time::sleep(listener::BIND_RETRY) => {}
        }
    };
    if let Ok(addr) = listener.local_addr() {
        set(Some(BindStatus::Bound(addr)));
    }
    listener::accept_until(&listener, &stop, MESH_INGRESS_NAME, |tcp, peer| {
        let core2 = core.clone();
        core.tasks.spawn(async move {
            if let Err((reason, detail)) = serve(&core2, tcp).await {
                refused(&core2, reason, &peer.to_string(), &detail);
            }
        });
    })
    .await;
    set(None);
}

fn refused(core: &Core, reason: &'static str, peer: &str, detail: &str) {
    core.metrics
        .mesh_ingress_refused
        .get_or_create(&ReasonLabels { reason })
        .inc();
    if let Some(count) = core.mesh_ingress_log.hit(reason) {
        tracing::info!(
            reason,
            peer,
            count,
            "mesh ingress refused a connection: {detail}"
        );
    }
}

type Refusal = (&'static str, String);

/// One sidecar connection: pick the entry by SNI, finish the mTLS
/// handshake, authorize the client's SPIFFE ID, open the flow, splice.
async fn serve(core: &Arc<Core>, tcp: TcpStream) -> Result<(), Refusal> {
    let _ = tcp.set_nodelay(true);
    let start = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        LazyConfigAcceptor::new(Acceptor::default(), tcp),
    )
    .await
    .map_err(|_| ("not_tls", "no TLS ClientHello in time".to_owned()))?
    .map_err(|e| ("not_tls", format!("not a TLS ClientHello: {e}")))?;
    let sni = start.client_hello().server_name().map(str::to_owned);
    let (mesh, routing_key, allowed, tls) = {
        let table = core.mesh_ingress.borrow();
        let entry = sni
            .as_deref()
            .and_then(|s| table.by_sni.get(s))
            .ok_or_else(|| {
                (
                    "unknown_sni",
                    format!("server name {sni:?} names no routing key of this ingress"),
                )
            })?;
        (
            entry.mesh.clone(),
            entry.routing_key.clone(),
            entry.allowed.clone(),
            entry.tls.clone(),
        )
    };
    let stream = tokio::time::timeout(HANDSHAKE_TIMEOUT, start.into_stream(tls))
        .await
        .map_err(|_| {
            (
                "handshake",
                format!("mTLS handshake for {routing_key:?} timed out"),
            )
        })?
        .map_err(|e| {
            (
                "handshake",
                format!("mTLS handshake for {routing_key:?} in mesh {mesh:?}: {e}"),
            )
        })?;
    let peer = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(peer_spiffe_id)
        .map(|id| id.to_string());
    if !peer.as_ref().is_some_and(|p| allowed.contains(p)) {
        return Err((
            "not_authorized",
            format!(
                "{} may not open flows to routing key {routing_key:?} (mesh {mesh:?}): only Dataplanes with an outbound to the key may",
                peer.as_deref().unwrap_or("a client without a SPIFFE ID")
            ),
        ));
    }
    let mut flow = flows::open(core, &routing_key, &[])
        .await
        .map_err(|e| ("no_flow", format!("routing key {routing_key:?}: {e}")))?;
    let (active, to_connector, to_listener) = listener::count_flow(core, &routing_key);
    let mut tls = Counted::new(stream, to_connector, to_listener);
    let result = flows::splice(core, &mut tls, &mut flow).await;
    drop(active);
    if let Err(e) = result {
        tracing::debug!(routing_key, error = %e, "mesh ingress flow ended with an error");
    }
    Ok(())
}
