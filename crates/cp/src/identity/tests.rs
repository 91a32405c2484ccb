//! In-process tests of the CA-state ownership: Certify and the hub only
//! read `internal.MeshCAState`; the controller alone writes it, and a
//! rotation is driven by issuance events with store writes linear in N.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::BoxStream;
use meshlink_api::Kind;
use meshlink_identity::{KeyedRateLimiter, WallClock};
use meshlink_runtime::{MetricsRegistry, Shutdown};
use meshlink_store::{
    BatchWrite, Change, ListQuery, Object, ObjectKey, SqliteStore, Store, StoreError,
};
use meshlink_xds::certify::CertifyRequest;
use meshlink_xds::certify::certify_server::Certify;
use tonic::Code;

use super::certify::CertifyService;
use super::secrets::{ISSUED_CERT, MESH_CA, MESH_CA_STATE};
use super::tokens::TokenService;
use super::{CaHandle, controller, mesh_ca};
use crate::resources::ResourceService;

/// A store that counts successful writes per kind.
pub(crate) struct Counting {
    inner: SqliteStore,
    writes: Mutex<HashMap<String, usize>>,
}

impl Counting {
    pub(crate) fn writes(&self, kind: &str) -> usize {
        self.writes.lock().unwrap().get(kind).copied().unwrap_or(0)
    }

    pub(crate) fn all_writes(&self) -> BTreeMap<String, usize> {
        self.writes.lock().unwrap().clone().into_iter().collect()
    }

    fn add(&self, kind: &str, delta: isize) {
        let mut writes = self.writes.lock().unwrap();
        let n = writes.entry(kind.to_owned()).or_default();
        *n = n.checked_add_signed(delta).expect("write count below zero");
    }

    /// Counts a write before it is made (undone if it fails), so a reader
    /// who sees a write's effect in the store always sees it counted.
    async fn count<T>(
        &self,
        key: &ObjectKey,
        write: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        self.add(&key.kind, 1);
        let r = write.await;
        if r.is_err() {
            self.add(&key.kind, -1);
        }
        r
    }
}

#[tonic::async_trait]
impl Store for Counting {
    async fn get(&self, key: &ObjectKey) -> Result<Option<Object>, StoreError> {
        self.inner.get(key).await
    }
    async fn list(&self, query: &ListQuery) -> Result<Vec<Object>, StoreError> {
        self.inner.list(query).await
    }
    async fn create(
        &self,
        key: &ObjectKey,
        labels: &BTreeMap<String, String>,
        body: &serde_json::Value,
    ) -> Result<Object, StoreError> {
        self.count(key, self.inner.create(key, labels, body)).await
    }
    async fn update(
        &self,
        key: &ObjectKey,
        labels: &BTreeMap<String, String>,
        body: &serde_json::Value,
        expected_revision: Option<u64>,
    ) -> Result<Object, StoreError> {
        self.count(key, self.inner.update(key, labels, body, expected_revision))
            .await
    }
    async fn delete(&self, key: &ObjectKey, expected: Option<u64>) -> Result<Object, StoreError> {
        self.count(key, self.inner.delete(key, expected)).await
    }
    async fn current_revision(&self) -> Result<u64, StoreError> {
        self.inner.current_revision().await
    }
    async fn changes_since(&self, after: u64, limit: usize) -> Result<Vec<Change>, StoreError> {
        self.inner.changes_since(after, limit).await
    }
    fn watch(&self, after: u64) -> BoxStream<'static, Result<Change, StoreError>> {
        self.inner.watch(after)
    }
    async fn compact(&self, revision: u64) -> Result<meshlink_store::Compaction, StoreError> {
        self.inner.compact(revision).await
    }
    async fn compacted_revision(&self) -> Result<u64, StoreError> {
        self.inner.compacted_revision().await
    }
    fn backend(&self) -> &'static str {
        "sqlite"
    }
    async fn get_many(&self, keys: &[ObjectKey]) -> Result<Vec<Option<Object>>, StoreError> {
        self.inner.get_many(keys).await
    }
    async fn write_batch(
        &self,
        writes: &[BatchWrite],
    ) -> Result<Vec<Result<Object, StoreError>>, StoreError> {
        // Counted before the commit, as single writes are.
        self.add(BATCHES, 1);
        for w in writes {
            self.add(&w.key().kind, 1);
        }
        let results = match self.inner.write_batch(writes).await {
            Ok(results) => results,
            Err(e) => {
                self.add(BATCHES, -1);
                for w in writes {
                    self.add(&w.key().kind, -1);
                }
                return Err(e);
            }
        };
        for (w, r) in writes.iter().zip(&results) {
            if r.is_err() {
                self.add(&w.key().kind, -1);
            }
        }
        Ok(results)
    }
}

/// The [`Counting`] entry that counts `write_batch` calls (transactions);
/// their items are counted under their kinds like single writes.
pub(crate) const BATCHES: &str = "(write_batch transactions)";

