//! Flooding converges on random networks: random routers (some edge),
//! random links and costs, random connectors, then random link failures,
//! restarts, connector changes and replays of old LSAs, each applied while
//! earlier messages are still in flight, with delivery order across links
//! chosen at random. Once quiet, every router must agree with a reference
//! all-pairs shortest-path computation (see `check.rs`).

use proptest::prelude::*;

use super::check::assert_converged;
use super::sim::{Sim, key};
use crate::routing::RouterId;

/// Something that happens to the network after it first converged.
#[derive(Debug, Clone)]
enum Event {
    /// Take the n-th up link (modulo the count) down.
    LinkDown(usize),
    /// Bring a candidate link up (if allowed and not up).
    LinkUp(usize),
    /// Restart router n.
    Restart(usize),
    /// Give router n `count` connectors for key `k{key}`.
    Connectors(usize, usize, usize),
    /// Over the m-th up link, re-send the n-th LSA its sender has sent in
    /// its current life (a retransmission: duplicate or stale by now).
    Replay(usize, usize),
}

#[derive(Debug, Clone)]
struct Network {
    edge: Vec<bool>,
    links: Vec<(usize, usize, u32)>,
    one_way: Vec<(usize, usize)>,
    connectors: Vec<(usize, usize, usize)>,
    events: Vec<(Event, usize)>,
    seed: u64,
}

fn network() -> impl Strategy<Value = Network> {
    (2usize..=8).prop_flat_map(|n| {
        let event = prop_oneof![
            (0..64usize).prop_map(Event::LinkDown),
            (0..64usize).prop_map(Event::LinkUp),
            (0..n).prop_map(Event::Restart),
            (0..n, 0..3usize, 0..3usize).prop_map(|(r, k, c)| Event::Connectors(r, k, c)),
            (0..4096usize, 0..64usize).prop_map(|(i, l)| Event::Replay(i, l)),
        ];
        (
            proptest::collection::vec(proptest::bool::weighted(0.3), n),
            proptest::collection::vec((0..n, 0..n, 1u32..=6), 0..=2 * n),
            proptest::collection::vec((0..n, 0..n), 0..=2),
            proptest::collection::vec((0..n, 0..3usize, 1..=3usize), 0..=n),
            proptest::collection::vec((event, 0..20usize), 0..=12),
            any::<u64>(),
        )
            .prop_map(|(edge, links, one_way, connectors, events, seed)| Network {
                edge,
                links,
                one_way,
                connectors,
                events,
                seed,
            })
    })
}

fn name(i: usize) -> String {
    format!("r{i}")
}

/// A small deterministic generator for delivery order (xorshift64*).
struct Order(u64);

impl Order {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % below.max(1)
    }
}

/// Delivers up to `n` messages in random order.
fn deliver_some(sim: &mut Sim, order: &mut Order, n: usize) {
    for _ in 0..n {
        let busy = sim.busy();
        if busy.is_empty() {
            return;
        }
        let (from, to) = busy[order.next(busy.len())].clone();
        sim.deliver(&from, &to);
    }
}

fn set_connectors(sim: &mut Sim, router: usize, key: usize, count: usize) {
    let k = format!("k{key}");
    sim.set_connectors(&name(router), &[(k.as_str(), count)]);
}

fn build(net: &Network, order: &mut Order) -> Sim {
    let mut sim = Sim::default();
    for (i, edge) in net.edge.iter().enumerate() {
        sim.add(&name(i), *edge);
    }
    for (r, k, c) in &net.connectors {
        set_connectors(&mut sim, *r, *k, *c);
    }
    for (a, b, cost) in &net.links {
        let up = sim
            .links
            .contains_key(&key(&RouterId::from(name(*a)), &RouterId::from(name(*b))));
        if a != b && !up {
            // Edge–edge links are refused; the simulator then has no link.
            let _ = sim.link_up(&name(*a), &name(*b), *cost);
        }
        deliver_some(&mut sim, order, 3);
    }
    for (a, b) in &net.one_way {
        // One-way connections use pairs no two-way link will ever join.
        let joined = net
            .links
            .iter()
            .any(|(x, y, _)| (x, y) == (a, b) || (x, y) == (b, a));
        let (ra, rb) = (RouterId::from(name(*a)), RouterId::from(name(*b)));
        let taken = sim.one_way.contains_key(&(ra.clone(), rb.clone()))
            || sim.one_way.contains_key(&(rb, ra));
        if a != b && !joined && !taken {
            sim.one_way_link(&name(*a), &name(*b), 1);
        }
    }
    sim
}

fn apply(sim: &mut Sim, net: &Network, event: &Event) {
    let up: Vec<(RouterId, RouterId)> = sim.links.keys().cloned().collect();
    match event {
        Event::LinkDown(i) if !up.is_empty() => {
            let (a, b) = &up[i % up.len()];
            sim.link_down(a, b);
        }
        Event::LinkUp(i) if !net.links.is_empty() => {
            let (a, b, cost) = net.links[i % net.links.len()];
            let (ra, rb) = (RouterId::from(name(a)), RouterId::from(name(b)));
            if a != b && !sim.links.contains_key(&key(&ra, &rb)) {
                let _ = sim.link_up(&name(a), &name(b), cost);
            }
        }
        Event::Restart(r) => sim.restart(&RouterId::from(name(*r))),
        Event::Connectors(r, k, c) => set_connectors(sim, *r, *k, *c),
        Event::Replay(i, l) if !up.is_empty() => {
            let (a, b) = &up[l % up.len()];
            let (from, to) = if i % 2 == 0 { (a, b) } else { (b, a) };
            let sent = sim.sent_by(from);
            if !sent.is_empty() {
                sim.send(from, to, sent[i / 2 % sent.len()].clone());
            }
        }
        _ => {}
    }
}

/// Builds `net`, converges, applies its events with messages in flight,
/// converges again, sweeps, and checks each time.
fn check_network(net: &Network) {
    let mut order = Order(net.seed | 1);
    let mut sim = build(net, &mut order);
    sim.run(|n| order.next(n));
    assert_converged(&sim, false);

    for (event, in_flight) in &net.events {
        apply(&mut sim, net, event);
        deliver_some(&mut sim, &mut order, *in_flight);
    }
    sim.run(|n| order.next(n));
    assert_converged(&sim, false);
    sim.sweep_all();
    assert_converged(&sim, true);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn flooding_converges_to_the_reference_shortest_paths(net in network()) {
        check_network(&net);
    }
}
