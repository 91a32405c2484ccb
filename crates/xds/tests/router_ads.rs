//! A site's router on a real ADS stream (the in-process server with the
//! router reconciler): its resources arrive under the meshlink.v1 type
//! URLs, Secrets before the RouterAccess and Links that name them (I2), a
//! Link whose Secret does not exist yet is withheld until the Secret
//! arrives, and only the router is recomputed for a Link change.

mod ads_support;
mod router_fixtures;

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest,
};
use futures::StreamExt;
use meshlink_identity::WallClock;
use meshlink_xds::ads::{AdsMetrics, AdsOptions, AdsParts, AdsServer, Credential, Inspector};
use meshlink_xds::hub::{Hub, SourceError};
use meshlink_xds::owner::{OwnerRegistry, ProxyKey};
use meshlink_xds::router::{RouterHub, SiteChange, SiteSource, SiteView, certificate_secret_name};
use meshlink_xds::translate::{
    CONNECTOR_TYPE, LINK_TYPE, ROUTER_ACCESS_TYPE, ROUTER_LISTENER_TYPE, SECRET_TYPE, SITE_TYPE,
    TYPE_ORDER,
};
use router_fixtures::{SITE, link, material, router_access, site};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const DEADLINE: Duration = Duration::from_secs(30);

/// The site as the test sets it up before the router connects.
struct FixedSource(SiteView);

#[tonic::async_trait]
impl SiteSource for FixedSource {
    async fn load(&self) -> Result<SiteView, SourceError> {
        Ok(self.0.clone())
    }
}

struct Setup {
    server: AdsServer,
    routers: RouterHub,
    hub: Hub,
    cancel: CancellationToken,
}

fn setup(view: SiteView) -> Setup {
    let registry = OwnerRegistry::new();
    let clock = WallClock::start();
    let cancel = CancellationToken::new();
    let source = ads_support::MemorySource::new(1, Duration::from_secs(3600));
    let hub = Hub::spawn(Arc::new(source), registry.clone(), clock, cancel.clone());
    let routers = RouterHub::spawn_on(
        &TaskTracker::new(),
        Arc::new(FixedSource(view)),
        registry.clone(),
        cancel.clone(),
    );
    let server = AdsServer::with_options(
        AdsParts {
            registry,
            hub: hub.clone(),
            auth: Arc::new(ads_support::NoAuth),
            inspector: Inspector::default(),
            metrics: AdsMetrics::default(),
            clock,
            instance: "test".into(),
        },
        AdsOptions {
            admission: None,
            routers: Some(routers.clone()),
        },
    );
    Setup {
        server,
        routers,
        hub,
        cancel,
    }
}

const ROUTER_TYPES: [&str; 6] = [
    SECRET_TYPE,
    SITE_TYPE,
    ROUTER_ACCESS_TYPE,
    LINK_TYPE,
    ROUTER_LISTENER_TYPE,
    CONNECTOR_TYPE,
];

fn router_node() -> Option<Node> {
    Some(Node {
        id: format!("site.{SITE}"),
        ..Default::default()
    })
}

async fn next_delta(
    rx: &mut meshlink_xds::ads::ResponseStream<DeltaDiscoveryResponse>,
) -> DeltaDiscoveryResponse {
    tokio::time::timeout(DEADLINE, rx.next())
        .await
        .expect("a response within the deadline")
        .expect("the stream is open")
        .expect("no error")
}

/// Opens a delta stream as the router and subscribes (wildcard) to every
/// router type, Secrets first as meshlink-proxy does.
async fn open_delta(
    s: &Setup,
) -> (
    mpsc::Sender<Result<DeltaDiscoveryRequest, tonic::Status>>,
    meshlink_xds::ads::ResponseStream<DeltaDiscoveryResponse>,
) {
    let (tx, rx) = mpsc::channel(16);
    let (responses, _task) = s.server.serve_delta_as(
        Credential::untokened(ProxyKey::router(SITE)),
        ReceiverStream::new(rx),
    );
    for (i, t) in ROUTER_TYPES.iter().enumerate() {
        tx.send(Ok(DeltaDiscoveryRequest {
            node: if i == 0 { router_node() } else { None },
            type_url: (*t).to_owned(),
            ..Default::default()
        }))
        .await
        .expect("queue");
    }
    (tx, responses)
}

fn names(r: &DeltaDiscoveryResponse) -> Vec<&str> {
    r.resources.iter().map(|r| r.name.as_str()).collect()
}

fn rank(type_url: &str) -> usize {
    TYPE_ORDER
        .iter()
        .position(|t| *t == type_url)
        .expect("served type")
}

