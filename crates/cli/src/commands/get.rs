//! `meshlink get KIND [NAME] [-m MESH] [-l SELECTOR] [-o table|yaml|json]`.

use std::time::{Duration, SystemTime};

use meshlink_api::{Kind, Resource};
use reqwest::Method;
use serde_json::Value;

use super::list_printer::ListPrinter;
use super::policy_columns::{policy_columns, target};
use super::table::{aligned, text as s};
use crate::client::{ApiClient, scope_query};
use crate::failure::Failure;

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Output {
    /// A human table.
    Table,
    /// Canonical YAML, re-appliable with `meshlink apply`.
    Yaml,
    /// Canonical JSON.
    Json,
}

/// Runs `get`. Lists are fetched `chunk_size` resources per request
/// (following the API's `continue` token), or in one request when it is 0,
/// and printed page by page as they arrive ([`ListPrinter`]).
pub(crate) async fn run(
    client: &ApiClient,
    kind: Kind,
    name: Option<&str>,
    mesh: Option<&str>,
    selector: Option<&str>,
    output: Output,
    chunk_size: u32,
) -> Result<(), Failure> {
    let Some(name) = name else {
        let mut q = scope_query(kind, mesh);
        if let Some(s) = selector {
            q.push(("labelSelector", s.to_string()));
        }
        let mut printer = ListPrinter::new(kind, output);
        for_each_page(client, kind, q, chunk_size, |items| printer.page(items)).await?;
        printer.finish();
        if kind == Kind::Link && output == Output::Table && selector.is_none() {
            super::network::print_incoming(client).await?;
        }
        return Ok(());
    };
    let path = format!("/api/v1/{}/{}", kind.plural(), name);
    let one = client
        .call(
            Method::GET,
            &path,
            &scope_query(kind, mesh),
            None,
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.into_failure())?;
    match output {
        Output::Json => println!("{}", pretty(&one)),
        Output::Yaml => print!("{}", to_yaml(&one)),
        Output::Table => print!("{}", table(kind, &[one])),
    }
    Ok(())
}

/// Fetches a list page after page and hands each page's items to `each`.
async fn for_each_page(
    client: &ApiClient,
    kind: Kind,
    mut query: Vec<(&'static str, String)>,
    chunk_size: u32,
    mut each: impl FnMut(&[Value]),
) -> Result<(), Failure> {
    let path = format!("/api/v1/{}", kind.plural());
    if chunk_size > 0 {
        query.push(("limit", chunk_size.to_string()));
    }
    loop {
        let mut page = client
            .call(Method::GET, &path, &query, None, Duration::from_secs(60))
            .await
            .map_err(|e| e.into_failure())?;
        if let Value::Array(items) = page["items"].take() {
            each(&items);
        }
        match page["continue"].as_str() {
            Some(token) if chunk_size > 0 => {
                query.retain(|(k, _)| *k != "continue");
                query.push(("continue", token.to_string()));
            }
            _ => return Ok(()),
        }
    }
}

pub(super) fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).expect("JSON prints")
}

pub(super) fn to_yaml(v: &Value) -> String {
    match Resource::from_json_unvalidated(v.clone()) {
        Ok(r) => r.to_yaml(),
        Err(_) => serde_yaml_ng::to_string(v).expect("JSON prints as YAML"),
    }
}

fn or(v: String, default: &str) -> String {
    if v.is_empty() { default.to_string() } else { v }
}

