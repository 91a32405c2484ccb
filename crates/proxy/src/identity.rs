//! The proxy's workload identity: an ECDSA P-256 key generated here, a
//! certificate from the control plane's Certify RPC, and its renewal.
//!
//! Owns the identity actor. It publishes `Some(identity)` on a `watch`
//! channel once the first certificate arrives and every renewed one after
//! that; the key never leaves the process (I4). On failure it keeps the
//! still-valid identity published and retries with backoff (the
//! [`RenewalDriver`]). It never exits because the control plane, the token
//! or the CA file is missing: it waits and retries.
//!
//! Besides the half-life schedule it renews early in two cases: the trust
//! bundle gains a root (a CA rotation: at once), and the mesh's identity
//! policy (the lifetime the mesh issues now, an SDS Secret the control
//! plane sends because this proxy lists the feature) says less than the
//! current certificate has left (a lowered lifetime: within the first 20%
//! of the new lifetime, jittered, so a mesh's proxies do not all call
//! Certify in the same second).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use meshlink_identity::renewal::{BackoffPolicy, Credential, MAX_JITTER, RenewalDriver, WallClock};
use meshlink_identity::{IssuedCert, lowered_lifetime_delay, outlives_lifetime, random_jitter};
use meshlink_proto::certify::CertifyRequest;
use meshlink_proto::certify::certify_client::CertifyClient;
use rcgen::{CertificateParams, KeyPair, PKCS_ECDSA_P256_SHA256};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::backoff::Backoff;
use crate::cp::{CpTarget, FailureKind, Pace};
use crate::metrics::ProxyMetrics;
use crate::model::{ProxyConfig, SecretSpec};

/// A certificate from Certify and the private key it certifies.
#[derive(Debug, Clone)]
pub struct WorkloadIdentity {
    /// The leaf, its chain, serial, SPIFFE ID and validity.
    pub cert: IssuedCert,
    /// The private key (PKCS#8 PEM); never sent anywhere.
    pub key_pem: String,
}

impl Credential for WorkloadIdentity {
    fn not_before(&self) -> SystemTime {
        self.cert.not_before
    }
    fn not_after(&self) -> SystemTime {
        self.cert.not_after
    }
}

/// Why one Certify attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// Files or connection (see [`crate::cp::CpError`]).
    #[error(transparent)]
    Cp(#[from] crate::cp::CpError),
    /// The token names no service, so there is no identity to ask for.
    #[error(
        "the proxy token names no service; the Dataplane needs an inbound with a kuma.io/service tag"
    )]
    NoService,
    /// The control plane refused or failed the request.
    #[error("Certify refused by the control plane at {at}: {code:?}: {message}")]
    Refused {
        /// The control plane asked (its `--cp` URL and place).
        at: String,
        /// gRPC status code.
        code: tonic::Code,
        /// The control plane's message (it names the fix).
        message: String,
    },
    /// The response could not be used.
    #[error("Certify returned an unusable certificate: {0}")]
    BadResponse(String),
    /// Key or CSR generation failed (should not happen).
    #[error("generating the key or CSR failed: {0}")]
    Key(String),
}

/// Shared view of the identity actor, for readiness and the admin API.
#[derive(Debug, Clone, Default)]
pub struct IdentityStatus {
    last_error: Arc<Mutex<Option<String>>>,
}

impl IdentityStatus {
    /// The last failure, if the latest attempt failed.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .expect("identity status lock")
            .clone()
    }

    fn set(&self, error: Option<String>) {
        *self.last_error.lock().expect("identity status lock") = error;
    }
}

/// A failed Certify call, and when the next one may go.
#[derive(Debug)]
pub struct CertifyFailure {
    /// What went wrong (it names the control plane asked).
    pub error: IdentityError,
    /// [`Pace::Immediate`]: the control plane is going away and the next
    /// attempt goes to another one, so it need not wait.
    pub pace: Pace,
}

impl From<IdentityError> for CertifyFailure {
    fn from(error: IdentityError) -> Self {
        CertifyFailure {
            error,
            pace: Pace::Backoff,
        }
    }
}

