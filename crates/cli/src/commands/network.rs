//! `meshlink network status`: the network as this site's router sees it,
//! from the Site's status (`network`, written from the router's reports)
//! and this site's Links. Skupper v2 dropped `skupper network status`;
//! this brings its view back: sites, links with state and cost, and the
//! services by routing key with the sites that listen and connect.

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use super::table::{aligned, text as s};
use crate::client::ApiClient;
use crate::failure::Failure;

async fn items(client: &ApiClient, plural: &str) -> Result<Vec<Value>, Failure> {
    let list = client
        .call(
            Method::GET,
            &format!("/api/v1/{plural}"),
            &[],
            None,
            Duration::from_secs(30),
        )
        .await
        .map_err(|e| e.into_failure())?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

/// `network status [-o json]`.
pub(crate) async fn status(client: &ApiClient, output: Option<&str>) -> Result<(), Failure> {
    let sites = items(client, "sites").await?;
    let Some(site) = sites.first() else {
        return Err(Failure::BadInput(
            "this control plane has no Site; apply one (e.g. `kind: Site` with `linkAccess: \
             default`) and start its router"
                .into(),
        ));
    };
    let links = items(client, "links").await?;
    let mut services = Vec::new();
    for plural in ["listeners", "multikeylisteners", "connectors"] {
        services.extend(items(client, plural).await?);
    }
    let not_ready = not_ready(&services);
    match output {
        Some("json") => {
            let out = serde_json::json!({"site": site, "links": links, "notReady": not_ready});
            println!(
                "{}",
                serde_json::to_string_pretty(&out).expect("JSON prints")
            );
        }
        Some(other) => {
            return Err(Failure::BadInput(format!(
                "-o {other:?}: network status prints a table, or JSON with -o json"
            )));
        }
        None => print!("{}", render(site, &links, &not_ready)),
    }
    Ok(())
}

/// This site's Listeners, MultiKeyListeners and Connectors that are not
/// Ready for a reason of their own (a port the router cannot bind, a
/// connector target it cannot connect to or none at all), as
/// `{kind, name, reason, message}`. A router that is not reporting is
/// the Site's message, not repeated for each.
fn not_ready(services: &[Value]) -> Vec<Value> {
    services
        .iter()
        .filter_map(|r| {
            let kind = s(&r["kind"]);
            let ready = r["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Ready" && c["status"] == "False")?;
            let reason = s(&ready["reason"]);
            let own = match kind.as_str() {
                "Connector" => reason != "RouterNotConnected",
                _ => reason == "BindFailed",
            };
            own.then(|| {
                serde_json::json!({"kind": kind, "name": r["metadata"]["name"], "reason": reason,
                    "message": ready["message"]})
            })
        })
        .collect()
}

/// The tables: what is not Ready here (if anything), sites, this site's
/// links, services.
fn render(site: &Value, links: &[Value], not_ready: &[Value]) -> String {
    let status = &site["status"];
    let network = status["network"].as_array().cloned().unwrap_or_default();
    let state = if s(&status["status"]).is_empty() {
        "Pending".to_owned()
    } else {
        s(&status["status"])
    };
    let mut out = format!(
        "Site {} ({}): {state}, {} site(s) in the network\n",
        s(&site["metadata"]["name"]),
        s(&status["siteId"]),
        network.len().max(1),
    );
    // Not ready: say why (e.g. this site's router is not reporting).
    let why = s(&status["message"]);
    if state != "Ready" && !why.is_empty() {
        out.push_str(&format!("  {why}\n"));
    }
    if !not_ready.is_empty() {
        out.push_str("\nNOT READY (this site)\n");
        let mut rows = vec![
            ["KIND", "NAME", "REASON", "MESSAGE"]
                .map(String::from)
                .to_vec(),
        ];
        for r in not_ready {
            rows.push(
                ["kind", "name", "reason", "message"]
                    .map(|k| s(&r[k]))
                    .to_vec(),
            );
        }
        out.push_str(&aligned(&rows));
    }
    out.push_str("\nSITES\n");
    let mut rows = vec![vec!["NAME".into(), "ID".into(), "LINKS".into()]];
    let mut services: BTreeMap<String, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for r in &network {
        let name = s(&r["name"]);
        let site_links: Vec<String> = r["links"]
            .as_array()
            .map(|ls| {
                ls.iter()
                    .map(|l| {
                        let state = if l["operational"] == true {
                            "up"
                        } else {
                            "down"
                        };
                        // A link that never reached its peer has no peer
                        // name yet: name the link instead.
                        let peer = s(&l["remoteSiteName"]);
                        if peer.is_empty() {
                            format!("link {} ({state})", s(&l["name"]))
                        } else {
                            format!("{peer} ({state})")
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        rows.push(vec![name.clone(), s(&r["id"]), site_links.join(", ")]);
        for svc in r["services"].as_array().into_iter().flatten() {
            let entry = services.entry(s(&svc["routingKey"])).or_default();
            for l in svc["listeners"].as_array().into_iter().flatten() {
                entry.0.push(format!("{name}/{}", s(l)));
            }
            for c in svc["connectors"].as_array().into_iter().flatten() {
                entry.1.push(format!("{name}/{}", s(c)));
            }
        }
    }
    out.push_str(&aligned(&rows));
    out.push_str("\nLINKS (dialled by this site)\n");
    let mut rows = vec![
        ["NAME", "STATUS", "REMOTE SITE", "COST", "MESSAGE"]
            .map(String::from)
            .to_vec(),
    ];
    for l in links {
        let conditions = l["status"]["conditions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let operational = conditions.iter().find(|c| c["type"] == "Operational");
        // The control plane's word (`status.status`: Operational or Down),
        // the same one `get links` and the console show.
        let (state, message) = match (l["status"]["status"].as_str(), operational) {
            (Some("Operational"), _) => ("Operational".to_owned(), String::new()),
            (Some(word), _) => (word.to_owned(), s(&l["status"]["message"])),
            (None, Some(c)) if c["status"] == "True" => ("Operational".to_owned(), String::new()),
            (None, Some(c)) => ("Down".to_owned(), s(&c["message"])),
            (None, None) => ("Pending".to_owned(), String::new()),
        };
        let cost = s(&l["spec"]["cost"]);
        rows.push(vec![
            s(&l["metadata"]["name"]),
            state,
            s(&l["status"]["remoteSiteName"]),
            if cost.is_empty() { "1".into() } else { cost },
            message,
        ]);
    }
    out.push_str(&aligned(&rows));
    if let Some(incoming) = incoming_links(site) {
        out.push_str("\nLINKS (dialled by other sites)\n");
        out.push_str(&incoming);
    }
    out.push_str("\nSERVICES\n");
    let mut rows = vec![
        ["ROUTING KEY", "LISTENERS", "CONNECTORS"]
            .map(String::from)
            .to_vec(),
    ];
    for (key, (listeners, connectors)) in services {
        rows.push(vec![key, listeners.join(", "), connectors.join(", ")]);
    }
    out.push_str(&aligned(&rows));
    out
}

/// The Site's `incomingLinks` as a table (`REMOTE SITE`, `STATUS`,
/// `NAME`, `MESSAGE`), or `None` when no site ever dialled this one.
pub(crate) fn incoming_links(site: &Value) -> Option<String> {
    let links = site["status"]["incomingLinks"].as_array()?;
    if links.is_empty() {
        return None;
    }
    let mut rows = vec![
        ["REMOTE SITE", "STATUS", "NAME", "MESSAGE"]
            .map(String::from)
            .to_vec(),
    ];
    for l in links {
        rows.push(vec![
            s(&l["remoteSiteName"]),
            s(&l["status"]),
            s(&l["name"]),
            s(&l["message"]),
        ]);
    }
    Some(aligned(&rows))
}

/// `get links` (a table of every Link): the links other sites dialled
/// into this one, after the Links this site dials.
pub(crate) async fn print_incoming(client: &ApiClient) -> Result<(), Failure> {
    let sites = items(client, "sites").await?;
    if let Some(table) = sites.first().and_then(incoming_links) {
        print!("\nINCOMING (dialled by other sites)\n{table}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sites_links_and_services_are_listed() {
        let site = json!({"metadata": {"name": "east"}, "status": {
            "siteId": "e1", "status": "Ready", "network": [
                {"id": "e1", "name": "east", "links": [{"name": "to-west", "remoteSiteName": "west", "operational": true}],
                 "services": [{"routingKey": "db", "listeners": ["db"], "connectors": []}]},
                {"id": "w1", "name": "west", "links": [],
                 "services": [{"routingKey": "db", "listeners": [], "connectors": ["pg"]}]}]}});
        let links = vec![json!({"metadata": {"name": "to-west"}, "spec": {"cost": 2},
            "status": {"remoteSiteName": "west", "conditions": [{"type": "Operational", "status": "True"}]}})];
        let out = render(&site, &links, &[]);
        assert!(
            out.starts_with("Site east (e1): Ready, 2 site(s) in the network"),
            "{out}"
        );
        assert!(out.contains("west (up)"), "{out}");
        assert!(
            out.contains("to-west   Operational   west          2"),
            "{out}"
        );
        assert!(out.contains("db            east/db     west/pg"), "{out}");
        assert!(!out.contains("dialled by other sites"), "{out}");
    }

    #[test]
    fn a_connector_the_router_cannot_reach_is_flagged() {
        let ready = |reason: &str| {
            json!({"conditions": [{"type": "Ready", "status": "False", "reason": reason,
                "message": format!("{reason} here")}]})
        };
        let services = vec![
            json!({"kind": "Connector", "metadata": {"name": "db"}, "status": ready("TargetUnreachable")}),
            // The router is down: the Site says so, once.
            json!({"kind": "Connector", "metadata": {"name": "web"}, "status": ready("RouterNotConnected")}),
            json!({"kind": "Listener", "metadata": {"name": "l"}, "status": ready("RouterNotConnected")}),
            json!({"kind": "MultiKeyListener", "metadata": {"name": "m"}, "status": ready("BindFailed")}),
        ];
        let flagged = not_ready(&services);
        let names: Vec<&str> = flagged.iter().filter_map(|f| f["name"].as_str()).collect();
        assert_eq!(names, ["db", "m"]);
        let site = json!({"metadata": {"name": "east"}, "status": {"status": "Ready"}});
        let out = render(&site, &[], &flagged);
        assert!(out.contains("NOT READY (this site)"), "{out}");
        assert!(
            out.contains("Connector          db     TargetUnreachable   TargetUnreachable here"),
            "{out}"
        );
    }

    #[test]
    fn incoming_links_are_listed_with_their_state() {
        let site = json!({"metadata": {"name": "east"}, "status": {"incomingLinks": [
            {"remoteSiteName": "west", "name": "inter-router/w#1", "status": "Down",
             "message": "no link from west since T"}]}});
        let out = render(&site, &[], &[]);
        assert!(out.contains("LINKS (dialled by other sites)"), "{out}");
        assert!(
            out.contains("west          Down     inter-router/w#1   no link from west since T"),
            "{out}"
        );
    }
}
