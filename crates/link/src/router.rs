//! The router handle: start it, apply configurations, open flows, watch
//! its status, shut it down.
//!
//! `apply` diffs by name: an added role, link, listener or connector (its
//! probe) starts its own task, a removed one is cancelled, a changed one
//! is restarted, and the others are not touched. Credentials are validated first and swapped
//! in place (new handshakes use them; connections up stay up); an invalid
//! item or credential is reported with its field path and its last good
//! version keeps running (I3).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::accept;
use crate::config::{
    ConfigError, ConnectorConfig, LinkConfig, ListenerConfig, MultiKeyListenerConfig, RoleConfig,
    RouterConfig,
};
use crate::core::{ConnectorTargets, Core, LocalTarget};
use crate::credentials::{CredentialPem, LinkCredential};
use crate::dial;
use crate::flows::{self, Flow, FlowError};
use crate::link_state::Routing;
use crate::listener;
use crate::metrics::LinkMetrics;
use crate::routes::RouteTable;
use crate::routing::{LsaError, NetworkView, RouterInfo, ServiceAdvert};
use crate::status::RouterStatus;

/// Who a router is.
#[derive(Clone, Debug)]
pub struct RouterOptions {
    /// This router's id, unique in the network (the site id).
    pub router_id: String,
    /// This router's site name.
    pub site: String,
    /// An edge router: links only to interior routers, never transit.
    pub edge: bool,
}

/// How often routers that stayed unreachable are forgotten.
const SWEEP_INTERVAL: Duration = Duration::from_secs(30);

/// A running router. Dropping it does not stop it; call [`Router::shutdown`].
pub struct Router {
    core: Arc<Core>,
    running: std::sync::Mutex<Running>,
}

#[derive(Default)]
struct Running {
    pems: BTreeMap<String, CredentialPem>,
    roles: HashMap<String, Item<RoleConfig>>,
    links: HashMap<String, Item<LinkConfig>>,
    listeners: HashMap<String, Item<ListenerConfig>>,
    multi_key_listeners: HashMap<String, Item<MultiKeyListenerConfig>>,
    /// Connectors, each with its probe task.
    connectors: HashMap<String, Item<ConnectorConfig>>,
    /// The mesh ingress task, by the `(host, port)` it binds.
    mesh_ingress: Option<Item<(String, u16)>>,
}

struct Item<C> {
    config: C,
    stop: CancellationToken,
}

// === impl Router ===

impl Router {
    /// A router with nothing configured; `metrics` may be registered in
    /// the process registry by the caller. Needs a tokio runtime. Fails
    /// only for an id or site name the routing protocol refuses (empty, or
    /// over 253 bytes).
    pub fn start(options: RouterOptions, metrics: Arc<LinkMetrics>) -> Result<Router, LsaError> {
        let me = RouterInfo::new(
            options.router_id.clone(),
            options.site.clone(),
            options.edge,
        );
        // Grows from one start to the next, so this life's LSAs win.
        let incarnation = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let routing = Routing::new(me, incarnation, metrics.clone())?;
        let core = Arc::new(Core::new(
            options.router_id,
            options.site,
            options.edge,
            metrics,
            routing,
        ));
        let sweeper = core.clone();
        core.tasks.spawn(async move {
            loop {
                tokio::select! {
                    _ = sweeper.shutdown.cancelled() => return,
                    _ = tokio::time::sleep(SWEEP_INTERVAL) => sweeper.routing.sweep(),
                }
            }
        });
        core.tasks.spawn(crate::expiry::watch_expiry(core.clone()));
        Ok(Router {
            core,
            running: std::sync::Mutex::new(Running::default()),
        })
    }

    /// This router's id.
    pub fn id(&self) -> &str {
        &self.core.id
    }

