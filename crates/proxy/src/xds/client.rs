//! The delta ADS client: one stream to the control plane at a time,
//! reconnecting with jittered exponential backoff. A control plane at its
//! admission limit refuses the stream with `RESOURCE_EXHAUSTED` and a
//! `retry-after-ms` hint; the client then waits at least the hint, plus
//! jitter, so refused proxies do not come back in lockstep.
//!
//! Owns the xDS session. Each response goes through validation
//! ([`super::apply`]); the accepted configuration is published on a
//! `watch` channel and the response is ACKed, or NACKed with the detail of
//! every rejected resource (the good ones still apply). On reconnect it
//! sends `initial_resource_versions` for what it holds, which never
//! includes a rejected version. It never clears the configuration because
//! the control plane went away (I3): listeners keep serving the last good
//! one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse,
};
use envoy_types::pb::google::protobuf::{Struct, Value, value::Kind};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use super::apply::Rejected;
use crate::backoff::Backoff;
use crate::cp::{CpError, CpTarget, FINAL_STATUS_WAIT, FailureKind, Pace, ProxyToken};
use crate::log_limit::LogLimiter;
use crate::metrics::ProxyMetrics;

pub use super::apply::XdsModel;

/// How the client names itself in `node.id`.
#[derive(Debug, Clone)]
pub enum NodeId {
    /// A sidecar: `<mesh>.<dataplane name>`.
    Fixed(String),
    /// A router: `site.<site>`, with the site its router token names (the
    /// token file may appear after start-up, so it is read per session).
    RouterOfToken,
}

impl NodeId {
    /// The `node.id` to send with `token`.
    fn resolve(&self, token: &ProxyToken, target: &CpTarget) -> Result<String, CpError> {
        match self {
            NodeId::Fixed(id) => Ok(id.clone()),
            NodeId::RouterOfToken if token.claims.site.is_empty() => Err(CpError::Unusable {
                what: "token file",
                path: target.token_file.clone(),
                reason: "it holds a dataplane token, but a router needs its site's router token; \
                         write the output of `meshlink token router` to it"
                    .into(),
            }),
            NodeId::RouterOfToken => Ok(format!("site.{}", token.claims.site)),
        }
    }
}

/// The node metadata key and value that tell the control plane this is a
/// meshlink-proxy (CSR identity, SDS trust bundle).
const CLIENT_KIND: (&str, &str) = (
    meshlink_proto::CLIENT_METADATA_KEY,
    meshlink_proto::ClientKind::MeshlinkProxy.as_str(),
);

/// What the admin API shows about the xDS session.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct XdsStatus {
    /// Whether a stream is open and has delivered a response.
    pub connected: bool,
    /// The `--cp` URL of the healthy stream.
    pub url: Option<String>,
    /// Why the last stream or connect attempt failed (it names the URL).
    pub last_error: Option<String>,
    /// Resources rejected by the latest response of each type.
    pub rejected: Vec<Rejected>,
}

/// Shared [`XdsStatus`]; written by the client, read by the admin API.
pub type SharedXdsStatus = Arc<Mutex<XdsStatus>>;

/// The connection of the current healthy xDS stream, for the RPCs that
/// must reach the control-plane replica holding that stream (the
/// sidecar's DataplaneHealth reports: that replica owns the Dataplane's
/// status). Published while the stream is healthy, `None` in between.
#[derive(Debug, Clone)]
pub struct CpConnection {
    /// The HTTP/2 connection the ADS stream runs on (a clone shares it).
    pub channel: tonic::transport::Channel,
    /// The `authorization` value the stream was opened with.
    pub bearer: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
    /// The control plane, as the rotation names it (for logs).
    pub cp: String,
    /// Tells one stream's connection from the next one's.
    pub session: u64,
}

