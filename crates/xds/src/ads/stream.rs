//! One ADS stream: first-request checks, then the owner lease, the
//! request / state loop, the renewal timer, and cleanup that touches only
//! what this stream owns. The stream ends on client close, takeover, token
//! revocation or drain, each with its own status.
//!
//! The loop runs in one of two places. On the xDS port it is the response
//! body itself ([`open_inline`]): hyper's task for the HTTP/2 stream polls
//! it, so a change wakes one task per proxy and the response is framed in
//! the same poll. Through [`super::AdsServer::serve_sotw`] (tests, tonic's
//! generated service) it is a task of its own writing into a channel
//! ([`open`]). The cleanup is the same [`Registration`] in both, run when
//! the loop ends or, if the body is dropped first, on drop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use std::sync::atomic::Ordering;

use futures::channel::mpsc;
use futures::{SinkExt, Stream, StreamExt};
use tokio::task::{AbortHandle, JoinHandle};
use tokio_stream::wrappers::WatchStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::task_tracker::TaskTrackerToken;
use tonic::Status;

use super::delta::DeltaEngine;
use super::gate::Gated;
use super::inline_body::{self, InlineBody};
use super::inspect::{Holder, TypeReports, rejected_of};
use super::revocation::TokenBinding;
use super::sotw::SotwEngine;
use super::types::{Outcome, TypeReport, TypeStates, short_type};
use super::{Credential, ProxyState, ResponseStream, Shared};
use crate::owner::{OwnerId, OwnerLease, ProxyKey};
use crate::translate::ClientKind;

/// Responses buffered per stream before the stream task waits for the
/// client to read.
const OUTPUT_BUFFER: usize = 16;

/// One message a stream emits: a response, or the status it ends with.
/// Both are boxed, so a queued message is two words.
pub(crate) type Message<R> = Result<Box<R>, Box<Status>>;

/// Where a stream's messages go: a channel to the response body (a stream
/// task) or the queue of the body that runs the loop ([`InlineOutput`]).
pub(crate) trait Output<R>: Send {
    /// Queues `msg`; resolves once there is room for the next one, `false`
    /// if the receiving side is gone.
    fn send(&mut self, msg: Message<R>) -> impl Future<Output = bool> + Send;
}

/// The stream task's side of its output buffer, `futures`' bounded
/// channel: it queues a node per message and holds about 250 bytes while
/// idle, where tokio's (its cache-padded channel state and a first block
/// of 32 slots) held about 1 KiB per stream (heap profile of 2,000
/// streams).
impl<R: Send> Output<R> for mpsc::Sender<Message<R>> {
    async fn send(&mut self, msg: Message<R>) -> bool {
        SinkExt::send(self, msg).await.is_ok()
    }
}

/// How long a stream's end status waits for room in a full output buffer.
const FINAL_STATUS_WAIT: Duration = Duration::from_secs(1);

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
    /// Per-type state, read for the inspector's reports.
    fn types(&self) -> &TypeStates;
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
    fn types(&self) -> &TypeStates {
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
        prev: Option<&ProxyState>,
        state: &ProxyState,
    ) -> Vec<DeltaDiscoveryResponse> {
        DeltaEngine::on_state(self, prev, state)
    }
    fn types(&self) -> &TypeStates {
        DeltaEngine::types(self)
    }
}

/// A stream's engine, shared with the inspector, which reads its per-type
/// reports when a report is asked for. Only the stream task writes it.
struct SharedEngine<E>(Mutex<E>);

