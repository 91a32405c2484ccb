//! MeshMetric `applications[]`: each application's Prometheus text,
//! fetched on every scrape of the sidecar, all at once, each bounded by
//! [`APP_SCRAPE_TIMEOUT`]. An application that fails (refuses, answers
//! non-2xx, is too slow) never costs the sidecar its own metrics: its
//! place holds a comment saying why, and
//! `meshlink_proxy_app_scrape_errors_total{application}` counts it.
//! The text is served verbatim (nothing is added to its names, as
//! Kuma's kuma-dp does).

use std::time::Duration;

use bytes::Bytes;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::model::metrics::ScrapedApp;

/// The longest one application's scrape may take.
pub const APP_SCRAPE_TIMEOUT: Duration = Duration::from_secs(3);

/// `{application}`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApplicationLabels {
    /// `applications[].name` (default `address:port`).
    pub application: String,
}

/// The scrapes' own metrics.
#[derive(Debug, Clone)]
pub struct AppScrapeMetrics {
    /// Scrapes that failed, per application.
    pub errors: Family<ApplicationLabels, Counter>,
    /// How long each scrape took, failed ones included.
    pub duration: Family<ApplicationLabels, Histogram, fn() -> Histogram>,
}

impl Default for AppScrapeMetrics {
    fn default() -> Self {
        AppScrapeMetrics {
            errors: Family::default(),
            duration: Family::new_with_constructor(crate::http::metrics::histogram),
        }
    }
}

impl AppScrapeMetrics {
    /// Registers `app_scrape_errors` and `app_scrape_duration_seconds`
    /// (under the caller's prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "app_scrape_errors",
            "Scrapes of a MeshMetric application that failed (refused, non-2xx, or slower than 3s)",
            self.errors.clone(),
        );
        registry.register(
            "app_scrape_duration_seconds",
            "Time a scrape of a MeshMetric application took",
            self.duration.clone(),
        );
    }
}

/// Every application's text (or a comment saying why it is missing), in
/// the order given, each ending with a newline.
pub async fn scrape_all(apps: &[ScrapedApp], metrics: &AppScrapeMetrics) -> Vec<String> {
    futures::future::join_all(apps.iter().map(|app| scrape_one(app, metrics))).await
}

async fn scrape_one(app: &ScrapedApp, metrics: &AppScrapeMetrics) -> String {
    let labels = ApplicationLabels {
        application: app.name.clone(),
    };
    let started = tokio::time::Instant::now();
    let uri = format!("http://{}{}", app.authority, app.path);
    let fetch = crate::http::one_shot::exchange(http::Method::GET, &uri, None, Bytes::new());
    let outcome = match tokio::time::timeout(APP_SCRAPE_TIMEOUT, fetch).await {
        Err(_) => Err(format!(
            "no answer within {}",
            humantime::format_duration(APP_SCRAPE_TIMEOUT)
        )),
        Ok(Err(e)) => Err(e),
        Ok(Ok((status, _))) if !status.is_success() => Err(format!("it answered {status}")),
        Ok(Ok((_, body))) => {
            String::from_utf8(body.to_vec()).map_err(|_| "its answer is not UTF-8 text".into())
        }
    };
    metrics
        .duration
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    match outcome {
        Ok(mut text) => {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text
        }
        Err(why) => {
            metrics.errors.get_or_create(&labels).inc();
            tracing::warn!(application = %app.name, url = %uri, error = %why, "MeshMetric application scrape failed");
            format!(
                "# meshlink: application {:?} ({uri}) not scraped: {}\n",
                app.name,
                why.replace('\n', " ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refusing_application_leaves_a_comment_and_a_count() {
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let authority = closed.local_addr().expect("addr").to_string();
        drop(closed);
        let metrics = AppScrapeMetrics::default();
        let app = ScrapedApp {
            name: "app".into(),
            authority,
            path: "/metrics".into(),
        };
        let texts = scrape_all(std::slice::from_ref(&app), &metrics).await;
        assert!(
            texts[0].starts_with("# meshlink: application \"app\""),
            "{texts:?}"
        );
        let labels = ApplicationLabels {
            application: "app".into(),
        };
        assert_eq!(metrics.errors.get_or_create(&labels).get(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_application_is_given_up_after_the_timeout() {
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let app = ScrapedApp {
            name: "slow".into(),
            authority: silent.local_addr().expect("addr").to_string(),
            path: "/metrics".into(),
        };
        let metrics = AppScrapeMetrics::default();
        let texts = scrape_all(std::slice::from_ref(&app), &metrics).await;
        assert!(texts[0].contains("no answer within 3s"), "{texts:?}");
        drop(silent);
    }
}
