//! The control-plane candidates one proxy process shares between its
//! loops (delta ADS, Certify, RouterStatus), and which one to try next.
//!
//! Owns the rotation. The candidates are the `--cp` URLs in order, a URL
//! whose host is a DNS name standing for each address it resolves to (the
//! certificate is still verified against the name). Every loop asks for
//! the current candidate ([`CpEndpoints::attempt`]) and reports how the
//! attempt went. A failure moves the rotation to the next candidate,
//! round-robin from a random first candidate per process, so a fleet
//! spreads over the control planes. Names are resolved again after each
//! full turn, so a control plane that moved is found without a restart.
//!
//! Why several loops never skip a good candidate: every [`Attempt`]
//! carries the rotation's epoch, and only a failure of the current epoch
//! moves the rotation (and bumps the epoch). When the control plane goes
//! away, the xDS stream and a Certify call both fail on the same
//! candidate, but only the first report moves on; the second finds the
//! rotation already past the candidate it tried.
//!
//! It never sleeps and never connects: callers keep their own backoff,
//! which [`Pace`] tells them to skip for one immediate move after a
//! control plane that is going away.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::failure::{FailureKind, Pace};
use super::rotation::{Candidate, Rotation};
use super::urls::CpUrl;

/// How long resolving one `--cp` name may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// `{url}`: one `--cp` URL.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UrlLabels {
    /// The URL as given to `--cp`.
    pub url: String,
}

/// The control-plane candidates of one process; clones share them.
#[derive(Debug, Clone)]
pub struct CpEndpoints {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    urls: Vec<CpUrl>,
    /// Where the first turn starts (random per process).
    first: usize,
    rotation: Mutex<Rotation>,
    /// `cp_connected{url}`: healthy xDS streams to the URL (0 or 1).
    connected: Family<UrlLabels, Gauge>,
    /// `cp_failovers_total`: moves to another candidate after a failure.
    failovers: Counter,
}

// === impl CpEndpoints ===

impl CpEndpoints {
    /// The candidates of `urls`, starting at a random one. `urls` must not
    /// be empty ([`super::parse_cp_values`] never returns an empty list).
    pub fn new(urls: Vec<CpUrl>) -> Self {
        Self::starting_at(urls, rand::random::<u32>() as usize)
    }

    /// The candidates of `urls`, starting at candidate `first` (modulo
    /// their number); for tests and tools that need a known order.
    pub fn starting_at(urls: Vec<CpUrl>, first: usize) -> Self {
        assert!(!urls.is_empty(), "--cp validation keeps at least one URL");
        let connected = Family::<UrlLabels, Gauge>::default();
        for url in &urls {
            let _ = connected.get_or_create(&UrlLabels {
                url: url.to_string(),
            });
        }
        CpEndpoints {
            shared: Arc::new(Shared {
                urls,
                first,
                rotation: Mutex::new(Rotation::default()),
                connected,
                failovers: Counter::default(),
            }),
        }
    }

    /// The URLs, in `--cp` order.
    pub fn urls(&self) -> &[CpUrl] {
        &self.shared.urls
    }

    /// Registers `cp_connected{url}` (every URL at 0 from start-up) and
    /// `cp_failovers_total` under the caller's prefix.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cp_connected",
            "1 while the xDS stream to this control-plane URL is healthy",
            self.shared.connected.clone(),
        );
        registry.register(
            "cp_failovers",
            "Moves to another control-plane candidate after a failed attempt",
            self.shared.failovers.clone(),
        );
    }

    /// The candidate to try now (resolving names first when due).
    pub async fn attempt(&self) -> Attempt {
        let due = self.lock().resolve_due();
        if due {
            let fresh = resolve(&self.shared.urls).await;
            self.lock().install(fresh, self.shared.first);
        }
        let rotation = self.lock();
        let (candidate, position, total, epoch) = rotation.current();
        Attempt {
            endpoints: self.clone(),
            url: self.shared.urls[candidate.url].clone(),
            candidate,
            position: position + 1,
            total,
            epoch,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Rotation> {
        self.shared.rotation.lock().expect("cp rotation lock")
    }
}

impl std::fmt::Display for CpEndpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<&str> = self.shared.urls.iter().map(CpUrl::as_str).collect();
        f.write_str(&urls.join(","))
    }
}

