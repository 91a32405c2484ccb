//! The Dataplane kind: one workload's proxy, its inbounds and outbounds.
//!
//! Owns the Dataplane spec (Kuma-compatible `networking` block), the service
//! tag and its alias, and validation. Tags are stored exactly as written: the
//! alias `meshlink.dev/service` is never rewritten to `kuma.io/service`.

use serde::{Deserialize, Serialize};

use super::{Port, Tags};
use crate::validate::{self, Errors};

/// The tag naming a service (Kuma's).
pub const SERVICE_TAG: &str = "kuma.io/service";
/// Accepted alias of [`SERVICE_TAG`].
pub const SERVICE_TAG_ALIAS: &str = "meshlink.dev/service";

/// Where an inbound forwards to, and an outbound listens, when unset.
const DEFAULT_LOCAL_ADDRESS: &str = "127.0.0.1";

/// The service named by `tags` (`kuma.io/service`, else `meshlink.dev/service`).
pub fn service_from_tags(tags: &Tags) -> Option<&str> {
    tags.get(SERVICE_TAG)
        .or_else(|| tags.get(SERVICE_TAG_ALIAS))
        .map(String::as_str)
}

/// `spec` of a Dataplane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataplaneSpec {
    /// Address, inbounds and outbounds.
    pub networking: Networking,
}

/// `spec.networking`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Networking {
    /// The IP or hostname other proxies reach this one at.
    pub address: String,
    /// Services this workload serves; at least one, unless `gateway` is set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inbound: Vec<Inbound>,
    /// Services this workload calls, each on a local port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outbound: Vec<Outbound>,
    /// Kuma's `admin.port` (informational; see [`DataplaneAdmin`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<DataplaneAdmin>,
    /// Kuma's gateway mode: the proxy serves a gateway (no inbounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<super::Gateway>,
    /// Kuma's transparent proxying: the workload's traffic is redirected
    /// into the sidecar's capture ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transparent_proxying: Option<super::TransparentProxying>,
}

/// `spec.networking.admin`: Kuma's admin port of the data plane proxy.
/// Stored and validated only: meshlink-proxy's admin address comes from its
/// `--admin-addr` flag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataplaneAdmin {
    /// The admin port (1-65535).
    pub port: Port,
}

/// One served service: the proxy listens on `port` and forwards to the app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Inbound {
    /// Port the proxy accepts mTLS traffic on.
    pub port: Port,
    /// Kuma's inbound name: a DNS label, unique within the Dataplane, that a
    /// policy `targetRef.sectionName` names before it is read as a port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The application's port (default: `port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_port: Option<Port>,
    /// The application's IP address (default: 127.0.0.1); a hostname is
    /// refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_address: Option<String>,
    /// Kuma's inbound `address`: the IP the proxy listens on for this
    /// inbound, and other proxies reach it at (default:
    /// `networking.address`); a hostname is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Tags; include `kuma.io/service` (or `meshlink.dev/service`) unless
    /// a MeshService selects the inbound (then they may be empty).
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub tags: Tags,
    /// Kuma's inbound `health`: `ready: false` takes the inbound out of
    /// every other proxy's endpoints (unset: ready).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<InboundHealth>,
}

/// `spec.networking.inbound[].health` (Kuma's `Dataplane.Networking.Inbound.Health`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InboundHealth {
    /// Whether the inbound takes traffic; `false` removes it from the
    /// endpoints other proxies get (Kuma: "not ready").
    #[serde(default)]
    pub ready: bool,
}

/// One called service, reachable on a local port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Outbound {
    /// Local port the proxy listens on for this service.
    pub port: Port,
    /// Local address to listen on (default: 127.0.0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Tags selecting the destination; must include the service tag
    /// (unless `routing_key` or `backend_ref` is set).
    #[serde(default, skip_serializing_if = "Tags::is_empty")]
    pub tags: Tags,
    /// meshlink extension: a routing key of the multi-site network instead
    /// of a mesh service. Connections go through this site's router, to
    /// the Listener of this control plane's site for the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    /// Kuma's `backendRef`: a MeshService port instead of `tags`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_ref: Option<super::BackendRef>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `status` of a Dataplane: what the control plane observed of its proxy
/// (Kuma's DataplaneInsight, flattened). Server-owned; times are RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataplaneStatus {
    /// Whether the proxy has an open xDS stream.
    #[serde(default)]
    pub online: bool,
    /// The control-plane instance that holds (or last held) the stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_instance: Option<String>,
    /// Bumped by every new stream, on whichever replica: a replica changes
    /// the connection fields only while the stored generation is the one
    /// its own stream recorded (compare-and-set across replicas).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub connection_generation: u64,
    /// When the last stream opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_connected: Option<String>,
    /// When the last stream closed (unset while the first one is open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_disconnected: Option<String>,
    /// The proxy's identity certificate, however it was delivered
    /// (Certify CSR or SDS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtls: Option<DataplaneMtlsStatus>,
    /// Inbounds whose local application the sidecar reports unreachable
    /// (the `AppReachable` condition); other proxies get no traffic routed
    /// to them while they are listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreachable_apps: Vec<UnreachableApp>,
    /// Endpoints of other services that this sidecar (the caller) keeps
    /// out of its balancers: failing its active health check
    /// (MeshHealthCheck) or ejected by outlier detection. What this
    /// sidecar sees, not a verdict on the endpoint: other callers may see
    /// it healthy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unhealthy_endpoints: Vec<UnhealthyEndpoint>,
}

