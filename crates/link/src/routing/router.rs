//! [`LinkStateRouter`]: the routing state one router keeps, and the only
//! type the transport drives.
//!
//! It owns this router's LSA (re-originated when its links or routing
//! keys change), the database of everybody else's, the routes computed
//! from them, and the flow picker. Every call is synchronous and does no
//! I/O: the transport sends what the returned values say.
//!
//! Flooding contract for the transport:
//! - when a link comes up, exchange [`Hello`]s, check the peer with
//!   [`LinkStateRouter::check_neighbour`], add the link with
//!   [`LinkStateRouter::set_links`], then send the peer every LSA of
//!   [`LinkStateRouter::sync_lsas`] on the link's ordered control stream;
//! - send [`Update::flood`] to every neighbour;
//! - send [`Received::flood`] to every neighbour but the sender, and
//!   [`Received::reply`] to the sender;
//! - call [`LinkStateRouter::sweep`] now and then (every 30 s or so) to
//!   forget routers that left.
//!
//! An edge router floods only its own LSA and syncs only its own LSA, so
//! no advertisement (and no route) ever passes through an edge router.

use std::collections::BTreeMap;

use super::error::{AdjacencyError, LsaError};
use super::lsdb::{LinkStateDb, Offer};
use super::picker::Picker;
use super::spf::{self, Graph, Route};
use super::table::{Destination, RouteDiff, RoutingTable};
use super::view::NetworkView;
use super::wire::{
    Hello, LinkAdvert, Lsa, PROTOCOL_VERSION, RouterId, RouterInfo, ServiceAdvert, Version,
};

/// What changing this router's own links or routing keys did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[must_use = "the new LSA must be flooded to every neighbour"]
pub struct Update {
    /// This router's new LSA, to send to every neighbour; `None` when
    /// nothing changed.
    pub flood: Option<Lsa>,
    /// The route changes.
    pub diff: RouteDiff,
}

/// What [`LinkStateRouter::receive`] found an LSA to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceivedKind {
    /// Newer than what this router held (or the first from its origin).
    Installed,
    /// The version this router holds already: ignored, not flooded on.
    Duplicate,
    /// Older than what this router holds: ignored, and the newer one goes
    /// back to the sender.
    Stale,
    /// A copy of this router's own LSA from an earlier life, newer than
    /// the current one: this router re-originated above it.
    Reoriginated,
}

/// What to do after [`LinkStateRouter::receive`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "flood and reply must be sent"]
pub struct Received {
    /// What the LSA was.
    pub kind: ReceivedKind,
    /// Send to every neighbour except the one it came from.
    pub flood: Option<Lsa>,
    /// Send back to the neighbour it came from.
    pub reply: Option<Lsa>,
    /// The route changes.
    pub diff: RouteDiff,
}

/// One router's link-state routing: its LSA, the database, the routes,
/// the key destinations and the flow picker.
#[derive(Debug, Clone)]
pub struct LinkStateRouter {
    me: RouterInfo,
    db: LinkStateDb,
    graph: Graph,
    table: RoutingTable,
    picker: Picker,
    route_changes: u64,
}

impl LinkStateRouter {
    /// The routing state of a router that has just started, with no links
    /// and no routing keys yet. `incarnation` must grow from one start to
    /// the next (the boot time in milliseconds since the Unix epoch).
    pub fn new(me: RouterInfo, incarnation: u64) -> Result<Self, LsaError> {
        me.validate()?;
        let own = Lsa {
            v: PROTOCOL_VERSION,
            origin: me.clone(),
            version: Version {
                incarnation,
                seq: 1,
            },
            links: Vec::new(),
            services: Vec::new(),
        };
        let db = LinkStateDb::new(own);
        Ok(Self {
            me,
            graph: spf::graph(&db),
            db,
            table: RoutingTable::default(),
            picker: Picker::default(),
            route_changes: 0,
        })
    }

    /// Who this router is.
    pub fn me(&self) -> &RouterInfo {
        &self.me
    }

    /// The hello this router sends on a new link.
    pub fn hello(&self) -> Hello {
        Hello::new(self.me.clone(), self.own_lsa().version.incarnation)
    }

    /// This router's current LSA.
    pub fn own_lsa(&self) -> &Lsa {
        self.db.own()
    }

    /// Whether the router that sent `hello` may be linked to: refuses a
    /// bad hello, a link back to this router, and a link between two edge
    /// routers.
    pub fn check_neighbour(&self, hello: &Hello) -> Result<(), AdjacencyError> {
        hello.validate()?;
        if hello.router.id == self.me.id {
            return Err(AdjacencyError::SelfLink(self.me.id.clone()));
        }
        if hello.router.edge && self.me.edge {
            return Err(AdjacencyError::EdgeToEdge {
                me: self.me.id.clone(),
                peer: hello.router.id.clone(),
            });
        }
        Ok(())
    }

    /// Sets this router's operational links (all of them). Re-originates
    /// its LSA if they changed.
    pub fn set_links(&mut self, mut links: Vec<LinkAdvert>) -> Result<Update, LsaError> {
        links.sort_by(|a, b| a.peer.cmp(&b.peer));
        let own = self.db.own();
        let candidate = Lsa {
            links,
            ..own.clone()
        };
        self.reoriginate(candidate)
    }

    /// Sets the routing keys this router has connectors or listeners for
    /// (all of them). Re-originates its LSA if they changed.
    pub fn set_services(&mut self, mut services: Vec<ServiceAdvert>) -> Result<Update, LsaError> {
        services.sort_by(|a, b| a.routing_key.cmp(&b.routing_key));
        let own = self.db.own();
        let candidate = Lsa {
            services,
            ..own.clone()
        };
        self.reoriginate(candidate)
    }

