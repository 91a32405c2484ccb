//! Sidecar resources (meshlink-proxy and Envoy clients).
//!
//! Owns the shape of a sidecar's configuration: one listener per inbound
//! (TLS + RBAC when mTLS is on, then `tcp_proxy` to the local application
//! cluster), one per outbound (`tcp_proxy` to the destination), and an
//! EDS cluster plus load assignment per destination. An inbound or a
//! destination of the HTTP family (`protocol`) gets the HTTP shape
//! instead (`http`, `routes`): one HCM filter and its RouteConfiguration.
//! It must never emit secret contents (see `tls::secrets`).

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster, cluster::ClusterDiscoveryType, cluster::DiscoveryType, cluster::EdsClusterConfig,
    cluster::LbPolicy,
};
use envoy_types::pb::envoy::config::core::v3::{TrafficDirection, TransportSocket};
use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier, tcp_proxy::WeightedCluster, tcp_proxy::weighted_cluster,
};
use envoy_types::pb::google::protobuf::Duration;
use envoy_types::util::pack_any;
use meshlink_api::spec::{DataplaneSpec, Inbound, InboundTarget, Tags, TcpRuleConf};

use super::endpoints::{assignment, socket_address};
use super::memo::{ClusterKey, Memo};
use super::policies::{self, Destination, OutboundPolicies};
use super::protocol::{self, Protocol};
use super::routes::{self, Backend, Outbound};
use super::snapshot::Versioned;
use super::{
    MeshView, Snapshot, access_log, circuit_breaker, fault, health_check, http, load_balancing,
    mesh_service, metric, names, network, rate_limit, rbac, tls, trace, transparent,
};

/// Envoy's name of the TCP proxy filter.
const TCP_PROXY_FILTER: &str = "envoy.filters.network.tcp_proxy";

/// Connect timeout of every generated cluster.
pub(super) const CONNECT_TIMEOUT: Duration = Duration {
    seconds: 5,
    nanos: 0,
};

/// What the outbounds of one sidecar share while they are translated.
struct Outbounds<'a> {
    view: &'a MeshView,
    /// The sidecar's SDS identity secret (mTLS on).
    identity: Option<String>,
    /// The client is meshlink-proxy (it takes meshlink's own extensions,
    /// e.g. the TCP access logger; Envoy does not).
    meshlink_proxy: bool,
    /// The L7 policies selecting the sidecar, folded on first use (only
    /// HTTP destinations need them).
    policies: Option<OutboundPolicies>,
    name: &'a str,
    labels: &'a BTreeMap<String, String>,
    dp: &'a DataplaneSpec,
    /// `kuma.io/service` destinations whose Cluster the sidecar needs.
    services: BTreeSet<String>,
    /// MeshService ports whose Cluster the sidecar needs.
    mesh_services: BTreeSet<(String, u16)>,
    /// `MeshServiceSubset` backends whose Cluster the sidecar needs.
    subsets: BTreeSet<(String, Tags)>,
    /// Clusters without endpoints, for MeshTCPRoutes without a reachable
    /// backend.
    empty: BTreeSet<String>,
    /// The MeshTrace selecting the sidecar, folded.
    trace: Option<meshlink_api::spec::TraceConf>,
    /// Whether the listeners being built bind their address (`false`
    /// for a transparent proxy's virtual listeners on VIPs).
    bind: bool,
}

