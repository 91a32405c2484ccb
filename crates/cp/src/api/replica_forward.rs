//! Asking the replica that holds what a request is about (issue 35 §4): a
//! proxy's stream report and config dump (`inspect`) live in the replica
//! holding its stream, traffic figures in the replica holding each report
//! stream (the traffic API asks every live replica). A replica asked about them forwards the request,
//! once, to that replica's REST API (found through its instance record,
//! which names the address and proves the replica live), with the
//! caller's own bearer token. The answer says which replica forwarded it
//! (`forwardedBy`).
//!
//! A forwarded request carries [`FORWARDED_BY`] and is never forwarded
//! again, so two replicas that disagree about where a proxy is cannot
//! bounce a request between them.

use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, Uri};
use http_body_util::BodyExt;
use meshlink_store::Store;
use serde_json::{Value, json};

use crate::replicas::record::{self, InstanceRecord};

/// Marks a request forwarded by another replica (its instance name).
const FORWARDED_BY: &str = "meshlink-forwarded-by";

/// The whole forwarded exchange may take this long.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);

/// A live replica to ask.
pub(super) struct Holder {
    /// Its REST API address.
    pub(super) api_addr: String,
}

/// The live replica `instance`, from its instance record; `Err` says why
/// it cannot be asked.
async fn holder(store: &dyn Store, instance: &str) -> Result<Holder, String> {
    let obj = store
        .get(&record::key(instance))
        .await
        .map_err(|e| format!("cannot read its instance record: {e}"))?
        .ok_or_else(|| format!("control plane {instance} has no instance record (it stopped)"))?;
    let rec: InstanceRecord = serde_json::from_value(obj.body)
        .map_err(|e| format!("its instance record is unreadable: {e}"))?;
    if rec.is_stale(SystemTime::now()) {
        return Err(format!(
            "control plane {instance} stopped heartbeating at {}",
            rec.heartbeat
        ));
    }
    Ok(Holder {
        api_addr: rec.api_addr,
    })
}

/// Forwards the GET `uri` (with the caller's `Authorization` from
/// `headers`) to replica `instance`, as replica `from`; its JSON answer
/// gains `forwardedBy: from`. `Err` says why it could not be asked, naming
/// it. Callers check [`forwarded`] first: a forwarded request is never
/// forwarded again.
pub(super) async fn forward(
    store: &dyn Store,
    instance: &str,
    headers: &HeaderMap,
    uri: &Uri,
    from: &str,
) -> Result<Value, String> {
    let auth = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let h = holder(store, instance).await?;
    let mut body = get(&h, path, auth, from).await.map_err(|e| {
        format!(
            "control plane {instance} ({}) did not answer: {e}",
            h.api_addr
        )
    })?;
    if let Value::Object(map) = &mut body {
        map.insert("forwardedBy".to_owned(), json!(from));
    }
    Ok(body)
}

/// Every other replica whose instance record is fresh, by instance name.
pub(super) async fn live_others(store: &dyn Store, me: &str) -> Vec<String> {
    let now = SystemTime::now();
    record::list(store)
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|(r, _)| r.instance != me && !r.is_stale(now))
        .map(|(r, _)| r.instance)
        .collect()
}

/// Whether another replica forwarded this request.
pub(super) fn forwarded(headers: &HeaderMap) -> bool {
    headers.contains_key(FORWARDED_BY)
}

/// GETs `path_and_query` from `holder` with `authorization`, marked as
/// forwarded by `from`. Returns the JSON body of a 200 answer.
async fn get(
    holder: &Holder,
    path_and_query: &str,
    authorization: &str,
    from: &str,
) -> Result<Value, String> {
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect(holder.api_addr.as_str())
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", holder.api_addr))?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                .await
                .map_err(|e| e.to_string())?;
        let driver = tokio::spawn(conn);
        let req = hyper::Request::get(path_and_query)
            .header(hyper::header::HOST, holder.api_addr.as_str())
            .header(hyper::header::AUTHORIZATION, authorization)
            .header(FORWARDED_BY, from)
            .body(http_body_util::Empty::<hyper::body::Bytes>::new())
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        driver.abort();
        if !status.is_success() {
            return Err(format!(
                "it answered {status}: {}",
                String::from_utf8_lossy(&body).trim()
            ));
        }
        serde_json::from_slice(&body).map_err(|e| format!("its answer is not JSON: {e}"))
    };
    tokio::time::timeout(FORWARD_TIMEOUT, exchange)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {FORWARD_TIMEOUT:?}")))
}
