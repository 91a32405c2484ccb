//! The byte-counting stream wrapper, shared with the sidecar
//! (`meshlink_runtime::counted`).

pub(crate) use meshlink_runtime::counted::Counted;