/// Emits the listeners, clusters and load assignments of a sidecar;
/// destination clusters, load assignments and RBAC principals come from
/// (and go into) `memo`.
pub(super) fn build(
    snap: &mut Snapshot,
    view: &MeshView,
    name: &str,
    dp: &DataplaneSpec,
    meshlink_proxy: bool,
    memo: &mut Memo,
) {
    let identity = tls::identity_secret_name(dp, name).filter(|_| view.mtls_enabled());
    let no_labels = BTreeMap::new();
    let labels = view
        .dataplane_resource(name)
        .map_or(&no_labels, |r| r.labels());
    let trace = trace::dataplane_trace(view.policies(), name, labels, dp);
    if meshlink_proxy {
        metric::build(snap, view.policies(), name, labels, dp);
    }
    for inbound in &dp.networking.inbound {
        let target = InboundTarget {
            dataplane: name,
            labels,
            port: inbound.port.get(),
            name: inbound.name.as_deref(),
            tags: &inbound.tags,
        };
        let client = Client {
            identity: identity.as_deref(),
            meshlink_proxy,
            trace: trace.as_ref(),
        };
        inbound_resources(snap, view, dp, inbound, &target, client, memo);
    }
    let mut out = Outbounds {
        view,
        meshlink_proxy,
        identity,
        policies: None,
        name,
        labels,
        dp,
        services: BTreeSet::new(),
        mesh_services: BTreeSet::new(),
        subsets: BTreeSet::new(),
        empty: BTreeSet::new(),
        trace,
        bind: true,
    };
    for outbound in &dp.networking.outbound {
        let (address, port) = (outbound.address(), outbound.port.get());
        if let Some((ms, ms_port)) = outbound.mesh_service() {
            let port_name = view
                .mesh_service(ms)
                .and_then(|m| m.port(ms_port))
                .and_then(|p| p.name.as_deref());
            let dest = Destination {
                name: ms,
                port: Some((ms_port, port_name)),
            };
            let cluster = names::mesh_service_cluster(ms, ms_port);
            let protocol = protocol::mesh_service_port(view, ms, ms_port);
            out.listener(snap, address, port, dest, &cluster, protocol);
            out.mesh_services.insert((ms.to_owned(), ms_port));
            continue;
        }
        if let Some(key) = outbound.routing_key() {
            network::outbound(snap, view, out.identity.as_deref(), address, port, key);
            continue;
        }
        let Some(service) = outbound.service() else {
            continue;
        };
        let dest = Destination {
            name: service,
            port: None,
        };
        let cluster = names::service_cluster(service);
        let protocol = protocol::service(view, service);
        out.listener(snap, address, port, dest, &cluster, protocol);
        out.services.insert(service.to_owned());
    }
    if let Some(tp) = &dp.networking.transparent_proxying {
        out.bind = false;
        let own = transparent::own_inbounds(dp);
        for (service, vip) in transparent::service_vips(view, tp) {
            let dest = Destination {
                name: service,
                port: None,
            };
            let cluster = names::service_cluster(service);
            let protocol = protocol::service(view, service);
            let port = transparent::SERVICE_VIP_PORT;
            out.listener(snap, vip, port, dest, &cluster, protocol);
            // A call to one of its Dataplanes' own address and port is
            // the service's too (as a VIP call; not pinned to that one).
            for (address, port) in transparent::endpoints(view, service, &own) {
                out.listener(snap, &address, port, dest, &cluster, protocol);
            }
            out.services.insert(service.to_owned());
        }
        for (ms, vip) in transparent::mesh_service_vips(view, tp) {
            let ports = view
                .mesh_service(ms)
                .map(|m| m.ports.clone())
                .unwrap_or_default();
            for p in ports {
                let ms_port = p.port.get();
                let dest = Destination {
                    name: ms,
                    port: Some((ms_port, p.name.as_deref())),
                };
                let cluster = names::mesh_service_cluster(ms, ms_port);
                let protocol = protocol::mesh_service_port(view, ms, ms_port);
                out.listener(snap, vip, ms_port, dest, &cluster, protocol);
                out.mesh_services.insert((ms.to_owned(), ms_port));
            }
        }
        out.bind = true;
        transparent::capture(snap, view, tp);
        transparent::dns(snap, view, tp);
    }
    for service in std::mem::take(&mut out.services) {
        let tuning = out.tuning(Destination {
            name: &service,
            port: None,
        });
        let name = names::service_cluster(&service);
        let identity = out.identity.as_ref();
        let cluster = service_cluster(view, identity, &service, &name, &tuning, memo);
        snap.insert_shared(name.clone(), cluster);
        let cla = super::service_load_assignment(view, memo, &service);
        snap.insert_shared(name, cla);
    }
    for (service, tags) in std::mem::take(&mut out.subsets) {
        let tuning = out.tuning(Destination {
            name: &service,
            port: None,
        });
        let name = names::subset_cluster(&service, &tags);
        let identity = out.identity.as_ref();
        let cluster = service_cluster(view, identity, &service, &name, &tuning, memo);
        snap.insert_shared(name.clone(), cluster);
        let cla = super::subset_load_assignment(view, memo, &service, &tags);
        snap.insert_shared(name, cla);
    }
    for name in std::mem::take(&mut out.empty) {
        let cluster = Cluster {
            name: name.clone(),
            connect_timeout: Some(CONNECT_TIMEOUT),
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
            load_assignment: Some(assignment(name.clone(), [])),
            ..Default::default()
        };
        snap.insert(name, &cluster);
    }
    let mesh_services: BTreeMap<(String, u16), _> = std::mem::take(&mut out.mesh_services)
        .into_iter()
        .map(|(ms, port)| {
            let port_name = view
                .mesh_service(&ms)
                .and_then(|m| m.port(port))
                .and_then(|p| p.name.as_deref());
            let tuning = out.tuning(Destination {
                name: &ms,
                port: Some((port, port_name)),
            });
            ((ms, port), tuning)
        })
        .collect();
    let identity = out.identity.as_ref();
    mesh_service::clusters(snap, view, identity, false, &mesh_services, memo);
}

