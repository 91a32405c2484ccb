//! An in-memory network of [`LinkStateRouter`]s for tests: links are
//! per-direction FIFO queues (as a link's ordered control stream is), and
//! the simulator does exactly what the flooding contract asks of the
//! transport. Delivery order across links is chosen by the test.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::routing::{
    AdjacencyError, LinkAdvert, LinkDirection, LinkStateRouter, Lsa, Received, RouterId,
    RouterInfo, ServiceAdvert, Update,
};

/// A link's two ends, the smaller id first.
pub(super) type LinkKey = (RouterId, RouterId);

/// The network under test.
#[derive(Default)]
pub(super) struct Sim {
    pub(super) routers: BTreeMap<RouterId, LinkStateRouter>,
    infos: BTreeMap<RouterId, RouterInfo>,
    services: BTreeMap<RouterId, Vec<ServiceAdvert>>,
    incarnations: BTreeMap<RouterId, u64>,
    /// Links that are up, with their cost.
    pub(super) links: BTreeMap<LinkKey, u32>,
    /// Links only one end advertises: (advertiser, peer) -> cost.
    pub(super) one_way: BTreeMap<(RouterId, RouterId), u32>,
    queues: BTreeMap<(RouterId, RouterId), VecDeque<Lsa>>,
    /// Every LSA ever sent, with its sender and the sender's incarnation
    /// then, for replays.
    pub(super) sent: Vec<(RouterId, u64, Lsa)>,
    /// Every [`Received`] kind seen, for assertions.
    pub(super) received: Vec<(RouterId, Received)>,
}

pub(super) fn key(a: &RouterId, b: &RouterId) -> LinkKey {
    if a < b {
        (a.clone(), b.clone())
    } else {
        (b.clone(), a.clone())
    }
}

impl Sim {
    /// Adds a router (interior unless `edge`), named after its id.
    pub(super) fn add(&mut self, id: &str, edge: bool) {
        let info = RouterInfo::new(id, format!("site-{id}"), edge);
        let incarnation = self.incarnations.entry(info.id.clone()).or_insert(0);
        *incarnation += 1;
        let router = LinkStateRouter::new(info.clone(), *incarnation).expect("valid router");
        self.routers.insert(info.id.clone(), router);
        self.infos.insert(info.id.clone(), info);
    }

    /// The router `id`.
    pub(super) fn router(&self, id: &str) -> &LinkStateRouter {
        &self.routers[&RouterId::from(id)]
    }

    /// Mutable access to the router `id`.
    pub(super) fn router_mut(&mut self, id: &str) -> &mut LinkStateRouter {
        self.routers
            .get_mut(&RouterId::from(id))
            .expect("router exists")
    }

    /// Sets the connectors (`count` per key) of router `id`.
    pub(super) fn set_connectors(&mut self, id: &str, keys: &[(&str, usize)]) {
        let services = keys
            .iter()
            .map(|(key, count)| ServiceAdvert {
                routing_key: (*key).to_owned(),
                connectors: (0..*count).map(|i| format!("{key}-{id}-{i}")).collect(),
                listeners: Vec::new(),
            })
            .collect();
        self.set_services(&RouterId::from(id), services);
    }

    pub(super) fn set_services(&mut self, id: &RouterId, services: Vec<ServiceAdvert>) {
        self.services.insert(id.clone(), services.clone());
        let update = self
            .routers
            .get_mut(id)
            .expect("router")
            .set_services(services);
        self.flood_update(id, update.expect("valid services"));
    }

    /// Brings a link up: hellos, both ends add it, then each syncs the other.
    pub(super) fn link_up(&mut self, a: &str, b: &str, cost: u32) -> Result<(), AdjacencyError> {
        let (a, b) = (RouterId::from(a), RouterId::from(b));
        let hello_a = self.routers[&a].hello();
        let hello_b = self.routers[&b].hello();
        self.routers[&a].check_neighbour(&hello_b)?;
        self.routers[&b].check_neighbour(&hello_a)?;
        assert!(
            !self.one_way.contains_key(&(a.clone(), b.clone()))
                && !self.one_way.contains_key(&(b.clone(), a.clone())),
            "{a}-{b} is a one-way connection"
        );
        self.links.insert(key(&a, &b), cost);
        self.readvertise(&a);
        self.readvertise(&b);
        self.sync(&a, &b);
        Ok(())
    }

