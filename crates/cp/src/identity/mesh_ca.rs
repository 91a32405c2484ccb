//! Mesh CAs in the store: the CA material per (mesh, backend), the rotation
//! record `internal.MeshCAState`, and the read-only view issuers use.
//!
//! Writers and readers are split on purpose:
//! - [`ensure_backend`] and [`write_state`] write; only the mesh CA
//!   controller ([`super::controller`]) calls them. Builtin CAs are
//!   create-once ([`secrets::get_or_create`], I5); the state is written as a
//!   compare-and-swap on its revision, recomputed from a fresh read on
//!   conflict, so control planes sharing PostgreSQL never lose an update.
//! - [`read_identity`] only reads. Certify, the hub's SDS issuance and the
//!   REST API use it (through [`super::CaHandle::load`]). It returns `None`
//!   when the stored state does not yet reflect the Mesh spec (a new mesh,
//!   a switched backend); the caller then asks the controller to reconcile
//!   and waits a bounded time, so every issuer issues from the CA the store
//!   says is enabled, and nobody but the controller writes the state.
//!
//! Changing `mtls.enabledBackend` starts a rotation: the previous CA stays
//! in the trust bundle until no dataplane holds an unexpired certificate
//! from it (tracked in memory by [`super::rotation::RotationTracker`]).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use meshlink_api::Resource;
use meshlink_api::spec::{CaType, MeshSpec, MtlsBackend};
use meshlink_identity::{CaMaterial, CaRoot, MeshCa, RotationPhase, RotationState, TrustBundle};
use meshlink_store::{ObjectKey, Store, StoreError};
use serde::{Deserialize, Serialize};

use super::secrets::{self, MESH_CA, MESH_CA_STATE, SecretError};

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
    /// The controller has not (yet) stored a CA state matching the Mesh spec.
    #[error(
        "the CA state of mesh {0:?} is not ready yet (the mesh CA controller has not reconciled the current Mesh spec); retry shortly"
    )]
    NotReady(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] SecretError),
}

/// Rotation bookkeeping for one mesh, stored as `internal.MeshCAState`.
/// Written only by the mesh CA controller.
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
    /// When the rotation started (unix seconds), while one is in progress.
    #[serde(default)]
    pub rotation_started: Option<u64>,
    /// The Mesh `resourceVersion` this state was computed from. A controller
    /// holding an older read of the Mesh never overwrites it, so a stale
    /// control plane cannot undo a newer spec.
    #[serde(default)]
    pub mesh_revision: u64,
}

/// A certificate issued to a dataplane, stored (coalesced) as
/// `internal.IssuedCert` and sent to the controller as an issuance event.
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
    /// Issuance time, unix milliseconds; orders records of one dataplane.
    #[serde(default)]
    pub issued_at_ms: u64,
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
    /// The stored rotation record this identity was read from.
    pub state: CaState,
}

impl MeshIdentity {
    /// The roots proxies must trust now: the enabled CA, plus the previous
    /// one while the stored state says a rotation is in progress.
    pub fn bundle(&self) -> TrustBundle {
        self.rotation(usize::from(self.state.previous.is_some()))
            .bundle
    }

    /// Bundle and phase, given how many proxies still hold a certificate
    /// from the previous CA (known to the controller).
    pub fn rotation(&self, proxies_on_previous: usize) -> RotationState {
        match &self.state.previous {
            // The stored state still lists the previous CA: its root stays
            // in the bundle until the controller ends the rotation.
            Some(prev) => {
                let mut r = RotationState::compute(
                    &self.state.enabled,
                    Some(prev),
                    proxies_on_previous.max(1),
                );
                if let RotationPhase::Rotating { proxies_on_old, .. } = &mut r.phase {
                    *proxies_on_old = proxies_on_previous;
                }
                r
            }
            None => RotationState::compute(&self.state.enabled, None, 0),
        }
    }
}

