//! Site routers over ADS: the pure router translator, its input view, and
//! the reconciler that publishes a router's configuration to its stream
//! owner.
//!
//! A router authenticates with its site's router token; its proxy key is
//! [`ProxyKey::router`](crate::owner::ProxyKey::router) and its `node.id`
//! `site.<site name>`. Its resources use the `meshlink.v1` type URLs
//! ([`SITE_TYPE`](crate::translate::SITE_TYPE),
//! [`ROUTER_ACCESS_TYPE`](crate::translate::ROUTER_ACCESS_TYPE),
//! [`LINK_TYPE`](crate::translate::LINK_TYPE),
//! [`ROUTER_LISTENER_TYPE`](crate::translate::ROUTER_LISTENER_TYPE),
//! [`CONNECTOR_TYPE`](crate::translate::CONNECTOR_TYPE),
//! [`MESH_INGRESS_TYPE`](crate::translate::MESH_INGRESS_TYPE)) on the same stream
//! as the standard SDS Secrets holding its credentials (I2: Secrets first).

mod hub;
mod identities;
mod mesh_ingress;
mod tombstones;
mod translate;
mod view;

pub use hub::{DEBOUNCE, RouterHub, SiteSource};
pub use mesh_ingress::{IngressNeed, MeshRouterIdentity, ingress_needs};
pub use translate::{
    RouterConfig, Withheld, ca_secret_name, certificate_secret_name, multi_key_listener_name,
    multi_key_listener_of, translate_router,
};
pub use view::{SelectableDataplane, SelectableInbound, SiteChange, SiteView, TlsMaterial};
