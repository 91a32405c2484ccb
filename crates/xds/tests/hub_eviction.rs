//! Bounded hub state over a proxy's whole life, on paused time through the
//! real hub and ADS server: 1,000 connect/disconnect cycles, half of them
//! ending with the Dataplane deleted, leave the hub's proxy, identity and
//! mesh maps (and the owner registry) at their baseline once the grace
//! period has passed; a deleted Dataplane's identity (its private key) goes
//! at once.

mod ads_support;

use std::time::Duration;

use ads_support::{Harness, MESH, MemorySource, dataplane, identity_pem};
use meshlink_xds::hub::{EVICT_AFTER, HubStats, Update};
use tokio::time::sleep;

const CYCLES: usize = 1_000;

async fn stats(h: &Harness) -> HubStats {
    h.hub.stats().await.expect("hub running")
}

#[tokio::test(start_paused = true)]
async fn connect_disconnect_cycles_leave_the_hub_maps_at_baseline() {
    let h = Harness::new(MemorySource::new(0, Duration::from_secs(3600)));
    let baseline = stats(&h).await;
    assert_eq!(
        (baseline.proxies, baseline.identities, baseline.meshes),
        (0, 0, 0)
    );

    for i in 0..CYCLES {
        let name = format!("tmp-{i}");
        let dp = dataplane(&name, "10.0.0.1", "web", 8080, &[]);
        h.source.put(dp.clone());
        h.hub.resource_changed(MESH, Update::Upserted(dp));
        let mut s = h.open(&name);
        s.request(None).await;
        loop {
            let r = s.next_untimed().await.expect("served").expect("no error");
            s.request(Some(&r)).await;
            if identity_pem(&r).is_some() {
                break;
            }
        }
        s.close_and_cleanup().await;
        if i % 2 == 0 {
            let gone = h.source.delete_dataplane(&name).expect("was there");
            h.hub.resource_changed(MESH, Update::Deleted(gone));
        }
    }
    h.hub.sync(false).await;
    let during = stats(&h).await;
    assert_eq!(during.proxies, 0, "no proxy is connected");
    assert!(
        during.identities <= CYCLES / 2,
        "deleted Dataplanes' identities are dropped at once: {during:?}"
    );
    assert_eq!(h.registry.len(), 0, "owner records leaked");

    // Past the grace period every identity and the unused mesh are gone.
    sleep(EVICT_AFTER + EVICT_AFTER / 4 + Duration::from_secs(1)).await;
    let after = stats(&h).await;
    assert_eq!(
        (
            after.proxies,
            after.identities,
            after.meshes,
            after.disconnected
        ),
        (0, 0, 0, 0),
        "{after:?}"
    );
    assert!(
        after.recomputed >= CYCLES as u64,
        "every connect was served"
    );
}

#[tokio::test(start_paused = true)]
async fn a_deleted_dataplane_loses_its_identity_at_once_and_a_deleted_mesh_its_cache() {
    let h = Harness::new(MemorySource::new(1, Duration::from_secs(3600)));
    let mut s = h.open("web-0");
    s.request(None).await;
    let r = s.next_untimed().await.expect("served").expect("no error");
    assert!(identity_pem(&r).is_some(), "identity sent");
    s.close_and_cleanup().await;
    h.hub.sync(false).await;
    let kept = stats(&h).await;
    assert_eq!(
        (kept.identities, kept.meshes),
        (1, 1),
        "kept for a reconnect"
    );

    let gone = h.source.delete_dataplane("web-0").unwrap();
    h.hub.resource_changed(MESH, Update::Deleted(gone));
    h.hub.sync(false).await;
    assert_eq!(stats(&h).await.identities, 0, "the private key is dropped");

    h.hub
        .resource_changed(MESH, Update::Deleted(h.source.view().mesh().clone()));
    h.hub.sync(false).await;
    assert_eq!(
        stats(&h).await.meshes,
        0,
        "an unused deleted mesh is dropped"
    );
}
