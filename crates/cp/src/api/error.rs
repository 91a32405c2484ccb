//! The REST API's error body: `{"error": {"status", "reason", "message", "fields"}}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use meshlink_api::FieldError;
use serde::Serialize;

use crate::resources::ResourceError;

/// An API error: an HTTP status, a machine reason and a human message that
/// names the problem and the fix.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    reason: &'static str,
    message: String,
    fields: Vec<FieldError>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    status: u16,
    reason: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    fields: &'a [FieldError],
}

impl ApiError {
    /// Builds an error.
    pub fn new(status: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            reason,
            message: message.into(),
            fields: Vec::new(),
        }
    }

    /// 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    /// 404 Not Found.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "NotFound", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "Unauthorized", message)
    }

    /// 422 with every field error.
    pub fn invalid(fields: Vec<FieldError>) -> Self {
        let message = fields
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("; ");
        ApiError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            reason: "Invalid",
            message,
            fields,
        }
    }
}

impl From<ResourceError> for ApiError {
    fn from(e: ResourceError) -> Self {
        match e {
            ResourceError::NotFound(m) => ApiError::not_found(format!("{m} not found")),
            e @ ResourceError::AlreadyExists(_) => {
                ApiError::new(StatusCode::CONFLICT, "AlreadyExists", e.to_string())
            }
            ResourceError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "Conflict", m),
            ResourceError::Invalid(fields) => ApiError::invalid(fields),
            ResourceError::BadRequest(m) => ApiError::bad_request(m),
            ResourceError::InUse(m) => ApiError::new(StatusCode::CONFLICT, "InUse", m),
            e @ ResourceError::Store(_) => {
                tracing::warn!(error = %e, "store error");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "StoreUnavailable",
                    e.to_string(),
                )
            }
        }
    }
}

impl ApiError {
    /// The error body's inner object (`status`, `reason`, `message`,
    /// `fields`), for APIs that report several errors in one answer.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self.inner()).unwrap_or_default()
    }

    fn inner(&self) -> Inner<'_> {
        Inner {
            status: self.status.as_u16(),
            reason: self.reason,
            message: &self.message,
            fields: &self.fields,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            error: Inner {
                status: self.status.as_u16(),
                reason: self.reason,
                message: &self.message,
                fields: &self.fields,
            },
        };
        (self.status, Json(body)).into_response()
    }
}