/// Per-kind summary columns: (header, value from the resource JSON).
fn summary(kind: Kind, r: &Value) -> Vec<(&'static str, String)> {
    let spec = &r["spec"];
    let status = &r["status"];
    let service_of = |tags: &Value| {
        let t = &tags["kuma.io/service"];
        if t.is_null() {
            s(&tags["meshlink.dev/service"])
        } else {
            s(t)
        }
    };
    match kind {
        Kind::Mesh => vec![(
            "MTLS",
            match spec["mtls"]["enabledBackend"].as_str() {
                Some(b) => b.to_string(),
                None => "off".to_string(),
            },
        )],
        Kind::Dataplane => {
            let net = &spec["networking"];
            let mut services: Vec<String> = net["inbound"]
                .as_array()
                .map(|a| a.iter().map(|i| service_of(&i["tags"])).collect())
                .unwrap_or_default();
            let gateway = &net["gateway"];
            if gateway.is_object() {
                let kind = or(s(&gateway["type"]), "DELEGATED");
                services.push(format!("{} ({kind} gateway)", service_of(&gateway["tags"])));
            }
            let now = SystemTime::now();
            vec![
                ("ADDRESS", s(&net["address"])),
                ("SERVICES", services.join(",")),
                ("STATUS", online(status)),
                ("CERT EXPIRES", cert_expires(status, now)),
                ("LAST SEEN", last_seen(status, now)),
                ("MESSAGE", dataplane_message(status)),
            ]
        }
        Kind::MeshTrafficPermission => vec![("TARGET", target(&spec["targetRef"]))],
        Kind::MeshHTTPRoute
        | Kind::MeshTCPRoute
        | Kind::MeshTimeout
        | Kind::MeshRetry
        | Kind::MeshRateLimit
        | Kind::MeshAccessLog
        | Kind::MeshLoadBalancingStrategy
        | Kind::MeshHealthCheck
        | Kind::MeshMetric
        | Kind::MeshFaultInjection
        | Kind::MeshCircuitBreaker
        | Kind::MeshTrace => policy_columns(kind, spec, &r["metadata"]["labels"]),
        // Skupper's printer columns for its kinds.
        Kind::Site => vec![
            ("STATUS", skupper_status(status)),
            ("SITES IN NETWORK", or(s(&status["sitesInNetwork"]), "1")),
            ("MESSAGE", skupper_message(status)),
        ],
        Kind::RouterAccess => {
            let roles: Vec<String> = spec["roles"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|r| format!("{}:{}", s(&r["name"]), s(&r["port"])))
                        .collect()
                })
                .unwrap_or_default();
            vec![("ROLES", roles.join(","))]
        }
        Kind::AccessGrant => vec![
            (
                "REDEMPTIONS",
                format!(
                    "{}/{}",
                    or(s(&status["redemptions"]), "0"),
                    or(s(&spec["redemptionsAllowed"]), "1")
                ),
            ),
            ("EXPIRES", s(&status["expirationTime"])),
        ],
        Kind::AccessToken => vec![
            ("URL", s(&spec["url"])),
            ("REDEEMED", or(s(&status["redeemed"]), "-")),
            ("STATUS", skupper_status(status)),
            ("MESSAGE", skupper_message(status)),
        ],
        Kind::Link => vec![
            ("STATUS", skupper_status(status)),
            ("REMOTE SITE", s(&status["remoteSiteName"])),
            ("COST", or(s(&spec["cost"]), "1")),
            ("MESSAGE", ready_message(status)),
        ],
        Kind::Listener | Kind::Connector => {
            let matched = if kind == Kind::Listener {
                &status["hasMatchingConnector"]
            } else {
                &status["hasMatchingListener"]
            };
            vec![
                ("ROUTING KEY", s(&spec["routingKey"])),
                ("HOST", s(&spec["host"])),
                ("PORT", s(&spec["port"])),
                ("STATUS", skupper_status(status)),
                ("MATCHED", or(s(matched), "false")),
                ("MESSAGE", ready_message(status)),
            ]
        }
        Kind::MultiKeyListener => vec![
            ("STATUS", skupper_status(status)),
            ("HOST", s(&spec["host"])),
            ("PORT", s(&spec["port"])),
            ("STRATEGY", key_strategy(&spec["strategy"])),
            ("REACHABLE", key_strategy(&status["strategy"])),
            ("HAS DESTINATION", or(s(&status["hasDestination"]), "false")),
            ("MESSAGE", ready_message(status)),
        ],
        Kind::MeshService => {
            let ports: Vec<String> = spec["ports"]
                .as_array()
                .map(|a| a.iter().map(|p| s(&p["port"])).collect())
                .unwrap_or_default();
            let selected = &status["dataplaneProxies"];
            vec![
                ("PORTS", ports.join(",")),
                ("DATAPLANES", or(s(&selected["total"]), "0")),
                ("CONNECTED", or(s(&selected["connected"]), "0")),
                ("MESSAGE", skupper_message(status)),
            ]
        }
        Kind::Secret => vec![
            ("TYPE", s(&spec["type"])),
            (
                "DATA",
                spec["data"]
                    .as_object()
                    .map(|d| d.keys().cloned().collect::<Vec<_>>().join(","))
                    .unwrap_or_default(),
            ),
        ],
    }
}

