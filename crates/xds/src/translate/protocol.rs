//! Which application protocol an inbound, a `kuma.io/service` destination
//! or a MeshService port speaks.
//!
//! Owns the one rule every client shares (DESIGN.md §11: protocol is
//! declared, not guessed): an inbound's `kuma.io/protocol` tag, a
//! destination's agreement of all its inbounds, a MeshService port's
//! `appProtocol`. `tcp` is the default, and `kafka` or an unknown value is
//! `tcp` too. It also keeps the per-service index the view needs to answer
//! "do all inbounds of this service agree" without a scan. It must never
//! look at traffic: nothing here is detected.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use meshlink_api::spec::{DataplaneSpec, Tags};

use super::MeshView;

/// The tag that declares an inbound's protocol.
pub const PROTOCOL_TAG: &str = "kuma.io/protocol";

/// An application protocol, as the translator distinguishes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// Opaque bytes (also `kafka` and anything unknown).
    Tcp,
    /// HTTP/1.1 (or HTTP/2) from the application.
    Http,
    /// HTTP/2 from the application.
    Http2,
    /// gRPC (HTTP/2 with gRPC semantics).
    Grpc,
}

// === impl Protocol ===

impl Protocol {
    /// The protocol a declared value names (`tcp` for unknown ones).
    pub fn parse(value: &str) -> Protocol {
        match value {
            "http" => Protocol::Http,
            "http2" => Protocol::Http2,
            "grpc" => Protocol::Grpc,
            _ => Protocol::Tcp,
        }
    }

    /// Whether requests are routed one by one (HCM and RDS), not bytes.
    pub fn is_http(self) -> bool {
        self != Protocol::Tcp
    }

    /// Whether the application itself must be spoken to in HTTP/2.
    pub(crate) fn app_speaks_h2(self) -> bool {
        matches!(self, Protocol::Http2 | Protocol::Grpc)
    }
}

/// The protocol an inbound declares with its tags.
pub fn inbound(tags: &Tags) -> Protocol {
    tags.get(PROTOCOL_TAG)
        .map_or(Protocol::Tcp, |p| Protocol::parse(p))
}

/// The protocol of destination `service`: the one all of its inbounds in
/// the view declare when it is of the HTTP family, else `tcp` (no
/// inbound, `tcp` inbounds, or inbounds that disagree).
pub fn service(view: &MeshView, service: &str) -> Protocol {
    view.protocol_index().agreed(service)
}

/// The protocol of port `port` of MeshService `name`: its `appProtocol`
/// when every inbound the port targets says the same with
/// `kuma.io/protocol`, else TCP. A sidecar speaks HTTP to an inbound only
/// when that inbound's own sidecar serves HTTP; an untagged inbound is a
/// TCP listener, and HTTP/2 bytes copied to its app would break.
pub fn mesh_service_port(view: &MeshView, name: &str, port: u16) -> Protocol {
    let Some(ms) = view.mesh_service(name) else {
        return Protocol::Tcp;
    };
    let Some(p) = ms.port(port) else {
        return Protocol::Tcp;
    };
    let declared = p
        .app_protocol
        .as_deref()
        .map_or(Protocol::Tcp, Protocol::parse);
    let agree = super::mesh_service::selected_dataplanes(view, ms).all(|(_, dp)| {
        dp.networking
            .inbound
            .iter()
            .filter(|i| p.targets(i))
            .all(|i| inbound(&i.tags) == declared)
    });
    if agree { declared } else { Protocol::Tcp }
}

/// `kuma.io/service` → declared protocol → number of inbounds declaring
/// it; patched with the view's Dataplanes.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProtocolIndex {
    by_service: HashMap<String, BTreeMap<Protocol, usize>>,
}

// === impl ProtocolIndex ===

impl ProtocolIndex {
    /// Counts the inbounds of `dp`.
    pub(crate) fn add(&mut self, dp: &DataplaneSpec) {
        for (service, p) in contributions(dp) {
            *self
                .by_service
                .entry(service.to_owned())
                .or_default()
                .entry(p)
                .or_default() += 1;
        }
    }

