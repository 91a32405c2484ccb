//! A Link's status from its router's report: `remoteSiteId`,
//! `remoteSiteName`, and the Configured, Operational and Ready conditions
//! (message `Not operational` while down; `Ready` adds the router's last
//! error for the link). The router status task
//! (`super::status`) writes it, then `super::credentials` adds
//! `CredentialsValid`.

use meshlink_api::spec::{LinkStatus, StatusDetails};
use meshlink_api::{Condition, ConditionStatus, Resource};

use super::network_status::non_empty;

/// Sets the status `state` (this link in the router's report, if there) and
/// `withheld` (why its configuration was not sent, if it was not) imply.
pub(crate) fn link_status(
    r: &mut Resource,
    state: Option<&meshlink_xds::certify::LinkState>,
    withheld: Option<&str>,
) {
    let up = state.filter(|s| s.operational);
    r.status.details = StatusDetails::Link(LinkStatus {
        remote_site_id: up.and_then(|s| non_empty(&s.remote_site_id)),
        remote_site_name: up.and_then(|s| non_empty(&s.remote_site_name)),
    });
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
    let (status, reason, message) = match up {
        Some(s) => (
            ConditionStatus::True,
            "Operational",
            format!("OK (remote site {})", s.remote_site_name),
        ),
        None => (
            ConditionStatus::False,
            "NotOperational",
            "Not operational".to_owned(),
        ),
    };
    r.set_condition(Condition::now(
        "Operational",
        status,
        reason,
        message.clone(),
    ));
    // Down: why the Link was not sent, else the router's last error
    // (`lastError` of its link, e.g. the other site refusing the
    // certificate), else Skupper's `Not operational`.
    let last_error = state
        .filter(|s| !s.operational)
        .map(|s| s.message.as_str())
        .filter(|m| !m.is_empty());
    let ready_message = match (up, withheld, last_error) {
        (None, Some(why), _) => why.to_owned(),
        (None, None, Some(e)) => format!("{message}: {e}"),
        _ => message,
    };
    r.set_condition(Condition::now("Ready", status, reason, ready_message));
}
