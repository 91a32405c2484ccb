//! Several control-plane URLs (`--cp a,b`), through the proxy's real delta
//! ADS client and TLS: a dead first URL is passed over for the second, a
//! control plane that drains sends the proxy to the next URL (not back to
//! itself, even when it ends the stream while the proxy is still sending
//! ACKs), and a URL whose name resolves to addresses is dialled at an
//! address while its certificate is verified against the name.

mod support;

use std::sync::Arc;

use meshlink_proxy::cp::{CpEndpoints, CpTarget, CpUrl};
use meshlink_proxy::metrics::ProxyMetrics;
use meshlink_proxy::model::ProxyConfig;
use meshlink_proxy::xds::apply::{CLUSTER, LISTENER};
use meshlink_proxy::xds::{NodeId, SharedXdsStatus, XdsClient};
use prometheus_client::registry::Registry;
use support::{DEADLINE, FakeCp, ProxyFiles, TestPki, dead_port, eventually, show_logs};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A running xDS client and what a test reads from it.
struct Proxy {
    endpoints: CpEndpoints,
    config: watch::Receiver<Arc<ProxyConfig>>,
    status: SharedXdsStatus,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts the client on `urls`, beginning with the first.
    fn start(files: &ProxyFiles, urls: &[String]) -> Proxy {
        show_logs();
        let urls = urls.iter().map(|u| CpUrl::parse(u).expect("URL")).collect();
        let endpoints = CpEndpoints::starting_at(urls, 0);
        let (config_tx, config) = watch::channel(Arc::new(ProxyConfig::default()));
        let status = SharedXdsStatus::default();
        let cancel = CancellationToken::new();
        let client = XdsClient {
            target: CpTarget {
                endpoints: endpoints.clone(),
                ca_file: files.ca_file.clone(),
                token_file: files.token_file.clone(),
                node: ("default".into(), "web-1".into()),
                instance: meshlink_proxy::cp::new_instance_id(),
            },
            node_id: NodeId::Fixed("default.web-1".into()),
            config: config_tx,
            status: status.clone(),
            metrics: Arc::new(ProxyMetrics::default()),
            connection: None,
        };
        let task = tokio::spawn(client.run(cancel.clone()));
        Proxy {
            endpoints,
            config,
            status,
            cancel,
            task,
        }
    }

    /// Waits until listeners and clusters arrived.
    async fn configured(&mut self) {
        tokio::time::timeout(
            DEADLINE,
            self.config
                .wait_for(|c| c.received.contains(LISTENER) && c.received.contains(CLUSTER)),
        )
        .await
        .expect("configured within the deadline")
        .expect("the client runs");
    }

    /// Waits until the healthy stream is to `url`.
    async fn connected_to(&self, url: &str) {
        eventually(&format!("a healthy stream to {url}"), || async {
            let s = self.status.lock().unwrap().clone();
            (s.connected && s.url.as_deref() == Some(url)).then_some(())
        })
        .await;
    }

    fn metrics(&self) -> String {
        let mut registry = Registry::with_prefix("meshlink_proxy");
        self.endpoints.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        text
    }

    async fn stop(self) {
        self.cancel.cancel();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("the client stops")
            .expect("the client did not panic");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_second_url_serves_when_the_first_is_a_dead_port() {
    let pki = TestPki::new();
    let files = ProxyFiles::new(&pki);
    let cp = FakeCp::start(&pki).await;
    let dead = format!("https://127.0.0.1:{}", dead_port());
    let mut proxy = Proxy::start(&files, &[dead.clone(), cp.url()]);

    proxy.configured().await;
    proxy.connected_to(&cp.url()).await;
    let text = proxy.metrics();
    for line in [
        format!(r#"meshlink_proxy_cp_connected{{url="{}"}} 1"#, cp.url()),
        format!(r#"meshlink_proxy_cp_connected{{url="{dead}"}} 0"#),
        "meshlink_proxy_cp_failovers_total 1".to_owned(),
    ] {
        assert!(text.contains(&line), "missing {line:?} in:\n{text}");
    }
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_control_plane_sends_the_proxy_to_the_next_url() {
    let pki = TestPki::new();
    let files = ProxyFiles::new(&pki);
    let a = FakeCp::start(&pki).await;
    let b = FakeCp::start(&pki).await;
    let mut proxy = Proxy::start(&files, &[a.url(), b.url()]);
    proxy.configured().await;
    proxy.connected_to(&a.url()).await;

    a.drain();
    proxy.connected_to(&b.url()).await;
    assert_eq!(
        a.streams(),
        1,
        "the proxy did not go back to the draining one"
    );
    assert_eq!(b.streams(), 1);
    let config = proxy.config.borrow().clone();
    assert!(
        config.received.contains(LISTENER),
        "the configuration was kept across the move"
    );
    let text = proxy.metrics();
    for line in [
        format!(r#"meshlink_proxy_cp_connected{{url="{}"}} 0"#, a.url()),
        format!(r#"meshlink_proxy_cp_connected{{url="{}"}} 1"#, b.url()),
        "meshlink_proxy_cp_failovers_total 1".to_owned(),
    ] {
        assert!(text.contains(&line), "missing {line:?} in:\n{text}");
    }
    proxy.stop().await;
}

/// The order that once sent a proxy back to a draining control plane: the
/// control plane ends the stream while the proxy's ACKs are backed up, so
/// the proxy finds its request side closed before it has read the status
/// saying why. It must still read that status and move on at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_ended_while_acks_are_queued_is_read_as_draining() {
    let pki = TestPki::new();
    let files = ProxyFiles::new(&pki);
    let a = FakeCp::start_draining_under_acks(&pki, 200).await;
    let b = FakeCp::start(&pki).await;
    let mut proxy = Proxy::start(&files, &[a.url(), b.url()]);
    proxy.configured().await;
    proxy.connected_to(&b.url()).await;
    assert_eq!(
        a.streams(),
        1,
        "the proxy went back to the draining control plane"
    );
    assert_eq!(b.streams(), 1);
    let text = proxy.metrics();
    assert!(
        text.contains("meshlink_proxy_cp_failovers_total 1"),
        "one move, straight to the next URL:\n{text}"
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_is_dialled_at_its_address_and_verified_as_the_name() {
    let pki = TestPki::new();
    let files = ProxyFiles::new(&pki);
    let cp = FakeCp::start(&pki).await;
    // The certificate names `localhost` only: connecting works only if TLS
    // verifies the URL's name while the socket goes to an address.
    let mut proxy = Proxy::start(&files, &[cp.url()]);
    let attempt = proxy.endpoints.attempt().await;
    assert!(attempt.addr().is_some(), "{attempt}: the name was resolved");
    proxy.configured().await;
    proxy.connected_to(&cp.url()).await;
    proxy.stop().await;
}