/// A MultiKeyListener's strategy, in its spec (`routingKeys`) or status
/// (`routingKeysReachable`): `priority a,b` or `weighted a:3,b:1`.
fn key_strategy(strategy: &Value) -> String {
    let keys = |v: &Value| -> Value {
        let o = v.as_object();
        o.and_then(|o| o.get("routingKeys").or(o.get("routingKeysReachable")))
            .cloned()
            .unwrap_or(Value::Null)
    };
    if let Some(p) = strategy.get("priority") {
        let list: Vec<String> = keys(p)
            .as_array()
            .map(|a| a.iter().map(s).collect())
            .unwrap_or_default();
        format!("priority {}", or(list.join(","), "-"))
    } else if let Some(w) = strategy.get("weighted") {
        let list: Vec<String> = keys(w)
            .as_object()
            .map(|o| o.iter().map(|(k, v)| format!("{k}:{}", s(v))).collect())
            .unwrap_or_default();
        format!("weighted {}", or(list.join(","), "-"))
    } else {
        "-".to_owned()
    }
}

/// Skupper's `STATUS` column: `status.status` when the control plane wrote
/// it, else from the `Ready` condition: `Ready`, `Error` when the router
/// cannot bind the port or connect to the target, else `Pending`.
fn skupper_status(status: &Value) -> String {
    if let Some(v) = status["status"].as_str() {
        return v.to_owned();
    }
    match condition(status, "Ready") {
        Some(c) if c["status"] == "True" => "Ready".into(),
        Some(c) if c["reason"] == "BindFailed" || c["reason"] == "TargetUnreachable" => {
            "Error".into()
        }
        _ => "Pending".into(),
    }
}

/// Skupper's `MESSAGE` column: `status.message`, else `OK` when ready, else
/// the message of the first condition that is not `True`.
fn skupper_message(status: &Value) -> String {
    if let Some(m) = status["message"].as_str().filter(|m| !m.is_empty()) {
        return m.to_owned();
    }
    let conditions = status["conditions"].as_array();
    let failing = conditions.and_then(|cs| cs.iter().find(|c| c["status"] != "True"));
    match failing {
        Some(c) => s(&c["message"]),
        None if conditions.is_some() => "OK".into(),
        None => String::new(),
    }
}

/// The `MESSAGE` of a Link, Listener, MultiKeyListener or Connector: while
/// `Ready` is False its message (why a link is down: the router's last
/// error, a missing Secret, an expired certificate; a port the router
/// cannot bind; a connector target it cannot connect to), else as
/// [`skupper_message`] (e.g. a Link's `CredentialsValid` `Expiring`).
fn ready_message(status: &Value) -> String {
    match condition(status, "Ready") {
        Some(c) if c["status"] == "False" && status["message"].is_null() => s(&c["message"]),
        _ => skupper_message(status),
    }
}

/// A Dataplane's `MESSAGE`: the message of its first condition other than
/// `Ready` (shown as STATUS and READY) that is not `True`, e.g.
/// `ProtocolAgreed` `ProtocolMismatch`; else `-`.
fn dataplane_message(status: &Value) -> String {
    status["conditions"]
        .as_array()
        .and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] != "Ready" && c["status"] != "True")
        })
        .map_or_else(|| "-".to_owned(), |c| s(&c["message"]))
}

fn condition<'a>(status: &'a Value, ty: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == ty)
}

/// `Online`, `Offline`, or `-` when no proxy ever connected.
fn online(status: &Value) -> String {
    match status["online"].as_bool() {
        Some(true) => "Online".into(),
        Some(false) if !status["lastConnected"].is_null() => "Offline".into(),
        _ => "-".into(),
    }
}

fn rfc3339_at(v: &Value) -> Option<SystemTime> {
    v.as_str()
        .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
}

/// `in 11h`, `expired 3m ago`, or `-`.
fn cert_expires(status: &Value, now: SystemTime) -> String {
    match rfc3339_at(&status["mtls"]["certificateExpirationTime"]) {
        Some(t) => match t.duration_since(now) {
            Ok(d) => format!("in {}", short(d)),
            Err(e) => format!("expired {} ago", short(e.duration())),
        },
        None => "-".into(),
    }
}

/// `now` while connected, else how long ago the last stream closed.
fn last_seen(status: &Value, now: SystemTime) -> String {
    if status["online"].as_bool() == Some(true) {
        return "now".into();
    }
    match rfc3339_at(&status["lastDisconnected"]).or_else(|| rfc3339_at(&status["lastConnected"])) {
        Some(t) => format!("{} ago", short(now.duration_since(t).unwrap_or_default())),
        None => "-".into(),
    }
}

