//! `meshlink delete KIND NAME [-m MESH] [--cascade]`.

use std::time::Duration;

use meshlink_api::Kind;
use reqwest::Method;

use super::apply::display_name;
use crate::client::{ApiClient, scope_query};
use crate::failure::Failure;

/// Runs `delete`.
pub(crate) async fn run(
    client: &ApiClient,
    kind: Kind,
    name: &str,
    mesh: Option<&str>,
    cascade: bool,
) -> Result<(), Failure> {
    let path = format!("/api/v1/{}/{}", kind.plural(), name);
    let mut query = scope_query(kind, mesh);
    if cascade {
        query.push(("cascade", "true".to_string()));
    }
    let resp = client
        .call(Method::DELETE, &path, &query, None, Duration::from_secs(30))
        .await
        .map_err(|e| e.into_failure())?;
    for c in resp["cascaded"].as_array().into_iter().flatten() {
        let kind: Option<Kind> = c["kind"].as_str().and_then(|k| k.parse().ok());
        if let (Some(k), Some(n)) = (kind, c["name"].as_str()) {
            println!("{} deleted", display_name(k, n, c["mesh"].as_str()));
        }
    }
    println!(
        "{} deleted",
        display_name(kind, name, mesh.filter(|_| kind.allows_mesh()))
    );
    Ok(())
}