    /// Takes a link down: messages in flight on it are lost.
    pub(super) fn link_down(&mut self, a: &RouterId, b: &RouterId) {
        if self.links.remove(&key(a, b)).is_none() {
            return;
        }
        self.queues.remove(&(a.clone(), b.clone()));
        self.queues.remove(&(b.clone(), a.clone()));
        self.readvertise(a);
        self.readvertise(b);
    }

    /// Opens a connection between `advertiser` and `peer` that carries
    /// messages but that only `advertiser` advertises as a link. The pair
    /// must have no two-way link.
    pub(super) fn one_way_link(&mut self, advertiser: &str, peer: &str, cost: u32) {
        let (a, b) = (RouterId::from(advertiser), RouterId::from(peer));
        assert!(
            !self.links.contains_key(&key(&a, &b)),
            "{a}-{b} is a two-way link"
        );
        self.one_way.insert((a.clone(), b.clone()), cost);
        self.readvertise(&a);
        self.sync(&a, &b);
    }

    fn sync(&mut self, a: &RouterId, b: &RouterId) {
        for (from, to) in [(a, b), (b, a)] {
            for lsa in self.routers[from].sync_lsas() {
                self.send(from, to, lsa);
            }
        }
    }

    /// Restarts router `id`: its links drop, it comes back empty with a new
    /// incarnation and its old connectors, and its links come up again.
    pub(super) fn restart(&mut self, id: &RouterId) {
        let links: Vec<(LinkKey, u32)> = self
            .links
            .iter()
            .filter(|((a, b), _)| a == id || b == id)
            .map(|(k, c)| (k.clone(), *c))
            .collect();
        for ((a, b), _) in &links {
            self.link_down(a, b);
        }
        let one_way: Vec<(RouterId, RouterId)> = self
            .one_way
            .keys()
            .filter(|(a, b)| a == id || b == id)
            .cloned()
            .collect();
        for (a, b) in &one_way {
            self.queues.remove(&(a.clone(), b.clone()));
            self.queues.remove(&(b.clone(), a.clone()));
        }
        let info = self.infos[id].clone();
        self.add(&info.id.0, info.edge);
        if let Some(services) = self.services.get(id).cloned() {
            self.set_services(id, services);
        }
        for ((a, b), cost) in links {
            self.link_up(&a.0, &b.0, cost)
                .expect("the link was allowed before");
        }
        for (a, b) in &one_way {
            self.readvertise(a);
            self.sync(a, b);
        }
    }

    /// The routers `id` exchanges messages with: two-way links and
    /// one-way connections.
    pub(super) fn neighbours(&self, id: &RouterId) -> Vec<RouterId> {
        self.linked(id)
            .into_iter()
            .chain(self.one_way.keys().filter_map(|(a, b)| match () {
                () if a == id => Some(b.clone()),
                () if b == id => Some(a.clone()),
                () => None,
            }))
            .collect()
    }

    /// The routers `id` has two-way links with.
    fn linked(&self, id: &RouterId) -> Vec<RouterId> {
        self.links
            .keys()
            .filter_map(|(a, b)| match () {
                () if a == id => Some(b.clone()),
                () if b == id => Some(a.clone()),
                () => None,
            })
            .collect()
    }

    /// Queues an LSA on the link `from` -> `to`.
    pub(super) fn send(&mut self, from: &RouterId, to: &RouterId, lsa: Lsa) {
        let incarnation = self.incarnations[from];
        self.sent.push((from.clone(), incarnation, lsa.clone()));
        self.queues
            .entry((from.clone(), to.clone()))
            .or_default()
            .push_back(lsa);
    }

