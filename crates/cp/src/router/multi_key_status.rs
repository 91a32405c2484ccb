//! MultiKeyListener status, from the same network view as Listener status:
//! `hasDestination` and `strategy.{priority,weighted}.routingKeysReachable`
//! (Skupper's fields), and the Operational and Ready conditions, whose
//! message names the key new flows go to (priority) or the keys they are
//! shared among (weighted). Ready is Operational, except while the router
//! reports that it cannot bind the port: then `BindFailed` with the OS
//! error, as a Listener's.
//!
//! A key is reachable when a Connector for it is in this site or in a site
//! the router has a route to: exactly what the router's listener checks
//! before it opens a flow. Owns only this computation; the router status
//! task ([`super::status`]) calls it in its flush.

use meshlink_api::spec::{MultiKeyListenerSpec, MultiKeyListenerStatus, StatusDetails};
use meshlink_api::{Condition, ConditionStatus, Kind, Resource};
use meshlink_xds::certify::RouterReport;

use crate::resources::ResourceService;
use crate::status::writer::merge;

/// Writes the status of every MultiKeyListener in `listeners`;
/// `connectors(key)` counts the Connectors for `key` in the network.
/// `report` is the router's latest report (its bind failures).
pub(crate) async fn write(
    resources: &ResourceService,
    listeners: &[Resource],
    connectors: &(dyn Fn(&str) -> u32 + Sync),
    report: Option<&RouterReport>,
) -> Result<(), crate::status::StatusError> {
    for l in listeners {
        let Some(spec) = l.spec.as_multi_key_listener() else {
            continue;
        };
        let reachable: Vec<String> = spec
            .routing_keys()
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| connectors(k) > 0)
            .collect();
        let unbound = super::bind_status::multi_key_listener_failure(report, l.name())
            .map(|f| f.message.as_str());
        merge(resources, Kind::MultiKeyListener, None, l.name(), |r| {
            apply(r, spec, &reachable, unbound);
        })
        .await?;
    }
    Ok(())
}

/// Sets the status fields and conditions for the `reachable` keys;
/// `unbound` is why the router could not bind the port, if it could not.
fn apply(
    r: &mut Resource,
    spec: &MultiKeyListenerSpec,
    reachable: &[String],
    unbound: Option<&str>,
) {
    let strategy = spec.strategy_status(reachable);
    r.status.details = StatusDetails::MultiKeyListener(MultiKeyListenerStatus {
        has_destination: Some(!reachable.is_empty()),
        strategy: Some(strategy),
    });
    let (status, reason, message) = operational(spec, reachable);
    r.set_condition(Condition::now(
        "Operational",
        status,
        reason,
        message.clone(),
    ));
    r.set_condition(match unbound {
        Some(why) => bind_failed(spec, why),
        None => Condition::now("Ready", status, reason, message),
    });
}

/// `Ready` of a MultiKeyListener whose port the router cannot bind.
fn bind_failed(spec: &MultiKeyListenerSpec, why: &str) -> Condition {
    Condition::now(
        "Ready",
        ConditionStatus::False,
        "BindFailed",
        format!(
            "port {} on {} is not bound: {why}",
            spec.port.get(),
            spec.host
        ),
    )
}

/// The Operational condition: where new flows go.
fn operational(
    spec: &MultiKeyListenerSpec,
    reachable: &[String],
) -> (ConditionStatus, &'static str, String) {
    let keys = spec.routing_keys();
    if reachable.is_empty() {
        let all: Vec<String> = keys.iter().map(|(k, _)| format!("{k:?}")).collect();
        return (
            ConditionStatus::False,
            "NoMatchingConnectors",
            format!(
                "no Connector in the network serves routing key {}; new connections are \
                 closed until one does",
                all.join(" or ")
            ),
        );
    }
    let message = if spec.is_weighted() {
        let shares: Vec<String> = keys
            .iter()
            .filter(|(k, _)| reachable.contains(k))
            .map(|(k, w)| format!("{k:?} (weight {w})"))
            .collect();
        format!("new flows are shared among {}", shares.join(", "))
    } else {
        let active = &reachable[0];
        let first = keys.first().map(|(k, _)| k.as_str());
        if first == Some(active.as_str()) {
            format!("new flows go to routing key {active:?}")
        } else {
            format!(
                "new flows go to routing key {active:?}: no Connector in the network serves the \
                 keys before it"
            )
        }
    };
    (ConditionStatus::True, "Operational", message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshlink_api::spec::{MultiKeyStrategy, PriorityStrategy, WeightedStrategy};

    fn spec(strategy: MultiKeyStrategy) -> MultiKeyListenerSpec {
        serde_json::from_value(serde_json::json!({
            "host": "db", "port": 5432, "strategy": strategy,
        }))
        .unwrap()
    }

    #[test]
    fn a_port_the_router_cannot_bind_makes_it_not_ready_whatever_its_keys() {
        let p = spec(MultiKeyStrategy {
            priority: Some(PriorityStrategy {
                routing_keys: vec!["a".into()],
            }),
            weighted: None,
        });
        let mut r = Resource::from_json(serde_json::json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "MultiKeyListener",
            "metadata": {"name": "db"}, "spec": p,
        }))
        .unwrap();
        let why = "binding db:5432: Address already in use (os error 98); retrying every second";
        apply(&mut r, &p, &["a".into()], Some(why));
        let ready = r.condition("Ready").unwrap();
        assert_eq!(
            (ready.status, ready.reason.as_str(), ready.message.as_str()),
            (
                ConditionStatus::False,
                "BindFailed",
                "port 5432 on db is not bound: binding db:5432: Address already in use (os error \
                 98); retrying every second"
            )
        );
        // Where flows would go is still said.
        let op = r.condition("Operational").unwrap();
        assert_eq!(op.status, ConditionStatus::True);
        apply(&mut r, &p, &["a".into()], None);
        let ready = r.condition("Ready").unwrap();
        assert_eq!(
            (ready.status, ready.reason.as_str()),
            (ConditionStatus::True, "Operational")
        );
    }

    #[test]
    fn the_message_names_the_key_new_flows_go_to() {
        let p = spec(MultiKeyStrategy {
            priority: Some(PriorityStrategy {
                routing_keys: vec!["a".into(), "b".into()],
            }),
            weighted: None,
        });
        let (s, _, m) = operational(&p, &["a".into(), "b".into()]);
        assert_eq!(
            (s, m.as_str()),
            (ConditionStatus::True, "new flows go to routing key \"a\"")
        );
        let (_, _, m) = operational(&p, &["b".into()]);
        assert!(
            m.starts_with("new flows go to routing key \"b\": no Connector"),
            "{m}"
        );
        let (s, _, m) = operational(&p, &[]);
        assert_eq!(s, ConditionStatus::False);
        assert!(m.contains("\"a\" or \"b\""), "{m}");
        let w = spec(MultiKeyStrategy {
            priority: None,
            weighted: Some(WeightedStrategy {
                routing_keys: [("a".to_owned(), 3), ("b".to_owned(), 1)].into(),
            }),
        });
        let (_, _, m) = operational(&w, &["a".into(), "b".into()]);
        assert_eq!(
            m,
            "new flows are shared among \"a\" (weight 3), \"b\" (weight 1)"
        );
    }
}
