//! Transparent proxying's capture listeners (issue 37). A listener with
//! `use_original_dst` receives connections that iptables redirected to
//! it; each is handed to the listener of its original destination — a
//! listener that does not bind (`bind_to_port: false`: a VIP's outbound,
//! an inbound whose application listens on its own port) or any other
//! listener on that address — as Envoy does, and one without such a
//! listener takes the capture listener's own chain (pass-through to the
//! original destination, or a cluster without endpoints).
//!
//! A destination whose listener is still warming (its certificate or
//! cluster has not arrived) is refused with a reset, never passed
//! through: an inbound would otherwise reach the application without
//! mTLS. A connection that was not redirected (its original destination
//! is the capture port itself) is refused too, since passing it through
//! would loop.
//!
//! Owns the table of listeners by address ([`ListenerTable`]), which the
//! listener manager replaces on every reconcile.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, RwLock};

use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::model::{Direction, ListenerSpec};

/// A listener a redirected connection may be handed to.
#[derive(Debug, Clone)]
pub enum Entry {
    /// Serving: its spec as it changes.
    Ready(watch::Receiver<Arc<ListenerSpec>>),
    /// Configured but waiting for a reference (why).
    Warming(String),
}

/// Listeners by address, for the capture listeners; shared with the
/// listener manager, which replaces it whenever listeners change.
#[derive(Debug, Clone, Default)]
pub struct ListenerTable(Arc<RwLock<HashMap<(SocketAddr, Direction), Entry>>>);

impl ListenerTable {
    /// Replaces the table.
    pub fn replace(&self, entries: HashMap<(SocketAddr, Direction), Entry>) {
        *self.0.write().expect("listener table lock") = entries;
    }

    /// The listener of `direction` for `dst`: one on exactly that
    /// address, else one on the unspecified address of its family and
    /// that port; for an inbound capture, else any inbound listener on
    /// that port, so a workload with several addresses cannot be reached
    /// on an inbound's port past its mTLS through another of them.
    pub fn lookup(&self, dst: SocketAddr, direction: Direction) -> Option<Entry> {
        let table = self.0.read().expect("listener table lock");
        let any: IpAddr = match dst {
            SocketAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
            SocketAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
        };
        if let Some(e) = table
            .get(&(dst, direction))
            .or_else(|| table.get(&(SocketAddr::new(any, dst.port()), direction)))
        {
            return Some(e.clone());
        }
        if direction != Direction::Inbound {
            return None;
        }
        table
            .iter()
            .filter(|((addr, d), _)| addr.port() == dst.port() && *d == Direction::Inbound)
            .find_map(|(_, e)| match e {
                Entry::Ready(spec) => {
                    let s = spec.borrow();
                    (s.direction == Direction::Inbound && !s.original_dst).then(|| e.clone())
                }
                Entry::Warming(_) => Some(e.clone()),
            })
    }
}

/// Where a redirected connection goes.
#[derive(Debug)]
pub enum Dispatch {
    /// To this listener (the original destination's).
    Handoff(watch::Receiver<Arc<ListenerSpec>>),
    /// To the capture listener's own chain, with the original destination
    /// (for a pass-through cluster).
    Own(SocketAddr),
    /// Refused: why.
    Refuse(String),
}

/// Decides where a connection accepted by capture listener `own` goes.
pub fn dispatch(stream: &TcpStream, own: &ListenerSpec, table: &ListenerTable) -> Dispatch {
    let dst = match original_dst(stream) {
        Ok(d) => d,
        Err(e) => return Dispatch::Refuse(format!("cannot read the original destination: {e}")),
    };
    let local = stream.local_addr().ok();
    if Some(dst) == local || dst.port() == own.address.port() && dst.ip().is_loopback() {
        return Dispatch::Refuse(format!(
            "{dst} is the capture port itself: the connection was not redirected, and passing \
             it through would loop"
        ));
    }
    match table.lookup(dst, own.direction) {
        Some(Entry::Ready(spec)) if spec.borrow().name != own.name => Dispatch::Handoff(spec),
        Some(Entry::Ready(_)) | None => Dispatch::Own(dst),
        Some(Entry::Warming(why)) => Dispatch::Refuse(format!(
            "the listener for {dst} is not ready ({why}); refused rather than passed through"
        )),
    }
}

/// A redirected connection's original destination (`SO_ORIGINAL_DST`,
/// or `IP6T_SO_ORIGINAL_DST` for IPv6).
pub fn original_dst(stream: &TcpStream) -> std::io::Result<SocketAddr> {
    let socket = socket2::SockRef::from(stream);
    let addr = match stream.local_addr()? {
        SocketAddr::V4(_) => socket.original_dst_v4()?,
        SocketAddr::V6(_) => socket.original_dst_v6()?,
    };
    addr.as_socket().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the original destination is not an IP address",
        )
    })
}

