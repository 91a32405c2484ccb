//! The reconnect race from the field, through the real ADS server and hub,
//! for every interleaving of {S1 open, S1 request, S1 close+cleanup,
//! S2 open, S2 request, reconcile tick}.
//!
//! After the interleaving the CA is rotated. Whichever stream sent its
//! first request last owns the proxy (a stream takes over at once, but only
//! after its first request's node.id matched). If that is S2,
//! S2 must receive the new identity Secret. If it is S1 (the interleaving
//! had S2 request first), S2 must have been ended with ABORTED — never left
//! silently orphaned — and the proxy's reconnect S3 must receive it. In
//! every case no owner record or per-proxy task outlives the streams.

mod ads_support;

use std::time::Duration;

use ads_support::{Harness, MemorySource, Stream, identity_pem};
use tonic::Code;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    S1Open,
    S1Request,
    S1Close,
    S2Open,
    S2Request,
    Tick,
}

/// Every order of the six steps that keeps each stream's own steps in order.
fn interleavings() -> Vec<Vec<Step>> {
    use Step::*;
    let all = [S1Open, S1Request, S1Close, S2Open, S2Request, Tick];
    let mut out = Vec::new();
    permute(&mut all.to_vec(), 0, &mut out);
    out.retain(|p| {
        let pos = |s| p.iter().position(|x| *x == s).unwrap();
        pos(S1Open) < pos(S1Request)
            && pos(S1Request) < pos(S1Close)
            && pos(S2Open) < pos(S2Request)
    });
    out
}

fn permute(v: &mut Vec<Step>, k: usize, out: &mut Vec<Vec<Step>>) {
    if k == v.len() {
        out.push(v.clone());
        return;
    }
    for i in k..v.len() {
        v.swap(k, i);
        permute(v, k + 1, out);
        v.swap(k, i);
    }
}

/// Sends the first request and waits for the stream's answer: the first
/// Secret (then ACKs it), or the status it was ended with.
async fn request(s: &mut Stream) -> Result<(), Code> {
    s.request(None).await;
    match s.next().await {
        Some(Ok(r)) => {
            s.request(Some(&r)).await;
            Ok(())
        }
        Some(Err(status)) => Err(status.code()),
        None => Err(Code::Cancelled),
    }
}

/// Reads until a Secret carrying an identity from the CA `fingerprint`.
async fn receives_identity_from(h: &Harness, s: &mut Stream, fingerprint: &str) {
    loop {
        let r = match s.next().await {
            Some(Ok(r)) => r,
            other => panic!("stream ended before the new identity arrived: {other:?}"),
        };
        s.request(Some(&r)).await;
        if let Some(pem) = identity_pem(&r) {
            let (_, ca) = h
                .source
                .lookup(&pem)
                .expect("the hub sent an issued certificate");
            if ca == fingerprint {
                return;
            }
        }
    }
}

async fn run(order: &[Step]) {
    let h = Harness::new(MemorySource::new(1, Duration::from_secs(3600)));
    let mut s1 = None;
    let mut s2 = None;
    let mut requested_last = None;
    let mut s2_result = None;
    for step in order {
        match step {
            Step::S1Open => s1 = Some(h.open("web-0")),
            Step::S2Open => s2 = Some(h.open("web-0")),
            Step::S1Request => {
                let _ = request(s1.as_mut().unwrap()).await;
                requested_last = Some(1);
            }
            Step::S2Request => {
                s2_result = Some(request(s2.as_mut().unwrap()).await);
                requested_last = Some(2);
            }
            Step::S1Close => s1.as_mut().unwrap().close_and_cleanup().await,
            Step::Tick => h.hub.sync(true).await,
        }
    }
    let new_ca = h.source.rotate();
    h.hub.mesh_changed(ads_support::MESH);
    let mut s2 = s2.unwrap();
    if requested_last == Some(2) {
        assert_eq!(s2_result, Some(Ok(())), "{order:?}: S2 is served");
        receives_identity_from(&h, &mut s2, &new_ca).await;
        s2.close_and_cleanup().await;
    } else {
        // S1 took over from S2 and then closed: S2 was told to go, either
        // in answer to its request or after it was served.
        let code = match s2_result {
            Some(Err(code)) => code,
            Some(Ok(())) => loop {
                match s2.next().await {
                    Some(Ok(_)) => continue,
                    Some(Err(status)) => break status.code(),
                    None => break Code::Cancelled,
                }
            },
            None => unreachable!("S2 always requests"),
        };
        assert_eq!(code, Code::Aborted, "{order:?}: S2 must end with ABORTED");
        let mut s3 = h.open("web-0");
        request(&mut s3).await.expect("the reconnect is served");
        receives_identity_from(&h, &mut s3, &new_ca).await;
        s3.close_and_cleanup().await;
    }
    if let Some(mut s1) = s1 {
        s1.close_and_cleanup().await;
    }
    h.hub.sync(false).await;
    assert_eq!(h.registry.len(), 0, "{order:?}: owner records leaked");
    tokio::time::timeout(Duration::from_secs(5), async {
        while h.registry.live_tasks() > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "{order:?}: {} per-proxy tasks leaked",
            h.registry.live_tasks()
        )
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_interleaving_keeps_the_newest_stream_current() {
    let orders = interleavings();
    assert_eq!(orders.len(), 60, "6!/(3!·2!) orders");
    for order in &orders {
        run(order).await;
    }
}
