//! The data path's one error type (pingora's idea): every failure of a
//! proxied connection or request says which side it came from (upstream,
//! downstream or the proxy itself), whether another try may help, and what
//! a client is answered: an HTTP status and a `grpc-status`.
//!
//! It owns classification only. TLS failures are classified from rustls's
//! typed error (never from its message text, which rustls may reword). It
//! never logs or counts: callers do, with [`ProxyError::label`].

use std::fmt;

/// Where a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The destination: an endpoint, its sidecar, or the local app inbound.
    Upstream,
    /// The client: the local app outbound, or the calling sidecar inbound.
    Downstream,
    /// The proxy itself: configuration not ready, or a defect.
    Internal,
}

/// Why a TLS handshake failed, from rustls's typed error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsFailure {
    /// The peer's certificate names the wrong (or no) SPIFFE identity.
    PeerIdentity,
    /// A certificate in the chain has expired (ours, as the peer said, or
    /// theirs).
    CertificateExpired,
    /// The chain does not lead to a trusted root, or a signature is bad.
    UnknownIssuer,
    /// Another certificate problem (missing, malformed, revoked, unusable).
    BadCertificate,
    /// The connection closed or reset during the handshake.
    ConnectionClosed,
    /// Anything else: protocol versions, ciphers, garbage.
    Protocol,
}

/// What failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The needed configuration (a cluster, a TLS config) has not arrived.
    NotReady,
    /// The destination has no endpoint to try.
    NoEndpoints,
    /// Every endpoint tried refused or failed the TCP connect.
    ConnectFailed,
    /// The TCP connect did not finish in time.
    ConnectTimeout,
    /// The TLS handshake failed.
    Handshake(TlsFailure),
    /// The TLS handshake did not finish in time.
    HandshakeTimeout,
    /// Authorization refused the peer.
    Denied,
    /// Reading or writing failed after the connection was set up.
    Io,
    /// The upstream reset or closed before it answered.
    Reset,
    /// The upstream did not answer in time.
    Timeout,
    /// The request is malformed.
    BadRequest,
    /// The request's headers are too large.
    HeadersTooLarge,
    /// The proxy is shutting down (the drain deadline passed).
    Shutdown,
    /// A defect in the proxy.
    Internal,
    /// A cluster's circuit breaker refused the request or connection: the
    /// limit it would have exceeded.
    Overflow(Limit),
}

/// A cluster's circuit-breaking limit (Envoy's `circuit_breakers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// `max_connections`: upstream connections.
    MaxConnections,
    /// `max_pending_requests`: requests (TCP: connections) waiting for a
    /// connection.
    MaxPendingRequests,
    /// `max_requests`: requests in flight.
    MaxRequests,
    /// `max_retries`: retries in flight.
    MaxRetries,
}

impl Limit {
    /// Envoy's field name, used as the `x-meshlink-overflow` header value
    /// and metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::MaxConnections => "max_connections",
            Limit::MaxPendingRequests => "max_pending_requests",
            Limit::MaxRequests => "max_requests",
            Limit::MaxRetries => "max_retries",
        }
    }
}

/// A data-path failure: its kind, its side and what happened, in words.
#[derive(Debug)]
pub struct ProxyError {
    kind: ErrorKind,
    side: Side,
    context: String,
}

// === impl ProxyError ===

impl ProxyError {
    /// A failure of `kind` on `side`, described by `context` (it names the
    /// peer, endpoint or resource).
    pub fn new(kind: ErrorKind, side: Side, context: impl Into<String>) -> Self {
        ProxyError {
            kind,
            side,
            context: context.into(),
        }
    }

    /// An upstream failure.
    pub fn upstream(kind: ErrorKind, context: impl Into<String>) -> Self {
        Self::new(kind, Side::Upstream, context)
    }

    /// A downstream failure.
    pub fn downstream(kind: ErrorKind, context: impl Into<String>) -> Self {
        Self::new(kind, Side::Downstream, context)
    }

    /// A failure inside the proxy.
    pub fn internal(kind: ErrorKind, context: impl Into<String>) -> Self {
        Self::new(kind, Side::Internal, context)
    }

    /// A failed handshake on `side`, classified from `error`.
    pub fn handshake(side: Side, error: &std::io::Error) -> Self {
        let failure = TlsFailure::of_io(error);
        Self::new(ErrorKind::Handshake(failure), side, error.to_string())
    }

