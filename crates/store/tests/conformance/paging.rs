//! Conformance: keyset paging of lists (`Store::list_page`, and `list`
//! with `after`/`limit`): every object once and in order, stable under
//! writes between pages, combined with mesh and label filters, and the
//! edges of `limit`.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroUsize;

use meshlink_store::{LabelSelector, ListCursor, ListPage, ListQuery, Store};
use serde_json::json;

use super::{Harness, create, key, labels};

/// Creates `n` objects `obj-00000`… spread over meshes `m0`..`m4`, with
/// labels `tier=gold|silver` (every third gold) and `canary` (every seventh).
async fn populate(store: &std::sync::Arc<dyn Store>, n: usize) {
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..4 {
        let store = store.clone();
        tasks.spawn(async move {
            for i in (t..n).step_by(4) {
                let (mesh, lbl) = item(i);
                store
                    .create(&key(&mesh, &name(i)), &lbl, &json!({"i": i}))
                    .await
                    .unwrap();
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
}

fn name(i: usize) -> String {
    format!("obj-{i:05}")
}

fn item(i: usize) -> (String, BTreeMap<String, String>) {
    let tier = if i.is_multiple_of(3) {
        "gold"
    } else {
        "silver"
    };
    let mut lbl = labels(&[("tier", tier)]);
    if i.is_multiple_of(7) {
        lbl.insert("canary".into(), "true".into());
    }
    (format!("m{}", i % 5), lbl)
}

fn query(mesh: Option<&str>, selector: Option<&str>, limit: usize) -> ListQuery {
    ListQuery {
        kind: "Thing".into(),
        mesh: mesh.map(str::to_string),
        selector: selector.map(|s| LabelSelector::parse(s).unwrap()),
        after: None,
        limit: NonZeroUsize::new(limit),
    }
}

/// Walks every page of `q`, running `between(page number)` after each page
/// that has a next one. Returns the pages.
async fn walk<F, Fut>(store: &dyn Store, mut q: ListQuery, mut between: F) -> Vec<ListPage>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut pages = Vec::new();
    loop {
        let page = store.list_page(&q).await.unwrap();
        let next = page.next.clone();
        if let (Some(n), Some(last)) = (&next, page.objects.last()) {
            assert_eq!(*n, ListCursor::after(last), "next is the last object");
        }
        pages.push(page);
        match next {
            Some(n) => {
                between(pages.len()).await;
                q.after = Some(n);
            }
            None => return pages,
        }
        assert!(pages.len() < 100_000, "paging does not end");
    }
}

fn keys(pages: &[ListPage]) -> Vec<(String, String)> {
    pages
        .iter()
        .flat_map(|p| &p.objects)
        .map(|o| (o.key.mesh.clone(), o.key.name.clone()))
        .collect()
}

pub async fn paging_visits_every_object_once_in_order(h: &Harness) {
    const N: usize = 5_000;
    let store = h.open().await;
    populate(&store, N).await;
    let pages = walk(&*store, query(None, None, 100), |_| async {}).await;
    assert_eq!(pages.len(), N / 100, "5,000 objects in pages of 100");
    assert!(pages.iter().all(|p| p.objects.len() == 100), "full pages");
    let got = keys(&pages);
    let whole: Vec<(String, String)> = store
        .list(&query(None, None, 0))
        .await
        .unwrap()
        .iter()
        .map(|o| (o.key.mesh.clone(), o.key.name.clone()))
        .collect();
    assert_eq!(whole.len(), N);
    assert_eq!(got, whole, "pages concatenate to the whole list, in order");
    let unique: BTreeSet<_> = got.iter().collect();
    assert_eq!(unique.len(), N, "no object twice");
}

/// Objects created, updated and deleted between pages, before and after the
/// cursor, never make an untouched object skipped or repeated.
pub async fn writes_between_pages_never_skip_or_repeat_untouched_objects(h: &Harness) {
    const N: usize = 300;
    let store = h.open().await;
    populate(&store, N).await;
    // Touched objects: every 10th is deleted, every 10th+5 is updated, and
    // new ones appear between existing names ("obj-00012x").
    let deleted: BTreeSet<usize> = (0..N).step_by(10).collect();
    let updated: BTreeSet<usize> = (5..N).step_by(10).collect();
    let s = store.clone();
    let pages = walk(&*store, query(None, None, 25), move |page| {
        let s = s.clone();
        async move {
            // Each round touches objects spread over the whole key space,
            // so some sit behind the cursor and some ahead of it.
            for round_item in (page..N).step_by(N / 5) {
                let i = round_item - round_item % 10;
                let (mesh, lbl) = item(i);
                let _ = s.delete(&key(&mesh, &name(i)), None).await;
                let (mesh, lbl5) = item(i + 5);
                s.update(&key(&mesh, &name(i + 5)), &lbl5, &json!({"v": 2}), None)
                    .await
                    .unwrap();
                let fresh = format!("{}x{page}", name(i + 2));
                s.create(&key(&mesh, &fresh), &lbl, &json!({"new": true}))
                    .await
                    .unwrap();
            }
        }
    })
    .await;
    let got = keys(&pages);
    let mut sorted = got.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(got, sorted, "strictly increasing: nothing repeated");
    for i in (0..N).filter(|i| !deleted.contains(i)) {
        let (mesh, _) = item(i);
        let n = got
            .iter()
            .filter(|k| **k == (mesh.clone(), name(i)))
            .count();
        assert_eq!(n, 1, "{mesh}/{} listed {n} times", name(i));
    }
    assert!(
        updated
            .iter()
            .all(|i| got.contains(&(item(*i).0, name(*i)))),
        "updated objects are listed"
    );
}

pub async fn paging_combines_with_mesh_and_label_filters(h: &Harness) {
    const N: usize = 700;
    let store = h.open().await;
    populate(&store, N).await;
    for (mesh, sel, limit) in [
        (None, Some("tier=gold"), 7),
        (Some("m3"), None, 9),
        (Some("m3"), Some("tier!=gold,canary"), 2),
        (Some("m0"), Some("!canary"), 1_000),
        (None, Some("canary"), 1),
    ] {
        let whole: Vec<_> = store
            .list(&query(mesh, sel, 0))
            .await
            .unwrap()
            .iter()
            .map(|o| (o.key.mesh.clone(), o.key.name.clone()))
            .collect();
        assert!(!whole.is_empty());
        let pages = walk(&*store, query(mesh, sel, limit), |_| async {}).await;
        assert_eq!(
            keys(&pages),
            whole,
            "paged mesh={mesh:?} selector={sel:?} limit={limit}"
        );
        let (last, full) = pages.split_last().unwrap();
        assert!(full.iter().all(|p| p.objects.len() == limit));
        assert!(!last.objects.is_empty(), "no empty last page");
        assert_eq!(pages.len(), whole.len().div_ceil(limit));
    }
    let none = store
        .list_page(&query(Some("m1"), Some("tier=platinum"), 10))
        .await
        .unwrap();
    assert_eq!(none, ListPage::default(), "no match: empty, no next page");
}

/// `limit` is a `NonZeroUsize` (0 cannot be asked for); a limit beyond the
/// result, even `usize::MAX`, returns it all; a cursor past the end or
/// between keys works; `list` honours `after` and `limit` too.
pub async fn limits_and_cursors_at_the_edges(h: &Harness) {
    let store = h.open().await;
    for n in ["a", "b", "c"] {
        create(&*store, "m", n).await;
    }
    let names = |p: &[meshlink_store::Object]| -> Vec<String> {
        p.iter().map(|o| o.key.name.clone()).collect()
    };
    let all = store
        .list_page(&query(None, None, usize::MAX))
        .await
        .unwrap();
    assert_eq!(
        (names(&all.objects), all.next),
        (vec!["a".into(), "b".into(), "c".into()], None)
    );
    let exact = store.list_page(&query(None, None, 3)).await.unwrap();
    assert_eq!(exact.next, None, "a page that ends the list has no next");
    let pages = walk(&*store, query(None, None, 1), |_| async {}).await;
    assert_eq!(pages.len(), 3, "limit 1: one page per object");

    let after = |name: &str| ListCursor {
        mesh: "m".into(),
        name: name.into(),
    };
    let mut q = query(None, None, 10);
    q.after = Some(after("bb")); // not a stored name: starts at the next one
    assert_eq!(names(&store.list_page(&q).await.unwrap().objects), ["c"]);
    q.after = Some(after("c"));
    assert_eq!(store.list_page(&q).await.unwrap(), ListPage::default());
    q.after = Some(ListCursor {
        mesh: "a".into(),
        name: "zzz".into(),
    }); // an earlier mesh sorts first, whatever the name
    assert_eq!(store.list_page(&q).await.unwrap().objects.len(), 3);

    // With a mesh filter, a cursor in another mesh starts before or after it.
    let mut q = query(Some("m"), None, 10);
    q.after = Some(after("a"));
    assert_eq!(
        names(&store.list_page(&q).await.unwrap().objects),
        ["b", "c"]
    );
    q.after = Some(ListCursor {
        mesh: "a".into(),
        name: "zzz".into(),
    });
    assert_eq!(store.list_page(&q).await.unwrap().objects.len(), 3);
    q.after = Some(ListCursor {
        mesh: "n".into(),
        name: "".into(),
    });
    assert_eq!(store.list_page(&q).await.unwrap(), ListPage::default());

    let mut q = query(None, None, 1);
    q.after = Some(after("a"));
    assert_eq!(
        names(&store.list(&q).await.unwrap()),
        ["b"],
        "list pages too"
    );
}
