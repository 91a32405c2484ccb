//! Site and RouterAccess status, Skupper's `SiteStatus` shape: `status`,
//! `message`, `siteId`, `endpoints` and the Configured, Running, Resolved
//! and Ready conditions.
//!
//! Owns Configured (the site CA and RouterAccess credentials exist),
//! Resolved (endpoints are known) and the stable `siteId` (chosen once).
//! `Running` belongs to whoever reports routers (the router status path):
//! this module only fills it with False "no router connected" when it is
//! absent, and never overwrites it. Ready is derived from the three. It
//! never touches `network` or `sitesInNetwork`.

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
    if next.condition("Running").is_none() {
        next.set_condition(Condition::now(
            "Running",
            ConditionStatus::False,
            "Pending",
            "no router connected",
        ));
    }
    let running = next
        .condition("Running")
        .map(|c| (c.status == ConditionStatus::True, c.message.clone()))
        .unwrap_or((false, String::new()));
    let ready = configured && resolved && running.0;
    let message = if ready {
        "OK".to_owned()
    } else if !configured {
        facts.config_problem.clone().unwrap_or_default()
    } else if !resolved {
        "no endpoints yet".to_owned()
    } else {
        running.1
    };
    next.set_condition(Condition::now(
        "Ready",
        cond(ready),
        if ready { "Ready" } else { "Pending" },
        message.clone(),
    ));
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

/// A RouterAccess's next status, or `None` when it is current.
pub fn next_router_access_status(
    ra: &Resource,
    problem: Option<&str>,
    endpoints: Vec<Endpoint>,
) -> Option<Status> {
    let mut next = ra.clone();
    let ok = problem.is_none();
    let message = problem.unwrap_or("OK").to_owned();
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
