//! The in-memory model behind Dataplane status: one [`Proxy`] per known
//! Dataplane, built from stream views, issuance events and the store.
//!
//! Pure: no I/O and no clock of its own (every call takes `now`), so the
//! Ready rule and the stalled-rotation rule are unit-tested here.

use std::time::{Duration, SystemTime};

use meshlink_api::spec::{DataplaneMtlsStatus, DataplaneStatus};
use meshlink_api::{Condition, ConditionStatus};
use meshlink_xds::ads::StreamView;

use crate::identity::issuance::{Delivery, Issuance};

/// SDS certificates are backdated by this much (the identity crate's
/// `BACKDATE`); their issue time is notBefore plus this.
const BACKDATE: Duration = Duration::from_secs(60);

/// Fraction of a certificate's lifetime after which a proxy that has not
/// renewed counts as stalled. Proxies renew at 50 % ± 10 %.
pub(crate) const STALL_FRACTION: f64 = 0.8;

/// How long a closed stream waits before this instance writes the proxy
/// offline: a proxy that moves to another replica (or back) is online
/// there within a status flush, so a move never shows as offline.
pub(crate) const DISCONNECT_GRACE: Duration = Duration::from_secs(3);

/// What an instance may write about a proxy's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presence {
    /// Its stream is open here; the generation it recorded, if any yet.
    Connected(Option<u64>),
    /// Its stream here closed; the generation that stream recorded.
    Disconnected(Option<u64>),
    /// Its stream is open here, but a newer stream on another replica took
    /// the connection over: this instance takes it back only once the
    /// stored status says the proxy is offline (that newer stream closed
    /// first).
    Standby,
    /// Another instance holds (or last held) the stream.
    Observer,
}

/// `Ready` for a proxy whose control-plane replica went away while it held
/// the stream (`why`: which replica, and how it was found gone).
pub(crate) fn departed_ready(why: &str) -> Condition {
    Condition::now(
        "Ready",
        ConditionStatus::False,
        "NotConnected",
        format!("the proxy has no xDS stream open: {why}"),
    )
}

/// The proxy's current identity certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cert {
    pub(crate) serial: String,
    pub(crate) spiffe_id: String,
    pub(crate) backend: Option<String>,
    pub(crate) issued_at: SystemTime,
    pub(crate) not_after: SystemTime,
    pub(crate) delivery: Delivery,
}

impl Cert {
    /// The certificate a stored status names, if it names one whole.
    pub(crate) fn from_stored(m: &DataplaneMtlsStatus) -> Option<Cert> {
        Some(Cert {
            serial: m.serial.clone()?,
            spiffe_id: m.spiffe_id.clone().unwrap_or_default(),
            backend: m.issued_backend.clone(),
            issued_at: parse_time(m.last_certificate_regeneration.as_deref())?,
            not_after: parse_time(m.certificate_expiration_time.as_deref())?,
            delivery: if m.delivery.as_deref() == Some("sds") {
                Delivery::Sds
            } else {
                Delivery::Certify
            },
        })
    }

    /// When the proxy counts as stalled if it still holds this certificate.
    pub(crate) fn stall_at(&self) -> SystemTime {
        let life = self
            .not_after
            .duration_since(self.issued_at)
            .unwrap_or_default();
        self.issued_at + life.mul_f64(STALL_FRACTION)
    }
}

/// What is known about one Dataplane's proxy.
#[derive(Debug, Clone, Default)]
pub(crate) struct Proxy {
    /// Whether a stream is open (on this instance, when `ours`).
    pub(crate) online: bool,
    /// Whether the connection facts come from this instance's streams.
    pub(crate) ours: bool,
    pub(crate) control_plane: Option<String>,
    pub(crate) last_connected: Option<SystemTime>,
    pub(crate) last_disconnected: Option<SystemTime>,
    pub(crate) cert: Option<Cert>,
    /// Certificates issued to this dataplane, ever (stored count included).
    pub(crate) regenerations: u64,
    /// Outstanding NACK of the latest configuration.
    pub(crate) rejected: Option<String>,
    /// Serial of the certificate a stall warning was logged for.
    pub(crate) warned_serial: Option<String>,
    /// The connection generation this instance's current (or last) stream
    /// recorded in the store; `None` until its first write.
    pub(crate) generation: Option<u64>,
    /// When the current stream opened (tells a new stream from an update).
    pub(crate) stream_at: Option<SystemTime>,
    /// A stream of this instance closed and its outcome is not known yet
    /// (see `meshlink_dataplane_stream_closes_total`).
    pub(crate) pending_close: bool,
    /// This instance's stream is open but another replica's newer stream
    /// holds the connection ([`Presence::Standby`]).
    pub(crate) standby: bool,
    /// Changed since the last successful write.
    pub(crate) dirty: bool,
    /// The Ready reason last written (to notice expiry without an event).
    pub(crate) written_reason: Option<&'static str>,
    /// Digest and revision of this task's last status write
    /// ([`super::writer::digest`]); cleared when anyone else writes the
    /// Dataplane, so an unchanged status is skipped without a read.
    pub(crate) written: Option<(u64, u64)>,
    /// Its inbounds' applications and declared health
    /// ([`super::app_reachable`]).
    pub(crate) app: super::app_reachable::AppFacts,
}

fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}

fn parse_time(s: Option<&str>) -> Option<SystemTime> {
    s.and_then(|s| humantime::parse_rfc3339_weak(s).ok())
}

// === impl Proxy ===

impl Proxy {
    /// The state stored in `status` (after a control-plane restart).
    /// A stream recorded as held by `instance` is gone: this process just
    /// started.
    pub(crate) fn from_stored(
        status: Option<&DataplaneStatus>,
        instance: &str,
        now: SystemTime,
    ) -> Proxy {
        let mut p = Proxy::default();
        let Some(s) = status else {
            p.dirty = true;
            return p;
        };
        p.online = s.online;
        p.control_plane = s.control_plane_instance.clone();
        p.last_connected = parse_time(s.last_connected.as_deref());
        p.last_disconnected = parse_time(s.last_disconnected.as_deref());
        if s.online && s.control_plane_instance.as_deref() == Some(instance) {
            // This instance's earlier run held the stream: it is gone.
            p.ours = true;
            p.generation = Some(s.connection_generation);
            p.online = false;
            p.last_disconnected = Some(now);
            p.dirty = true;
        }
        if let Some(m) = &s.mtls {
            p.regenerations = m.certificate_regenerations;
            p.cert = Cert::from_stored(m);
        }
        p
    }

    /// Applies a stream view of this instance. `backend` is the mesh's
    /// enabled CA backend (SDS certificates do not name it).
    /// Returns `true` when the view reopens a stream whose close was still
    /// pending (the close is superseded).
    pub(crate) fn apply_view(
        &mut self,
        v: &StreamView,
        backend: Option<&str>,
        now: SystemTime,
    ) -> bool {
        let superseded = self.pending_close && v.connected;
        if v.connected {
            self.pending_close = false;
        } else if self.online || !self.ours {
            self.pending_close = true;
        }
        self.ours = true;
        if v.connected && self.stream_at != Some(v.connected_at) {
            self.stream_at = Some(v.connected_at);
            self.generation = None;
            self.standby = false;
        }
        if !v.connected {
            self.standby = false;
        }
        self.online = v.connected;
        self.control_plane = Some(v.control_plane.clone());
        self.last_connected = Some(v.connected_at);
        if v.disconnected_at.is_some() {
            self.last_disconnected = v.disconnected_at;
        }
        self.rejected = v.rejected.clone();
        if let Some(c) = &v.certificate
            && self.cert.as_ref().map(|x| &x.serial) != Some(&c.serial)
        {
            let issued_at = (c.not_before + BACKDATE).min(now);
            self.new_cert(Cert {
                serial: c.serial.clone(),
                spiffe_id: c.spiffe_id.clone(),
                backend: backend.map(str::to_owned),
                issued_at,
                not_after: c.not_after,
                delivery: Delivery::Sds,
            });
        }
        self.dirty = true;
        superseded
    }

    /// Applies an issuance event.
    pub(crate) fn apply_issuance(&mut self, e: &Issuance) {
        if self.cert.as_ref().map(|c| &c.serial) == Some(&e.serial) {
            return;
        }
        self.new_cert(Cert {
            serial: e.serial.clone(),
            spiffe_id: e.spiffe_id.clone(),
            backend: Some(e.backend.clone()),
            issued_at: e.issued_at,
            not_after: e.not_after,
            delivery: e.delivery,
        });
        self.dirty = true;
    }

    fn new_cert(&mut self, c: Cert) {
        self.regenerations += 1;
        self.cert = Some(c);
    }

    /// What this instance may claim about the connection when it writes.
    pub(crate) fn presence(&self) -> Presence {
        match (self.ours, self.online) {
            (true, true) if self.standby => Presence::Standby,
            (true, true) => Presence::Connected(self.generation),
            (true, false) => Presence::Disconnected(self.generation),
            (false, _) => Presence::Observer,
        }
    }

    /// Whether the status write should wait: this instance's stream closed
    /// less than [`DISCONNECT_GRACE`] ago, and the proxy may be connecting
    /// to another replica, whose write must come first.
    pub(crate) fn disconnect_pending(&self, now: SystemTime) -> bool {
        self.ours
            && !self.online
            && self
                .last_disconnected
                .is_some_and(|t| now < t + DISCONNECT_GRACE)
    }

