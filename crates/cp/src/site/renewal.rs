//! Renewing Link client credentials: a Secret whose data names the grant
//! server that issued it ([`RENEW_URL`] and [`RENEW_CA`], put there by every
//! grant redemption and `meshlink link generate`, so a Secret applied by
//! hand renews too) or, for Secrets stored before that, labelled
//! [`RENEW_TOKEN`] (the AccessToken that brought it), is renewed at the
//! issuing site's `POST /renew` at 50 % ± 10 % of its certificate's
//! lifetime (the workload schedule; the jitter is derived from the
//! certificate, so control planes sharing a store agree), authenticated by
//! a CSR signed with the Secret's key next to the current certificate.
//!
//! Owns the schedule, the retries (backoff 0.5 s doubling to 30 s, with
//! jitter; the still-valid certificate stays in use) and the Secret write
//! (a compare-and-swap on the version read, keeping every other data key).
//! A Secret with neither is not renewed; the Link's `CredentialsValid`
//! condition says so (`crate::router::credentials`). The router picks the new certificate up over SDS and uses it
//! for new handshakes; links that are up stay up. Renewals run on this
//! struct's `JoinSet`, owned by the site controller.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use meshlink_api::spec::{Spec, TLS_CRT, TLS_KEY};
use meshlink_api::{Kind, Resource};
use meshlink_identity::check_tls_pair;
use meshlink_identity::renewal::renewal_time_from;
use tokio::task::JoinSet;

use super::router_access::jitter_of;
use crate::grants::client::post_renewal;
use crate::resources::{ResourceError, ResourceService};

/// Label on a Secret stored by a redemption: the AccessToken's name, whose
/// `url` and `ca` reach the site that issued it.
pub const RENEW_TOKEN: &str = "meshlink.dev/renew-token";
/// Data key of a link Secret: base64 of the issuing site's renewal URL,
/// `https://<advertised host>:<grant port>/renew`.
pub const RENEW_URL: &str = "renew-url";
/// Data key of a link Secret: base64 of the PEM CA that verifies the
/// issuing site's grant server (the grants' `ca`).
pub const RENEW_CA: &str = "renew-ca.crt";
/// How far the site CA backdates notBefore.
const BACKDATE: Duration = Duration::from_secs(60);
/// Longest wait between failed attempts.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// The renewals in flight and their retry times.
#[derive(Default)]
pub struct Renewals {
    tasks: JoinSet<Result<(), String>>,
    in_flight: HashMap<tokio::task::Id, String>,
    retry: HashMap<String, (u32, SystemTime)>,
}

/// When the Secret's certificate is due for renewal, if it has a usable
/// certificate and key. The site CA backdates notBefore by
/// [`BACKDATE`]; the lifetime counts from the issuance, so a short-lived
/// certificate is not due before it was even issued.
pub fn due_at(secret: &Resource) -> Option<SystemTime> {
    let s = secret.spec.as_secret()?;
    let (cert, key) = (s.decoded(TLS_CRT)?, s.decoded(TLS_KEY)?);
    let info = check_tls_pair(&cert, &key).ok()?;
    due_from(secret, info.not_before, info.not_after)
}

/// When a certificate valid from `not_before` to `not_after`, the one in
/// the Secret's `tls.crt`, is due for renewal (see [`due_at`]).
pub fn due_from(
    secret: &Resource,
    not_before: SystemTime,
    not_after: SystemTime,
) -> Option<SystemTime> {
    let crt = secret.spec.as_secret()?.data.get(TLS_CRT)?;
    Some(renewal_time_from(
        not_before + BACKDATE,
        not_before,
        not_after,
        jitter_of(crt),
    ))
}

/// Whether this control plane renews the Secret: it names its issuing
/// grant server, or the AccessToken that brought it.
pub fn renewable(secret: &Resource) -> bool {
    renew_at(secret).is_some() || secret.labels().contains_key(RENEW_TOKEN)
}

/// The renewal URL and grant server CA the Secret's data names.
fn renew_at(secret: &Resource) -> Option<(String, String)> {
    let s = secret.spec.as_secret()?;
    Some((s.decoded(RENEW_URL)?, s.decoded(RENEW_CA)?))
}

/// The renewal URL and grant server CA of Secret `secret`: from its data,
/// else from the AccessToken its [`RENEW_TOKEN`] label names.
async fn renewal_target(
    resources: &ResourceService,
    secret: &Resource,
) -> Result<(String, String), String> {
    if let Some(at) = renew_at(secret) {
        return Ok(at);
    }
    let token_name = secret
        .labels()
        .get(RENEW_TOKEN)
        .cloned()
        .unwrap_or_default();
    let token = resources
        .get(Kind::AccessToken, None, &token_name)
        .await
        .map_err(|e| {
            format!("AccessToken {token_name:?} (its url and ca reach the issuing site): {e}")
        })?;
    let spec = token
        .spec
        .as_access_token()
        .ok_or_else(|| format!("{token_name:?} is not an AccessToken"))?;
    Ok((renew_url(&spec.url), spec.ca.clone()))
}

