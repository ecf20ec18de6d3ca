//! The one error-code registry: every code of the spec once, with its HTTP status.

use serde::Serialize;

/// Every error code engram answers with. The spec's code table is this registry; the HTTP
/// status of a code is decided here and nowhere else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    InvalidParameters,
    InvalidTenantId,
    InvalidSearchParameters,
    InvalidFileFormat,
    FileTooLarge,
    /// Legacy `POST /tenants/create` duplicate (409 with this code, per the spec).
    InvalidInput,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    TenantNotFound,
    DatabaseNotFound,
    SourceNotFound,
    MemoryNotFound,
    FileNotFound,
    /// No webhook is registered for the organization.
    WebhookNotFound,
    /// No delivery with that id in the organization's history.
    DeliveryNotFound,
    TenantAlreadyExists,
    DatabaseAlreadyExists,
    /// A manual retry of a delivery that is not `failed` or `permanently_failed`.
    DeliveryNotRetryable,
    PayloadTooLarge,
    ValidationError,
    InvalidMemoryFormat,
    InvalidEmbeddingFormat,
    RateLimited,
    InternalError,
    ServiceUnavailable,
}

impl ErrorCode {
    /// All codes, for exhaustive tests and documentation.
    pub const ALL: [ErrorCode; 27] = [
        Self::InvalidParameters,
        Self::InvalidTenantId,
        Self::InvalidSearchParameters,
        Self::InvalidFileFormat,
        Self::FileTooLarge,
        Self::InvalidInput,
        Self::Unauthorized,
        Self::Forbidden,
        Self::NotFound,
        Self::MethodNotAllowed,
        Self::TenantNotFound,
        Self::DatabaseNotFound,
        Self::SourceNotFound,
        Self::MemoryNotFound,
        Self::FileNotFound,
        Self::WebhookNotFound,
        Self::DeliveryNotFound,
        Self::TenantAlreadyExists,
        Self::DatabaseAlreadyExists,
        Self::DeliveryNotRetryable,
        Self::PayloadTooLarge,
        Self::ValidationError,
        Self::InvalidMemoryFormat,
        Self::InvalidEmbeddingFormat,
        Self::RateLimited,
        Self::InternalError,
        Self::ServiceUnavailable,
    ];

    /// The HTTP status answered with this code.
    pub const fn http_status(self) -> u16 {
        match self {
            Self::InvalidParameters
            | Self::InvalidTenantId
            | Self::InvalidSearchParameters
            | Self::InvalidFileFormat
            | Self::FileTooLarge => 400,
            Self::Unauthorized => 401,
            Self::Forbidden => 403,
            Self::NotFound
            | Self::TenantNotFound
            | Self::DatabaseNotFound
            | Self::SourceNotFound
            | Self::MemoryNotFound
            | Self::FileNotFound
            | Self::WebhookNotFound
            | Self::DeliveryNotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::TenantAlreadyExists
            | Self::DatabaseAlreadyExists
            | Self::InvalidInput
            | Self::DeliveryNotRetryable => 409,
            Self::PayloadTooLarge => 413,
            Self::ValidationError | Self::InvalidMemoryFormat | Self::InvalidEmbeddingFormat => 422,
            Self::RateLimited => 429,
            Self::InternalError => 500,
            Self::ServiceUnavailable => 503,
        }
    }

    /// The code as written on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidParameters => "INVALID_PARAMETERS",
            Self::InvalidTenantId => "INVALID_TENANT_ID",
            Self::InvalidSearchParameters => "INVALID_SEARCH_PARAMETERS",
            Self::InvalidFileFormat => "INVALID_FILE_FORMAT",
            Self::FileTooLarge => "FILE_TOO_LARGE",
            Self::InvalidInput => "INVALID_INPUT",
            Self::Unauthorized => "UNAUTHORIZED",
            Self::Forbidden => "FORBIDDEN",
            Self::NotFound => "NOT_FOUND",
            Self::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            Self::TenantNotFound => "TENANT_NOT_FOUND",
            Self::DatabaseNotFound => "DATABASE_NOT_FOUND",
            Self::SourceNotFound => "SOURCE_NOT_FOUND",
            Self::MemoryNotFound => "MEMORY_NOT_FOUND",
            Self::FileNotFound => "FILE_NOT_FOUND",
            Self::WebhookNotFound => "WEBHOOK_NOT_FOUND",
            Self::DeliveryNotFound => "DELIVERY_NOT_FOUND",
            Self::DeliveryNotRetryable => "DELIVERY_NOT_RETRYABLE",
            Self::TenantAlreadyExists => "TENANT_ALREADY_EXISTS",
            Self::DatabaseAlreadyExists => "DATABASE_ALREADY_EXISTS",
            Self::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            Self::ValidationError => "VALIDATION_ERROR",
            Self::InvalidMemoryFormat => "INVALID_MEMORY_FORMAT",
            Self::InvalidEmbeddingFormat => "INVALID_EMBEDDING_FORMAT",
            Self::RateLimited => "RATE_LIMITED",
            Self::InternalError => "INTERNAL_ERROR",
            Self::ServiceUnavailable => "SERVICE_UNAVAILABLE",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_match_serde_names() {
        for code in ErrorCode::ALL {
            let json = serde_json_like(code);
            assert_eq!(json, code.as_str());
        }
    }

    fn serde_json_like(code: ErrorCode) -> String {
        // serde's SCREAMING_SNAKE_CASE and `as_str` must agree; compare through Debug casing.
        let debug = format!("{code:?}");
        let mut out = String::new();
        for (i, ch) in debug.chars().enumerate() {
            if ch.is_uppercase() && i > 0 {
                out.push('_');
            }
            out.push(ch.to_ascii_uppercase());
        }
        out
    }

    #[test]
    fn statuses_follow_the_spec_table() {
        assert_eq!(ErrorCode::DatabaseAlreadyExists.http_status(), 409);
        assert_eq!(ErrorCode::InvalidInput.http_status(), 409);
        assert_eq!(ErrorCode::ValidationError.http_status(), 422);
        assert_eq!(ErrorCode::RateLimited.http_status(), 429);
        assert_eq!(ErrorCode::Unauthorized.http_status(), 401);
        assert_eq!(ErrorCode::Forbidden.http_status(), 403);
        for code in ErrorCode::ALL {
            assert!((400..600).contains(&code.http_status()));
        }
    }
}
