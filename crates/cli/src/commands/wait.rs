//! `meshlink wait KIND/NAME --for condition=TYPE[=STATUS] [--timeout 60s]`.
//!
//! Follows the watch API (no polling loop) and prints progress to stderr
//! whenever the observed condition changes. A watch that fell behind the
//! control plane's change feed (410 Gone) lists again and goes on.

use std::time::Duration;

use meshlink_api::Kind;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::apply::display_name;
use crate::client::{ApiClient, ApiFailure, scope_query};
use crate::failure::Failure;

/// What to wait for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WaitFor {
    condition: String,
    status: String,
}

/// Parses `condition=Ready` or `condition=Ready=False`.
pub(crate) fn parse_for(s: &str) -> Result<WaitFor, Failure> {
    let rest = s.strip_prefix("condition=").ok_or_else(|| {
        Failure::BadInput(format!(
            "--for {s:?}: expected condition=TYPE or condition=TYPE=STATUS, e.g. condition=Ready"
        ))
    })?;
    let (condition, status) = match rest.split_once('=') {
        Some((c, st)) => (c, st),
        None => (rest, "True"),
    };
    if condition.is_empty() {
        return Err(Failure::BadInput(format!(
            "--for {s:?}: the condition type is empty"
        )));
    }
    Ok(WaitFor {
        condition: condition.to_string(),
        status: status.to_string(),
    })
}

/// Parses `KIND/NAME`.
pub(crate) fn parse_target(s: &str) -> Result<(Kind, String), Failure> {
    let (k, n) = s.split_once('/').ok_or_else(|| {
        Failure::BadInput(format!("{s:?}: expected KIND/NAME, e.g. dataplane/web-1"))
    })?;
    let kind = k
        .parse::<Kind>()
        .map_err(|e| Failure::BadInput(e.to_string()))?;
    if n.is_empty() {
        return Err(Failure::BadInput(format!("{s:?}: the name is empty")));
    }
    Ok((kind, n.to_string()))
}

fn observed(r: Option<&Value>, cond: &str) -> String {
    let Some(r) = r else {
        return "does not exist yet".to_string();
    };
    match r["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| same_type(c, cond)))
    {
        None => format!("no {cond} condition yet"),
        Some(c) => {
            let mut s = format!("{cond}={}", c["status"].as_str().unwrap_or("?"));
            if let Some(reason) = c["reason"].as_str().filter(|r| !r.is_empty()) {
                s.push_str(&format!(" ({reason}"));
                if let Some(m) = c["message"].as_str().filter(|m| !m.is_empty()) {
                    s.push_str(&format!(": {m}"));
                }
                s.push(')');
            }
            s
        }
    }
}

/// Condition types (and statuses) match case-insensitively, as in kubectl:
/// `--for=condition=ready` waits for `Ready`.
fn same_type(c: &Value, cond: &str) -> bool {
    c["type"]
        .as_str()
        .is_some_and(|t| t.eq_ignore_ascii_case(cond))
}

fn matches(r: Option<&Value>, w: &WaitFor) -> bool {
    r.and_then(|r| r["status"]["conditions"].as_array())
        .and_then(|cs| cs.iter().find(|c| same_type(c, &w.condition)))
        .is_some_and(|c| {
            c["status"]
                .as_str()
                .is_some_and(|s| s.eq_ignore_ascii_case(&w.status))
        })
}

fn is_target(r: &Value, name: &str, mesh: Option<&str>) -> bool {
    r["metadata"]["name"] == name && mesh.is_none_or(|m| r["metadata"]["mesh"] == m)
}

/// Lists `kind` and picks the target out: its current state and the
/// revision to watch from, so no change after the read can be missed.
async fn list_target(
    client: &ApiClient,
    kind: Kind,
    name: &str,
    mesh: Option<&str>,
) -> Result<(Option<Value>, String), Failure> {
    let list = client
        .call(
            Method::GET,
            &format!("/api/v1/{}", kind.plural()),
            &scope_query(kind, mesh),
            None,
            Duration::from_secs(60),
        )
        .await
        .map_err(|e| e.into_failure())?;
    let current = list["items"]
        .as_array()
        .and_then(|a| a.iter().find(|r| is_target(r, name, mesh)).cloned());
    let from = list["revision"].as_str().unwrap_or("0").to_string();
    Ok((current, from))
}

/// Runs `wait`.
pub(crate) async fn run(
    client: &ApiClient,
    kind: Kind,
    name: &str,
    mesh: Option<&str>,
    w: &WaitFor,
    timeout: Duration,
) -> Result<(), Failure> {
    let mesh = mesh.filter(|_| kind.allows_mesh());
    let what = display_name(kind, name, mesh);
    let deadline = tokio::time::Instant::now() + timeout;
    let (mut current, mut from) = list_target(client, kind, name, mesh).await?;
    let mut last_said = observed(current.as_ref(), &w.condition);
    eprintln!(
        "waiting up to {} for {what} condition {}={} (now: {last_said})",
        humantime::format_duration(timeout),
        w.condition,
        w.status
    );
    loop {
        if matches(current.as_ref(), w) {
            println!("{what} condition met: {}={}", w.condition, w.status);
            return Ok(());
        }
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        if remaining.is_zero() {
            return Err(Failure::Runtime(format!(
                "timed out after {} waiting for {what} condition {}={}; last seen: {last_said}",
                humantime::format_duration(timeout),
                w.condition,
                w.status
            )));
        }
        let poll = remaining.min(Duration::from_secs(30));
        let mut q = vec![
            ("from", from.clone()),
            ("kind", kind.as_str().to_string()),
            ("timeout", format!("{}ms", poll.as_millis().max(1))),
        ];
        if let Some(m) = mesh {
            q.push(("mesh", m.to_string()));
        }
        let resp = match client
            .call(
                Method::GET,
                "/api/v1/watch",
                &q,
                None,
                poll + Duration::from_secs(10),
            )
            .await
        {
            Ok(resp) => resp,
            // Fell behind the change feed's window: list again and follow
            // on from there, as a Kubernetes client does.
            Err(ApiFailure::Status { status, .. }) if status == StatusCode::GONE => {
                eprintln!(
                    "  the watch fell behind the control plane's change feed; listing {what} again"
                );
                (current, from) = list_target(client, kind, name, mesh).await?;
                continue;
            }
            Err(e) => return Err(e.into_failure()),
        };
        for ev in resp["events"].as_array().into_iter().flatten() {
            if is_target(&ev["resource"], name, mesh) {
                current = if ev["type"] == "Deleted" {
                    None
                } else {
                    Some(ev["resource"].clone())
                };
            }
        }
        if let Some(r) = resp["revision"].as_str() {
            from = r.to_string();
        }
        let now = observed(current.as_ref(), &w.condition);
        if now != last_said {
            eprintln!("  {what}: {now}");
            last_said = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_and_target_parse() {
        assert_eq!(
            parse_for("condition=Ready").unwrap(),
            WaitFor {
                condition: "Ready".into(),
                status: "True".into()
            }
        );
        assert_eq!(parse_for("condition=Ready=False").unwrap().status, "False");
        assert!(parse_for("Ready").is_err());
        assert_eq!(
            parse_target("dp/web").unwrap(),
            (Kind::Dataplane, "web".into())
        );
        assert!(parse_target("web").is_err());
        assert!(parse_target("gadget/x").is_err());
    }
}
