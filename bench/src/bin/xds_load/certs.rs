//! The stale-certificate check after a reconnect storm: for every proxy,
//! is its identity certificate present, carrying a key, unexpired, and
//! signed by a root of the mesh's current trust bundle?
//!
//! It reads states only; it never talks to the control plane.

use std::collections::HashSet;

use serde_json::{Value, json};
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::resources::pem_certs;
use crate::state::ProxyState;

/// Counts over all proxies.
#[derive(Debug, Default)]
pub(crate) struct CertCheck {
    /// Proxies checked.
    pub(crate) proxies: usize,
    /// Proxies whose certificate is fine.
    pub(crate) ok: usize,
    /// No identity certificate held.
    pub(crate) missing: usize,
    /// Held, but expired.
    pub(crate) expired: usize,
    /// Held, but not signed by the current trust bundle.
    pub(crate) foreign: usize,
    /// Held, but without a private key.
    pub(crate) no_key: usize,
    /// Serial differs from the one held before the storm.
    pub(crate) reissued: usize,
}

impl CertCheck {
    /// Stale = missing, expired or not issued by the current CA.
    pub(crate) fn stale(&self) -> usize {
        self.missing + self.expired + self.foreign
    }

    /// As JSON.
    pub(crate) fn json(&self) -> Value {
        json!({"proxies": self.proxies, "ok": self.ok, "stale": self.stale(),
            "missing": self.missing, "expired": self.expired, "not_issued_by_current_ca": self.foreign,
            "without_key": self.no_key, "reissued": self.reissued})
    }
}

/// The identity serial each proxy holds (first identity secret).
pub(crate) fn serials(states: &[ProxyState]) -> Vec<Option<String>> {
    states
        .iter()
        .map(|s| s.identities.values().next().map(|c| c.serial.clone()))
        .collect()
}

/// Checks every proxy's identity against `bundle_pem` at `now_unix`;
/// `before` are the serials held before the storm.
pub(crate) fn check(
    states: &[ProxyState],
    bundle_pem: &[String],
    before: &[Option<String>],
    now_unix: i64,
) -> anyhow::Result<CertCheck> {
    let mut roots_der = Vec::new();
    for pem in bundle_pem {
        roots_der.extend(pem_certs(pem.as_bytes()).map_err(anyhow::Error::msg)?);
    }
    let roots: Vec<X509Certificate<'_>> = roots_der
        .iter()
        .map(|d| X509Certificate::from_der(d).map(|(_, c)| c))
        .collect::<Result<_, _>>()?;
    let mut verified: HashSet<Vec<u8>> = HashSet::new();
    let mut out = CertCheck {
        proxies: states.len(),
        ..Default::default()
    };
    for (i, s) in states.iter().enumerate() {
        let Some(cert) = s.identities.values().next() else {
            out.missing += 1;
            continue;
        };
        if before.get(i).cloned().flatten().as_ref() != Some(&cert.serial) {
            out.reissued += 1;
        }
        if !cert.has_key {
            out.no_key += 1;
        }
        if cert.not_after <= now_unix {
            out.expired += 1;
            continue;
        }
        // Several proxies may share one certificate: verify each once.
        let signed = verified.contains(&cert.leaf_der)
            || match X509Certificate::from_der(&cert.leaf_der) {
                Ok((_, leaf)) => roots
                    .iter()
                    .any(|r| leaf.verify_signature(Some(r.public_key())).is_ok()),
                Err(_) => false,
            };
        if signed {
            verified.insert(cert.leaf_der.clone());
            out.ok += usize::from(cert.has_key);
        } else {
            out.foreign += 1;
        }
    }
    Ok(out)
}