/// One entry of `status.unhealthyEndpoints` of a Dataplane: an endpoint
/// its sidecar keeps out of one cluster's balancer, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UnhealthyEndpoint {
    /// The sidecar's cluster (e.g. `backend`).
    pub cluster: String,
    /// The endpoint's address (`ip:port`).
    pub address: String,
    /// `HealthCheck` (its active health check fails) or `Outlier`
    /// (outlier detection ejected it).
    pub reason: String,
    /// Since when (RFC 3339).
    pub since: String,
}

/// One entry of `status.unreachableApps` of a Dataplane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UnreachableApp {
    /// The inbound's port (what other proxies dial).
    pub port: u16,
    /// The application address the sidecar could not connect to
    /// (`serviceAddress:servicePort`).
    pub address: String,
    /// The last connect error, as the operating system reported it.
    pub error: String,
    /// Since when (RFC 3339).
    pub since: String,
}

/// `status.mtls` of a Dataplane: its current identity certificate.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DataplaneMtlsStatus {
    /// notAfter of the current certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_expiration_time: Option<String>,
    /// When the current certificate was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_certificate_regeneration: Option<String>,
    /// How many certificates were issued to this dataplane.
    #[serde(default)]
    pub certificate_regenerations: u64,
    /// The mesh CA backend that issued the current certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_backend: Option<String>,
    /// Serial number of the current certificate (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial: Option<String>,
    /// SPIFFE ID of the current certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spiffe_id: Option<String>,
    /// `certify` (CSR from meshlink-proxy) or `sds` (key issued by the
    /// control plane for Envoy clients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
}

// === impl DataplaneSpec ===

impl DataplaneSpec {
    /// Every service this dataplane serves, in inbound order, without
    /// repeats; a gateway's service (its only one).
    pub fn services(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .gateway()
            .and_then(super::Gateway::service)
            .into_iter()
            .collect();
        for s in self.networking.inbound.iter().filter_map(Inbound::service) {
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    }

    /// The service naming this Dataplane's identity: its first service,
    /// else (inbounds without a service tag, served through MeshServices)
    /// its own `name`; `None` without inbounds.
    pub fn identity_service<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        match self.services().first() {
            Some(s) => Some(s),
            None if !self.networking.inbound.is_empty() => Some(name),
            None => None,
        }
    }

    pub(crate) fn validate(&self, errs: &mut Errors) {
        let n = &self.networking;
        validate::host(errs, "spec.networking.address", &n.address);
        if let Some(admin) = &n.admin {
            admin.port.validate(errs, "spec.networking.admin.port");
        }
        super::gateway::validate_gateway_or_inbounds(errs, n);
        if let Some(tp) = &n.transparent_proxying {
            tp.validate(errs, "spec.networking.transparentProxying");
        }
        for (i, inb) in n.inbound.iter().enumerate() {
            let at = format!("spec.networking.inbound[{i}]");
            if inb.port.validate(errs, &format!("{at}.port"))
                && let Some(j) = n.inbound[..i].iter().position(|o| o.port == inb.port)
            {
                errs.add(
                    format!("{at}.port"),
                    format!("duplicate inbound port {} (also inbound[{j}])", inb.port),
                );
            }
            if let Some(name) = &inb.name
                && inbound_name(errs, &format!("{at}.name"), name)
                && let Some(j) = n.inbound[..i]
                    .iter()
                    .position(|o| o.name.as_ref() == Some(name))
            {
                errs.add(
                    format!("{at}.name"),
                    format!("duplicate inbound name {name:?} (also inbound[{j}])"),
                );
            }
            if let Some(p) = inb.service_port {
                p.validate(errs, &format!("{at}.servicePort"));
            }
            if let Some(addr) = &inb.service_address
                && addr.parse::<std::net::IpAddr>().is_err()
            {
                errs.add(
                    format!("{at}.serviceAddress"),
                    format!(
                        "{addr:?} is not an IP address: the sidecar forwards to the application \
                         at serviceAddress:servicePort, which must be an IP (e.g. 127.0.0.1), \
                         as in Kuma; a hostname is not resolved"
                    ),
                );
            }
            if !inb.tags.is_empty() {
                // No tags: a MeshService selects the inbound by port, name
                // or the Dataplane's labels.
                service_tags(errs, &at, &inb.tags);
            }
        }
        for (i, out) in n.outbound.iter().enumerate() {
            let at = format!("spec.networking.outbound[{i}]");
            let key = (out.address(), out.port);
            if out.port.validate(errs, &format!("{at}.port"))
                && let Some(j) = n.outbound[..i]
                    .iter()
                    .position(|o| (o.address(), o.port) == key)
            {
                errs.add(
                    format!("{at}.port"),
                    format!(
                        "duplicate outbound {}:{} (also outbound[{j}])",
                        key.0, key.1
                    ),
                );
            }
            if let Some(addr) = &out.address {
                validate::host(errs, &format!("{at}.address"), addr);
            }
            if let Some(r) = &out.backend_ref {
                r.validate(errs, &format!("{at}.backendRef"));
                if !out.tags.is_empty() || out.routing_key.is_some() {
                    errs.add(
                        format!("{at}.backendRef"),
                        "both backendRef and tags/service cannot be defined: an outbound \
                         reaches a MeshService (backendRef), a kuma.io/service (tags) or a \
                         routing key; remove all but one",
                    );
                }
                continue;
            }
            match &out.routing_key {
                None => service_tags(errs, &at, &out.tags),
                Some(key) => {
                    super::service::routing_key_at(errs, &format!("{at}.routingKey"), key);
                    if out.service().is_some() {
                        errs.add(
                            format!("{at}.routingKey"),
                            "an outbound goes to a mesh service (the service tag) or to a \
                             routing key of the network, not both; remove one",
                        );
                    }
                }
            }
        }
    }
}

