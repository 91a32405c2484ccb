//! The process-wide Prometheus registry. Each module registers its own
//! `Metrics` struct here under a prefix; `/metrics` encodes it.

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

/// A shared, append-only registry. Registration happens at start-up; after
/// that it is only read by the `/metrics` handler.
#[derive(Clone, Default)]
pub struct MetricsRegistry {
    inner: Arc<std::sync::Mutex<Registry>>,
}

impl std::fmt::Debug for MetricsRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MetricsRegistry")
    }
}

impl MetricsRegistry {
    /// An empty registry whose metrics are prefixed `meshlink_`.
    pub fn new() -> Self {
        MetricsRegistry {
            inner: Arc::new(std::sync::Mutex::new(Registry::with_prefix("meshlink"))),
        }
    }

    /// Lets a module register its metrics under `prefix` (e.g. `api`).
    pub fn register_with<F: FnOnce(&mut Registry)>(&self, prefix: &str, f: F) {
        let mut reg = self.inner.lock().expect("metrics registry lock poisoned");
        f(reg.sub_registry_with_prefix(prefix));
    }

    /// Encodes every metric in the Prometheus text format (OpenMetrics).
    pub fn encode(&self) -> String {
        let reg = self.inner.lock().expect("metrics registry lock poisoned");
        let mut out = String::new();
        encode(&mut out, &reg).expect("writing to a String cannot fail");
        out
    }
}