/// Every URL's candidates: an IP address URL is itself; a name stands for
/// each address it resolves to, or for itself when it does not resolve
/// (the connect attempt then reports the DNS error).
async fn resolve(urls: &[CpUrl]) -> Vec<Candidate> {
    let lookups = urls.iter().map(|url| async move {
        if url.ip().is_some() {
            return Vec::new();
        }
        let lookup = tokio::net::lookup_host((url.host(), url.port()));
        match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
            Ok(Ok(found)) => {
                let mut addrs: Vec<SocketAddr> = Vec::new();
                for addr in found {
                    if !addrs.contains(&addr) {
                        addrs.push(addr);
                    }
                }
                addrs
            }
            Ok(Err(_)) | Err(_) => Vec::new(),
        }
    });
    let resolved = futures::future::join_all(lookups).await;
    resolved
        .into_iter()
        .enumerate()
        .flat_map(|(url, addrs)| {
            if addrs.is_empty() {
                vec![Candidate { url, addr: None }]
            } else {
                addrs
                    .into_iter()
                    .map(|addr| Candidate {
                        url,
                        addr: Some(addr),
                    })
                    .collect()
            }
        })
        .collect()
}

/// One try of one candidate; report how it went with [`Attempt::failed`]
/// or [`Attempt::succeeded`].
#[derive(Debug, Clone)]
pub struct Attempt {
    endpoints: CpEndpoints,
    url: CpUrl,
    candidate: Candidate,
    /// 1-based position among the candidates.
    position: usize,
    total: usize,
    epoch: u64,
}

// === impl Attempt ===

impl Attempt {
    /// The `--cp` URL tried.
    pub fn url(&self) -> &CpUrl {
        &self.url
    }

    /// The address to connect to, when the URL's name was resolved (TLS
    /// still verifies the URL's host); `None`: connect to the URL itself.
    pub fn addr(&self) -> Option<SocketAddr> {
        self.candidate.addr
    }

    /// Reports a failure: the rotation moves to the next candidate (unless
    /// another loop already moved it past this one). [`Pace::Immediate`]
    /// when the control plane is going away and the next candidate has not
    /// failed in this run of failures; the caller then tries again at once.
    pub fn failed(&self, kind: FailureKind, why: &str) -> Pace {
        let shared = &self.endpoints.shared;
        let (outcome, next) = {
            let mut rotation = self.endpoints.lock();
            let outcome = rotation.failed(&self.candidate, self.epoch, kind);
            (outcome, rotation.current())
        };
        if outcome.advanced {
            shared.failovers.inc();
        }
        if outcome.advanced && outcome.first_in_row {
            let (next, position, total, _) = next;
            let to = describe(
                &shared.urls[next.url],
                &next,
                position + 1,
                total,
                &shared.urls,
            );
            tracing::info!(from = %self, to = %to, error = %why, "control plane attempt failed; the next attempt goes to the next control-plane candidate");
        }
        outcome.pace
    }

    /// Reports a success (a stream that delivered a response, a Certify
    /// answer): a later failure starts a new run of failures.
    pub fn succeeded(&self) {
        self.endpoints.lock().succeeded();
    }

    /// Marks the URL connected (`cp_connected{url} 1`) until the guard is
    /// dropped; the xDS client holds it while its stream is healthy.
    pub fn hold(&self) -> ConnectedGuard {
        let gauge = self
            .endpoints
            .shared
            .connected
            .get_or_create(&UrlLabels {
                url: self.url.to_string(),
            })
            .clone();
        gauge.inc();
        ConnectedGuard { gauge }
    }
}

impl std::fmt::Display for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls = &self.endpoints.shared.urls;
        let text = describe(&self.url, &self.candidate, self.position, self.total, urls);
        f.write_str(&text)
    }
}

/// `https://b:5678 (2 of 3 URLs)`, `https://cp:5678 at 10.0.0.2:5678 (2 of
/// 4 control-plane addresses)`, or just the URL when it is the only one.
fn describe(url: &CpUrl, c: &Candidate, position: usize, total: usize, urls: &[CpUrl]) -> String {
    let mut text = url.to_string();
    if let Some(addr) = c.addr {
        text.push_str(&format!(" at {addr}"));
    }
    if total > 1 {
        let what = if total == urls.len() {
            "URLs"
        } else {
            "control-plane addresses"
        };
        text.push_str(&format!(" ({position} of {total} {what})"));
    }
    text
}

/// Keeps one URL's `cp_connected` gauge up while held.
#[derive(Debug)]
pub struct ConnectedGuard {
    gauge: Gauge,
}

impl Drop for ConnectedGuard {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

#[cfg(test)]
#[path = "endpoints_tests.rs"]
mod tests;
