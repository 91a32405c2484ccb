//! `GET /api/v1/traffic`: the traffic figures this site's router last
//! reported, by routing key (flows opened and open, bytes each way), for
//! the console and scripts. The figures live in the memory of the replica
//! holding the router's report stream (`router/traffic.rs`); another
//! replica forwards the request to it once, as `inspect` does.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use meshlink_api::Kind;
use serde_json::{Value, json};

use super::{ApiError, ApiState, replica_forward};
use crate::router::holder::{Reporter, key};

pub(super) async fn traffic(
    State(st): State<ApiState>,
    headers: HeaderMap,
    uri: Uri,
) -> Result<Json<Value>, ApiError> {
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
        return Ok(Json(json!({
            "site": r.site,
            "reportedAt": humantime::format_rfc3339_seconds(r.at).to_string(),
            "reportedTo": &*st.instance,
            "services": services,
        })));
    }
    let site = st
        .resources
        .list(Kind::Site, None, None)
        .await?
        .into_iter()
        .next()
        .map(|s| s.name().to_owned());
    let Some(site) = site else {
        return Ok(Json(json!({
            "services": [],
            "message": "this control plane has no Site; apply one and start its router",
        })));
    };
    let store = st.resources.store();
    let holder = match store.get(&key(&site)).await {
        Ok(Some(obj)) => serde_json::from_value::<Reporter>(obj.body).ok(),
        _ => None,
    };
    let mut message = "this site's router is not reporting to any control plane".to_owned();
    if let Some(h) = holder.filter(|h| *h.instance != *st.instance)
        && !replica_forward::forwarded(&headers)
    {
        match replica_forward::forward(store.as_ref(), &h.instance, &headers, &uri, &st.instance)
            .await
        {
            Ok(body) => return Ok(Json(body)),
            Err(e) => {
                message =
                    format!("this site's router reports to a replica that cannot be asked: {e}");
            }
        }
    }
    Ok(Json(json!({
        "site": site,
        "services": [],
        "message": message,
    })))
}
