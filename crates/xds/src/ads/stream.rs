//! One ADS stream's task: owner lease, first-request checks, the request /
//! state loop, the renewal timer, and cleanup that touches only what this
//! stream owns.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tonic::Status;

use super::delta::DeltaEngine;
use super::sotw::SotwEngine;
use super::types::{Outcome, TypeState};
use super::{ProxyState, ResponseStream, Shared};
use crate::owner::{OwnerId, OwnerLease, ProxyKey};
use crate::translate::ClientKind;

/// Responses buffered per stream before the stream task waits for the
/// client to read.
const OUTPUT_BUFFER: usize = 16;

/// After asking the hub for a new identity, how long the renewal timer
/// waits for it before asking again.
const RENEW_RETRY: Duration = Duration::from_secs(5);

/// The protocol-specific half of a stream (SotW or delta).
pub(crate) trait Engine: Send + 'static {
    type Req: Send + 'static;
    type Resp: Send + 'static;
    /// `sotw` or `delta`, for reports and metrics.
    const PROTOCOL: &'static str;
    fn node(req: &Self::Req) -> Option<&Node>;
    fn type_of(resp: &Self::Resp) -> &str;
    fn on_request(
        &mut self,
        req: &Self::Req,
        state: Option<&ProxyState>,
    ) -> Result<Outcome<Self::Resp>, Status>;
    fn on_state(&mut self, prev: Option<&ProxyState>, state: &ProxyState) -> Vec<Self::Resp>;
    fn types(&self) -> &BTreeMap<&'static str, TypeState>;
}

impl Engine for SotwEngine {
    type Req = DiscoveryRequest;
    type Resp = DiscoveryResponse;
    const PROTOCOL: &'static str = "sotw";
    fn node(req: &DiscoveryRequest) -> Option<&Node> {
        req.node.as_ref()
    }
    fn type_of(resp: &DiscoveryResponse) -> &str {
        &resp.type_url
    }
    fn on_request(
        &mut self,
        req: &DiscoveryRequest,
        state: Option<&ProxyState>,
    ) -> Result<Outcome<DiscoveryResponse>, Status> {
        SotwEngine::on_request(self, req, state)
    }
    fn on_state(
        &mut self,
        prev: Option<&ProxyState>,
        state: &ProxyState,
    ) -> Vec<DiscoveryResponse> {
        SotwEngine::on_state(self, prev, state)
    }
    fn types(&self) -> &BTreeMap<&'static str, TypeState> {
        SotwEngine::types(self)
    }
}

impl Engine for DeltaEngine {
    type Req = DeltaDiscoveryRequest;
    type Resp = DeltaDiscoveryResponse;
    const PROTOCOL: &'static str = "delta";
    fn node(req: &DeltaDiscoveryRequest) -> Option<&Node> {
        req.node.as_ref()
    }
    fn type_of(resp: &DeltaDiscoveryResponse) -> &str {
        &resp.type_url
    }
    fn on_request(
        &mut self,
        req: &DeltaDiscoveryRequest,
        state: Option<&ProxyState>,
    ) -> Result<Outcome<DeltaDiscoveryResponse>, Status> {
        DeltaEngine::on_request(self, req, state)
    }
    fn on_state(
        &mut self,
        _prev: Option<&ProxyState>,
        state: &ProxyState,
    ) -> Vec<DeltaDiscoveryResponse> {
        DeltaEngine::on_state(self, state)
    }
    fn types(&self) -> &BTreeMap<&'static str, TypeState> {
        DeltaEngine::types(self)
    }
}

/// Registers the stream as owner of `key` and spawns its task.
pub(crate) fn open<E, I>(
    shared: Arc<Shared>,
    key: ProxyKey,
    engine: E,
    requests: I,
) -> (ResponseStream<E::Resp>, JoinHandle<()>)
where
    E: Engine,
    I: Stream<Item = Result<E::Req, Status>> + Send + Unpin + 'static,
{
    let (tx, mut rx) = mpsc::channel(OUTPUT_BUFFER);
    // Registration happens here, synchronously: the newest stream owns the
    // key from the moment it is opened.
    let lease = shared.registry.register(key.clone());
    shared
        .inspector
        .opened(&key, lease.id(), E::PROTOCOL, &shared.instance);
    shared.metrics.stream_opened(E::PROTOCOL);
    tracing::debug!(proxy = %key, owner = %lease.id(), protocol = E::PROTOCOL, "ADS stream opened");
    let task = tokio::spawn(run(shared, lease, engine, requests, tx));
    let responses = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    (Box::pin(responses), task)
}

/// Why the loop ended.
enum End {
    /// The client closed the stream or went away.
    Closed,
    /// End with this status.
    Fail(Status),
}

