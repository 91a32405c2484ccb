//! `meshlink token issue FILE` and `meshlink token redeem FILE`, mirroring
//! the Skupper CLI: issue creates (or names) an AccessGrant, waits until it
//! is Ready and writes an AccessToken; redeem applies the token, waits for
//! `Redeemed` and then for the Link to be `Operational`, showing progress.
//!
//! Talks to the REST API only. The token file holds a secret code, so it
//! is written with mode 0600; this command does not print the code (the
//! grant's status shows it to the admin, as Skupper's does).

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::time::Duration;

use meshlink_api::{Kind, parse_documents};
use reqwest::Method;
use serde_json::{Value, json};

use super::{apply, wait};
use crate::client::ApiClient;
use crate::failure::Failure;

/// How long `token issue` waits for the grant to be Ready.
const GRANT_READY_TIMEOUT: Duration = Duration::from_secs(60);

async fn get(client: &ApiClient, kind: Kind, name: &str) -> Result<Value, Failure> {
    client
        .call(
            Method::GET,
            &format!("/api/v1/{}/{name}", kind.plural()),
            &[],
            None,
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.into_failure())
}

/// `token issue`.
pub(crate) async fn issue(
    client: &ApiClient,
    file: &str,
    grant: Option<&str>,
    redemptions: Option<u64>,
    expiration_window: Option<&str>,
) -> Result<(), Failure> {
    if let Some(w) = expiration_window {
        humantime::parse_duration(w).map_err(|e| {
            Failure::BadInput(format!("--expiration-window {w:?}: {e} (e.g. 15m or 1h)"))
        })?;
    }
    let name = match grant {
        Some(g) => {
            if redemptions.is_some() || expiration_window.is_some() {
                return Err(Failure::BadInput(
                    "--redemptions and --expiration-window apply to a new grant; drop them with --grant".into(),
                ));
            }
            get(client, Kind::AccessGrant, g).await?;
            g.to_owned()
        }
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .subsec_nanos();
            let suffix = format!("{:08x}", nanos ^ std::process::id().rotate_left(16));
            let name = format!("grant-{suffix}");
            let mut spec = serde_json::Map::new();
            if let Some(n) = redemptions {
                spec.insert("redemptionsAllowed".into(), json!(n));
            }
            if let Some(w) = expiration_window {
                spec.insert("expirationWindow".into(), json!(w));
            }
            let body = json!({"apiVersion": meshlink_api::API_VERSION, "kind": "AccessGrant",
                              "metadata": {"name": name}, "spec": spec});
            client
                .call(
                    Method::PUT,
                    &format!("/api/v1/accessgrants/{name}"),
                    &[],
                    Some(&body),
                    Duration::from_secs(30),
                )
                .await
                .map_err(|e| e.into_failure())?;
            eprintln!("created AccessGrant {name}");
            name
        }
    };
    let ready = wait::parse_for("condition=Ready")?;
    wait::run(
        client,
        Kind::AccessGrant,
        &name,
        None,
        &ready,
        GRANT_READY_TIMEOUT,
    )
    .await?;
    let g = get(client, Kind::AccessGrant, &name).await?;
    let s = &g["status"];
    let token = json!({
        "apiVersion": "skupper.io/v2alpha1",
        "kind": "AccessToken",
        "metadata": {"name": name},
        "spec": {"url": s["url"], "code": s["code"], "ca": s["ca"]},
    });
    let yaml = serde_yaml_ng::to_string(&token).expect("JSON serializes to YAML");
    write_private(file, &yaml)?;
    eprintln!(
        "wrote an AccessToken for grant {name} to {file} (expires {}); redeem it in the other site with: meshlink token redeem {file}",
        s["expirationTime"].as_str().unwrap_or("?")
    );
    Ok(())
}

fn write_private(file: &str, text: &str) -> Result<(), Failure> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(file)
        .map_err(|e| Failure::BadInput(format!("cannot write {file}: {e}")))?;
    f.write_all(text.as_bytes())
        .map_err(|e| Failure::Runtime(format!("cannot write {file}: {e}")))
}

/// `token redeem`.
pub(crate) async fn redeem(
    client: &ApiClient,
    file: &str,
    timeout: Duration,
    link_timeout: Duration,
) -> Result<(), Failure> {
    let (text, source) = apply::read_input(file)?;
    let names: Vec<String> = parse_documents(&text)
        .into_iter()
        .filter_map(|d| d.outcome.ok())
        .filter(|r| r.kind() == Kind::AccessToken)
        .map(|r| r.name().to_owned())
        .collect();
    if names.is_empty() {
        return Err(Failure::BadInput(format!(
            "{source}: no AccessToken found; pass the file `meshlink token issue` wrote"
        )));
    }
    apply::run(client, file, false).await?;
    for name in &names {
        wait_redeemed(client, name, timeout).await?;
    }
    if link_timeout.is_zero() {
        return Ok(());
    }
    let operational = wait::parse_for("condition=Operational")?;
    for name in &names {
        eprintln!(
            "waiting for Link {name} to be Operational (this needs this site's router: meshlink-proxy run --mode router)"
        );
        wait::run(client, Kind::Link, name, None, &operational, link_timeout).await?;
    }
    Ok(())
}

/// Polls the token's `Redeemed` condition until True; a refusal fails at
/// once with the grant server's status and body.
async fn wait_redeemed(client: &ApiClient, name: &str, timeout: Duration) -> Result<(), Failure> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut said = String::new();
    loop {
        let t = get(client, Kind::AccessToken, name).await?;
        let c = t["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Redeemed"))
            .cloned()
            .unwrap_or(Value::Null);
        let now = format!(
            "{} {}",
            c["reason"].as_str().unwrap_or("Pending"),
            c["message"].as_str().unwrap_or("not tried yet")
        );
        if now != said {
            eprintln!("AccessToken {name}: {now}");
            said = now;
        }
        match (c["status"].as_str(), c["reason"].as_str()) {
            (Some("True"), _) => {
                println!("AccessToken {name} redeemed");
                return Ok(());
            }
            (Some("False"), Some("Refused")) => {
                return Err(Failure::Runtime(format!(
                    "AccessToken {name} was not redeemed: {}",
                    c["message"].as_str().unwrap_or("?")
                )));
            }
            _ => {}
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Failure::Runtime(format!(
                "timed out after {} waiting for AccessToken {name} to be redeemed; last seen: {said}",
                humantime::format_duration(timeout)
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `link generate`: prints a Secret and Link YAML for this site.
pub(crate) async fn link_generate(
    client: &ApiClient,
    name: Option<&str>,
    subject: Option<&str>,
) -> Result<(), Failure> {
    let mut q = Vec::new();
    if let Some(n) = name {
        q.push(("name", n.to_owned()));
    }
    if let Some(s) = subject {
        q.push(("subject", s.to_owned()));
    }
    let resp = client
        .call(
            Method::POST,
            "/api/v1/link-generate",
            &q,
            None,
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.into_failure())?;
    print!("{}", resp["yaml"].as_str().unwrap_or_default());
    Ok(())
}
