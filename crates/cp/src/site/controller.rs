//! The site controller: one task per control plane that keeps the Site,
//! its RouterAccess credentials, AccessGrant status and AccessToken
//! redemptions current.
//!
//! It follows the store's change feed for Site, RouterAccess, AccessGrant,
//! AccessToken and Secret and reconciles all of them on a change, at the
//! next renewal or expiry time, and every [`RESYNC`]. Each write is a
//! compare-and-swap or a create-if-absent, so several control planes on one
//! PostgreSQL converge: one site CA per issuer (never regenerated, I5), one
//! issued Secret per renewal, one redemption per token. Redemptions run on
//! the controller's own `JoinSet`, which ends with it; so do the renewals of
//! redeemed Link client credentials (`renewal`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt as _;
use meshlink_api::spec::{
    EDGE_PORT, INTER_ROUTER_PORT, Port, RouterAccessSpec, RouterRole, RouterRoleName, SiteSpec,
    Spec,
};
use meshlink_api::{Kind, Metadata, Resource};
use meshlink_runtime::Shutdown;
use tokio::task::JoinSet;

use super::ca_store;
use super::grant_status::next_status;
use super::renewal::Renewals;
use super::router_access::{SecretPlan, hosts, plan};
use super::site_status::{SiteFacts, next_router_access_status, next_site_status};
use super::tokens;
use crate::grants::response::{endpoints_of, the_site};
use crate::resources::{ResourceError, ResourceService};

/// A full reconcile at least this often, whatever the feed says.
pub const RESYNC: Duration = Duration::from_secs(30);
/// The RouterAccess created for a Site with `linkAccess: default`.
pub const DEFAULT_ROUTER_ACCESS: &str = "skupper-router";
/// Its credentials, as Skupper names them.
pub const DEFAULT_SERVER_SECRET: &str = "skupper-site-server";
/// Longest wait between retries of an unreachable grant server.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// What the controller needs to know about this control plane.
#[derive(Clone)]
pub struct SiteContext {
    /// The resources (and the store under them).
    pub resources: ResourceService,
    /// The host other sites dial (`--advertised-host`).
    pub advertised_host: String,
    /// `https://<advertised host>:<grant port>`.
    pub grant_base_url: String,
    /// The grant server CA's PEM: every grant's `ca`.
    pub grant_ca_pem: String,
}

/// The controller task.
pub struct SiteController {
    ctx: Arc<SiteContext>,
    redemptions: JoinSet<(String, bool)>,
    in_flight: HashSet<String>,
    retry: HashMap<String, (u32, SystemTime)>,
    renewals: Renewals,
}

fn is_watched(kind: &str) -> bool {
    matches!(
        kind.parse::<Kind>(),
        Ok(Kind::Site | Kind::RouterAccess | Kind::AccessGrant | Kind::AccessToken | Kind::Secret)
    )
}

/// Keeps the earliest of several wake-up times.
#[derive(Default)]
struct Wake(Option<SystemTime>);

impl Wake {
    fn at(&mut self, t: SystemTime) {
        self.0 = Some(self.0.map_or(t, |w| w.min(t)));
    }
}

// === impl SiteController ===

impl SiteController {
    /// A controller for `ctx`.
    pub fn new(ctx: SiteContext) -> Self {
        SiteController {
            ctx: Arc::new(ctx),
            redemptions: JoinSet::new(),
            in_flight: HashSet::new(),
            retry: HashMap::new(),
            renewals: Renewals::default(),
        }
    }

