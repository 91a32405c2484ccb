//! Forwarding a query that is not a mesh name to the upstream resolvers
//! (those of the namespace's original resolv.conf), one after another.
//!
//! Owns the exchange with an upstream: the query's bytes are relayed as
//! received (its id, flags and EDNS included), over UDP from a fresh
//! connected socket (a random source port; only the server's datagrams
//! are read) or over TCP for a query that came over TCP; the first answer
//! with the query's id is relayed as received. A server that does not
//! answer within the resolver timeout is left for the next. It never
//! retries a server, and the pending cap ([`PendingSlot`]) bounds how many
//! exchanges run at once.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use super::answer::{HEADER_LEN, MAX_TCP_MESSAGE};
use super::metrics::DnsMetrics;

/// How a query goes upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// UDP, reading answers of up to this many bytes (the client's EDNS
    /// payload size, or 512: what it can take over UDP).
    Udp(usize),
    /// TCP (the query came over TCP).
    Tcp,
}

/// Relays `query` to each of `servers` in turn, each with `timeout`; the
/// first answer, or `None` when none answered.
pub async fn forward(
    query: &[u8],
    servers: &[SocketAddr],
    timeout: Duration,
    via: Via,
) -> Option<Vec<u8>> {
    for server in servers {
        let exchange = async {
            match via {
                Via::Tcp => tcp_exchange(query, *server).await,
                Via::Udp(max) => udp_exchange(query, *server, max).await,
            }
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(answer)) => return Some(answer),
            Ok(Err(e)) => tracing::debug!(%server, error = %e, "DNS upstream failed"),
            Err(_) => tracing::debug!(%server, ?timeout, "DNS upstream timed out"),
        }
    }
    None
}

/// Whether `answer` answers `query`: a response with the query's id.
fn answers(query: &[u8], answer: &[u8]) -> bool {
    answer.len() >= HEADER_LEN && answer[..2] == query[..2] && answer[2] & 0x80 != 0
}

async fn udp_exchange(
    query: &[u8],
    server: SocketAddr,
    max_answer: usize,
) -> std::io::Result<Vec<u8>> {
    let local: IpAddr = match server {
        SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let socket = UdpSocket::bind((local, 0)).await?;
    socket.connect(server).await?;
    socket.send(query).await?;
    // One byte more than the client can take: a longer datagram is seen
    // as such instead of being cut to a size that parses.
    let mut buf = vec![0u8; max_answer.clamp(512, MAX_TCP_MESSAGE) + 1];
    loop {
        let n = socket.recv(&mut buf).await?;
        if n == buf.len() {
            return Err(std::io::Error::other(
                "answer longer than the client's UDP payload size",
            ));
        }
        if answers(query, &buf[..n]) {
            buf.truncate(n);
            return Ok(buf);
        }
        // Not the answer (a stale or forged datagram): keep waiting.
    }
}

async fn tcp_exchange(query: &[u8], server: SocketAddr) -> std::io::Result<Vec<u8>> {
    let len = u16::try_from(query.len())
        .map_err(|_| std::io::Error::other("query longer than 65535 bytes"))?;
    let mut stream = TcpStream::connect(server).await?;
    stream.set_nodelay(true)?;
    let mut framed = Vec::with_capacity(query.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(query);
    stream.write_all(&framed).await?;
    loop {
        let n = usize::from(stream.read_u16().await?);
        let mut answer = vec![0u8; n];
        stream.read_exact(&mut answer).await?;
        if answers(query, &answer) {
            return Ok(answer);
        }
    }
}

/// One forward in flight, counted in `dns_forwards_pending` until dropped.
#[derive(Debug)]
pub struct PendingSlot(Arc<DnsMetrics>);

impl PendingSlot {
    /// A slot, unless `max` forwards are in flight already.
    pub fn take(metrics: &Arc<DnsMetrics>, max: usize) -> Option<Self> {
        let before = metrics.forwards_pending.inc();
        if usize::try_from(before).unwrap_or(usize::MAX) >= max {
            metrics.forwards_pending.dec();
            return None;
        }
        Some(Self(metrics.clone()))
    }
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        self.0.forwards_pending.dec();
    }
}

/// The upstream servers, less the DNS server's own address (a
/// resolv.conf that names the sidecar would send a query round in a loop).
pub fn upstreams_except(servers: &[SocketAddr], own: Option<SocketAddr>) -> Vec<SocketAddr> {
    servers
        .iter()
        .copied()
        .filter(|s| match own {
            None => true,
            Some(own) if own.ip().is_unspecified() => {
                !(s.port() == own.port() && (s.ip().is_loopback() || s.ip().is_unspecified()))
            }
            Some(own) => *s != own,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_own_address_is_never_an_upstream() {
        let a: SocketAddr = "10.0.0.2:53".parse().unwrap();
        let own: SocketAddr = "127.0.0.1:53".parse().unwrap();
        let list = [a, own];
        assert_eq!(upstreams_except(&list, Some(own)), [a]);
        let any: SocketAddr = "0.0.0.0:53".parse().unwrap();
        assert_eq!(upstreams_except(&list, Some(any)), [a]);
        let other_port: SocketAddr = "127.0.0.1:15053".parse().unwrap();
        assert_eq!(upstreams_except(&list, Some(other_port)), list);
    }

    #[test]
    fn pending_slots_stop_at_the_cap_and_free_on_drop() {
        let m = Arc::new(DnsMetrics::default());
        let a = PendingSlot::take(&m, 2).expect("first");
        let _b = PendingSlot::take(&m, 2).expect("second");
        assert!(PendingSlot::take(&m, 2).is_none());
        drop(a);
        assert!(PendingSlot::take(&m, 2).is_some());
        assert_eq!(m.pending(), 1);
    }
}
