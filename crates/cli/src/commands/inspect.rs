//! `meshlink inspect dataplane NAME [-m MESH] [--config-dump] [-o table|json|yaml]`.
//!
//! Shows what the control plane's xDS stream for one proxy looks like
//! (`GET /api/v1/dataplanes/{name}/xds`): connection, identity certificate,
//! per-type versions sent and acknowledged, the last NACK. With
//! `--config-dump` it prints instead the resources the proxy is sent, in
//! the shape of Envoy's admin `/config_dump`, as JSON (the default, for
//! `jq`) or YAML. It only reads the API body; it never decodes xDS itself.
//! The summary ends with the endpoints the dataplane's sidecar keeps out
//! of its balancers ([`super::inspect_health`]).

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reqwest::Method;
use serde_json::Value;

use super::inspect_health::unhealthy_endpoints;
use super::table::{aligned, text};
use crate::client::ApiClient;
use crate::failure::Failure;

/// Output formats of `inspect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// A human summary.
    Table,
    /// The API body as JSON.
    Json,
    /// The API body as YAML.
    Yaml,
}

/// Make-before-break order of the served types; others follow by name.
const TYPE_ORDER: [&str; 5] = [
    "Secret",
    "Cluster",
    "ClusterLoadAssignment",
    "Listener",
    "RouteConfiguration",
];

/// Versions longer than this are abbreviated in the table.
const VERSION_WIDTH: usize = 16;

/// Runs `inspect dataplane`; `format` is what `-o` said, if anything.
pub(crate) async fn dataplane(
    client: &ApiClient,
    name: &str,
    mesh: &str,
    config_dump: bool,
    format: Option<Format>,
) -> Result<(), Failure> {
    let format = output_format(config_dump, format)?;
    let mut query = vec![("mesh", mesh.to_string())];
    if config_dump {
        query.push(("configDump", "true".to_string()));
    }
    let body = client
        .call(
            Method::GET,
            &format!("/api/v1/dataplanes/{name}/xds"),
            &query,
            None,
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.into_failure())?;
    let shown = if config_dump {
        body.get("configDump").ok_or_else(|| {
            Failure::Runtime(format!(
                "no config dump: this control-plane instance holds no configuration for \
                 {mesh}/{name} (its proxy is not connected here; with several control \
                 planes, ask the one it is connected to)"
            ))
        })?
    } else {
        &body
    };
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(shown).expect("JSON prints")
        ),
        Format::Yaml => print!(
            "{}",
            serde_yaml_ng::to_string(shown).expect("JSON prints as YAML")
        ),
        Format::Table => print!("{}", summary(&body, SystemTime::now())),
    }
    Ok(())
}

/// The format to print in: `-o` if given, else the summary, or JSON for a
/// config dump (which has no table form).
fn output_format(config_dump: bool, format: Option<Format>) -> Result<Format, Failure> {
    match (config_dump, format) {
        (true, Some(Format::Table)) => Err(Failure::BadInput(
            "--config-dump prints Envoy's config dump as JSON (the default) or YAML \
             (-o yaml); it has no table form. Drop --config-dump for the summary."
                .to_string(),
        )),
        (true, None) => Ok(Format::Json),
        (false, None) => Ok(Format::Table),
        (_, Some(f)) => Ok(f),
    }
}

// === summary ===