    /// Runs until `shutdown`, following the feed from `start_revision`.
    pub async fn run(mut self, start_revision: u64, shutdown: Shutdown) {
        let store = self.ctx.resources.store().clone();
        let mut after = start_revision;
        let mut feed = store.watch(after);
        let mut dirty = true;
        let mut wake = None;
        loop {
            if dirty {
                wake = self.reconcile().await;
            }
            let now = SystemTime::now();
            let wait = wake
                .map_or(RESYNC, |t: SystemTime| {
                    t.duration_since(now).unwrap_or_default()
                })
                .min(RESYNC);
            tokio::select! {
                () = shutdown.wait() => break,
                change = feed.next() => match change {
                    Some(Ok(c)) => {
                        after = c.revision;
                        dirty = is_watched(&c.object.key.kind);
                    }
                    Some(Err(e)) => {
                        tracing::warn!(error = %e, "site controller: change feed interrupted; resuming");
                        // Behind the feed's window: the reconcile (a full
                        // read) is the resync; follow on after it.
                        if let Some(from) = meshlink_store::resync_revision(store.as_ref(), &e).await {
                            after = from;
                        }
                        feed = store.watch(after);
                        dirty = true;
                    }
                    None => {
                        feed = store.watch(after);
                        dirty = true;
                    }
                },
                Some(done) = self.redemptions.join_next(), if !self.redemptions.is_empty() => {
                    if let Ok((name, retry)) = done {
                        self.finished(name, retry);
                    }
                    dirty = true;
                }
                () = self.renewals.next_done(), if !self.renewals.is_idle() => dirty = true,
                () = tokio::time::sleep(wait) => dirty = true,
            }
        }
        self.redemptions.shutdown().await;
        self.renewals.shutdown().await;
    }

    fn finished(&mut self, name: String, retry: bool) {
        self.in_flight.remove(&name);
        if retry {
            let (n, _) = self
                .retry
                .get(&name)
                .copied()
                .unwrap_or((0, SystemTime::now()));
            let delay = Duration::from_millis(500u64 << n.min(6)).min(MAX_RETRY);
            let jitter = delay.mul_f64(meshlink_identity::random_jitter().abs());
            self.retry
                .insert(name, (n + 1, SystemTime::now() + delay + jitter));
        } else {
            self.retry.remove(&name);
        }
    }

