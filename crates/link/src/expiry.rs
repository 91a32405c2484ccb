//! Credential expiry visibility: every credential the router holds is
//! published as `meshlink_link_credential_expiration_timestamp_seconds`
//! (its leaf's notAfter), and one task logs a warning when a credential
//! passes half of its lifetime (when a renewal was due) and an error when
//! it expires, once per certificate and stage.
//!
//! Owns only that publication; renewal is the control plane's (a
//! RouterAccess server credential) or the operator's (a Link client
//! credential from a redemption, see docs/operations.md).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::core::Core;
use crate::credentials::LinkCredential;
use crate::metrics::{CredentialLabels, LinkMetrics};

/// Publishes the expiry of the credentials in `next` and drops the metric
/// of those that were in `current` only.
pub(crate) fn publish(
    metrics: &LinkMetrics,
    current: &BTreeMap<String, Arc<LinkCredential>>,
    next: &BTreeMap<String, Arc<LinkCredential>>,
) {
    for (name, cred) in next {
        let labels = CredentialLabels {
            credential: name.clone(),
        };
        metrics
            .credential_expiry
            .get_or_create(&labels)
            .set(cred.not_after_unix());
    }
    for name in current.keys().filter(|n| !next.contains_key(*n)) {
        metrics.credential_expiry.remove(&CredentialLabels {
            credential: name.clone(),
        });
    }
}

/// How far through its life a credential is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Fresh,
    PastHalf,
    Expired,
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The stage at `now` (unix seconds) and when the next one starts.
fn stage(cred: &LinkCredential, now: i64) -> (Stage, Option<i64>) {
    let (from, to) = (cred.not_before_unix(), cred.not_after_unix());
    let half = from + (to - from) / 2;
    if now >= to {
        (Stage::Expired, None)
    } else if now >= half {
        (Stage::PastHalf, Some(to))
    } else {
        (Stage::Fresh, Some(half))
    }
}

/// Logs each credential's passage past half of its lifetime (warning) and
/// its expiry (error), once per certificate and stage, until shutdown.
pub(crate) async fn watch_expiry(core: Arc<Core>) {
    let mut creds = core.credentials.subscribe();
    let mut logged: BTreeMap<String, (String, Stage)> = BTreeMap::new();
    loop {
        let now = unix_now();
        let mut wake: Option<i64> = None;
        {
            let current = creds.borrow_and_update();
            logged.retain(|name, _| current.contains_key(name));
            for (name, cred) in current.iter() {
                let (at, next) = stage(cred, now);
                wake = match (wake, next) {
                    (Some(w), Some(n)) => Some(w.min(n)),
                    (w, n) => w.or(n),
                };
                let seen = logged
                    .get(name)
                    .filter(|(serial, _)| serial == cred.serial_hex())
                    .map_or(Stage::Fresh, |(_, s)| *s);
                if at <= seen {
                    continue;
                }
                logged.insert(name.clone(), (cred.serial_hex().to_owned(), at));
                let left = cred.not_after_unix() - now;
                if at == Stage::Expired {
                    tracing::error!(
                        credential = %name,
                        serial = cred.serial_hex(),
                        "link credential expired: new handshakes with it fail; renew it \
                         (for a Link's client credential, redeem a new AccessToken)"
                    );
                } else {
                    tracing::warn!(
                        credential = %name,
                        serial = cred.serial_hex(),
                        expires_in_seconds = left,
                        "link credential is past half of its lifetime and was not renewed; \
                         renew it before it expires (for a Link's client credential, redeem a new AccessToken)"
                    );
                }
            }
        }
        let sleep = wake.map(|w| Duration::from_secs((w - now).max(1) as u64));
        tokio::select! {
            _ = core.shutdown.cancelled() => return,
            changed = creds.changed() => if changed.is_err() { return },
            _ = async { tokio::time::sleep(sleep.unwrap_or(Duration::MAX)).await }, if sleep.is_some() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_follow_the_lifetime() {
        let ca = meshlink_identity::SiteCa::load(
            &meshlink_identity::SiteCa::generate("a", "ca", Duration::from_secs(3600)).unwrap(),
        )
        .unwrap();
        let (cert, key) = ca
            .issue_client_cert("a", Duration::from_secs(600), SystemTime::now())
            .unwrap();
        let cred = LinkCredential::from_pem(&crate::CredentialPem {
            tls_crt: cert.cert_pem,
            tls_key: key,
            ca_crt: ca.cert_pem().to_owned(),
        })
        .unwrap();
        let (from, to) = (cred.not_before_unix(), cred.not_after_unix());
        let half = from + (to - from) / 2;
        assert_eq!(stage(&cred, from), (Stage::Fresh, Some(half)));
        assert_eq!(stage(&cred, half), (Stage::PastHalf, Some(to)));
        assert_eq!(stage(&cred, to), (Stage::Expired, None));
    }
}
