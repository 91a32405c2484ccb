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

/// A router in the [`Graph`]: whether it is an edge router, and its
/// usable links with their costs.
#[derive(Debug, Default)]
pub(crate) struct Node<'a> {
    pub(crate) edge: bool,
    pub(crate) links: Vec<(&'a RouterId, u64)>,
}

/// Usable links, borrowed from the database, by router.
pub(crate) type Graph<'a> = BTreeMap<&'a RouterId, Node<'a>>;

/// The usable links among the LSAs in `db` (two-way, no edge–edge).
pub(crate) fn graph(db: &LinkStateDb) -> Graph<'_> {
    let mut graph = Graph::new();
    for lsa in db.lsas() {
        let mut links = Vec::with_capacity(lsa.links.len());
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
            links.push((&link.peer, u64::from(link.cost.max(back))));
        }
        let node = Node {
            edge: lsa.origin.edge,
            links,
        };
        graph.insert(&lsa.origin.id, node);
    }
    graph
}

/// Cheapest routes from `source` to every router it can reach.
pub(crate) fn shortest_paths(graph: &Graph<'_>, source: &RouterId) -> BTreeMap<RouterId, Route> {
    // Heap entries: (cost, hops, first hop, router); the smallest pops first.
    type Candidate<'a> = Reverse<(u64, u32, &'a RouterId, &'a RouterId)>;
    let mut routes: BTreeMap<RouterId, Route> = BTreeMap::new();
    let mut heap: BinaryHeap<Candidate<'_>> = BinaryHeap::new();
    let links = |id: &RouterId| graph.get(id).map(|n| n.links.as_slice()).unwrap_or(&[]);
    for (peer, cost) in links(source) {
        heap.push(Reverse((*cost, 1, peer, peer)));
    }
    while let Some(Reverse((cost, hops, first, at))) = heap.pop() {
        if at == source || routes.contains_key(at) {
            continue;
        }
        let next_hop = first.clone();
        routes.insert(
            at.clone(),
            Route {
                next_hop,
                cost,
                hops,
            },
        );
        if graph.get(at).is_none_or(|n| n.edge) {
            continue;
        }
        for (peer, link_cost) in links(at) {
            if *peer != source && !routes.contains_key(*peer) {
                heap.push(Reverse((cost + link_cost, hops + 1, first, peer)));
            }
        }
    }
    routes
}