    /// Applies `config`, returning every error found (each with its field
    /// path). Valid parts are applied; invalid ones keep their last good
    /// version.
    pub fn apply(&self, config: &RouterConfig) -> Vec<ConfigError> {
        let mut errors = config.validate();
        let bad: HashSet<String> = errors
            .iter()
            .map(|e| e.path.split('.').next().unwrap_or_default().to_owned())
            .collect();
        let mut running = self.running.lock().expect("router lock poisoned");
        self.apply_credentials(&mut running, config, &mut errors);
        self.core.require_router_identity.store(
            config.require_router_identity,
            std::sync::atomic::Ordering::Relaxed,
        );

        let mut targets = ConnectorTargets::new();
        for (i, c) in config.connectors.iter().enumerate() {
            if !bad.contains(&format!("connectors[{i}]")) && !c.targets.is_empty() {
                let list = targets.entry(c.routing_key.clone()).or_default();
                list.extend(c.targets.iter().map(|t| LocalTarget {
                    connector: c.name.clone(),
                    host: t.host.clone(),
                    port: t.port,
                }));
            }
        }
        let old = self.core.connectors.send_replace(Arc::new(targets));
        // Failures of targets no longer configured go (after the swap, so
        // a connection that read the old targets cannot bring one back),
        // and added targets are probing until first tried.
        self.core.reconcile_target_status(&old);
        self.core.routing.set_services(services(config, &bad));

        let core = &self.core;
        reconcile(
            &mut running.roles,
            &config.roles,
            "roles",
            &bad,
            |c| &c.name,
            |cfg, stop| {
                let generation = core.next_id();
                core.tasks
                    .spawn(accept::run_role(core.clone(), cfg, generation, stop));
            },
            &core.shutdown,
        );
        reconcile(
            &mut running.links,
            &config.links,
            "links",
            &bad,
            |c| &c.name,
            |cfg, stop| {
                let generation = core.next_id();
                core.tasks
                    .spawn(dial::run_link(core.clone(), cfg, generation, stop));
            },
            &core.shutdown,
        );
        reconcile(
            &mut running.listeners,
            &config.listeners,
            "listeners",
            &bad,
            |c| &c.name,
            |cfg, stop| {
                let generation = core.next_id();
                core.tasks
                    .spawn(listener::run_listener(core.clone(), cfg, generation, stop));
            },
            &core.shutdown,
        );
        reconcile(
            &mut running.multi_key_listeners,
            &config.multi_key_listeners,
            "multiKeyListeners",
            &bad,
            |c| &c.name,
            |cfg, stop| {
                let generation = core.next_id();
                core.tasks.spawn(listener::run_multi_key_listener(
                    core.clone(),
                    cfg,
                    generation,
                    stop,
                ));
            },
            &core.shutdown,
        );
        reconcile(
            &mut running.connectors,
            &config.connectors,
            "connectors",
            &bad,
            |c| &c.name,
            |cfg, stop| {
                core.tasks
                    .spawn(crate::connector_health::probe(core.clone(), cfg, stop));
            },
            &core.shutdown,
        );
        let ingress_bad = errors.iter().any(|e| e.path.starts_with("meshIngress"));
        if !ingress_bad {
            self.apply_mesh_ingress(&mut running, config.mesh_ingress.as_ref());
        }
        errors
    }

    /// Swaps the mesh ingress's table and (re)starts its task when its
    /// address changed; stops it when no mesh needs it.
    fn apply_mesh_ingress(&self, running: &mut Running, cfg: Option<&crate::MeshIngressConfig>) {
        let core = &self.core;
        let table = cfg.map(crate::mesh_ingress::table).unwrap_or_default();
        core.mesh_ingress.send_replace(Arc::new(table));
        let want = cfg.map(|c| (c.host.clone(), c.port));
        if running.mesh_ingress.as_ref().map(|i| &i.config) == want.as_ref() {
            return;
        }
        if let Some(old) = running.mesh_ingress.take() {
            old.stop.cancel();
        }
        if let Some((host, port)) = want {
            let stop = core.shutdown.child_token();
            let generation = core.next_id();
            core.tasks.spawn(crate::mesh_ingress::run(
                core.clone(),
                host.clone(),
                port,
                generation,
                stop.clone(),
            ));
            running.mesh_ingress = Some(Item {
                config: (host, port),
                stop,
            });
        }
    }

    /// The router's status; changes whenever a link, role or listener does.
    pub fn status(&self) -> watch::Receiver<RouterStatus> {
        self.core.status.subscribe()
    }

    /// The current route table; changes when a neighbour or key does.
    pub fn routes(&self) -> watch::Receiver<Arc<RouteTable>> {
        self.core.routing.routes.subscribe()
    }

    /// Opens a flow to `routing_key`: picks a destination (balanced over
    /// the cheapest) and sends the flow to its next hop.
    pub async fn open_flow(&self, routing_key: &str) -> Result<Flow, FlowError> {
        flows::open(&self.core, routing_key, &[]).await
    }

    /// The network as this router sees it (sites, links, routing keys),
    /// for status.
    pub fn network_view(&self) -> NetworkView {
        self.core.routing.network_view()
    }

    /// Traffic by routing key at this router's listeners and mesh ingress
    /// since it started.
    pub fn traffic(&self) -> Vec<crate::KeyTraffic> {
        self.core.traffic.snapshot()
    }

    /// Bytes each link carried (both directions) since the router started.
    pub fn link_traffic(&self) -> Vec<crate::LinkTraffic> {
        self.core.link_traffic.snapshot()
    }