    /// Takes an LSA a neighbour sent. An error leaves everything as it was.
    pub fn receive(&mut self, lsa: Lsa) -> Result<Received, LsaError> {
        lsa.validate()?;
        let nothing = |kind| Received {
            kind,
            flood: None,
            reply: None,
            diff: RouteDiff::default(),
        };
        if lsa.origin.id == self.me.id {
            let own = self.db.own();
            if lsa.version < own.version {
                return Ok(Received {
                    reply: Some(own.clone()),
                    ..nothing(ReceivedKind::Stale)
                });
            }
            if &lsa == own {
                return Ok(nothing(ReceivedKind::Duplicate));
            }
            // Our own LSA from an earlier life (or one with our id and
            // other content): take a version above both and flood it.
            let newer = lsa.version.max(own.version);
            let mut own = own.clone();
            own.version = Version {
                incarnation: newer.incarnation,
                seq: newer.seq + 1,
            };
            self.db.set_own(own.clone());
            return Ok(Received {
                kind: ReceivedKind::Reoriginated,
                flood: Some(own.clone()),
                reply: Some(own),
                diff: RouteDiff::default(),
            });
        }
        let flood = (!self.me.edge).then(|| lsa.clone());
        match self.db.offer(lsa) {
            Offer::Duplicate => Ok(nothing(ReceivedKind::Duplicate)),
            Offer::Stale(newer) => Ok(Received {
                reply: Some(*newer),
                ..nothing(ReceivedKind::Stale)
            }),
            Offer::Installed => Ok(Received {
                kind: ReceivedKind::Installed,
                flood,
                reply: None,
                diff: self.recompute(),
            }),
        }
    }

    /// The LSAs to send a neighbour when a link comes up: this router's own
    /// and, unless it is an edge router, every other one it holds. Those of
    /// routers it cannot reach go too: the LSA that makes them reachable
    /// may still be on its way, and nothing would send them again.
    pub fn sync_lsas(&self) -> Vec<Lsa> {
        if self.me.edge {
            return vec![self.db.own().clone()];
        }
        let own = self.db.own();
        std::iter::once(own)
            .chain(self.db.lsas().filter(|lsa| lsa.origin.id != own.origin.id))
            .cloned()
            .collect()
    }

    /// Forgets routers that were unreachable at the previous sweep and
    /// still are; returns their ids. Unreachable routers never appear in
    /// routes or the view, swept or not: this only bounds memory.
    pub fn sweep(&mut self) -> Vec<RouterId> {
        let reachable = self.table.routes.keys().cloned().collect();
        let dropped = self.db.sweep(&reachable);
        if !dropped.is_empty() {
            self.graph = spf::graph(&self.db);
        }
        dropped
    }

    /// The route to `router`, if reachable (`None` for this router).
    pub fn route(&self, router: &RouterId) -> Option<&Route> {
        self.table.routes.get(router)
    }

    /// Every reachable router (this one excluded) and its route.
    pub fn routes(&self) -> &BTreeMap<RouterId, Route> {
        &self.table.routes
    }

    /// The routers with connectors for `key`, cheapest first (this router
    /// at cost 0 if it has some), then by router id.
    pub fn destinations(&self, key: &str) -> &[Destination] {
        self.table.keys.get(key).map_or(&[], Vec::as_slice)
    }

    /// Every routing key with at least one reachable connector.
    pub fn routing_keys(&self) -> impl Iterator<Item = &str> {
        self.table.keys.keys().map(String::as_str)
    }

    /// The destination for a new flow to `key`: balanced over the
    /// cheapest destinations by connector count; `None` if no reachable
    /// router has a connector for it.
    pub fn pick(&mut self, key: &str) -> Option<Destination> {
        self.pick_excluding(key, &[])
    }

    /// Like [`Self::pick`], skipping `excluded` (destinations a flow just
    /// failed to reach), so the flow fails over to the next cheapest.
    pub fn pick_excluding(&mut self, key: &str, excluded: &[RouterId]) -> Option<Destination> {
        let destinations = self.table.keys.get(key)?;
        self.picker.pick(key, destinations, excluded)
    }

    /// The network as this router sees it, for status.
    pub fn network_view(&self) -> NetworkView {
        NetworkView::new(&self.db, &self.graph, &self.table.routes)
    }

    /// Route changes since start: the sum of the entries (routers and
    /// routing keys) of every [`RouteDiff`] returned so far.
    pub fn route_changes(&self) -> u64 {
        self.route_changes
    }

    /// How many LSAs the database holds, unreachable ones included.
    pub fn database_len(&self) -> usize {
        self.db.len()
    }

    fn reoriginate(&mut self, mut candidate: Lsa) -> Result<Update, LsaError> {
        let own = self.db.own();
        if candidate.links == own.links && candidate.services == own.services {
            return Ok(Update::default());
        }
        candidate.version.seq = own.version.seq + 1;
        candidate.validate()?;
        self.db.set_own(candidate.clone());
        Ok(Update {
            flood: Some(candidate),
            diff: self.recompute(),
        })
    }

    fn recompute(&mut self) -> RouteDiff {
        self.graph = spf::graph(&self.db);
        let db = &self.db;
        let routes = spf::shortest_paths(&self.graph, &self.me.id, |id| {
            db.get(id).is_some_and(|lsa| lsa.origin.edge)
        });
        let table = RoutingTable::new(&self.db, routes);
        let diff = table.diff(&self.table);
        self.table = table;
        self.picker.retain(&self.table);
        self.route_changes += (diff.routes.len() + diff.keys.len()) as u64;
        diff
    }
}
