//! Shortest paths from this router over the links both ends advertise.
//!
//! Owns the graph rules and Dijkstra:
//! - a link is usable only if both ends advertise it (two-way check);
//! - its cost is the larger of the two ends' costs, so both directions
//!   cost the same and every router computes the same distances;
//! - a link between two edge routers is ignored;
//! - a path may start or end at an edge router but never pass through
//!   one: an edge router other than the source is never expanded.
//!
//! Ties break on fewer hops, then on the smaller first-hop id, so the
//! result is deterministic. Link costs are at least 1, so along any
//! shortest path the remaining cost strictly falls and hop-by-hop
//! forwarding cannot loop. It never reads or changes the database.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use super::lsdb::LinkStateDb;
use super::wire::RouterId;

/// The cheapest path from this router to another one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The neighbour to send to (the destination itself when adjacent).
    pub next_hop: RouterId,
    /// The sum of the link costs along the path.
    pub cost: u64,
    /// The number of links along the path.
    pub hops: u32,
}

/// Usable links: for each router, its neighbours and the link costs.
pub(crate) type Graph = BTreeMap<RouterId, Vec<(RouterId, u64)>>;

/// The usable links among the LSAs in `db` (two-way, no edge–edge).
pub(crate) fn graph(db: &LinkStateDb) -> Graph {
    let mut graph = Graph::new();
    for lsa in db.lsas() {
        let mut neighbours = Vec::new();
        for link in &lsa.links {
            let Some(peer) = db.get(&link.peer) else {
                continue;
            };
            let Some(back) = peer.cost_to(&lsa.origin.id) else {
                continue;
            };
            if lsa.origin.edge && peer.origin.edge {
                continue;
            }
            neighbours.push((link.peer.clone(), u64::from(link.cost.max(back))));
        }
        graph.insert(lsa.origin.id.clone(), neighbours);
    }
    graph
}

/// Cheapest routes from `source` to every router it can reach; `is_edge`
/// tells which routers may not carry transit.
pub(crate) fn shortest_paths(
    graph: &Graph,
    source: &RouterId,
    is_edge: impl Fn(&RouterId) -> bool,
) -> BTreeMap<RouterId, Route> {
    // Heap entries: (cost, hops, first hop, router); the smallest pops first.
    type Candidate = Reverse<(u64, u32, RouterId, RouterId)>;
    let mut routes: BTreeMap<RouterId, Route> = BTreeMap::new();
    let mut heap: BinaryHeap<Candidate> = BinaryHeap::new();
    for (peer, cost) in graph.get(source).into_iter().flatten() {
        heap.push(Reverse((*cost, 1, peer.clone(), peer.clone())));
    }
    while let Some(Reverse((cost, hops, first, at))) = heap.pop() {
        if &at == source || routes.contains_key(&at) {
            continue;
        }
        routes.insert(
            at.clone(),
            Route {
                next_hop: first.clone(),
                cost,
                hops,
            },
        );
        if is_edge(&at) {
            continue;
        }
        for (peer, link_cost) in graph.get(&at).into_iter().flatten() {
            if peer != source && !routes.contains_key(peer) {
                heap.push(Reverse((
                    cost + link_cost,
                    hops + 1,
                    first.clone(),
                    peer.clone(),
                )));
            }
        }
    }
    routes
}
