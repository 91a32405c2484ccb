//! What each proxy's stream reports about itself, for `meshlink inspect
//! dataplane` and `GET /api/v1/dataplanes/{name}/xds`.
//!
//! Owns one [`StreamReport`] per proxy key, written only by the stream that
//! currently owns the key (checked by stream id, like the owner registry).
//! The per-type part of a report is not copied here: the stream attaches
//! its protocol engine ([`TypeReports`]), and a report is read from it when
//! asked for, so the stream's hot path takes no inspector lock.
//! A closed stream's report stays, marked disconnected, until the proxy
//! connects again, its Dataplane is deleted ([`Inspector::forget`]) or it
//! has been disconnected past a grace period
//! ([`Inspector::evict_disconnected`]); the control plane calls both.
//!
//! An optional observer receives a [`StreamView`] (the part of a report
//! the Dataplane status is made of) whenever that part changes: on open
//! and close, a new certificate, and a change of the outstanding NACK. It
//! is called under the inspector's lock, so the views of one proxy arrive
//! in the order they happened; it must only queue the view.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::types::TypeReport;
use crate::hub::IdentityInfo;
use crate::owner::{OwnerId, ProxyKey};

/// One proxy's xDS connection as this control-plane instance sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamReport {
    /// Mesh of the proxy.
    pub mesh: String,
    /// Dataplane name.
    pub name: String,
    /// Whether a stream is open now.
    pub connected: bool,
    /// The control-plane instance holding the stream.
    pub control_plane: String,
    /// Stream id (unique per control-plane instance).
    pub stream_id: u64,
    /// How many streams this proxy opened (takeovers + 1) since it last
    /// had none.
    pub generation: u64,
    /// `sotw` or `delta`.
    pub protocol: &'static str,
    /// Client kind from the node metadata, once the first request arrived.
    pub client: Option<&'static str>,
    /// When the stream opened (unix seconds; serialized as RFC 3339).
    #[serde(serialize_with = "rfc3339::secs")]
    pub connected_at: u64,
    /// When it closed (unix seconds; serialized as RFC 3339), if it did.
    #[serde(serialize_with = "rfc3339::opt_secs")]
    pub disconnected_at: Option<u64>,
    /// Why it closed, if it ended with an error status.
    pub close_reason: Option<String>,
    /// Per resource type: versions sent, acknowledged, NACKed.
    pub types: BTreeMap<&'static str, TypeReport>,
    /// The identity certificate last sent over SDS (Envoy clients).
    pub certificate: Option<IdentityInfo>,
    /// Who holds the stream: its process and its address.
    pub holder: Holder,
}

/// Who holds a proxy's stream (or, for Certify, who asked for its
/// certificate): the process, when the client names one
/// (`node.metadata["meshlink.dev/instance"]`, Certify's `instance`; every
/// meshlink-proxy does), and the address the call came from. Two holders of
/// one Dataplane at once are two processes started with one identity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    /// The process's instance id, if the client sent one.
    pub instance: Option<String>,
    /// The address the call came from (`None` in process).
    pub peer: Option<std::net::SocketAddr>,
}

impl Holder {
    /// What tells two holders apart: the instance id, else the peer's IP
    /// address (a client that names no process is taken to be one process
    /// per host, since its reconnects come from new ports), else nothing.
    pub fn identity(&self) -> Option<String> {
        match (&self.instance, &self.peer) {
            (Some(i), _) => Some(format!("instance {i}")),
            (None, Some(p)) => Some(format!("host {}", p.ip())),
            (None, None) => None,
        }
    }
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.peer, &self.instance) {
            (Some(p), Some(i)) => write!(f, "{p} (process {i})"),
            (Some(p), None) => write!(f, "{p}"),
            (None, Some(i)) => write!(f, "process {i}"),
            (None, None) => f.write_str("an in-process client"),
        }
    }
}

/// What the Dataplane status needs from one proxy's stream report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamView {
    /// The proxy.
    pub key: ProxyKey,
    /// Whether a stream is open now.
    pub connected: bool,
    /// The control-plane instance holding the stream.
    pub control_plane: String,
    /// When the stream opened.
    pub connected_at: SystemTime,
    /// When it closed, if it did.
    pub disconnected_at: Option<SystemTime>,
    /// The identity certificate last sent over SDS, if any.
    pub certificate: Option<IdentityInfo>,
    /// An outstanding NACK of the latest version sent, as
    /// `"<type>: <detail>"`; `None` when every type's latest version was
    /// ACKed or is still in flight.
    pub rejected: Option<String>,
    /// Who holds the stream.
    pub holder: Holder,
    /// The stream closed because a newer stream for the proxy took its key
    /// over (its holder may come back), not because its client left or the
    /// control plane ended it.
    pub taken_over: bool,
}

