//! Trust bundles and the CA rotation model.
//!
//! Owns which roots a mesh trusts, and the pure rotation rule: while any
//! connected proxy still holds a certificate from the previous CA, the
//! bundle carries both roots (phase `Rotating`); once none does, only the
//! new root remains (phase `Stable`). It never counts proxies or reads a
//! clock itself: the control plane passes those facts in and stores the
//! resulting phase in Mesh status.

use serde::{Deserialize, Serialize};

use crate::ca::MeshCa;
use crate::x509::{self, PemError};

/// The roots a workload trusts, one PEM certificate per entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustBundle {
    /// Root certificates (PEM), newest CA first.
    pub roots_pem: Vec<String>,
}

/// A CA as the rotation model sees it: its fingerprint and the root that
/// goes into bundles.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaRoot {
    /// SHA-256 fingerprint of the CA certificate (what issued certificates
    /// record in `IssuedCert::ca_fingerprint`).
    pub fingerprint: String,
    /// The root certificate PEM for the bundle.
    pub root_pem: String,
}

/// Where a mesh is in a CA rotation; the control plane shows it in Mesh
/// status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "camelCase")]
pub enum RotationPhase {
    /// One CA; the bundle holds only its root.
    Stable,
    /// Changing CA; the bundle holds old and new roots.
    #[serde(rename_all = "camelCase")]
    Rotating {
        /// Fingerprint of the previous CA.
        old: String,
        /// Fingerprint of the enabled CA.
        new: String,
        /// Connected proxies whose current certificate is still from `old`.
        proxies_on_old: usize,
    },
}

/// The bundle to distribute and the phase to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RotationState {
    /// Roots every proxy must trust now.
    pub bundle: TrustBundle,
    /// The rotation phase.
    pub phase: RotationPhase,
}

// === impl TrustBundle ===

impl TrustBundle {
    /// A bundle of the given roots, dropping exact duplicates (by
    /// fingerprint), keeping the first occurrence.
    pub fn new(roots_pem: Vec<String>) -> TrustBundle {
        let mut seen = Vec::new();
        let roots_pem = roots_pem
            .into_iter()
            .filter(|pem| {
                let key = x509::pem_cert(pem)
                    .map(|der| x509::fingerprint(&der))
                    .unwrap_or_else(|_| pem.clone());
                let fresh = !seen.contains(&key);
                seen.push(key);
                fresh
            })
            .collect();
        TrustBundle { roots_pem }
    }

    /// Splits a concatenated PEM bundle (e.g. a `ca.crt` file) into roots.
    pub fn from_pem(pem: &str) -> Result<TrustBundle, PemError> {
        let roots = x509::pem_certs(pem)?
            .iter()
            .map(|der| x509::der_to_pem("CERTIFICATE", der))
            .collect();
        Ok(TrustBundle::new(roots))
    }

    /// The bundle as one concatenated PEM text.
    pub fn to_pem(&self) -> String {
        let mut out = String::new();
        for root in &self.roots_pem {
            out.push_str(root.trim_end());
            out.push('\n');
        }
        out
    }

    /// SHA-256 fingerprints of the roots, in bundle order. Entries that do
    /// not decode are skipped.
    pub fn fingerprints(&self) -> Vec<String> {
        self.roots_pem
            .iter()
            .filter_map(|pem| x509::pem_cert(pem).ok())
            .map(|der| x509::fingerprint(&der))
            .collect()
    }

    /// Whether a root with this SHA-256 fingerprint (lowercase hex) is in
    /// the bundle.
    pub fn contains(&self, fingerprint: &str) -> bool {
        self.fingerprints()
            .iter()
            .any(|fp| fp.eq_ignore_ascii_case(fingerprint))
    }

    /// True when the bundle has no roots.
    pub fn is_empty(&self) -> bool {
        self.roots_pem.is_empty()
    }
}

// === impl CaRoot ===

impl CaRoot {
    /// The rotation view of a loaded mesh CA.
    pub fn of(ca: &MeshCa) -> CaRoot {
        CaRoot {
            fingerprint: ca.fingerprint(),
            root_pem: ca.root_pem().to_owned(),
        }
    }
}

