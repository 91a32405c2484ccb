//! The fleet: N simulated proxies spread over C HTTP/2 connections.
//!
//! Owns the proxies' states while they are stopped, the running tasks
//! (one [`JoinSet`] and one cancellation token per start) and the event
//! receiver. Stopping cancels every stream and drops every connection, and
//! gives each proxy's state back, so the next start can resume (Envoy
//! reconnecting) or begin empty (Envoy restarting).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use anyhow::Context;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::state::{ClientKind, ProxyState};
use crate::stream::{self, Counters, Event, Goal, ProxyId, Shared};

/// Where and how to connect.
#[derive(Debug, Clone)]
pub(crate) struct FleetConfig {
    /// xDS URL, e.g. `https://127.0.0.1:5678`.
    pub(crate) xds_url: String,
    /// The cp-tls CA (PEM).
    pub(crate) ca_pem: String,
    /// TLS server name to verify.
    pub(crate) domain: String,
    /// Number of HTTP/2 connections the streams share.
    pub(crate) connections: usize,
    /// Mesh name.
    pub(crate) mesh: String,
    /// Client kind announced.
    pub(crate) client: ClientKind,
}

/// A snapshot of the protocol counters.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CounterSnapshot {
    /// Responses received.
    pub(crate) responses: u64,
    /// Resources received.
    pub(crate) resources: u64,
    /// Resources received with the version already held.
    pub(crate) unchanged: u64,
    /// EDS/SDS resources received without subscription.
    pub(crate) unsolicited: u64,
    /// Streams opened.
    pub(crate) streams: u64,
}

impl CounterSnapshot {
    fn of(c: &Counters) -> Self {
        Self {
            responses: c.responses.load(Relaxed),
            resources: c.resources.load(Relaxed),
            unchanged: c.unchanged.load(Relaxed),
            unsolicited: c.unsolicited.load(Relaxed),
            streams: c.streams.load(Relaxed),
        }
    }

    /// `self - earlier`.
    pub(crate) fn since(self, earlier: Self) -> Self {
        Self {
            responses: self.responses - earlier.responses,
            resources: self.resources - earlier.resources,
            unchanged: self.unchanged - earlier.unchanged,
            unsolicited: self.unsolicited - earlier.unsolicited,
            streams: self.streams - earlier.streams,
        }
    }
}

struct Running {
    cancel: CancellationToken,
    tasks: JoinSet<(usize, ProxyState)>,
}

/// N proxies and their event stream.
pub(crate) struct Fleet {
    config: FleetConfig,
    shared: Arc<Shared>,
    ids: Vec<Arc<ProxyId>>,
    states: Vec<ProxyState>,
    running: Option<Running>,
    starts: Vec<Instant>,
    events: mpsc::UnboundedReceiver<Event>,
    /// Stream failures and NACKs seen so far, by message.
    pub(crate) errors: BTreeMap<String, u64>,
}

