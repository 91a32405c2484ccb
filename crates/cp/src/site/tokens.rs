//! Redeeming this site's AccessTokens: each token is redeemed once, by one
//! control plane, and its outcome is kept in its status.
//!
//! Owns the token's redemption state machine, kept in the `Redeemed`
//! condition so it survives restarts and is shared by control planes on one
//! store:
//! - no condition: not tried yet;
//! - Unknown `Redeeming`: claimed (a compare-and-swap on the token's
//!   revision, so only one control plane POSTs); a claim older than
//!   [`STALE_CLAIM`] belongs to a control plane that died and is taken over;
//! - False `Unreachable`: no HTTP answer; retried with backoff;
//! - False `Refused`: the grant server said no (status and body in the
//!   message); final;
//! - True `Redeemed`: the Secret and Links are stored; final.
//!
//! Re-applying a token changes no status, so it is never redeemed again.

use std::time::{Duration, SystemTime};

use meshlink_api::spec::{AccessTokenStatus, StatusDetails};
use meshlink_api::{Condition, ConditionStatus, Kind, Resource, Status, parse_documents};

use crate::grants::client::{RedeemRequestError, post_redemption};
use crate::resources::ResourceService;

/// A `Redeeming` claim older than this is taken over.
pub const STALE_CLAIM: Duration = Duration::from_secs(60);
/// The condition type.
pub const REDEEMED: &str = "Redeemed";

/// Whether `token` should be redeemed now (ignoring retry backoff).
pub fn needs_redemption(token: &Resource, now: SystemTime) -> bool {
    match token.condition(REDEEMED) {
        None => true,
        Some(c) => match c.reason.as_str() {
            "Unreachable" => true,
            "Redeeming" => humantime::parse_rfc3339_weak(&c.last_transition_time)
                .map_or(true, |t| {
                    now.duration_since(t).unwrap_or_default() > STALE_CLAIM
                }),
            _ => false,
        },
    }
}

fn with(token: &Resource, status: &str, redeemed: Option<bool>, c: Condition) -> Status {
    let mut next = token.clone();
    next.status.details = StatusDetails::AccessToken(AccessTokenStatus {
        status: Some(status.to_owned()),
        redeemed,
        message: Some(c.message.clone()),
    });
    // A claim always gets a fresh transition time, so staleness counts
    // from this claim.
    next.status.conditions.retain(|o| o.type_ != c.type_);
    // Ready, the token's one Ready rule: redeemed, or why not (a claim in
    // progress is not Ready yet; a refusal names the grant server's answer).
    let ready = if c.status == ConditionStatus::True {
        Condition::now(
            "Ready",
            ConditionStatus::True,
            "Redeemed",
            c.message.clone(),
        )
    } else {
        Condition::now(
            "Ready",
            ConditionStatus::False,
            c.reason.clone(),
            c.message.clone(),
        )
    };
    next.set_condition(c);
    next.set_condition(ready);
    next.status
}

/// Claims `token` for redemption by this control plane; false when another
/// writer got there first.
pub async fn claim(resources: &ResourceService, token: &Resource) -> bool {
    let status = with(
        token,
        "Pending",
        None,
        Condition::now(
            REDEEMED,
            ConditionStatus::Unknown,
            "Redeeming",
            "redeeming the token at its grant server",
        ),
    );
    let version = token.resource_version().and_then(|v| v.parse().ok());
    resources
        .set_status(Kind::AccessToken, None, token.name(), status, version)
        .await
        .is_ok()
}

/// Redeems a claimed token and records the outcome. `subject` is this
/// site's name (the CN of the client certificate the other site issues);
/// `router_id` is this site's id, which the other site names in that
/// certificate so its router binds our router's hello to it.
/// Returns whether the failure is worth a retry.
pub async fn redeem(
    resources: &ResourceService,
    token: &Resource,
    subject: &str,
    router_id: Option<&str>,
) -> bool {
    let Some(spec) = token.spec.as_access_token() else {
        return false;
    };
    let outcome = post_redemption(
        &spec.url,
        &spec.ca,
        &spec.code,
        token.name(),
        subject,
        router_id,
    )
    .await;
    let (status, retry) = match outcome {
        Ok(yaml) => match store_documents(resources, &yaml, spec.link_cost(), token.name()).await {
            Ok(stored) => (
                with(
                    token,
                    "Ready",
                    Some(true),
                    Condition::now(
                        REDEEMED,
                        ConditionStatus::True,
                        "Redeemed",
                        format!("stored {}", stored.join(", ")),
                    ),
                ),
                false,
            ),
            Err(why) => (
                with(
                    token,
                    "Error",
                    Some(false),
                    Condition::now(REDEEMED, ConditionStatus::False, "Refused", why),
                ),
                false,
            ),
        },
        Err(e @ RedeemRequestError::Unreachable { .. }) => (
            with(
                token,
                "Pending",
                Some(false),
                Condition::now(
                    REDEEMED,
                    ConditionStatus::False,
                    "Unreachable",
                    format!("{e}; retrying"),
                ),
            ),
            true,
        ),
        Err(e) => (
            with(
                token,
                "Error",
                Some(false),
                Condition::now(REDEEMED, ConditionStatus::False, "Refused", e.to_string()),
            ),
            false,
        ),
    };
    if let Err(e) = resources
        .set_status(Kind::AccessToken, None, token.name(), status, None)
        .await
    {
        tracing::warn!(token = token.name(), error = %e, "cannot record the redemption outcome");
    }
    retry
}

/// Applies the grant server's YAML stream; Links get `cost`; Secrets are
/// labelled with the token's name, so their certificate is renewed at the
/// same grant server (`renewal`). Returns `Kind/name` of everything stored.
async fn store_documents(
    resources: &ResourceService,
    yaml: &str,
    cost: u64,
    token: &str,
) -> Result<Vec<String>, String> {
    let mut parsed = Vec::new();
    for doc in parse_documents(yaml) {
        match doc.outcome {
            Ok(r) => parsed.push(r),
            Err(errs) => {
                let errs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
                return Err(format!(
                    "the grant server's answer (document {}) cannot be applied: {}",
                    doc.index,
                    errs.join("; ")
                ));
            }
        }
    }
    let mut stored = Vec::new();
    // Secrets first, so a Link never references missing credentials (I2).
    parsed.sort_by_key(|r| r.kind() != Kind::Secret);
    for mut r in parsed {
        if let meshlink_api::spec::Spec::Link(l) = &mut r.spec {
            l.cost = Some(cost as i64);
        }
        if r.kind() == Kind::Secret {
            r.metadata
                .labels
                .insert(super::renewal::RENEW_TOKEN.to_owned(), token.to_owned());
        }
        let what = format!("{}/{}", r.kind(), r.name());
        resources
            .apply(r)
            .await
            .map_err(|e| format!("cannot store {what}: {e}"))?;
        stored.push(what);
    }
    Ok(stored)
}
