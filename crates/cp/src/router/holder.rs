//! Which control-plane replica holds a site router's report stream, so that
//! with several replicas on one store only that replica writes router
//! status.
//!
//! A router reports to one replica at a time. The replica that receives a
//! stream records itself in `internal.RouterReporter/<site>` before it
//! writes status from the stream's reports; when the stream ends it
//! deletes the record, but only if the record is still its own (compare
//! and delete), so a router that already moved to another replica keeps
//! that replica's record. A replica without the stream writes no router
//! status while the record names another replica that is live (the same
//! incarnation, heartbeat fresh): otherwise it would write "not reporting"
//! over the holder's report. When the holder is gone (no record, its
//! process restarted, or its heartbeat stale after a crash) every replica
//! writes the same "not reporting" status. With one replica (SQLite) the
//! record is always this replica's own and nothing changes.
//!
//! Owns the record; the router status task decides when to call it.

use std::sync::Arc;
use std::time::SystemTime;

use meshlink_store::{ObjectKey, Store, StoreError};
use serde::{Deserialize, Serialize};

use crate::replicas::{Replica, record};

/// Store kind of the records.
pub(crate) const REPORTER_KIND: &str = "internal.RouterReporter";

/// Who holds a site's router report stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Reporter {
    /// The replica's `--instance`.
    pub(crate) instance: String,
    /// The replica's process incarnation.
    pub(crate) incarnation: String,
    /// The stream's number in that process.
    pub(crate) stream: u64,
}

/// This replica's handle on the records.
#[derive(Clone)]
pub(crate) struct Holder {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) replica: Replica,
}

/// The store key of `site`'s reporter record.
pub(crate) fn key(site: &str) -> ObjectKey {
    ObjectKey::new(REPORTER_KIND, "", site)
}

impl Holder {
    fn me(&self, stream: u64) -> Reporter {
        Reporter {
            instance: self.replica.instance.clone(),
            incarnation: self.replica.incarnation.clone(),
            stream,
        }
    }

    /// Records this replica's `stream` as the holder of `site`'s router
    /// (the newest stream wins).
    pub(crate) async fn claim(&self, site: &str, stream: u64) -> Result<(), StoreError> {
        let key = key(site);
        if let Some(o) = self.store.get(&key).await?
            && serde_json::from_value::<Reporter>(o.body).ok() == Some(self.me(stream))
        {
            return Ok(());
        }
        let body = serde_json::to_value(self.me(stream)).expect("a record serializes");
        let none = std::collections::BTreeMap::new();
        // Update, else create; the last writer wins.
        loop {
            match self.store.update(&key, &none, &body, None).await {
                Ok(_) => return Ok(()),
                Err(StoreError::NotFound(_)) => match self.store.create(&key, &none, &body).await {
                    Ok(_) => return Ok(()),
                    Err(StoreError::AlreadyExists(_)) => continue,
                    Err(e) => return Err(e),
                },
                Err(e) => return Err(e),
            }
        }
    }