/// Unix seconds of `t` (0 before the epoch).
pub fn unix_seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Unix milliseconds of `t` (0 before the epoch).
pub fn unix_millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A generated CA for a builtin backend (provided ones are read by
/// [`super::ca_source::provided_material`]).
fn builtin_material(mesh: &str, spec: &MeshSpec, b: &MtlsBackend) -> Result<CaMaterial, String> {
    match &b.type_ {
        CaType::Builtin => {
            MeshCa::generate_builtin(mesh, &b.name, spec.trust_domain(mesh), b.ca_cert_lifetime())
                .map_err(|e| e.to_string())
        }
        other => Err(format!(
            "CA type {other:?} is not generated by the control plane"
        )),
    }
}

fn mesh_spec(mesh: &Resource) -> &MeshSpec {
    mesh.spec
        .as_mesh()
        .expect("a Mesh resource has a mesh spec")
}

/// Returns the CA of one backend, creating a builtin CA once. A provided CA
/// is read from its sources (inline, file, or a Secret in the mesh),
/// validated and stored; if the user later changes the provided PEM (or
/// the Secret's value), the new material is validated and replaces it.
/// Controller only.
pub async fn ensure_backend(
    store: &dyn Store,
    mesh: &str,
    spec: &MeshSpec,
    b: &MtlsBackend,
    now: SystemTime,
) -> Result<MeshCa, MeshCaError> {
    let invalid = |reason: String| MeshCaError::Invalid {
        mesh: mesh.to_string(),
        backend: b.name.clone(),
        reason,
    };
    let key = ObjectKey::new(MESH_CA, mesh, &b.name);
    let material = match &b.type_ {
        CaType::Provided => {
            let fresh = super::ca_source::provided_material(store, mesh, b, now)
                .await?
                .map_err(invalid)?;
            match secrets::get::<CaMaterial>(store, &key).await? {
                Some((stored, _)) if stored == fresh => stored,
                _ => {
                    secrets::put(store, &key, &fresh).await?;
                    fresh
                }
            }
        }
        _ => secrets::get_or_create(store, &key, || builtin_material(mesh, spec, b))
            .await?
            .map_err(invalid)?,
    };
    MeshCa::load(&material).map_err(|e| invalid(e.to_string()))
}

/// Ensures every backend's CA of `mesh` exists and returns the enabled one
/// with its backend name. Controller only.
pub async fn ensure_cas(
    store: &dyn Store,
    mesh: &Resource,
    now: SystemTime,
) -> Result<(MeshCa, String), MeshCaError> {
    let name = mesh.name();
    let spec = mesh_spec(mesh);
    let enabled = spec
        .enabled_backend()
        .ok_or_else(|| MeshCaError::MtlsDisabled(name.to_string()))?;
    let mut enabled_ca = None;
    for b in spec.mtls.iter().flat_map(|m| &m.backends) {
        let ca = ensure_backend(store, name, spec, b, now).await?;
        if b.name == enabled.name {
            enabled_ca = Some(ca);
        }
    }
    let ca = enabled_ca.expect("the enabled backend is one of the backends");
    Ok((ca, enabled.name.clone()))
}

/// What the controller read to compute a mesh's next state.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The enabled backend in the Mesh spec.
    pub backend: &'a str,
    /// Its CA root.
    pub root: &'a CaRoot,
    /// The Mesh `resourceVersion` read.
    pub mesh_revision: u64,
    /// Dataplanes holding an unexpired certificate from the stored previous CA.
    pub on_previous: usize,
    /// Now, unix seconds.
    pub now: u64,
}