// === impl Outbounds ===

impl Outbounds<'_> {
    /// The L7 policies that select this Dataplane, folded once on first use.
    fn policies(&mut self) -> &OutboundPolicies {
        let (view, name, labels, dp) = (self.view, self.name, self.labels, self.dp);
        self.policies
            .get_or_insert_with(|| OutboundPolicies::new(view.policies(), name, labels, dp))
    }

    /// What policies set on the Cluster of `dest`: MeshTimeout's
    /// `connectionTimeout`, MeshCircuitBreaker's, MeshLoadBalancingStrategy's
    /// and MeshHealthCheck's conf (each `None` when no policy sets it; the
    /// defaults stand).
    fn tuning(&mut self, dest: Destination<'_>) -> ClusterTuning {
        if self.view.policies().is_empty() {
            return ClusterTuning::default();
        }
        let conf = self.policies().timeout(dest, None);
        ClusterTuning {
            connect_timeout: http::kuma_duration(conf.connection_timeout.as_deref()),
            circuit_breaker: self.policies().circuit_breaker(dest),
            load_balancing: self.policies().load_balancing(dest),
            health_check: self.policies().health_check(dest),
        }
    }

    /// Records that a route sends to `b`: its Cluster joins the sidecar's.
    fn needs(&mut self, b: Backend) {
        match b {
            Backend::Service(s) => self.services.insert(s),
            Backend::MeshService(n, p) => self.mesh_services.insert((n, p)),
            Backend::Subset(s, tags) => self.subsets.insert((s, tags)),
        };
    }

    /// The `tcp_proxy` of a TCP outbound to `dest`: to `cluster`, or
    /// by weight to a MeshTCPRoute's backends; with MeshTimeout's
    /// `idleTimeout`.
    fn tcp_filter(&mut self, name: &str, dest: Destination<'_>, cluster: &str) -> Filter {
        if self.view.policies().is_empty() {
            return tcp_proxy(name, cluster.to_owned());
        }
        let idle = self.policies().timeout(dest, None).idle_timeout;
        let idle = http::kuma_duration(idle.as_deref());
        let attempts = self
            .policies()
            .retry(dest, None)
            .and_then(|r| r.tcp?.max_connect_attempt)
            .and_then(|n| u32::try_from(n).ok());
        let route = self.policies().tcp_route(dest);
        let Some(TcpRuleConf { backend_refs }) = route.filter(|r| !r.backend_refs.is_empty())
        else {
            let single = ClusterSpecifier::Cluster(cluster.to_owned());
            return tcp_proxy_with(name, single, idle, attempts);
        };
        let mut clusters = Vec::new();
        for r in &backend_refs {
            let Some(b) = Backend::of(self.view, r) else {
                continue;
            };
            clusters.push(weighted_cluster::ClusterWeight {
                name: b.cluster(),
                weight: r.effective_weight(),
                ..Default::default()
            });
            self.needs(b);
        }
        if clusters.iter().all(|c| c.weight == 0) {
            // No reachable backend with a weight: a cluster without
            // endpoints, so every connection is closed at once.
            let empty = names::no_backend_cluster(name);
            self.empty.insert(empty.clone());
            clusters = vec![weighted_cluster::ClusterWeight {
                name: empty,
                weight: 1,
                ..Default::default()
            }];
        }
        let specifier = ClusterSpecifier::WeightedClusters(WeightedCluster { clusters });
        tcp_proxy_with(name, specifier, idle, attempts)
    }

    /// The outbound Listener on `address:port` to `dest` (Cluster
    /// `cluster`): `tcp_proxy`, or for an HTTP destination an HCM with
    /// its RouteConfiguration (whose backends join the needed clusters).
    fn listener(
        &mut self,
        snap: &mut Snapshot,
        address: &str,
        port: u16,
        dest: Destination<'_>,
        cluster: &str,
        protocol: Protocol,
    ) {
        let name = names::outbound_listener(address, port);
        let filter = if protocol.is_http() {
            let view = self.view;
            let (dp, dp_name, tcp_logger) = (self.dp, self.name, self.meshlink_proxy);
            let service = dp.identity_service(dp_name).unwrap_or(dp_name);
            let tracing = self
                .trace
                .as_ref()
                .and_then(|t| trace::tracing(t, service, false, dest.name));
            let policies = self.policies();
            let out = Outbound {
                dest,
                cluster,
                protocol,
                proxyless: false,
            };
            let mut backends = BTreeSet::new();
            let routes = routes::outbound_routes(name.clone(), view, policies, out, &mut backends);
            let logs = access_log::access_logs(
                policies.access_log(dest).as_ref(),
                access_log::LogContext {
                    mesh: view.mesh_name(),
                    inbound: false,
                    service: dp.identity_service(dp_name).unwrap_or(dp_name),
                    destination: dest.name,
                    address: &dp.networking.address,
                    tcp_logger,
                },
            );
            let timeouts = policies.timeout(dest, None);
            let hcm = http::hcm(&name, Vec::new(), &timeouts, false, logs, tracing);
            snap.insert(name.clone(), &routes);
            for b in backends {
                self.needs(b);
            }
            hcm
        } else {
            self.tcp_filter(&name, dest, cluster)
        };
        let listener = Listener {
            name: name.clone(),
            address: Some(socket_address(address, port)),
            filter_chains: vec![FilterChain {
                filters: vec![filter],
                ..Default::default()
            }],
            traffic_direction: TrafficDirection::Outbound as i32,
            bind_to_port: (!self.bind).then(transparent::not_bound).flatten(),
            ..Default::default()
        };
        snap.insert(name, &listener);
    }
}

