//! The API's one error type and its mapping to HTTP status codes.
//!
//! Every error answers `{"error": "<message>", "status": <HTTP status>, "code": "<stable code>"}`.
//! See the crate documentation for the table of codes.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use assay_kbtools::kbedit::EditError;
use assay_project::HarnessError;
use assay_run::runs::RunsError;

/// A stable, machine-readable error code and the HTTP status it maps to.
pub trait ErrorCode {
    /// The stable code (`bad_request`, `not_found`, …).
    fn code(&self) -> &'static str;
    /// The HTTP status.
    fn status(&self) -> StatusCode;
}

impl ErrorCode for HarnessError {
    fn code(&self) -> &'static str {
        match self {
            HarnessError::Usage(_) => "bad_request",
            HarnessError::Held(_) => "busy",
            HarnessError::Busy(_) => "kb_busy",
            e if e.is_infrastructure() => "infrastructure",
            HarnessError::Data(_) | HarnessError::Kb(_) => "invalid_project",
            HarnessError::Infrastructure(_) => "infrastructure",
        }
    }

    fn status(&self) -> StatusCode {
        match self.code() {
            "bad_request" => StatusCode::BAD_REQUEST,
            "invalid_project" => StatusCode::UNPROCESSABLE_ENTITY,
            "kb_busy" => StatusCode::SERVICE_UNAVAILABLE,
            "busy" => StatusCode::CONFLICT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An error answered as JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The stable code.
    pub code: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// The field of the request body at fault (422), when one is.
    pub field: Option<String>,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
        }
    }

    /// The same error, naming the field at fault.
    pub fn with_field(mut self, field: impl Into<String>) -> ApiError {
        self.field = Some(field.into());
        self
    }

    /// 401: a write without the admin token (answered with `WWW-Authenticate: Bearer`).
    pub fn unauthorized(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    /// 403 with `code`: a wrong token, or a read-only server.
    pub fn forbidden(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, code, message)
    }

    /// 422: a well-formed request whose content breaks a rule; names the field when known.
    pub fn invalid(field: Option<&str>, message: impl Into<String>) -> ApiError {
        let e = ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
            message,
        );
        match field {
            Some(f) if !f.is_empty() => e.with_field(f),
            _ => e,
        }
    }

    /// 400: a bad parameter or body.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 404: an unknown test id, topic or route.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 409: a run or calibration is in progress.
    pub fn busy(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "busy", message)
    }

    /// 500: a failure inside the server.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// A request body that could not be read: 413 `payload_too_large` when it is larger than
    /// the server takes, 408 `request_timeout` when it stopped arriving (`--body-timeout`),
    /// else 400 `bad_request`.
    pub fn body(e: &axum::extract::rejection::BytesRejection) -> ApiError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
        let mut status = e.status();
        while let Some(err) = source {
            if err.is::<tower_http::timeout::TimeoutError>() {
                status = StatusCode::REQUEST_TIMEOUT;
                break;
            }
            source = err.source();
        }
        ApiError::new(
            status,
            code_of(status),
            format!("cannot read the body: {e}"),
        )
    }
}

impl ErrorCode for ApiError {
    fn code(&self) -> &'static str {
        self.code
    }

    fn status(&self) -> StatusCode {
        self.status
    }
}

impl From<HarnessError> for ApiError {
    fn from(e: HarnessError) -> ApiError {
        ApiError::new(e.status(), e.code(), e.to_string())
    }
}

impl ErrorCode for EditError {
    fn code(&self) -> &'static str {
        match self {
            EditError::NotFound(_) => "not_found",
            EditError::Conflict(_) => "stale_version",
            EditError::AlreadyExists { .. } => "already_exists",
            EditError::Invalid { .. } | EditError::Refused { field: Some(_), .. } => {
                "validation_failed"
            }
            EditError::Refused { field: None, .. } => "conflict",
            EditError::Harness(e) => e.code(),
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            EditError::NotFound(_) => StatusCode::NOT_FOUND,
            EditError::Conflict(_)
            | EditError::AlreadyExists { .. }
            | EditError::Refused { field: None, .. } => StatusCode::CONFLICT,
            EditError::Invalid { .. } | EditError::Refused { field: Some(_), .. } => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            EditError::Harness(e) => e.status(),
        }
    }
}

