//! One simulated Envoy's delta ADS stream (`DeltaAggregatedResources`).
//!
//! Acts like Envoy: subscribes to CDS and LDS as wildcards, then to the EDS
//! and SDS names the received Clusters and Listeners reference; ACKs every
//! response (NACKs one that does not decode); on reconnect sends what it
//! holds as `initial_resource_versions`. After each response it checks the
//! fleet's current [`Goal`] and reports [`Event::Ready`] once per round.
//!
//! It never retries faster than Envoy's base backoff, and it stops only
//! when its cancellation token fires, returning its state to the owner.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use envoy_types::pb::google::rpc::Status;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

use crate::resources;
use crate::state::{ClientKind, ProxyState, SubscriptionChange};

/// What every proxy of a round must hold before it reports ready.
#[derive(Debug, Clone, Default)]
pub(crate) struct Goal {
    /// Round number (0 = initial configuration).
    pub(crate) round: u32,
    /// An endpoint the `backend` load assignment must contain.
    pub(crate) endpoint: Option<(String, u32)>,
}

/// What a proxy reports to the fleet.
#[derive(Debug)]
pub(crate) enum Event {
    /// Proxy `proxy` holds what round `round` asks for since `at`.
    Ready {
        /// Proxy index.
        proxy: usize,
        /// The round.
        round: u32,
        /// When the response completing it was ACKed.
        at: Instant,
    },
    /// A stream ended without being cancelled, or could not start.
    StreamEnded {
        /// Why (gRPC status code and message).
        reason: String,
    },
    /// The proxy NACKed a response.
    Nack {
        /// The error detail sent.
        detail: String,
    },
}

/// Protocol counters shared by all proxies.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Responses received.
    pub(crate) responses: AtomicU64,
    /// Resources received.
    pub(crate) resources: AtomicU64,
    /// Resources received with the version already held.
    pub(crate) unchanged: AtomicU64,
    /// EDS/SDS resources received without a subscription.
    pub(crate) unsolicited: AtomicU64,
    /// Streams opened.
    pub(crate) streams: AtomicU64,
}

/// What all proxies of a fleet share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Mesh name (first part of `node.id`).
    pub(crate) mesh: String,
    /// Client kind announced.
    pub(crate) client: ClientKind,
    /// The current goal.
    pub(crate) goal: RwLock<Goal>,
    /// Where events go.
    pub(crate) events: mpsc::UnboundedSender<Event>,
    /// Protocol counters.
    pub(crate) counters: Counters,
}

/// One proxy's identity on the wire.
#[derive(Debug)]
pub(crate) struct ProxyId {
    /// Index in the fleet.
    pub(crate) index: usize,
    /// `authorization` header value.
    pub(crate) bearer: MetadataValue<tonic::metadata::Ascii>,
}

fn now_unix() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn node(shared: &Shared, index: usize) -> Node {
    let client = Value {
        kind: Some(Kind::StringValue(shared.client.as_str().to_owned())),
    };
    Node {
        id: format!("{}.p-{index}", shared.mesh),
        cluster: "app".to_owned(),
        metadata: Some(Struct {
            fields: HashMap::from([(meshlink_proto::CLIENT_METADATA_KEY.to_owned(), client)]),
        }),
        user_agent_name: "xds-load".to_owned(),
        ..Default::default()
    }
}

/// Runs proxy `id` from `start` until `cancel` fires, reconnecting after
/// failures; returns its state.
pub(crate) async fn run(
    id: Arc<ProxyId>,
    shared: Arc<Shared>,
    channel: Channel,
    mut state: ProxyState,
    start: Instant,
    cancel: CancellationToken,
) -> (usize, ProxyState) {
    tokio::select! {
        _ = cancel.cancelled() => return (id.index, state),
        _ = tokio::time::sleep_until(start) => {}
    }
    loop {
        let reason = match stream_once(&id, &shared, &channel, &mut state, &cancel).await {
            None => return (id.index, state),
            Some(reason) => reason,
        };
        let _ = shared.events.send(Event::StreamEnded { reason });
        // Envoy's default backoff: 500 ms base, jittered.
        let jitter = Duration::from_millis(500 + (id.index as u64 * 37) % 500);
        tokio::select! {
            _ = cancel.cancelled() => return (id.index, state),
            _ = tokio::time::sleep(jitter) => {}
        }
    }
}

fn request(type_url: &str) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        type_url: type_url.to_owned(),
        ..Default::default()
    }
}

fn subscription(type_url: &str, change: SubscriptionChange) -> Option<DeltaDiscoveryRequest> {
    if change == SubscriptionChange::default() {
        return None;
    }
    Some(DeltaDiscoveryRequest {
        resource_names_subscribe: change.subscribe,
        resource_names_unsubscribe: change.unsubscribe,
        ..request(type_url)
    })
}