/// Checks an inbound `name`: a DNS label (RFC 1123: lowercase letters,
/// digits and `-`, starting and ending with a letter or digit, at most 63
/// characters) with at least one letter or `-`, since a `sectionName` of
/// digits only is an inbound's port. Returns whether it is valid.
fn inbound_name(errs: &mut Errors, at: &str, name: &str) -> bool {
    let label = validate::is_dns_label(name);
    if !label {
        errs.add(
            at,
            format!(
                "invalid inbound name {name:?}: a DNS label (lowercase letters, digits and '-', \
                 starting and ending with a letter or digit, at most 63 characters)"
            ),
        );
        return false;
    }
    if name.bytes().all(|b| b.is_ascii_digit()) {
        errs.add(
            at,
            format!(
                "invalid inbound name {name:?}: it must not be all digits, which a \
                 targetRef sectionName reads as a port"
            ),
        );
        return false;
    }
    true
}

/// Checks that `tags` name a service, consistently, and have no empty parts.
pub(super) fn service_tags(errs: &mut Errors, at: &str, tags: &Tags) {
    match (tags.get(SERVICE_TAG), tags.get(SERVICE_TAG_ALIAS)) {
        (None, None) => errs.add(
            format!("{at}.tags"),
            format!("missing the service tag: add {SERVICE_TAG}: <service name>"),
        ),
        (Some(a), Some(b)) if a != b => errs.add(
            format!("{at}.tags[{SERVICE_TAG_ALIAS:?}]"),
            format!(
                "{b:?} differs from {SERVICE_TAG} {a:?}; {SERVICE_TAG_ALIAS} is an alias, \
                 set only one of them"
            ),
        ),
        _ => {}
    }
    for (k, v) in tags {
        let path = format!("{at}.tags[{k:?}]");
        if k.trim().is_empty() {
            errs.add(path, "tag keys must not be empty");
        } else if v.trim().is_empty() {
            errs.add(path, "tag values must not be empty");
        }
    }
}

// === impl Inbound ===

impl Inbound {
    /// The service this inbound serves (either service tag).
    pub fn service(&self) -> Option<&str> {
        service_from_tags(&self.tags)
    }

    /// The application's port: `servicePort`, else `port`. Exact once the
    /// resource is validated (see [`Port::get`]).
    pub fn effective_service_port(&self) -> u16 {
        self.service_port.unwrap_or(self.port).get()
    }

    /// The address the inbound listens on and other proxies reach it at:
    /// its `address`, else the Dataplane's `networking_address`.
    pub fn effective_address<'a>(&'a self, networking_address: &'a str) -> &'a str {
        self.address.as_deref().unwrap_or(networking_address)
    }

    /// The application's address: `serviceAddress`, else 127.0.0.1.
    pub fn effective_service_address(&self) -> &str {
        self.service_address
            .as_deref()
            .unwrap_or(DEFAULT_LOCAL_ADDRESS)
    }

    /// Whether the inbound takes traffic from other proxies: its
    /// `health.ready`, ready when unset (as in Kuma).
    pub fn is_ready(&self) -> bool {
        self.health.is_none_or(|h| h.ready)
    }
}

// === impl Outbound ===

impl Outbound {
    /// The mesh service this outbound reaches (either service tag).
    pub fn service(&self) -> Option<&str> {
        service_from_tags(&self.tags)
    }

    /// The MeshService name and port this outbound reaches, if it has a
    /// `backendRef`.
    pub fn mesh_service(&self) -> Option<(&str, u16)> {
        self.backend_ref.as_ref()?.mesh_service()
    }

    /// The network routing key this outbound reaches, if it targets one.
    pub fn routing_key(&self) -> Option<&str> {
        self.routing_key.as_deref()
    }

    /// The local listening address: `address`, else 127.0.0.1.
    pub fn address(&self) -> &str {
        self.address.as_deref().unwrap_or(DEFAULT_LOCAL_ADDRESS)
    }
}
