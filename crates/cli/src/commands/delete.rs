//! `meshlink delete KIND NAME [-m MESH]`.

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
) -> Result<(), Failure> {
    let path = format!("/api/v1/{}/{}", kind.plural(), name);
    client
        .call(
            Method::DELETE,
            &path,
            &scope_query(kind, mesh),
            None,
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.into_failure())?;
    println!(
        "{} deleted",
        display_name(kind, name, mesh.filter(|_| kind.is_mesh_scoped()))
    );
    Ok(())
}