/// The human summary of an inspect body, with relative times against `now`.
fn summary(r: &Value, now: SystemTime) -> String {
    let mut out = String::new();
    let who = format!("{}/{}", text(&r["mesh"]), text(&r["name"]));
    if r["controlPlane"].is_null() {
        let why = r["message"].as_str().unwrap_or("no stream report");
        let _ = writeln!(out, "Dataplane {who}: not connected: {why}");
        if !r["dataplaneStatus"]["mtls"].is_null() {
            out.push_str(&status_certificate(&r["dataplaneStatus"], now));
        }
        out.push_str(&other_conditions(&r["dataplaneStatus"]));
        out.push_str(&unhealthy_endpoints(&r["dataplaneStatus"], now));
        return out;
    }
    let stream = format!(
        "stream {}, generation {}, {}, client {}",
        text(&r["streamId"]),
        text(&r["generation"]),
        text(&r["protocol"]),
        r["client"].as_str().unwrap_or("unknown yet"),
    );
    let cp = text(&r["controlPlane"]);
    if r["connected"] == true {
        let _ = writeln!(
            out,
            "Dataplane {who}: connected to {cp} ({stream}) since {}",
            time(&r["connectedAt"], now)
        );
    } else {
        let reason = match r["closeReason"].as_str() {
            Some(why) => format!("closed with an error: {why}"),
            None => "closed without an error".to_string(),
        };
        let _ = writeln!(
            out,
            "Dataplane {who}: disconnected from {cp} at {}, {reason}",
            time(&r["disconnectedAt"], now),
        );
        let _ = writeln!(
            out,
            "Last stream: {stream}, opened {}",
            time(&r["connectedAt"], now)
        );
    }
    if let Some(asked) = r["forwardedBy"].as_str() {
        let _ = writeln!(
            out,
            "(report from {cp}, which holds the stream; {asked} forwarded the request)"
        );
    }
    out.push_str(&certificate(&r["certificate"], &r["dataplaneStatus"], now));
    out.push_str(&other_conditions(&r["dataplaneStatus"]));
    out.push_str(&unhealthy_endpoints(&r["dataplaneStatus"], now));
    out.push_str(&types_table(&r["types"]));
    out
}

fn certificate(c: &Value, status: &Value, now: SystemTime) -> String {
    if c.is_null() {
        return status_certificate(status, now);
    }
    let expiry = match instant(&c["notAfter"]) {
        Some(t) => format!("expires {} ({})", rfc3339(t), relative(t, now)),
        None => "expiry unknown".to_string(),
    };
    format!(
        "Certificate: {} serial {} from CA {} {expiry}\n",
        text(&c["spiffeId"]),
        text(&c["serial"]),
        abbreviate(&text(&c["caFingerprint"]), VERSION_WIDTH),
    )
}

/// The certificate recorded in the Dataplane's status (issued through
/// Certify, or over SDS by any instance), with its Ready condition.
fn status_certificate(status: &Value, now: SystemTime) -> String {
    let m = &status["mtls"];
    let mut out = if m.is_null() {
        "Certificate: none issued to this dataplane yet\n".to_string()
    } else {
        let at = |v: &Value| {
            v.as_str()
                .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
        };
        let expiry = match at(&m["certificateExpirationTime"]) {
            Some(t) => format!("expires {} ({})", rfc3339(t), relative(t, now)),
            None => "expiry unknown".to_string(),
        };
        let issued = match at(&m["lastCertificateRegeneration"]) {
            Some(t) => format!("issued {} ({})", rfc3339(t), relative(t, now)),
            None => "issue time unknown".to_string(),
        };
        format!(
            "Certificate: {} serial {} {expiry}\n  {issued} via {} by backend {}, {} regeneration(s)\n",
            text(&m["spiffeId"]),
            text(&m["serial"]),
            m["delivery"].as_str().unwrap_or("?"),
            m["issuedBackend"].as_str().unwrap_or("?"),
            m["certificateRegenerations"].as_u64().unwrap_or(0),
        )
    };
    if let Some(c) = status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
    {
        let _ = writeln!(
            out,
            "Ready: {} ({}): {}",
            text(&c["status"]),
            text(&c["reason"]),
            text(&c["message"])
        );
    }
    out
}

/// The Dataplane's conditions other than `Ready` (which the certificate
/// lines show), one line each, e.g. `ProtocolAgreed: False
/// (ProtocolMismatch): …`.
fn other_conditions(status: &Value) -> String {
    let mut out = String::new();
    for c in status["conditions"].as_array().into_iter().flatten() {
        if c["type"] != "Ready" {
            let _ = writeln!(
                out,
                "{}: {} ({}): {}",
                text(&c["type"]),
                text(&c["status"]),
                text(&c["reason"]),
                text(&c["message"])
            );
        }
    }
    out
}

