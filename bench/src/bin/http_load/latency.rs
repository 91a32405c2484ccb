//! `http-load latency`: open-loop load at a fixed request rate over N
//! keep-alive connections, with coordinated-omission-correct timing.
//!
//! Request `i` is due at `start + i / rate` and goes out on connection
//! `i mod N`, one OS thread per connection with blocking sockets (so the
//! send time is not rounded to a runtime's 1 ms timer tick). Its latency is
//! measured from when it was *due*, not from when it was sent: if the system
//! stalls, the requests that queue up behind the stall count the whole wait,
//! as wrk2 does. How late the client itself sent requests is reported
//! separately (`send_late_*`), so the client's own jitter stays visible.

use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::http1::{READ_TIMEOUT, REQUEST, round_trip};
use crate::stats::{Samples, reduce_timer_slack};

/// What one latency run does.
pub(crate) struct Plan {
    /// Where to send requests.
    pub(crate) target: SocketAddr,
    /// Requests per second, over all connections.
    pub(crate) rate: u64,
    /// Keep-alive connections.
    pub(crate) connections: usize,
    /// Measured time (after the warm-up).
    pub(crate) duration: Duration,
    /// Time at the start whose requests are sent but not recorded.
    pub(crate) warmup: Duration,
}

struct ConnResult {
    latency_ns: Vec<u64>,
    late_ns: Vec<u64>,
    errors: u64,
    last_end: Option<Instant>,
}

/// Runs the plan and returns the figures as JSON fields.
pub(crate) fn run(plan: &Plan) -> anyhow::Result<Map<String, Value>> {
    reduce_timer_slack();
    let n = plan.connections.max(1);
    let interval = Duration::from_nanos(1_000_000_000 / plan.rate.max(1));
    let warm = (plan.warmup.as_nanos() / interval.as_nanos()) as u64;
    let total = warm + (plan.duration.as_nanos() / interval.as_nanos()) as u64;
    // Connect everything first, then start the clock for all threads at once.
    let mut streams = Vec::with_capacity(n);
    for _ in 0..n {
        streams.push(connect(plan.target)?);
    }
    let barrier = Arc::new(Barrier::new(n + 1));
    let start_cell = Arc::new(std::sync::OnceLock::<Instant>::new());
    let mut handles = Vec::with_capacity(n);
    for (c, stream) in streams.into_iter().enumerate() {
        let (barrier, start_cell, target) = (barrier.clone(), start_cell.clone(), plan.target);
        handles.push(std::thread::spawn(move || {
            barrier.wait();
            let start = *start_cell.get().expect("start set before the barrier");
            connection(
                stream, target, start, interval, c as u64, n as u64, warm, total,
            )
        }));
    }
    let start = Instant::now() + Duration::from_millis(20);
    start_cell.set(start).expect("set once");
    barrier.wait();
    let (mut lat, mut late, mut errors, mut last_end) =
        (Samples::default(), Samples::default(), 0, start);
    for h in handles {
        let r = h
            .join()
            .map_err(|_| anyhow::anyhow!("a connection thread panicked"))?;
        lat.extend(r.latency_ns);
        late.extend(r.late_ns);
        errors += r.errors;
        last_end = last_end.max(r.last_end.unwrap_or(start));
    }
    let measured_start = start + interval * warm as u32;
    let elapsed = last_end
        .saturating_duration_since(measured_start)
        .as_secs_f64();
    let mut out = Map::new();
    out.insert("target_rate".into(), json!(plan.rate));
    out.insert("lat_connections".into(), json!(n));
    out.insert("lat_requests".into(), json!(lat.len()));
    out.insert("lat_errors".into(), json!(errors));
    out.insert(
        "achieved_rate".into(),
        json!(round1(lat.len() as f64 / elapsed.max(1e-9))),
    );
    for (name, p) in [
        ("p50", 0.50),
        ("p90", 0.90),
        ("p99", 0.99),
        ("p999", 0.999),
        ("max", 1.0),
    ] {
        out.insert(
            format!("lat_{name}_us"),
            json!(round1(lat.percentile(p) / 1e3)),
        );
    }
    out.insert(
        "send_late_p50_us".into(),
        json!(round1(late.percentile(0.5) / 1e3)),
    );
    out.insert(
        "send_late_p99_us".into(),
        json!(round1(late.percentile(0.99) / 1e3)),
    );
    Ok(out)
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn connect(target: SocketAddr) -> anyhow::Result<TcpStream> {
    let s =
        TcpStream::connect(target).map_err(|e| anyhow::anyhow!("connecting to {target}: {e}"))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    Ok(s)
}

#[allow(clippy::too_many_arguments)]
fn connection(
    mut stream: TcpStream,
    target: SocketAddr,
    start: Instant,
    interval: Duration,
    first: u64,
    step: u64,
    warm: u64,
    total: u64,
) -> ConnResult {
    let cap = (total / step + 1) as usize;
    let mut r = ConnResult {
        latency_ns: Vec::with_capacity(cap),
        late_ns: Vec::with_capacity(cap),
        errors: 0,
        last_end: None,
    };
    let mut buf = Vec::with_capacity(4096);
    let mut i = first;
    while i < total {
        let due = start + Duration::from_nanos(interval.as_nanos() as u64 * i);
        let now = Instant::now();
        if now < due {
            std::thread::sleep(due - now);
        }
        let sent = Instant::now();
        match round_trip(&mut stream, REQUEST, &mut buf) {
            Ok(()) => {
                let end = Instant::now();
                if i >= warm {
                    r.latency_ns.push((end - due).as_nanos() as u64);
                    r.late_ns.push((sent - due).as_nanos() as u64);
                    r.last_end = Some(end);
                }
            }
            Err(e) => {
                r.errors += 1;
                if r.errors <= 3 {
                    eprintln!("http-load latency: request {i} failed: {e}; reconnecting");
                }
                match connect(target) {
                    Ok(s) => stream = s,
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        }
        i += step;
    }
    r
}
