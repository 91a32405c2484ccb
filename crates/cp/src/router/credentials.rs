//! A Link's `CredentialsValid` condition: whether the client certificate in
//! the Secret its `tlsCredentials` names is valid, about to expire, or
//! expired, computed from the stored Secret (the router's metric
//! `meshlink_link_credential_expiration_timestamp_seconds` shows the same
//! time; this puts it where `meshlink get links` shows it).
//!
//! - True `Valid`: renewable (the Secret names the grant server that issued
//!   it, or the AccessToken that brought it) and not overdue;
//! - True `NotRenewable`: valid, but nothing will renew it (a Secret from
//!   another product, or issued before renew information existed);
//! - False `Expiring`: a renewable certificate that is halfway from its
//!   renewal time to its expiry without having been renewed, or a
//!   non-renewable one in the last third of its lifetime;
//! - False `Expired`: past notAfter; the Link's `Ready` turns False with the
//!   same message, since no new connection can be made with it;
//! - False `Missing`/`Invalid`: no such Secret, or no readable `tls.crt`.
//!
//! The condition is kept first among the Link's conditions, so the
//! `MESSAGE` column (the first condition that is not True) shows it. The
//! status task wakes at the next transition ([`Verdicts::next`]) and on
//! every Secret change (a renewal), so nothing stays stale.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime};

use meshlink_api::spec::TLS_CRT;
use meshlink_api::{Condition, ConditionStatus, Kind, Resource};

use crate::resources::{ResourceError, ResourceService};
use crate::site::renewal;

/// The condition type.
pub(crate) const CREDENTIALS_VALID: &str = "CredentialsValid";

/// One Link's verdict.
#[derive(Debug, Clone)]
pub(crate) struct Verdict {
    /// The `CredentialsValid` condition.
    pub condition: Condition,
    /// Whether the certificate is past notAfter.
    pub expired: bool,
}

/// The verdicts of every Link and when the next one changes.
#[derive(Debug, Default)]
pub(crate) struct Verdicts {
    /// Link name → verdict.
    pub by_link: BTreeMap<String, Verdict>,
    /// The earliest time a verdict changes by the clock alone.
    pub next: Option<SystemTime>,
}

/// Remembers which non-renewable certificates were already warned about,
/// so the log says it once per certificate.
#[derive(Debug, Default)]
pub(crate) struct Warned(HashSet<String>);

/// Computes the verdict of every Link in `links`.
pub(crate) async fn verdicts(
    resources: &ResourceService,
    links: &[Resource],
    warned: &mut Warned,
    now: SystemTime,
) -> Result<Verdicts, ResourceError> {
    let mut out = Verdicts::default();
    for link in links {
        let Some(spec) = link.spec.as_link() else {
            continue;
        };
        let secret_name = spec.tls_credentials.clone().unwrap_or_default();
        let secret = if secret_name.is_empty() {
            None
        } else {
            match resources.get(Kind::Secret, None, &secret_name).await {
                Ok(s) => Some(s),
                Err(ResourceError::NotFound(_)) => None,
                Err(e) => return Err(e),
            }
        };
        let (v, next) = verdict(&secret_name, secret.as_ref(), now);
        if v.condition.reason == "NotRenewable" || v.condition.reason == "Expiring" {
            warn_once(warned, link.name(), &secret_name, secret.as_ref(), &v);
        }
        if let Some(t) = next {
            out.next = Some(out.next.map_or(t, |n: SystemTime| n.min(t)));
        }
        out.by_link.insert(link.name().to_owned(), v);
    }
    Ok(out)
}

fn warn_once(
    warned: &mut Warned,
    link: &str,
    secret_name: &str,
    secret: Option<&Resource>,
    v: &Verdict,
) {
    let cert = secret
        .and_then(|s| s.spec.as_secret())
        .and_then(|s| s.data.get(TLS_CRT))
        .cloned()
        .unwrap_or_default();
    let key = format!("{}/{secret_name}/{cert}", v.condition.reason);
    if warned.0.insert(key) {
        tracing::warn!(link, secret = secret_name, "{}", v.condition.message);
    }
}

