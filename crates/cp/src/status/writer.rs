//! Status writes: read, merge only what this task owns (the Dataplane
//! status, one condition), and write back with the resourceVersion CAS,
//! re-reading on Conflict. Other writers' conditions (the mesh CA
//! controller's `Ready` and `CARotation`) are never lost.
//!
//! Dataplane statuses go out in batches ([`merge_dataplanes`]): one
//! multi-get and one store transaction per flush, whatever the number of
//! proxies. A Dataplane whose CAS fails there is not retried at once; it
//! stays dirty and is merged again from a fresh read on the next flush.

use std::hash::{DefaultHasher, Hash, Hasher};

use meshlink_api::spec::{DataplaneStatus, StatusDetails};
use meshlink_api::{Condition, ConditionStatus, Kind, Resource};
use meshlink_store::{BatchWrite, StoreError};
use meshlink_xds::owner::ProxyKey;

use crate::resources::{ResourceError, ResourceService, key_of};

use super::model::Presence;

use super::StatusError;

/// One Dataplane's status as the status task wants it stored.
pub(crate) struct DataplaneUpdate {
    /// The Dataplane.
    pub(crate) key: ProxyKey,
    /// Its status fields.
    pub(crate) status: DataplaneStatus,
    /// Its `Ready` condition.
    pub(crate) ready: Condition,
    /// What this instance may claim about the connection.
    pub(crate) presence: Presence,
    /// Its `AppReachable` condition; `None`: keep the stored one,
    /// `unreachableApps` and `unhealthyEndpoints`
    /// ([`super::app_reachable::merged`]).
    pub(crate) app: Option<Condition>,
}

/// The outcome of one merged update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Merged {
    /// The Dataplane's revision after the merge.
    pub(crate) revision: u64,
    /// Whether this instance owns the connection fields (its generation is
    /// the stored one); `false`: only the certificate was merged.
    pub(crate) owner: bool,
    /// The connection generation now stored (when `owner`).
    pub(crate) generation: Option<u64>,
}

/// Merges `update` into the stored status. The connection fields and
/// `Ready` change only if this instance owns the connection: a new stream
/// here takes it over (generation + 1); an update or a close applies only
/// while the stored generation is the one this instance recorded; a stream
/// still open here takes the connection back (generation + 1) once the
/// stored one is offline (a newer stream elsewhere closed first). Anyone
/// else merges only a newer certificate; every write keeps the newest
/// certificate, whichever replica issued it.
fn merge_one(
    update: &DataplaneUpdate,
    stored: &DataplaneStatus,
    instance: &str,
) -> (DataplaneStatus, Option<Condition>, Option<u64>) {
    let held_here = stored.control_plane_instance.as_deref() == Some(instance);
    let claim = match update.presence {
        Presence::Connected(None) => Some(stored.connection_generation + 1),
        Presence::Connected(Some(g)) if held_here && stored.connection_generation == g => Some(g),
        // A stream still open here while the stored connection (a newer
        // stream elsewhere) closed: the proxy is connected here after all.
        Presence::Connected(Some(_)) | Presence::Standby if !stored.online => {
            Some(stored.connection_generation + 1)
        }
        Presence::Disconnected(g)
            if held_here && g.is_none_or(|g| g == stored.connection_generation) =>
        {
            Some(stored.connection_generation)
        }
        _ => None,
    };
    let newer = |m: &meshlink_api::spec::DataplaneMtlsStatus| {
        m.last_certificate_regeneration.clone().unwrap_or_default()
    };
    // Whichever replica issued it, the newest certificate stands.
    let newest_mtls = match (&update.status.mtls, &stored.mtls) {
        (Some(ours), Some(theirs)) if newer(theirs) > newer(ours) => Some(theirs.clone()),
        (None, theirs) => theirs.clone(),
        (ours, _) => ours.clone(),
    };
    match claim {
        Some(generation) => {
            let mut s = update.status.clone();
            s.connection_generation = generation;
            s.mtls = newest_mtls;
            (s, Some(update.ready.clone()), Some(generation))
        }
        None => {
            let mut s = stored.clone();
            s.mtls = newest_mtls;
            // A proxy that never connected anywhere: anyone may say so.
            let never = stored.control_plane_instance.is_none() && !update.status.online;
            (s, never.then(|| update.ready.clone()), None)
        }
    }
}