impl From<crate::cp::CpError> for CertifyFailure {
    fn from(error: crate::cp::CpError) -> Self {
        IdentityError::Cp(error).into()
    }
}

/// One Certify call: a fresh key, a CSR, the token from the token file,
/// to the current control-plane candidate (a failure moves the rotation).
pub async fn certify_once(target: &CpTarget) -> Result<WorkloadIdentity, CertifyFailure> {
    let token = target.credentials()?;
    let service = token
        .claims
        .services
        .first()
        .cloned()
        .ok_or(IdentityError::NoService)?;
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
        .map_err(|e| IdentityError::Key(e.to_string()))?;
    let csr = CertificateParams::new(Vec::<String>::new())
        .and_then(|p| p.serialize_request(&key))
        .map_err(|e| IdentityError::Key(e.to_string()))?
        .der()
        .to_vec();
    let attempt = target.endpoints.attempt().await;
    let channel = match target.connect(&attempt).await {
        Ok(channel) => channel,
        Err(e) => {
            let pace = crate::cp::report_connect_failure(&attempt, &e);
            return Err(CertifyFailure {
                error: e.into(),
                pace,
            });
        }
    };
    let mut request = tonic::Request::new(CertifyRequest {
        mesh: target.node.0.clone(),
        dataplane: target.node.1.clone(),
        service,
        csr,
        instance: target.instance.clone(),
    });
    request
        .metadata_mut()
        .insert("authorization", token.bearer.clone());
    let response = match CertifyClient::new(channel).certify(request).await {
        Ok(response) => response.into_inner(),
        Err(s) => {
            let error = IdentityError::Refused {
                at: attempt.to_string(),
                code: s.code(),
                message: s.message().to_owned(),
            };
            let pace = attempt.failed(FailureKind::of_status(&s), &error.to_string());
            return Err(CertifyFailure { error, pace });
        }
    };
    attempt.succeeded();
    let at = |secs: i64| UNIX_EPOCH + Duration::from_secs(secs.max(0) as u64);
    if response.certificate_pem.is_empty() {
        return Err(IdentityError::BadResponse("no certificate".into()).into());
    }
    Ok(WorkloadIdentity {
        cert: IssuedCert {
            cert_pem: response.certificate_pem,
            chain_pem: response.chain_pem,
            serial_hex: response.serial,
            spiffe_id: response.spiffe_id,
            not_before: at(response.not_before),
            not_after: at(response.not_after),
            ca_fingerprint: String::new(),
        },
        key_pem: key.serialize_pem(),
    })
}

/// Runs the identity actor until `cancel`: first certificate (retrying
/// with backoff forever), then renewal at 50% ± 10% of its lifetime, and
/// at once when the mesh trust bundle gains a root (a CA rotation: the
/// new CA should sign this proxy's certificate before the old one leaves
/// the bundle).
pub async fn run(
    target: CpTarget,
    publish: watch::Sender<Option<Arc<WorkloadIdentity>>>,
    status: IdentityStatus,
    metrics: Arc<ProxyMetrics>,
    config: watch::Receiver<Arc<ProxyConfig>>,
    cancel: CancellationToken,
) {
    let clock = WallClock::start();
    let mut lifetime = LifetimeWatch {
        config: config.clone(),
        identity: publish.subscribe(),
        mesh: target.node.0.clone(),
        clock,
        due: None,
    };
    let mut roots = RootWatch {
        config,
        known: None,
    };
    let Some(mut current) = obtain(&target, &status, &cancel).await else {
        return;
    };
    loop {
        status.set(None);
        log_issued(&current);
        publish.send_replace(Some(current.clone()));
        metrics.cert_rotations.inc();

        let (tx, mut rx) = watch::channel(current.clone());
        let driver = RenewalDriver::new("workload identity", current.clone(), tx)
            .with_clock(clock)
            .with_obtained_at(clock.now())
            .with_backoff(BackoffPolicy {
                initial: Duration::from_millis(500),
                // Retries are cheap for the control plane and a renewal
                // missed during an outage should land soon after it returns.
                max: Duration::from_secs(5),
                min: Duration::from_millis(500),
                ..BackoffPolicy::default()
            })
            .with_attempt_timeout(Duration::from_secs(10));
        let issue = renewal_issuer(target.clone(), status.clone(), publish.subscribe(), clock);
        let forward = async {
            while rx.changed().await.is_ok() {
                let fresh = rx.borrow_and_update().clone();
                log_issued(&fresh);
                metrics.cert_rotations.inc();
                publish.send_replace(Some(fresh));
            }
        };
        tokio::select! {
            () = driver.run(issue, cancel.clone()) => return,
            () = forward => return,
            () = roots.new_root_added() => {
                tracing::info!("the mesh trust bundle gained a root (CA rotation); renewing the identity certificate now");
            }
            () = lifetime.outlived() => {
                tracing::info!("renewing the identity certificate early: the mesh's certificate lifetime was lowered below what it had left");
            }
        }
        let Some(fresh) = obtain(&target, &status, &cancel).await else {
            return;
        };
        current = fresh;
    }
}

