//! `meshlink get controlplanes [-o table|json|yaml]`: the control-plane
//! replicas sharing a store, which one leads, and the singleton jobs.

use std::time::{Duration, SystemTime};

use reqwest::Method;
use serde_json::Value;

use super::get::Output;
use super::table::{aligned, text as s};
use crate::client::ApiClient;
use crate::failure::Failure;

/// Whether `kind` (as typed) asks for control planes.
pub(crate) fn is_controlplanes(kind: &str) -> bool {
    matches!(
        kind.to_ascii_lowercase().as_str(),
        "controlplanes" | "controlplane" | "cp" | "cps"
    )
}

/// Runs `get controlplanes`.
pub(crate) async fn run(client: &ApiClient, output: Output) -> Result<(), Failure> {
    let v = client
        .call(
            Method::GET,
            "/api/v1/controlplanes",
            &[],
            None,
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.into_failure())?;
    match output {
        Output::Json => println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default()),
        Output::Yaml => print!("{}", serde_yaml_ng::to_string(&v).unwrap_or_default()),
        Output::Table => print!("{}", render(&v, SystemTime::now())),
    }
    Ok(())
}

fn age(t: &Value, now: SystemTime) -> String {
    let Some(at) = t
        .as_str()
        .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
    else {
        return "-".into();
    };
    let secs = now.duration_since(at).unwrap_or_default().as_secs();
    if secs < 120 {
        format!("{secs}s ago")
    } else if secs < 7200 {
        format!("{}m ago", secs / 60)
    } else {
        format!("{}h ago", secs / 3600)
    }
}

/// The replicas table, then the leader and the jobs.
fn render(v: &Value, now: SystemTime) -> String {
    let mut rows = vec![
        [
            "INSTANCE",
            "VERSION",
            "STARTED",
            "LAST HEARTBEAT",
            "STATE",
            "LEADER",
            "PROXIES",
            "XDS",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for i in v["items"].as_array().into_iter().flatten() {
        rows.push(vec![
            s(&i["instance"]),
            s(&i["version"]),
            age(&i["started"], now),
            age(&i["heartbeat"], now),
            s(&i["state"]),
            if i["leader"].as_bool() == Some(true) {
                "yes".into()
            } else {
                "no".into()
            },
            s(&i["connectedProxies"]),
            s(&i["xdsAddr"]),
        ]);
    }
    let mut out = aligned(&rows);
    match v["leader"].as_object() {
        Some(l) => out.push_str(&format!(
            "\nLeader: {} (fencing token {}, lease {} ms, renewed {})\n",
            s(&l["holder"]),
            s(&l["fencingToken"]),
            s(&l["leaseMs"]),
            age(&l["renewedAt"], now),
        )),
        None => out.push_str("\nLeader: none (no replica holds the lease right now)\n"),
    }
    let jobs = v["jobs"].as_array().cloned().unwrap_or_default();
    if !jobs.is_empty() {
        let mut rows = vec![
            [
                "JOB", "PERIOD", "RUNS", "PERIODS", "LAST RUN", "BY", "RESULT",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for j in &jobs {
            let (first, last) = (
                j["firstPeriod"].as_u64().unwrap_or(0),
                j["lastPeriod"].as_u64().unwrap_or(0),
            );
            rows.push(vec![
                s(&j["job"]),
                format!("{}s", s(&j["periodSeconds"])),
                s(&j["runs"]),
                (last.saturating_sub(first) + 1).to_string(),
                age(&j["lastRun"], now),
                s(&j["instance"]),
                s(&j["lastResult"]),
            ]);
        }
        out.push('\n');
        out.push_str(&aligned(&rows));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_names_the_leader_and_counts_job_periods() {
        let now = SystemTime::now();
        let t = humantime::format_rfc3339_seconds(now - Duration::from_secs(3)).to_string();
        let v = json!({
            "items": [
                {"instance": "cp-1", "version": "0.1.0", "started": t, "heartbeat": t,
                 "state": "Live", "leader": true, "connectedProxies": 2, "xdsAddr": "127.0.0.1:5678"},
                {"instance": "cp-2", "version": "0.1.0", "started": t, "heartbeat": t,
                 "state": "Stale", "leader": false, "connectedProxies": 0, "xdsAddr": "127.0.0.1:5679"}
            ],
            "leader": {"holder": "cp-1", "fencingToken": 3, "leaseMs": 15000, "renewedAt": t},
            "jobs": [{"job": "dataplane-gc", "periodSeconds": 30, "runs": 5, "firstPeriod": 10,
                      "lastPeriod": 14, "lastRun": t, "instance": "cp-1", "lastResult": "ok"}]
        });
        let out = render(&v, now);
        assert!(out.contains("cp-1") && out.contains("yes"), "{out}");
        assert!(out.contains("Stale"), "{out}");
        assert!(out.contains("fencing token 3"), "{out}");
        let job = out.lines().find(|l| l.starts_with("dataplane-gc")).unwrap();
        assert!(job.contains("30s") && job.contains(" 5 "), "{job}");
        assert!(out.contains("3s ago"), "{out}");
    }
}
