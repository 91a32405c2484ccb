//! The network as this router sees it, for status: every reachable site
//! with its links and its routing keys. It maps one to one onto Skupper's
//! `SiteStatus.network[]` (`SiteRecord {id, name, links[{name,
//! remoteSiteId, remoteSiteName, operational}], services[{routingKey,
//! connectors[], listeners[]}]}`) and `sitesInNetwork`.
//!
//! Only reachable routers appear, and only links between two of them, so
//! a removed site or link leaves the view as soon as the routes change.
//! It never changes the database.

use std::collections::BTreeMap;

use super::lsdb::LinkStateDb;
use super::spf::{Graph, Route};
use super::wire::{LinkDirection, RouterId};

/// Every site this router can reach, itself first, then by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetworkView {
    /// The sites.
    pub sites: Vec<SiteView>,
}

/// One reachable site (Skupper's `SiteRecord`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteView {
    /// The site id.
    pub id: RouterId,
    /// The site name.
    pub name: String,
    /// Whether its router is an edge router.
    pub edge: bool,
    /// Its links to other reachable sites, by remote name.
    pub links: Vec<LinkView>,
    /// Its routing keys, by key.
    pub services: Vec<ServiceView>,
}

/// One link of a [`SiteView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkView {
    /// The link's name, as the site advertises it.
    pub name: String,
    /// The site at the other end.
    pub remote_site_id: RouterId,
    /// Its name.
    pub remote_site_name: String,
    /// Whether the site dialled it or accepted it.
    pub direction: LinkDirection,
    /// The link's cost (the larger of the two ends' costs).
    pub cost: u64,
    /// Whether the link carries traffic: both ends advertise it and it is
    /// not between two edge routers.
    pub operational: bool,
}

/// One routing key of a [`SiteView`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceView {
    /// The routing key.
    pub routing_key: String,
    /// The site's connectors for it.
    pub connectors: Vec<String>,
    /// The site's listeners for it.
    pub listeners: Vec<String>,
}

impl NetworkView {
    /// `sitesInNetwork`: how many sites are reachable, this one included.
    pub fn sites_in_network(&self) -> usize {
        self.sites.len()
    }

    /// The site with id `id`, if reachable.
    pub fn site(&self, id: &RouterId) -> Option<&SiteView> {
        self.sites.iter().find(|s| &s.id == id)
    }

    /// The view over the LSAs in `db` of this router and the routers it
    /// has `routes` to, with usable links from `graph`.
    pub(crate) fn new(db: &LinkStateDb, graph: &Graph, routes: &BTreeMap<RouterId, Route>) -> Self {
        let me = &db.own().origin.id;
        let reachable = |id: &RouterId| id == me || routes.contains_key(id);
        let mut sites: Vec<SiteView> = std::iter::once(me)
            .chain(routes.keys())
            .filter_map(|id| db.get(id))
            .map(|lsa| {
                let usable = graph.get(&lsa.origin.id);
                let mut links: Vec<LinkView> = lsa
                    .links
                    .iter()
                    .filter(|link| reachable(&link.peer))
                    .map(|link| {
                        let used = usable
                            .into_iter()
                            .flatten()
                            .find(|(peer, _)| peer == &link.peer);
                        LinkView {
                            name: link.name.clone(),
                            remote_site_id: link.peer.clone(),
                            remote_site_name: db
                                .get(&link.peer)
                                .map_or_else(|| link.peer_name.clone(), |p| p.origin.name.clone()),
                            direction: link.direction,
                            cost: used.map_or(u64::from(link.cost), |(_, cost)| *cost),
                            operational: used.is_some(),
                        }
                    })
                    .collect();
                links.sort_by(|a, b| {
                    (&a.remote_site_name, &a.name).cmp(&(&b.remote_site_name, &b.name))
                });
                let mut services: Vec<ServiceView> = lsa
                    .services
                    .iter()
                    .map(|s| ServiceView {
                        routing_key: s.routing_key.clone(),
                        connectors: s.connectors.clone(),
                        listeners: s.listeners.clone(),
                    })
                    .collect();
                services.sort_by(|a, b| a.routing_key.cmp(&b.routing_key));
                SiteView {
                    id: lsa.origin.id.clone(),
                    name: lsa.origin.name.clone(),
                    edge: lsa.origin.edge,
                    links,
                    services,
                }
            })
            .collect();
        if let Some((_, others)) = sites.split_first_mut() {
            others.sort_by(|a, b| (&a.name, &a.id).cmp(&(&b.name, &b.id)));
        }
        Self { sites }
    }
}
