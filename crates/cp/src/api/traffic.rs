//! `GET /api/v1/traffic`: the traffic figures the data plane last
//! reported, for the console and scripts:
//! - `services`: the site router's figures by routing key (flows opened
//!   and open, bytes each way);
//! - `links`: the bytes each of the router's links carried;
//! - `dataplanes`: each sidecar's figures by inbound port (connections
//!   accepted and open, bytes each way). The console sums them per mesh
//!   service through the Dataplanes' `kuma.io/service` tags.
//!
//! The figures live in memory, in the replica holding each report stream
//! (`crate::traffic`). So a replica answers with its own figures and
//! those of every other live replica, which it asks once each (a request
//! forwarded by another replica answers with its own figures only). A
//! replica that cannot be asked is named in `unansweredReplicas`.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use meshlink_api::Kind;
use serde_json::{Map, Value, json};

use super::{ApiError, ApiState, replica_forward};
use crate::router::holder::{Reporter, key};

/// The figures this replica holds.
fn local(st: &ApiState) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(r) = st.traffic.current() {
        let services: Vec<Value> = r
            .keys
            .iter()
            .map(|k| {
                json!({
                    "routingKey": k.routing_key,
                    "flowsOpened": k.flows_opened,
                    "flowsActive": k.flows_active,
                    "bytesToConnector": k.bytes_to_connector,
                    "bytesToListener": k.bytes_to_listener,
                })
            })
            .collect();
        let links: Vec<Value> = r
            .links
            .iter()
            .map(|l| {
                json!({
                    "name": l.name,
                    "remoteSiteId": l.remote_site_id,
                    "bytesSent": l.bytes_sent,
                    "bytesReceived": l.bytes_received,
                })
            })
            .collect();
        out.insert("site".into(), json!(r.site));
        out.insert(
            "reportedAt".into(),
            json!(humantime::format_rfc3339_seconds(r.at).to_string()),
        );
        out.insert("reportedTo".into(), json!(&*st.instance));
        out.insert("services".into(), json!(services));
        out.insert("links".into(), json!(links));
    }
    let dataplanes: Vec<Value> = st
        .traffic
        .dataplanes()
        .into_iter()
        .map(|(key, r)| {
            let inbounds: Vec<Value> = r
                .inbounds
                .iter()
                .map(|i| {
                    json!({
                        "port": i.port,
                        "connectionsOpened": i.connections_opened,
                        "connectionsActive": i.connections_active,
                        "bytesReceived": i.bytes_received,
                        "bytesSent": i.bytes_sent,
                    })
                })
                .collect();
            json!({
                "mesh": key.mesh,
                "name": key.name,
                "reportedAt": humantime::format_rfc3339_seconds(r.at).to_string(),
                "reportedTo": &*st.instance,
                "inbounds": inbounds,
            })
        })
        .collect();
    out.insert("dataplanes".into(), json!(dataplanes));
    out
}

/// Adds `other`'s figures (another replica's answer) to `out`: its
/// router figures when `out` has none, and every sidecar `out` lacks.
fn merge(out: &mut Map<String, Value>, other: &Value) {
    if !out.contains_key("reportedAt") && other.get("reportedAt").is_some() {
        for field in ["site", "reportedAt", "reportedTo", "services", "links"] {
            if let Some(v) = other.get(field) {
                out.insert(field.into(), v.clone());
            }
        }
    }
    let Some(theirs) = other.get("dataplanes").and_then(Value::as_array) else {
        return;
    };
    let Some(Value::Array(ours)) = out.get_mut("dataplanes") else {
        return;
    };
    let id = |v: &Value| (v["mesh"].clone(), v["name"].clone());
    for dp in theirs {
        // Two replicas hold streams of one sidecar only while it moves:
        // the newer report wins.
        match ours.iter_mut().find(|o| id(o) == id(dp)) {
            Some(o) if o["reportedAt"].as_str() < dp["reportedAt"].as_str() => *o = dp.clone(),
            Some(_) => {}
            None => ours.push(dp.clone()),
        }
    }
}