impl Fleet {
    /// A stopped fleet of one proxy per token (proxy `i` is `p-i`).
    pub(crate) fn new(config: FleetConfig, tokens: Vec<String>) -> anyhow::Result<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            mesh: config.mesh.clone(),
            client: config.client,
            goal: Default::default(),
            events: tx,
            counters: Counters::default(),
        });
        let ids = tokens
            .into_iter()
            .enumerate()
            .map(|(index, t)| {
                let bearer = format!("Bearer {t}")
                    .parse()
                    .context("token is not a valid header value")?;
                Ok(Arc::new(ProxyId { index, bearer }))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let states = ids.iter().map(|_| ProxyState::default()).collect();
        Ok(Self {
            config,
            shared,
            ids,
            states,
            running: None,
            starts: Vec::new(),
            events: rx,
            errors: BTreeMap::new(),
        })
    }

    /// The client kind the proxies announce.
    pub(crate) fn client(&self) -> ClientKind {
        self.config.client
    }

    /// Number of proxies.
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }

    /// Sets what proxies must hold to report ready.
    pub(crate) fn set_goal(&self, goal: Goal) {
        *self.shared.goal.write().expect("goal lock") = goal;
    }

    /// The protocol counters now.
    pub(crate) fn counters(&self) -> CounterSnapshot {
        CounterSnapshot::of(&self.shared.counters)
    }

    /// States (meaningful while stopped).
    pub(crate) fn states(&self) -> &[ProxyState] {
        &self.states
    }

    /// When each proxy was scheduled to (re)connect by the last start.
    pub(crate) fn starts(&self) -> &[Instant] {
        &self.starts
    }

    /// Forgets everything the proxies hold (Envoy restarting).
    pub(crate) fn reset(&mut self) {
        assert!(self.running.is_none(), "reset while running");
        self.states = self.ids.iter().map(|_| ProxyState::default()).collect();
    }

    fn channels(&self) -> anyhow::Result<Vec<Channel>> {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(&self.config.ca_pem))
            .domain_name(self.config.domain.clone());
        // Several comma-separated URLs (control-plane replicas): the
        // connections, and so the proxies, are spread over them evenly.
        let urls: Vec<&str> = self.config.xds_url.split(',').map(str::trim).collect();
        (0..self.config.connections)
            .map(|c| {
                let url = urls[c % urls.len()];
                Ok(Endpoint::from_shared(url.to_owned())
                    .with_context(|| format!("--xds {url:?} is not a URL"))?
                    .tls_config(tls.clone())
                    .context("TLS configuration")?
                    .tcp_nodelay(true)
                    .connect_lazy())
            })
            .collect()
    }

    /// Starts every proxy on fresh connections, proxy `i` at
    /// `now + spread * i / N`. Returns the start instant.
    pub(crate) fn start(&mut self, spread: Duration) -> anyhow::Result<Instant> {
        assert!(self.running.is_none(), "start while running");
        let channels = self.channels()?;
        let cancel = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let n = self.ids.len().max(1) as u32;
        let t0 = Instant::now();
        let states = std::mem::take(&mut self.states);
        self.starts.clear();
        for (i, state) in states.into_iter().enumerate() {
            let start = t0 + spread * i as u32 / n;
            self.starts.push(start);
            tasks.spawn(stream::run(
                self.ids[i].clone(),
                self.shared.clone(),
                channels[i % channels.len()].clone(),
                state,
                start,
                cancel.clone(),
            ));
        }
        self.running = Some(Running { cancel, tasks });
        Ok(t0)
    }

    /// Cancels every stream, drops every connection and takes the states back.
    pub(crate) async fn stop(&mut self) {
        let Some(mut running) = self.running.take() else {
            return;
        };
        running.cancel.cancel();
        let mut states: Vec<Option<ProxyState>> = self.ids.iter().map(|_| None).collect();
        while let Some(joined) = running.tasks.join_next().await {
            match joined {
                Ok((i, s)) => states[i] = Some(s),
                Err(e) => {
                    *self
                        .errors
                        .entry(format!("proxy task failed: {e}"))
                        .or_default() += 1
                }
            }
        }
        self.states = states.into_iter().map(Option::unwrap_or_default).collect();
    }

    /// Waits until every proxy reported ready for `round`, or `deadline`.
    /// Returns when each proxy got there (`None`: not by the deadline).
    pub(crate) async fn wait_round(
        &mut self,
        round: u32,
        deadline: Instant,
        label: &str,
    ) -> Vec<Option<Instant>> {
        let n = self.ids.len();
        let mut at = vec![None; n];
        let mut ready = 0;
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        tick.tick().await;
        while ready < n {
            tokio::select! {
                ev = self.events.recv() => match ev {
                    Some(Event::Ready { proxy, round: r, at: t }) if r == round => {
                        if at[proxy].is_none() {
                            at[proxy] = Some(t);
                            ready += 1;
                        }
                    }
                    Some(Event::Ready { .. }) => {}
                    Some(Event::StreamEnded { reason }) => self.note(reason),
                    Some(Event::Nack { detail }) => self.note(format!("NACK sent: {detail}")),
                    None => break,
                },
                _ = tokio::time::sleep_until(deadline) => break,
                _ = tick.tick() => eprintln!("  {label}: {ready}/{n} ready"),
            }
        }
        at
    }

    /// Records events that arrived outside a round (errors only).
    pub(crate) fn drain(&mut self) {
        while let Ok(ev) = self.events.try_recv() {
            match ev {
                Event::Ready { .. } => {}
                Event::StreamEnded { reason } => self.note(reason),
                Event::Nack { detail } => self.note(format!("NACK sent: {detail}")),
            }
        }
    }

    fn note(&mut self, message: String) {
        // Admission refusals differ only in their retry hint; count them as one.
        let mut message = match message.split_once("; retry in ") {
            Some((head, _)) => format!("{head}; retry in <hint>"),
            None => message,
        };
        message.truncate(240);
        *self.errors.entry(message).or_default() += 1;
    }
}