/// Numbers [`CpConnection::session`].
static SESSIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The client's inputs and outputs.
#[derive(Debug)]
pub struct XdsClient<M: XdsModel> {
    /// Control-plane address and credential files.
    pub target: CpTarget,
    /// `node.id`.
    pub node_id: NodeId,
    /// Where accepted configuration is published.
    pub config: watch::Sender<Arc<M>>,
    /// Session status for the admin API.
    pub status: SharedXdsStatus,
    /// Metrics.
    pub metrics: Arc<ProxyMetrics>,
    /// Where the connection of the healthy stream is published, if anyone
    /// needs it ([`CpConnection`]).
    pub connection: Option<watch::Sender<Option<CpConnection>>>,
}

impl<M: XdsModel> XdsClient<M> {
    /// Runs sessions until `cancel` fires.
    pub async fn run(self, cancel: CancellationToken) {
        let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_secs(15));
        // While the control plane stays down: the first failure, then one
        // line per 30 s with the count.
        let mut log = LogLimiter::new(crate::log_limit::REPEAT_INTERVAL);
        loop {
            let healthy = tokio::select! {
                () = cancel.cancelled() => return,
                r = self.session() => r,
            };
            self.metrics.xds_connected.set(0);
            if let Some(tx) = &self.connection {
                tx.send_replace(None);
            }
            let failure = match healthy {
                Ok(never) => match never {},
                Err(f) => f,
            };
            if failure.healthy {
                backoff.reset();
                log.reset();
            }
            let delay = match failure.pace {
                // Another control plane, and this one is going away: now.
                Pace::Immediate => Duration::ZERO,
                Pace::Backoff => {
                    let mut delay = backoff.next_delay();
                    if failure.unreachable {
                        delay = delay.min(crate::cp::UNREACHABLE_RETRY_CAP);
                    }
                    if let Some(hint) = failure.retry_after {
                        delay = delay.max(crate::backoff::after_hint(hint));
                    }
                    delay
                }
            };
            let error = failure.why;
            if let Some(failures) = log.hit(tokio::time::Instant::now()) {
                tracing::warn!(error = %error, failures, "xDS stream to the control plane lost; keeping the last good configuration and reconnecting (logged at most every 30 s while it lasts)");
            }
            {
                let mut s = self.status.lock().expect("xds status lock");
                s.connected = false;
                s.url = None;
                s.last_error = Some(error);
            }
            if delay.is_zero() {
                continue;
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    fn node(&self, id: String) -> Node {
        let kind = Value {
            kind: Some(Kind::StringValue(CLIENT_KIND.1.to_owned())),
        };
        let instance = Value {
            kind: Some(Kind::StringValue(self.target.instance.clone())),
        };
        Node {
            id,
            metadata: Some(Struct {
                fields: [
                    (CLIENT_KIND.0.to_owned(), kind),
                    (
                        meshlink_proto::instance::INSTANCE_METADATA_KEY.to_owned(),
                        instance,
                    ),
                ]
                .into_iter()
                .collect(),
            }),
            user_agent_name: "meshlink-proxy".to_owned(),
            // The mesh's current certificate lifetime, so a lowered one
            // renews this proxy's certificate early (identity.rs).
            client_features: vec![
                meshlink_proto::identity_policy::IDENTITY_POLICY_FEATURE.to_owned(),
            ],
            ..Default::default()
        }
    }

    /// One stream, until it fails.
    async fn session(&self) -> Result<std::convert::Infallible, Failure> {
        let unreachable = |e: CpError, pace: Pace| Failure {
            healthy: false,
            unreachable: e.is_unreachable(),
            why: e.to_string(),
            retry_after: None,
            pace,
        };
        let token = self
            .target
            .credentials()
            .map_err(|e| unreachable(e, Pace::Backoff))?;
        let node_id = self
            .node_id
            .resolve(&token, &self.target)
            .map_err(|e| unreachable(e, Pace::Backoff))?;
        let attempt = self.target.endpoints.attempt().await;
        let channel = match self.target.connect(&attempt).await {
            Ok(channel) => channel,
            Err(e) => {
                let pace = crate::cp::report_connect_failure(&attempt, &e);
                return Err(unreachable(e, pace));
            }
        };
        tracing::debug!(cp = %attempt, "connected; opening the xDS stream");
        // A stream that ended: the rotation moves on, and the error names
        // the control plane that ended it.
        let ended = |healthy: bool, kind: FailureKind, what: String| {
            let why = format!("the control plane at {attempt} {what}");
            Failure::answered(healthy, attempt.failed(kind, &why), why)
        };
        let stream_ended = |healthy: bool, end: Result<(), tonic::Status>| match end {
            Ok(()) => ended(healthy, FailureKind::Other, "ended the stream".into()),
            Err(s) => {
                let what = format!("ended the stream: {}", status_text(&s));
                // Another process with this identity (same token and
                // name) took the stream over: back off as after a failure
                // instead of taking it straight back, so two such
                // processes trade the stream every few seconds, not in a
                // tight loop. The control plane's Dataplane status names
                // both (DuplicateHolder).
                let healthy = healthy && !taken_over(&s);
                ended(healthy, FailureKind::of_status(&s), what)
            }
        };
        let types = M::types();
        let (tx, rx) = mpsc::channel(types.len().max(16));
        let held = self.config.borrow().clone();
        let mut node = Some(self.node(node_id));
        for ty in types {
            let request = DeltaDiscoveryRequest {
                node: node.take(),
                type_url: (*ty).to_owned(),
                initial_resource_versions: held.held_versions(ty),
                ..Default::default()
            };
            let _ = tx.try_send(request);
        }
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        let bearer = token.bearer.clone();
        request.metadata_mut().insert("authorization", token.bearer);
        let shared = channel.clone();
        let mut client =
            AggregatedDiscoveryServiceClient::new(channel).max_decoding_message_size(64 << 20);
        let mut responses = client
            .delta_aggregated_resources(request)
            .await
            .map_err(|s| Failure {
                retry_after: retry_after(&s),
                ..ended(
                    false,
                    FailureKind::of_status(&s),
                    format!("refused the stream: {}", status_text(&s)),
                )
            })?
            .into_inner();
        let mut healthy = false;
        let mut _connected = None;
        let mut rejected: HashMap<String, Vec<Rejected>> = HashMap::new();
        loop {
            let response = match responses.message().await {
                Ok(Some(r)) => r,
                Ok(None) => return Err(stream_ended(healthy, Ok(()))),
                Err(s) => return Err(stream_ended(healthy, Err(s))),
            };
            if !healthy {
                healthy = true;
                attempt.succeeded();
                _connected = Some(attempt.hold());
                self.metrics.xds_connected.set(1);
                let mut s = self.status.lock().expect("xds status lock");
                s.connected = true;
                s.url = Some(attempt.url().to_string());
                s.last_error = None;
                drop(s);
                if let Some(tx) = &self.connection {
                    tx.send_replace(Some(CpConnection {
                        channel: shared.clone(),
                        bearer: bearer.clone(),
                        cp: attempt.to_string(),
                        session: SESSIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1,
                    }));
                }
                tracing::info!(cp = %attempt, "connected to the control plane");
            }
            let ack = self.handle(&response, &mut rejected);
            if tx.send(ack).await.is_err() {
                // The request side closes when the control plane ended the
                // stream (it resets the half we send on), possibly while
                // ACKs were queued; its status, such as "shutting down", is
                // in the trailers after any responses not yet read. Read to
                // it, so a draining control plane is left as when its end
                // is read first. The unread responses cannot be ACKed; the
                // next stream asks again with the versions held.
                return Err(match final_status(&mut responses).await {
                    Some(end) => stream_ended(healthy, end),
                    None => {
                        let why = "request stream closed".to_owned();
                        Failure::answered(healthy, Pace::Backoff, why)
                    }
                });
            }
        }
    }

    /// Applies one response and returns its ACK or NACK.
    fn handle(
        &self,
        response: &DeltaDiscoveryResponse,
        rejected: &mut HashMap<String, Vec<Rejected>>,
    ) -> DeltaDiscoveryRequest {
        let ty = response.type_url.clone();
        let mut outcome = None;
        self.config.send_if_modified(|config| {
            let mut next = (**config).clone();
            let applied = next.apply(response);
            let changed = applied.changed;
            if changed {
                *config = Arc::new(next);
            }
            outcome = Some(applied);
            changed
        });
        let applied = outcome.unwrap_or_default();
        let short = ty.rsplit('.').next().unwrap_or(&ty).to_owned();
        self.metrics.xds_update(&short, applied.rejected.is_empty());
        let error_detail = (!applied.rejected.is_empty()).then(|| {
            let detail = applied
                .rejected
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            tracing::warn!(type_url = %ty, detail = %detail, "rejected configuration (NACK); keeping the last good version");
            RpcStatus {
                code: tonic::Code::InvalidArgument as i32,
                message: detail,
                details: Vec::new(),
            }
        });
        rejected.insert(ty.clone(), applied.rejected);
        self.status.lock().expect("xds status lock").rejected =
            rejected.values().flatten().cloned().collect();
        DeltaDiscoveryRequest {
            type_url: ty,
            response_nonce: response.nonce.clone(),
            error_detail,
            ..Default::default()
        }
    }
}

/// Whether `status` says a newer stream for this proxy's key took over
/// from this one: another process holds the identity, since this process
/// opens one stream at a time.
fn taken_over(status: &tonic::Status) -> bool {
    status.code() == tonic::Code::Aborted
        && status.message().contains(meshlink_proto::hints::TAKEN_OVER)
}

/// Why a session ended.
#[derive(Debug)]
struct Failure {
    /// It delivered at least one response (the backoff restarts).
    healthy: bool,
    /// The control plane was never reached (retry at least every second).
    unreachable: bool,
    /// What happened.
    why: String,
    /// The control plane's admission hint: come back no sooner than this.
    retry_after: Option<Duration>,
    /// Whether the next attempt (on the next control plane) goes at once.
    pace: Pace,
}

impl Failure {
    fn answered(healthy: bool, pace: Pace, why: String) -> Self {
        Failure {
            healthy,
            unreachable: false,
            why,
            retry_after: None,
            pace,
        }
    }
}

/// How a response stream ends once the request side is closed: `Ok` for a
/// clean end, the status it ended with, or `None` when it did not end
/// within [`FINAL_STATUS_WAIT`]. Responses still unread are skipped.
async fn final_status(
    responses: &mut tonic::Streaming<DeltaDiscoveryResponse>,
) -> Option<Result<(), tonic::Status>> {
    let skip_to_end = async {
        loop {
            match responses.message().await {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(()),
                Err(s) => return Err(s),
            }
        }
    };
    tokio::time::timeout(FINAL_STATUS_WAIT, skip_to_end)
        .await
        .ok()
}

/// The `retry-after-ms` hint of a `RESOURCE_EXHAUSTED` refusal (capped at
/// a minute, so a bad hint cannot park the proxy).
fn retry_after(s: &tonic::Status) -> Option<Duration> {
    if s.code() != tonic::Code::ResourceExhausted {
        return None;
    }
    let ms: u64 = s
        .metadata()
        .get(meshlink_proto::hints::RETRY_AFTER_MS)?
        .to_str()
        .ok()?
        .parse()
        .ok()?;
    Some(Duration::from_millis(ms).min(Duration::from_secs(60)))
}

fn status_text(s: &tonic::Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_refusal_hint_is_read_and_capped() {
        let mut s = tonic::Status::resource_exhausted("at the limit");
        s.metadata_mut().insert(
            meshlink_proto::hints::RETRY_AFTER_MS,
            "1500".parse().unwrap(),
        );
        assert_eq!(retry_after(&s), Some(Duration::from_millis(1500)));
        s.metadata_mut().insert(
            meshlink_proto::hints::RETRY_AFTER_MS,
            "999999999".parse().unwrap(),
        );
        assert_eq!(retry_after(&s), Some(Duration::from_secs(60)));
        let mut other = tonic::Status::unavailable("down");
        other
            .metadata_mut()
            .insert(meshlink_proto::hints::RETRY_AFTER_MS, "5".parse().unwrap());
        assert_eq!(
            retry_after(&other),
            None,
            "only admission refusals carry a hint"
        );
    }
}
