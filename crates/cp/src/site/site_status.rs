//! Site and RouterAccess status, Skupper's `SiteStatus` shape: `status`,
//! `message`, `siteId`, `endpoints` and the Configured, Running, Resolved
//! and Ready conditions.
//!
//! Owns Configured (the site CA and RouterAccess credentials exist),
//! Resolved (endpoints are known), the stable `siteId` (minted here once,
//! a UUID v4, and kept) and `Ready` with `status`/`message`, derived by
//! [`site_ready`], the one Ready rule for Sites. `Running`, `network`,
//! `sitesInNetwork` and `meshIngress` belong to the router status task
//! (`crate::router::status`): its writes wake the site controller through
//! the change feed, which then derives Ready again.

use meshlink_api::spec::{Endpoint, RouterAccessStatus, SiteStatus, StatusDetails};
use meshlink_api::{Condition, ConditionStatus, Resource, Status};

/// What the controller found for the Site.
pub struct SiteFacts {
    /// Why the site is not configured, if it is not.
    pub config_problem: Option<String>,
    /// Every RouterAccess endpoint.
    pub endpoints: Vec<Endpoint>,
    /// Whether the site accepts links at all (has RouterAccess or
    /// `linkAccess: default`); an edge site does not.
    pub accepts_links: bool,
}

fn cond(ok: bool) -> ConditionStatus {
    if ok {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    }
}

/// The Site's next status, or `None` when it is current.
pub fn next_site_status(site: &Resource, facts: &SiteFacts) -> Option<Status> {
    let mut next = site.clone();
    let cur = site.status.details.as_site().cloned().unwrap_or_default();
    let configured = facts.config_problem.is_none();
    next.set_condition(Condition::now(
        "Configured",
        cond(configured),
        if configured { "Ready" } else { "Error" },
        facts.config_problem.clone().unwrap_or_else(|| "OK".into()),
    ));
    let resolved = !facts.accepts_links || !facts.endpoints.is_empty();
    next.set_condition(Condition::now(
        "Resolved",
        cond(resolved),
        if resolved { "Ready" } else { "Pending" },
        if resolved {
            "OK".to_owned()
        } else {
            "no endpoints yet: the RouterAccess has no roles".to_owned()
        },
    ));
    let ready_condition = site_ready(&next);
    let ready = ready_condition.status == ConditionStatus::True;
    let message = ready_condition.message.clone();
    next.set_condition(ready_condition);
    next.status.details = StatusDetails::Site(SiteStatus {
        status: Some(
            if ready {
                "Ready"
            } else if configured {
                "Pending"
            } else {
                "Error"
            }
            .to_owned(),
        ),
        message: Some(message),
        site_id: Some(
            cur.site_id
                .clone()
                .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        ),
        endpoints: facts.endpoints.clone(),
        ..cur
    });
    (next.status != site.status).then_some(next.status)
}

/// Why a Site whose router has never reported is not running.
pub const NO_ROUTER_YET: &str = "no router has reported to this control plane yet";

/// The one Ready rule for a Site: Configured, Resolved, Running and (once
/// the router reported it) Bound all True. Otherwise `Ready` is False with
/// the first unmet condition's reason and message (an absent `Running`
/// reads `RouterNotConnected`, [`NO_ROUTER_YET`]).
pub fn site_ready(site: &Resource) -> Condition {
    for t in ["Configured", "Resolved", "Running", "Bound"] {
        match site.condition(t) {
            Some(c) if c.status == ConditionStatus::True => {}
            Some(c) => {
                return Condition::now("Ready", ConditionStatus::False, &c.reason, &c.message);
            }
            None if t == "Bound" => {}
            None if t == "Running" => {
                return Condition::now(
                    "Ready",
                    ConditionStatus::False,
                    "RouterNotConnected",
                    NO_ROUTER_YET,
                );
            }
            None => {
                return Condition::now(
                    "Ready",
                    ConditionStatus::False,
                    "Pending",
                    format!("{t} is not known yet"),
                );
            }
        }
    }
    Condition::now("Ready", ConditionStatus::True, "Ready", "OK")
}

/// A RouterAccess's next status, or `None` when it is current.
pub fn next_router_access_status(
    ra: &Resource,
    problem: Option<&str>,
    endpoints: Vec<Endpoint>,
) -> Option<Status> {
    let mut next = ra.clone();
    // The router status task's `Bound` (a role's port the router could not
    // bind) counts too, once the configuration itself is fine.
    let unbound = ra
        .condition("Bound")
        .filter(|c| c.status != ConditionStatus::True)
        .map(|c| c.message.clone());
    let problem = problem.map(str::to_owned).or(unbound);
    let ok = problem.is_none();
    let message = problem.unwrap_or_else(|| "OK".to_owned());
    next.status.details = StatusDetails::RouterAccess(RouterAccessStatus {
        status: Some(if ok { "Ready" } else { "Error" }.to_owned()),
        message: Some(message.clone()),
        endpoints,
    });
    next.set_condition(Condition::now(
        "Ready",
        cond(ok),
        if ok { "Ready" } else { "Error" },
        message,
    ));
    (next.status != ra.status).then_some(next.status)
}