/// Closes `stream` with a reset (`SO_LINGER` 0), as a refused connection
/// looks to its client.
pub fn reset(stream: TcpStream) {
    let _ = socket2::SockRef::from(&stream).set_linger(Some(std::time::Duration::ZERO));
    drop(stream);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ListenerProtocol;

    fn spec(name: &str, address: &str, direction: Direction) -> watch::Receiver<Arc<ListenerSpec>> {
        let (_, rx) = watch::channel(Arc::new(ListenerSpec {
            name: name.into(),
            address: address.parse().unwrap(),
            direction,
            tls: None,
            connection_rate_limit: None,
            rbac: Vec::new(),
            rbac_per_request: false,
            bind: false,
            original_dst: false,
            protocol: ListenerProtocol::Tcp {
                cluster: "c".into(),
                weighted: Vec::new(),
                max_connect_attempts: None,
                idle_timeout: None,
            },
        }));
        rx
    }

    fn name(e: Option<Entry>) -> Option<String> {
        match e? {
            Entry::Ready(s) => Some(s.borrow().name.clone()),
            Entry::Warming(why) => Some(format!("warming: {why}")),
        }
    }

    #[test]
    fn a_destination_finds_its_listener_by_address_then_port() {
        let table = ListenerTable::default();
        let out = Direction::Outbound;
        let inb = Direction::Inbound;
        table.replace(HashMap::from([
            (
                ("240.0.0.7:80".parse().unwrap(), out),
                Entry::Ready(spec("vip", "240.0.0.7:80", Direction::Outbound)),
            ),
            (
                ("0.0.0.0:9090".parse().unwrap(), out),
                Entry::Ready(spec("any", "0.0.0.0:9090", Direction::Outbound)),
            ),
            (
                ("10.0.0.1:8080".parse().unwrap(), inb),
                Entry::Ready(spec("inbound", "10.0.0.1:8080", Direction::Inbound)),
            ),
            (
                ("10.0.0.1:8080".parse().unwrap(), out),
                Entry::Ready(spec("to-self", "10.0.0.1:8080", Direction::Outbound)),
            ),
            (
                ("10.0.0.1:8443".parse().unwrap(), inb),
                Entry::Warming("no certificate yet".into()),
            ),
        ]));
        let at = |dst: &str, inbound: bool| {
            let direction = if inbound { inb } else { out };
            name(table.lookup(dst.parse().unwrap(), direction))
        };
        assert_eq!(at("240.0.0.7:80", false).as_deref(), Some("vip"));
        assert_eq!(at("240.0.0.8:80", false), None);
        assert_eq!(at("10.9.9.9:9090", false).as_deref(), Some("any"));
        assert_eq!(at("10.0.0.1:8080", true).as_deref(), Some("inbound"));
        // One address, two listeners: each capture finds its direction's.
        assert_eq!(at("10.0.0.1:8080", false).as_deref(), Some("to-self"));
        // Another address of the workload, same port: the inbound's
        // listener (its mTLS), for the inbound capture only.
        assert_eq!(at("172.16.0.5:8080", true).as_deref(), Some("inbound"));
        assert_eq!(at("172.16.0.5:8080", false), None);
        assert_eq!(
            at("10.0.0.1:8443", true).as_deref(),
            Some("warming: no certificate yet")
        );
    }

    #[test]
    fn an_ipv6_destination_finds_its_listener_in_its_own_family() {
        let table = ListenerTable::default();
        let (out, inb) = (Direction::Outbound, Direction::Inbound);
        table.replace(HashMap::from([
            (
                ("[fd77::2]:8080".parse().unwrap(), inb),
                Entry::Ready(spec("inbound6", "[fd77::2]:8080", inb)),
            ),
            (
                ("[fd77::2]:8080".parse().unwrap(), out),
                Entry::Ready(spec("to-self6", "[fd77::2]:8080", out)),
            ),
            (
                ("[::]:9090".parse().unwrap(), out),
                Entry::Ready(spec("any6", "[::]:9090", out)),
            ),
            (
                ("0.0.0.0:9091".parse().unwrap(), out),
                Entry::Ready(spec("any4", "0.0.0.0:9091", out)),
            ),
        ]));
        let at = |dst: &str, direction| name(table.lookup(dst.parse().unwrap(), direction));
        assert_eq!(at("[fd77::2]:8080", inb).as_deref(), Some("inbound6"));
        assert_eq!(at("[fd77::2]:8080", out).as_deref(), Some("to-self6"));
        assert_eq!(at("[fd77::9]:9090", out).as_deref(), Some("any6"));
        // 0.0.0.0 is IPv4's: an IPv6 destination on that port passes
        // through instead.
        assert_eq!(at("[fd77::9]:9091", out), None);
        assert_eq!(at("10.0.0.9:9090", out), None);
        // Another IPv6 address of the workload: the inbound's listener.
        assert_eq!(at("[fd77::3]:8080", inb).as_deref(), Some("inbound6"));
    }
}