pub(crate) fn mesh_yaml(enabled: &str) -> String {
    format!(
        "apiVersion: meshlink.dev/v1alpha1\nkind: Mesh\nmetadata: {{name: default}}\nspec:\n  mtls:\n    enabledBackend: {enabled}\n    backends:\n      - {{name: ca-1, type: builtin, dpCert: {{rotation: {{expiration: 1h}}}}}}\n      - {{name: ca-2, type: builtin, dpCert: {{rotation: {{expiration: 1h}}}}}}\n"
    )
}

/// A store, the resources on it, and a Certify service.
pub(crate) struct Fixture {
    pub(crate) _dir: tempfile::TempDir,
    pub(crate) store: Arc<Counting>,
    pub(crate) resources: ResourceService,
    pub(crate) tokens: Arc<TokenService>,
}

impl Fixture {
    pub(crate) async fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let inner = SqliteStore::open(&dir.path().join("store.db"))
            .await
            .unwrap();
        let store = Arc::new(Counting {
            inner,
            writes: Mutex::default(),
        });
        let resources = ResourceService::new(store.clone());
        let tokens = Arc::new(TokenService::load(store.as_ref()).await.unwrap());
        let f = Fixture {
            _dir: dir,
            store,
            resources,
            tokens,
        };
        f.apply_mesh("ca-1").await;
        f
    }

    pub(crate) async fn apply_mesh(&self, enabled: &str) {
        let doc = meshlink_api::parse_documents(&mesh_yaml(enabled)).remove(0);
        self.resources.apply(doc.outcome.unwrap()).await.unwrap();
    }

    pub(crate) fn certify_service(&self, ca: CaHandle) -> CertifyService {
        let limiter = KeyedRateLimiter::new(10, 1.0).unwrap();
        CertifyService::new(
            self.resources.clone(),
            self.tokens.clone(),
            limiter,
            &MetricsRegistry::new(),
            ca,
        )
    }

    /// A Certify request for dataplane `dp` (service `svc-<dp>`).
    pub(crate) fn request(&self, dp: &str) -> tonic::Request<CertifyRequest> {
        let (token, _) = self.tokens.issue(
            "default",
            dp,
            vec![format!("svc-{dp}")],
            Duration::from_secs(3600),
        );
        let key = rcgen::KeyPair::generate().unwrap();
        let csr = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .serialize_request(&key)
            .unwrap()
            .der()
            .to_vec();
        let mut req = tonic::Request::new(CertifyRequest {
            mesh: "default".into(),
            dataplane: dp.into(),
            service: String::new(),
            csr,
            ..Default::default()
        });
        req.metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
        req
    }
}

async fn wait_for<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn certify_reads_the_ca_state_and_never_writes_anything() {
    let f = Fixture::new().await;
    let (ca, controller) = controller::new(
        f.resources.clone(),
        WallClock::start(),
        crate::replicas::Leadership::always(),
    );
    let shutdown = Shutdown::new();
    let task = tokio::spawn(controller.run(shutdown.clone()));
    let mesh = f.resources.get(Kind::Mesh, None, "default").await.unwrap();
    ca.load(&f.resources, &mesh)
        .await
        .expect("the controller creates the state");
    assert_eq!(
        f.store.writes(MESH_CA_STATE),
        1,
        "created once, by the controller"
    );
    shutdown.trigger();
    task.await.unwrap();

    // With no controller running, Certify still issues from the stored
    // state, and writes nothing at all.
    let before = f.store.all_writes();
    let svc = f.certify_service(ca.clone());
    for i in 0..20 {
        let resp = svc
            .certify(f.request(&format!("dp-{i}")))
            .await
            .expect("issued");
        assert_eq!(resp.get_ref().trust_bundle_pem.len(), 1);
    }
    assert_eq!(f.store.all_writes(), before, "Certify wrote to the store");

    // A switched backend that no controller has reconciled: Certify refuses
    // (the proxy retries) rather than writing the rotation itself.
    f.apply_mesh("ca-2").await;
    let before = f.store.all_writes();
    let status = svc.certify(f.request("dp-x")).await.expect_err("not ready");
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().contains("not ready"), "{status:?}");
    assert_eq!(f.store.all_writes(), before, "Certify wrote to the store");
    assert_eq!(f.store.writes(MESH_CA_STATE), 1);
}