    /// What failed.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Where it came from.
    pub fn side(&self) -> Side {
        self.side
    }

    /// Whether another try (on another endpoint, or later) may succeed.
    /// Only upstream failures before any byte of a response are retryable;
    /// a downstream or internal failure never is.
    pub fn retryable(&self) -> bool {
        self.side == Side::Upstream
            && matches!(
                self.kind,
                ErrorKind::ConnectFailed
                    | ErrorKind::ConnectTimeout
                    | ErrorKind::Reset
                    | ErrorKind::Timeout
                    | ErrorKind::Handshake(TlsFailure::ConnectionClosed)
                    | ErrorKind::HandshakeTimeout
            )
    }

    /// The HTTP status a client is answered with.
    pub fn http_status(&self) -> u16 {
        match (self.kind, self.side) {
            (ErrorKind::Denied, _) => 403,
            (ErrorKind::BadRequest, _) => 400,
            (ErrorKind::HeadersTooLarge, _) => 431,
            (ErrorKind::Timeout, _) => 504,
            (
                ErrorKind::NotReady
                | ErrorKind::NoEndpoints
                | ErrorKind::Shutdown
                | ErrorKind::Overflow(_),
                _,
            ) => 503,
            (ErrorKind::ConnectFailed | ErrorKind::ConnectTimeout, _) => 503,
            (ErrorKind::Internal, _) | (_, Side::Internal) => 500,
            (_, Side::Downstream) => 400,
            (_, Side::Upstream) => 502,
        }
    }

    /// The `grpc-status` a gRPC client is answered with (gRPC's own
    /// mapping of HTTP statuses, with a denial as `PERMISSION_DENIED`).
    pub fn grpc_status(&self) -> i32 {
        const PERMISSION_DENIED: i32 = 7;
        const DEADLINE_EXCEEDED: i32 = 4;
        const UNAVAILABLE: i32 = 14;
        const INTERNAL: i32 = 13;
        match self.http_status() {
            403 => PERMISSION_DENIED,
            504 => DEADLINE_EXCEEDED,
            502 | 503 => UNAVAILABLE,
            _ => INTERNAL,
        }
    }

    /// A short, bounded metrics label for the kind.
    pub fn label(&self) -> &'static str {
        match self.kind {
            ErrorKind::NotReady => "not_ready",
            ErrorKind::NoEndpoints => "no_endpoints",
            ErrorKind::ConnectFailed => "connect_failed",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Handshake(f) => f.label(),
            ErrorKind::HandshakeTimeout => "timeout",
            ErrorKind::Denied => "denied",
            ErrorKind::Io => "io",
            ErrorKind::Reset => "reset",
            ErrorKind::Timeout => "timeout",
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::HeadersTooLarge => "headers_too_large",
            ErrorKind::Shutdown => "shutdown",
            ErrorKind::Internal => "internal",
            ErrorKind::Overflow(_) => "overflow",
        }
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            Side::Upstream => "upstream",
            Side::Downstream => "downstream",
            Side::Internal => "proxy",
        };
        write!(
            f,
            "{side} {}: {}",
            self.label().replace('_', " "),
            self.context
        )
    }
}

impl std::error::Error for ProxyError {}

// === impl TlsFailure ===