/// What policies set on one destination Cluster.
#[derive(Debug, Clone, Default)]
pub(super) struct ClusterTuning {
    /// MeshTimeout's `connectionTimeout` (`None`: the default).
    pub(super) connect_timeout: Option<Duration>,
    /// MeshCircuitBreaker's conf (`None`: none applies).
    pub(super) circuit_breaker: Option<meshlink_api::spec::CircuitBreakerConf>,
    /// MeshLoadBalancingStrategy's conf (`None`: none applies).
    pub(super) load_balancing: Option<meshlink_api::spec::LoadBalancingConf>,
    /// MeshHealthCheck's conf (`None`: none applies).
    pub(super) health_check: Option<meshlink_api::spec::HealthCheckConf>,
}

impl ClusterTuning {
    /// The memo key of a Cluster with this tuning for `service`.
    pub(super) fn key(
        &self,
        service: String,
        identity: Option<String>,
        grpc: bool,
        protocol: Protocol,
    ) -> ClusterKey {
        ClusterKey {
            service,
            identity,
            grpc,
            protocol,
            connect_timeout: self.connect_timeout.map(|d| (d.seconds, d.nanos)),
            circuit_breaker: conf_key(self.circuit_breaker.as_ref()),
            load_balancing: conf_key(self.load_balancing.as_ref()),
            health_check: conf_key(self.health_check.as_ref()),
        }
    }
}

/// The memo key of a policy's `conf` (its canonical JSON; `None` when
/// no policy sets it).
fn conf_key<T: serde::Serialize>(conf: Option<&T>) -> Option<String> {
    conf.and_then(|c| serde_json::to_string(c).ok())
}

