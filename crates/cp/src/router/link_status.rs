//! A Link's status from its router's report: `status` (`Operational` or
//! `Down`), `message`, `remoteSiteId` and `remoteSiteName` (the last ones
//! seen, kept while the link is down), and the Configured, Operational and
//! Ready conditions. While down, the message names the cause: why the
//! Link was not sent, this site's router not reporting (and since when),
//! or the router's last error for the link. The router status task
//! (`super::status`) writes it, then `super::credentials` adds
//! `CredentialsValid`.

use meshlink_api::spec::{LinkStatus, StatusDetails};
use meshlink_api::{Condition, ConditionStatus, Resource};

use super::credentials::Verdict;
use super::network_status::non_empty;

/// The word for a link that carries traffic.
pub(crate) const OPERATIONAL: &str = "Operational";
/// The word for one that does not.
pub(crate) const DOWN: &str = "Down";

/// Sets the status `state` (this link in the router's report, if there),
/// `withheld` (why its configuration was not sent, if it was not) and
/// `router_down` (why this site's router is not reporting, if it is not)
/// imply, with `credentials` (the verdict on its client certificate, if
/// it has one): the one Ready rule for Links.
pub(crate) fn link_status(
    r: &mut Resource,
    state: Option<&meshlink_xds::certify::LinkState>,
    withheld: Option<&str>,
    router_down: Option<&str>,
    credentials: Option<&Verdict>,
) {
    let up = state.filter(|s| s.operational);
    let before = r.status.details.as_link().cloned().unwrap_or_default();
    let configured = match withheld {
        Some(why) => Condition::now(
            "Configured",
            ConditionStatus::False,
            "CredentialsMissing",
            why,
        ),
        None => Condition::now(
            "Configured",
            ConditionStatus::True,
            "Sent",
            "sent to the site's router",
        ),
    };
    r.set_condition(configured);
    let last_error = state
        .filter(|s| !s.operational)
        .map(|s| s.message.as_str())
        .filter(|m| !m.is_empty());
    let (status, reason, message) = match (up, withheld, router_down, last_error) {
        (Some(s), ..) => (
            ConditionStatus::True,
            "Operational",
            format!("OK (remote site {})", s.remote_site_name),
        ),
        (None, Some(why), ..) => (ConditionStatus::False, "CredentialsMissing", why.to_owned()),
        (None, None, Some(why), _) => {
            (ConditionStatus::False, "RouterNotConnected", why.to_owned())
        }
        (None, None, None, Some(e)) => (
            ConditionStatus::False,
            "NotOperational",
            format!("Not operational: {e}"),
        ),
        (None, None, None, None) => (
            ConditionStatus::False,
            "NotOperational",
            "Not operational".to_owned(),
        ),
    };
    r.status.details = StatusDetails::Link(LinkStatus {
        status: Some(if up.is_some() { OPERATIONAL } else { DOWN }.to_owned()),
        message: Some(message.clone()),
        remote_site_id: up
            .and_then(|s| non_empty(&s.remote_site_id))
            .or(before.remote_site_id),
        remote_site_name: up
            .and_then(|s| non_empty(&s.remote_site_name))
            .or(before.remote_site_name),
    });
    r.set_condition(Condition::now("Operational", status, reason, &message));
    let ready = match credentials.filter(|v| v.expired) {
        Some(v) => Condition::now(
            "Ready",
            ConditionStatus::False,
            "CredentialsExpired",
            v.condition.message.clone(),
        ),
        None => Condition::now("Ready", status, reason, message),
    };
    r.set_condition(ready);
    if let Some(v) = credentials {
        super::credentials::apply(r, v);
    }
}
