//! `routing-load`: the CPU cost of link-state routing (`meshlink_link::routing`)
//! on synthetic networks, in memory (no sockets): routers exchange LSAs
//! through FIFO queues exactly as the flooding contract says. Prints one
//! JSON line per network size.
//!
//! Topology for N routers: 80 % interior routers on a ring with one chord
//! each (degree about 4), 20 % edge routers each linked to two interior
//! routers; link costs 1–4; every router has connectors for two of ten
//! routing keys. Figures:
//! - cold start: all links up at once, flood until quiet (wall and thread
//!   CPU time, LSAs received, CPU per received LSA);
//! - one router's routing keys change: flood until quiet (median wall time
//!   of 31);
//! - one interior link fails and comes back (median wall time of 31);
//! - `pick` of a destination for a new flow (mean ns over 100,000).
//!
//! CPU times are the thread's (`/proc/thread-self/schedstat`, exact to a
//! scheduler tick, so only totals over all repetitions are used), divided
//! per router and event: in a real network each router does its share in
//! its own process. Wall times include waiting for a core on a loaded
//! machine, so the load average is printed too.
//!
//! ```sh
//! cargo run --release -p meshlink-bench --bin routing-load -- --routers 10,100,300
//! ```

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use clap::Parser;
use meshlink_link::routing::{
    LinkAdvert, LinkDirection, LinkStateRouter, Lsa, RouterInfo, ServiceAdvert,
};
use serde_json::json;

#[derive(Parser)]
struct Args {
    /// Network sizes to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10,100,300")]
    routers: Vec<usize>,
    /// Repetitions of the update and link-failure measurements.
    #[arg(long, default_value_t = 31)]
    repeats: usize,
}

/// The network: routers, links (a, b, cost) and in-flight messages.
struct Net {
    routers: Vec<LinkStateRouter>,
    links: Vec<(usize, usize, u32)>,
    up: Vec<bool>,
    queue: VecDeque<(usize, usize, Lsa)>,
    received: u64,
}

impl Net {
    fn new(n: usize) -> Self {
        let interior = (n * 4 / 5).max(2);
        let routers = (0..n)
            .map(|i| {
                let info = RouterInfo::new(format!("site-{i:05}"), format!("s{i}"), i >= interior);
                LinkStateRouter::new(info, 1).expect("valid router")
            })
            .collect();
        let mut links = Vec::new();
        let cost = |i: usize| 1 + (i * 7 % 4) as u32;
        for i in 0..interior {
            links.push((i, (i + 1) % interior, cost(i)));
            let chord = (i + interior / 3 + 1) % interior;
            if interior > 3 && chord != i && (chord + 1) % interior != i && i % 2 == 0 {
                links.push((i, chord, cost(i + 1)));
            }
        }
        for e in interior..n {
            let a = e % interior;
            let b = (e * 13 + 5) % interior;
            links.push((e, a, cost(e)));
            if b != a {
                links.push((e, b, cost(e + 2)));
            }
        }
        links.sort_unstable();
        links.dedup_by(|x, y| (x.0, x.1) == (y.0, y.1));
        let up = vec![true; links.len()];
        Self {
            routers,
            links,
            up,
            queue: VecDeque::new(),
            received: 0,
        }
    }

    fn neighbours(&self, r: usize) -> Vec<usize> {
        self.links
            .iter()
            .zip(&self.up)
            .filter(|(_, up)| **up)
            .filter_map(|(&(a, b, _), _)| match () {
                () if a == r => Some(b),
                () if b == r => Some(a),
                () => None,
            })
            .collect()
    }

    fn advertise(&mut self, r: usize) {
        let adverts = self
            .links
            .iter()
            .zip(&self.up)
            .filter(|(_, up)| **up)
            .filter_map(|(&(a, b, cost), _)| {
                let (peer, direction) = match () {
                    () if a == r => (b, LinkDirection::Outgoing),
                    () if b == r => (a, LinkDirection::Incoming),
                    () => return None,
                };
                let info = self.routers[peer].me();
                Some(LinkAdvert {
                    name: format!("link-{a}-{b}"),
                    peer: info.id.clone(),
                    peer_name: info.name.clone(),
                    cost,
                    direction,
                })
            })
            .collect();
        let update = self.routers[r].set_links(adverts).expect("valid links");
        self.flood(r, None, update.flood);
    }

    fn set_keys(&mut self, r: usize, salt: usize) {
        let services = [r + salt, r + salt + 3]
            .iter()
            .map(|k| ServiceAdvert {
                routing_key: format!("key-{}", k % 10),
                connectors: vec![format!("c-{r}")],
                listeners: Vec::new(),
            })
            .collect::<Vec<_>>();
        let mut services = services;
        services.dedup_by(|a, b| a.routing_key == b.routing_key);
        let update = self.routers[r]
            .set_services(services)
            .expect("valid services");
        self.flood(r, None, update.flood);
    }

