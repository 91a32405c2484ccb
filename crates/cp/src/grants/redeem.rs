//! Redeeming an AccessGrant on the granting side: the checks of DESIGN.md
//! §9's failure table, in Skupper's order, and the count.
//!
//! Owns the rule that the check and the count are one compare-and-swap on
//! the AccessGrant's store revision: a redemption that lost a race re-reads
//! the grant and checks again, so N concurrent redemptions of a grant that
//! allows K succeed exactly min(N, K) times, across control planes sharing
//! a store. A failed check changes nothing. The code is compared in
//! constant time and never logged.

use std::time::SystemTime;

use meshlink_api::spec::{AccessGrantStatus, StatusDetails};
use meshlink_api::{ConditionStatus, Kind, Resource};
use subtle::ConstantTimeEq as _;

use super::response::{LinkDocsError, link_documents};
use crate::resources::{ResourceError, ResourceService};

/// Why a redemption was refused (each maps to one row of the table).
#[derive(Debug, thiserror::Error)]
pub enum RedeemError {
    /// Unknown, expired or not ready grant: 404 `No such claim`.
    #[error("no such claim")]
    NoSuchClaim,
    /// Redemptions used up: 404 `No such access granted`.
    #[error("no such access granted")]
    UsedUp,
    /// Wrong code: 403.
    #[error("wrong code")]
    WrongCode,
    /// The store or issuance failed: 500.
    #[error("{0}")]
    Internal(String),
}

/// How many times a redemption re-reads the grant after losing a race.
const MAX_ATTEMPTS: usize = 200;

/// Redeems grants against the store.
pub struct Redeemer {
    resources: ResourceService,
    advertised_host: String,
    renew_at: super::response::RenewAt,
}

/// The grant whose `status.url` ends with `/<uid>`, if any.
pub async fn grant_by_uid(
    resources: &ResourceService,
    uid: &str,
) -> Result<Option<Resource>, ResourceError> {
    if uid.is_empty() || uid.contains('/') {
        return Ok(None);
    }
    let suffix = format!("/{uid}");
    Ok(resources
        .list(Kind::AccessGrant, None, None)
        .await?
        .into_iter()
        .find(|g| {
            g.status
                .details
                .as_access_grant()
                .and_then(|s| s.url.as_deref())
                .is_some_and(|u| u.ends_with(&suffix))
        }))
}

/// Whether an RFC 3339 `expirationTime` is in the past (unparsable counts
/// as expired).
pub fn expired(expiration: Option<&str>, now: SystemTime) -> bool {
    match expiration.map(humantime::parse_rfc3339_weak) {
        Some(Ok(t)) => t <= now,
        _ => true,
    }
}

// === impl Redeemer ===

impl Redeemer {
    /// A redeemer issuing Links that point at `advertised_host`, with
    /// credentials renewed at `renew_at`.
    pub fn new(
        resources: ResourceService,
        advertised_host: String,
        renew_at: super::response::RenewAt,
    ) -> Self {
        Redeemer {
            resources,
            advertised_host,
            renew_at,
        }
    }

    /// The resources this redeemer reads.
    pub fn resources(&self) -> &ResourceService {
        &self.resources
    }

    /// Checks and counts one redemption of grant `uid` with `code`; on
    /// success returns the YAML stream for the redeeming site. With
    /// `router_id` (the redeemer's site id) the client certificate names
    /// that router.
    pub async fn redeem(
        &self,
        uid: &str,
        code: &[u8],
        name: Option<&str>,
        subject: Option<&str>,
        router_id: Option<&str>,
    ) -> Result<String, RedeemError> {
        let internal = |e: &dyn std::fmt::Display| RedeemError::Internal(e.to_string());
        let code = trim_ascii(code);
        for _ in 0..MAX_ATTEMPTS {
            let grant = grant_by_uid(&self.resources, uid)
                .await
                .map_err(|e| internal(&e))?
                .ok_or(RedeemError::NoSuchClaim)?;
            let (Some(spec), Some(status)) = (
                grant.spec.as_access_grant(),
                grant.status.details.as_access_grant(),
            ) else {
                return Err(RedeemError::NoSuchClaim);
            };
            // Used up first: the grant controller turns a used-up grant
            // not Ready, and its redeemer must still hear "used up".
            let used = status.redemptions.unwrap_or(0);
            if used >= spec.redemptions_allowed() {
                return Err(RedeemError::UsedUp);
            }
            let ready = grant
                .condition("Ready")
                .is_some_and(|c| c.status == ConditionStatus::True);
            if !ready || expired(status.expiration_time.as_deref(), SystemTime::now()) {
                return Err(RedeemError::NoSuchClaim);
            }
            let expected = status.code.as_deref().unwrap_or_default().as_bytes();
            if expected.is_empty() || !bool::from(expected.ct_eq(code)) {
                return Err(RedeemError::WrongCode);
            }
            let name = name.unwrap_or(grant.name());
            let subject = subject.unwrap_or(name);
            let yaml = link_documents(
                &self.resources,
                &self.advertised_host,
                name,
                subject,
                spec.issuer.as_deref(),
                router_id,
                super::response::link_cert_lifetime(&grant),
                &self.renew_at,
            )
            .await
            .map_err(|e| match e {
                LinkDocsError::NotReady(m) | LinkDocsError::Internal(m) => RedeemError::Internal(m),
            })?;
            let mut next = grant.status.clone();
            next.details = StatusDetails::AccessGrant(AccessGrantStatus {
                redemptions: Some(used + 1),
                ..status.clone()
            });
            let version = grant.resource_version().and_then(|v| v.parse().ok());
            match self
                .resources
                .set_status(Kind::AccessGrant, None, grant.name(), next, version)
                .await
            {
                Ok(_) => {
                    tracing::info!(
                        grant = grant.name(),
                        redemptions = used + 1,
                        "grant redeemed"
                    );
                    return Ok(yaml);
                }
                Err(ResourceError::Conflict(_)) => continue,
                Err(ResourceError::NotFound(_)) => return Err(RedeemError::NoSuchClaim),
                Err(e) => return Err(internal(&e)),
            }
        }
        Err(RedeemError::Internal(
            "the grant is changing too often to count this redemption; retry".into(),
        ))
    }
}

fn trim_ascii(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}
