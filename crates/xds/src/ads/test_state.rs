//! A test fixture shared by the SotW and delta engine tests: a proxy state
//! built from resource names.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use tokio::time::Instant;

use crate::ads::ProxyState;
use crate::translate::Snapshot;

/// A state with secrets, clusters, listeners and load assignments by name;
/// `tag` changes every resource's content (and so its version).
pub(crate) fn state(
    secrets: &[&str],
    clusters: &[&str],
    listeners: &[&str],
    endpoints: &[&str],
    tag: &str,
) -> ProxyState {
    let mut snapshot = Snapshot::new();
    for s in secrets {
        snapshot.insert(
            (*s).to_owned(),
            &Secret {
                name: format!("{s}/{tag}"),
                ..Default::default()
            },
        );
    }
    for c in clusters {
        snapshot.insert(
            (*c).to_owned(),
            &Cluster {
                name: (*c).to_owned(),
                alt_stat_name: tag.to_owned(),
                ..Default::default()
            },
        );
    }
    for l in listeners {
        snapshot.insert(
            (*l).to_owned(),
            &Listener {
                name: (*l).to_owned(),
                stat_prefix: tag.to_owned(),
                ..Default::default()
            },
        );
    }
    for e in endpoints {
        snapshot.insert(
            (*e).to_owned(),
            &ClusterLoadAssignment {
                cluster_name: (*e).to_owned(),
                ..Default::default()
            },
        );
    }
    ProxyState {
        snapshot,
        identity: None,
        renew_at: None,
        changed_at: Instant::now(),
    }
}