    /// Uncounts the inbounds of `dp` (which [`Self::add`] counted).
    pub(crate) fn remove(&mut self, dp: &DataplaneSpec) {
        for (service, p) in contributions(dp) {
            let Some(m) = self.by_service.get_mut(service) else {
                continue;
            };
            if let Some(n) = m.get_mut(&p) {
                *n -= 1;
                if *n == 0 {
                    m.remove(&p);
                }
            }
            if m.is_empty() {
                self.by_service.remove(service);
            }
        }
    }

    /// Whether some inbound declares `service`.
    pub(crate) fn knows(&self, service: &str) -> bool {
        self.by_service.contains_key(service)
    }

    /// See [`service`].
    pub(crate) fn agreed(&self, service: &str) -> Protocol {
        match self.by_service.get(service) {
            Some(m) if m.len() == 1 => m.keys().next().copied().unwrap_or(Protocol::Tcp),
            _ => Protocol::Tcp,
        }
    }
}

/// `(service, protocol)` of every tagged inbound of `dp`.
fn contributions(dp: &DataplaneSpec) -> impl Iterator<Item = (&str, Protocol)> {
    dp.networking
        .inbound
        .iter()
        .filter_map(|i| Some((i.service()?, inbound(&i.tags))))
}

/// `(service, protocol)` of every tagged inbound of `dp`: where two
/// versions of a Dataplane differ, the agreed protocol of those services
/// may have changed.
pub(crate) fn declared(dp: &DataplaneSpec) -> BTreeSet<(String, Protocol)> {
    contributions(dp).map(|(s, p)| (s.to_owned(), p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dp(inbounds: &[(&str, Option<&str>)]) -> DataplaneSpec {
        let inbound: Vec<serde_json::Value> = inbounds
            .iter()
            .enumerate()
            .map(|(i, (service, proto))| {
                let mut tags = serde_json::json!({"kuma.io/service": service});
                if let Some(p) = proto {
                    tags[PROTOCOL_TAG] = (*p).into();
                }
                serde_json::json!({"port": 8080 + i, "tags": tags})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "networking": {"address": "10.0.0.1", "inbound": inbound}
        }))
        .expect("a valid Dataplane spec")
    }

    #[test]
    fn declared_values_map_to_protocols_and_the_rest_is_tcp() {
        for (value, want) in [
            ("http", Protocol::Http),
            ("http2", Protocol::Http2),
            ("grpc", Protocol::Grpc),
            ("tcp", Protocol::Tcp),
            ("kafka", Protocol::Tcp),
            ("HTTP", Protocol::Tcp),
            ("", Protocol::Tcp),
        ] {
            assert_eq!(Protocol::parse(value), want, "{value:?}");
        }
        assert!(Protocol::Grpc.is_http() && !Protocol::Tcp.is_http());
        assert!(Protocol::Http2.app_speaks_h2() && !Protocol::Http.app_speaks_h2());
    }

    #[test]
    fn a_service_is_http_only_when_all_of_its_inbounds_agree() {
        let mut index = ProtocolIndex::default();
        let a = dp(&[("api", Some("http")), ("db", None)]);
        let b = dp(&[("api", Some("http"))]);
        index.add(&a);
        index.add(&b);
        assert_eq!(index.agreed("api"), Protocol::Http);
        assert_eq!(index.agreed("db"), Protocol::Tcp, "undeclared is tcp");
        assert_eq!(index.agreed("none"), Protocol::Tcp, "no inbound");

        let c = dp(&[("api", Some("grpc"))]);
        index.add(&c);
        assert_eq!(index.agreed("api"), Protocol::Tcp, "http and grpc disagree");
        index.remove(&c);
        assert_eq!(index.agreed("api"), Protocol::Http, "agreement is back");

        let d = dp(&[("api", None)]);
        index.add(&d);
        assert_eq!(index.agreed("api"), Protocol::Tcp, "http and tcp disagree");
        index.remove(&d);
        index.remove(&a);
        index.remove(&b);
        assert!(index.by_service.is_empty(), "removal undoes addition");
    }
}
