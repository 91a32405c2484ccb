//! Typed access to a [`Spec`]'s variants (`as_mesh`, `as_mesh_retry`, ...)
//! and to the top-level `targetRef` of any policy.
//!
//! Owns nothing but these accessors; parsing, validation and redaction stay
//! in `spec/mod.rs`.

use super::*;

// === impl Spec (accessors) ===

impl Spec {
    /// The Site spec, if this is one.
    pub fn as_site(&self) -> Option<&SiteSpec> {
        match self {
            Spec::Site(s) => Some(s),
            _ => None,
        }
    }

    /// The RouterAccess spec, if this is one.
    pub fn as_router_access(&self) -> Option<&RouterAccessSpec> {
        match self {
            Spec::RouterAccess(s) => Some(s),
            _ => None,
        }
    }

    /// The AccessGrant spec, if this is one.
    pub fn as_access_grant(&self) -> Option<&AccessGrantSpec> {
        match self {
            Spec::AccessGrant(s) => Some(s),
            _ => None,
        }
    }

    /// The AccessToken spec, if this is one.
    pub fn as_access_token(&self) -> Option<&AccessTokenSpec> {
        match self {
            Spec::AccessToken(s) => Some(s),
            _ => None,
        }
    }

    /// The Link spec, if this is one.
    pub fn as_link(&self) -> Option<&LinkSpec> {
        match self {
            Spec::Link(s) => Some(s),
            _ => None,
        }
    }

    /// The Secret spec, if this is one.
    pub fn as_secret(&self) -> Option<&SecretSpec> {
        match self {
            Spec::Secret(s) => Some(s),
            _ => None,
        }
    }

    /// The Mesh spec, if this is one.
    pub fn as_mesh(&self) -> Option<&MeshSpec> {
        match self {
            Spec::Mesh(s) => Some(s),
            _ => None,
        }
    }

    /// The Dataplane spec, if this is one.
    pub fn as_dataplane(&self) -> Option<&DataplaneSpec> {
        match self {
            Spec::Dataplane(s) => Some(s),
            _ => None,
        }
    }

    /// The Listener spec, if this is one.
    pub fn as_listener(&self) -> Option<&ListenerSpec> {
        match self {
            Spec::Listener(s) => Some(s),
            _ => None,
        }
    }

    /// The MultiKeyListener spec, if this is one.
    pub fn as_multi_key_listener(&self) -> Option<&MultiKeyListenerSpec> {
        match self {
            Spec::MultiKeyListener(s) => Some(s),
            _ => None,
        }
    }

    /// The Connector spec, if this is one.
    pub fn as_connector(&self) -> Option<&ConnectorSpec> {
        match self {
            Spec::Connector(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshService spec, if this is one.
    pub fn as_mesh_service(&self) -> Option<&MeshServiceSpec> {
        match self {
            Spec::MeshService(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshHTTPRoute spec, if this is one.
    pub fn as_mesh_http_route(&self) -> Option<&MeshHttpRouteSpec> {
        match self {
            Spec::MeshHTTPRoute(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshTCPRoute spec, if this is one.
    pub fn as_mesh_tcp_route(&self) -> Option<&MeshTcpRouteSpec> {
        match self {
            Spec::MeshTCPRoute(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshTimeout spec, if this is one.
    pub fn as_mesh_timeout(&self) -> Option<&MeshTimeoutSpec> {
        match self {
            Spec::MeshTimeout(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshRetry spec, if this is one.
    pub fn as_mesh_retry(&self) -> Option<&MeshRetrySpec> {
        match self {
            Spec::MeshRetry(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshRateLimit spec, if this is one.
    pub fn as_mesh_rate_limit(&self) -> Option<&MeshRateLimitSpec> {
        match self {
            Spec::MeshRateLimit(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshAccessLog spec, if this is one.
    pub fn as_mesh_access_log(&self) -> Option<&MeshAccessLogSpec> {
        match self {
            Spec::MeshAccessLog(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshLoadBalancingStrategy spec, if this is one.
    pub fn as_mesh_load_balancing_strategy(&self) -> Option<&MeshLoadBalancingStrategySpec> {
        match self {
            Spec::MeshLoadBalancingStrategy(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshHealthCheck spec, if this is one.
    pub fn as_mesh_health_check(&self) -> Option<&MeshHealthCheckSpec> {
        match self {
            Spec::MeshHealthCheck(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshMetric spec, if this is one.
    pub fn as_mesh_metric(&self) -> Option<&MeshMetricSpec> {
        match self {
            Spec::MeshMetric(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshFaultInjection spec, if this is one.
    pub fn as_mesh_fault_injection(&self) -> Option<&MeshFaultInjectionSpec> {
        match self {
            Spec::MeshFaultInjection(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshCircuitBreaker spec, if this is one.
    pub fn as_mesh_circuit_breaker(&self) -> Option<&MeshCircuitBreakerSpec> {
        match self {
            Spec::MeshCircuitBreaker(s) => Some(s),
            _ => None,
        }
    }

    /// The MeshTrace spec, if this is one.
    pub fn as_mesh_trace(&self) -> Option<&MeshTraceSpec> {
        match self {
            Spec::MeshTrace(s) => Some(s),
            _ => None,
        }
    }

    /// The top-level `targetRef` of a policy (MeshTrafficPermission and the
    /// outbound policies), if it has one set.
    pub fn policy_target_ref(&self) -> Option<&TargetRef> {
        match self {
            Spec::MeshTrafficPermission(s) => s.target_ref.as_ref(),
            Spec::MeshHTTPRoute(s) => s.target_ref.as_ref(),
            Spec::MeshTCPRoute(s) => s.target_ref.as_ref(),
            Spec::MeshTimeout(s) => s.target_ref.as_ref(),
            Spec::MeshRetry(s) => s.target_ref.as_ref(),
            Spec::MeshRateLimit(s) => s.target_ref.as_ref(),
            Spec::MeshAccessLog(s) => s.target_ref.as_ref(),
            Spec::MeshLoadBalancingStrategy(s) => s.target_ref.as_ref(),
            Spec::MeshHealthCheck(s) => s.target_ref.as_ref(),
            Spec::MeshMetric(s) => s.target_ref.as_ref(),
            Spec::MeshFaultInjection(s) => s.target_ref.as_ref(),
            Spec::MeshCircuitBreaker(s) => s.target_ref.as_ref(),
            Spec::MeshTrace(s) => s.target_ref.as_ref(),
            _ => None,
        }
    }

    /// The MeshTrafficPermission spec, if this is one.
    pub fn as_mesh_traffic_permission(&self) -> Option<&MeshTrafficPermissionSpec> {
        match self {
            Spec::MeshTrafficPermission(s) => Some(s),
            _ => None,
        }
    }
}