    /// Whether this instance holds the proxy's connection now (its stream
    /// is open here and no newer stream elsewhere took over).
    pub(crate) fn connected_here(&self) -> bool {
        self.ours && self.online && !self.standby
    }

    /// Whether this instance has a stream of the proxy open, holding the
    /// connection or standing by.
    pub(crate) fn stream_open_here(&self) -> bool {
        self.ours && self.online
    }

    /// Whether the proxy is connected (here, or to another replica as the
    /// store says) and past [`STALL_FRACTION`] of its certificate's
    /// lifetime.
    pub(crate) fn stalled(&self, mtls: bool, now: SystemTime) -> bool {
        mtls && self.online && self.cert.as_ref().is_some_and(|c| now >= c.stall_at())
    }

    /// The status fields.
    pub(crate) fn status(&self) -> DataplaneStatus {
        DataplaneStatus {
            online: self.online,
            control_plane_instance: self.control_plane.clone(),
            connection_generation: self.generation.unwrap_or(0),
            last_connected: self.last_connected.map(rfc3339),
            last_disconnected: self.last_disconnected.map(rfc3339),
            mtls: self.cert.as_ref().map(|c| DataplaneMtlsStatus {
                certificate_expiration_time: Some(rfc3339(c.not_after)),
                last_certificate_regeneration: Some(rfc3339(c.issued_at)),
                certificate_regenerations: self.regenerations,
                issued_backend: c.backend.clone(),
                serial: Some(c.serial.clone()),
                spiffe_id: Some(c.spiffe_id.clone()),
                delivery: Some(c.delivery.as_str().to_owned()),
            }),
            unreachable_apps: self.app.unreachable(),
            unhealthy_endpoints: self.app.unhealthy_endpoints(),
        }
    }

    /// The Ready condition: connected, holding an unexpired certificate
    /// (when the mesh has mTLS), the last configuration ACKed, and every
    /// inbound taking traffic (its application reachable, its health not
    /// declared not ready: [`super::app_reachable::AppFacts::not_ready`]).
    pub(crate) fn ready(
        &self,
        mtls: bool,
        now: SystemTime,
    ) -> (ConditionStatus, &'static str, String) {
        if !self.online {
            let msg = match (&self.last_disconnected, &self.control_plane) {
                (Some(t), Some(cp)) => format!(
                    "the proxy has no xDS stream open; its last stream to {cp} closed at {}",
                    rfc3339(*t)
                ),
                _ => "the proxy has never connected to the control plane".to_owned(),
            };
            return (ConditionStatus::False, "NotConnected", msg);
        }
        if mtls {
            match &self.cert {
                None => {
                    return (
                        ConditionStatus::False,
                        "NoCertificate",
                        "the mesh has mTLS but no identity certificate was issued to this proxy yet \
                         (meshlink-proxy asks Certify; Envoy clients get one over SDS)"
                            .to_owned(),
                    );
                }
                Some(c) if c.not_after <= now => {
                    return (
                        ConditionStatus::False,
                        "CertificateExpired",
                        format!(
                            "certificate {} (serial {}) expired at {} and was not renewed",
                            c.spiffe_id,
                            c.serial,
                            rfc3339(c.not_after)
                        ),
                    );
                }
                Some(_) => {}
            }
        }
        if let Some(r) = &self.rejected {
            return (
                ConditionStatus::False,
                "ConfigRejected",
                format!("the proxy rejected the latest configuration (NACK): {r}"),
            );
        }
        if let Some((reason, message)) = self.app.not_ready() {
            return (ConditionStatus::False, reason, message);
        }
        let cert = match (&self.cert, mtls) {
            (Some(c), true) => format!(", certificate valid until {}", rfc3339(c.not_after)),
            _ => String::new(),
        };
        (
            ConditionStatus::True,
            "Connected",
            format!("connected{cert}, latest configuration ACKed"),
        )
    }