impl Renewals {
    /// Starts the renewals that are due; returns when the next one is.
    pub async fn reconcile(
        &mut self,
        resources: &ResourceService,
        now: SystemTime,
    ) -> Result<Option<SystemTime>, ResourceError> {
        let mut wake: Option<SystemTime> = None;
        let mut at = |t: SystemTime| wake = Some(wake.map_or(t, |w: SystemTime| w.min(t)));
        for secret in resources.list(Kind::Secret, None, None).await? {
            if !renewable(&secret) {
                continue;
            }
            let name = secret.name().to_owned();
            if self.in_flight.values().any(|n| *n == name) {
                continue;
            }
            let Some(due) = due_at(&secret) else { continue };
            let due = match self.retry.get(&name) {
                Some((_, retry)) => due.max(*retry),
                None => due,
            };
            if due > now {
                at(due);
                continue;
            }
            let r = resources.clone();
            let secret_name = name.clone();
            let task = self
                .tasks
                .spawn(async move { renew(&r, &secret_name).await });
            self.in_flight.insert(task.id(), name);
        }
        Ok(wake)
    }

    /// Waits for a renewal to end and records its outcome; pending forever
    /// when none runs.
    pub async fn next_done(&mut self) {
        let Some(done) = self.tasks.join_next_with_id().await else {
            return std::future::pending().await;
        };
        let (id, outcome) = match done {
            Ok((id, outcome)) => (id, outcome),
            Err(e) => (e.id(), Err(format!("the renewal task failed: {e}"))),
        };
        let Some(name) = self.in_flight.remove(&id) else {
            return;
        };
        match outcome {
            Ok(()) => {
                self.retry.remove(&name);
            }
            Err(why) => {
                let n = self.retry.get(&name).map_or(0, |(n, _)| *n);
                let delay = Duration::from_millis(500u64 << n.min(6)).min(MAX_RETRY);
                let delay = delay + delay.mul_f64(meshlink_identity::random_jitter().abs());
                tracing::warn!(
                    secret = %name,
                    attempt = n + 1,
                    retry_in_ms = delay.as_millis() as u64,
                    error = %why,
                    "link credential renewal failed; the current certificate stays in use"
                );
                self.retry.insert(name, (n + 1, SystemTime::now() + delay));
            }
        }
    }

    /// Whether any renewal runs.
    pub fn is_idle(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Ends every renewal.
    pub async fn shutdown(&mut self) {
        self.tasks.shutdown().await;
    }
}

/// One renewal of Secret `name`: CSR with its key, POST to the token's
/// grant server, store the new certificate.
async fn renew(resources: &ResourceService, name: &str) -> Result<(), String> {
    let secret = resources
        .get(Kind::Secret, None, name)
        .await
        .map_err(|e| e.to_string())?;
    let (url, ca) = renewal_target(resources, &secret).await?;
    let s = secret
        .spec
        .as_secret()
        .ok_or_else(|| format!("{name:?} is not a Secret"))?;
    let (cert, key) = s
        .decoded(TLS_CRT)
        .zip(s.decoded(TLS_KEY))
        .ok_or("the Secret has no tls.crt or tls.key")?;
    let key_pair = rcgen::KeyPair::from_pem(&key).map_err(|e| format!("tls.key: {e}"))?;
    let csr = rcgen::CertificateParams::new(Vec::<String>::new())
        .and_then(|p| p.serialize_request(&key_pair))
        .and_then(|c| c.pem())
        .map_err(|e| format!("building the CSR: {e}"))?;
    tracing::info!(secret = name, %url, "renewing link credential");
    let body = format!("{cert}{csr}");
    let new_cert = post_renewal(&url, &ca, body.into_bytes())
        .await
        .map_err(|e| e.to_string())?;
    check_tls_pair(&new_cert, &key).map_err(|e| format!("the renewed certificate: {e}"))?;
    let mut next = secret.clone();
    let mut data = s.clone();
    data.data.insert(
        TLS_CRT.to_owned(),
        base64::engine::general_purpose::STANDARD.encode(&new_cert),
    );
    next.spec = Spec::Secret(data);
    match resources.apply(next).await {
        Ok(_) => {
            tracing::info!(secret = name, "link credential renewed");
            Ok(())
        }
        // Another control plane on this store renewed it first; the feed
        // brings its certificate, due later.
        Err(ResourceError::Conflict(_)) => {
            tracing::debug!(
                secret = name,
                "link credential renewed by another control plane"
            );
            Ok(())
        }
        Err(e) => Err(format!("storing the renewed Secret: {e}")),
    }
}

/// `https://host:port/<uid>` → `https://host:port/renew`.
pub fn renew_url(grant_url: &str) -> String {
    let rest = grant_url.strip_prefix("https://").unwrap_or(grant_url);
    let host = rest.split('/').next().unwrap_or(rest);
    format!("https://{host}/renew")
}

#[cfg(test)]
mod tests {
    use super::renew_url;

    #[test]
    fn the_renew_url_is_the_grant_servers_root_plus_renew() {
        assert_eq!(
            renew_url("https://10.0.0.1:9090/5f0c-uid"),
            "https://10.0.0.1:9090/renew"
        );
        assert_eq!(renew_url("https://h:1"), "https://h:1/renew");
    }
}
