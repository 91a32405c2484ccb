//! A site's resources for the router translator and reconciler tests:
//! the seed's Site and RouterAccess, a Link, a Listener, Connectors by
//! host and by selector, and mesh Dataplanes online or not.

#![allow(dead_code, unreachable_pub)]

use meshlink_api::Resource;
use meshlink_xds::router::{SiteView, TlsMaterial};
use serde_json::{Value, json};

/// The site's name.
pub const SITE: &str = "dmz-a";

fn resource(v: Value) -> Resource {
    Resource::from_json(v.clone()).unwrap_or_else(|e| panic!("fixture {v} is invalid: {e:?}"))
}

fn with_revision(mut r: Resource, revision: u64) -> Resource {
    r.set_resource_version(Some(revision.to_string()));
    r
}

/// The Site, interior or edge, with a site id in its status.
pub fn site(edge: bool) -> Resource {
    let mut r = resource(json!({
        "apiVersion": "meshlink.dev/v1alpha1", "kind": "Site",
        "metadata": {"name": SITE}, "spec": {"edge": edge},
        "status": {"siteId": "5e0c-site-a"},
    }));
    if r.status.details.as_site().is_none() {
        panic!("fixture site status did not parse");
    }
    r = with_revision(r, 1);
    r
}

/// The seed's RouterAccess (inter-router on 55671, Secret `skupper-site-server`).
pub fn router_access() -> Resource {
    with_revision(
        resource(json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "RouterAccess",
            "metadata": {"name": "dmz-a-peer"},
            "spec": {"generateTlsCredentials": true, "issuer": "skupper-site-ca",
                     "roles": [{"name": "inter-router", "port": 55671}],
                     "tlsCredentials": "skupper-site-server"},
        })),
        2,
    )
}

/// A Link to dmz-b with client Secret `secret`, cost 3.
pub fn link(name: &str, secret: &str, revision: u64) -> Resource {
    with_revision(
        resource(json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "Link",
            "metadata": {"name": name},
            "spec": {"endpoints": [{"name": "inter-router", "host": "127.0.0.3", "port": 55671},
                                   {"name": "edge", "host": "127.0.0.3", "port": 45671}],
                     "tlsCredentials": secret, "cost": 3},
        })),
        revision,
    )
}

/// A Listener for `key` on 127.0.0.2:6379.
pub fn listener(name: &str, key: &str) -> Resource {
    with_revision(
        resource(json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "Listener",
            "metadata": {"name": name},
            "spec": {"routingKey": key, "host": "127.0.0.2", "port": 6379},
        })),
        4,
    )
}

/// A Connector for `key` to `host:port`.
pub fn connector(name: &str, key: &str, host: &str, port: u16) -> Resource {
    with_revision(
        resource(json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": name},
            "spec": {"routingKey": key, "host": host, "port": port},
        })),
        5,
    )
}

/// A Connector for `key` selecting Dataplanes by `selector` (no host).
pub fn selector_connector(name: &str, key: &str, selector: &str, not_ready: bool) -> Resource {
    with_revision(
        resource(json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "Connector",
            "metadata": {"name": name},
            "spec": {"routingKey": key, "port": 8080, "selector": selector,
                     "includeNotReady": not_ready},
        })),
        6,
    )
}

/// A Dataplane `name` at `address` serving `backend` on 9000, tagged
/// `app: <app>`, online or not.
pub fn dataplane(name: &str, address: &str, app: &str, online: bool, revision: u64) -> Resource {
    with_revision(
        resource(json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "Dataplane",
            "metadata": {"name": name, "mesh": "default"},
            "spec": {"networking": {"address": address,
                "inbound": [{"port": 9000, "servicePort": 19000,
                             "tags": {"kuma.io/service": "backend", "app": app}}]}},
            "status": {"online": online},
        })),
        revision,
    )
}

/// Complete TLS material (certificate, key, CA) tagged with `tag`.
pub fn material(tag: &str) -> TlsMaterial {
    TlsMaterial {
        cert_chain_pem: format!("<{tag} certificate PEM>"),
        private_key_pem: format!("<{tag} key PEM>"),
        ca_pem: format!("<{tag} CA PEM>"),
    }
}

/// The seed's site with everything: RouterAccess and its Secret, a Link
/// and its Secret, a Listener, a Connector by host, one by selector, and
/// three Dataplanes (two `app: backend`, one of them offline).
pub fn full_view() -> SiteView {
    let mut view = SiteView::default();
    view.upsert(site(false));
    view.upsert(router_access());
    view.upsert(link("to-dmz-b", "dmz-b-client", 3));
    view.upsert(listener("redis", "redis"));
    view.upsert(connector("pg", "postgres", "db.internal", 5432));
    view.upsert(selector_connector(
        "backend",
        "backend",
        "app=backend",
        false,
    ));
    view.upsert(dataplane("backend-1", "10.0.0.11", "backend", true, 7));
    view.upsert(dataplane("backend-2", "10.0.0.12", "backend", false, 8));
    view.upsert(dataplane("web-1", "10.0.0.21", "web", true, 9));
    view.upsert_secret("skupper-site-server", material("server"), 10);
    view.upsert_secret("dmz-b-client", material("client"), 11);
    view
}