    /// Stops accepting, closes links and flows, and waits for every task
    /// up to `deadline`. Returns `false` if some were still running then.
    pub async fn shutdown(&self, deadline: Duration) -> bool {
        self.core.shutdown.cancel();
        self.core.tasks.close();
        tokio::time::timeout(deadline, self.core.tasks.wait())
            .await
            .is_ok()
    }

    fn apply_credentials(
        &self,
        running: &mut Running,
        config: &RouterConfig,
        errors: &mut Vec<ConfigError>,
    ) {
        let current = self.core.credentials.borrow().clone();
        let mut next = BTreeMap::new();
        let mut refused = BTreeMap::new();
        for (name, pem) in &config.credentials {
            if running.pems.get(name) == Some(pem)
                && let Some(c) = current.get(name)
            {
                next.insert(name.clone(), c.clone());
                continue;
            }
            match LinkCredential::from_pem(pem) {
                Ok(c) => {
                    next.insert(name.clone(), Arc::new(c));
                    running.pems.insert(name.clone(), pem.clone());
                }
                Err(e) => {
                    errors.push(ConfigError {
                        path: format!("credentials.{name}"),
                        reason: e.to_string(),
                    });
                    refused.insert(name.clone(), e.to_string());
                    if let Some(c) = current.get(name) {
                        next.insert(name.clone(), c.clone());
                    }
                }
            }
        }
        running.pems.retain(|k, _| next.contains_key(k));
        crate::expiry::publish(&self.core.metrics, &current, &next);
        self.core.credentials.send_if_modified(|m| {
            let same = m.len() == next.len()
                && m.iter()
                    .zip(next.iter())
                    .all(|((a, x), (b, y))| a == b && Arc::ptr_eq(x, y));
            if !same {
                *m = next;
            }
            !same
        });
        self.core.status.send_if_modified(|s| {
            std::mem::replace(&mut s.credential_errors, refused.clone()) != refused
        });
    }
}

/// The routing keys this router serves (valid connectors) and listens
/// for (valid listeners), for its LSA.
fn services(config: &RouterConfig, bad: &HashSet<String>) -> Vec<ServiceAdvert> {
    let mut by_key: BTreeMap<String, ServiceAdvert> = BTreeMap::new();
    for (i, c) in config.connectors.iter().enumerate() {
        if !bad.contains(&format!("connectors[{i}]")) && !c.targets.is_empty() {
            service(&mut by_key, &c.routing_key)
                .connectors
                .push(c.name.clone());
        }
    }
    for (i, l) in config.listeners.iter().enumerate() {
        if !bad.contains(&format!("listeners[{i}]")) {
            service(&mut by_key, &l.routing_key)
                .listeners
                .push(l.name.clone());
        }
    }
    for (i, l) in config.multi_key_listeners.iter().enumerate() {
        if !bad.contains(&format!("multiKeyListeners[{i}]")) {
            for key in l.strategy.keys() {
                service(&mut by_key, key).listeners.push(l.name.clone());
            }
        }
    }
    by_key.into_values().collect()
}

fn service<'a>(
    by_key: &'a mut BTreeMap<String, ServiceAdvert>,
    key: &str,
) -> &'a mut ServiceAdvert {
    by_key
        .entry(key.to_owned())
        .or_insert_with(|| ServiceAdvert {
            routing_key: key.to_owned(),
            connectors: Vec::new(),
            listeners: Vec::new(),
        })
}

/// Diffs `running` against `desired` by name: removes and restarts what
/// changed, starts what is new. Items at a path in `bad` keep their last
/// good version.
#[allow(clippy::too_many_arguments)]
fn reconcile<C: Clone + PartialEq>(
    running: &mut HashMap<String, Item<C>>,
    desired: &[C],
    field: &str,
    bad: &HashSet<String>,
    name_of: impl Fn(&C) -> &String,
    mut start: impl FnMut(C, CancellationToken),
    parent: &CancellationToken,
) {
    let mut wanted: HashMap<String, C> = HashMap::new();
    for (i, cfg) in desired.iter().enumerate() {
        let name = name_of(cfg);
        if bad.contains(&format!("{field}[{i}]")) {
            if let Some(item) = running.get(name) {
                wanted.insert(name.clone(), item.config.clone());
            }
            continue;
        }
        wanted.insert(name.clone(), cfg.clone());
    }
    running.retain(|name, item| {
        let keep = wanted.get(name) == Some(&item.config);
        if !keep {
            item.stop.cancel();
        }
        keep
    });
    for (name, cfg) in wanted {
        if running.contains_key(&name) {
            continue;
        }
        let stop = parent.child_token();
        start(cfg.clone(), stop.clone());
        running.insert(name, Item { config: cfg, stop });
    }
}
