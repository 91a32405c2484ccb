//! The task that owns the link router: it starts it once the Site (with
//! its id) has arrived, applies every accepted configuration to it, and
//! restarts it if the site's identity changes.
//!
//! Owns the [`RouterState`] the admin endpoint and the status reporter
//! read. It never exits for lack of configuration or credentials (I2): it
//! records what is missing and waits.

use std::sync::Arc;
use std::time::Duration;

use meshlink_link::{LinkMetrics, Router, RouterOptions};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::resources::{RouterResources, SiteIdentity};

/// What the router is doing, for `/ready`, `/config_dump` and reports.
#[derive(Clone, Default)]
pub struct RouterState {
    /// The running router, once the Site has arrived.
    pub router: Option<Arc<Router>>,
    /// The site it serves.
    pub site: Option<SiteIdentity>,
    /// Why there is no router yet.
    pub waiting: Option<String>,
    /// Items of the latest configuration the router refused, with their
    /// field paths (their last good version keeps running).
    pub config_errors: Vec<String>,
}

/// Runs until `cancel` fires, then shuts the router down within `drain`.
pub async fn drive(
    mut resources: watch::Receiver<Arc<RouterResources>>,
    bind_host: String,
    mesh_port: u16,
    metrics: Arc<LinkMetrics>,
    state: watch::Sender<RouterState>,
    cancel: CancellationToken,
    drain: Duration,
) {
    let mut running: Option<(SiteIdentity, Arc<Router>)> = None;
    loop {
        let current = resources.borrow_and_update().clone();
        match current.site() {
            Err(why) => {
                state.send_modify(|s| s.waiting = Some(why.to_owned()));
            }
            Ok(site) => {
                if running.as_ref().is_some_and(|(s, _)| *s != site) {
                    let (old, router) = running.take().expect("checked");
                    tracing::warn!(old = %old.id, new = %site.id, "the site's identity changed; restarting the router");
                    router.shutdown(drain).await;
                }
                if running.is_none() {
                    match start(&site, &metrics) {
                        Ok(router) => running = Some((site.clone(), router)),
                        Err(why) => {
                            state.send_modify(|s| s.waiting = Some(why));
                        }
                    }
                }
                if let Some((site, router)) = &running {
                    let config = current.link_config(&bind_host, mesh_port, site.edge);
                    let errors: Vec<String> = router
                        .apply(&config)
                        .iter()
                        .map(ToString::to_string)
                        .collect();
                    if !errors.is_empty() {
                        tracing::warn!(errors = %errors.join("; "), "router configuration partly refused; keeping the last good version of those items");
                    }
                    state.send_replace(RouterState {
                        router: Some(router.clone()),
                        site: Some(site.clone()),
                        waiting: None,
                        config_errors: errors,
                    });
                }
            }
        }
        tokio::select! {
            () = cancel.cancelled() => break,
            changed = resources.changed() => if changed.is_err() { break },
        }
    }
    if let Some((_, router)) = running
        && !router.shutdown(drain).await
    {
        tracing::warn!("router tasks still running at the drain deadline");
    }
}

fn start(site: &SiteIdentity, metrics: &Arc<LinkMetrics>) -> Result<Arc<Router>, String> {
    let router = Router::start(
        RouterOptions {
            router_id: site.id.clone(),
            site: site.name.clone(),
            edge: site.edge,
        },
        metrics.clone(),
    )
    .map_err(|e| format!("the Site cannot be served: {e}"))?;
    tracing::info!(site = %site.name, id = %site.id, edge = site.edge, "router started");
    Ok(Arc::new(router))
}
