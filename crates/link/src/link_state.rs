//! Drives the link-state routing module ([`crate::routing`]) from the
//! transport: neighbours coming and going, LSAs received, local services
//! changing; sends what it returns (floods, replies, the initial sync) on
//! the neighbours' control streams, and publishes the route table.
//!
//! The `LinkStateRouter` and the neighbour connections sit behind one
//! short synchronous lock: every call does its routing work and queues its
//! messages (unbounded control channels, so nothing is dropped) without
//! awaiting. Only a session adds or removes its own neighbour connection,
//! by connection id. Flows ask it for a destination and a next hop.

use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, watch};

use crate::metrics::LinkMetrics;
use crate::mux::MuxOpener;
use crate::routes::{Destination as TableDestination, RouteTable};
use crate::routing::{
    Destination, Hello, LinkAdvert, LinkDirection, LinkStateRouter, Lsa, LsaError, NetworkView,
    RouterId, RouterInfo, ServiceAdvert, Update,
};
use crate::wire::ControlMessage;

/// One established connection to a neighbour.
#[derive(Clone, Debug)]
pub(crate) struct PeerConn {
    pub(crate) conn: u64,
    pub(crate) router: String,
    pub(crate) site: String,
    /// The link's name here: the Link's, or `<role>/<peer>` when accepted.
    pub(crate) name: String,
    pub(crate) cost: u32,
    pub(crate) direction: LinkDirection,
    pub(crate) opener: MuxOpener,
    pub(crate) control: mpsc::UnboundedSender<ControlMessage>,
}

struct Inner {
    lsr: LinkStateRouter,
    peers: Vec<PeerConn>,
    counted_changes: u64,
}

/// The routing state of one router, shared by its sessions and flows.
pub(crate) struct Routing {
    inner: Mutex<Inner>,
    pub(crate) routes: watch::Sender<Arc<RouteTable>>,
    metrics: Arc<LinkMetrics>,
}

// === impl Routing ===