/// The state a mesh should move to, or `None` if `stored` is right (or was
/// computed from a newer Mesh than `seen`).
///
/// A new enabled CA starts a rotation (the old enabled CA becomes
/// `previous`); a rotation ends when `on_previous` is 0 and `settle` has
/// passed since it started, so issuances that another control plane has not
/// yet flushed to the store are still counted.
pub fn next_state(
    stored: Option<&CaState>,
    seen: Observed<'_>,
    settle: Duration,
) -> Option<CaState> {
    let Observed {
        backend,
        root,
        mesh_revision,
        on_previous,
        now,
    } = seen;
    if stored.is_some_and(|s| s.mesh_revision > mesh_revision) {
        return None;
    }
    let next = match stored {
        None => CaState {
            enabled_backend: backend.to_string(),
            enabled: root.clone(),
            previous_backend: None,
            previous: None,
            rotation_started: None,
            mesh_revision,
        },
        Some(s) if s.enabled.fingerprint != root.fingerprint => CaState {
            enabled_backend: backend.to_string(),
            enabled: root.clone(),
            previous_backend: Some(s.enabled_backend.clone()),
            previous: Some(s.enabled.clone()),
            rotation_started: Some(now),
            mesh_revision,
        },
        Some(s) => {
            let mut s = s.clone();
            s.enabled_backend = backend.to_string();
            let started = s.rotation_started.unwrap_or(0);
            if s.previous.is_some() && on_previous == 0 && now >= started + settle.as_secs() {
                s.previous = None;
                s.previous_backend = None;
                s.rotation_started = None;
            }
            // A newer Mesh read alone (e.g. a status write) is no reason to write.
            if Some(&s) == stored {
                return None;
            }
            s.mesh_revision = mesh_revision;
            s
        }
    };
    Some(next)
}

/// The stored state of `mesh` and its revision.
pub async fn read_state(
    store: &dyn Store,
    mesh: &str,
) -> Result<Option<(CaState, u64)>, SecretError> {
    secrets::get::<CaState>(store, &state_key(mesh)).await
}

fn state_key(mesh: &str) -> ObjectKey {
    ObjectKey::new(MESH_CA_STATE, mesh, "state")
}