/// A digest of what a status write stores, without the condition's
/// transition time: equal digests mean an identical write.
pub(crate) fn digest(status: &DataplaneStatus, ready: &Condition) -> u64 {
    let mut h = DefaultHasher::new();
    serde_json::to_vec(status)
        .expect("a status always serializes")
        .hash(&mut h);
    (ready.status == ConditionStatus::True).hash(&mut h);
    ready.reason.hash(&mut h);
    ready.message.hash(&mut h);
    h.finish()
}

/// Merges every update into its Dataplane with one multi-get and one batch
/// write. Returns, per update in order, the Dataplane's revision after the
/// merge (unchanged if nothing needed writing), or why it failed:
/// `NotFound` (deleted), a conflict (someone wrote it between the read and
/// the batch; merge it again later) or a store error.
pub(crate) async fn merge_dataplanes(
    resources: &ResourceService,
    updates: &[DataplaneUpdate],
    instance: &str,
) -> Vec<Result<Merged, StatusError>> {
    let keys: Vec<_> = updates
        .iter()
        .map(|u| key_of(Kind::Dataplane, Some(&u.key.mesh), &u.key.name))
        .collect();
    let current = match resources.store().get_many(&keys).await {
        Ok(c) => c,
        Err(e) => return updates.iter().map(|_| Err(store_error(&e))).collect(),
    };
    let mut out: Vec<Result<Merged, StatusError>> = Vec::with_capacity(updates.len());
    let mut writes = Vec::new();
    let mut slots = Vec::new();
    for ((u, key), obj) in updates.iter().zip(keys).zip(current) {
        let Some(obj) = obj else {
            out.push(Err(
                ResourceError::NotFound(format!("Dataplane {}", u.key)).into()
            ));
            continue;
        };
        let revision = obj.revision;
        let mut r = match ResourceService::decode(obj) {
            Ok(r) => r,
            Err(e) => {
                out.push(Err(e.into()));
                continue;
            }
        };
        let before = r.status.clone();
        let stored = before.details.as_dataplane().cloned().unwrap_or_default();
        let (mut status, ready, generation) = merge_one(u, &stored, instance);
        let app = super::app_reachable::merged(
            u.app.as_ref(),
            &stored,
            &mut status,
            generation.is_some(),
        );
        r.status.details = StatusDetails::Dataplane(status);
        if let Some(ready) = ready {
            r.set_condition(ready);
        }
        if let Some(app) = app {
            r.set_condition(app);
        }
        let merged = Merged {
            revision,
            owner: generation.is_some(),
            generation,
        };
        if r.status == before {
            out.push(Ok(merged));
            continue;
        }
        slots.push(out.len());
        out.push(Ok(merged));
        writes.push(BatchWrite::Update {
            key,
            labels: r.labels().clone(),
            body: ResourceService::encode(&r),
            expected_revision: Some(revision),
        });
    }
    match resources.store().write_batch(&writes).await {
        Ok(results) => {
            for (slot, r) in slots.into_iter().zip(results) {
                out[slot] = match (r, &out[slot]) {
                    (Ok(o), Ok(m)) => Ok(Merged {
                        revision: o.revision,
                        ..*m
                    }),
                    (Err(e), _) => Err(ResourceError::from(e).into()),
                    (Ok(_), Err(_)) => unreachable!("only merged slots are written"),
                };
            }
        }
        Err(e) => {
            for slot in slots {
                out[slot] = Err(store_error(&e));
            }
        }
    }
    out
}

