//! What one replica learns from the store about a proxy that other
//! replicas serve (issue 35 §4): the stored Dataplane status is the
//! presence and certificate record every replica shares.
//!
//! Each replica's status task follows the change feed; on every write of
//! a Dataplane it folds the stored status into its [`Proxy`]:
//! - the newest certificate, whichever replica issued it, so the replica
//!   holding the stream writes `Ready` from a certificate Certify issued
//!   on another replica (never `NoCertificate`), and the mesh-wide stall
//!   rule sees every proxy's certificate;
//! - the connection facts of a proxy this replica does not serve (no
//!   stream open here, no close of its own still to write), so the stall
//!   rule counts the proxies connected to every replica.
//!
//! The stored status has one writer per connection generation
//! (`writer::merge_one`); folding it in here never writes anything.

use std::time::SystemTime;

use meshlink_api::spec::DataplaneStatus;

use super::model::{Cert, Proxy};

fn parse_time(s: Option<&str>) -> Option<SystemTime> {
    s.and_then(|s| humantime::parse_rfc3339_weak(s).ok())
}

// === impl Proxy ===

impl Proxy {
    /// Folds a stored status in. Returns `true` when it carried a newer
    /// certificate than this replica knew of.
    pub(crate) fn observe_stored(&mut self, s: &DataplaneStatus) -> bool {
        let mut newer_cert = false;
        if let Some(m) = &s.mtls
            && let Some(cert) = Cert::from_stored(m)
            && self
                .cert
                .as_ref()
                .is_none_or(|c| c.serial != cert.serial && cert.issued_at > c.issued_at)
        {
            self.cert = Some(cert);
            self.regenerations = self.regenerations.max(m.certificate_regenerations);
            newer_cert = true;
        }
        // Connection facts this replica is the source of stay its own: an
        // open stream here, or a close here not written yet.
        let own_facts = self.ours && (self.online || self.dirty || self.pending_close);
        if !own_facts {
            self.ours = false;
            self.standby = false;
            self.online = s.online;
            self.control_plane = s.control_plane_instance.clone();
            self.last_connected = parse_time(s.last_connected.as_deref());
            self.last_disconnected = parse_time(s.last_disconnected.as_deref());
        }
        newer_cert
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use meshlink_api::spec::DataplaneMtlsStatus;
    use meshlink_xds::ads::StreamView;
    use meshlink_xds::owner::ProxyKey;

    use super::*;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + secs)
    }

    fn rfc(t: SystemTime) -> String {
        humantime::format_rfc3339_seconds(t).to_string()
    }

    fn stored(instance: &str, online: bool, serial: &str, issued: u64) -> DataplaneStatus {
        DataplaneStatus {
            online,
            control_plane_instance: Some(instance.into()),
            connection_generation: 3,
            last_connected: Some(rfc(at(0))),
            last_disconnected: None,
            mtls: Some(DataplaneMtlsStatus {
                certificate_expiration_time: Some(rfc(at(issued + 100))),
                last_certificate_regeneration: Some(rfc(at(issued))),
                certificate_regenerations: 4,
                issued_backend: Some("ca-1".into()),
                serial: Some(serial.into()),
                spiffe_id: Some("spiffe://default/web".into()),
                delivery: Some("certify".into()),
            }),
            ..Default::default()
        }
    }

    fn open_here() -> Proxy {
        let mut p = Proxy::default();
        p.apply_view(
            &StreamView {
                key: ProxyKey::new("default", "web-1"),
                connected: true,
                control_plane: "cp-1".into(),
                connected_at: at(0),
                disconnected_at: None,
                certificate: None,
                rejected: None,
                holder: Default::default(),
                taken_over: false,
            },
            Some("ca-1"),
            at(0),
        );
        p
    }

    #[test]
    fn the_stream_holder_adopts_a_certificate_another_replica_issued() {
        let mut p = open_here();
        assert_eq!(p.ready(true, at(1)).1, "NoCertificate");
        assert!(p.observe_stored(&stored("cp-1", true, "aa", 1)));
        assert_eq!(p.ready(true, at(2)).1, "Connected");
        assert_eq!(p.regenerations, 4);
        assert!(p.connected_here(), "the stream's facts stay this replica's");
        // The same certificate again, or an older one, changes nothing.
        assert!(!p.observe_stored(&stored("cp-1", true, "aa", 1)));
        assert!(!p.observe_stored(&stored("cp-1", true, "00", 0)));
        assert_eq!(p.cert.as_ref().map(|c| c.serial.as_str()), Some("aa"));
    }

    #[test]
    fn a_proxy_served_elsewhere_takes_the_stored_connection_facts() {
        let mut p = Proxy::default();
        p.observe_stored(&stored("cp-2", true, "aa", 1));
        assert!(p.online && !p.ours);
        assert_eq!(p.control_plane.as_deref(), Some("cp-2"));
        // Counted by the stall rule on this replica too (80 % of 100 s).
        assert!(!p.stalled(true, at(80)));
        assert!(p.stalled(true, at(81)));
        p.observe_stored(&stored("cp-2", false, "aa", 1));
        assert!(!p.stalled(true, at(81)), "offline proxies are not counted");
    }

    #[test]
    fn an_open_stream_here_is_never_overwritten_by_the_store() {
        let mut p = open_here();
        p.dirty = false;
        p.observe_stored(&stored("cp-2", false, "aa", 1));
        assert!(p.online && p.ours);
        assert_eq!(p.control_plane.as_deref(), Some("cp-1"));
    }
}