/// The (memoized) Cluster `name` of destination `service` (the whole
/// service, or a subset of it) for a sidecar with SDS identity
/// `identity`: EDS, TLS requiring the service's SPIFFE ID, for an HTTP
/// service HTTP/2 (ALPN `h2`), MeshTimeout's `connectionTimeout` and
/// MeshCircuitBreaker's limits and detection.
fn service_cluster(
    view: &MeshView,
    identity: Option<&String>,
    service: &str,
    name: &str,
    tuning: &ClusterTuning,
    memo: &mut Memo,
) -> std::sync::Arc<Versioned> {
    let protocol = protocol::service(view, service);
    let key = tuning.key(name.to_owned(), identity.cloned(), false, protocol);
    memo.cluster(key, || {
        let transport = identity.map(|id| {
            let spiffe = names::spiffe_id(view.trust_domain(), service);
            if protocol.is_http() {
                tls::upstream_sds_any_alpn(
                    id.clone(),
                    view.mesh_name(),
                    vec![spiffe],
                    http::UPSTREAM_ALPN,
                )
            } else {
                tls::upstream_sds(id.clone(), view.mesh_name(), spiffe)
            }
        });
        let cluster = destination_cluster(name.to_owned(), transport, protocol, tuning);
        Versioned::encode(&cluster)
    })
}

/// [`eds_cluster`], speaking HTTP/2 to its hosts when `protocol` is HTTP,
/// with what `tuning` sets.
pub(super) fn destination_cluster(
    name: String,
    transport: Option<TransportSocket>,
    protocol: Protocol,
    tuning: &ClusterTuning,
) -> Cluster {
    let mut cluster = eds_cluster(name, transport);
    if protocol.is_http() {
        cluster.typed_extension_protocol_options = http::upstream_h2();
    }
    if let Some(t) = tuning.connect_timeout {
        cluster.connect_timeout = Some(t);
    }
    if let Some(cb) = &tuning.circuit_breaker {
        circuit_breaker::apply(&mut cluster, cb);
    }
    load_balancing::apply(tuning.load_balancing.as_ref(), &mut cluster);
    if let Some(hc) = &tuning.health_check {
        health_check::apply(&mut cluster, hc, protocol);
    }
    cluster
}

/// Who an inbound's resources are for.
#[derive(Debug, Clone, Copy)]
struct Client<'a> {
    /// The sidecar's SDS identity secret (mTLS on).
    identity: Option<&'a str>,
    /// The client is meshlink-proxy (see [`Outbounds`]).
    meshlink_proxy: bool,
    /// The MeshTrace conf that selects the sidecar, if any.
    trace: Option<&'a meshlink_api::spec::TraceConf>,
}

