//! The resource kinds meshlink knows, and how users may spell them.
//!
//! Owns the mapping from user input (`dp`, `Dataplanes`, `meshtrafficpermission`)
//! to a [`Kind`]. It must never accept a spelling that could mean two kinds.

use std::fmt;
use std::str::FromStr;

/// Every resource kind in the meshlink API (DESIGN.md §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A mesh: mTLS backends and defaults for its dataplanes.
    Mesh,
    /// One workload's proxy: address, inbounds, outbounds.
    Dataplane,
    /// Who may talk to whom inside a mesh.
    MeshTrafficPermission,
    /// This control plane's site in a multi-site network.
    Site,
    /// A port where the site router accepts links from other sites.
    RouterAccess,
    /// A single-use, expiring grant another site redeems to link here.
    AccessGrant,
    /// The redeemable form of an AccessGrant, applied in the other site.
    AccessToken,
    /// A link from this site's router to another site.
    Link,
    /// A local port that carries traffic to a routing key.
    Listener,
    /// A local port whose flows go to one of several routing keys, by
    /// priority (failover) or weight.
    MultiKeyListener,
    /// A host:port that serves a routing key in this site.
    Connector,
    /// TLS credentials (`kubernetes.io/tls`) named by `tlsCredentials`, and
    /// Kuma's Secret (in a mesh) and GlobalSecret; see [`Kind::allows_mesh`].
    Secret,
    /// A destination inside a mesh: selected Dataplanes and their ports.
    MeshService,
    /// Kuma's HTTP routing: matches, filters and weighted backends.
    MeshHTTPRoute,
    /// Kuma's weighted TCP routing.
    MeshTCPRoute,
    /// Kuma's connection, idle and HTTP timeouts.
    MeshTimeout,
    /// Kuma's retries for HTTP, gRPC and TCP.
    MeshRetry,
    /// Kuma's local rate limits on inbound HTTP requests and TCP connections.
    MeshRateLimit,
    /// Kuma's access logs (file, TCP, OpenTelemetry backends).
    MeshAccessLog,
    /// Kuma's load balancing per destination (ring hash, Maglev, …).
    MeshLoadBalancingStrategy,
    /// Kuma's active health checks (HTTP, TCP, gRPC) per destination.
    MeshHealthCheck,
    /// Kuma's metrics: profiles, application scraping, backends.
    MeshMetric,
    /// Kuma's HTTP fault injection (abort, delay, response bandwidth).
    MeshFaultInjection,
    /// Kuma's connection limits and outlier detection on clusters.
    MeshCircuitBreaker,
    /// Kuma's request tracing (Zipkin, Datadog, OpenTelemetry backends).
    MeshTrace,
}

impl Kind {
    /// All kinds, in the order the CLI lists them.
    pub const ALL: [Kind; 25] = [
        Kind::Mesh,
        Kind::Dataplane,
        Kind::MeshTrafficPermission,
        Kind::Site,
        Kind::RouterAccess,
        Kind::AccessGrant,
        Kind::AccessToken,
        Kind::Link,
        Kind::Listener,
        Kind::MultiKeyListener,
        Kind::Connector,
        Kind::Secret,
        Kind::MeshService,
        Kind::MeshHTTPRoute,
        Kind::MeshTCPRoute,
        Kind::MeshTimeout,
        Kind::MeshRetry,
        Kind::MeshRateLimit,
        Kind::MeshAccessLog,
        Kind::MeshLoadBalancingStrategy,
        Kind::MeshHealthCheck,
        Kind::MeshMetric,
        Kind::MeshFaultInjection,
        Kind::MeshCircuitBreaker,
        Kind::MeshTrace,
    ];

