//! `http-load connect`: new connections per second. Each of C workers, in a
//! closed loop, opens a TCP connection, sends one request with
//! `Connection: close`, reads the response to the end of the stream (the
//! server's close has to travel back through the proxies) and closes.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::http1::{READ_TIMEOUT, REQUEST_CLOSE, round_trip};
use crate::stats::Samples;

struct WorkerResult {
    ok: u64,
    errors: u64,
    latency_ns: Vec<u64>,
}

/// Runs C workers for `duration` and returns the figures as JSON fields.
pub(crate) fn run(
    target: SocketAddr,
    workers: usize,
    duration: Duration,
) -> anyhow::Result<Map<String, Value>> {
    let start = Instant::now();
    let deadline = start + duration;
    let handles: Vec<_> = (0..workers.max(1))
        .map(|_| std::thread::spawn(move || worker(target, deadline)))
        .collect();
    let (mut ok, mut errors, mut lat) = (0, 0, Samples::default());
    for h in handles {
        let r = h
            .join()
            .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?;
        ok += r.ok;
        errors += r.errors;
        lat.extend(r.latency_ns);
    }
    let elapsed = start.elapsed().as_secs_f64();
    if ok == 0 {
        anyhow::bail!("no connection to {target} completed ({errors} failed)");
    }
    let mut out = Map::new();
    out.insert("conn_workers".into(), json!(workers));
    out.insert("conn_count".into(), json!(ok));
    out.insert("conn_errors".into(), json!(errors));
    out.insert("conn_per_s".into(), json!((ok as f64 / elapsed).round()));
    out.insert(
        "conn_p50_us".into(),
        json!((lat.percentile(0.5) / 100.0).round() / 10.0),
    );
    out.insert(
        "conn_p99_us".into(),
        json!((lat.percentile(0.99) / 100.0).round() / 10.0),
    );
    Ok(out)
}

fn worker(target: SocketAddr, deadline: Instant) -> WorkerResult {
    let mut r = WorkerResult {
        ok: 0,
        errors: 0,
        latency_ns: Vec::new(),
    };
    let mut buf = Vec::with_capacity(4096);
    while Instant::now() < deadline {
        let t0 = Instant::now();
        match one(target, &mut buf) {
            Ok(()) => {
                r.ok += 1;
                r.latency_ns.push(t0.elapsed().as_nanos() as u64);
            }
            Err(e) => {
                r.errors += 1;
                if r.errors <= 3 {
                    eprintln!("http-load connect: {e}");
                }
            }
        }
    }
    r
}

fn one(target: SocketAddr, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let mut s = TcpStream::connect(target)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(READ_TIMEOUT))?;
    round_trip(&mut s, REQUEST_CLOSE, buf)?;
    // Wait for the close to arrive, so every connection is really finished.
    let mut rest = [0u8; 512];
    while s.read(&mut rest)? > 0 {}
    Ok(())
}