#[tokio::test]
async fn secrets_come_before_what_names_them_and_a_link_waits_for_its_secret() {
    let mut view = SiteView::default();
    view.upsert(site(false));
    view.upsert(router_access());
    view.upsert_secret("skupper-site-server", material("server"), 10);
    // The Link's client Secret does not exist yet.
    view.upsert(link("to-dmz-b", "dmz-b-client", 3));
    let s = setup(view);
    s.routers.sync().await;
    let withheld = s.routers.config().borrow().withheld.clone();
    assert_eq!(withheld.len(), 1, "{withheld:?}");
    assert!(withheld[0].reason.contains("dmz-b-client"), "{withheld:?}");

    let (tx, mut rx) = open_delta(&s).await;
    // Every type is answered; record the order in which non-empty answers
    // come and what they hold.
    let mut seen: Vec<(String, Vec<String>)> = Vec::new();
    for _ in 0..ROUTER_TYPES.len() {
        let r = next_delta(&mut rx).await;
        tx.send(Ok(DeltaDiscoveryRequest {
            type_url: r.type_url.clone(),
            response_nonce: r.nonce.clone(),
            ..Default::default()
        }))
        .await
        .expect("ack");
        seen.push((
            r.type_url.clone(),
            names(&r).iter().map(|n| n.to_string()).collect(),
        ));
    }
    let get = |t: &str| {
        seen.iter()
            .find(|(u, _)| u == t)
            .map(|(_, n)| n.clone())
            .unwrap_or_default()
    };
    assert_eq!(
        get(SECRET_TYPE),
        ["ca:skupper-site-server", "tls:skupper-site-server"]
    );
    assert_eq!(get(ROUTER_ACCESS_TYPE), ["dmz-a-peer"]);
    assert!(
        get(LINK_TYPE).is_empty(),
        "the Link waits for its Secret: {seen:?}"
    );
    let secret_at = seen
        .iter()
        .position(|(t, _)| t == SECRET_TYPE)
        .expect("secrets");
    let access_at = seen
        .iter()
        .position(|(t, _)| t == ROUTER_ACCESS_TYPE)
        .expect("access");
    assert!(secret_at < access_at, "Secrets first: {seen:?}");

    // The Secret is applied: the Secret update is pushed before the Link.
    let recomputed = s.hub.metrics().recomputed();
    s.routers.changed(SiteChange::Secret {
        name: "dmz-b-client".into(),
        material: Some(material("client")),
        revision: 20,
    });
    let first = next_delta(&mut rx).await;
    let second = next_delta(&mut rx).await;
    assert_eq!(first.type_url, SECRET_TYPE);
    assert_eq!(
        names(&first),
        [
            "ca:dmz-b-client".to_owned(),
            certificate_secret_name("dmz-b-client")
        ]
    );
    assert_eq!(second.type_url, LINK_TYPE);
    assert_eq!(names(&second), ["to-dmz-b"]);
    assert!(rank(&first.type_url) < rank(&second.type_url));
    s.routers.sync().await;
    assert!(s.routers.config().borrow().withheld.is_empty());
    // No sidecar was recomputed for router resources.
    s.hub.sync(false).await;
    assert_eq!(s.hub.metrics().recomputed(), recomputed);

    // The Secret is deleted: the Link is removed before its Secrets.
    s.routers.changed(SiteChange::Secret {
        name: "dmz-b-client".into(),
        material: None,
        revision: 21,
    });
    for t in [LINK_TYPE, SECRET_TYPE] {
        let r = next_delta(&mut rx).await;
        assert_eq!(r.type_url, t, "removals in reverse order");
        assert!(!r.removed_resources.is_empty(), "{r:?}");
    }
    s.cancel.cancel();
}

#[tokio::test]
async fn sotw_router_gets_secrets_before_the_link() {
    let mut view = SiteView::default();
    view.upsert(site(false));
    view.upsert(link("to-dmz-b", "dmz-b-client", 3));
    view.upsert_secret("dmz-b-client", material("client"), 10);
    let s = setup(view);
    let (tx, rx) = mpsc::channel(16);
    let (mut responses, _task) = s.server.serve_sotw_as(
        Credential::untokened(ProxyKey::router(SITE)),
        ReceiverStream::new(rx),
    );
    // Both types are asked for before the state exists (the reconciler
    // publishes on connect); the first state is pushed in TYPE_ORDER.
    for (i, t) in [SECRET_TYPE, LINK_TYPE].iter().enumerate() {
        tx.send(Ok(DiscoveryRequest {
            node: if i == 0 { router_node() } else { None },
            type_url: (*t).to_owned(),
            ..Default::default()
        }))
        .await
        .expect("queue");
    }
    let mut order = Vec::new();
    for _ in 0..2 {
        let r = tokio::time::timeout(DEADLINE, responses.next())
            .await
            .expect("in time")
            .expect("open")
            .expect("ok");
        order.push((r.type_url.clone(), r.resources.len()));
    }
    assert_eq!(
        order,
        [(SECRET_TYPE.to_owned(), 2), (LINK_TYPE.to_owned(), 1)]
    );
    s.cancel.cancel();
}

#[tokio::test]
async fn a_router_of_another_site_gets_nothing() {
    let mut view = SiteView::default();
    view.upsert(site(false));
    view.upsert(link("to-dmz-b", "dmz-b-client", 3));
    view.upsert_secret("dmz-b-client", material("client"), 10);
    let s = setup(view);
    let (tx, rx) = mpsc::channel(16);
    let (mut responses, _task) = s.server.serve_delta_as(
        Credential::untokened(ProxyKey::router("elsewhere")),
        ReceiverStream::new(rx),
    );
    tx.send(Ok(DeltaDiscoveryRequest {
        node: Some(Node {
            id: "site.elsewhere".into(),
            ..Default::default()
        }),
        type_url: LINK_TYPE.into(),
        ..Default::default()
    }))
    .await
    .expect("queue");
    let r = next_delta(&mut responses).await;
    assert_eq!(r.type_url, LINK_TYPE);
    assert!(r.resources.is_empty(), "{r:?}");
    s.cancel.cancel();
}
