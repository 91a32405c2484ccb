//! The `meshlink.v1.RouterStatus/Report` RPC on the xDS port: a router
//! streams its link states and network view, authenticated with its router
//! token. Each report goes to the router status task; when the stream ends
//! (closed, broken, or the control plane shutting down) the task is told,
//! so nothing the stream reported stays in status.
//!
//! It must never accept a dataplane token, nor a report for another site
//! than the token's.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use meshlink_runtime::Shutdown;
use meshlink_xds::certify::router_status_server::RouterStatus;
use meshlink_xds::certify::{RouterReport, RouterReportSummary};
use tonic::{Request, Response, Status, Streaming};

use super::status::{Event, RouterStatusHandle};
use crate::identity::certify::{bearer_from, token_status};
use crate::identity::tokens::TokenService;
use crate::report_stream::{OnEnd, next_report};

/// Serves RouterStatus.
pub(crate) struct RouterStatusService {
    pub(crate) tokens: Arc<TokenService>,
    pub(crate) status: RouterStatusHandle,
    pub(crate) shutdown: Shutdown,
    pub(crate) next_stream: AtomicU64,
    /// Where the reported traffic figures go (never stored).
    pub(crate) traffic: crate::traffic::TrafficBoard,
}

impl RouterStatusService {
    /// The site of the caller's router token, or why the call is refused.
    fn site_of(&self, metadata: &tonic::metadata::MetadataMap) -> Result<String, Status> {
        let token = bearer_from(metadata).map_err(|_| {
            Status::unauthenticated(
                "RouterStatus needs the site's router token: send gRPC metadata \
                 'authorization: Bearer <token>' with a token from `meshlink token router`",
            )
        })?;
        let claims = self.tokens.verify_proxy(token).map_err(token_status)?;
        if !claims.is_router() {
            return Err(Status::permission_denied(format!(
                "RouterStatus takes a router token (`meshlink token router`), but this is the \
                 token of {}",
                claims.subject()
            )));
        }
        Ok(claims.site)
    }
}

#[tonic::async_trait]
impl RouterStatus for RouterStatusService {
    async fn report(
        &self,
        request: Request<Streaming<RouterReport>>,
    ) -> Result<Response<RouterReportSummary>, Status> {
        let site = self.site_of(request.metadata())?;
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed) + 1;
        let (status, traffic) = (self.status.clone(), self.traffic.clone());
        let _ended = OnEnd::new(move || {
            traffic.ended(stream);
            status.send(Event::Ended { stream });
        });
        let mut inbound = request.into_inner();
        let mut reports = 0u64;
        while let Some(mut report) =
            next_report(&self.shutdown, &mut inbound, "router status", &site).await?
        {
            if !report.site.is_empty() && report.site != site {
                return Err(Status::invalid_argument(format!(
                    "report.site {:?} is not the token's site {site:?}; the router \
                     reports for the site its token names",
                    report.site
                )));
            }
            reports += 1;
            self.traffic.reported(
                stream,
                &site,
                std::mem::take(&mut report.traffic),
                std::mem::take(&mut report.link_traffic),
            );
            self.status.send(Event::Report {
                stream,
                site: site.clone(),
                report: Box::new(report),
            });
        }
        Ok(Response::new(RouterReportSummary { reports }))
    }
}