pub(super) async fn traffic(
    State(st): State<ApiState>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Json<Value>, ApiError> {
    let mut out = local(&st);
    if replica_forward::forwarded(&headers) {
        return Ok(Json(Value::Object(out)));
    }
    let store = st.resources.store();
    let mut unanswered = Vec::new();
    let others = replica_forward::live_others(store.as_ref(), &st.instance).await;
    let asked = others.iter().map(|instance| {
        replica_forward::forward(store.as_ref(), instance, &headers, &uri, &st.instance)
    });
    for answer in futures::future::join_all(asked).await {
        match answer {
            Ok(body) => merge(&mut out, &body),
            Err(e) => unanswered.push(json!(e)),
        }
    }
    if let Some(Value::Array(dps)) = out.get_mut("dataplanes") {
        dps.sort_by(|a, b| {
            (a["mesh"].as_str(), a["name"].as_str()).cmp(&(b["mesh"].as_str(), b["name"].as_str()))
        });
    }
    if !unanswered.is_empty() {
        out.insert("unansweredReplicas".into(), json!(unanswered));
    }
    if out.contains_key("reportedAt") {
        if out["reportedTo"].as_str() != Some(&*st.instance) {
            out.insert("forwardedBy".into(), json!(&*st.instance));
        }
        return Ok(Json(Value::Object(out)));
    }
    out.insert("services".into(), json!([]));
    out.insert("links".into(), json!([]));
    let site = st
        .resources
        .list(Kind::Site, None, None)
        .await?
        .into_iter()
        .next()
        .map(|s| s.name().to_owned());
    let Some(site) = site else {
        out.insert(
            "message".into(),
            json!("this control plane has no Site; apply one and start its router"),
        );
        return Ok(Json(Value::Object(out)));
    };
    let holder = match store.get(&key(&site)).await {
        Ok(Some(obj)) => serde_json::from_value::<Reporter>(obj.body).ok(),
        _ => None,
    };
    let message = match holder {
        Some(h) if h.instance != *st.instance && !others.contains(&h.instance) => format!(
            "this site's router reports to control plane {}, which is not live",
            h.instance
        ),
        Some(h) if h.instance != *st.instance && !unanswered.is_empty() => format!(
            "this site's router reports to control plane {}, which cannot be asked",
            h.instance
        ),
        _ => "this site's router is not reporting to any control plane".to_owned(),
    };
    out.insert("site".into(), json!(site));
    out.insert("message".into(), json!(message));
    Ok(Json(Value::Object(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dp(name: &str, at: &str, opened: u64) -> Value {
        json!({"mesh": "default", "name": name, "reportedAt": at,
               "inbounds": [{"port": 8080, "connectionsOpened": opened}]})
    }

    #[test]
    fn answers_merge_router_figures_once_and_the_newest_report_of_each_sidecar() {
        let mut out = Map::new();
        out.insert(
            "dataplanes".into(),
            json!([dp("web-1", "2026-12-05T10:00:00Z", 1)]),
        );
        let cp2 = json!({
            "site": "north", "reportedAt": "2026-12-05T10:00:05Z", "reportedTo": "cp-2",
            "services": [{"routingKey": "backend"}], "links": [{"name": "to-south"}],
            "dataplanes": [dp("web-1", "2026-12-05T10:00:09Z", 4), dp("web-2", "2026-12-05T10:00:01Z", 2)],
        });
        merge(&mut out, &cp2);
        let cp3 = json!({
            "site": "north", "reportedAt": "2026-12-05T09:00:00Z", "reportedTo": "cp-3",
            "services": [], "dataplanes": [dp("web-2", "2026-12-05T09:59:00Z", 1)],
        });
        merge(&mut out, &cp3);
        assert_eq!(out["reportedTo"], "cp-2");
        assert_eq!(out["links"][0]["name"], "to-south");
        let dps = out["dataplanes"].as_array().unwrap();
        assert_eq!(dps.len(), 2);
        assert_eq!(dps[0]["inbounds"][0]["connectionsOpened"], 4);
        assert_eq!(dps[1]["inbounds"][0]["connectionsOpened"], 2);
    }
}