    async fn reconcile(&mut self) -> Option<SystemTime> {
        match self.try_reconcile().await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "site controller: reconcile failed; retrying");
                Some(SystemTime::now() + Duration::from_secs(2))
            }
        }
    }

    async fn try_reconcile(&mut self) -> Result<Option<SystemTime>, ResourceError> {
        let now = SystemTime::now();
        let mut wake = Wake::default();
        let r = self.ctx.resources.clone();
        let site = the_site(&r)
            .await
            .map_err(|e| ResourceError::BadRequest(e.to_string()))?;
        let default_spec = SiteSpec::default();
        let site_spec = site
            .as_ref()
            .and_then(|s| s.spec.as_site())
            .unwrap_or(&default_spec);
        let edge = site_spec.is_edge();
        let mut ras = r.list(Kind::RouterAccess, None, None).await?;
        if site.is_some()
            && site_spec.link_access.as_deref() == Some("default")
            && !edge
            && !ras.iter().any(|a| a.name() == DEFAULT_ROUTER_ACCESS)
        {
            match r.create(default_router_access(site_spec)).await {
                Ok(created) => ras.push(created),
                Err(ResourceError::AlreadyExists(_)) => {
                    ras = r.list(Kind::RouterAccess, None, None).await?;
                }
                Err(e) => return Err(e),
            }
        }
        let store = r.store().clone();
        let mut config_problem = None;
        let mut ca_ready = false;
        if let Some(s) = &site
            && (site_spec.link_access.as_deref() == Some("default") || !ras.is_empty())
        {
            match ca_store::site_ca(store.as_ref(), s.name(), site_spec.default_issuer()).await {
                Ok(_) => ca_ready = true,
                Err(e) => config_problem = Some(e.to_string()),
            }
        }
        let mut endpoints = Vec::new();
        for ra in &ras {
            let (problem, eps) = self
                .router_access(&site, site_spec, ra, now, &mut wake)
                .await;
            if let Some(p) = &problem {
                config_problem.get_or_insert(format!("RouterAccess {:?}: {p}", ra.name()));
            }
            endpoints.extend(eps.iter().cloned());
            if let Some(status) = next_router_access_status(ra, problem.as_deref(), eps) {
                write_status(&r, Kind::RouterAccess, ra, status).await;
            }
        }
        let accepts_links = site.is_some() && !edge && !ras.is_empty();
        if let Some(s) = &site {
            let facts = SiteFacts {
                config_problem: config_problem.clone(),
                endpoints,
                accepts_links,
            };
            if let Some(status) = next_site_status(s, &facts) {
                write_status(&r, Kind::Site, s, status).await;
            }
        }
        let grant_problem = match &site {
            None => Some("no Site in this control plane; apply a Site".to_owned()),
            Some(s) if edge => Some(format!(
                "site {:?} is an edge site: it accepts no links, so it cannot issue grants",
                s.name()
            )),
            Some(s) if !accepts_links => Some(format!(
                "site {:?} accepts no links; set linkAccess: default on the Site or apply a RouterAccess",
                s.name()
            )),
            Some(_) if !ca_ready => config_problem.clone(),
            Some(_) => None,
        };
        for g in r.list(Kind::AccessGrant, None, None).await? {
            let (status, expires) = next_status(
                &g,
                &self.ctx.grant_base_url,
                &self.ctx.grant_ca_pem,
                &grant_problem,
                now,
            );
            if let Some(t) = expires {
                wake.at(t);
            }
            if let Some(status) = status {
                write_status(&r, Kind::AccessGrant, &g, status).await;
            }
        }
        let site_id = site
            .as_ref()
            .and_then(|s| s.status.details.as_site())
            .and_then(|s| s.site_id.clone());
        if site.is_none() || site_id.is_some() {
            self.redeem_tokens(
                site.as_ref().map(|s| s.name().to_owned()),
                site_id,
                now,
                &mut wake,
            )
            .await?;
        } else {
            // The Site's id is written above; its feed event brings the
            // next reconcile, which redeems with the id.
            wake.at(now + Duration::from_secs(1));
        }
        if let Some(t) = self.renewals.reconcile(&r, now).await? {
            wake.at(t);
        }
        Ok(wake.0)
    }

    /// Reconciles one RouterAccess: its endpoints and, when generated, its
    /// Secret. Returns the problem (if any) and the endpoints.
    async fn router_access(
        &self,
        site: &Option<Resource>,
        site_spec: &SiteSpec,
        ra: &Resource,
        now: SystemTime,
        wake: &mut Wake,
    ) -> (Option<String>, Vec<meshlink_api::spec::Endpoint>) {
        let Some(spec) = ra.spec.as_router_access() else {
            return (None, Vec::new());
        };
        let Some(site) = site else {
            return (
                Some("no Site in this control plane; apply a Site".into()),
                Vec::new(),
            );
        };
        if site_spec.is_edge() {
            return (
                Some("the site is an edge site: it accepts no links, so this RouterAccess is not used".into()),
                Vec::new(),
            );
        }
        let eps = endpoints_of(ra.name(), spec, &self.ctx.advertised_host);
        if !spec.generates_tls_credentials() {
            return (None, eps);
        }
        let r = &self.ctx.resources;
        let issuer = spec.issuer(site_spec);
        let ca = match ca_store::site_ca(r.store().as_ref(), site.name(), issuer).await {
            Ok(ca) => ca,
            Err(e) => return (Some(e.to_string()), eps),
        };
        let name = spec.tls_credentials(ra.name());
        let existing = match r.get(Kind::Secret, None, name).await {
            Ok(s) => Some(s),
            Err(ResourceError::NotFound(_)) => None,
            Err(e) => return (Some(e.to_string()), eps),
        };
        let hosts = hosts(&self.ctx.advertised_host, &spec.subject_alternative_names);
        let router_id = site
            .status
            .details
            .as_site()
            .and_then(|s| s.site_id.as_deref());
        match plan(
            ra.name(),
            name,
            existing.as_ref(),
            &ca,
            issuer,
            &hosts,
            router_id,
            now,
        ) {
            Ok(SecretPlan::Keep(at)) => {
                wake.at(at);
                (None, eps)
            }
            Ok(SecretPlan::Write(mut secret, at)) => {
                let written = match &existing {
                    Some(e) => {
                        secret.set_resource_version(e.resource_version().map(str::to_owned));
                        r.apply(*secret).await.map(|_| ())
                    }
                    None => r.create(*secret).await.map(|_| ()),
                };
                match written {
                    Ok(()) => {
                        tracing::info!(
                            secret = name,
                            router_access = ra.name(),
                            "issued RouterAccess credentials"
                        );
                        wake.at(at);
                        (None, eps)
                    }
                    // Another control plane wrote it first; the feed brings it back.
                    Err(ResourceError::Conflict(_) | ResourceError::AlreadyExists(_)) => {
                        (None, eps)
                    }
                    Err(e) => (Some(format!("cannot store Secret {name:?}: {e}")), eps),
                }
            }
            Ok(SecretPlan::Foreign(msg)) | Err(msg) => (Some(msg), eps),
        }
    }

    async fn redeem_tokens(
        &mut self,
        site_name: Option<String>,
        site_id: Option<String>,
        now: SystemTime,
        wake: &mut Wake,
    ) -> Result<(), ResourceError> {
        let r = self.ctx.resources.clone();
        let subject = site_name.unwrap_or_else(|| "meshlink".to_owned());
        for t in r.list(Kind::AccessToken, None, None).await? {
            let name = t.name().to_owned();
            if self.in_flight.contains(&name) || !tokens::needs_redemption(&t, now) {
                continue;
            }
            if let Some((_, at)) = self.retry.get(&name)
                && *at > now
            {
                wake.at(*at);
                continue;
            }
            if !tokens::claim(&r, &t).await {
                continue;
            }
            // Re-read so the outcome is written over the claim.
            let Ok(claimed) = r.get(Kind::AccessToken, None, &name).await else {
                continue;
            };
            self.in_flight.insert(name.clone());
            let res = r.clone();
            let subject = subject.clone();
            let site_id = site_id.clone();
            self.redemptions.spawn(async move {
                let retry = tokens::redeem(&res, &claimed, &subject, site_id.as_deref()).await;
                (name, retry)
            });
        }
        Ok(())
    }
}