fn types_table(types: &Value) -> String {
    let Some(map) = types.as_object().filter(|m| !m.is_empty()) else {
        return "No resource types requested yet.\n".to_string();
    };
    let mut names: Vec<&String> = map.keys().collect();
    names.sort_by_key(|n| {
        let rank = TYPE_ORDER.iter().position(|t| t == n);
        (rank.unwrap_or(TYPE_ORDER.len()), n.as_str())
    });
    let mut rows = vec![
        [
            "TYPE",
            "SENT",
            "ACKED",
            "RESOURCES",
            "RESPONSES",
            "LAST NACK",
        ]
        .map(str::to_string),
    ];
    for n in names {
        let t = &map[n];
        let version = |v: &Value| {
            v.as_str()
                .map_or("-".into(), |v| abbreviate(v, VERSION_WIDTH))
        };
        let nack = match &t["lastNack"] {
            Value::Null => "-".to_string(),
            n => format!(
                "{}: {}",
                abbreviate(&text(&n["version"]), VERSION_WIDTH),
                text(&n["detail"])
            ),
        };
        rows.push([
            n.clone(),
            version(&t["lastSentVersion"]),
            version(&t["lastAckedVersion"]),
            text(&t["resources"]),
            text(&t["responses"]),
            nack,
        ]);
    }
    aligned(&rows)
}

// === values and times ===

/// `s` cut to `width` characters, ending in `…` when cut.
fn abbreviate(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let mut cut: String = s.chars().take(width - 1).collect();
    cut.push('…');
    cut
}