/// Receives every changed [`StreamView`]; must not block.
pub type StreamObserver = Arc<dyn Fn(StreamView) + Send + Sync>;

/// Serializes unix seconds as RFC 3339 (UTC), as every time in the API is.
mod rfc3339 {
    use std::time::{Duration, UNIX_EPOCH};

    fn text(secs: u64) -> String {
        humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
    }

    pub(super) fn secs<S: serde::Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&text(*v))
    }

    pub(super) fn opt_secs<S: serde::Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(&text(*v)),
            None => s.serialize_none(),
        }
    }
}

/// All stream reports of this instance. Cheap to clone.
#[derive(Clone, Default)]
pub struct Inspector {
    inner: Arc<Mutex<Inner>>,
    observer: Option<StreamObserver>,
}

/// A stream's per-type reports, read when a report is asked for.
pub(crate) trait TypeReports: Send + Sync {
    /// Per resource type (short name): versions sent, acknowledged, NACKed.
    fn type_reports(&self) -> BTreeMap<&'static str, TypeReport>;
}

/// One proxy's report as held. A [`StreamReport`] is built from it when
/// asked for: the mesh and name come from the key, the per-type part from
/// the stream's engine, and the instance name and the certificate are
/// shared (the certificate with the hub's published state), so a slot
/// keeps no copy of what 10,000 others hold too.
struct Slot {
    connected: bool,
    control_plane: Arc<str>,
    stream_id: u64,
    generation: u64,
    protocol: &'static str,
    client: Option<&'static str>,
    connected_at: u64,
    disconnected_at: Option<u64>,
    close_reason: Option<String>,
    /// The per-type reports as they were when the stream closed.
    closed_types: BTreeMap<&'static str, TypeReport>,
    certificate: Option<Arc<IdentityInfo>>,
    types: Option<Arc<dyn TypeReports>>,
    /// The outstanding NACK, as the stream last computed it.
    rejected: Option<String>,
    holder: Holder,
    /// The stream closed because a newer one took its key over.
    taken_over: bool,
}

impl Slot {
    /// The whole report; the per-type part comes from the attached engine
    /// (or stays as it was when the stream closed).
    fn full(&self, key: &ProxyKey) -> StreamReport {
        StreamReport {
            mesh: key.mesh.clone(),
            name: key.name.clone(),
            connected: self.connected,
            control_plane: self.control_plane.to_string(),
            stream_id: self.stream_id,
            generation: self.generation,
            protocol: self.protocol,
            client: self.client,
            connected_at: self.connected_at,
            disconnected_at: self.disconnected_at,
            close_reason: self.close_reason.clone(),
            types: match &self.types {
                Some(types) => types.type_reports(),
                None => self.closed_types.clone(),
            },
            certificate: self.certificate.as_deref().cloned(),
            holder: self.holder.clone(),
        }
    }
}

#[derive(Default)]
struct Inner {
    reports: HashMap<ProxyKey, Slot>,
    /// The instance name the last stream opened with, shared by the slots.
    instance: Option<Arc<str>>,
}

impl std::fmt::Debug for Inspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspector")
            .field("reports", &self.len())
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

fn at_unix(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// An outstanding NACK of the latest version sent, as `StreamView` holds
/// it (allocates only when there is one).
pub(crate) fn rejected_of<'a>(
    mut types: impl Iterator<Item = (&'a str, &'a TypeReport)>,
) -> Option<String> {
    types.find_map(|(t, tr)| {
        let nack = tr.last_nack.as_ref()?;
        let latest = tr.last_sent_version.as_deref() == Some(nack.version.as_str())
            && tr.last_acked_version.as_deref() != Some(nack.version.as_str());
        latest.then(|| format!("{t}: {}", nack.detail))
    })
}