    /// The canonical `kind:` value, e.g. `MeshTrafficPermission`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Mesh => "Mesh",
            Kind::Dataplane => "Dataplane",
            Kind::MeshTrafficPermission => "MeshTrafficPermission",
            Kind::Site => "Site",
            Kind::RouterAccess => "RouterAccess",
            Kind::AccessGrant => "AccessGrant",
            Kind::AccessToken => "AccessToken",
            Kind::Link => "Link",
            Kind::Listener => "Listener",
            Kind::MultiKeyListener => "MultiKeyListener",
            Kind::Connector => "Connector",
            Kind::Secret => "Secret",
            Kind::MeshService => "MeshService",
            Kind::MeshHTTPRoute => "MeshHTTPRoute",
            Kind::MeshTCPRoute => "MeshTCPRoute",
            Kind::MeshTimeout => "MeshTimeout",
            Kind::MeshRetry => "MeshRetry",
            Kind::MeshRateLimit => "MeshRateLimit",
            Kind::MeshAccessLog => "MeshAccessLog",
            Kind::MeshLoadBalancingStrategy => "MeshLoadBalancingStrategy",
            Kind::MeshHealthCheck => "MeshHealthCheck",
            Kind::MeshMetric => "MeshMetric",
            Kind::MeshFaultInjection => "MeshFaultInjection",
            Kind::MeshCircuitBreaker => "MeshCircuitBreaker",
            Kind::MeshTrace => "MeshTrace",
        }
    }

    /// The lower-case plural used in REST paths, e.g. `meshtrafficpermissions`.
    pub fn plural(self) -> &'static str {
        match self {
            Kind::Mesh => "meshes",
            Kind::Dataplane => "dataplanes",
            Kind::MeshTrafficPermission => "meshtrafficpermissions",
            Kind::Site => "sites",
            Kind::RouterAccess => "routeraccesses",
            Kind::AccessGrant => "accessgrants",
            Kind::AccessToken => "accesstokens",
            Kind::Link => "links",
            Kind::Listener => "listeners",
            Kind::MultiKeyListener => "multikeylisteners",
            Kind::Connector => "connectors",
            Kind::Secret => "secrets",
            Kind::MeshService => "meshservices",
            Kind::MeshHTTPRoute => "meshhttproutes",
            Kind::MeshTCPRoute => "meshtcproutes",
            Kind::MeshTimeout => "meshtimeouts",
            Kind::MeshRetry => "meshretries",
            Kind::MeshRateLimit => "meshratelimits",
            Kind::MeshAccessLog => "meshaccesslogs",
            Kind::MeshLoadBalancingStrategy => "meshloadbalancingstrategies",
            Kind::MeshHealthCheck => "meshhealthchecks",
            Kind::MeshMetric => "meshmetrics",
            Kind::MeshFaultInjection => "meshfaultinjections",
            Kind::MeshCircuitBreaker => "meshcircuitbreakers",
            Kind::MeshTrace => "meshtraces",
        }
    }

    /// Short names accepted by the CLI, e.g. `dp`.
    pub fn short_names(self) -> &'static [&'static str] {
        match self {
            Kind::Dataplane => &["dp"],
            Kind::MeshTrafficPermission => &["mtp"],
            Kind::MeshService => &["msvc"],
            Kind::MultiKeyListener => &["mkl"],
            Kind::MeshHTTPRoute => &["mhr"],
            Kind::MeshTCPRoute => &["mtcpr"],
            Kind::MeshTimeout => &["mtimeout"],
            Kind::MeshRetry => &["mretry"],
            Kind::MeshRateLimit => &["mratelimit"],
            Kind::MeshAccessLog => &["mal"],
            Kind::MeshLoadBalancingStrategy => &["mlbs"],
            Kind::MeshHealthCheck => &["mhc"],
            Kind::MeshMetric => &["mmetric"],
            Kind::MeshFaultInjection => &["mfaultinjection", "mfi"],
            Kind::MeshCircuitBreaker => &["mcb"],
            Kind::MeshTrace => &["mtrace"],
            _ => &[],
        }
    }

    /// Whether resources of this kind live inside a mesh (`metadata.mesh` required).
    pub fn is_mesh_scoped(self) -> bool {
        matches!(
            self,
            Kind::Dataplane | Kind::MeshTrafficPermission | Kind::MeshService
        ) || self.is_outbound_policy()
    }

    /// Whether this is one of Kuma's policies other than
    /// MeshTrafficPermission: the routes (MeshHTTPRoute, MeshTCPRoute) and
    /// the resilience and observability policies (MeshTimeout, MeshRetry,
    /// MeshRateLimit, MeshAccessLog, …), which combine through
    /// `crate::policy`.
    pub fn is_outbound_policy(self) -> bool {
        matches!(
            self,
            Kind::MeshHTTPRoute
                | Kind::MeshTCPRoute
                | Kind::MeshTimeout
                | Kind::MeshRetry
                | Kind::MeshRateLimit
                | Kind::MeshAccessLog
                | Kind::MeshLoadBalancingStrategy
                | Kind::MeshHealthCheck
                | Kind::MeshMetric
                | Kind::MeshFaultInjection
                | Kind::MeshCircuitBreaker
                | Kind::MeshTrace
        )
    }

    /// Whether a resource of this kind may name a mesh: every mesh-scoped
    /// kind, and a Secret, whose `type` decides (`system.kuma.io/secret`
    /// requires a mesh, the other types have none).
    pub fn allows_mesh(self) -> bool {
        self.is_mesh_scoped() || self == Kind::Secret
    }

    /// A human list of the accepted kind names, for error messages.
    pub fn accepted_list() -> String {
        Kind::ALL
            .iter()
            .map(|k| k.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind name that matches no [`Kind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown kind {given:?}; expected one of: {}", Kind::accepted_list())]
pub struct UnknownKind {
    /// What the user wrote.
    pub given: String,
}

impl FromStr for Kind {
    type Err = UnknownKind;

    /// Parses a kind case-insensitively: singular, plural or short name.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        Kind::ALL
            .into_iter()
            .find(|k| {
                k.as_str().eq_ignore_ascii_case(&lower)
                    || k.plural() == lower
                    || k.short_names().contains(&lower.as_str())
            })
            .ok_or(UnknownKind {
                given: s.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_parses() {
        for k in Kind::ALL {
            assert_eq!(k.as_str().parse::<Kind>().unwrap(), k);
            assert_eq!(k.as_str().to_uppercase().parse::<Kind>().unwrap(), k);
            assert_eq!(k.plural().parse::<Kind>().unwrap(), k);
            for s in k.short_names() {
                assert_eq!(s.parse::<Kind>().unwrap(), k);
            }
        }
        assert_eq!("DP".parse::<Kind>().unwrap(), Kind::Dataplane);
    }

    #[test]
    fn no_spelling_names_two_kinds() {
        let mut seen = std::collections::BTreeMap::new();
        for k in Kind::ALL {
            let lower = k.as_str().to_ascii_lowercase();
            for s in [lower.as_str(), k.plural()]
                .into_iter()
                .chain(k.short_names().iter().copied())
            {
                if let Some(other) = seen.insert(s.to_string(), k) {
                    assert_eq!(other, k, "{s:?} names {other} and {k}");
                }
            }
        }
        assert_eq!("mretry".parse::<Kind>().unwrap(), Kind::MeshRetry);
        assert_eq!("meshretries".parse::<Kind>().unwrap(), Kind::MeshRetry);
        assert_eq!("mhr".parse::<Kind>().unwrap(), Kind::MeshHTTPRoute);
        assert_eq!("mtcpr".parse::<Kind>().unwrap(), Kind::MeshTCPRoute);
        assert_eq!("mtimeout".parse::<Kind>().unwrap(), Kind::MeshTimeout);
    }

    #[test]
    fn unknown_kind_lists_accepted() {
        let err = "gateway".parse::<Kind>().unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("\"gateway\""), "{msg}");
        assert!(msg.contains("MeshTrafficPermission"), "{msg}");
    }
}
