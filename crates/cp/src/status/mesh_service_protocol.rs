//! `ProtocolAgreed` on MeshServices: whether every inbound each port
//! targets declares the port's `appProtocol` with `kuma.io/protocol`
//! (kuma#6825). When one does not, the translator serves the port as TCP,
//! and the condition says which Dataplanes' inbounds say what and how to
//! fix it.
//!
//! The protocol a port is served with comes from the translator itself
//! (`meshlink_xds::translate::protocol::mesh_service_port`) over a
//! [`MeshView`] of the mesh; this module only lists the inbounds that
//! disagree and words the result. Part of the status task's MeshService
//! status (`mesh_service.rs`), its only writer. It must never decide a
//! protocol itself.

use meshlink_api::{Condition, ConditionStatus, Resource};
use meshlink_xds::translate::protocol::{PROTOCOL_TAG, Protocol, inbound, mesh_service_port};
use meshlink_xds::translate::{MeshView, selected_dataplanes};

use super::protocol::{CONDITION, MISMATCH, bounded, protocol_name};

/// The reason while every port's inbounds agree.
const AGREED: &str = "ProtocolsAgree";

/// The `ProtocolAgreed` condition of MeshService `ms` in `view`: `True`
/// when every inbound each of its ports targets declares the port's
/// `appProtocol`, else `False` naming the port, the inbounds and the fix.
pub(super) fn condition(view: &MeshView, ms: &Resource) -> Option<Condition> {
    let spec = ms.spec.as_mesh_service()?;
    let mut served = Vec::new();
    let mut mismatches = Vec::new();
    for p in &spec.ports {
        let port = p.port.get();
        let app = p.app_protocol.as_deref().unwrap_or("tcp");
        let wanted = Protocol::parse(app);
        let others: Vec<String> = selected_dataplanes(view, spec)
            .flat_map(|(name, dp)| {
                dp.networking
                    .inbound
                    .iter()
                    .filter(move |i| p.targets(i) && inbound(&i.tags) != wanted)
                    .map(move |i| match i.tags.get(PROTOCOL_TAG) {
                        Some(v) => format!("{name} inbound {} says {v}", i.port.get()),
                        None => format!(
                            "{name} inbound {} has no {PROTOCOL_TAG} (tcp)",
                            i.port.get()
                        ),
                    })
            })
            .collect();
        let now = protocol_name(mesh_service_port(view, ms.name(), port));
        if others.is_empty() {
            served.push(format!("{port} as {now}"));
        } else {
            mismatches.push(format!(
                "port {port} declares appProtocol {app}, but inbounds it targets declare \
                 otherwise: {}; the port is served as {now} meanwhile. Fix: set \
                 {PROTOCOL_TAG}: {app} on every inbound the port targets, or change the \
                 port's appProtocol",
                bounded(&others)
            ));
        }
    }
    Some(if mismatches.is_empty() {
        Condition::now(
            CONDITION,
            ConditionStatus::True,
            AGREED,
            format!(
                "every inbound each port targets declares the port's appProtocol; served: {}",
                if served.is_empty() {
                    "no ports".to_owned()
                } else {
                    served.join(", ")
                }
            ),
        )
    } else {
        Condition::now(
            CONDITION,
            ConditionStatus::False,
            MISMATCH,
            mismatches.join("; "),
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn r(v: serde_json::Value) -> Resource {
        Resource::from_json(v).expect("valid")
    }

    fn dp(name: &str, proto: Option<&str>) -> Resource {
        let mut tags = json!({"kuma.io/service": "api"});
        if let Some(p) = proto {
            tags[PROTOCOL_TAG] = p.into();
        }
        r(json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
            "metadata": {"name": name, "mesh": "m"},
            "spec": {"networking": {"address": "10.0.0.1",
                "inbound": [{"port": 8080, "tags": tags}]}},
        }))
    }

    fn view_of(dps: Vec<Resource>, ms: &Resource) -> MeshView {
        let mesh = r(
            json!({"apiVersion": "meshlink.dev/v1alpha1", "kind": "Mesh",
            "metadata": {"name": "m"}, "spec": {}}),
        );
        MeshView::new(mesh, dps, Vec::new()).with_mesh_services(vec![ms.clone()])
    }

    fn api(app: &str) -> Resource {
        r(json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "MeshService",
            "metadata": {"name": "api", "mesh": "m"},
            "spec": {"selector": {"dataplaneTags": {"kuma.io/service": "api"}},
                     "ports": [{"port": 8080, "appProtocol": app}]},
        }))
    }

    #[test]
    fn a_port_whose_inbounds_disagree_is_false_and_names_them_and_the_fix() {
        let ms = api("http");
        let view = view_of(vec![dp("api-1", Some("http")), dp("api-2", None)], &ms);
        let c = condition(&view, &ms).expect("a MeshService");
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::False, MISMATCH)
        );
        for part in [
            "port 8080 declares appProtocol http",
            "api-2 inbound 8080 has no kuma.io/protocol (tcp)",
            "served as tcp meanwhile",
            "set kuma.io/protocol: http on every inbound",
            "change the port's appProtocol",
        ] {
            assert!(c.message.contains(part), "{part:?} in {}", c.message);
        }
        assert!(!c.message.contains("api-1"), "api-1 agrees: {}", c.message);
    }

    #[test]
    fn agreeing_inbounds_are_true_and_say_what_each_port_is_served_as() {
        let ms = api("grpc");
        let view = view_of(
            vec![dp("api-1", Some("grpc")), dp("api-2", Some("grpc"))],
            &ms,
        );
        let c = condition(&view, &ms).expect("a MeshService");
        assert_eq!(
            (c.status, c.reason.as_str()),
            (ConditionStatus::True, AGREED)
        );
        assert!(c.message.ends_with("served: 8080 as grpc"), "{}", c.message);

        let ms = api("kafka");
        let view = view_of(vec![dp("api-1", None)], &ms);
        let c = condition(&view, &ms).expect("a MeshService");
        assert_eq!(
            c.status,
            ConditionStatus::True,
            "kafka is tcp: {}",
            c.message
        );
    }
}
