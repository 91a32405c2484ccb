//! The routing module's errors: a message that cannot be used, and a
//! neighbour that must not be linked to. Each says what to fix.

use super::wire::RouterId;

/// A hello or LSA that is refused. The router keeps running and keeps
/// what it had; the transport logs the error and may close the link.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LsaError {
    /// The peer speaks another protocol version.
    #[error(
        "routing protocol version {got} is not supported; this router speaks {speaks}: \
         upgrade the older router"
    )]
    UnsupportedVersion {
        /// The version the message carried.
        got: u16,
        /// The version this router speaks.
        speaks: u16,
    },
    /// An id, name or routing key is unusable.
    #[error("{what} {reason}")]
    Name {
        /// What was checked (`router id`, `routing key`, ...).
        what: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// A field of an LSA is unusable.
    #[error("LSA from {origin}: {field}: {reason}")]
    Field {
        /// The LSA's origin.
        origin: RouterId,
        /// The field path, e.g. `links[2]`.
        field: String,
        /// Why it is refused, and the fix.
        reason: String,
    },
}

/// Why a link to a neighbour must not be used for routing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdjacencyError {
    /// The hello itself is unusable.
    #[error("hello refused: {0}")]
    Hello(#[from] LsaError),
    /// The link loops back to this router.
    #[error("the link leads back to this router ({0}); check the Link's endpoint")]
    SelfLink(RouterId),
    /// Both ends are edge routers.
    #[error(
        "edge router {peer} cannot link to edge router {me}: edge routers link only to \
         interior routers; link one of them to an interior site instead"
    )]
    EdgeToEdge {
        /// This router.
        me: RouterId,
        /// The peer.
        peer: RouterId,
    },
}