    /// Deletes the record of `site` if it is still this replica's `stream`.
    pub(crate) async fn release(&self, site: &str, stream: u64) -> Result<(), StoreError> {
        let key = key(site);
        let Some(o) = self.store.get(&key).await? else {
            return Ok(());
        };
        if serde_json::from_value::<Reporter>(o.body).ok() != Some(self.me(stream)) {
            return Ok(());
        }
        match self.store.delete(&key, Some(o.revision)).await {
            Ok(_) | Err(StoreError::NotFound(_) | StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The live replica other than this one that holds `site`'s router
    /// stream, if any.
    pub(crate) async fn held_elsewhere(&self, site: &str) -> Result<Option<String>, StoreError> {
        let Some(o) = self.store.get(&key(site)).await? else {
            return Ok(None);
        };
        let Ok(holder) = serde_json::from_value::<Reporter>(o.body) else {
            return Ok(None);
        };
        if holder.instance == self.replica.instance {
            // This replica's own record (a stream that ended here, or an
            // earlier process of this instance): nobody else reports.
            return Ok(None);
        }
        let live = record::list(self.store.as_ref())
            .await?
            .into_iter()
            .any(|(r, _)| {
                r.instance == holder.instance
                    && r.incarnation == holder.incarnation
                    && !r.is_stale(SystemTime::now())
            });
        Ok(live.then_some(holder.instance))
    }
}

/// The stream this replica has recorded as the holder of its site's
/// router, if any.
#[derive(Default)]
pub(crate) struct Claims {
    claimed: Option<(String, u64)>,
}

impl Claims {
    /// Brings the holder record in line with `current` (the site and
    /// number of the stream this replica has, if any; `site` is this
    /// control plane's Site). Returns whether this replica should write
    /// router status: it holds the stream, or no live replica does.
    pub(crate) async fn settle(
        &mut self,
        holder: &Holder,
        site: Option<&str>,
        current: Option<(&str, u64)>,
    ) -> Result<bool, crate::status::StatusError> {
        let store = |e: StoreError| crate::status::StatusError::Store(e.to_string());
        let now = current.map(|(site, stream)| (site.to_owned(), stream));
        if let Some((site, stream)) = self.claimed.clone()
            && now.as_ref() != Some(&(site.clone(), stream))
        {
            holder.release(&site, stream).await.map_err(store)?;
            self.claimed = None;
        }
        match (now, site) {
            (Some((site, stream)), _) => {
                holder.claim(&site, stream).await.map_err(store)?;
                self.claimed = Some((site, stream));
                Ok(true)
            }
            (None, Some(site)) => Ok(holder.held_elsewhere(site).await.map_err(store)?.is_none()),
            (None, None) => Ok(true),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::replicas::record::InstanceRecord;

    async fn heartbeat(store: &dyn Store, replica: &Replica, at: SystemTime) {
        let r = InstanceRecord {
            instance: replica.instance.clone(),
            incarnation: replica.incarnation.clone(),
            version: String::new(),
            started: crate::replicas::rfc3339(at),
            heartbeat: crate::replicas::rfc3339(at),
            api_addr: String::new(),
            xds_addr: String::new(),
            grant_addr: String::new(),
            connected_proxies: 0,
        };
        let body = serde_json::to_value(r).unwrap();
        let key = record::key(&replica.instance);
        let none = std::collections::BTreeMap::new();
        if store.update(&key, &none, &body, None).await.is_err() {
            store.create(&key, &none, &body).await.unwrap();
        }
    }

    #[tokio::test]
    async fn only_the_holder_writes_while_it_lives_and_anyone_once_it_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(
            meshlink_store::SqliteStore::open(&dir.path().join("store.db"))
                .await
                .unwrap(),
        );
        let a = Holder {
            store: store.clone(),
            replica: Replica::new("cp-1".into()),
        };
        let b = Holder {
            store: store.clone(),
            replica: Replica::new("cp-2".into()),
        };
        let now = SystemTime::now();
        heartbeat(store.as_ref(), &a.replica, now).await;
        heartbeat(store.as_ref(), &b.replica, now).await;
        let (mut ca, mut cb) = (Claims::default(), Claims::default());
        // Nobody holds the router: both may write "not reporting".
        assert!(cb.settle(&b, Some("s"), None).await.unwrap());
        // A gets the stream: A writes, B does not.
        assert!(ca.settle(&a, Some("s"), Some(("s", 7))).await.unwrap());
        assert!(!cb.settle(&b, Some("s"), None).await.unwrap());
        assert_eq!(
            b.held_elsewhere("s").await.unwrap().as_deref(),
            Some("cp-1")
        );
        // The router moves to B before A noticed its stream ended; A's
        // release then leaves B's record alone.
        assert!(cb.settle(&b, Some("s"), Some(("s", 1))).await.unwrap());
        assert!(!ca.settle(&a, Some("s"), None).await.unwrap());
        assert_eq!(
            a.held_elsewhere("s").await.unwrap().as_deref(),
            Some("cp-2")
        );
        // B's process dies (heartbeat stale): A writes again.
        heartbeat(store.as_ref(), &b.replica, now - Duration::from_secs(60)).await;
        assert!(ca.settle(&a, Some("s"), None).await.unwrap());
        // B restarted with a new incarnation: its old stream is gone too.
        let b2 = Holder {
            store: store.clone(),
            replica: Replica::new("cp-2".into()),
        };
        heartbeat(store.as_ref(), &b2.replica, now).await;
        assert!(ca.settle(&a, Some("s"), None).await.unwrap());
        // The stream ends where it is held: the record goes.
        assert!(cb.settle(&b, Some("s"), None).await.unwrap());
        assert!(store.get(&key("s")).await.unwrap().is_none());
    }
}
