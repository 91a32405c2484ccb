//! The pure router translator: `SiteView -> RouterConfig`.
//!
//! Owns how a site's Site, RouterAccesses, Links, Listeners,
//! MultiKeyListeners and Connectors
//! become `meshlink.v1` resources for its router, how their credentials
//! become SDS Secrets, and how a Connector `selector` resolves to mesh
//! Dataplanes.
//!
//! Invariant I2 is decided here: a RouterAccess or Link is emitted only if
//! every piece of the Secret it names (certificate, key, CA) exists, and
//! then that Secret is in the same snapshot; the engines push Secrets
//! before the router types ([`TYPE_ORDER`](crate::translate::TYPE_ORDER)).
//! What is withheld, and why, is part of the output so status can say it.
//!
//! It must never do I/O, read a clock, or depend on input order.

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source::Specifier};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, Secret, TlsCertificate, secret,
};
use meshlink_api::Resource;
use meshlink_api::spec::{SelectedPod, Spec};

use super::view::{SiteView, TlsMaterial};
use crate::certify as pb;
use crate::translate::Snapshot;

/// Name of the SDS Secret with a credential's certificate and key.
pub fn certificate_secret_name(secret: &str) -> String {
    format!("tls:{secret}")
}

/// Name of the SDS Secret with a credential's CA (`ca.crt`).
pub fn ca_secret_name(secret: &str) -> String {
    format!("ca:{secret}")
}

/// The router listener name of MultiKeyListener `name`: a resource name
/// has no `/`, so it never collides with a Listener's.
pub fn multi_key_listener_name(name: &str) -> String {
    format!("{MULTI_KEY_LISTENER_PREFIX}{name}")
}

/// The MultiKeyListener a router listener name stands for, if it is one
/// (the inverse of [`multi_key_listener_name`]).
pub fn multi_key_listener_of(router_listener: &str) -> Option<&str> {
    router_listener.strip_prefix(MULTI_KEY_LISTENER_PREFIX)
}

const MULTI_KEY_LISTENER_PREFIX: &str = "multikeylistener/";

/// A resource the translator did not send, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    /// `RouterAccess`, `Link` or `MeshIngress`.
    pub kind: &'static str,
    /// The resource's name.
    pub name: String,
    /// What is missing and how to fix it.
    pub reason: String,
}

/// The router's configuration and what status needs to know about it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RouterConfig {
    /// The site's name (`None` without a Site).
    pub site: Option<String>,
    /// Every resource of the router.
    pub snapshot: Snapshot,
    /// Resources not sent (a Secret missing or incomplete), by name order.
    pub withheld: Vec<Withheld>,
    /// Connector name → the Dataplanes its selector picked.
    pub selected: BTreeMap<String, Vec<SelectedPod>>,
}

/// Translates a site's view into its router's configuration.
pub fn translate_router(view: &SiteView) -> RouterConfig {
    let mut out = RouterConfig::default();
    let edge = view
        .site
        .as_ref()
        .and_then(|s| match &s.spec {
            Spec::Site(spec) => Some(spec.is_edge()),
            _ => None,
        })
        .unwrap_or(false);
    if let Some(site) = &view.site {
        let id = site
            .status
            .details
            .as_site()
            .and_then(|s| s.site_id.clone())
            .unwrap_or_default();
        out.site = Some(site.name().to_owned());
        out.snapshot.insert(
            site.name().to_owned(),
            &pb::Site {
                id,
                name: site.name().to_owned(),
                edge,
                require_router_identity: meshlink_api::spec::requires_router_identity(
                    site.labels(),
                ),
            },
        );
    }
    for (name, ra) in &view.router_accesses {
        let Spec::RouterAccess(spec) = &ra.spec else {
            continue;
        };
        if edge {
            out.withheld.push(Withheld {
                kind: "RouterAccess",
                name: name.clone(),
                reason: "this is an edge site, which accepts no links; remove the RouterAccess \
                         or make the Site interior"
                    .into(),
            });
            continue;
        }
        let secret = spec.tls_credentials(name);
        if let Err(reason) = credentials(&mut out.snapshot, view, secret) {
            out.withheld.push(Withheld {
                kind: "RouterAccess",
                name: name.clone(),
                reason,
            });
            continue;
        }
        let roles = spec
            .roles
            .iter()
            .map(|r| pb::RouterRole {
                name: r.name.to_string(),
                port: u32::from(r.port.get()),
                bind_host: spec.bind_host.clone().unwrap_or_default(),
            })
            .collect();
        out.snapshot.insert(
            name.clone(),
            &pb::RouterAccess {
                name: name.clone(),
                roles,
                tls_credentials: secret.to_owned(),
            },
        );
    }
    for (name, link) in &view.links {
        let Spec::Link(spec) = &link.spec else {
            continue;
        };
        let Some(secret) = spec.tls_credentials.as_deref() else {
            out.withheld.push(Withheld {
                kind: "Link",
                name: name.clone(),
                reason: "spec.tlsCredentials is not set; a link needs the client Secret that \
                         redeeming an AccessToken (or `meshlink link generate`) provides"
                    .into(),
            });
            continue;
        };
        if let Err(reason) = credentials(&mut out.snapshot, view, secret) {
            out.withheld.push(Withheld {
                kind: "Link",
                name: name.clone(),
                reason,
            });
            continue;
        }
        let endpoints = spec
            .endpoints
            .iter()
            .map(|e| pb::LinkEndpoint {
                name: e.name.clone(),
                host: e.host.clone(),
                port: u32::from(e.port.get()),
                group: e.group.clone().unwrap_or_default(),
            })
            .collect();
        out.snapshot.insert(
            name.clone(),
            &pb::Link {
                name: name.clone(),
                endpoints,
                cost: spec.cost(),
                tls_credentials: secret.to_owned(),
            },
        );
    }
    for (name, l) in &view.listeners {
        let Spec::Listener(spec) = &l.spec else {
            continue;
        };
        out.snapshot.insert(
            name.clone(),
            &pb::Listener {
                name: name.clone(),
                routing_key: spec.routing_key.clone(),
                host: spec.host.clone(),
                port: u32::from(spec.port.get()),
                ..Default::default()
            },
        );
    }
    for (name, l) in &view.multi_key_listeners {
        let Spec::MultiKeyListener(spec) = &l.spec else {
            continue;
        };
        let name = multi_key_listener_name(name);
        out.snapshot.insert(
            name.clone(),
            &pb::Listener {
                name,
                routing_key: String::new(),
                host: spec.host.clone(),
                port: u32::from(spec.port.get()),
                keys: spec
                    .routing_keys()
                    .into_iter()
                    .map(|(routing_key, weight)| pb::RoutingKeyWeight {
                        routing_key,
                        weight,
                    })
                    .collect(),
                weighted: spec.is_weighted(),
            },
        );
    }
    if let Some(site) = out.site.clone() {
        super::mesh_ingress::translate(view, &site, &mut out.snapshot, &mut out.withheld);
    }
    for (name, c) in &view.connectors {
        let Spec::Connector(spec) = &c.spec else {
            continue;
        };
        let targets = match &spec.host {
            Some(host) => vec![host_port(host, spec.port.get())],
            None => {
                let pods = select(view, c);
                let targets = pods
                    .iter()
                    .map(|p| host_port(&p.ip, spec.port.get()))
                    .collect();
                out.selected.insert(name.clone(), pods);
                targets
            }
        };
        out.snapshot.insert(
            name.clone(),
            &pb::Connector {
                name: name.clone(),
                routing_key: spec.routing_key.clone(),
                targets,
            },
        );
    }
    out
}