/// The verdict for `secret` (named `name`) at `now`, and when it next
/// changes by the clock alone.
pub(crate) fn verdict(
    name: &str,
    secret: Option<&Resource>,
    now: SystemTime,
) -> (Verdict, Option<SystemTime>) {
    let bad = |reason: &str, message: String| {
        (
            Verdict {
                condition: Condition::now(
                    CREDENTIALS_VALID,
                    ConditionStatus::False,
                    reason,
                    message,
                ),
                expired: false,
            },
            None,
        )
    };
    if name.is_empty() {
        return bad(
            "Missing",
            "the Link names no tlsCredentials; set spec.tlsCredentials to the Secret \
             holding its client certificate"
                .to_owned(),
        );
    }
    let Some(secret) = secret else {
        return bad(
            "Missing",
            format!(
                "Secret {name:?} (tlsCredentials) does not exist; apply it (from a grant \
                 redemption or `meshlink link generate` on the other site)"
            ),
        );
    };
    let Some((not_before, not_after)) = validity(secret) else {
        return bad(
            "Invalid",
            format!("Secret {name:?} has no readable certificate in data.{TLS_CRT}"),
        );
    };
    let renewable = renewal::renewable(secret);
    let at = rfc3339(not_after);
    // When it turns Expiring.
    let warn_from = if renewable {
        let due = renewal::due_from(secret, not_before, not_after).unwrap_or(not_after);
        due + not_after.duration_since(due).unwrap_or_default() / 2
    } else {
        not_after - not_after.duration_since(not_before).unwrap_or_default() / 3
    };
    let cond = |status, reason: &str, message: String| {
        Condition::now(CREDENTIALS_VALID, status, reason, message)
    };
    let fix = "replace it with a new one from the issuing site (redeem a new token, or \
               `meshlink link generate` there) and re-apply";
    if now >= not_after {
        return (
            Verdict {
                condition: cond(
                    ConditionStatus::False,
                    "Expired",
                    format!(
                        "the certificate in Secret {name:?} expired at {at}; the other site \
                         refuses new connections with it: {fix}"
                    ),
                ),
                expired: true,
            },
            None,
        );
    }
    if now >= warn_from {
        let message = if renewable {
            format!(
                "the certificate in Secret {name:?} expires at {at} and has not been renewed \
                 yet; the control plane keeps retrying at the issuing site's grant server \
                 (its log says why it failed: `link credential renewal failed`)"
            )
        } else {
            format!(
                "the certificate in Secret {name:?} expires at {at} and will not be renewed \
                 (the Secret names no grant server to renew it at): {fix}"
            )
        };
        return (
            Verdict {
                condition: cond(ConditionStatus::False, "Expiring", message),
                expired: false,
            },
            Some(not_after),
        );
    }
    let (reason, message) = if renewable {
        (
            "Valid",
            format!(
                "the certificate in Secret {name:?} is valid until {at}; it is renewed at \
                 half its lifetime"
            ),
        )
    } else {
        (
            "NotRenewable",
            format!(
                "the certificate in Secret {name:?} is valid until {at} but will not be \
                 renewed (the Secret names no grant server to renew it at); replace it \
                 before then"
            ),
        )
    };
    (
        Verdict {
            condition: cond(ConditionStatus::True, reason, message),
            expired: false,
        },
        Some(warn_from),
    )
}

/// Sets `CredentialsValid` on a Link, first among its conditions. Ready
/// (False when the certificate expired) is `super::link_status`'s rule.
pub(crate) fn apply(r: &mut Resource, v: &Verdict) {
    r.set_condition(v.condition.clone());
    if let Some(i) = r
        .status
        .conditions
        .iter()
        .position(|c| c.type_ == CREDENTIALS_VALID)
    {
        let c = r.status.conditions.remove(i);
        r.status.conditions.insert(0, c);
    }
}

/// notBefore and notAfter of the Secret's leaf certificate.
fn validity(secret: &Resource) -> Option<(SystemTime, SystemTime)> {
    let s = secret.spec.as_secret()?;
    let pem = s.decoded(TLS_CRT)?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = pem.parse_x509().ok()?;
    let v = cert.validity();
    let t = |ts: i64| SystemTime::UNIX_EPOCH + Duration::from_secs(ts.max(0) as u64);
    Some((t(v.not_before.timestamp()), t(v.not_after.timestamp())))
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}