/// The status-relevant part of a slot.
fn view_of(key: &ProxyKey, slot: &Slot) -> StreamView {
    StreamView {
        key: key.clone(),
        connected: slot.connected,
        control_plane: slot.control_plane.to_string(),
        connected_at: at_unix(slot.connected_at),
        disconnected_at: slot.disconnected_at.map(at_unix),
        certificate: slot.certificate.as_deref().cloned(),
        rejected: slot.rejected.clone(),
        holder: slot.holder.clone(),
        taken_over: slot.taken_over,
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

// === impl Inspector ===

impl Inspector {
    /// An inspector that tells `observer` about every changed
    /// [`StreamView`].
    pub fn with_observer(observer: StreamObserver) -> Self {
        Self {
            inner: Arc::default(),
            observer: Some(observer),
        }
    }

    /// The report of `key`, if it ever connected to this instance.
    pub fn report(&self, key: &ProxyKey) -> Option<StreamReport> {
        self.lock().reports.get(key).map(|s| s.full(key))
    }

    /// Every report, sorted by mesh and name.
    pub fn reports(&self) -> Vec<StreamReport> {
        let mut all: Vec<_> = self.lock().reports.iter().map(|(k, s)| s.full(k)).collect();
        all.sort_by(|a, b| (&a.mesh, &a.name).cmp(&(&b.mesh, &b.name)));
        all
    }

    /// Number of proxies with an open stream.
    pub fn connected(&self) -> usize {
        self.lock().reports.values().filter(|s| s.connected).count()
    }

    /// Number of reports held (connected or not).
    pub fn len(&self) -> usize {
        self.lock().reports.len()
    }

    /// Whether no report is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops `key`'s report (its Dataplane was deleted). An open stream
    /// keeps running; its next update finds no report and is ignored.
    pub fn forget(&self, key: &ProxyKey) -> bool {
        self.lock().reports.remove(key).is_some()
    }

    /// Drops the reports of proxies disconnected before `before`; returns
    /// how many went.
    pub fn evict_disconnected(&self, before: SystemTime) -> usize {
        let mut inner = self.lock();
        let gone: Vec<ProxyKey> = inner
            .reports
            .iter()
            .filter(|(_, s)| !s.connected && s.disconnected_at.is_some_and(|d| at_unix(d) < before))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &gone {
            inner.reports.remove(k);
        }
        gone.len()
    }

    pub(crate) fn opened(
        &self,
        key: &ProxyKey,
        id: OwnerId,
        protocol: &'static str,
        control_plane: &str,
        holder: Holder,
    ) {
        let mut inner = self.lock();
        let control_plane = match &inner.instance {
            Some(shared) if **shared == *control_plane => shared.clone(),
            _ => {
                let shared: Arc<str> = control_plane.into();
                inner.instance = Some(shared.clone());
                shared
            }
        };
        let slot = Slot {
            connected: true,
            control_plane,
            stream_id: id.stream_id,
            generation: id.generation,
            protocol,
            client: None,
            connected_at: unix_now(),
            disconnected_at: None,
            close_reason: None,
            closed_types: BTreeMap::new(),
            certificate: None,
            types: None,
            rejected: None,
            holder,
            taken_over: false,
        };
        inner.reports.insert(key.clone(), slot);
        self.observe(&inner, key);
    }

    /// Runs `f` on `key`'s slot if stream `id` wrote it; tells the
    /// observer if `f` says the view changed.
    fn update(&self, key: &ProxyKey, id: OwnerId, f: impl FnOnce(&mut Slot) -> bool) {
        let mut inner = self.lock();
        if let Some(slot) = inner.reports.get_mut(key)
            && slot.stream_id == id.stream_id
            && f(slot)
        {
            self.observe(&inner, key);
        }
    }

    /// Tells the observer about `key`'s view.
    fn observe(&self, inner: &Inner, key: &ProxyKey) {
        if let (Some(observer), Some(slot)) = (&self.observer, inner.reports.get(key)) {
            observer(view_of(key, slot));
        }
    }

    /// Attaches stream `id`'s engine: the per-type part of the report is
    /// read from it from now on.
    pub(crate) fn attach(
        &self,
        key: &ProxyKey,
        id: OwnerId,
        client: &'static str,
        types: Arc<dyn TypeReports>,
    ) {
        self.update(key, id, |s| {
            s.client = Some(client);
            s.types = Some(types);
            false
        });
    }

    /// Records the identity certificate stream `id` sent.
    pub(crate) fn certificate(&self, key: &ProxyKey, id: OwnerId, cert: Option<Arc<IdentityInfo>>) {
        self.update(key, id, |s| {
            let changed = s.certificate != cert;
            s.certificate = cert;
            changed
        });
    }

    /// Records the outstanding NACK stream `id` computed.
    pub(crate) fn rejected(&self, key: &ProxyKey, id: OwnerId, rejected: Option<String>) {
        self.update(key, id, |s| {
            let changed = s.rejected != rejected;
            s.rejected = rejected;
            changed
        });
    }

    /// Records that stream `id` closed (`taken_over`: because a newer
    /// stream took its key over), with its error's message if it failed.
    pub(crate) fn closed(
        &self,
        key: &ProxyKey,
        id: OwnerId,
        reason: Option<String>,
        taken_over: bool,
    ) {
        self.update(key, id, |s| {
            s.taken_over = taken_over;
            // Keep what the stream last reported per type; the engine goes.
            if let Some(types) = s.types.take() {
                s.closed_types = types.type_reports();
            }
            s.connected = false;
            s.disconnected_at = Some(unix_now());
            s.close_reason = reason;
            true
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ads::NackReport;

    fn recording() -> (Inspector, Arc<Mutex<Vec<StreamView>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let inspector = Inspector::with_observer(Arc::new(move |v| {
            sink.lock().unwrap().push(v);
        }));
        (inspector, seen)
    }

    fn id(stream_id: u64) -> OwnerId {
        OwnerId {
            stream_id,
            generation: 1,
        }
    }

    /// Per-type reports as a stream's engine would hold them.
    #[derive(Default)]
    struct FixedTypes(Mutex<BTreeMap<&'static str, TypeReport>>);

    impl TypeReports for FixedTypes {
        fn type_reports(&self) -> BTreeMap<&'static str, TypeReport> {
            self.0.lock().unwrap().clone()
        }
    }

    impl FixedTypes {
        fn set(&self, report: TypeReport) -> Option<String> {
            let mut types = self.0.lock().unwrap();
            types.insert("Listener", report);
            rejected_of(types.iter().map(|(t, r)| (*t, r)))
        }
    }

    #[test]
    fn views_follow_open_nack_ack_and_close_and_repeat_nothing() {
        let (insp, seen) = recording();
        let key = ProxyKey::new("default", "web-1");
        insp.opened(&key, id(1), "sotw", "cp-a", Holder::default());
        let types = Arc::new(FixedTypes::default());
        // A change outside the view (client kind) is not reported.
        insp.attach(&key, id(1), "envoy", types.clone());
        let nacked = TypeReport {
            last_sent_version: Some("v2".into()),
            last_acked_version: Some("v1".into()),
            last_nack: Some(Box::new(NackReport {
                version: "v2".into(),
                detail: "bad listener".into(),
            })),
            ..TypeReport::default()
        };
        let rejected = types.set(nacked.clone());
        assert_eq!(rejected.as_deref(), Some("Listener: bad listener"));
        insp.rejected(&key, id(1), rejected.clone());
        // The same outstanding NACK again is not a change.
        insp.rejected(&key, id(1), rejected);
        let mut fixed = nacked.clone();
        fixed.last_sent_version = Some("v3".into());
        fixed.last_acked_version = Some("v3".into());
        let rejected = types.set(fixed.clone());
        assert_eq!(
            rejected, None,
            "a NACK of an older version is not outstanding"
        );
        insp.rejected(&key, id(1), rejected);
        // The report reads the engine's per-type state as it is now.
        let report = insp.report(&key).unwrap();
        assert_eq!(report.client, Some("envoy"));
        assert_eq!(report.types["Listener"], fixed);
        // A stale stream cannot close the report.
        insp.closed(&key, id(0), None, false);
        insp.closed(&key, id(1), None, false);
        drop(
            types
                .0
                .lock()
                .unwrap()
                .insert("Cluster", TypeReport::default()),
        );
        let closed = insp.report(&key).unwrap();
        assert!(!closed.connected);
        assert_eq!(
            closed.types.keys().collect::<Vec<_>>(),
            vec![&"Listener"],
            "a closed stream's report keeps what it had at close"
        );
        let seen = seen.lock().unwrap();
        let summary: Vec<(bool, Option<String>)> = seen
            .iter()
            .map(|v| (v.connected, v.rejected.clone()))
            .collect();
        assert_eq!(
            summary,
            vec![
                (true, None),
                (true, Some("Listener: bad listener".into())),
                (true, None),
                (false, None),
            ]
        );
        assert!(seen[3].disconnected_at.is_some());
        assert_eq!(seen[0].control_plane, "cp-a");
    }

    #[test]
    fn forget_and_grace_eviction_empty_the_map() {
        let insp = Inspector::default();
        for i in 0..1000u64 {
            let key = ProxyKey::new("default", format!("dp-{i}"));
            insp.opened(&key, id(i), "delta", "cp", Holder::default());
            insp.closed(&key, id(i), None, false);
            if i % 2 == 0 {
                assert!(insp.forget(&key));
            }
        }
        assert_eq!(insp.len(), 500);
        let open = ProxyKey::new("default", "open");
        insp.opened(&open, id(5000), "delta", "cp", Holder::default());
        // Reports of disconnected proxies go once the grace period passed;
        // an open stream's report stays.
        let later = SystemTime::now() + Duration::from_secs(5);
        assert_eq!(insp.evict_disconnected(later), 500);
        assert_eq!(insp.len(), 1);
        assert!(insp.report(&open).is_some());
        assert_eq!(insp.evict_disconnected(later), 0);
    }
}