fn unix(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// `t` as RFC 3339, to the second.
pub(super) fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

/// An RFC 3339 JSON string (or, from an older server, unix seconds).
fn instant(v: &Value) -> Option<SystemTime> {
    v.as_u64()
        .map(unix)
        .or_else(|| humantime::parse_rfc3339(v.as_str()?).ok())
}

/// A JSON time as RFC 3339 with how long ago or ahead it is, or `?`.
fn time(v: &Value, now: SystemTime) -> String {
    match instant(v) {
        Some(t) => format!("{} ({})", rfc3339(t), relative(t, now)),
        None => "?".to_string(),
    }
}

/// `in 59m` or `5m ago`, to the minute (to the hour beyond a day).
pub(super) fn relative(t: SystemTime, now: SystemTime) -> String {
    let (d, future) = match t.duration_since(now) {
        Ok(d) => (d, true),
        Err(e) => (e.duration(), false),
    };
    let secs = d.as_secs();
    let unit = match secs {
        0..60 => return if future { "in <1m" } else { "just now" }.to_string(),
        60..86_400 => 60,
        _ => 3600,
    };
    let rounded = humantime::format_duration(Duration::from_secs(secs - secs % unit));
    if future {
        format!("in {rounded}")
    } else {
        format!("{rounded} ago")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: u64 = 1_796_000_120;

    fn connected() -> Value {
        json!({"mesh":"default","name":"web-1","connected":true,
            "controlPlane":"host/127.0.0.1:5678","streamId":3,"generation":1,
            "protocol":"sotw","client":"envoy","connectedAt":"2026-11-30T00:53:20Z",
            "disconnectedAt":null,"closeReason":null,
            "types":{
                "Cluster":{"lastSentVersion":"0123456789abcdef","lastAckedVersion":"0123456789abcdef",
                    "lastNack":null,"resources":2,"responses":1},
                "Secret":{"lastSentVersion":"aaaa","lastAckedVersion":null,
                    "lastNack":{"version":"aaaa","detail":"bad cert"},"resources":2,"responses":1}},
            "certificate":{"serial":"0a1b","spiffeId":"spiffe://default/web",
                "caFingerprint":"ffffffffffffffffffff","notBefore":"2026-11-30T00:53:20Z",
                "notAfter":"2026-11-30T01:53:20Z"}})
    }

    #[test]
    fn connected_summary_lists_stream_certificate_and_types_in_push_order() {
        let s = summary(&connected(), unix(NOW));
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines[0],
            "Dataplane default/web-1: connected to host/127.0.0.1:5678 (stream 3, generation 1, \
             sotw, client envoy) since 2026-11-30T00:53:20Z (2m ago)"
        );
        assert_eq!(
            lines[1],
            "Certificate: spiffe://default/web serial 0a1b from CA fffffffffffffff… \
             expires 2026-11-30T01:53:20Z (in 58m)"
        );
        assert!(lines[2].starts_with("TYPE "), "{s}");
        assert!(lines[3].starts_with("Secret "), "{s}");
        assert!(lines[3].ends_with("aaaa: bad cert"), "{s}");
        assert!(lines[4].starts_with("Cluster "), "{s}");
        assert!(lines[4].contains("0123456789abcdef"), "{s}");
        assert_eq!(lines[2].find("SENT"), lines[3].find("aaaa"), "{s}");
    }

    #[test]
    fn disconnected_summary_says_when_and_why() {
        let mut r = connected();
        r["connected"] = json!(false);
        r["disconnectedAt"] = json!("2026-11-30T00:54:20Z");
        r["closeReason"] = json!("token revoked");
        let s = summary(&r, unix(NOW));
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines[0],
            "Dataplane default/web-1: disconnected from host/127.0.0.1:5678 at \
             2026-11-30T00:54:20Z (1m ago), closed with an error: token revoked"
        );
        assert_eq!(
            lines[1],
            "Last stream: stream 3, generation 1, sotw, client envoy, opened \
             2026-11-30T00:53:20Z (2m ago)"
        );
        assert!(lines[2].starts_with("Certificate: "), "{s}");
    }

    #[test]
    fn certify_issued_certificate_comes_from_dataplane_status() {
        let mut r = connected();
        r["certificate"] = Value::Null;
        r["dataplaneStatus"] = json!({"online": true,
            "mtls": {"certificateExpirationTime": "2026-11-30T01:53:20Z",
                "lastCertificateRegeneration": "2026-11-30T00:53:20Z",
                "certificateRegenerations": 3, "issuedBackend": "ca-1",
                "serial": "0c0d", "spiffeId": "spiffe://default/web", "delivery": "certify"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Connected",
                "message": "connected", "lastTransitionTime": "2026-11-30T00:53:20Z"}]});
        let s = summary(&r, unix(NOW));
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines[1],
            "Certificate: spiffe://default/web serial 0c0d expires 2026-11-30T01:53:20Z (in 58m)"
        );
        assert_eq!(
            lines[2],
            "  issued 2026-11-30T00:53:20Z (2m ago) via certify by backend ca-1, 3 regeneration(s)"
        );
        assert_eq!(lines[3], "Ready: True (Connected): connected");
    }

    #[test]
    fn other_conditions_follow_ready_one_line_each() {
        let mut r = connected();
        r["dataplaneStatus"]["conditions"] = json!([
            {"type": "Ready", "status": "True", "reason": "Connected", "message": "connected"},
            {"type": "ProtocolAgreed", "status": "False", "reason": "ProtocolMismatch",
             "message": "inbound 8080 of service api declares http"}]);
        let s = summary(&r, unix(NOW));
        assert!(
            s.contains("\nProtocolAgreed: False (ProtocolMismatch): inbound 8080 of service api declares http\n"),
            "{s}"
        );
        let r = json!({"mesh": "default", "name": "db-1", "connected": false, "message": "never seen",
            "dataplaneStatus": {"conditions": [{"type": "ProtocolAgreed", "status": "False",
                "reason": "ProtocolMismatch", "message": "m"}]}});
        assert!(summary(&r, unix(NOW)).ends_with("ProtocolAgreed: False (ProtocolMismatch): m\n"));
    }

    #[test]
    fn never_connected_summary_passes_the_message_on() {
        let r = json!({"mesh":"default","name":"db-1","connected":false,"message":"never seen"});
        assert_eq!(
            summary(&r, unix(NOW)),
            "Dataplane default/db-1: not connected: never seen\n"
        );
    }

    #[test]
    fn relative_times_round_down_to_minutes_or_hours() {
        let now = unix(NOW);
        assert_eq!(relative(unix(NOW + 30), now), "in <1m");
        assert_eq!(relative(unix(NOW + 3599), now), "in 59m");
        assert_eq!(relative(unix(NOW + 3 * 86_400 + 7000), now), "in 3days 1h");
        assert_eq!(relative(unix(NOW - 125), now), "2m ago");
    }

    #[test]
    fn config_dump_defaults_to_json_and_refuses_the_table() {
        assert_eq!(output_format(true, None).unwrap(), Format::Json);
        assert_eq!(
            output_format(true, Some(Format::Yaml)).unwrap(),
            Format::Yaml
        );
        assert_eq!(output_format(false, None).unwrap(), Format::Table);
        assert_eq!(
            output_format(false, Some(Format::Json)).unwrap(),
            Format::Json
        );
        let e = output_format(true, Some(Format::Table)).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("-o yaml"), "{e}");
    }
}