    /// Links with messages waiting.
    pub(super) fn busy(&self) -> Vec<(RouterId, RouterId)> {
        self.queues
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Delivers the oldest message on link `from` -> `to` and sends what
    /// the receiver says to send.
    pub(super) fn deliver(&mut self, from: &RouterId, to: &RouterId) {
        let Some(lsa) = self
            .queues
            .get_mut(&(from.clone(), to.clone()))
            .and_then(VecDeque::pop_front)
        else {
            return;
        };
        let received = self
            .routers
            .get_mut(to)
            .expect("router")
            .receive(lsa)
            .expect("valid LSA");
        if let Some(flood) = &received.flood {
            for n in self.neighbours(to) {
                if &n != from {
                    self.send(to, &n, flood.clone());
                }
            }
        }
        if let Some(reply) = &received.reply {
            self.send(to, from, reply.clone());
        }
        self.received.push((to.clone(), received));
    }

    /// Delivers until every queue is empty, choosing the link each time
    /// with `choose(number of busy links)`. Returns the messages delivered.
    pub(super) fn run(&mut self, mut choose: impl FnMut(usize) -> usize) -> usize {
        let mut delivered = 0;
        loop {
            let busy = self.busy();
            if busy.is_empty() {
                return delivered;
            }
            assert!(delivered < 1_000_000, "flooding does not quiet down");
            let (from, to) = &busy[choose(busy.len()) % busy.len()];
            self.deliver(from, to);
            delivered += 1;
        }
    }

    /// Delivers in a fixed order until quiet.
    pub(super) fn settle(&mut self) -> usize {
        self.run(|_| 0)
    }

    /// The LSAs `from` has sent in its current life.
    pub(super) fn sent_by(&self, from: &RouterId) -> Vec<Lsa> {
        let incarnation = self.incarnations[from];
        self.sent
            .iter()
            .filter(|(sender, inc, _)| sender == from && *inc == incarnation)
            .map(|(_, _, lsa)| lsa.clone())
            .collect()
    }

    /// Sweeps every router twice (what two sweep periods do).
    pub(super) fn sweep_all(&mut self) {
        for _ in 0..2 {
            for router in self.routers.values_mut() {
                router.sweep();
            }
        }
    }

    /// Re-advertises the links of `id` from the simulator's truth.
    fn readvertise(&mut self, id: &RouterId) {
        let mut adverts: Vec<LinkAdvert> = self
            .linked(id)
            .into_iter()
            .map(|peer| {
                let cost = self.links[&key(id, &peer)];
                advert(id, &peer, &self.infos[&peer].name, cost)
            })
            .collect();
        for ((advertiser, peer), cost) in &self.one_way {
            if advertiser == id {
                adverts.push(advert(id, peer, &self.infos[peer].name, *cost));
            }
        }
        let update = self.routers.get_mut(id).expect("router").set_links(adverts);
        self.flood_update(id, update.expect("valid links"));
    }

    fn flood_update(&mut self, id: &RouterId, update: Update) {
        if let Some(lsa) = update.flood {
            for n in self.neighbours(id) {
                self.send(id, &n, lsa.clone());
            }
        }
    }
}

fn advert(me: &RouterId, peer: &RouterId, peer_name: &str, cost: u32) -> LinkAdvert {
    let (dialer, acceptor) = if me < peer { (me, peer) } else { (peer, me) };
    LinkAdvert {
        name: format!("{dialer}-to-{acceptor}"),
        peer: peer.clone(),
        peer_name: peer_name.to_owned(),
        cost,
        direction: if me == dialer {
            LinkDirection::Outgoing
        } else {
            LinkDirection::Incoming
        },
    }
}

/// The reference distances: Floyd–Warshall over the up links, where only
/// interior routers may be intermediate. `dist[a][b]` is absent when `b`
/// is unreachable from `a`.
pub(super) fn reference_distances(sim: &Sim) -> BTreeMap<RouterId, BTreeMap<RouterId, u64>> {
    let ids: Vec<RouterId> = sim.routers.keys().cloned().collect();
    let edge: BTreeSet<RouterId> = sim
        .routers
        .iter()
        .filter(|(_, r)| r.me().edge)
        .map(|(id, _)| id.clone())
        .collect();
    let mut dist: BTreeMap<RouterId, BTreeMap<RouterId, u64>> = BTreeMap::new();
    for id in &ids {
        dist.entry(id.clone()).or_default().insert(id.clone(), 0);
    }
    for ((a, b), cost) in &sim.links {
        dist.entry(a.clone())
            .or_default()
            .insert(b.clone(), u64::from(*cost));
        dist.entry(b.clone())
            .or_default()
            .insert(a.clone(), u64::from(*cost));
    }
    for k in ids.iter().filter(|k| !edge.contains(*k)) {
        for i in &ids {
            for j in &ids {
                let (Some(ik), Some(kj)) = (dist[i].get(k).copied(), dist[k].get(j).copied())
                else {
                    continue;
                };
                let through = ik + kj;
                let row = dist.get_mut(i).expect("row");
                if row.get(j).is_none_or(|d| through < *d) {
                    row.insert(j.clone(), through);
                }
            }
        }
    }
    dist
}
