//! `http-load hold`: opens N keep-alive connections one after another,
//! makes one request on each (so every connection has really gone through
//! the proxies to the server), prints a JSON line once all are open, then
//! keeps them open until stdin closes or `--hold` passes. The caller reads
//! the proxies' RSS while they are held.

use std::io::BufRead;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{Map, json};

use crate::http1::{READ_TIMEOUT, REQUEST, round_trip};

/// Opens `count` connections to `target`, prints the JSON line, holds them.
pub(crate) fn run(
    target: SocketAddr,
    count: usize,
    hold: Duration,
    tags: Vec<String>,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut open = Vec::with_capacity(count);
    let mut buf = Vec::with_capacity(4096);
    for i in 0..count {
        let mut s = TcpStream::connect(target)
            .map_err(|e| anyhow::anyhow!("connection {i} to {target}: {e}"))?;
        s.set_read_timeout(Some(READ_TIMEOUT))?;
        round_trip(&mut s, REQUEST, &mut buf)
            .map_err(|e| anyhow::anyhow!("request on connection {i}: {e}"))?;
        open.push(s);
    }
    let mut out = Map::new();
    out.insert("held_connections".into(), json!(open.len()));
    out.insert(
        "hold_open_ms".into(),
        json!(start.elapsed().as_millis() as u64),
    );
    crate::print_line(tags, out)?;
    // Hold until stdin closes (the caller is done measuring) or the time is up.
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        let _ = tx.send(());
    });
    let _ = rx.recv_timeout(hold);
    drop(open);
    Ok(())
}
