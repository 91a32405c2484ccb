use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use tokio::time::Instant;

use super::*;
use crate::http::trace::sample_span as span;

#[test]
fn zipkin_json_uses_64_bit_ids_unless_asked() {
    let json: serde_json::Value =
        serde_json::from_slice(&zipkin(&[span(Direction::Inbound, "backend")], false)).unwrap();
    let s = &json[0];
    assert_eq!(s["traceId"], "0102030405060708");
    assert_eq!(s["parentId"], "0707070707070707");
    assert_eq!(s["name"], "inbound GET backend");
    assert_eq!(s["kind"], "SERVER");
    assert_eq!(s["timestamp"], 1_000_000);
    assert_eq!(s["duration"], 3_000);
    assert_eq!(s["localEndpoint"]["serviceName"], "backend");
    assert_eq!(s["tags"]["env"], "prod");
    assert_eq!(s["tags"]["http.status_code"], "503");
    assert_eq!(s["tags"]["error"], "true");
    let wide: serde_json::Value =
        serde_json::from_slice(&zipkin(&[span(Direction::Inbound, "b")], true)).unwrap();
    assert_eq!(wide[0]["traceId"], "00000000000000000102030405060708");
}

/// An OTLP/gRPC collector that hands on what it is sent.
struct Sink(mpsc::UnboundedSender<ExportTraceServiceRequest>);

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let _ = self.0.send(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tokio::test]
async fn grpc_export_sends_the_encoded_request_to_the_generated_service() {
    let incoming = tonic::transport::server::TcpIncoming::bind(([127, 0, 0, 1], 0).into())
        .expect("bind a port");
    let target = incoming.local_addr().expect("its address").to_string();
    let (tx, mut received) = mpsc::unbounded_channel();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(Sink(tx)))
            .serve_with_incoming(incoming),
    );
    let batch = [
        span(Direction::Outbound, "web"),
        span(Direction::Inbound, "backend"),
    ];
    let mut transport = Transport::default();
    let collector = Collector::OtlpGrpc { target };
    export(&collector, &batch, &mut transport)
        .await
        .expect("exported");
    let got = received.recv().await.expect("a request");
    let sent = otlp_encode::encode_request(&batch);
    assert_eq!(
        got,
        ExportTraceServiceRequest::decode(sent.as_slice()).unwrap()
    );
    let services: Vec<_> = got
        .resource_spans
        .iter()
        .map(|r| r.resource.as_ref().unwrap().attributes[0].clone())
        .collect();
    assert_eq!(services.len(), 2);
    assert_eq!(
        got.resource_spans[1].scope_spans[0].spans[0].name,
        "outbound GET backend"
    );
    // The client is kept for the next batch.
    export(&collector, &batch[..1], &mut transport)
        .await
        .expect("exported");
    assert_eq!(
        received
            .recv()
            .await
            .expect("a request")
            .resource_spans
            .len(),
        1
    );
    server.abort();
}

#[tokio::test(start_paused = true)]
async fn a_batch_takes_what_arrived_within_its_delay_or_leaves_when_full() {
    let (tx, mut rx) = mpsc::channel(QUEUE);
    let mut batch = Vec::new();
    tx.try_send(span(Direction::Inbound, "a")).unwrap();
    rx.recv_many(&mut batch, MAX_BATCH).await;
    let started = Instant::now();
    let late = tx.clone();
    tokio::spawn(async move {
        tokio::time::sleep(BATCH_DELAY / 2).await;
        late.try_send(span(Direction::Inbound, "b")).unwrap();
    });
    fill(&mut rx, &mut batch).await;
    assert_eq!(batch.len(), 2);
    assert_eq!(started.elapsed(), BATCH_DELAY, "on paused time");

    // A full batch goes at the next look at the queue.
    batch.clear();
    for _ in 0..MAX_BATCH + 10 {
        tx.try_send(span(Direction::Inbound, "a")).unwrap();
    }
    let started = Instant::now();
    rx.recv_many(&mut batch, 1).await;
    fill(&mut rx, &mut batch).await;
    assert_eq!(batch.len(), MAX_BATCH);
    assert_eq!(started.elapsed(), BATCH_PAUSE);

    // A closed queue ends the batch with what it holds.
    batch.clear();
    drop(tx);
    fill(&mut rx, &mut batch).await;
    assert_eq!(batch.len(), 10);
    assert!(started.elapsed() < BATCH_DELAY);
}