impl<E: Engine> SharedEngine<E> {
    /// The engine, allocated on its own when the stream opens: the
    /// stream's future then holds a pointer, not the engine (moved through
    /// two futures, it took two copies of the engine's size).
    fn new(engine: E) -> Arc<Self> {
        Arc::new(SharedEngine(Mutex::new(engine)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, E> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<E: Engine> TypeReports for SharedEngine<E> {
    fn type_reports(&self) -> BTreeMap<&'static str, TypeReport> {
        self.lock()
            .types()
            .iter()
            .map(|(t, s)| (short_type(t), s.report.clone()))
            .collect()
    }
}

/// Spawns the stream's task on the server's tracker; the task writes the
/// responses into the returned stream. Ownership of the key is taken only
/// after the first request's node.id matched the credential.
pub(crate) fn open<E, I>(
    shared: Arc<Shared>,
    credential: Credential,
    engine: E,
    requests: I,
) -> (ResponseStream<E::Resp>, JoinHandle<()>)
where
    E: Engine,
    I: Stream<Item = Result<E::Req, Status>> + Send + Unpin + 'static,
{
    let (tx, rx) = mpsc::channel(OUTPUT_BUFFER);
    let registration = Registration::opened::<E>(&shared, &credential.key, None);
    let task = shared.streams.clone().spawn(run(
        shared,
        credential,
        SharedEngine::new(engine),
        Box::new(requests),
        tx,
        registration,
    ));
    let responses = rx.map(|r| r.map(|resp| *resp).map_err(|status| *status));
    (Box::pin(responses), task)
}

/// The stream as the response body that runs it: no task of its own, no
/// channel. The stream counts as live on the server's tracker until it
/// ended; a watcher (a small tracked task that sleeps until the stream is
/// stopped) runs the cleanup if a stopped stream is not polled within
/// [`FINAL_STATUS_WAIT`], because hyper polls a body only while the
/// client's flow-control window has room.
pub(crate) fn open_inline<E, I>(
    shared: Arc<Shared>,
    credential: Credential,
    engine: E,
    requests: I,
) -> InlineBody<E::Resp>
where
    E: Engine,
    I: Stream<Item = Result<E::Req, Status>> + Send + Unpin + 'static,
    E::Resp: prost::Message,
{
    let (output, queue) = inline_body::queue();
    let registration =
        Registration::opened::<E>(&shared, &credential.key, Some(shared.streams.token()));
    let watcher = shared.watchers.spawn(end_if_stalled(registration.clone()));
    lock(&registration).watcher = Some(watcher.abort_handle());
    InlineBody::new(
        queue,
        run(
            shared,
            credential,
            SharedEngine::new(engine),
            Box::new(requests),
            output,
            registration,
        ),
    )
}

/// Waits until the stream is stopped; if it has not ended
/// [`FINAL_STATUS_WAIT`] later (its body is not being polled: the client
/// stopped reading), runs its cleanup. Aborted when the stream ends.
async fn end_if_stalled(registration: SharedRegistration) {
    let stop = lock(&registration).stop.clone();
    stop.cancelled().await;
    tokio::time::sleep(FINAL_STATUS_WAIT).await;
    lock(&registration).end(Some(STALLED_REASON.to_owned()));
}

/// The close reason of a stopped stream whose client was not reading it.
const STALLED_REASON: &str = "stopped by the control plane (drain, token revocation or \
     takeover) while the client was not reading the stream";

pub use meshlink_proto::hints::SHUTTING_DOWN_MESSAGE;

/// The status every stream ends with when the instance drains.
pub(crate) fn shutting_down() -> Status {
    Status::unavailable(SHUTTING_DOWN_MESSAGE)
}

/// Why the loop ended.
enum End {
    /// The client closed the stream or went away.
    Closed,
    /// End with this status; the reason labels the rejected-streams metric.
    /// Boxed, like everything else the stream task keeps across an await:
    /// its future is allocated once per stream for the stream's life.
    Fail(&'static str, Box<Status>),
}

impl End {
    fn fail(reason: &'static str, status: Status) -> End {
        End::Fail(reason, Box::new(status))
    }
}

fn revoked_status(jti: &str) -> Status {
    Status::permission_denied(format!(
        "token {jti} was revoked; this stream ends and no further certificate is issued to \
         that token; issue a new one with `meshlink token dataplane`"
    ))
}

/// Why a stream's stop token was cancelled: the drain first, then the
/// revocation of its token; otherwise a newer stream took the key over
/// (`owner` is this stream's ownership, once it has one).
fn stopped(
    shared: &Shared,
    binding: Option<&TokenBinding<'_>>,
    key: &ProxyKey,
    owner: Option<OwnerId>,
) -> End {
    if shared.draining.is_cancelled() {
        return End::fail("shutdown", shutting_down());
    }
    if let Some(b) = binding.filter(|b| b.is_revoked()) {
        return End::fail("revoked", revoked_status(b.jti()));
    }
    let this = owner.map(|id| format!(" ({id})")).unwrap_or_default();
    End::fail(
        "takeover",
        Status::aborted(format!(
            "a newer stream for proxy {key} {}{this}; \
             this happens when the proxy reconnects, and the newer stream is served",
            meshlink_proto::hints::TAKEN_OVER
        )),
    )
}

/// The stream's hold on its [`Registration`]: the registration ends when
/// the stream's future does, even if it was dropped mid-way.
struct Holding(SharedRegistration);

impl Drop for Holding {
    fn drop(&mut self) {
        lock(&self.0).end(None);
    }
}

async fn run<E, I, O>(
    shared: Arc<Shared>,
    credential: Credential,
    engine: Arc<SharedEngine<E>>,
    mut requests: I,
    mut out: O,
    registration: SharedRegistration,
) where
    E: Engine,
    I: Stream<Item = Result<E::Req, Status>> + Send + Unpin + 'static,
    O: Output<E::Resp>,
{
    let registration = Holding(registration);
    let key = credential.key.clone();
    let stream = shared.next_stream.fetch_add(1, Ordering::Relaxed);
    // The one token that ends this stream, whatever the reason: it is a
    // child of the drain token, revoking the stream's token cancels it, and
    // it is the owner lease's token, so a takeover cancels it too.
    let stop = lock(&registration.0).stop.clone();
    let binding = match &credential.token_id {
        Some(jti) => match shared.revocations.bind(jti, stream, stop.clone()) {
            Some(b) => Some(b),
            None => {
                let end = End::fail("revoked", revoked_status(jti));
                Box::pin(finish(&shared, &key, &registration.0, end, &mut out)).await;
                return;
            }
        },
        None => None,
    };
    // Before the first request: nothing is registered, so a refusal here
    // leaves the key's current owner untouched.
    let first = tokio::select! {
        biased;
        () = stop.cancelled() => Err(stopped(&shared, binding.as_ref(), &key, None)),
        req = requests.next() => match req {
            None => Err(End::Closed),
            Some(Err(status)) => {
                tracing::debug!(proxy = %key, %status, "ADS stream read failed");
                Err(End::Closed)
            }
            Some(Ok(req)) => match first_request(&credential, E::node(&req)) {
                Ok(facts) => Ok((Box::new(req), facts)),
                Err(end) => Err(end),
            },
        },
    };
    let (req, facts) = match first {
        Ok(first) => first,
        Err(end) => {
            Box::pin(finish(&shared, &key, &registration.0, end, &mut out)).await;
            return;
        }
    };
    let lease = shared
        .registry
        .register_with_token(key.clone(), stop.clone());
    let id = lease.id();
    let state_rx = lease.subscribe();
    if lock(&registration.0).own(lease).is_err() {
        // The watcher ended this stream meanwhile; the lease was dropped
        // (released) on the way back, before the inspector saw it.
        return;
    }
    let holder = Holder {
        instance: facts.instance,
        peer: credential.peer,
    };
    shared
        .inspector
        .opened(&key, id, E::PROTOCOL, &shared.instance, holder);
    let owner = Owner {
        key: &key,
        id,
        stop: &stop,
        binding: binding.as_ref(),
    };
    let end = serve(
        &shared,
        owner,
        state_rx,
        (facts.client, facts.identity_policy),
        engine,
        req,
        requests,
        &mut out,
    )
    .await;
    Box::pin(finish(&shared, &key, &registration.0, end, &mut out)).await;
    drop(binding);
}

/// Sends the end status, then ends the registration.
async fn finish<R: Send, O: Output<R>>(
    shared: &Shared,
    key: &ProxyKey,
    registration: &SharedRegistration,
    end: End,
    out: &mut O,
) {
    let reason = match end {
        End::Closed => None,
        End::Fail(label, status) => {
            shared.metrics.rejected(label);
            tracing::debug!(proxy = %key, %status, "ADS stream ended with an error");
            let reason = status.message().to_owned();
            // Bounded: a client that stopped reading does not get to delay
            // the cleanup (or a drain) for long.
            let _ = tokio::time::timeout(FINAL_STATUS_WAIT, out.send(Err(status))).await;
            Some(reason)
        }
    };
    lock(registration).end(reason);
}

/// The stream's ownership of its key, as the request / state loop uses
/// it.
struct Owner<'a> {
    key: &'a ProxyKey,
    id: OwnerId,
    /// The lease's token (see [`Registration::stop`]).
    stop: &'a CancellationToken,
    binding: Option<&'a TokenBinding<'a>>,
}

/// A stream's registration, shared by the stream and its watcher.
type SharedRegistration = Arc<Mutex<Registration>>;

/// What a stream registered and must undo when it ends, however it ends:
/// its stop token, the owner lease once it has one, the open-streams gauge
/// and its place on the server's tracker. [`Registration::end`] runs once:
/// from [`finish`], from the stalled-stream watcher, or when the stream's
/// future is dropped mid-way (a body hyper dropped; see [`Holding`]). Everything it removes is
/// compare-and-delete, so a newer owner is untouched.
pub(crate) struct Registration {
    shared: Arc<Shared>,
    key: ProxyKey,
    protocol: &'static str,
    /// Ends the stream: a child of the drain token, cancelled by the token
    /// binding on revocation and by the owner registry on takeover.
    stop: CancellationToken,
    lease: Option<OwnerLease<ProxyState>>,
    /// Counts the stream on the server's tracker (inline streams; a stream
    /// task is tracked itself).
    tracked: Option<TaskTrackerToken>,
    watcher: Option<AbortHandle>,
    ended: bool,
}

impl Registration {
    fn opened<E: Engine>(
        shared: &Arc<Shared>,
        key: &ProxyKey,
        tracked: Option<TaskTrackerToken>,
    ) -> SharedRegistration {
        shared.metrics.stream_opened(E::PROTOCOL);
        tracing::debug!(proxy = %key, protocol = E::PROTOCOL, "ADS stream opened");
        Arc::new(Mutex::new(Registration {
            shared: shared.clone(),
            key: key.clone(),
            protocol: E::PROTOCOL,
            stop: shared.draining.child_token(),
            lease: None,
            tracked,
            watcher: None,
            ended: false,
        }))
    }

    /// Takes the owner lease into the registration; gives it back if the
    /// stream ended meanwhile (the caller drops it, which releases it).
    fn own(&mut self, lease: OwnerLease<ProxyState>) -> Result<(), OwnerLease<ProxyState>> {
        if self.ended {
            return Err(lease);
        }
        self.lease = Some(lease);
        Ok(())
    }

    /// Runs the cleanup (once): the inspector and the reconciler are told
    /// the owner's stream ended (with `reason` if it failed), the lease is
    /// released, the gauge and the tracker count it as closed.
    fn end(&mut self, reason: Option<String>) {
        if self.ended {
            return;
        }
        self.ended = true;
        let shared = &self.shared;
        if let Some(lease) = self.lease.take() {
            let id = lease.id();
            let taken_over = shared.registry.owner(&self.key).is_some_and(|o| o != id);
            shared.inspector.closed(&self.key, id, reason, taken_over);
            shared.disconnected(self.key.clone(), id);
            if lease.release() {
                shared.metrics.certificate(&self.key, None);
            }
            tracing::debug!(proxy = %self.key, owner = %id, "ADS stream closed");
        }
        shared.metrics.stream_closed(self.protocol);
        self.stop.cancel();
        if let Some(watcher) = self.watcher.take() {
            watcher.abort();
        }
        self.tracked = None;
    }
}

fn lock(registration: &SharedRegistration) -> std::sync::MutexGuard<'_, Registration> {
    registration.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The request / state loop of a stream that owns its key.
///
/// What can end the stream (drain, revocation, takeover) is one token, the
/// lease's, and the renewal deadline one timer; each is a future created
/// once and polled by reference, so a wake-up registers no new waiter and
/// takes one token's locks, not three tokens'. The token is this stream's
/// own child of the server's drain token, so 10,000 streams do not contend
/// on one lock.
#[allow(clippy::too_many_arguments)]
async fn serve<E, I, O>(
    shared: &Arc<Shared>,
    owner: Owner<'_>,
    mut state_rx: tokio::sync::watch::Receiver<Option<Arc<ProxyState>>>,
    (client, identity_policy): (ClientKind, bool),
    engine: Arc<SharedEngine<E>>,
    first: Box<E::Req>,
    requests: I,
    out: &mut O,
) -> End
where
    E: Engine,
    I: Stream<Item = Result<E::Req, Status>> + Send + Unpin + 'static,
    O: Output<E::Resp>,
{
    let key = owner.key.clone();
    let id = owner.id;
    let binding = owner.binding;
    shared
        .inspector
        .attach(&key, id, client.as_str(), engine.clone());
    let mut rejected: Option<String> = None;
    // Each source is polled only when its own waker fired (gate.rs).
    let stop = owner.stop.cancelled();
    tokio::pin!(stop);
    let mut stop = Gated::new(stop);
    let mut renewal = Renewal::new(shared.clock);
    let mut requests = Gated::new(requests);
    let mut current: Option<Arc<ProxyState>> = state_rx.borrow_and_update().clone();
    let mut states = Gated::new(WatchStream::from_changes(state_rx));
    if let Some(state) = &current {
        report_certificate(shared, &key, id, state);
        renewal.follow(state);
    }
    shared.connected(key.clone(), id, client, identity_policy);
    let mut pending = Some(first);
    loop {
        let responses = if let Some(req) = pending.take() {
            match on_request(shared, &key, &mut *engine.lock(), &req, current.as_deref()) {
                Ok(r) => r,
                Err(status) => return End::fail("invalid_request", status),
            }
        } else {
            tokio::select! {
                biased;
                () = &mut stop => return stopped(shared, binding, &key, Some(id)),
                () = renewal.due(), if renewal.armed => {
                    tracing::debug!(proxy = %key, "identity certificate due for renewal");
                    shared.hub.renew(key.clone(), id);
                    renewal.asked();
                    Vec::new()
                }
                next = states.next() => {
                    let Some(next) = next else {
                        return End::fail("takeover", Status::aborted(format!("proxy {key} is no longer owned by this stream")));
                    };
                    match next {
                        Some(state) => {
                            let out = engine.lock().on_state(current.as_deref(), &state);
                            if current.as_ref().is_none_or(|c| c.identity != state.identity) {
                                report_certificate(shared, &key, id, &state);
                            }
                            renewal.follow(&state);
                            current = Some(state);
                            out
                        }
                        None => Vec::new(),
                    }
                }
                req = requests.next() => match req {
                    None => return End::Closed,
                    Some(Err(status)) => {
                        tracing::debug!(proxy = %key, %status, "ADS stream read failed");
                        return End::Closed;
                    }
                    Some(Ok(req)) => match on_request(shared, &key, &mut *engine.lock(), &req, current.as_deref()) {
                        Ok(r) => r,
                        Err(status) => return End::fail("invalid_request", status),
                    },
                },
            }
        };
        // A client that stops reading must not hold up a drain, a
        // revocation or a takeover: they win over a blocked send.
        let sent = tokio::select! {
            biased;
            () = &mut stop => return stopped(shared, binding, &key, Some(id)),
            sent = send_all::<E, O>(shared, out, responses) => sent,
        };
        if !sent {
            return End::Closed;
        }
        report_rejected(shared, &key, id, &engine, &mut rejected);
    }
}

/// Tells the inspector when the stream's outstanding NACK changed (the
/// common case, no NACK on any type, allocates nothing and takes no
/// inspector lock).
fn report_rejected<E: Engine>(
    shared: &Shared,
    key: &ProxyKey,
    id: OwnerId,
    engine: &SharedEngine<E>,
    last: &mut Option<String>,
) {
    let now = {
        let engine = engine.lock();
        rejected_of(
            engine
                .types()
                .iter()
                .map(|(t, s)| (short_type(t), &s.report)),
        )
    };
    if now != *last {
        *last = now.clone();
        shared.inspector.rejected(key, id, now);
    }
}

/// Runs one request through the engine and records ACKs and NACKs.
fn on_request<E: Engine>(
    shared: &Shared,
    key: &ProxyKey,
    engine: &mut E,
    req: &E::Req,
    state: Option<&ProxyState>,
) -> Result<Vec<E::Resp>, Status> {
    let outcome = engine.on_request(req, state)?;
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
    Ok(outcome.responses)
}

async fn send_all<E: Engine, O: Output<E::Resp>>(
    shared: &Shared,
    out: &mut O,
    responses: Vec<E::Resp>,
) -> bool {
    // Each response is boxed before the await, so none is kept inline in
    // the stream's future while it waits for room.
    let boxed = responses.into_iter().map(|resp| {
        shared.metrics.pushed(E::type_of(&resp));
        Ok(Box::new(resp))
    });
    for msg in boxed {
        if !out.send(msg).await {
            return false;
        }
    }
    true
}

fn report_certificate(shared: &Shared, key: &ProxyKey, id: OwnerId, state: &ProxyState) {
    shared
        .metrics
        .certificate(key, state.identity.as_ref().map(|i| i.not_after));
    shared
        .inspector
        .certificate(key, id, state.identity.clone());
}

/// What the first request's node says about the client.
struct NodeFacts {
    /// `meshlink.dev/client`.
    client: ClientKind,
    /// It lists the identity policy client feature.
    identity_policy: bool,
    /// `meshlink.dev/instance`: which process it is.
    instance: Option<String>,
}

/// Checks the first request's node against the credential's proxy key,
/// before the stream may take the key over. The message speaks to both raw
/// xDS clients (node.id) and meshlink-proxy users (its --name/--mesh flags
/// become node.id).
fn first_request(credential: &Credential, node: Option<&Node>) -> Result<NodeFacts, End> {
    let key = &credential.key;
    let expected = key.node_id();
    let form = if key.is_router() {
        "\"site.<site name>\""
    } else {
        "\"<mesh>.<dataplane name>\""
    };
    let node = node.ok_or_else(|| {
        End::fail(
            "invalid_request",
            Status::invalid_argument(format!(
                "the first request must carry node.id; set it to {expected:?} ({form})"
            )),
        )
    })?;
    if node.id != expected {
        return Err(End::fail(
            "node_id_mismatch",
            node_id_mismatch(credential, &node.id),
        ));
    }
    let client = ClientKind::from_node_metadata(node.metadata.as_ref())
        .map_err(|e| End::fail("invalid_request", Status::invalid_argument(e.to_string())))?;
    Ok(NodeFacts {
        client,
        identity_policy: meshlink_proto::identity_policy::wanted_by(node),
        instance: meshlink_proto::instance::instance_of(node.metadata.as_ref()),
    })
}

/// Why `node_id` is refused for `credential`: a router token on a
/// dataplane's stream and a dataplane token on a router's stream each get
/// their own message, naming the token to use.
fn node_id_mismatch(credential: &Credential, node_id: &str) -> Status {
    let key = &credential.key;
    let expected = key.node_id();
    let names_router = meshlink_proto::NodeId::names_router(node_id);
    if key.is_router() && !names_router {
        return Status::permission_denied(format!(
            "node.id {node_id:?} names a dataplane, but the token is the router token of site {} \
             (node.id {expected:?}); a dataplane authenticates with `meshlink token dataplane`",
            key.name
        ));
    }
    if !key.is_router() && names_router {
        return Status::permission_denied(format!(
            "node.id {node_id:?} names a site's router, but {} credential is for dataplane {expected}; \
             a router authenticates with `meshlink token router`",
            credential.noun()
        ));
    }
    if key.is_router() {
        return Status::permission_denied(format!(
            "node.id {node_id:?} does not match the router token of site {} (set node.id to {expected:?})",
            key.name
        ));
    }
    Status::permission_denied(format!(
        "node.id {node_id:?} does not match {} dataplane {expected} \
         (meshlink-proxy: check --name/--mesh; other clients: set node.id to \"<mesh>.<dataplane name>\" \
         of the dataplane the credential was issued for)",
        credential.noun(),
    ))
}

/// The owner's renewal deadline, kept in the stream task itself (it ends
/// with the stream, I1): when the published identity reaches its renewal
/// time, the stream asks the hub for a new one, and asks again every
/// [`RENEW_RETRY`] until a state with a new renewal time arrives. One
/// timer per stream, moved only when the deadline changes.
struct Renewal {
    clock: meshlink_identity::WallClock,
    /// The renewal time of the last state seen.
    renew_at: Option<std::time::SystemTime>,
    /// Whether a deadline is set.
    armed: bool,
    timer: Gated<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl Renewal {
    fn new(clock: meshlink_identity::WallClock) -> Self {
        Self {
            clock,
            renew_at: None,
            armed: false,
            timer: Gated::new(Box::pin(tokio::time::sleep(Duration::ZERO))),
        }
    }

    /// Takes the renewal time of a published state; the deadline moves
    /// only when that time changed.
    fn follow(&mut self, state: &ProxyState) {
        if state.renew_at == self.renew_at {
            return;
        }
        self.renew_at = state.renew_at;
        match state.renew_at {
            Some(at) => {
                let wait = at
                    .duration_since(self.clock.now())
                    .unwrap_or(Duration::ZERO);
                self.arm(wait);
            }
            None => self.armed = false,
        }
    }

    /// The hub was asked; ask again after [`RENEW_RETRY`] unless a new
    /// identity arrives first.
    fn asked(&mut self) {
        self.arm(RENEW_RETRY);
    }

    fn arm(&mut self, wait: Duration) {
        self.armed = true;
        self.timer
            .get_mut()
            .as_mut()
            .reset(tokio::time::Instant::now() + wait);
    }

    /// Resolves at the deadline; only to be polled while armed.
    fn due(&mut self) -> &mut Gated<std::pin::Pin<Box<tokio::time::Sleep>>> {
        &mut self.timer
    }
}
