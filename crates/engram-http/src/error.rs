//! Errors as handlers return them. The body is written by the request-context middleware in
//! the shape of the route's generation; here we only decide status, code and message.

use std::any::Any;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use engram_app::AppError;
use engram_types::ErrorCode;

/// An error of the registry with its client-facing message.
#[derive(Debug, Clone)]
pub struct ErrorParts {
    pub code: ErrorCode,
    pub message: String,
    pub retry_after_secs: Option<u64>,
}

impl ErrorParts {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            retry_after_secs: None,
        }
    }

    pub fn from_status(status: StatusCode, text: &str) -> Self {
        let code = code_for_status(status);
        let message = if text.is_empty() || code == ErrorCode::InternalError {
            status.canonical_reason().unwrap_or("error").to_lowercase()
        } else {
            text.chars().take(500).collect()
        };
        Self::new(code, message)
    }
}

impl IntoResponse for ErrorParts {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.code.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = status.into_response();
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(axum::http::header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response.extensions_mut().insert(self);
        response
    }
}

/// The error type of every handler.
#[derive(Debug)]
pub struct ApiError(pub ErrorParts);

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self(ErrorParts::new(code, message))
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidParameters, message)
    }

    /// Tells the client when to retry (`Retry-After`).
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.0.retry_after_secs = Some(secs);
        self
    }

    /// Replaces the code (keeping status from the registry) where a route's contract differs
    /// from the default mapping, such as the legacy tenant routes.
    pub fn recode(mut self, from: ErrorCode, to: ErrorCode) -> Self {
        if self.0.code == from {
            self.0.code = to;
        }
        self
    }
}

impl From<AppError> for ApiError {
    fn from(err: AppError) -> Self {
        let code = err.code();
        if let AppError::Internal(source) = &err {
            // Logged once here, with details; the client gets no internals.
            tracing::error!(error = %source, "internal error");
            return Self::new(code, "internal error");
        }
        let retry_after_secs = match &err {
            AppError::RateLimited { retry_after_secs } => Some(*retry_after_secs),
            // A dependency busy for a moment (a deadlock's victim, a busy store).
            AppError::Unavailable(_) => Some(1),
            _ => None,
        };
        Self(ErrorParts {
            code,
            message: err.to_string(),
            retry_after_secs,
        })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.0.into_response()
    }
}

/// A panic in a handler: logged, answered as a plain 500 without internals.
pub(crate) fn panic_response(panic: Box<dyn Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    tracing::error!(panic = %detail, "handler panicked");
    ErrorParts::new(ErrorCode::InternalError, "internal error").into_response()
}

/// Status of a response that carries no error of ours, mapped to the code registry.
pub(crate) fn code_for_status(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        401 => ErrorCode::Unauthorized,
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        413 => ErrorCode::FileTooLarge,
        422 => ErrorCode::ValidationError,
        429 => ErrorCode::RateLimited,
        503 => ErrorCode::ServiceUnavailable,
        400..=499 => ErrorCode::InvalidParameters,
        _ => ErrorCode::InternalError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store busy for a moment (a deadlock's victim between instances) answers 503 with
    /// `Retry-After`, which clients retry; a failure the caller cannot act on stays 500.
    #[test]
    fn a_busy_dependency_answers_503_with_a_retry_hint() {
        let busy = ApiError::from(AppError::Unavailable("busy".into())).into_response();
        assert_eq!(busy.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(busy.headers()[axum::http::header::RETRY_AFTER], "1");
        let internal = ApiError::from(AppError::Internal("boom".into())).into_response();
        assert_eq!(internal.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(internal
            .headers()
            .get(axum::http::header::RETRY_AFTER)
            .is_none());
    }
}