/// Marks Dataplanes offline because the replica `instance` that held their
/// streams is gone (each with why), on that replica's behalf: the same
/// claim rule as its own close ([`merge_one`] as `instance`, at the stored
/// generation), so a proxy that meanwhile reconnected elsewhere (another
/// instance or a newer generation) is never touched. One batch, as the
/// status task's own flushes. Run by the `dataplane-gc` job
/// (`crate::replicas::presence`). Returns, per Dataplane in order, whether
/// the claim held (the departed replica still held the stream), i.e. the
/// Dataplane is now offline.
pub(crate) async fn mark_departed(
    resources: &ResourceService,
    instance: &str,
    departed: &[(Resource, String)],
    now: std::time::SystemTime,
) -> Result<Vec<bool>, StatusError> {
    let at = humantime::format_rfc3339_seconds(now).to_string();
    let updates: Vec<DataplaneUpdate> = departed
        .iter()
        .map(|(dp, why)| {
            let stored = dp
                .status
                .details
                .as_dataplane()
                .cloned()
                .unwrap_or_default();
            let generation = stored.connection_generation;
            let mut status = stored;
            status.online = false;
            status.last_disconnected = Some(at.clone());
            DataplaneUpdate {
                key: ProxyKey::new(dp.mesh().unwrap_or_default(), dp.name()),
                status,
                ready: super::model::departed_ready(why),
                presence: Presence::Disconnected(Some(generation)),
                app: None,
            }
        })
        .collect();
    merge_dataplanes(resources, &updates, instance)
        .await
        .into_iter()
        .map(|r| match r {
            Ok(m) => Ok(m.owner),
            Err(StatusError::Resource(ResourceError::NotFound(_) | ResourceError::Conflict(_))) => {
                Ok(false)
            }
            Err(e) => Err(e),
        })
        .collect()
}

/// A batch-wide store failure, reported in every slot it failed.
fn store_error(e: &StoreError) -> StatusError {
    StatusError::Store(e.to_string())
}

/// Attempts before a contended write is given up (it is retried on the
/// next flush).
const ATTEMPTS: usize = 5;

