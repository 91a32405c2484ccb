//! `meshlink token dataplane`, `meshlink token router` and `meshlink token revoke`.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::client::ApiClient;
use crate::failure::Failure;

/// `POST /api/v1/tokens/{kind}` with `body`, for `kind` `dataplane` (the
/// response holds `token`, `id`, `services`, `expiresAt` and maybe
/// `clientCertificate`) or `router` (`token`, `id`, `site`, `nodeId`,
/// `expiresAt`).
pub(crate) async fn request_token(
    client: &ApiClient,
    kind: &str,
    body: &serde_json::Value,
) -> Result<serde_json::Value, Failure> {
    client
        .call(
            Method::POST,
            &format!("/api/v1/tokens/{kind}"),
            &[],
            Some(body),
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.into_failure())
}

/// Prints a dataplane token to stdout (details to stderr).
pub(crate) async fn dataplane(
    client: &ApiClient,
    mesh: &str,
    name: &str,
    services: &[String],
    valid_for: &str,
    cert_dir: Option<&Path>,
) -> Result<(), Failure> {
    humantime::parse_duration(valid_for)
        .map_err(|e| Failure::BadInput(format!("--valid-for {valid_for:?}: {e} (e.g. 24h)")))?;
    let body = json!({ "mesh": mesh, "name": name, "services": services, "validFor": valid_for,
        "clientCertificate": cert_dir.is_some() });
    let resp = request_token(client, "dataplane", &body).await?;
    let token = resp["token"].as_str().unwrap_or_default();
    if let Some(dir) = cert_dir {
        write_cert_dir(dir, &resp["clientCertificate"])?;
    }
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

/// Prints the router token of this control plane's Site (or of `site`) to
/// stdout (details to stderr).
pub(crate) async fn router(
    client: &ApiClient,
    site: Option<&str>,
    valid_for: &str,
) -> Result<(), Failure> {
    humantime::parse_duration(valid_for)
        .map_err(|e| Failure::BadInput(format!("--valid-for {valid_for:?}: {e} (e.g. 24h)")))?;
    let body = json!({ "site": site, "validFor": valid_for });
    let resp = request_token(client, "router", &body).await?;
    println!("{}", resp["token"].as_str().unwrap_or_default());
    eprintln!(
        "token {} for the router of site {} (node.id {}), expires {}",
        resp["id"].as_str().unwrap_or("?"),
        resp["site"].as_str().unwrap_or("?"),
        resp["nodeId"].as_str().unwrap_or("?"),
        resp["expiresAt"].as_str().unwrap_or("?"),
    );
    Ok(())
}

/// Writes `tls.crt`, `tls.key` (0600) and `ca.crt` into `dir` (created 0700).
fn write_cert_dir(dir: &Path, cc: &serde_json::Value) -> Result<(), Failure> {
    let io = |what: &str, e: std::io::Error| {
        Failure::Runtime(format!("cannot write {what} in {}: {e}", dir.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| io("the directory", e))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| io("the directory", e))?;
    let field = |k: &str| {
        cc[k].as_str().map(str::to_string).ok_or_else(|| {
            Failure::Runtime("the control plane did not return a client certificate".into())
        })
    };
    for (file, key, mode) in [
        ("tls.key", "privateKeyPem", 0o600),
        ("tls.crt", "certificatePem", 0o644),
        ("ca.crt", "caPem", 0o644),
    ] {
        let path = dir.join(file);
        let contents = field(key)?;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(mode)
            .open(&path)
            .map_err(|e| io(file, e))?;
        f.write_all(contents.as_bytes()).map_err(|e| io(file, e))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| io(file, e))?;
    }
    eprintln!(
        "wrote {0}/tls.crt, {0}/tls.key and {0}/ca.crt (client certificate {1})",
        dir.display(),
        cc["uri"].as_str().unwrap_or("?")
    );
    Ok(())
}

/// Revokes a token by id.
pub(crate) async fn revoke(
    client: &ApiClient,
    id: &str,
    reason: &str,
    force: bool,
) -> Result<(), Failure> {
    let body = json!({ "id": id, "reason": reason, "force": force });
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