#[tokio::test]
async fn issuance_events_end_a_rotation_with_writes_linear_in_proxies() {
    const N: usize = 40;
    let f = Fixture::new().await;
    let (ca, controller) = controller::new(
        f.resources.clone(),
        WallClock::start(),
        crate::replicas::Leadership::always(),
    );
    let shutdown = Shutdown::new();
    let task = tokio::spawn(controller.run(shutdown.clone()));
    let svc = f.certify_service(ca.clone());
    for i in 0..N {
        svc.certify(f.request(&format!("dp-{i}")))
            .await
            .expect("issued on ca-1");
    }
    let mesh_writes = f.store.writes("Mesh");
    let started = tokio::time::Instant::now();
    f.apply_mesh("ca-2").await;
    let first = svc
        .certify(f.request("dp-0"))
        .await
        .expect("issued on ca-2");
    assert_eq!(
        first.get_ref().trust_bundle_pem.len(),
        2,
        "both roots while rotating"
    );
    let on_old = ca.proxies_on_previous("default").await;
    assert_eq!(on_old, Some(N - 1), "dp-0 moved, the others did not");
    for i in 1..N {
        svc.certify(f.request(&format!("dp-{i}")))
            .await
            .expect("issued on ca-2");
    }
    let store = f.store.clone();
    wait_for("the rotation to end", async || {
        let (s, _) = mesh_ca::read_state(store.as_ref(), "default")
            .await
            .unwrap()?;
        s.previous.is_none().then_some(())
    })
    .await;
    let elapsed = started.elapsed();
    shutdown.trigger();
    task.await.unwrap();
    // The apply, then status writes at most once per tick (plus the first).
    let status_writes = f.store.writes("Mesh") - mesh_writes - 1;
    let ticks = (elapsed.as_secs_f64() / controller::TICK.as_secs_f64()).ceil() as usize;
    assert!(
        status_writes <= ticks + 1,
        "{status_writes} Mesh status writes in {elapsed:?}: not coalesced"
    );
    // create, rotation start, rotation end.
    assert_eq!(
        f.store.writes(MESH_CA_STATE),
        3,
        "{:?}",
        f.store.all_writes()
    );
    assert_eq!(f.store.writes(MESH_CA), 2, "two builtin CAs, created once");
    let issued = f.store.writes(ISSUED_CERT);
    assert!(
        (N..=2 * N).contains(&issued),
        "one coalesced record write per dataplane and flush, got {issued}"
    );
    let mesh = f.resources.get(Kind::Mesh, None, "default").await.unwrap();
    let rotation = mesh
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "CARotation")
        .expect("CARotation condition");
    assert_eq!(rotation.reason, "Stable", "{rotation:?}");
}

/// CPU time of thread `tid` of this process (`schedstat`, ns).
fn thread_cpu(tid: &str) -> Duration {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap_or_default();
    let ns = s
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

/// CPU time of the whole process (`/proc/self/stat` utime + stime).
fn process_cpu() -> Duration {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = s
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

/// The measure row "CA rotation over 1,000 proxies": N dataplanes hold a
/// ca-1 certificate, the backend switches to ca-2, every dataplane renews
/// through Certify, until the controller ends the rotation. Prints store
/// writes by kind, the controller thread's CPU and the process CPU.
/// `MESHLINK_BENCH_N` (default 1000). Run with `--run-ignored only`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark; see docs/BENCHMARKS.md"]
async fn bench_rotation_cost() {
    let n: usize = std::env::var("MESHLINK_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let f = Fixture::new().await;
    let (ca, controller) = controller::new(
        f.resources.clone(),
        WallClock::start(),
        crate::replicas::Leadership::always(),
    );
    let shutdown = Shutdown::new();
    // The controller on its own thread, so its CPU can be read alone.
    let sd = shutdown.clone();
    let rt = tokio::runtime::Handle::current();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let ctl = std::thread::spawn(move || {
        let me = std::fs::read_link("/proc/thread-self").unwrap();
        tid_tx
            .send(me.file_name().unwrap().to_string_lossy().to_string())
            .unwrap();
        let local = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _guard = rt.enter();
        local.block_on(controller.run(sd));
    });
    let tid = tid_rx.recv().unwrap();
    let svc = f.certify_service(ca.clone());
    let first: Vec<_> = (0..n).map(|i| f.request(&format!("dp-{i}"))).collect();
    let second: Vec<_> = (0..n).map(|i| f.request(&format!("dp-{i}"))).collect();
    for r in first {
        svc.certify(r).await.expect("issued on ca-1");
    }
    // Let the first round's bookkeeping settle before measuring.
    tokio::time::sleep(2 * controller::TICK).await;
    let before = f.store.all_writes();
    let cpu0 = process_cpu();
    let ctl0 = thread_cpu(&tid);
    let t0 = tokio::time::Instant::now();
    f.apply_mesh("ca-2").await;
    for r in second {
        svc.certify(r).await.expect("issued on ca-2");
    }
    let certify_wall = t0.elapsed();
    let store = f.store.clone();
    wait_for("the rotation to end", async || {
        let (s, _) = mesh_ca::read_state(store.as_ref(), "default")
            .await
            .unwrap()?;
        s.previous.is_none().then_some(())
    })
    .await;
    let wall = t0.elapsed();
    let cpu = process_cpu() - cpu0;
    let ctl_cpu = thread_cpu(&tid) - ctl0;
    shutdown.trigger();
    ctl.join().unwrap();
    let after = f.store.all_writes();
    let delta: BTreeMap<_, _> = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect();
    println!(
        "N={n}: writes during rotation {delta:?}; controller thread CPU during rotation {ctl_cpu:?}; process CPU during rotation {cpu:?}; Certify round {certify_wall:?}; rotation ended after {wall:?}"
    );
}