/// Writes `next` if the stored state is still at `expected` (`None`: still
/// absent). Returns false on a conflict: the caller re-reads and recomputes.
/// Controller only.
pub async fn write_state(
    store: &dyn Store,
    mesh: &str,
    next: &CaState,
    expected: Option<u64>,
) -> Result<bool, SecretError> {
    let key = state_key(mesh);
    let body = serde_json::to_value(next).expect("CA state serializes");
    let r = match expected {
        None => store.create(&key, &BTreeMap::new(), &body).await,
        Some(rev) => store.update(&key, &BTreeMap::new(), &body, Some(rev)).await,
    };
    match r {
        Ok(_) => Ok(true),
        Err(
            StoreError::AlreadyExists(_) | StoreError::Conflict { .. } | StoreError::NotFound(_),
        ) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Reads, without writing anything, the identity to issue with for `mesh`.
/// `Ok(None)`: the stored state does not reflect the Mesh spec yet (absent,
/// another enabled backend, or a CA whose material changed); only the
/// controller can fix that.
pub async fn read_identity(
    store: &dyn Store,
    mesh: &Resource,
) -> Result<Option<MeshIdentity>, MeshCaError> {
    let name = mesh.name();
    let spec = mesh_spec(mesh);
    let enabled = spec
        .enabled_backend()
        .ok_or_else(|| MeshCaError::MtlsDisabled(name.to_string()))?;
    let Some((state, _)) = read_state(store, name).await? else {
        return Ok(None);
    };
    if state.enabled_backend != enabled.name {
        return Ok(None);
    }
    let key = ObjectKey::new(MESH_CA, name, &enabled.name);
    let Some((material, _)) = secrets::get::<CaMaterial>(store, &key).await? else {
        return Ok(None);
    };
    let ca = MeshCa::load(&material).map_err(|e| MeshCaError::Invalid {
        mesh: name.to_string(),
        backend: enabled.name.clone(),
        reason: e.to_string(),
    })?;
    if ca.fingerprint() != state.enabled.fingerprint {
        return Ok(None);
    }
    Ok(Some(MeshIdentity {
        ca,
        backend: enabled.name.clone(),
        trust_domain: spec.trust_domain(name).to_string(),
        lifetime: spec.dp_cert_lifetime(),
        state,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(fp: &str) -> CaRoot {
        CaRoot {
            fingerprint: fp.into(),
            root_pem: format!("pem-{fp}"),
        }
    }

    const SETTLE: Duration = Duration::from_secs(3);

    fn seen<'a>(backend: &'a str, root: &'a CaRoot, rev: u64, on: usize, now: u64) -> Observed<'a> {
        Observed {
            backend,
            root,
            mesh_revision: rev,
            on_previous: on,
            now,
        }
    }

    #[test]
    fn a_new_mesh_gets_its_enabled_ca_only() {
        let a = root("a");
        let s = next_state(None, seen("ca-1", &a, 1, 0, 100), SETTLE).unwrap();
        assert_eq!(s.enabled.fingerprint, "a");
        assert!(s.previous.is_none() && s.rotation_started.is_none());
        assert_eq!(
            next_state(Some(&s), seen("ca-1", &a, 7, 0, 200), SETTLE),
            None,
            "a newer Mesh revision with the same spec writes nothing"
        );
    }

    #[test]
    fn a_switched_backend_starts_a_rotation_that_ends_when_nobody_is_on_the_old_ca() {
        let (ra, rb) = (root("a"), root("b"));
        let a = next_state(None, seen("ca-1", &ra, 1, 0, 100), SETTLE).unwrap();
        let rot = next_state(Some(&a), seen("ca-2", &rb, 2, 0, 100), SETTLE).unwrap();
        assert_eq!(rot.previous.as_ref().unwrap().fingerprint, "a");
        assert_eq!(rot.previous_backend.as_deref(), Some("ca-1"));
        assert_eq!(rot.rotation_started, Some(100));
        assert_eq!(rot.mesh_revision, 2);
        // Still settling, or proxies still on the old CA: no change.
        assert_eq!(
            next_state(Some(&rot), seen("ca-2", &rb, 3, 0, 101), SETTLE),
            None
        );
        assert_eq!(
            next_state(Some(&rot), seen("ca-2", &rb, 3, 5, 200), SETTLE),
            None
        );
        let done = next_state(Some(&rot), seen("ca-2", &rb, 3, 0, 103), SETTLE).unwrap();
        assert!(done.previous.is_none() && done.rotation_started.is_none());
        assert_eq!(done.enabled.fingerprint, "b");
        assert_eq!(done.mesh_revision, 3);
    }

    #[test]
    fn a_stale_read_of_the_mesh_never_undoes_a_newer_state() {
        let (ra, rb) = (root("a"), root("b"));
        let a = next_state(None, seen("ca-1", &ra, 1, 0, 100), SETTLE).unwrap();
        let rot = next_state(Some(&a), seen("ca-2", &rb, 5, 0, 100), SETTLE).unwrap();
        // Another control plane read the Mesh at revision 4 (still ca-1).
        assert_eq!(
            next_state(Some(&rot), seen("ca-1", &ra, 4, 0, 100), SETTLE),
            None
        );
    }

    #[test]
    fn a_bundle_keeps_the_previous_root_while_the_state_lists_it() {
        let material =
            MeshCa::generate_builtin("m", "ca-1", "m", Duration::from_secs(3600)).unwrap();
        let ca = MeshCa::load(&material).unwrap();
        let state = CaState {
            enabled_backend: "ca-1".into(),
            enabled: CaRoot::of(&ca),
            previous_backend: Some("ca-0".into()),
            previous: Some(root("old")),
            rotation_started: Some(1),
            mesh_revision: 1,
        };
        let id = MeshIdentity {
            ca,
            backend: "ca-1".into(),
            trust_domain: "m".into(),
            lifetime: Duration::from_secs(60),
            state,
        };
        assert_eq!(id.bundle().roots_pem.len(), 2);
        assert!(matches!(
            id.rotation(0).phase,
            RotationPhase::Rotating {
                proxies_on_old: 0,
                ..
            }
        ));
    }
}
