//! Virtual IPs for transparent proxying (issue 37): each destination of a
//! mesh (a `kuma.io/service`, a MeshService) gets a stable address from
//! the configured ranges, which sidecars' DNS answers for its name and
//! whose connections their capture listener maps back to it.
//!
//! [`range`] owns the configured ranges and their start-up checks;
//! [`assign`] is the pure assignment rule. The status task
//! (`status/mesh_vips.rs`) keeps the inputs and writes the result to the
//! Mesh's `status.vips` / `status.meshServiceVips`, where it survives
//! restarts and is shared by replicas.

pub mod allocator;
pub mod assign;
pub mod range;

pub use assign::assign;
pub use range::{DEFAULT_VIP_RANGE, VipRanges};
