//! Credential expiry visibility: every credential the router holds is
//! published as `meshlink_link_credential_expiration_timestamp_seconds`
//! (its leaf's notAfter), and a credential that arrives with less than
//! half of its lifetime left is logged as a warning naming its expiry.
//!
//! Owns only that publication; renewal is the control plane's (a
//! RouterAccess server credential) or the operator's (a Link client
//! credential from a redemption, see docs/operations.md).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::credentials::LinkCredential;
use crate::metrics::{CredentialLabels, LinkMetrics};

/// Publishes the expiry of the credentials in `next` and drops the metric
/// of those that were in `current` only. Warns about each new or changed
/// credential past half of its lifetime.
pub(crate) fn publish(
    metrics: &LinkMetrics,
    current: &BTreeMap<String, Arc<LinkCredential>>,
    next: &BTreeMap<String, Arc<LinkCredential>>,
) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    for (name, cred) in next {
        let labels = CredentialLabels {
            credential: name.clone(),
        };
        metrics
            .credential_expiry
            .get_or_create(&labels)
            .set(cred.not_after_unix());
        let changed = current.get(name).is_none_or(|c| !Arc::ptr_eq(c, cred));
        if changed && past_half(cred, now) {
            tracing::warn!(
                credential = %name,
                serial = cred.serial_hex(),
                expires_in_seconds = cred.not_after_unix() - now,
                "link credential is past half of its lifetime; renew it before it expires, \
                 or links using it stop at expiry"
            );
        }
    }
    for name in current.keys().filter(|n| !next.contains_key(*n)) {
        metrics.credential_expiry.remove(&CredentialLabels {
            credential: name.clone(),
        });
    }
}

/// Whether more than half of the credential's lifetime has passed at `now`
/// (unix seconds).
fn past_half(cred: &LinkCredential, now: i64) -> bool {
    let (from, to) = (cred.not_before_unix(), cred.not_after_unix());
    now >= from + (to - from) / 2
}
