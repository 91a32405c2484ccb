//! How issuers reach the mesh CA controller: [`CaHandle`].
//!
//! Certify, the hub's SDS issuance ([`crate::ads`]) and the REST API hold a
//! `CaHandle`. Through it they
//! - read the identity to issue with ([`CaHandle::load`]) without ever
//!   writing `internal.MeshCAState`: when the stored state does not reflect
//!   the Mesh spec yet, they ask the controller to reconcile that mesh and
//!   wait for its answer, at most [`LOAD_WAIT`], then fail with "not ready"
//!   (the proxy retries). Waiting rather than computing the would-be state
//!   in memory keeps one rule: every certificate comes from the CA the store
//!   says is enabled, so a rotation's bookkeeping always knows its old CA;
//! - report every issuance ([`CaHandle::issued`]), a non-blocking send on
//!   the controller's channel; the controller tracks rotation progress from
//!   these events and persists them coalesced;
//! - read the time from the one [`WallClock`] of this control plane, so
//!   certificates issued by Certify and by the hub agree on "now".

use std::time::{Duration, SystemTime};

use meshlink_api::{Kind, Resource};
use meshlink_identity::{IssuedCert, WallClock};
use tokio::sync::{mpsc, oneshot};

use super::mesh_ca::{self, IssuedRecord, MeshCaError, MeshIdentity};
use crate::resources::ResourceService;

/// The longest an issuer waits for the controller to store a CA state
/// matching the Mesh spec.
pub const LOAD_WAIT: Duration = Duration::from_secs(5);

/// An issued certificate, reported to the controller.
#[derive(Debug, Clone)]
pub struct Issuance {
    /// Mesh of the dataplane.
    pub mesh: String,
    /// The dataplane.
    pub dataplane: String,
    /// What it now holds.
    pub record: IssuedRecord,
}

/// What the controller answers to a reconcile request.
#[derive(Debug, Clone)]
pub(crate) enum Reconciled {
    /// Done (the state may still not match if the Mesh changed meanwhile).
    Done,
    /// The mesh's CA is invalid.
    Invalid {
        /// Backend.
        backend: String,
        /// Why.
        reason: String,
    },
    /// mTLS is off.
    MtlsDisabled,
    /// The store failed.
    Failed(String),
}

/// Messages to the controller.
pub(crate) enum Request {
    /// Reconcile a mesh now and answer when done.
    Reconcile {
        /// Mesh name.
        mesh: String,
        /// The answer.
        done: oneshot::Sender<Reconciled>,
    },
    /// A certificate was issued.
    Issued(Issuance),
    /// How many proxies still hold a certificate from the previous CA.
    Progress {
        /// Mesh name.
        mesh: String,
        /// `None` when no rotation is in progress.
        reply: oneshot::Sender<Option<usize>>,
    },
}

/// The issuers' side of the mesh CA controller. Cheap to clone.
#[derive(Clone)]
pub struct CaHandle {
    tx: mpsc::UnboundedSender<Request>,
    clock: WallClock,
}

impl CaHandle {
    pub(crate) fn new(tx: mpsc::UnboundedSender<Request>, clock: WallClock) -> Self {
        Self { tx, clock }
    }

    /// The control plane's wall clock for certificate times.
    pub fn clock(&self) -> WallClock {
        self.clock
    }

    /// Now, by [`Self::clock`].
    pub fn now(&self) -> SystemTime {
        self.clock.now()
    }

    /// The identity to issue with for `mesh`, read from the store. If the
    /// stored CA state does not match the Mesh spec yet, asks the controller
    /// to reconcile and waits up to [`LOAD_WAIT`]. Never writes.
    /// `mesh` is the Mesh as the caller read it; after the controller
    /// answers, it is read again, since the spec may have moved on.
    pub async fn load(
        &self,
        resources: &ResourceService,
        mesh: &Resource,
    ) -> Result<MeshIdentity, MeshCaError> {
        let store = resources.store().as_ref();
        let deadline = tokio::time::Instant::now() + LOAD_WAIT;
        let mut fresh: Option<Resource> = None;
        loop {
            let mesh = fresh.as_ref().unwrap_or(mesh);
            if let Some(id) = mesh_ca::read_identity(store, mesh).await? {
                return Ok(id);
            }
            let (done, answer) = oneshot::channel();
            let req = Request::Reconcile {
                mesh: mesh.name().to_string(),
                done,
            };
            if self.tx.send(req).is_err() {
                return Err(MeshCaError::NotReady(mesh.name().to_string()));
            }
            match tokio::time::timeout_at(deadline, answer).await {
                Ok(Ok(Reconciled::Done)) => {}
                Ok(Ok(Reconciled::Invalid { backend, reason })) => {
                    return Err(MeshCaError::Invalid {
                        mesh: mesh.name().to_string(),
                        backend,
                        reason,
                    });
                }
                Ok(Ok(Reconciled::MtlsDisabled)) => {
                    return Err(MeshCaError::MtlsDisabled(mesh.name().to_string()));
                }
                Ok(Ok(Reconciled::Failed(reason))) => {
                    tracing::debug!(
                        mesh = mesh.name(),
                        reason,
                        "CA state not reconciled yet; waiting"
                    );
                    let pause = tokio::time::Instant::now() + Duration::from_millis(100);
                    tokio::time::sleep_until(pause.min(deadline)).await;
                }
                Ok(Err(_)) | Err(_) => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(MeshCaError::NotReady(mesh.name().to_string()));
            }
            fresh = match resources.get(Kind::Mesh, None, mesh.name()).await {
                Ok(m) => Some(m),
                Err(_) => return Err(MeshCaError::NotReady(mesh.name().to_string())),
            };
        }
    }

    /// Reports a certificate issued to `dataplane` of `mesh`. Never blocks.
    pub fn issued(&self, mesh: &str, dataplane: &str, cert: &IssuedCert) {
        let record = IssuedRecord {
            ca_fingerprint: cert.ca_fingerprint.clone(),
            serial: cert.serial_hex.clone(),
            spiffe_id: cert.spiffe_id.clone(),
            not_after: mesh_ca::unix_seconds(cert.not_after),
            issued_at_ms: mesh_ca::unix_millis(self.clock.now()),
        };
        let _ = self.tx.send(Request::Issued(Issuance {
            mesh: mesh.to_string(),
            dataplane: dataplane.to_string(),
            record,
        }));
    }

    /// How many dataplanes still hold an unexpired certificate from the
    /// previous CA of `mesh`, as this control plane knows; `None` when no
    /// rotation is in progress or the controller is gone.
    pub async fn proxies_on_previous(&self, mesh: &str) -> Option<usize> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Request::Progress {
                mesh: mesh.to_string(),
                reply,
            })
            .ok()?;
        answer.await.ok().flatten()
    }
}