fn inbound_resources(
    snap: &mut Snapshot,
    view: &MeshView,
    dp: &DataplaneSpec,
    inbound: &Inbound,
    target: &InboundTarget<'_>,
    client: Client<'_>,
    memo: &mut Memo,
) {
    let identity = client.identity;
    // A tagless inbound (selected by a MeshService) is named after the
    // Dataplane's identity.
    let Some(service) = inbound.service().or(dp.identity_service(target.dataplane)) else {
        return;
    };
    let address = inbound.effective_address(&dp.networking.address);
    let port = inbound.port.get();
    let service_port = inbound.effective_service_port();
    let name = names::inbound_listener(address, port);
    let local = names::inbound_cluster(service, service_port);

    let protocol = protocol::inbound(&inbound.tags);
    let timeouts = policies::inbound_timeout(view.policies(), target);
    // MeshRateLimit local.tcp first: a connection over the rate is closed
    // before anything else runs (as Kuma places it).
    let mut filters: Vec<Filter> = policies::inbound_tcp_rate_limit(view.policies(), target)
        .as_ref()
        .and_then(rate_limit::connection_filter)
        .into_iter()
        .collect();
    let transport_socket;
    let sources = identity.map(|_| {
        let key = rbac::rbac_key(view, target);
        memo.rbac(key, || rbac::inbound_sources(view, target))
    });
    if protocol.is_http() {
        let mut http_filters = sources
            .as_deref()
            .map(rbac::inbound_http_filters)
            .unwrap_or_default();
        // MeshRateLimit after RBAC: a refused client spends no token.
        http_filters.extend(
            policies::inbound_http_rate_limit(view.policies(), target)
                .as_ref()
                .and_then(rate_limit::filter),
        );
        let logs = access_log::access_logs(
            policies::inbound_access_log(view.policies(), target).as_ref(),
            access_log::LogContext {
                mesh: view.mesh_name(),
                inbound: true,
                service,
                destination: service,
                address: &dp.networking.address,
                tcp_logger: client.meshlink_proxy,
            },
        );
        // MeshFaultInjection after the rate limit: one filter per step.
        http_filters.extend(fault::inbound_filters(view, target));
        let tracing = client
            .trace
            .and_then(|t| trace::tracing(t, service, true, service));
        filters.push(http::hcm(
            &name,
            http_filters,
            &timeouts,
            true,
            logs,
            tracing,
        ));
        let routes = http::inbound_routes(
            name.clone(),
            service,
            local.clone(),
            http::request_timeout(&timeouts),
        );
        snap.insert(name.clone(), &routes);
        transport_socket = identity.map(|id| {
            tls::downstream_sds_alpn(id.to_owned(), view.mesh_name(), http::INBOUND_ALPN)
        });
    } else {
        if let Some(sources) = &sources {
            filters.extend(rbac::inbound_filters(sources, &name));
        }
        transport_socket = identity.map(|id| tls::downstream_sds(id.to_owned(), view.mesh_name()));
        filters.push(tcp_proxy_idle(
            &name,
            local.clone(),
            http::kuma_duration(timeouts.idle_timeout.as_deref()),
        ));
    }
    let listener = Listener {
        name: name.clone(),
        address: Some(socket_address(address, port)),
        filter_chains: vec![FilterChain {
            filters,
            transport_socket,
            ..Default::default()
        }],
        traffic_direction: TrafficDirection::Inbound as i32,
        // Behind a transparent proxy the application listens on the
        // inbound's port; redirected connections arrive through the
        // inbound capture listener.
        bind_to_port: dp
            .networking
            .transparent_proxying
            .as_ref()
            .and_then(|_| transparent::not_bound()),
        ..Default::default()
    };
    snap.insert(name, &listener);

    let connect_timeout = http::kuma_duration(timeouts.connection_timeout.as_deref());
    let mut cluster = Cluster {
        name: local.clone(),
        connect_timeout: Some(connect_timeout.unwrap_or(CONNECT_TIMEOUT)),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Static as i32)),
        load_assignment: Some(assignment(
            local.clone(),
            [(inbound.effective_service_address().to_owned(), service_port)],
        )),
        ..Default::default()
    };
    if protocol.app_speaks_h2() {
        cluster.typed_extension_protocol_options = http::upstream_h2();
    }
    if let Some(cb) = policies::inbound_circuit_breaker(view.policies(), target) {
        circuit_breaker::apply(&mut cluster, &cb);
    }
    snap.insert(local, &cluster);
}

pub(super) fn tcp_proxy(stat_prefix: &str, cluster: String) -> Filter {
    tcp_proxy_idle(stat_prefix, cluster, None)
}

/// A `tcp_proxy` to `cluster` with MeshTimeout's `idleTimeout` (`None`:
/// unset, the proxy's default of 1 h, and the resource stays as it was).
pub(super) fn tcp_proxy_idle(
    stat_prefix: &str,
    cluster: String,
    idle_timeout: Option<Duration>,
) -> Filter {
    let cluster = ClusterSpecifier::Cluster(cluster);
    tcp_proxy_with(stat_prefix, cluster, idle_timeout, None)
}

/// A `tcp_proxy` to `cluster_specifier`, with MeshTimeout's `idleTimeout`
/// and MeshRetry's `tcp.maxConnectAttempt` when set.
fn tcp_proxy_with(
    stat_prefix: &str,
    cluster_specifier: ClusterSpecifier,
    idle_timeout: Option<Duration>,
    max_connect_attempts: Option<u32>,
) -> Filter {
    let proxy = TcpProxy {
        stat_prefix: stat_prefix.to_owned(),
        cluster_specifier: Some(cluster_specifier),
        idle_timeout,
        max_connect_attempts: max_connect_attempts
            .map(|value| envoy_types::pb::google::protobuf::UInt32Value { value }),
        ..Default::default()
    };
    Filter {
        name: TCP_PROXY_FILTER.to_owned(),
        config_type: Some(filter::ConfigType::TypedConfig(pack_any(proxy))),
    }
}

/// A round-robin EDS cluster over ADS, with TLS when `transport` is given.
pub(super) fn eds_cluster(name: String, transport: Option<TransportSocket>) -> Cluster {
    Cluster {
        name,
        connect_timeout: Some(CONNECT_TIMEOUT),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(tls::ads()),
            service_name: String::new(),
        }),
        lb_policy: LbPolicy::RoundRobin as i32,
        transport_socket: transport,
        ..Default::default()
    }
}