/// Certify until it succeeds (backoff; at most a second apart while the
/// control plane is unreachable), or `None` when cancelled.
async fn obtain(
    target: &CpTarget,
    status: &IdentityStatus,
    cancel: &CancellationToken,
) -> Option<Arc<WorkloadIdentity>> {
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(15));
    let mut log = crate::log_limit::LogLimiter::new(crate::log_limit::REPEAT_INTERVAL);
    loop {
        let attempt = tokio::select! {
            () = cancel.cancelled() => return None,
            r = certify_once(target) => r,
        };
        match attempt {
            Ok(identity) => return Some(Arc::new(identity)),
            Err(CertifyFailure { error: e, pace }) => {
                if let Some(failures) = log.hit(tokio::time::Instant::now()) {
                    tracing::warn!(error = %e, failures, "identity certificate not obtained yet (logged at most every 30 s while it lasts)");
                }
                status.set(Some(e.to_string()));
                if pace == Pace::Immediate {
                    // The control plane is going away; the next one now.
                    continue;
                }
                let mut delay = backoff.next_delay();
                if let IdentityError::Cp(cp) = &e
                    && cp.is_unreachable()
                {
                    delay = delay.min(crate::cp::UNREACHABLE_RETRY_CAP);
                }
                tokio::select! {
                    () = cancel.cancelled() => return None,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// The renewal driver's issuer: one Certify call, logging on failure how
/// long the current certificate still carries traffic.
fn renewal_issuer(
    target: CpTarget,
    status: IdentityStatus,
    current: watch::Receiver<Option<Arc<WorkloadIdentity>>>,
    clock: WallClock,
) -> impl FnMut() -> std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<WorkloadIdentity, IdentityError>> + Send>,
> {
    move || {
        let target = target.clone();
        let status = status.clone();
        let current = current.clone();
        Box::pin(async move {
            let mut r = certify_once(&target).await;
            if let Err(CertifyFailure {
                pace: Pace::Immediate,
                ..
            }) = &r
            {
                // One immediate move to the next control plane; a second
                // failure is left to the driver's backoff.
                r = certify_once(&target).await;
            }
            let r = r.map_err(|f| f.error);
            if let Err(e) = &r {
                let left = current.borrow().as_ref().map(|id| {
                    id.cert.not_after.duration_since(clock.now()).map_or_else(
                        |_| "expired".to_owned(),
                        |d| {
                            humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
                        },
                    )
                });
                tracing::warn!(error = %e, certificate_expires_in = left.as_deref().unwrap_or("-"), "identity renewal failed; the current certificate stays in use");
            }
            status.set(r.as_ref().err().map(|e| e.to_string()));
            r
        })
    }
}

/// Notices that the current certificate outlives the mesh's certificate
/// lifetime (it was lowered since the certificate was issued), and when
/// the early renewal is due.
struct LifetimeWatch {
    config: watch::Receiver<Arc<ProxyConfig>>,
    identity: watch::Receiver<Option<Arc<WorkloadIdentity>>>,
    mesh: String,
    clock: WallClock,
    /// When the early renewal of the certificate with this serial is due.
    /// Drawn once and kept across unrelated configuration changes, so a
    /// busy mesh cannot postpone it; drawn again only if the lifetime is
    /// lowered further below it.
    due: Option<(tokio::time::Instant, String)>,
}

impl LifetimeWatch {
    /// Resolves when the current certificate outlives the mesh's lifetime
    /// and its jittered delay ([`lowered_lifetime_delay`]) has passed.
    /// Cancellation-safe: the deadline is kept in `self`.
    async fn outlived(&mut self) {
        let mut open = true;
        loop {
            self.evaluate();
            let due = self.due.as_ref().map(|(at, _)| *at);
            let sleep = async move {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = sleep => {
                    self.due = None;
                    return;
                }
                r = self.config.changed(), if open => open = r.is_ok(),
                r = self.identity.changed(), if open => open = r.is_ok(),
            }
        }
    }

    /// Sets or clears [`Self::due`] from the current policy and identity.
    fn evaluate(&mut self) {
        let lifetime = self
            .config
            .borrow_and_update()
            .identity_policy(&self.mesh)
            .map(|p| p.certificate_lifetime);
        let current = self.identity.borrow_and_update().clone();
        let (Some(lifetime), Some(id)) = (lifetime, current) else {
            self.due = None;
            return;
        };
        let cert = &id.cert;
        if !outlives_lifetime(cert.not_before, cert.not_after, self.clock.now(), lifetime) {
            self.due = None;
            return;
        }
        let now = tokio::time::Instant::now();
        let latest = now + lowered_lifetime_delay(lifetime, MAX_JITTER);
        if let Some((at, serial)) = &self.due
            && *serial == cert.serial_hex
            && *at <= latest
        {
            return;
        }
        let delay = lowered_lifetime_delay(lifetime, random_jitter());
        tracing::info!(
            serial = %cert.serial_hex,
            expires = %humantime::format_rfc3339_seconds(cert.not_after),
            lifetime = %humantime::format_duration(lifetime),
            renew_in = %humantime::format_duration(Duration::from_millis(delay.as_millis() as u64)),
            "the mesh's certificate lifetime is below what this certificate has left; renewing it early"
        );
        self.due = Some((now + delay, cert.serial_hex.clone()));
    }
}

/// Notices roots added to the trust bundles the control plane sends.
struct RootWatch {
    config: watch::Receiver<Arc<ProxyConfig>>,
    /// The roots last seen; `None` until a bundle first arrives (the first
    /// bundle is the baseline, not an addition).
    known: Option<BTreeSet<String>>,
}

impl RootWatch {
    /// Resolves when a bundle gains a root; pending forever if the
    /// configuration channel closes. Cancellation-safe.
    async fn new_root_added(&mut self) {
        loop {
            let roots: BTreeSet<String> = self
                .config
                .borrow_and_update()
                .secrets
                .values()
                .filter_map(|s| match s.value.as_ref() {
                    SecretSpec::TrustBundle(b) => Some(b.fingerprints()),
                    SecretSpec::TlsCertificate | SecretSpec::IdentityPolicy(_) => None,
                })
                .flatten()
                .collect();
            let added = match &self.known {
                None => false,
                Some(known) => roots.difference(known).next().is_some(),
            };
            if !roots.is_empty() || self.known.is_some() {
                self.known = Some(roots);
            }
            if added {
                return;
            }
            if self.config.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

fn log_issued(identity: &WorkloadIdentity) {
    tracing::info!(
        spiffe_id = %identity.cert.spiffe_id,
        serial = %identity.cert.serial_hex,
        expires = %humantime::format_rfc3339_seconds(identity.cert.not_after),
        "identity certificate in use"
    );
}