/// Adds the SDS Secrets of credential `secret`, or says what is missing.
fn credentials(snapshot: &mut Snapshot, view: &SiteView, secret: &str) -> Result<(), String> {
    let Some((_, m)) = view.secrets.get(secret) else {
        return Err(format!(
            "Secret {secret:?} not found; it is sent once it exists (apply it, redeem the \
             AccessToken that brings it, or let the site CA generate it)"
        ));
    };
    let missing: Vec<&str> = [
        ("tls.crt", &m.cert_chain_pem),
        ("tls.key", &m.private_key_pem),
        ("ca.crt", &m.ca_pem),
    ]
    .into_iter()
    .filter(|(_, v)| v.trim().is_empty())
    .map(|(k, _)| k)
    .collect();
    if !missing.is_empty() {
        return Err(format!(
            "Secret {secret:?} has no {}; a router credential needs tls.crt, tls.key and ca.crt",
            missing.join(", ")
        ));
    }
    let (cert, ca) = sds_pair(secret, m);
    snapshot.insert(cert.name.clone(), &cert);
    snapshot.insert(ca.name.clone(), &ca);
    Ok(())
}

fn inline(pem: &str) -> Option<DataSource> {
    Some(DataSource {
        specifier: Some(Specifier::InlineString(pem.to_owned())),
        ..Default::default()
    })
}

/// The two standard SDS Secrets of a credential: certificate and key, and
/// the validation context with its CA.
pub(super) fn sds_pair(secret: &str, m: &TlsMaterial) -> (Secret, Secret) {
    let cert = Secret {
        name: certificate_secret_name(secret),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: inline(&m.cert_chain_pem),
            private_key: inline(&m.private_key_pem),
            ..Default::default()
        })),
    };
    let ca = Secret {
        name: ca_secret_name(secret),
        r#type: Some(secret::Type::ValidationContext(
            CertificateValidationContext {
                trusted_ca: inline(&m.ca_pem),
                ..Default::default()
            },
        )),
    };
    (cert, ca)
}

fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The Dataplanes a Connector's selector picks, as Skupper picks pods:
/// those with an inbound whose tags match, online unless the Connector
/// includes not-ready ones. Each is listed once, with the address of its
/// first matching inbound (the inbound's `address`, else the Dataplane's);
/// flows go to that address at the Connector's `port` (Skupper's pod IP and
/// port).
/// Sorted by mesh, name.
fn select(view: &SiteView, connector: &Resource) -> Vec<SelectedPod> {
    let Some(spec) = connector.spec.as_connector() else {
        return Vec::new();
    };
    let Some(Ok(selector)) = spec.parsed_selector() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for ((mesh, name), dp) in &view.dataplanes {
        if !dp.online && !spec.includes_not_ready() {
            continue;
        }
        if let Some(inbound) = dp.inbounds.iter().find(|i| selector.matches(&i.tags)) {
            out.push(SelectedPod {
                name: format!("{mesh}/{name}"),
                ip: inbound.address.clone(),
            });
        }
    }
    out
}