/// Applies `change` to the current status of `kind/mesh/name` and writes it
/// if anything changed. Returns whether a write happened.
pub(crate) async fn merge(
    resources: &ResourceService,
    kind: Kind,
    mesh: Option<&str>,
    name: &str,
    change: impl Fn(&mut Resource),
) -> Result<bool, StatusError> {
    for _ in 0..ATTEMPTS {
        let current = resources.get(kind, mesh, name).await?;
        let mut next = current.clone();
        change(&mut next);
        if next.status == current.status {
            return Ok(false);
        }
        let expected = current.resource_version().and_then(|v| v.parse().ok());
        match resources
            .set_status(kind, mesh, name, next.status, expected)
            .await
        {
            Ok(_) => return Ok(true),
            Err(ResourceError::Conflict(_)) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StatusError::Contended(format!(
        "{kind} {name}: status changed concurrently {ATTEMPTS} times in a row"
    )))
}

/// The `Valid` condition of a MeshTrafficPermission: its target and every
/// `from` entry are well-formed selectors.
pub(crate) fn mtp_valid(r: &Resource) -> Condition {
    let errors = r.validate();
    if errors.is_empty() {
        let spec = r.spec.as_mesh_traffic_permission();
        let rules = spec.map_or(0, |s| s.from.len());
        let message = match spec.map_or(0, |s| s.rules.len()) {
            0 => format!("targetRef and {rules} from rule(s) are well-formed selectors"),
            n => format!("targetRef and {n} SPIFFE ID rule(s) are well-formed"),
        };
        return Condition::now("Valid", ConditionStatus::True, "Valid", message);
    }
    let what: Vec<String> = errors.iter().map(ToString::to_string).collect();
    Condition::now(
        "Valid",
        ConditionStatus::False,
        "InvalidSelector",
        what.join("; "),
    )
}

/// The `CertificateRotationStalled` condition of a mesh from the names of
/// its stalled proxies (sorted).
pub(crate) fn stalled_condition(stalled: &[String]) -> Condition {
    const SHOWN: usize = 10;
    if stalled.is_empty() {
        return Condition::now(
            "CertificateRotationStalled",
            ConditionStatus::False,
            "AllRenewing",
            "no connected proxy is past 80% of its certificate's lifetime without a renewal",
        );
    }
    let mut names = stalled[..stalled.len().min(SHOWN)].join(", ");
    if stalled.len() > SHOWN {
        names.push_str(&format!(" and {} more", stalled.len() - SHOWN));
    }
    Condition::now(
        "CertificateRotationStalled",
        ConditionStatus::True,
        "RenewalOverdue",
        format!(
            "{} connected proxy(ies) past 80% of their certificate's lifetime without a renewal: {names}; \
             check their logs and `meshlink inspect dataplane NAME`",
            stalled.len()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rules_permission_is_valid_and_says_how_many_rules_it_has() {
        let r = Resource::from_json(serde_json::json!({
            "apiVersion": "meshlink.dev/v1alpha1", "kind": "MeshTrafficPermission",
            "metadata": {"name": "p", "mesh": "default"},
            "spec": {"rules": [{"default": {"allow": [
                {"spiffeID": {"type": "Prefix", "value": "spiffe://default"}}]}}]},
        }))
        .expect("valid");
        let c = mtp_valid(&r);
        assert_eq!(c.status, ConditionStatus::True);
        assert_eq!(
            c.message,
            "targetRef and 1 SPIFFE ID rule(s) are well-formed"
        );
    }

    fn update(presence: Presence, online: bool) -> DataplaneUpdate {
        DataplaneUpdate {
            key: ProxyKey::new("default", "web"),
            status: DataplaneStatus {
                online,
                control_plane_instance: Some("cp-1".into()),
                ..Default::default()
            },
            ready: Condition::now("Ready", ConditionStatus::True, "Ready", "ok"),
            presence,
            app: None,
        }
    }

    fn stored(instance: &str, generation: u64, online: bool) -> DataplaneStatus {
        DataplaneStatus {
            online,
            control_plane_instance: Some(instance.into()),
            connection_generation: generation,
            ..Default::default()
        }
    }

    #[test]
    fn a_new_stream_takes_the_connection_over_with_the_next_generation() {
        let (s, ready, g) = merge_one(
            &update(Presence::Connected(None), true),
            &stored("cp-2", 7, true),
            "cp-1",
        );
        assert_eq!(g, Some(8));
        assert!(ready.is_some());
        assert_eq!(
            (
                s.online,
                s.control_plane_instance.as_deref(),
                s.connection_generation
            ),
            (true, Some("cp-1"), 8)
        );
    }

    /// The dataplane-gc job marks cp-1 departed (it read generation 7)
    /// while the proxy reconnects to cp-2: in either order the proxy ends
    /// online on cp-2 with the next generation.
    #[test]
    fn a_departed_mark_and_a_reconnect_elsewhere_commute() {
        let mark = {
            let mut u = update(Presence::Disconnected(Some(7)), false);
            u.ready = super::super::model::departed_ready("its control plane cp-1 has stopped");
            u.status.control_plane_instance = Some("cp-1".into());
            (u, "cp-1")
        };
        let mut connect = update(Presence::Connected(None), true);
        connect.status.control_plane_instance = Some("cp-2".into());
        let connect = (connect, "cp-2");
        let apply = |stored: DataplaneStatus, (u, instance): &(DataplaneUpdate, &str)| {
            merge_one(u, &stored, instance).0
        };
        let start = stored("cp-1", 7, true);
        let a = apply(apply(start.clone(), &mark), &connect);
        let b = apply(apply(start.clone(), &connect), &mark);
        assert_eq!(a, b);
        assert_eq!(
            (
                a.online,
                a.control_plane_instance.as_deref(),
                a.connection_generation
            ),
            (true, Some("cp-2"), 8)
        );
        // Alone, the mark takes cp-1's proxy offline.
        let alone = apply(start, &mark);
        assert_eq!((alone.online, alone.connection_generation), (false, 7));
    }

    #[test]
    fn a_late_close_never_overwrites_a_newer_stream_elsewhere() {
        // cp-1's stream (generation 7) closed, but the proxy is already on
        // cp-2 with generation 8: cp-1 must not write it offline.
        let (s, ready, g) = merge_one(
            &update(Presence::Disconnected(Some(7)), false),
            &stored("cp-2", 8, true),
            "cp-1",
        );
        assert_eq!((g, ready.is_none()), (None, true));
        assert_eq!(s, stored("cp-2", 8, true));
        // The same close while cp-1 still holds generation 7 applies.
        let (s, _, g) = merge_one(
            &update(Presence::Disconnected(Some(7)), false),
            &stored("cp-1", 7, true),
            "cp-1",
        );
        assert_eq!((g, s.online), (Some(7), false));
        // A stale update of an open stream does not take over either.
        let (_, ready, g) = merge_one(
            &update(Presence::Connected(Some(7)), true),
            &stored("cp-1", 9, true),
            "cp-1",
        );
        assert_eq!((g, ready.is_none()), (None, true));
    }

    /// cp-1's older stream is still open while cp-2's newer one held the
    /// connection (generation 8) and closed first: cp-1 takes it back.
    #[test]
    fn a_stream_standing_by_takes_the_connection_back_once_the_newer_one_closed() {
        for presence in [Presence::Standby, Presence::Connected(Some(7))] {
            let (_, ready, g) =
                merge_one(&update(presence, true), &stored("cp-2", 8, true), "cp-1");
            assert_eq!(
                (g, ready.is_none()),
                (None, true),
                "{presence:?}: cp-2 holds it"
            );
            let (s, ready, g) =
                merge_one(&update(presence, true), &stored("cp-2", 8, false), "cp-1");
            assert_eq!(g, Some(9), "{presence:?}");
            assert!(ready.is_some());
            assert_eq!(
                (s.online, s.control_plane_instance.as_deref()),
                (true, Some("cp-1"))
            );
        }
    }

    #[test]
    fn the_connection_owner_keeps_a_newer_certificate_another_replica_stored() {
        let mtls = |at: &str, serial: &str| {
            Some(meshlink_api::spec::DataplaneMtlsStatus {
                last_certificate_regeneration: Some(at.into()),
                serial: Some(serial.into()),
                ..Default::default()
            })
        };
        let mut u = update(Presence::Connected(Some(3)), true);
        u.status.mtls = mtls("2026-12-01T09:00:00Z", "old");
        let mut st = stored("cp-1", 3, true);
        st.mtls = mtls("2026-12-01T10:00:00Z", "new");
        let (s, ready, g) = merge_one(&u, &st, "cp-1");
        assert_eq!((g, ready.is_some()), (Some(3), true));
        assert_eq!(s.mtls.unwrap().serial.as_deref(), Some("new"));
        // Without a certificate of its own it keeps the stored one too.
        u.status.mtls = None;
        let (s, _, _) = merge_one(&u, &st, "cp-1");
        assert_eq!(s.mtls.unwrap().serial.as_deref(), Some("new"));
    }

    #[test]
    fn an_observer_merges_only_a_newer_certificate() {
        let mut u = update(Presence::Observer, false);
        u.status.mtls = Some(meshlink_api::spec::DataplaneMtlsStatus {
            last_certificate_regeneration: Some("2026-12-01T10:00:00Z".into()),
            serial: Some("b".into()),
            ..Default::default()
        });
        let mut st = stored("cp-2", 3, true);
        st.mtls = Some(meshlink_api::spec::DataplaneMtlsStatus {
            last_certificate_regeneration: Some("2026-12-01T09:00:00Z".into()),
            serial: Some("a".into()),
            ..Default::default()
        });
        let (s, ready, _) = merge_one(&u, &st, "cp-1");
        assert!(ready.is_none());
        assert_eq!((s.online, s.connection_generation), (true, 3));
        assert_eq!(s.mtls.unwrap().serial.as_deref(), Some("b"));
    }

    #[test]
    fn stalled_condition_names_at_most_ten() {
        let names: Vec<String> = (0..12).map(|i| format!("dp-{i:02}")).collect();
        let c = stalled_condition(&names);
        assert_eq!(c.status, ConditionStatus::True);
        assert!(c.message.contains("dp-09 and 2 more"), "{}", c.message);
        assert!(!c.message.contains("dp-10"), "{}", c.message);
        let ok = stalled_condition(&[]);
        assert_eq!(
            (ok.status, ok.reason.as_str()),
            (ConditionStatus::False, "AllRenewing")
        );
    }
}