/// The RouterAccess Skupper creates for `linkAccess: default`.
fn default_router_access(site: &SiteSpec) -> Resource {
    let role = |name, port: u16| RouterRole {
        name,
        port: Port::from(port),
    };
    Resource::new(
        Metadata {
            name: DEFAULT_ROUTER_ACCESS.to_owned(),
            ..Default::default()
        },
        Spec::RouterAccess(RouterAccessSpec {
            roles: vec![
                role(RouterRoleName::InterRouter, INTER_ROUTER_PORT),
                role(RouterRoleName::Edge, EDGE_PORT),
            ],
            issuer: Some(site.default_issuer().to_owned()),
            tls_credentials: Some(DEFAULT_SERVER_SECRET.to_owned()),
            generate_tls_credentials: Some(true),
            ..Default::default()
        }),
    )
}

/// Writes a status as a compare-and-swap on the version read; a conflict
/// means someone else wrote, and the feed brings another reconcile.
async fn write_status(
    r: &ResourceService,
    kind: Kind,
    res: &Resource,
    status: meshlink_api::Status,
) {
    let version = res.resource_version().and_then(|v| v.parse().ok());
    match r.set_status(kind, None, res.name(), status, version).await {
        Ok(_) | Err(ResourceError::Conflict(_) | ResourceError::NotFound(_)) => {}
        Err(e) => tracing::warn!(%kind, name = res.name(), error = %e, "cannot write status"),
    }
}