impl From<EditError> for ApiError {
    fn from(e: EditError) -> ApiError {
        let error = ApiError::new(e.status(), e.code(), e.to_string());
        match e.field() {
            Some(field) => error.with_field(field),
            None => error,
        }
    }
}

impl ErrorCode for RunsError {
    fn code(&self) -> &'static str {
        match self {
            RunsError::BadId(_) => "bad_request",
            RunsError::NotFound { .. } => "not_found",
            RunsError::Unreadable { .. } => "invalid_project",
        }
    }

    fn status(&self) -> StatusCode {
        match self {
            RunsError::BadId(_) => StatusCode::BAD_REQUEST,
            RunsError::NotFound { .. } => StatusCode::NOT_FOUND,
            RunsError::Unreadable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }
}

impl From<RunsError> for ApiError {
    fn from(e: RunsError) -> ApiError {
        ApiError::new(e.status(), e.code(), e.to_string())
    }
}

/// The JSON body of an error.
#[derive(Debug, Serialize)]
pub struct ErrorView<'a> {
    /// What went wrong.
    pub error: &'a str,
    /// The HTTP status, repeated.
    pub status: u16,
    /// The stable code.
    pub code: &'a str,
    /// The field of the request body at fault, for a 422 that is about one field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<&'a str>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(code = self.code, "{}", self.message);
        } else {
            tracing::debug!(status = self.status.as_u16(), "{}", self.message);
        }
        let body = ErrorView {
            error: &self.message,
            status: self.status.as_u16(),
            code: self.code,
            field: self.field.as_deref(),
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer realm=\"assay-admin\""),
            );
        }
        response
    }
}

/// The stable code of an error reply made by a layer or an extractor rather than by a
/// handler, by its status.
fn code_of(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "validation_failed",
        StatusCode::SERVICE_UNAVAILABLE => "unavailable",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    }
}

/// The most of a plain-text error body kept as the JSON error's message.
const KEPT_MESSAGE_BYTES: usize = 4096;

/// What tower-http's `TimeoutError` says (a request body that stopped arriving).
const BODY_TIMED_OUT: &str = "data was not received within the designated timeout";

/// Middleware that makes every error reply of the API JSON in the one shape
/// (`{error, status, code}`): what a handler answers already is; what axum's extractors
/// (a body that cannot be read or is too large, a path that does not decode), tower-http's
/// layers (an unsupported `Content-Encoding`, a body too slow to arrive) or anything else
/// answer as plain text, or with no body, is rewritten, keeping its status and headers
/// (`Allow`, `Accept-Encoding`, …) and its text as the message. The web UI (`/ui/…`) answers
/// people in HTML and is left alone.
pub async fn json_errors(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let path = request.uri().path();
    let ui = path == "/ui" || path.starts_with("/ui/");
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if ui || is_json || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, KEPT_MESSAGE_BYTES)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    // axum answers a body cut off by tower-http's body timeout as any unreadable body (400);
    // its text is the timeout's own, and the answer is the 408 the timeout means.
    let status = if status == StatusCode::BAD_REQUEST && message.contains(BODY_TIMED_OUT) {
        StatusCode::REQUEST_TIMEOUT
    } else {
        status
    };
    let mut out = ApiError::new(status, code_of(status), message).into_response();
    for (name, value) in &parts.headers {
        if name != axum::http::header::CONTENT_TYPE
            && name != axum::http::header::CONTENT_LENGTH
            && !out.headers().contains_key(name)
        {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harness_errors_map_to_statuses() {
        let usage = ApiError::from(HarnessError::Usage("bad".into()));
        assert_eq!(usage.status, StatusCode::BAD_REQUEST);
        assert_eq!(usage.code, "bad_request");
        let infra = ApiError::from(HarnessError::Infrastructure("down".into()));
        assert_eq!(infra.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(infra.code, "infrastructure");
        let busy = ApiError::from(HarnessError::Busy("held".into()));
        assert_eq!(
            (busy.status, busy.code),
            (StatusCode::SERVICE_UNAVAILABLE, "kb_busy")
        );
        let data = ApiError::from(HarnessError::io(
            std::path::Path::new("kb/x.yaml"),
            &std::io::Error::other("broken"),
        ));
        assert_eq!(data.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(data.message.contains("kb/x.yaml"), "{}", data.message);
    }
}