// === impl RotationState ===

impl RotationState {
    /// The rotation rule. `previous` is the CA that was enabled before
    /// `enabled` (if any, and if it is still known); `proxies_on_previous`
    /// counts connected proxies whose current certificate it issued.
    ///
    /// - no previous CA, or the same CA: `Stable`, bundle = enabled root;
    /// - proxies still on the previous CA: `Rotating`, bundle = enabled
    ///   root then previous root;
    /// - no proxy left on the previous CA: `Stable`, bundle = enabled root.
    pub fn compute(
        enabled: &CaRoot,
        previous: Option<&CaRoot>,
        proxies_on_previous: usize,
    ) -> RotationState {
        match previous {
            Some(old) if old.fingerprint != enabled.fingerprint && proxies_on_previous > 0 => {
                RotationState {
                    bundle: TrustBundle::new(vec![enabled.root_pem.clone(), old.root_pem.clone()]),
                    phase: RotationPhase::Rotating {
                        old: old.fingerprint.clone(),
                        new: enabled.fingerprint.clone(),
                        proxies_on_old: proxies_on_previous,
                    },
                }
            }
            _ => RotationState {
                bundle: TrustBundle::new(vec![enabled.root_pem.clone()]),
                phase: RotationPhase::Stable,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const TEN_YEARS: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

    fn ca(backend: &str) -> CaRoot {
        let material = MeshCa::generate_builtin("m", backend, "m", TEN_YEARS).unwrap();
        CaRoot::of(&MeshCa::load(&material).unwrap())
    }

    #[test]
    fn a_single_ca_is_stable_with_its_root() {
        let new = ca("a");
        let state = RotationState::compute(&new, None, 3);
        assert_eq!(state.phase, RotationPhase::Stable);
        assert_eq!(state.bundle.roots_pem, vec![new.root_pem.clone()]);
        assert!(state.bundle.contains(&new.fingerprint));
        let same = RotationState::compute(&new, Some(&new), 3);
        assert_eq!(same, state);
    }

    #[test]
    fn rotation_keeps_both_roots_until_no_proxy_is_on_the_old_ca() {
        let (old, new) = (ca("old"), ca("new"));
        let rotating = RotationState::compute(&new, Some(&old), 2);
        assert_eq!(
            rotating.phase,
            RotationPhase::Rotating {
                old: old.fingerprint.clone(),
                new: new.fingerprint.clone(),
                proxies_on_old: 2,
            }
        );
        assert_eq!(
            rotating.bundle.fingerprints(),
            vec![new.fingerprint.clone(), old.fingerprint.clone()]
        );

        let one_left = RotationState::compute(&new, Some(&old), 1);
        assert!(one_left.bundle.contains(&old.fingerprint));

        let done = RotationState::compute(&new, Some(&old), 0);
        assert_eq!(done.phase, RotationPhase::Stable);
        assert_eq!(done.bundle.fingerprints(), vec![new.fingerprint.clone()]);
        assert!(!done.bundle.contains(&old.fingerprint));
    }

    #[test]
    fn phase_serializes_for_mesh_status() {
        let phase = RotationPhase::Rotating {
            old: "aa".into(),
            new: "bb".into(),
            proxies_on_old: 1,
        };
        let json = serde_json::to_value(&phase).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"phase": "rotating", "old": "aa", "new": "bb", "proxiesOnOld": 1})
        );
        assert_eq!(
            serde_json::to_value(RotationPhase::Stable).unwrap(),
            serde_json::json!({"phase": "stable"})
        );
    }

    #[test]
    fn bundle_pem_round_trips_and_dedupes() {
        let (a, b) = (ca("a"), ca("b"));
        let bundle = TrustBundle::new(vec![a.root_pem.clone(), b.root_pem.clone(), a.root_pem]);
        assert_eq!(bundle.roots_pem.len(), 2);
        let back = TrustBundle::from_pem(&bundle.to_pem()).unwrap();
        assert_eq!(back.fingerprints(), bundle.fingerprints());
        assert!(TrustBundle::from_pem("junk").is_err());
    }
}
