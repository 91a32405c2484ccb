//! The Site's `network` as router status writes it: the router's view of
//! the network when it reports, else this site alone, with its own
//! services (the routing keys of its Listeners, MultiKeyListeners and
//! Connectors).

use std::collections::BTreeMap;

use meshlink_api::Resource;
use meshlink_api::spec::{NetworkLink, NetworkService, NetworkSite, Spec};
use meshlink_xds::certify::RouterReport;

/// Routing key → (Connector names, Listener names) of this site.
pub(super) type Local = BTreeMap<String, (Vec<String>, Vec<String>)>;

/// `listeners` holds Listeners and MultiKeyListeners (listed under each
/// of their keys, as their router advertises them).
pub(super) fn local_services(listeners: &[&[Resource]], connectors: &[Resource]) -> Local {
    let mut out = Local::new();
    for c in connectors {
        if let Spec::Connector(s) = &c.spec {
            out.entry(s.routing_key.clone())
                .or_default()
                .0
                .push(c.name().to_owned());
        }
    }
    for l in listeners.iter().copied().flatten() {
        let keys = match &l.spec {
            Spec::Listener(s) => vec![s.routing_key.clone()],
            Spec::MultiKeyListener(s) => s.routing_keys().into_iter().map(|(k, _)| k).collect(),
            _ => continue,
        };
        for key in keys {
            out.entry(key).or_default().1.push(l.name().to_owned());
        }
    }
    out
}

/// `network`: the router's view when it reports, else this site alone
/// (its links down, with the last peer each one saw, and its own
/// services).
pub(super) fn network(
    site: &Resource,
    report: Option<&RouterReport>,
    links: &[Resource],
    local: &Local,
) -> Vec<NetworkSite> {
    let site_id = site
        .status
        .details
        .as_site()
        .and_then(|s| s.site_id.clone());
    if let Some(report) = report {
        let mut out: Vec<NetworkSite> = report
            .network
            .iter()
            .map(|s| NetworkSite {
                name: s.name.clone(),
                id: non_empty(&s.id),
                namespace: non_empty(&s.namespace),
                platform: non_empty(&s.platform),
                version: non_empty(&s.version),
                links: s
                    .links
                    .iter()
                    .map(|l| NetworkLink {
                        name: l.name.clone(),
                        remote_site_name: non_empty(&l.remote_site_name),
                        remote_site_id: non_empty(&l.remote_site_id),
                        operational: Some(l.operational),
                    })
                    .collect(),
                services: s
                    .services
                    .iter()
                    .map(|v| NetworkService {
                        routing_key: v.routing_key.clone(),
                        connectors: v.connectors.clone(),
                        listeners: v.listeners.clone(),
                    })
                    .collect(),
            })
            .collect();
        if !out.is_empty() {
            out.sort_by(|a, b| a.name.cmp(&b.name));
            return out;
        }
    }
    vec![NetworkSite {
        name: site.name().to_owned(),
        id: site_id,
        namespace: None,
        platform: Some("meshlink".into()),
        version: None,
        links: links
            .iter()
            .map(|l| {
                // The last peer seen, kept while the link is down.
                let last = l.status.details.as_link();
                NetworkLink {
                    name: l.name().to_owned(),
                    remote_site_name: last.and_then(|s| s.remote_site_name.clone()),
                    remote_site_id: last.and_then(|s| s.remote_site_id.clone()),
                    operational: Some(false),
                }
            })
            .collect(),
        services: local
            .iter()
            .map(|(k, (c, l))| NetworkService {
                routing_key: k.clone(),
                connectors: c.clone(),
                listeners: l.clone(),
            })
            .collect(),
    }]
}

pub(super) fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}