async fn run<E, I>(
    shared: Arc<Shared>,
    lease: OwnerLease<ProxyState>,
    mut engine: E,
    mut requests: I,
    tx: mpsc::Sender<Result<E::Resp, Status>>,
) where
    E: Engine,
    I: Stream<Item = Result<E::Req, Status>> + Send + Unpin + 'static,
{
    let key = lease.key().clone();
    let id = lease.id();
    let mut state_rx = lease.subscribe();
    let mut current: Option<Arc<ProxyState>> = None;
    let mut connected = false;
    let end = loop {
        let responses = tokio::select! {
            biased;
            () = lease.cancelled() => break End::Fail(Status::aborted(format!(
                "a newer stream for proxy {key} took over from this one ({id}); \
                 this happens when the proxy reconnects, and the newer stream is served"
            ))),
            changed = state_rx.changed(), if connected => {
                if changed.is_err() {
                    break End::Fail(Status::aborted(format!("proxy {key} is no longer owned by this stream")));
                }
                let next = state_rx.borrow_and_update().clone();
                match next {
                    Some(state) => {
                        let out = engine.on_state(current.as_deref(), &state);
                        report_certificate(&shared, &key, id, &state);
                        current = Some(state);
                        out
                    }
                    None => Vec::new(),
                }
            }
            req = requests.next() => match req {
                None => break End::Closed,
                Some(Err(status)) => {
                    tracing::debug!(proxy = %key, %status, "ADS stream read failed");
                    break End::Closed;
                }
                Some(Ok(req)) => {
                    if !connected {
                        let client = match first_request(&key, E::node(&req)) {
                            Ok(c) => c,
                            Err(status) => break End::Fail(status),
                        };
                        connected = true;
                        shared.inspector.update(&key, id, |r| r.client = Some(client.as_str()));
                        spawn_renewal_timer(&shared, &lease);
                        current = state_rx.borrow_and_update().clone();
                        if let Some(state) = &current {
                            report_certificate(&shared, &key, id, state);
                        }
                        shared.hub.connected(key.clone(), id, client);
                    }
                    match engine.on_request(&req, current.as_deref()) {
                        Ok(outcome) => {
                            for (t, latency) in outcome.acks {
                                if let Some(l) = latency {
                                    shared.metrics.acked_after(l);
                                }
                                tracing::trace!(proxy = %key, type_url = t, "ACK");
                            }
                            for (t, detail) in outcome.nacks {
                                shared.metrics.nacked(super::short_type(t));
                                tracing::info!(proxy = %key, type_url = t, detail, "proxy rejected configuration (NACK); keeping its last good configuration until the config changes");
                            }
                            outcome.responses
                        }
                        Err(status) => break End::Fail(status),
                    }
                }
            },
        };
        if !send_all::<E>(&shared, &tx, responses).await {
            break End::Closed;
        }
        shared
            .inspector
            .set_types(&key, id, engine.types().iter().map(|(t, s)| (t, &s.report)));
    };
    let reason = match end {
        End::Closed => None,
        End::Fail(status) => {
            shared.metrics.rejected();
            tracing::debug!(proxy = %key, owner = %id, %status, "ADS stream ended with an error");
            let reason = status.message().to_owned();
            let _ = tx.send(Err(status)).await;
            Some(reason)
        }
    };
    // Cleanup, all of it compare-and-delete: a newer owner is untouched.
    shared.inspector.closed(&key, id, reason);
    shared.hub.disconnected(key.clone(), id);
    if lease.release() {
        shared.metrics.certificate(&key, None);
    }
    shared.metrics.stream_closed(E::PROTOCOL);
    tracing::debug!(proxy = %key, owner = %id, "ADS stream closed");
}

async fn send_all<E: Engine>(
    shared: &Shared,
    tx: &mpsc::Sender<Result<E::Resp, Status>>,
    responses: Vec<E::Resp>,
) -> bool {
    for resp in responses {
        shared.metrics.pushed(super::short_type(E::type_of(&resp)));
        if tx.send(Ok(resp)).await.is_err() {
            return false;
        }
    }
    true
}

fn report_certificate(shared: &Shared, key: &ProxyKey, id: OwnerId, state: &ProxyState) {
    let identity = state.identity.clone();
    shared
        .metrics
        .certificate(key, identity.as_ref().map(|i| i.not_after));
    shared
        .inspector
        .update(key, id, |r| r.certificate = identity);
}

/// Checks the first request's node against the credential's proxy key.
fn first_request(key: &ProxyKey, node: Option<&Node>) -> Result<ClientKind, Status> {
    let expected = format!("{}.{}", key.mesh, key.name);
    let node = node.ok_or_else(|| {
        Status::invalid_argument(format!(
            "the first request must carry node.id; set it to {expected:?} (\"<mesh>.<dataplane name>\")"
        ))
    })?;
    if node.id != expected {
        return Err(Status::permission_denied(format!(
            "node.id {:?} does not match the credential, which is for {expected:?}; \
             set node.id to \"<mesh>.<dataplane name>\" of the dataplane the token was issued for",
            node.id
        )));
    }
    ClientKind::from_node_metadata(node.metadata.as_ref())
        .map_err(|e| Status::invalid_argument(e.to_string()))
}

/// The owner's renewal timer: when the published identity reaches its
/// renewal time, asks the hub for a new one. Spawned on the lease, so it
/// dies with the owner (I1).
fn spawn_renewal_timer(shared: &Arc<Shared>, lease: &OwnerLease<ProxyState>) {
    let mut rx = lease.subscribe();
    let hub = shared.hub.clone();
    let clock = shared.clock;
    let (key, id) = (lease.key().clone(), lease.id());
    lease.spawn(async move {
        loop {
            let renew_at = rx.borrow_and_update().as_ref().and_then(|s| s.renew_at);
            let Some(at) = renew_at else {
                if rx.changed().await.is_err() {
                    return;
                }
                continue;
            };
            let wait = at.duration_since(clock.now()).unwrap_or(Duration::ZERO);
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(wait) => {
                    tracing::debug!(proxy = %key, "identity certificate due for renewal");
                    hub.renew(key.clone(), id);
                    tokio::select! {
                        changed = rx.changed() => if changed.is_err() { return },
                        () = tokio::time::sleep(RENEW_RETRY) => {}
                    }
                }
            }
        }
    });
}