/// One unit, rounded down: `42s`, `3m`, `11h`, `2d`.
fn short(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

fn ready(r: &Value) -> String {
    r["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| s(&c["status"]))
        .unwrap_or_else(|| "-".to_string())
}

/// Renders a table of `items` with aligned columns.
fn table(kind: Kind, items: &[Value]) -> String {
    let mut rows = TableRows::new(kind);
    rows.add(items);
    rows.render()
}

/// A table's rows as text, gathered page by page; the header comes from
/// the first item.
pub(crate) struct TableRows {
    kind: Kind,
    /// The header, then one row per item (empty until the first item).
    rows: Vec<Vec<String>>,
    /// Skupper's kinds show Skupper's columns (STATUS, MATCHED) instead of
    /// READY.
    ready_column: bool,
}

impl TableRows {
    /// No rows yet, for a table of `kind`.
    pub(crate) fn new(kind: Kind) -> Self {
        let ready_column = !matches!(
            kind,
            Kind::Site | Kind::Link | Kind::Listener | Kind::MultiKeyListener | Kind::Connector
        );
        TableRows {
            kind,
            rows: Vec::new(),
            ready_column,
        }
    }

    /// The kind listed.
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// Whether no item was added (the header comes with the first).
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Adds one row per item (the header first, from the first item).
    pub(crate) fn add(&mut self, items: &[Value]) {
        let kind = self.kind;
        if let (true, Some(first)) = (self.rows.is_empty(), items.first()) {
            let mut header = vec!["NAME"];
            if kind.allows_mesh() {
                header.insert(0, "MESH");
            }
            header.extend(summary(kind, first).iter().map(|(h, _)| *h));
            if self.ready_column {
                header.push("READY");
            }
            header.push("VERSION");
            self.rows
                .push(header.iter().map(|h| h.to_string()).collect());
        }
        for r in items {
            let m = &r["metadata"];
            let mut row = Vec::new();
            if kind.allows_mesh() {
                // A global Secret has no mesh.
                row.push(or(s(&m["mesh"]), "-"));
            }
            row.push(s(&m["name"]));
            row.extend(summary(kind, r).into_iter().map(|(_, v)| v));
            if self.ready_column {
                row.push(ready(r));
            }
            row.push(s(&m["resourceVersion"]));
            self.rows.push(row);
        }
    }

    /// The rows, aligned.
    pub(crate) fn render(&self) -> String {
        aligned(&self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn skupper_kinds_show_skuppers_printer_columns() {
        let link = json!({"metadata": {"name": "to-a", "resourceVersion": "7"},
            "spec": {"cost": 3},
            "status": {"remoteSiteName": "west", "conditions": [
                {"type": "Operational", "status": "False", "message": "Not operational"},
                {"type": "Ready", "status": "False", "message": "Not operational"}]}});
        let out = table(Kind::Link, &[link]);
        let mut lines = out.lines();
        let head: Vec<&str> = lines
            .next()
            .unwrap()
            .split("   ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            head,
            [
                "NAME",
                "STATUS",
                "REMOTE SITE",
                "COST",
                "MESSAGE",
                "VERSION"
            ]
        );
        let row = lines.next().unwrap();
        for cell in ["to-a", "Pending", "west", "3", "Not operational", "7"] {
            assert!(row.contains(cell), "{cell} in {row}");
        }
        let listener = json!({"metadata": {"name": "db", "resourceVersion": "2"},
            "spec": {"routingKey": "pg", "host": "db", "port": 5432},
            "status": {"hasMatchingConnector": true, "conditions": [{"type": "Ready", "status": "True"}]}});
        let out = table(Kind::Listener, &[listener]);
        assert!(
            out.starts_with(
                "NAME   ROUTING KEY   HOST   PORT   STATUS   MATCHED   MESSAGE   VERSION"
            ),
            "{out}"
        );
        assert!(
            out.contains("pg")
                && out.contains("5432")
                && out.contains("true")
                && out.contains("OK"),
            "{out}"
        );
        let site = json!({"metadata": {"name": "west", "resourceVersion": "1"},
            "status": {"status": "Ready", "message": "OK", "sitesInNetwork": 2}});
        let out = table(Kind::Site, &[site]);
        assert!(
            out.starts_with("NAME   STATUS   SITES IN NETWORK   MESSAGE   VERSION"),
            "{out}"
        );
        assert!(out.contains("Ready") && out.contains(" 2 "), "{out}");
    }

    #[test]
    fn a_connector_that_cannot_reach_its_target_shows_error_and_why() {
        let connector = json!({"metadata": {"name": "db", "resourceVersion": "3"},
            "spec": {"routingKey": "pg", "host": "127.0.0.1", "port": 5432},
            "status": {"hasMatchingListener": false, "conditions": [
                {"type": "Matched", "status": "False", "message": "no Listener in the network uses this routing key yet"},
                {"type": "Ready", "status": "False", "reason": "TargetUnreachable",
                 "message": "the site's router cannot connect to 127.0.0.1:5432: Connection refused (os error 111)"}]}});
        let out = table(Kind::Connector, &[connector]);
        let row = out.lines().nth(1).unwrap();
        for cell in [
            "Error",
            "false",
            "cannot connect to 127.0.0.1:5432: Connection refused",
        ] {
            assert!(row.contains(cell), "{cell} in {out}");
        }
    }

    #[test]
    fn a_links_message_shows_credential_expiry_and_why_it_is_down() {
        let link = |conditions: Value| {
            json!({"metadata": {"name": "to-a", "resourceVersion": "7"}, "spec": {},
                "status": {"conditions": conditions}})
        };
        // Up, certificate expiring: STATUS Ready, MESSAGE the expiry.
        let expiring = link(json!([
            {"type": "CredentialsValid", "status": "False", "reason": "Expiring",
             "message": "the certificate in Secret \"to-a\" expires at 2030-01-01T00:00:00Z"},
            {"type": "Operational", "status": "True", "message": "OK (remote site a)"},
            {"type": "Ready", "status": "True", "message": "OK (remote site a)"}]));
        let out = table(Kind::Link, &[expiring]);
        assert!(
            out.contains("Ready") && out.contains("expires at 2030"),
            "{out}"
        );
        // Down: the Ready message (the router's last error), not just
        // `Not operational`.
        let down = link(json!([
            {"type": "CredentialsValid", "status": "True", "reason": "Valid", "message": "valid"},
            {"type": "Operational", "status": "False", "message": "Not operational"},
            {"type": "Ready", "status": "False",
             "message": "Not operational: the other site requires link certificates that name a router"}]));
        let out = table(Kind::Link, &[down]);
        assert!(
            out.contains("Pending") && out.contains("requires link certificates"),
            "{out}"
        );
    }

    #[test]
    fn a_gateway_dataplane_lists_its_gateway_service_and_type() {
        let dp = |gateway: Value| {
            json!({"metadata": {"name": "edge-1", "mesh": "default", "resourceVersion": "1"},
                "spec": {"networking": {"address": "10.0.0.9", "gateway": gateway}}})
        };
        let out = table(
            Kind::Dataplane,
            &[
                dp(json!({"tags": {"kuma.io/service": "edge"}})),
                dp(json!({"type": "BUILTIN", "tags": {"kuma.io/service": "public"}})),
            ],
        );
        assert!(out.contains("edge (DELEGATED gateway)"), "{out}");
        assert!(out.contains("public (BUILTIN gateway)"), "{out}");
    }

    #[test]
    fn dataplane_columns_show_status_expiry_and_last_seen() {
        let now = humantime::parse_rfc3339("2026-11-30T12:00:00Z").unwrap();
        let online = json!({"online": true, "lastConnected": "2026-11-30T11:00:00Z",
            "mtls": {"certificateExpirationTime": "2026-11-30T23:30:00Z"}});
        assert_eq!(self::online(&online), "Online");
        assert_eq!(cert_expires(&online, now), "in 11h");
        assert_eq!(last_seen(&online, now), "now");
        let gone = json!({"online": false, "lastConnected": "2026-11-30T11:00:00Z",
            "lastDisconnected": "2026-11-30T11:57:00Z",
            "mtls": {"certificateExpirationTime": "2026-11-30T11:56:30Z"}});
        assert_eq!(self::online(&gone), "Offline");
        assert_eq!(cert_expires(&gone, now), "expired 3m ago");
        assert_eq!(last_seen(&gone, now), "3m ago");
        let never = json!({});
        assert_eq!(
            (
                self::online(&never),
                cert_expires(&never, now),
                last_seen(&never, now)
            ),
            ("-".to_string(), "-".to_string(), "-".to_string())
        );
    }
}
