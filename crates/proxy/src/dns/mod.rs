//! The sidecar's mesh DNS server: answers `<service>.mesh` names with the
//! virtual IPs the control plane assigned, and forwards every other name
//! to the namespace's own resolvers. The capture rules redirect the
//! application's DNS (UDP and TCP port 53) here.
//!
//! Inputs: `watch<Arc<ProxyConfig>>` (its [`ProxyConfig::dns`], validated
//! from the `meshlink:dns` Listener, or from `meshlink:dns:ipv6`: one
//! server per DNS Listener, [`DnsServer::listener`]) and the upstream
//! resolvers, read from `--dns-resolv-conf` at start ([`resolv`]). Owns
//! the DNS sockets (UDP and TCP on one port) and every task serving them. Each query reads the table current
//! when it arrives, so a name the control plane deletes stops resolving
//! at once; only a new address or port rebinds.
//!
//! It must never panic or stop on any input: a message that does not
//! parse is answered FORMERR (or dropped without a readable header), and
//! every query is counted once in `dns_queries_total{result}`.
//!
//! Files: [`answer`] (what to answer, pure), [`forward`] (upstream
//! exchanges), [`udp`] and [`tcp`] (the socket loops), [`resolv`]
//! (resolv.conf), [`metrics`].

pub mod answer;
pub mod forward;
pub mod metrics;
pub mod resolv;
pub mod tcp;
pub mod udp;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, UdpSocket};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use metrics::{DnsMetrics, Outcome};

use crate::model::ProxyConfig;
use crate::model::dns::DnsSpec;
use answer::{Handled, Transport};
use forward::{PendingSlot, Via};

/// How long a failed bind waits before the next try.
pub const BIND_RETRY: Duration = Duration::from_secs(1);

/// The DNS server task's inputs; run it with [`DnsServer::run`].
#[derive(Debug)]
pub struct DnsServer {
    /// The proxy's configuration; its `dns` says where to listen and what
    /// to answer.
    pub config: watch::Receiver<Arc<ProxyConfig>>,
    /// Which DNS Listener this server serves (`meshlink:dns`, or
    /// `meshlink:dns:ipv6` on `[::1]` for a dual-stack proxy).
    pub listener: &'static str,
    /// The resolvers other names are forwarded to, in order (the
    /// namespace's resolv.conf, [`resolv::upstreams`]).
    pub upstreams: Vec<SocketAddr>,
    /// The metrics.
    pub metrics: Arc<DnsMetrics>,
    /// The address bound now (`None`: not listening).
    pub bound: watch::Sender<Option<SocketAddr>>,
}

/// What the socket loops of one binding share.
#[derive(Debug, Clone)]
pub(crate) struct Serving {
    config: watch::Receiver<Arc<ProxyConfig>>,
    listener: &'static str,
    /// The resolvers, less this server's own address.
    upstreams: Arc<[SocketAddr]>,
    metrics: Arc<DnsMetrics>,
    /// Cancelled when this binding ends.
    stop: CancellationToken,
    /// Its connections and forwards.
    tasks: TaskTracker,
}

impl Serving {
    /// The table now (`None`: the control plane removed the DNS).
    fn spec(&self) -> Option<Arc<DnsSpec>> {
        self.config.borrow().dns_of(self.listener).cloned()
    }

    /// Forwards `query` (parsed as `request`) and gives the upstream's
    /// answer, or SERVFAIL; counts the query.
    async fn forwarded(
        &self,
        query: &[u8],
        request: &hickory_proto::op::Message,
        spec: &DnsSpec,
        transport: Transport,
    ) -> Vec<u8> {
        let via = match transport {
            Transport::Tcp => Via::Tcp,
            Transport::Udp => Via::Udp(usize::from(request.max_payload())),
        };
        match forward::forward(query, &self.upstreams, spec.resolver_timeout, via).await {
            Some(answer) => {
                self.metrics.count(Outcome::Forwarded);
                answer
            }
            None => {
                self.metrics.count(Outcome::ForwardFailed);
                answer::servfail(request, transport)
            }
        }
    }

