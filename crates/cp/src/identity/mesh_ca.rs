//! Mesh CAs in the control plane: create each builtin CA exactly once,
//! validate provided CAs, and track CA rotation.
//!
//! A CA, once stored, is never regenerated (I5): `ensure` only creates when
//! the store has none for that (mesh, backend), and creation is race-safe
//! across control planes. Changing `mtls.enabledBackend` starts a rotation:
//! the previous CA stays in the trust bundle until no dataplane holds an
//! unexpired certificate from it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use meshlink_api::Resource;
use meshlink_api::spec::{CaType, DataSource, DataSourceContents, MeshSpec, MtlsBackend};
use meshlink_identity::{CaMaterial, CaRoot, MeshCa, RotationState};
use meshlink_store::{ListQuery, ObjectKey, Store};
use serde::{Deserialize, Serialize};

use super::secrets::{self, ISSUED_CERT, MESH_CA, MESH_CA_STATE, SecretError};

/// Why a mesh has no usable CA.
#[derive(Debug, thiserror::Error)]
pub enum MeshCaError {
    /// The mesh has mTLS off.
    #[error("mesh {0:?} has mTLS disabled; set spec.mtls.enabledBackend to issue certificates")]
    MtlsDisabled(String),
    /// The CA could not be created or validated; the message names the check.
    #[error("mesh {mesh:?} backend {backend:?}: {reason}")]
    Invalid {
        /// Mesh.
        mesh: String,
        /// Backend name.
        backend: String,
        /// What is wrong.
        reason: String,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] SecretError),
}

/// Rotation bookkeeping for one mesh, stored as `internal.MeshCAState`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CaState {
    /// Enabled backend name.
    pub enabled_backend: String,
    /// Its CA root.
    pub enabled: CaRoot,
    /// The backend enabled before, while a rotation is in progress.
    #[serde(default)]
    pub previous_backend: Option<String>,
    /// Its CA root.
    #[serde(default)]
    pub previous: Option<CaRoot>,
}

/// The latest certificate issued to a dataplane, stored as `internal.IssuedCert`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IssuedRecord {
    /// Fingerprint of the issuing CA.
    pub ca_fingerprint: String,
    /// Serial, hex.
    pub serial: String,
    /// SPIFFE ID.
    pub spiffe_id: String,
    /// Expiry, unix seconds.
    pub not_after: u64,
}

/// Everything needed to issue for a mesh right now.
pub struct MeshIdentity {
    /// The enabled CA.
    pub ca: MeshCa,
    /// Its backend name.
    pub backend: String,
    /// The trust domain.
    pub trust_domain: String,
    /// Workload certificate lifetime.
    pub lifetime: Duration,
    /// Bundle and rotation phase.
    pub rotation: RotationState,
    /// Earliest expiry of a certificate from the previous CA, if rotating.
    pub rotation_deadline: Option<SystemTime>,
}

fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn read_source(src: &DataSource) -> Result<String, String> {
    match src.contents() {
        Some(DataSourceContents::Inline(bytes)) => {
            String::from_utf8(bytes).map_err(|_| "inline PEM is not UTF-8".to_string())
        }
        Some(DataSourceContents::File(path)) => std::fs::read_to_string(&path).map_err(|e| {
            format!("cannot read {path}: {e}; the file must be readable by meshlink-cp")
        }),
        None => Err("exactly one of file, inlineString or inline is required".to_string()),
    }
}

fn material_for(mesh: &str, spec: &MeshSpec, b: &MtlsBackend) -> Result<CaMaterial, String> {
    match &b.type_ {
        CaType::Builtin => {
            MeshCa::generate_builtin(mesh, &b.name, spec.trust_domain(mesh), b.ca_cert_lifetime())
                .map_err(|e| e.to_string())
        }
        CaType::Provided => {
            let conf = b
                .conf
                .as_ref()
                .ok_or("provided CA needs conf.cert and conf.key")?;
            let cert = read_source(conf.cert.as_ref().ok_or("provided CA needs conf.cert")?)?;
            let key = read_source(conf.key.as_ref().ok_or("provided CA needs conf.key")?)?;
            let chain = conf.chain.as_ref().map(read_source).transpose()?;
            MeshCa::validate_provided(&cert, &key, chain.as_deref(), SystemTime::now())
                .map_err(|e| e.to_string())
        }
        CaType::Unknown(t) => Err(format!("unknown CA type {t:?}")),
    }
}

