//! Instance records: each replica writes `internal.ControlPlane/<instance>`
//! every [`HEARTBEAT_EVERY`], and deletes it on a clean shutdown.

use std::sync::Arc;
use std::time::SystemTime;

use meshlink_runtime::Shutdown;
use meshlink_store::{ObjectKey, Store, StoreError};
use serde::{Deserialize, Serialize};

use super::{HEARTBEAT_EVERY, HEARTBEAT_STALE, INSTANCE_KIND, Replica, parse_time, rfc3339};

/// What one replica says about itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct InstanceRecord {
    /// `--instance`.
    pub instance: String,
    /// The process incarnation (random per start).
    pub incarnation: String,
    /// The `meshlink-cp` version.
    pub version: String,
    /// When this process started.
    pub started: String,
    /// When this record was last written.
    pub heartbeat: String,
    /// The REST API address.
    pub api_addr: String,
    /// The xDS/Certify address proxies dial.
    pub xds_addr: String,
    /// The grant server address.
    pub grant_addr: String,
    /// Open xDS streams (sidecars and routers) on this replica.
    pub connected_proxies: u64,
}

impl InstanceRecord {
    /// Whether the heartbeat is older than [`HEARTBEAT_STALE`] at `now`.
    pub fn is_stale(&self, now: SystemTime) -> bool {
        parse_time(&self.heartbeat)
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > HEARTBEAT_STALE)
    }
}

/// The key of `instance`'s record.
pub fn key(instance: &str) -> ObjectKey {
    ObjectKey::new(INSTANCE_KIND, "", instance)
}

/// Every stored instance record, sorted by instance.
pub async fn list(store: &dyn Store) -> Result<Vec<(InstanceRecord, u64)>, StoreError> {
    let objs = store
        .list(&meshlink_store::ListQuery {
            kind: INSTANCE_KIND.to_owned(),
            ..Default::default()
        })
        .await?;
    Ok(objs
        .into_iter()
        .filter_map(|o| {
            serde_json::from_value(o.body)
                .ok()
                .map(|r: InstanceRecord| (r, o.revision))
        })
        .collect())
}

/// The addresses a record advertises.
#[derive(Debug, Clone)]
pub struct Addresses {
    /// REST API.
    pub api: String,
    /// xDS.
    pub xds: String,
    /// Grant server.
    pub grant: String,
}

/// Writes this replica's record now and every [`HEARTBEAT_EVERY`] until
/// `shutdown`, then deletes it. `connected` counts the open xDS streams.
pub async fn heartbeat(
    store: Arc<dyn Store>,
    replica: Replica,
    addrs: Addresses,
    connected: impl Fn() -> usize + Send + 'static,
    shutdown: Shutdown,
) {
    let started = rfc3339(SystemTime::now());
    let key = key(&replica.instance);
    let mut warned_duplicate = false;
    // SQLite has one control plane: its record is written at start (and
    // `get controlplanes` shows the replica answering as live), not every
    // few seconds into the change feed.
    let every = if store.backend() == "sqlite" {
        std::time::Duration::from_secs(24 * 3600)
    } else {
        HEARTBEAT_EVERY
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.wait() => break,
            _ = tick.tick() => {}
        }
        // Another live process with this name would make proxies' status
        // and the lease ambiguous: say so loudly.
        if let Ok(Some(o)) = store.get(&key).await
            && let Ok(other) = serde_json::from_value::<InstanceRecord>(o.body)
            && other.incarnation != replica.incarnation
            && other.started > started
            && !other.is_stale(SystemTime::now())
            && !warned_duplicate
        {
            warned_duplicate = true;
            tracing::error!(instance = %replica.instance,
                "another control plane started later with the same --instance; give each replica its own name");
        }
        let record = InstanceRecord {
            instance: replica.instance.clone(),
            incarnation: replica.incarnation.clone(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started: started.clone(),
            heartbeat: rfc3339(SystemTime::now()),
            api_addr: addrs.api.clone(),
            xds_addr: addrs.xds.clone(),
            grant_addr: addrs.grant.clone(),
            connected_proxies: connected() as u64,
        };
        if let Err(e) = crate::identity::secrets::put(store.as_ref(), &key, &record).await {
            tracing::warn!(error = %e, "cannot write this replica's heartbeat; retrying");
        }
    }
    if let Err(e) = store.delete(&key, None).await
        && !matches!(e, StoreError::NotFound(_))
    {
        tracing::warn!(error = %e, "cannot delete this replica's instance record on shutdown");
    }
}
