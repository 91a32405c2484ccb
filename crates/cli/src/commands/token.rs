//! `meshlink token dataplane` and `meshlink token revoke`.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::client::ApiClient;
use crate::failure::Failure;

/// Prints a dataplane token to stdout (details to stderr).
pub(crate) async fn dataplane(
    client: &ApiClient,
    mesh: &str,
    name: &str,
    services: &[String],
    valid_for: &str,
) -> Result<(), Failure> {
    humantime::parse_duration(valid_for)
        .map_err(|e| Failure::BadInput(format!("--valid-for {valid_for:?}: {e} (e.g. 24h)")))?;
    let body = json!({ "mesh": mesh, "name": name, "services": services, "validFor": valid_for });
    let resp = client
        .call(
            Method::POST,
            "/api/v1/tokens/dataplane",
            &[],
            Some(&body),
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.into_failure())?;
    let token = resp["token"].as_str().unwrap_or_default();
    println!("{token}");
    eprintln!(
        "token {} for dataplane {name} in mesh {mesh} (services: {}), expires {}",
        resp["id"].as_str().unwrap_or("?"),
        resp["services"]
            .as_array()
            .map(|a| a
                .iter()
                .filter_map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(","))
            .unwrap_or_default(),
        resp["expiresAt"].as_str().unwrap_or("?"),
    );
    Ok(())
}

/// Revokes a token by id.
pub(crate) async fn revoke(client: &ApiClient, id: &str, reason: &str) -> Result<(), Failure> {
    let body = json!({ "id": id, "reason": reason });
    let resp = client
        .call(
            Method::POST,
            "/api/v1/tokens/revoke",
            &[],
            Some(&body),
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.into_failure())?;
    if resp["alreadyRevoked"] == true {
        println!("token {id} was already revoked");
    } else {
        println!("token {id} revoked");
    }
    Ok(())
}
