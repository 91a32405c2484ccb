//! `GET /api/v1/{plural}[?mesh=M][&labelSelector=S][&limit=N][&continue=T]`:
//! lists, whole or one page at a time.
//!
//! - **Paged** (`limit`): one keyset page from the store and, when more
//!   remain, an opaque `continue` token ([`ContinueToken`]) for the next.
//!   Every page reports the revision read before the first page.
//! - **Whole** (no `limit`): the body is streamed, read from the store
//!   [`STREAM_PAGE`] objects at a time as the client reads it, so the
//!   answer is never held in memory whole, whatever the list's size. The
//!   first page is read before the status line, so a store failure is still
//!   a 503; a failure after that cuts the body short (the client sees
//!   invalid JSON) and is logged.
//!
//! Neither form is a snapshot: objects written during the walk appear if
//! they sort after the point reached and not otherwise. A watch from the
//! reported revision replays every such write. This module must never hold
//! a store connection while waiting for the client.

use std::num::NonZeroUsize;

use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use meshlink_api::{Kind, Resource};
use meshlink_store::{LabelSelector, ListCursor};
use serde::Deserialize;

use super::continue_token::{ContinueToken, ListScope, from_another_store};
use super::resources::kind_of;
use super::{ApiError, ApiState};
use crate::resources::{ResourceError, ResourceService};

/// Largest `limit` a client may ask for.
pub const MAX_LIMIT: usize = 1_000;

/// Objects read from the store per step of a streamed whole list.
const STREAM_PAGE: NonZeroUsize = NonZeroUsize::new(500).expect("not zero");

/// Query parameters of a list.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ListParams {
    mesh: Option<String>,
    label_selector: Option<String>,
    limit: Option<String>,
    #[serde(rename = "continue")]
    continue_: Option<String>,
}

/// What one list request walks.
struct Walk {
    resources: ResourceService,
    kind: Kind,
    mesh: Option<String>,
    selector: Option<LabelSelector>,
    revision: u64,
}

pub(super) async fn list(
    State(st): State<ApiState>,
    Path(plural): Path<String>,
    q: Result<Query<ListParams>, QueryRejection>,
) -> Result<Response, ApiError> {
    let kind = kind_of(&plural)?;
    let Query(p) =
        q.map_err(|e| ApiError::bad_request(format!("invalid query string: {}", e.body_text())))?;
    let selector = p
        .label_selector
        .as_deref()
        .map(LabelSelector::parse)
        .transpose()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let limit = p.limit.as_deref().map(parse_limit).transpose()?;
    let scope = ListScope::new(kind, p.mesh.as_deref(), selector.as_ref());
    let (revision, after) = match p.continue_.as_deref() {
        Some(t) => {
            let token = ContinueToken::decode(t, &scope)?;
            let current = st
                .resources
                .store()
                .current_revision()
                .await
                .map_err(|e| ApiError::from(ResourceError::from(e)))?;
            if token.revision > current {
                return Err(from_another_store(&token, current));
            }
            (token.revision, Some(token.after))
        }
        // Read the revision before the list: a watch resuming from it may
        // see a change the list already had (harmless), but never miss one.
        None => (*st.revision.borrow(), None),
    };
    let walk = Walk {
        resources: st.resources.clone(),
        kind,
        mesh: scope.mesh.clone(),
        selector,
        revision,
    };
    match limit {
        Some(limit) => one_page(walk, &scope, after, limit).await,
        None => whole(walk, after).await,
    }
}

fn parse_limit(s: &str) -> Result<NonZeroUsize, ApiError> {
    s.parse::<NonZeroUsize>()
        .ok()
        .filter(|n| n.get() <= MAX_LIMIT)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "limit={s:?} is not a page size: use a whole number from 1 to {MAX_LIMIT}, \
                 or leave limit out for the whole list"
            ))
        })
}

// === impl Walk ===

impl Walk {
    async fn page(
        &self,
        after: Option<ListCursor>,
        limit: NonZeroUsize,
    ) -> Result<(Vec<Resource>, Option<ListCursor>), ResourceError> {
        self.resources
            .list_page(
                self.kind,
                self.mesh.as_deref(),
                self.selector.clone(),
                after,
                limit,
            )
            .await
    }

    /// The end of the body: `],"revision":"R"` and, for a page that has a
    /// next one, `,"continue":"T"`, then `}`.
    fn tail(&self, next: Option<String>) -> Vec<u8> {
        let mut out = format!("],\"revision\":\"{}\"", self.revision);
        if let Some(t) = next {
            out.push_str(&format!(",\"continue\":\"{t}\""));
        }
        out.push('}');
        out.into_bytes()
    }
}

/// `{"items":[...],"revision":"R"[,"continue":"T"]}` for one page.
async fn one_page(
    walk: Walk,
    scope: &ListScope,
    after: Option<ListCursor>,
    limit: NonZeroUsize,
) -> Result<Response, ApiError> {
    let (items, next) = walk.page(after, limit).await?;
    let mut body = b"{\"items\":[".to_vec();
    append_items(&mut body, &items, true);
    let token = next.map(|after| {
        ContinueToken {
            revision: walk.revision,
            after,
        }
        .encode(scope)
    });
    body.extend(walk.tail(token));
    Ok(json_response(Body::from(body)))
}

/// The whole list, streamed page by page as the client reads it.
async fn whole(walk: Walk, after: Option<ListCursor>) -> Result<Response, ApiError> {
    let (items, next) = walk.page(after, STREAM_PAGE).await?;
    let mut head = b"{\"items\":[".to_vec();
    append_items(&mut head, &items, true);
    let first = !items.is_empty();
    drop(items);
    let state = Some((walk, next, first));
    let rest = futures::stream::try_unfold(state, |state| async move {
        let Some((walk, next, any)) = state else {
            return Ok(None);
        };
        let Some(after) = next else {
            let tail = walk.tail(None);
            return Ok(Some((Bytes::from(tail), None)));
        };
        let (items, next) = walk.page(Some(after), STREAM_PAGE).await.inspect_err(|e| {
            tracing::warn!(error = %e, kind = %walk.kind, "list cut short: the store failed mid-list");
        })?;
        let mut chunk = Vec::new();
        append_items(&mut chunk, &items, !any);
        let any = any || !items.is_empty();
        Ok::<_, ResourceError>(Some((Bytes::from(chunk), Some((walk, next, any)))))
    });
    let head = futures::stream::once(async move { Ok::<_, ResourceError>(Bytes::from(head)) });
    Ok(json_response(Body::from_stream(head.chain(rest))))
}

/// Appends `items` as JSON array elements; `first` when nothing precedes
/// them in the array.
fn append_items(out: &mut Vec<u8>, items: &[Resource], mut first: bool) {
    for r in items {
        if !first {
            out.push(b',');
        }
        first = false;
        serde_json::to_writer(&mut *out, &r.to_api_json()).expect("a resource serializes");
    }
}

fn json_response(body: Body) -> Response {
    ([(CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_must_be_a_whole_number_from_one_to_the_maximum() {
        assert_eq!(parse_limit("1").unwrap().get(), 1);
        assert_eq!(parse_limit("1000").unwrap().get(), MAX_LIMIT);
        for bad in [
            "0",
            "-1",
            "1001",
            "ten",
            "",
            "1.5",
            "99999999999999999999999",
        ] {
            let e = parse_limit(bad).unwrap_err();
            assert!(format!("{e:?}").contains("limit="), "{bad}: {e:?}");
        }
    }
}
