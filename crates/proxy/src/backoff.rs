//! Jittered exponential backoff, shared with the link transport: the one
//! implementation lives in `meshlink_runtime::backoff`.

pub use meshlink_runtime::backoff::{Backoff, after_hint};
