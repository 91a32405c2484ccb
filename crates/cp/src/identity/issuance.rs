//! Issuance events: one event per workload certificate the control plane
//! issues, for whoever tracks certificates in memory (the Dataplane status
//! task; the mesh CA controller's rotation progress).
//!
//! Owns the event type and the list of observers. Certify emits an event
//! after every successful issue; observers must not block (they queue the
//! event for their own task).

use std::sync::Arc;
use std::time::SystemTime;

/// How a certificate reached its proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Signed from the proxy's CSR by the Certify RPC (meshlink-proxy).
    Certify,
    /// Issued with a control-plane key and sent over SDS (Envoy clients).
    Sds,
}

impl Delivery {
    /// `certify` or `sds`, as written in Dataplane status.
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Certify => "certify",
            Delivery::Sds => "sds",
        }
    }
}

/// One issued workload certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issuance {
    /// Mesh of the dataplane.
    pub mesh: String,
    /// Dataplane name.
    pub dataplane: String,
    /// Serial number, hex.
    pub serial: String,
    /// SPIFFE ID in the URI SAN.
    pub spiffe_id: String,
    /// Fingerprint of the issuing CA.
    pub ca_fingerprint: String,
    /// The mesh CA backend that issued it.
    pub backend: String,
    /// When it was issued (notBefore is backdated; this is not).
    pub issued_at: SystemTime,
    /// notAfter.
    pub not_after: SystemTime,
    /// How it was delivered.
    pub delivery: Delivery,
    /// Who asked for it (Certify: the process's instance id and address),
    /// so two processes holding one Dataplane's identity can be told apart.
    pub holder: meshlink_xds::ads::Holder,
}

/// Receives issuance events; must not block.
pub type IssuanceObserver = Arc<dyn Fn(&Issuance) + Send + Sync>;

/// The observers Certify tells about each issue. Cheap to clone.
#[derive(Clone, Default)]
pub struct IssuanceHooks {
    observers: Vec<IssuanceObserver>,
}

impl std::fmt::Debug for IssuanceHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuanceHooks")
            .field("observers", &self.observers.len())
            .finish()
    }
}

impl IssuanceHooks {
    /// Adds an observer.
    pub fn add(&mut self, observer: IssuanceObserver) {
        self.observers.push(observer);
    }

    /// Tells every observer about `event`.
    pub fn issued(&self, event: &Issuance) {
        for o in &self.observers {
            o(event);
        }
    }
}
