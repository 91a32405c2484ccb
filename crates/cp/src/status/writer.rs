//! Status writes: read, merge only what this task owns (the Dataplane
//! status, one condition), and write back with the resourceVersion CAS,
//! re-reading on Conflict. Other writers' conditions (the mesh CA
//! controller's `Ready` and `CARotation`) are never lost.

use meshlink_api::{Condition, ConditionStatus, Kind, Resource};

use crate::resources::{ResourceError, ResourceService};

use super::StatusError;

/// Attempts before a contended write is given up (it is retried on the
/// next flush).
const ATTEMPTS: usize = 5;

/// Applies `change` to the current status of `kind/mesh/name` and writes it
/// if anything changed. Returns whether a write happened.
pub(crate) async fn merge(
    resources: &ResourceService,
    kind: Kind,
    mesh: Option<&str>,
    name: &str,
    change: impl Fn(&mut Resource),
) -> Result<bool, StatusError> {
    for _ in 0..ATTEMPTS {
        let current = resources.get(kind, mesh, name).await?;
        let mut next = current.clone();
        change(&mut next);
        if next.status == current.status {
            return Ok(false);
        }
        let expected = current.resource_version().and_then(|v| v.parse().ok());
        match resources
            .set_status(kind, mesh, name, next.status, expected)
            .await
        {
            Ok(_) => return Ok(true),
            Err(ResourceError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StatusError::Contended(format!(
        "{kind} {name}: status changed concurrently {ATTEMPTS} times in a row"
    )))
}

/// The `Valid` condition of a MeshTrafficPermission: its target and every
/// `from` entry are well-formed selectors.
pub(crate) fn mtp_valid(r: &Resource) -> Condition {
    let errors = r.validate();
    if errors.is_empty() {
        let spec = r.spec.as_mesh_traffic_permission();
        let rules = spec.map_or(0, |s| s.from.len());
        return Condition::now(
            "Valid",
            ConditionStatus::True,
            "Valid",
            format!("targetRef and {rules} from rule(s) are well-formed selectors"),
        );
    }
    let what: Vec<String> = errors.iter().map(ToString::to_string).collect();
    Condition::now(
        "Valid",
        ConditionStatus::False,
        "InvalidSelector",
        what.join("; "),
    )
}

/// The `CertificateRotationStalled` condition of a mesh from the names of
/// its stalled proxies (sorted).
pub(crate) fn stalled_condition(stalled: &[String]) -> Condition {
    const SHOWN: usize = 10;
    if stalled.is_empty() {
        return Condition::now(
            "CertificateRotationStalled",
            ConditionStatus::False,
            "AllRenewing",
            "no connected proxy is past 80% of its certificate's lifetime without a renewal",
        );
    }
    let mut names = stalled[..stalled.len().min(SHOWN)].join(", ");
    if stalled.len() > SHOWN {
        names.push_str(&format!(" and {} more", stalled.len() - SHOWN));
    }
    Condition::now(
        "CertificateRotationStalled",
        ConditionStatus::True,
        "RenewalOverdue",
        format!(
            "{} connected proxy(ies) past 80% of their certificate's lifetime without a renewal: {names}; \
             check their logs and `meshlink inspect dataplane NAME`",
            stalled.len()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalled_condition_names_at_most_ten() {
        let names: Vec<String> = (0..12).map(|i| format!("dp-{i:02}")).collect();
        let c = stalled_condition(&names);
        assert_eq!(c.status, ConditionStatus::True);
        assert!(c.message.contains("dp-09 and 2 more"), "{}", c.message);
        assert!(!c.message.contains("dp-10"), "{}", c.message);
        let ok = stalled_condition(&[]);
        assert_eq!(
            (ok.status, ok.reason.as_str()),
            (ConditionStatus::False, "AllRenewing")
        );
    }
}
