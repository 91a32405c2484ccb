use bytes::Bytes;
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};

use super::*;

/// A body of `chunks` and then `trailers`, as a downstream sends it.
fn body(chunks: Vec<Bytes>, trailers: Option<HeaderMap>) -> ReplayBody {
    let mut frames: Vec<Result<Frame<Bytes>, BoxError>> =
        chunks.into_iter().map(|c| Ok(Frame::data(c))).collect();
    if let Some(t) = trailers {
        frames.push(Ok(Frame::trailers(t)));
    }
    ReplayBody::new(StreamBody::new(futures::stream::iter(frames)))
}

async fn collect(b: ReplayBody) -> (Vec<u8>, Option<HeaderMap>) {
    let collected = b.collect().await.expect("body");
    let trailers = collected.trailers().cloned();
    (collected.to_bytes().to_vec(), trailers)
}

fn chunks_of(total: usize, size: usize) -> Vec<Bytes> {
    (0..total)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<u8>>()
        .chunks(size)
        .map(Bytes::copy_from_slice)
        .collect()
}

#[tokio::test]
async fn a_32_kib_body_is_replayed_byte_for_byte_with_its_trailers() {
    let chunks = chunks_of(32 * 1024, 1000);
    let want: Vec<u8> = chunks.iter().flatten().copied().collect();
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", "0".parse().unwrap());
    let first = body(chunks, Some(trailers.clone()));
    let second = first.try_clone().expect("replayable before the first try");
    assert_eq!(collect(first).await, (want.clone(), Some(trailers.clone())));
    let third = second.try_clone().expect("still replayable");
    assert_eq!(
        collect(second).await,
        (want.clone(), Some(trailers.clone()))
    );
    assert_eq!(collect(third).await, (want, Some(trailers)));
}

#[tokio::test]
async fn a_retry_after_a_partial_first_try_replays_and_then_reads_on() {
    let chunks = chunks_of(10_000, 1000);
    let want: Vec<u8> = chunks.iter().flatten().copied().collect();
    let mut first = body(chunks, None);
    // The first try fails after sending three chunks.
    for _ in 0..3 {
        first.frame().await.unwrap().unwrap();
    }
    let second = first.try_clone().expect("replayable");
    drop(first);
    assert_eq!(collect(second).await.0, want);
}

#[tokio::test]
async fn a_1_mib_body_streams_whole_and_cannot_be_retried() {
    let chunks = chunks_of(1024 * 1024, 16 * 1024);
    let want: Vec<u8> = chunks.iter().flatten().copied().collect();
    let first = body(chunks, None);
    let pending_retry = first.try_clone().expect("nothing read yet");
    let shared = first.shared.clone();
    assert_eq!(collect(first).await.0, want);
    assert!(shared.lock().unwrap().overflowed);
    assert!(pending_retry.try_clone().is_none());
    assert!(!pending_retry.is_replayable());
}

#[tokio::test]
async fn a_declared_length_over_the_cap_is_not_retryable_from_the_start() {
    let big = ReplayBody::new(http_body_util::Full::new(Bytes::from(vec![
        7u8;
        REPLAY_CAP + 1
    ])));
    assert!(big.try_clone().is_none());
    assert_eq!(collect(big).await.0.len(), REPLAY_CAP + 1);
}

#[tokio::test]
async fn an_empty_body_ends_at_once_on_every_try() {
    let first = ReplayBody::empty();
    assert!(first.is_end_stream());
    let second = first.try_clone().unwrap();
    assert_eq!(collect(first).await, (Vec::new(), None));
    assert_eq!(collect(second).await, (Vec::new(), None));
}
