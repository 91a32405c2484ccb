//! The byte-counting stream wrapper (`meshlink_runtime::counted`), shared
//! with the router's links.

pub use meshlink_runtime::counted::Counted;
