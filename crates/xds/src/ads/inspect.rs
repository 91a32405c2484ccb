//! What each proxy's stream reports about itself, for `meshlink inspect
//! dataplane` and `GET /api/v1/dataplanes/{name}/xds`.
//!
//! Owns one [`StreamReport`] per proxy key, written only by the stream that
//! currently owns the key (checked by stream id, like the owner registry).
//! A closed stream's report stays, marked disconnected, until the proxy
//! connects again.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

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
#[derive(Clone, Debug, Default)]
pub struct Inspector {
    reports: Arc<Mutex<HashMap<ProxyKey, StreamReport>>>,
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

// === impl Inspector ===

impl Inspector {
    /// The report of `key`, if it ever connected to this instance.
    pub fn report(&self, key: &ProxyKey) -> Option<StreamReport> {
        self.lock().get(key).cloned()
    }

    /// Every report, sorted by mesh and name.
    pub fn reports(&self) -> Vec<StreamReport> {
        let mut all: Vec<_> = self.lock().values().cloned().collect();
        all.sort_by(|a, b| (&a.mesh, &a.name).cmp(&(&b.mesh, &b.name)));
        all
    }

    /// Number of proxies with an open stream.
    pub fn connected(&self) -> usize {
        self.lock().values().filter(|r| r.connected).count()
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
        self.lock().insert(key.clone(), report);
    }

    /// Runs `f` on `key`'s report if stream `id` wrote it.
    pub(crate) fn update(&self, key: &ProxyKey, id: OwnerId, f: impl FnOnce(&mut StreamReport)) {
        if let Some(r) = self.lock().get_mut(key)
            && r.stream_id == id.stream_id
        {
            f(r);
        }
    }

    pub(crate) fn closed(&self, key: &ProxyKey, id: OwnerId, reason: Option<String>) {
        self.update(key, id, |r| {
            r.connected = false;
            r.disconnected_at = Some(unix_now());
            r.close_reason = reason;
        });
    }

    /// Copies per-type reports from an engine's state.
    pub(crate) fn set_types<'a>(
        &self,
        key: &ProxyKey,
        id: OwnerId,
        types: impl Iterator<Item = (&'a &'static str, &'a TypeReport)>,
    ) {
        let types: BTreeMap<&'static str, TypeReport> =
            types.map(|(t, r)| (short_type(t), r.clone())).collect();
        self.update(key, id, |r| r.types = types);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ProxyKey, StreamReport>> {
        self.reports.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