/// Returns the CA of one backend, creating a builtin CA once. A provided CA
/// is validated on first use and stored; if the user later changes the
/// provided PEM, the new material is validated and replaces it.
pub async fn ensure_backend(
    store: &dyn Store,
    mesh: &str,
    spec: &MeshSpec,
    b: &MtlsBackend,
) -> Result<MeshCa, MeshCaError> {
    let invalid = |reason: String| MeshCaError::Invalid {
        mesh: mesh.to_string(),
        backend: b.name.clone(),
        reason,
    };
    let key = ObjectKey::new(MESH_CA, mesh, &b.name);
    let material = match &b.type_ {
        CaType::Provided => {
            let fresh = material_for(mesh, spec, b).map_err(invalid)?;
            match secrets::get::<CaMaterial>(store, &key).await? {
                Some((stored, _)) if stored == fresh => stored,
                _ => {
                    secrets::put(store, &key, &fresh).await?;
                    fresh
                }
            }
        }
        _ => secrets::get_or_create(store, &key, || material_for(mesh, spec, b))
            .await?
            .map_err(invalid)?,
    };
    MeshCa::load(&material).map_err(|e| invalid(e.to_string()))
}

/// Ensures every backend's CA exists and returns the identity to issue with,
/// updating rotation bookkeeping when the enabled backend changed.
pub async fn ensure(store: &dyn Store, mesh: &Resource) -> Result<MeshIdentity, MeshCaError> {
    let name = mesh.name();
    let spec = mesh
        .spec
        .as_mesh()
        .expect("a Mesh resource has a mesh spec");
    let enabled = spec
        .enabled_backend()
        .ok_or_else(|| MeshCaError::MtlsDisabled(name.to_string()))?;
    let mut enabled_ca = None;
    for b in spec.mtls.iter().flat_map(|m| &m.backends) {
        let ca = ensure_backend(store, name, spec, b).await?;
        if b.name == enabled.name {
            enabled_ca = Some(ca);
        }
    }
    let ca = enabled_ca.expect("the enabled backend is one of the backends");
    let root = CaRoot::of(&ca);

    let state_key = ObjectKey::new(MESH_CA_STATE, name, "state");
    let stored = secrets::get::<CaState>(store, &state_key)
        .await?
        .map(|(s, _)| s);
    let mut state = match stored.clone() {
        None => CaState {
            enabled_backend: enabled.name.clone(),
            enabled: root.clone(),
            previous_backend: None,
            previous: None,
        },
        Some(s) if s.enabled.fingerprint == root.fingerprint => s,
        Some(s) => CaState {
            enabled_backend: enabled.name.clone(),
            enabled: root.clone(),
            previous_backend: Some(s.enabled_backend),
            previous: Some(s.enabled),
        },
    };
    let (on_previous, deadline) = match &state.previous {
        Some(prev) => proxies_on(store, name, &prev.fingerprint).await?,
        None => (0, None),
    };
    let rotation = RotationState::compute(&state.enabled, state.previous.as_ref(), on_previous);
    if state.previous.is_some() && on_previous == 0 {
        state.previous = None;
        state.previous_backend = None;
    }
    if stored.as_ref() != Some(&state) {
        secrets::put(store, &state_key, &state).await?;
    }
    Ok(MeshIdentity {
        ca,
        backend: enabled.name.clone(),
        trust_domain: spec.trust_domain(name).to_string(),
        lifetime: spec.dp_cert_lifetime(),
        rotation,
        rotation_deadline: deadline,
    })
}

/// Counts dataplanes whose latest certificate is unexpired and from the CA
/// with `fingerprint`, and the earliest such expiry.
async fn proxies_on(
    store: &dyn Store,
    mesh: &str,
    fingerprint: &str,
) -> Result<(usize, Option<SystemTime>), SecretError> {
    let now = unix(SystemTime::now());
    let q = ListQuery {
        kind: ISSUED_CERT.to_string(),
        mesh: Some(mesh.to_string()),
        selector: None,
    };
    let mut count = 0;
    let mut earliest: Option<u64> = None;
    for obj in store.list(&q).await.map_err(SecretError::Store)? {
        let Ok(rec) = serde_json::from_value::<IssuedRecord>(obj.body) else {
            continue;
        };
        if rec.ca_fingerprint == fingerprint && rec.not_after > now {
            count += 1;
            earliest = Some(earliest.map_or(rec.not_after, |e| e.min(rec.not_after)));
        }
    }
    Ok((count, earliest.map(|s| UNIX_EPOCH + Duration::from_secs(s))))
}

/// Records the latest certificate issued to a dataplane.
pub async fn record_issued(
    store: &dyn Store,
    mesh: &str,
    dataplane: &str,
    rec: &IssuedRecord,
) -> Result<(), SecretError> {
    secrets::put(store, &ObjectKey::new(ISSUED_CERT, mesh, dataplane), rec).await
}

/// Converts a time for an [`IssuedRecord`].
pub fn unix_seconds(t: SystemTime) -> u64 {
    unix(t)
}