    /// The whole answer to `query`, forwarding inline (TCP's path: one
    /// query at a time per connection); `None`: send nothing.
    async fn reply(&self, query: &[u8], transport: Transport) -> Option<Vec<u8>> {
        let Some(spec) = self.spec() else {
            self.metrics.count(Outcome::Dropped);
            return None;
        };
        match answer::handle(query, &spec, transport) {
            Handled::Answer { bytes, outcome } => {
                self.metrics.count(outcome);
                Some(bytes)
            }
            Handled::Drop => {
                self.metrics.count(Outcome::Dropped);
                None
            }
            Handled::Forward(request) => {
                let Some(_slot) = PendingSlot::take(&self.metrics, spec.max_pending) else {
                    self.metrics.count(Outcome::Dropped);
                    return None;
                };
                Some(self.forwarded(query, &request, &spec, transport).await)
            }
        }
    }
}

/// One binding: the address asked for, and how to end it.
struct Binding {
    want: SocketAddr,
    stop: CancellationToken,
    tasks: TaskTracker,
}

impl Binding {
    async fn end(self) {
        self.stop.cancel();
        self.tasks.close();
        self.tasks.wait().await;
    }
}

impl DnsServer {
    /// Serves until `stop` fires: binds when the configuration has a DNS,
    /// rebinds when its address changes, closes when it goes away, and
    /// retries a failed bind every [`BIND_RETRY`].
    pub async fn run(mut self, stop: CancellationToken) {
        let mut current: Option<Binding> = None;
        let mut retry: Option<(SocketAddr, Instant)> = None;
        // A bind that keeps failing (the port taken, IPv6 turned off) is
        // logged once, then once per REPEAT_INTERVAL with a count.
        let mut bind_failures =
            crate::log_limit::LogLimiter::new(crate::log_limit::REPEAT_INTERVAL);
        loop {
            let want = self
                .config
                .borrow_and_update()
                .dns_of(self.listener)
                .map(|s| s.bind);
            if let Some(b) = current.take_if(|b| Some(b.want) != want) {
                b.end().await;
                self.bound.send_replace(None);
                tracing::info!(listener = self.listener, "mesh DNS: closed");
            }
            let due = |addr| retry.is_none_or(|(a, at)| a != addr || at <= Instant::now());
            if let Some(addr) = want
                && current.is_none()
                && due(addr)
            {
                match self.bind(addr).await {
                    Ok(b) => {
                        current = Some(b);
                        retry = None;
                        bind_failures =
                            crate::log_limit::LogLimiter::new(crate::log_limit::REPEAT_INTERVAL);
                    }
                    Err(e) => {
                        if let Some(count) = bind_failures.hit(Instant::now()) {
                            tracing::warn!(listener = self.listener, %addr, error = %e, count,
                                "mesh DNS: cannot bind; retrying every second");
                        }
                        retry = Some((addr, Instant::now() + BIND_RETRY));
                    }
                }
            }
            let retry_at = retry.map(|(_, at)| at);
            tokio::select! {
                _ = stop.cancelled() => break,
                changed = self.config.changed() => {
                    if changed.is_err() {
                        stop.cancelled().await;
                        break;
                    }
                }
                _ = tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)),
                    if retry_at.is_some() => {}
            }
        }
        if let Some(b) = current {
            b.end().await;
        }
        self.bound.send_replace(None);
    }

    /// Binds UDP at `addr` and TCP on the same address and port, and
    /// starts their loops.
    async fn bind(&self, addr: SocketAddr) -> std::io::Result<Binding> {
        let udp = UdpSocket::bind(addr).await?;
        let local = udp.local_addr()?;
        let tcp = TcpListener::bind(local).await?;
        let upstreams = forward::upstreams_except(&self.upstreams, Some(local));
        tracing::info!(listener = self.listener, %local, upstreams = ?upstreams, "mesh DNS: listening (UDP and TCP)");
        let serving = Serving {
            config: self.config.clone(),
            listener: self.listener,
            upstreams: upstreams.into(),
            metrics: self.metrics.clone(),
            stop: CancellationToken::new(),
            tasks: TaskTracker::new(),
        };
        serving
            .tasks
            .spawn(udp::serve(Arc::new(udp), serving.clone()));
        serving.tasks.spawn(tcp::serve(tcp, serving.clone()));
        self.bound.send_replace(Some(local));
        Ok(Binding {
            want: addr,
            stop: serving.stop,
            tasks: serving.tasks,
        })
    }
}

#[cfg(test)]
mod tests;
