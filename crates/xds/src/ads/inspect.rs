//! What each proxy's stream reports about itself, for `meshlink inspect
//! dataplane` and `GET /api/v1/dataplanes/{name}/xds`.
//!
//! Owns one [`StreamReport`] per proxy key, written only by the stream that
//! currently owns the key (checked by stream id, like the owner registry).
//! A closed stream's report stays, marked disconnected, until the proxy
//! connects again, its Dataplane is deleted ([`Inspector::forget`]) or it
//! has been disconnected past a grace period
//! ([`Inspector::evict_disconnected`]); the control plane calls both.
//!
//! An optional observer receives a [`StreamView`] (the part of a report
//! the Dataplane status is made of) whenever that part changes. It is
//! called under the inspector's lock, so the views of one proxy arrive in
//! the order they happened; it must only queue the view.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::types::{TypeReport, short_type};
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

#[derive(Default)]
struct Inner {
    reports: HashMap<ProxyKey, StreamReport>,
    views: HashMap<ProxyKey, StreamView>,
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

/// An outstanding NACK of the latest version sent, as `StreamView`
/// holds it (allocates only when there is one).
fn rejected_of(r: &StreamReport) -> Option<String> {
    r.types.iter().find_map(|(t, tr)| {
        let nack = tr.last_nack.as_ref()?;
        let latest = tr.last_sent_version.as_deref() == Some(nack.version.as_str())
            && tr.last_acked_version.as_deref() != Some(nack.version.as_str());
        latest.then(|| format!("{t}: {}", nack.detail))
    })
}

/// Whether `view` is what [`view_of`] gives for `r`, without building it.
fn same_view(view: &StreamView, r: &StreamReport) -> bool {
    view.connected == r.connected
        && view.connected_at == at_unix(r.connected_at)
        && view.disconnected_at == r.disconnected_at.map(at_unix)
        && view.control_plane == r.control_plane
        && view.certificate == r.certificate
        && view.rejected == rejected_of(r)
}

/// The status-relevant part of `r`.
fn view_of(key: &ProxyKey, r: &StreamReport) -> StreamView {
    let rejected = rejected_of(r);
    StreamView {
        key: key.clone(),
        connected: r.connected,
        control_plane: r.control_plane.clone(),
        connected_at: at_unix(r.connected_at),
        disconnected_at: r.disconnected_at.map(at_unix),
        certificate: r.certificate.clone(),
        rejected,
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
        self.lock().reports.get(key).cloned()
    }

    /// Every report, sorted by mesh and name.
    pub fn reports(&self) -> Vec<StreamReport> {
        let mut all: Vec<_> = self.lock().reports.values().cloned().collect();
        all.sort_by(|a, b| (&a.mesh, &a.name).cmp(&(&b.mesh, &b.name)));
        all
    }

    /// Number of proxies with an open stream.
    pub fn connected(&self) -> usize {
        self.lock().reports.values().filter(|r| r.connected).count()
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
        let mut inner = self.lock();
        inner.views.remove(key);
        inner.reports.remove(key).is_some()
    }

    /// Drops the reports of proxies disconnected before `before`; returns
    /// how many went.
    pub fn evict_disconnected(&self, before: SystemTime) -> usize {
        let mut inner = self.lock();
        let gone: Vec<ProxyKey> = inner
            .reports
            .iter()
            .filter(|(_, r)| !r.connected && r.disconnected_at.is_some_and(|d| at_unix(d) < before))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &gone {
            inner.reports.remove(k);
            inner.views.remove(k);
        }
        gone.len()
    }

    pub(crate) fn opened(
        &self,
        key: &ProxyKey,
        id: OwnerId,
        protocol: &'static str,
        control_plane: &str,
    ) {
        let report = StreamReport {
            mesh: key.mesh.clone(),
            name: key.name.clone(),
            connected: true,
            control_plane: control_plane.to_owned(),
            stream_id: id.stream_id,
            generation: id.generation,
            protocol,
            client: None,
            connected_at: unix_now(),
            disconnected_at: None,
            close_reason: None,
            types: BTreeMap::new(),
            certificate: None,
        };
        let mut inner = self.lock();
        inner.reports.insert(key.clone(), report);
        self.observe(&mut inner, key);
    }

    /// Runs `f` on `key`'s report if stream `id` wrote it.
    pub(crate) fn update(&self, key: &ProxyKey, id: OwnerId, f: impl FnOnce(&mut StreamReport)) {
        let mut inner = self.lock();
        if let Some(r) = inner.reports.get_mut(key)
            && r.stream_id == id.stream_id
        {
            f(r);
            self.observe(&mut inner, key);
        }
    }

    /// Tells the observer about `key`'s view if it changed.
    fn observe(&self, inner: &mut Inner, key: &ProxyKey) {
        let Some(observer) = &self.observer else {
            return;
        };
        let Some(r) = inner.reports.get(key) else {
            return;
        };
        if inner.views.get(key).is_some_and(|v| same_view(v, r)) {
            return;
        }
        let view = view_of(key, r);
        inner.views.insert(key.clone(), view.clone());
        observer(view);
    }

    pub(crate) fn closed(&self, key: &ProxyKey, id: OwnerId, reason: Option<String>) {
        self.update(key, id, |r| {
            r.connected = false;
            r.disconnected_at = Some(unix_now());
            r.close_reason = reason;
        });
    }

    /// Records the per-type reports that changed (by type URL); the
    /// other types' reports stay as they are.
    pub(crate) fn set_types(
        &self,
        key: &ProxyKey,
        id: OwnerId,
        changed: impl Iterator<Item = (&'static str, TypeReport)>,
    ) {
        self.update(key, id, |r| {
            for (t, report) in changed {
                r.types.insert(short_type(t), report);
            }
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

    #[test]
    fn views_follow_open_nack_ack_and_close_and_repeat_nothing() {
        let (insp, seen) = recording();
        let key = ProxyKey::new("default", "web-1");
        insp.opened(&key, id(1), "sotw", "cp-a");
        // A change outside the view (client kind) is not reported again.
        insp.update(&key, id(1), |r| r.client = Some("envoy"));
        let nacked = TypeReport {
            last_sent_version: Some("v2".into()),
            last_acked_version: Some("v1".into()),
            last_nack: Some(NackReport {
                version: "v2".into(),
                detail: "bad listener".into(),
            }),
            ..TypeReport::default()
        };
        insp.set_types(
            &key,
            id(1),
            [(crate::translate::LISTENER_TYPE, nacked.clone())].into_iter(),
        );
        let mut fixed = nacked.clone();
        fixed.last_sent_version = Some("v3".into());
        fixed.last_acked_version = Some("v3".into());
        insp.set_types(
            &key,
            id(1),
            [(crate::translate::LISTENER_TYPE, fixed)].into_iter(),
        );
        // A stale stream cannot close the report.
        insp.closed(&key, id(0), None);
        insp.closed(&key, id(1), None);
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
            insp.opened(&key, id(i), "delta", "cp");
            insp.closed(&key, id(i), None);
            if i % 2 == 0 {
                assert!(insp.forget(&key));
            }
        }
        assert_eq!(insp.len(), 500);
        let open = ProxyKey::new("default", "open");
        insp.opened(&open, id(5000), "delta", "cp");
        // Reports of disconnected proxies go once the grace period passed;
        // an open stream's report stays.
        let later = SystemTime::now() + Duration::from_secs(5);
        assert_eq!(insp.evict_disconnected(later), 500);
        assert_eq!(insp.len(), 1);
        assert!(insp.report(&open).is_some());
        assert_eq!(insp.evict_disconnected(later), 0);
    }
}