impl Routing {
    /// `incarnation` must grow from one start of this router to the next.
    pub(crate) fn new(
        me: RouterInfo,
        incarnation: u64,
        metrics: Arc<LinkMetrics>,
    ) -> Result<Self, LsaError> {
        Ok(Routing {
            inner: Mutex::new(Inner {
                lsr: LinkStateRouter::new(me, incarnation)?,
                peers: Vec::new(),
                counted_changes: 0,
            }),
            routes: watch::Sender::new(Arc::new(RouteTable::default())),
            metrics,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("routing lock poisoned")
    }

    /// The routing hello this router sends on every link.
    pub(crate) fn hello(&self) -> Hello {
        self.lock().lsr.hello()
    }

    /// A neighbour's first hello arrived on `peer.conn`: check it, add the
    /// link, flood the new LSA and send the neighbour the whole database.
    pub(crate) fn peer_up(&self, peer: PeerConn, hello: &Hello) -> Result<(), String> {
        let mut inner = self.lock();
        inner
            .lsr
            .check_neighbour(hello)
            .map_err(|e| e.to_string())?;
        if hello.router.id.as_str() != peer.router {
            return Err(format!(
                "the routing hello names router {:?}, the link hello {:?}",
                hello.router.id.as_str(),
                peer.router
            ));
        }
        let control = peer.control.clone();
        inner.peers.retain(|p| p.conn != peer.conn);
        inner.peers.push(peer);
        self.relink(&mut inner);
        for lsa in inner.lsr.sync_lsas() {
            let _ = control.send(routing_message(&lsa));
        }
        Ok(())
    }

    /// The connection `conn` ended: drop its link if it was the last one
    /// to that neighbour, flood, republish.
    pub(crate) fn peer_down(&self, conn: u64) {
        let mut inner = self.lock();
        let before = inner.peers.len();
        inner.peers.retain(|p| p.conn != conn);
        if inner.peers.len() != before {
            self.relink(&mut inner);
        }
    }

    /// A routing message from the neighbour on connection `conn`.
    pub(crate) fn received(&self, conn: u64, payload: serde_json::Value) {
        let lsa: Lsa = match serde_json::from_value(payload) {
            Ok(lsa) => lsa,
            Err(e) => return tracing::debug!(conn, error = %e, "malformed routing message"),
        };
        let mut inner = self.lock();
        match inner.lsr.receive(lsa) {
            Ok(r) => {
                if let Some(lsa) = &r.flood {
                    flood(&inner.peers, lsa, Some(conn));
                }
                if let (Some(lsa), Some(p)) =
                    (&r.reply, inner.peers.iter().find(|p| p.conn == conn))
                {
                    let _ = p.control.send(routing_message(lsa));
                }
                self.publish(&mut inner);
            }
            Err(e) => tracing::debug!(conn, error = %e, "routing message refused"),
        }
    }

    /// This router's connectors and listeners changed.
    pub(crate) fn set_services(&self, services: Vec<ServiceAdvert>) {
        let mut inner = self.lock();
        match inner.lsr.set_services(services) {
            Ok(update) => self.apply_update(&mut inner, update),
            Err(e) => tracing::warn!(error = %e, "local routing keys refused"),
        }
    }

    /// Forgets routers that stayed unreachable (call every ~30 s).
    pub(crate) fn sweep(&self) {
        let mut inner = self.lock();
        if !inner.lsr.sweep().is_empty() {
            self.publish(&mut inner);
        }
    }

    /// A destination for a new flow to `key` (balanced, failing over past
    /// `excluded`).
    pub(crate) fn pick(&self, key: &str, excluded: &[RouterId]) -> Option<Destination> {
        self.lock().lsr.pick_excluding(key, excluded)
    }

    /// Whether some reachable router (this one included) has a connector
    /// for `key`.
    pub(crate) fn has_destination(&self, key: &str) -> bool {
        !self.lock().lsr.destinations(key).is_empty()
    }

    /// The connection to the next hop towards router `dest`.
    pub(crate) fn next_hop(&self, dest: &str) -> Option<PeerConn> {
        let inner = self.lock();
        let hop = inner.lsr.route(&RouterId::from(dest))?.next_hop.clone();
        cheapest(&inner.peers, hop.as_str()).cloned()
    }

    /// The network as this router sees it.
    pub(crate) fn network_view(&self) -> NetworkView {
        self.lock().lsr.network_view()
    }

    /// Re-advertises this router's links (one per neighbour: its cheapest
    /// connection) after a connection came or went.
    fn relink(&self, inner: &mut Inner) {
        let mut links: Vec<LinkAdvert> = Vec::new();
        for p in &inner.peers {
            let best = cheapest(&inner.peers, &p.router).expect("p is in peers");
            if best.conn == p.conn {
                links.push(LinkAdvert {
                    name: p.name.clone(),
                    peer: RouterId::from(p.router.as_str()),
                    peer_name: p.site.clone(),
                    cost: p.cost,
                    direction: p.direction,
                });
            }
        }
        match inner.lsr.set_links(links) {
            Ok(update) => self.apply_update(inner, update),
            Err(e) => tracing::warn!(error = %e, "own links refused by routing"),
        }
    }

    fn apply_update(&self, inner: &mut Inner, update: Update) {
        if let Some(lsa) = &update.flood {
            flood(&inner.peers, lsa, None);
        }
        self.publish(inner);
    }

    /// Publishes the route table if it changed, and counts route changes.
    fn publish(&self, inner: &mut Inner) {
        let lsr = &inner.lsr;
        let destinations = lsr
            .routing_keys()
            .map(|key| {
                let dests = lsr
                    .destinations(key)
                    .iter()
                    .map(|d| TableDestination {
                        router: d.router.as_str().to_owned(),
                        cost: d.cost,
                    })
                    .collect();
                (key.to_owned(), dests)
            })
            .collect();
        let next_hop = lsr
            .routes()
            .iter()
            .map(|(to, r)| (to.as_str().to_owned(), r.next_hop.as_str().to_owned()))
            .collect();
        let table = RouteTable {
            destinations,
            next_hop,
        };
        self.routes.send_if_modified(|current| {
            let changed = **current != table;
            if changed {
                *current = Arc::new(table);
            }
            changed
        });
        let total = lsr.route_changes();
        self.metrics
            .route_changes
            .inc_by(total.saturating_sub(inner.counted_changes));
        inner.counted_changes = total;
    }
}

/// The cheapest (then oldest) connection to neighbour `router`.
fn cheapest<'a>(peers: &'a [PeerConn], router: &str) -> Option<&'a PeerConn> {
    peers
        .iter()
        .filter(|p| p.router == router)
        .min_by_key(|p| (p.cost, p.conn))
}

/// Sends `lsa` to every neighbour (its cheapest connection) except the
/// one on connection `except`.
fn flood(peers: &[PeerConn], lsa: &Lsa, except: Option<u64>) {
    let skip = except.and_then(|c| peers.iter().find(|p| p.conn == c).map(|p| &p.router));
    for p in peers {
        if Some(&p.router) == skip || cheapest(peers, &p.router).map(|b| b.conn) != Some(p.conn) {
            continue;
        }
        let _ = p.control.send(routing_message(lsa));
    }
}

fn routing_message(lsa: &Lsa) -> ControlMessage {
    ControlMessage::Routing {
        payload: serde_json::to_value(lsa).expect("an LSA always serializes"),
    }
}