    fn flood(&mut self, from: usize, except: Option<usize>, lsa: Option<Lsa>) {
        let Some(lsa) = lsa else { return };
        for n in self.neighbours(from) {
            if Some(n) != except {
                self.queue.push_back((from, n, lsa.clone()));
            }
        }
    }

    fn sync(&mut self, a: usize, b: usize) {
        for (from, to) in [(a, b), (b, a)] {
            for lsa in self.routers[from].sync_lsas() {
                self.queue.push_back((from, to, lsa));
            }
        }
    }

    fn settle(&mut self) {
        while let Some((from, to, lsa)) = self.queue.pop_front() {
            self.received += 1;
            let got = self.routers[to].receive(lsa).expect("valid LSA");
            self.flood(to, Some(from), got.flood);
            if let Some(reply) = got.reply {
                self.queue.push_back((to, from, reply));
            }
        }
    }

    fn set_link(&mut self, i: usize, up: bool) {
        self.up[i] = up;
        let (a, b, _) = self.links[i];
        if !up {
            self.queue
                .retain(|(f, t, _)| !((*f, *t) == (a, b) || (*f, *t) == (b, a)));
        }
        self.advertise(a);
        self.advertise(b);
        if up {
            self.sync(a, b);
        }
    }
}

/// CPU time of this thread.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let ns = stat
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn micros(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e7).round() / 10.0
}

fn measure(n: usize, repeats: usize) -> serde_json::Value {
    let mut net = Net::new(n);
    let (wall, cpu) = (Instant::now(), thread_cpu());
    for r in 0..n {
        net.set_keys(r, 0);
        net.advertise(r);
    }
    for i in 0..net.links.len() {
        let (a, b, _) = net.links[i];
        net.sync(a, b);
    }
    net.settle();
    let (cold_wall, cold_cpu, cold_msgs) = (wall.elapsed(), thread_cpu() - cpu, net.received);
    let reachable = net.routers[0].routes().len() + 1;

    let (mut update, update_cpu, update_msgs) = (Vec::new(), thread_cpu(), net.received);
    for i in 0..repeats {
        let before = Instant::now();
        net.set_keys(i % n, i + 1);
        net.settle();
        update.push(before.elapsed());
    }
    let (update_cpu, update_msgs) = (thread_cpu() - update_cpu, net.received - update_msgs);

    let interior_links: Vec<usize> = (0..net.links.len())
        .filter(|&i| {
            !net.routers[net.links[i].0].me().edge && !net.routers[net.links[i].1].me().edge
        })
        .collect();
    let (mut flap, flap_cpu, flap_msgs) = (Vec::new(), thread_cpu(), net.received);
    for i in 0..repeats {
        let link = interior_links[i * 5 % interior_links.len()];
        let before = Instant::now();
        net.set_link(link, false);
        net.settle();
        net.set_link(link, true);
        net.settle();
        flap.push(before.elapsed());
    }
    let (flap_cpu, flap_msgs) = (thread_cpu() - flap_cpu, net.received - flap_msgs);

    let picks = 100_000;
    let router = &mut net.routers[0];
    let key = router
        .routing_keys()
        .next()
        .map(str::to_owned)
        .unwrap_or_default();
    let before = Instant::now();
    for _ in 0..picks {
        std::hint::black_box(router.pick(&key));
    }
    let pick_ns = before.elapsed().as_nanos() as f64 / f64::from(picks);
    // Per router and event: every router does its share in its own process.
    let per = |cpu: Duration, events: usize| micros(cpu) / (events * n) as f64;
    json!({
        "routers": n,
        "links": net.links.len(),
        "reachable_from_router_0": reachable,
        "cold_start_wall_ms": micros(cold_wall) / 1000.0,
        "cold_start_cpu_ms_total": micros(cold_cpu) / 1000.0,
        "cold_start_cpu_us_per_router": per(cold_cpu, 1),
        "cold_start_lsas_per_router": cold_msgs as f64 / n as f64,
        "key_change_wall_us_median": micros(median(update)),
        "key_change_cpu_us_per_router": per(update_cpu, repeats),
        "key_change_lsas_per_router": update_msgs as f64 / (repeats * n) as f64,
        "link_flap_wall_us_median": micros(median(flap)),
        "link_flap_cpu_us_per_router": per(flap_cpu, repeats),
        "link_flap_lsas_per_router": flap_msgs as f64 / (repeats * n) as f64,
        "pick_ns": (pick_ns * 10.0).round() / 10.0,
    })
}

fn main() {
    let args = Args::parse();
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!("loadavg before: {}", load().trim());
    for n in args.routers {
        println!("{}", measure(n, args.repeats));
    }
    eprintln!("loadavg after: {}", load().trim());
}
