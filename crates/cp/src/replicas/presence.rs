//! The `dataplane-gc` singleton job: proxy presence across replicas and
//! garbage collection.
//!
//! Each run:
//! 1. marks offline every Dataplane whose status says it is connected to a
//!    replica that stopped heartbeating (or left, deleting its record);
//!    the write is a compare-and-swap on the Dataplane, so a proxy that
//!    meanwhile reconnected elsewhere (a newer connection generation) is
//!    never touched;
//! 2. deletes Dataplanes labelled `meshlink.dev/lifecycle: ephemeral` that
//!    have been offline longer than `--dataplane-gc-grace`, again only at
//!    the revision it read;
//! 3. forgets instance records older than [`RECORD_FORGET`].

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, SystemTime};

use meshlink_api::{Kind, Resource};

use super::record::{self, InstanceRecord};
use super::{HEARTBEAT_STALE, RECORD_FORGET, parse_time};
use crate::resources::{ResourceError, ResourceService};

/// The label that marks a Dataplane for garbage collection once offline.
pub const LIFECYCLE_LABEL: &str = "meshlink.dev/lifecycle";
/// Its value.
pub const EPHEMERAL: &str = "ephemeral";

/// What one run did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Dataplanes marked offline (their replica is gone).
    pub marked_offline: usize,
    /// Ephemeral Dataplanes deleted.
    pub deleted: usize,
    /// Instance records forgotten.
    pub forgotten: usize,
}

impl std::fmt::Display for Swept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} dataplane(s) of departed replicas marked offline, {} offline ephemeral dataplane(s) deleted, {} old replica record(s) forgotten",
            self.marked_offline, self.deleted, self.forgotten
        )
    }
}

/// Why a replica counts as gone at `now`, if it does.
fn departed(
    instance: &str,
    last_connected: Option<SystemTime>,
    records: &HashMap<String, InstanceRecord>,
    now: SystemTime,
) -> Option<String> {
    let old = |t: SystemTime| now.duration_since(t).is_ok_and(|d| d > HEARTBEAT_STALE);
    match records.get(instance) {
        Some(r) if r.is_stale(now) => Some(format!(
            "its control plane {instance} stopped heartbeating at {}",
            r.heartbeat
        )),
        Some(_) => None,
        // A replica deletes its record when it stops; a brand-new replica
        // may not have written one yet, hence the age check.
        None if last_connected.is_none_or(old) => {
            Some(format!("its control plane {instance} has stopped"))
        }
        None => None,
    }
}

/// One run of the job. `judge_departures` is false until this replica has
/// led (with the store reachable) for longer than [`HEARTBEAT_STALE`]:
/// after a failover or a database outage every other replica needs that
/// long to write a heartbeat again, and none may be taken for gone
/// meanwhile.
/// `own` is this replica's instance: its own proxies are never judged
/// (it knows its streams; with SQLite its record is written only at start).
pub async fn sweep(
    resources: &ResourceService,
    gc_grace: Duration,
    judge_departures: bool,
    own: &str,
) -> Result<Swept, String> {
    let now = SystemTime::now();
    let store = resources.store().clone();
    let mut swept = Swept::default();
    let records: HashMap<String, InstanceRecord> = record::list(store.as_ref())
        .await
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|(r, _)| (r.instance.clone(), r))
        .collect();
    // The store is walked a page at a time and only the Dataplanes to act
    // on are kept (a whole list of 10,000 held them all, every period).
    // Departed replica → its Dataplanes still marked online, with why.
    let mut offline: BTreeMap<String, Vec<(Resource, String)>> = BTreeMap::new();
    let mut expired: Vec<Resource> = Vec::new();
    resources
        .for_each(Kind::Dataplane, None, |dp| {
            let Some(s) = dp.status.details.as_dataplane() else {
                return;
            };
            if s.online {
                if !judge_departures {
                    return;
                }
                let Some(instance) = s.control_plane_instance.as_deref() else {
                    return;
                };
                if instance == own {
                    return;
                }
                let last = s.last_connected.as_deref().and_then(parse_time);
                if let Some(why) = departed(instance, last, &records, now) {
                    let instance = instance.to_owned();
                    offline.entry(instance).or_default().push((dp, why));
                }
                return;
            }
            let ephemeral = dp.labels().get(LIFECYCLE_LABEL).map(String::as_str) == Some(EPHEMERAL);
            let since = s.last_disconnected.as_deref().and_then(parse_time);
            if ephemeral && since.is_some_and(|t| now.duration_since(t).is_ok_and(|d| d > gc_grace))
            {
                expired.push(dp);
            }
        })
        .await
        .map_err(|e| e.to_string())?;
    for (instance, dps) in &offline {
        // The departed replica's closes, written on its behalf by the
        // Dataplane status owner's rule, in one batch.
        let marked = crate::status::writer::mark_departed(resources, instance, dps, now)
            .await
            .map_err(|e| e.to_string())?;
        for ((dp, why), marked) in dps.iter().zip(marked) {
            if marked {
                tracing::info!(mesh = ?dp.mesh(), dataplane = dp.name(), %why, "marked a Dataplane offline");
                swept.marked_offline += 1;
            }
        }
    }
    for dp in expired {
        let expected = dp.resource_version().and_then(|v| v.parse().ok());
        match resources
            .delete(Kind::Dataplane, dp.mesh(), dp.name(), expected)
            .await
        {
            Ok(_) => {
                tracing::info!(mesh = ?dp.mesh(), dataplane = dp.name(), grace = ?gc_grace,
                    "deleted an ephemeral Dataplane offline longer than --dataplane-gc-grace");
                swept.deleted += 1;
            }
            Err(ResourceError::Conflict(_) | ResourceError::NotFound(_)) => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    for (instance, r) in &records {
        let old = parse_time(&r.heartbeat)
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|d| d > RECORD_FORGET);
        if old && store.delete(&record::key(instance), None).await.is_ok() {
            swept.forgotten += 1;
        }
    }
    Ok(swept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replicas::rfc3339;

    fn rec(instance: &str, heartbeat: SystemTime) -> InstanceRecord {
        InstanceRecord {
            instance: instance.into(),
            incarnation: "x".into(),
            version: "0".into(),
            started: rfc3339(heartbeat),
            heartbeat: rfc3339(heartbeat),
            api_addr: String::new(),
            xds_addr: String::new(),
            grant_addr: String::new(),
            connected_proxies: 0,
        }
    }

    #[test]
    fn only_stale_or_long_gone_replicas_count_as_departed() {
        let now = SystemTime::now();
        let mut records = HashMap::new();
        records.insert("live".to_owned(), rec("live", now));
        records.insert(
            "stale".to_owned(),
            rec("stale", now - HEARTBEAT_STALE - Duration::from_secs(5)),
        );
        assert_eq!(departed("live", Some(now), &records, now), None);
        assert!(departed("stale", Some(now), &records, now).is_some());
        // No record: gone, unless the connection is younger than a
        // heartbeat can be (a replica that just started).
        assert_eq!(departed("new", Some(now), &records, now), None);
        let long_ago = now - HEARTBEAT_STALE - Duration::from_secs(1);
        assert!(departed("new", Some(long_ago), &records, now).is_some());
    }
}