    /// [`Proxy::ready`] as a condition stamped now.
    pub(crate) fn ready_condition(&self, mtls: bool, now: SystemTime) -> Condition {
        let (s, reason, message) = self.ready(mtls, now);
        Condition::now("Ready", s, reason, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meshlink_xds::hub::IdentityInfo;
    use meshlink_xds::owner::ProxyKey;

    const T0: Duration = Duration::from_secs(1_800_000_000);

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + T0 + Duration::from_secs(secs)
    }

    fn issuance(serial: &str, issued: u64, life: u64) -> Issuance {
        Issuance {
            mesh: "default".into(),
            dataplane: "web-1".into(),
            serial: serial.into(),
            spiffe_id: "spiffe://default/web".into(),
            ca_fingerprint: "ff".into(),
            backend: "ca-1".into(),
            issued_at: at(issued),
            not_after: at(issued + life),
            delivery: Delivery::Certify,
            holder: Default::default(),
        }
    }

    fn view(connected: bool, cert: Option<IdentityInfo>, rejected: Option<&str>) -> StreamView {
        StreamView {
            key: ProxyKey::new("default", "web-1"),
            connected,
            control_plane: "cp-a".into(),
            connected_at: at(0),
            disconnected_at: (!connected).then(|| at(5)),
            certificate: cert,
            rejected: rejected.map(str::to_owned),
            holder: Default::default(),
            taken_over: false,
        }
    }

    #[test]
    fn ready_names_what_is_missing_in_order() {
        let mut p = Proxy::default();
        assert_eq!(p.ready(true, at(0)).1, "NotConnected");
        p.apply_view(&view(true, None, None), Some("ca-1"), at(1));
        assert_eq!(p.ready(true, at(1)).1, "NoCertificate");
        assert_eq!(
            p.ready(false, at(1)).0,
            ConditionStatus::True,
            "no mTLS, no certificate needed"
        );
        p.apply_issuance(&issuance("01", 1, 20));
        assert_eq!(p.ready(true, at(2)).0, ConditionStatus::True);
        assert_eq!(p.ready(true, at(21)).1, "CertificateExpired");
        p.apply_issuance(&issuance("02", 12, 20));
        p.apply_view(
            &view(true, None, Some("Listener: bad")),
            Some("ca-1"),
            at(13),
        );
        let (s, reason, msg) = p.ready(true, at(13));
        assert_eq!((s, reason), (ConditionStatus::False, "ConfigRejected"));
        assert!(msg.contains("Listener: bad"), "{msg}");
        p.apply_view(&view(false, None, None), Some("ca-1"), at(14));
        let (_, reason, msg) = p.ready(true, at(14));
        assert_eq!(reason, "NotConnected");
        assert!(msg.contains("cp-a"), "{msg}");
    }

    #[test]
    fn regenerations_count_new_serials_from_both_paths_once() {
        let mut p = Proxy::default();
        p.apply_issuance(&issuance("01", 0, 20));
        p.apply_issuance(&issuance("01", 0, 20));
        let sds = IdentityInfo {
            serial: "02".into(),
            spiffe_id: "spiffe://default/web".into(),
            ca_fingerprint: "ff".into(),
            not_before: at(10) - BACKDATE,
            not_after: at(30),
        };
        p.apply_view(&view(true, Some(sds.clone()), None), Some("ca-1"), at(10));
        // The same SDS certificate on a reconnect is no regeneration.
        p.apply_view(&view(true, Some(sds), None), Some("ca-1"), at(11));
        let s = p.status();
        let m = s.mtls.expect("mtls status");
        assert_eq!(m.certificate_regenerations, 2);
        assert_eq!(m.serial.as_deref(), Some("02"));
        assert_eq!(m.delivery.as_deref(), Some("sds"));
        assert_eq!(m.issued_backend.as_deref(), Some("ca-1"));
        assert_eq!(m.last_certificate_regeneration, Some(rfc3339(at(10))));
        assert!(s.online);
    }

    #[test]
    fn stalled_after_80_percent_without_renewal_and_only_while_connected() {
        let mut p = Proxy::default();
        p.apply_view(&view(true, None, None), Some("ca-1"), at(0));
        p.apply_issuance(&issuance("01", 0, 20));
        assert!(!p.stalled(true, at(15)));
        assert!(p.stalled(true, at(16)));
        assert!(!p.stalled(false, at(16)), "no mTLS, nothing to renew");
        p.apply_issuance(&issuance("02", 16, 20));
        assert!(!p.stalled(true, at(16)), "renewed");
        p.apply_view(&view(false, None, None), Some("ca-1"), at(40));
        assert!(
            !p.stalled(true, at(40)),
            "disconnected proxies are not counted"
        );
    }

    #[test]
    fn stored_status_round_trips_and_a_restart_marks_own_streams_offline() {
        let mut p = Proxy::default();
        p.apply_view(&view(true, None, None), Some("ca-1"), at(0));
        p.apply_issuance(&issuance("01", 0, 20));
        let stored = p.status();
        let other = Proxy::from_stored(Some(&stored), "cp-b", at(50));
        assert!(other.online && !other.ours && !other.dirty);
        assert_eq!(other.status(), stored);
        let mine = Proxy::from_stored(Some(&stored), "cp-a", at(50));
        assert!(!mine.online && mine.dirty);
        assert_eq!(mine.last_disconnected, Some(at(50)));
        assert_eq!(mine.cert, p.cert);
        assert_eq!(mine.regenerations, 1);
    }
}
