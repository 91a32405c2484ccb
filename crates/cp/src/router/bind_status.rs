//! What a site's router could not bind, as status: a Listener's `Ready`,
//! a RouterAccess's `Bound` and the Site's `Bound` (every role, listener
//! and the mesh ingress together); a MultiKeyListener's failure is looked
//! up here for its `Ready` ([`super::multi_key_status`]). The router reports each role and
//! listener it was told to bind but has not bound, with the OS error
//! (`RouterReport.bind_failures`); the router status task writes these
//! conditions from it. While the router is not reporting, nothing here is
//! known: a Listener's `Ready` says so, and `Bound` is left as it was
//! (the Site's `Running` already says the router is gone).

use meshlink_api::spec::Spec;
use meshlink_api::{Condition, ConditionStatus, Resource};
use meshlink_xds::certify::{BindFailure, RouterReport};

/// The router's name for its mesh ingress listener
/// (`meshlink_link::mesh_ingress::MESH_INGRESS_NAME`; the control plane does
/// not depend on the link crate).
const MESH_INGRESS: &str = "mesh-ingress/mtls";

/// The failure reported for `what`/`name`, if any.
fn failure<'a>(report: &'a RouterReport, what: &str, name: &str) -> Option<&'a BindFailure> {
    report
        .bind_failures
        .iter()
        .find(|f| f.what == what && f.name == name)
}

/// The bind failure reported for MultiKeyListener `name` (the router
/// binds it as listener `multikeylistener/<name>`), if any.
pub(crate) fn multi_key_listener_failure<'a>(
    report: Option<&'a RouterReport>,
    name: &str,
) -> Option<&'a BindFailure> {
    report?.bind_failures.iter().find(|f| {
        f.what == "listener" && meshlink_xds::router::multi_key_listener_of(&f.name) == Some(name)
    })
}

/// A Listener's `Ready`: bound by the site's router, not bound (with why),
/// or unknown while the router is not reporting (`router_down`).
pub(crate) fn listener_ready(
    l: &Resource,
    report: Option<&RouterReport>,
    router_down: Option<&str>,
) -> Condition {
    let (host, port) = match &l.spec {
        Spec::Listener(s) => (s.host.clone(), s.port.get()),
        _ => (String::new(), 0),
    };
    let Some(report) = report else {
        return Condition::now(
            "Ready",
            ConditionStatus::False,
            "RouterNotConnected",
            router_down.unwrap_or("this site's router is not reporting"),
        );
    };
    match failure(report, "listener", l.name()) {
        Some(f) => Condition::now(
            "Ready",
            ConditionStatus::False,
            "BindFailed",
            format!("port {port} on {host} is not bound: {}", f.message),
        ),
        None => Condition::now(
            "Ready",
            ConditionStatus::True,
            "Bound",
            format!("the site's router listens on {host}:{port}"),
        ),
    }
}

/// A RouterAccess's `Bound`: every role's port bound, or which are not.
/// `None` while the router is not reporting.
pub(crate) fn router_access_bound(
    ra: &Resource,
    report: Option<&RouterReport>,
) -> Option<Condition> {
    let report = report?;
    let Spec::RouterAccess(spec) = &ra.spec else {
        return None;
    };
    let failed: Vec<String> = spec
        .roles
        .iter()
        .filter_map(|r| {
            let name = r.name.to_string();
            failure(report, "role", &name).map(|f| {
                format!(
                    "role {name} (port {}) is not bound: {}",
                    r.port.get(),
                    f.message
                )
            })
        })
        .collect();
    Some(bound_condition(&failed, "every role's port is bound"))
}

/// The Site's `Bound`: everything its router was told to bind, or what it
/// could not. `None` while the router is not reporting.
pub(crate) fn site_bound(report: Option<&RouterReport>) -> Option<Condition> {
    let report = report?;
    let failed: Vec<String> = report
        .bind_failures
        .iter()
        .map(|f| {
            let what = if f.name == MESH_INGRESS {
                "the mesh ingress".to_owned()
            } else if let Some(mkl) = meshlink_xds::router::multi_key_listener_of(&f.name) {
                format!("multikeylistener {mkl:?}")
            } else {
                format!("{} {:?}", f.what, f.name)
            };
            format!("{what} is not bound: {}", f.message)
        })
        .collect();
    Some(bound_condition(
        &failed,
        "the router bound every role and listener",
    ))
}

fn bound_condition(failed: &[String], ok: &str) -> Condition {
    if failed.is_empty() {
        Condition::now("Bound", ConditionStatus::True, "Bound", ok)
    } else {
        Condition::now(
            "Bound",
            ConditionStatus::False,
            "BindFailed",
            failed.join("; "),
        )
    }
}