impl TlsFailure {
    /// Classifies a handshake's I/O error by the rustls error inside it; an
    /// I/O error without one is the connection closing.
    pub fn of_io(e: &std::io::Error) -> TlsFailure {
        match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            Some(tls) => TlsFailure::of(tls),
            None => match e.kind() {
                std::io::ErrorKind::UnexpectedEof
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe => TlsFailure::ConnectionClosed,
                _ => TlsFailure::Protocol,
            },
        }
    }

    /// Classifies a rustls error.
    pub fn of(e: &rustls::Error) -> TlsFailure {
        use rustls::{AlertDescription as Alert, CertificateError as Cert, Error};
        match e {
            Error::InvalidCertificate(c) => match c {
                Cert::Expired | Cert::ExpiredContext { .. } => TlsFailure::CertificateExpired,
                Cert::UnknownIssuer
                | Cert::BadSignature
                | Cert::UnsupportedSignatureAlgorithmContext { .. } => TlsFailure::UnknownIssuer,
                // meshlink's SPIFFE verifiers report a wrong or missing
                // identity as `Other` (an `SvidError` inside).
                Cert::NotValidForName
                | Cert::NotValidForNameContext { .. }
                | Cert::ApplicationVerificationFailure
                | Cert::Other(_) => TlsFailure::PeerIdentity,
                _ => TlsFailure::BadCertificate,
            },
            Error::NoCertificatesPresented | Error::InvalidCertRevocationList(_) => {
                TlsFailure::BadCertificate
            }
            Error::AlertReceived(alert) => match alert {
                Alert::CertificateExpired => TlsFailure::CertificateExpired,
                Alert::UnknownCA | Alert::DecryptError => TlsFailure::UnknownIssuer,
                Alert::BadCertificate
                | Alert::CertificateRequired
                | Alert::CertificateUnknown
                | Alert::CertificateRevoked
                | Alert::UnsupportedCertificate => TlsFailure::BadCertificate,
                _ => TlsFailure::Protocol,
            },
            _ => TlsFailure::Protocol,
        }
    }

    /// The metrics label (`proxy_tls_handshake_failures_total{reason}`).
    pub fn label(self) -> &'static str {
        match self {
            TlsFailure::PeerIdentity => "peer_identity",
            TlsFailure::CertificateExpired => "certificate_expired",
            TlsFailure::UnknownIssuer => "unknown_issuer",
            TlsFailure::BadCertificate => "bad_certificate",
            TlsFailure::ConnectionClosed => "connection_closed",
            TlsFailure::Protocol => "protocol",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::{AlertDescription, CertificateError, OtherError};
    use std::sync::Arc;

    fn io(e: rustls::Error) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }

    #[test]
    fn handshake_failures_are_classified_from_the_typed_error() {
        let cases = [
            (
                io(rustls::Error::InvalidCertificate(CertificateError::Expired)),
                "certificate_expired",
            ),
            (
                io(rustls::Error::AlertReceived(
                    AlertDescription::CertificateExpired,
                )),
                "certificate_expired",
            ),
            (
                io(rustls::Error::InvalidCertificate(
                    CertificateError::UnknownIssuer,
                )),
                "unknown_issuer",
            ),
            (
                io(rustls::Error::AlertReceived(AlertDescription::UnknownCA)),
                "unknown_issuer",
            ),
            (
                io(rustls::Error::InvalidCertificate(CertificateError::Other(
                    OtherError(Arc::new(std::io::Error::other(
                        "spiffe://d/other is not spiffe://d/web",
                    ))),
                ))),
                "peer_identity",
            ),
            (
                io(rustls::Error::NoCertificatesPresented),
                "bad_certificate",
            ),
            (io(rustls::Error::HandshakeNotComplete), "protocol"),
            (
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
                "connection_closed",
            ),
            (
                std::io::Error::from(std::io::ErrorKind::ConnectionReset),
                "connection_closed",
            ),
        ];
        for (e, label) in cases {
            assert_eq!(TlsFailure::of_io(&e).label(), label, "{e}");
        }
    }

    #[test]
    fn each_kind_maps_to_a_status_a_grpc_status_and_a_retry_verdict() {
        use ErrorKind::*;
        let cases = [
            (ProxyError::downstream(Denied, "rbac"), 403, 7, false),
            (
                ProxyError::upstream(ConnectFailed, "refused"),
                503,
                14,
                true,
            ),
            (ProxyError::upstream(NoEndpoints, "none"), 503, 14, false),
            (ProxyError::internal(NotReady, "cluster"), 503, 14, false),
            (ProxyError::upstream(Timeout, "slow"), 504, 4, true),
            (
                ProxyError::upstream(Handshake(TlsFailure::PeerIdentity), "id"),
                502,
                14,
                false,
            ),
            (ProxyError::upstream(Reset, "reset"), 502, 14, true),
            (
                ProxyError::downstream(HeadersTooLarge, "big"),
                431,
                13,
                false,
            ),
            (ProxyError::downstream(Io, "gone"), 400, 13, false),
            (ProxyError::internal(Internal, "bug"), 500, 13, false),
        ];
        for (e, http, grpc, retry) in cases {
            assert_eq!(
                (e.http_status(), e.grpc_status(), e.retryable()),
                (http, grpc, retry),
                "{e}"
            );
        }
        let e = ProxyError::upstream(ConnectFailed, "10.0.0.1:80: connection refused");
        assert_eq!(
            e.to_string(),
            "upstream connect failed: 10.0.0.1:80: connection refused"
        );
    }
}