/// The opening requests: wildcard CDS (with the node) and LDS, then the
/// EDS and SDS names already known; each with the versions held.
fn opening(shared: &Shared, id: &ProxyId, state: &ProxyState) -> Vec<DeltaDiscoveryRequest> {
    let mut out = Vec::with_capacity(4);
    for ty in [resources::CLUSTER, resources::LISTENER] {
        out.push(DeltaDiscoveryRequest {
            initial_resource_versions: state.versions_of(ty),
            ..request(ty)
        });
    }
    out[0].node = Some(node(shared, id.index));
    for (ty, names) in [
        (resources::ENDPOINTS, &state.sub_eds),
        (resources::SECRET, &state.sub_sds),
    ] {
        if !names.is_empty() {
            out.push(DeltaDiscoveryRequest {
                resource_names_subscribe: names.iter().cloned().collect(),
                initial_resource_versions: state.versions_of(ty),
                ..request(ty)
            });
        }
    }
    out
}

/// One stream; `None` when cancelled, else why it ended.
async fn stream_once(
    id: &ProxyId,
    shared: &Shared,
    channel: &Channel,
    state: &mut ProxyState,
    cancel: &CancellationToken,
) -> Option<String> {
    let (tx, rx) = mpsc::channel(16);
    for req in opening(shared, id, state) {
        tx.send(req).await.ok()?;
    }
    let mut req = tonic::Request::new(ReceiverStream::new(rx));
    req.metadata_mut()
        .insert("authorization", id.bearer.clone());
    let mut client =
        AggregatedDiscoveryServiceClient::new(channel.clone()).max_decoding_message_size(64 << 20);
    shared.counters.streams.fetch_add(1, Relaxed);
    let started = tokio::select! {
        _ = cancel.cancelled() => return None,
        r = client.delta_aggregated_resources(req) => r,
    };
    let mut responses = match started {
        Ok(r) => r.into_inner(),
        Err(s) => return Some(format!("open: {:?}: {}", s.code(), s.message())),
    };
    loop {
        let msg = tokio::select! {
            _ = cancel.cancelled() => return None,
            m = responses.message() => m,
        };
        match msg {
            Ok(Some(resp)) => {
                if handle(id, shared, state, &tx, resp).await.is_err() {
                    return Some("request stream closed".to_owned());
                }
            }
            Ok(None) => return Some("server ended the stream".to_owned()),
            Err(s) => return Some(format!("{:?}: {}", s.code(), s.message())),
        }
    }
}

type SendError = mpsc::error::SendError<DeltaDiscoveryRequest>;

async fn handle(
    id: &ProxyId,
    shared: &Shared,
    state: &mut ProxyState,
    tx: &mpsc::Sender<DeltaDiscoveryRequest>,
    resp: DeltaDiscoveryResponse,
) -> Result<(), SendError> {
    let c = &shared.counters;
    c.responses.fetch_add(1, Relaxed);
    c.resources.fetch_add(resp.resources.len() as u64, Relaxed);
    let mut ack = DeltaDiscoveryRequest {
        response_nonce: resp.nonce.clone(),
        ..request(&resp.type_url)
    };
    match state.apply(&resp) {
        Ok(stats) => {
            c.unchanged.fetch_add(stats.unchanged, Relaxed);
            c.unsolicited.fetch_add(stats.unsolicited, Relaxed);
        }
        Err(detail) => {
            ack.error_detail = Some(Status {
                code: tonic::Code::InvalidArgument as i32,
                message: detail.clone(),
                details: Vec::new(),
            });
            let _ = shared.events.send(Event::Nack { detail });
        }
    }
    tx.send(ack).await?;
    if matches!(
        resp.type_url.as_str(),
        resources::CLUSTER | resources::LISTENER
    ) {
        let eds = state.eds_change();
        let sds = state.sds_change(shared.client);
        for req in [
            subscription(resources::ENDPOINTS, eds),
            subscription(resources::SECRET, sds),
        ]
        .into_iter()
        .flatten()
        {
            tx.send(req).await?;
        }
    }
    let at = Instant::now();
    let goal = shared.goal.read().expect("goal lock").clone();
    if state.ready_round.is_none_or(|r| r < goal.round) {
        let reached = state.complete(shared.client, now_unix())
            && goal.endpoint.as_ref().is_none_or(|e| state.has_endpoint(e));
        if reached {
            state.ready_round = Some(goal.round);
            let _ = shared.events.send(Event::Ready {
                proxy: id.index,
                round: goal.round,
                at,
            });
        }
    }
    Ok(())
}
