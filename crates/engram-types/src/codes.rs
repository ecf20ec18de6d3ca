//! The one error-code registry: every code of the spec once, with its HTTP status.

use serde::{Serialize, Serializer};

/// Declares the registry from one table: each code once, with its wire name and HTTP status;
/// the enum, [`ErrorCode::ALL`], [`ErrorCode::as_str`] and [`ErrorCode::http_status`] all come
/// from it.
macro_rules! registry {
    ($($(#[$doc:meta])* $code:ident = $wire:literal, $status:literal;)+) => {
        /// Every error code engram answers with. The spec's code table is this registry; the
        /// HTTP status of a code is decided here and nowhere else.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[$doc])* $code,)+
        }

        impl ErrorCode {
            /// All codes, for exhaustive tests and documentation.
            pub const ALL: &'static [ErrorCode] = &[$(Self::$code),+];

            /// The code as written on the wire.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$code => $wire,)+
                }
            }

            /// The HTTP status answered with this code.
            pub const fn http_status(self) -> u16 {
                match self {
                    $(Self::$code => $status,)+
                }
            }
        }
    };
}

registry! {
    InvalidParameters = "INVALID_PARAMETERS", 400;
    InvalidTenantId = "INVALID_TENANT_ID", 400;
    InvalidSearchParameters = "INVALID_SEARCH_PARAMETERS", 400;
    InvalidFileFormat = "INVALID_FILE_FORMAT", 400;
    /// A request body over its size limit (`ingest.max_upload_bytes`), on both generations: the
    /// spec's status table has no 413, and this is its code for a size limit.
    FileTooLarge = "FILE_TOO_LARGE", 400;
    Unauthorized = "UNAUTHORIZED", 401;
    Forbidden = "FORBIDDEN", 403;
    NotFound = "NOT_FOUND", 404;
    TenantNotFound = "TENANT_NOT_FOUND", 404;
    DatabaseNotFound = "DATABASE_NOT_FOUND", 404;
    SourceNotFound = "SOURCE_NOT_FOUND", 404;
    MemoryNotFound = "MEMORY_NOT_FOUND", 404;
    FileNotFound = "FILE_NOT_FOUND", 404;
    /// No webhook is registered for the organization.
    WebhookNotFound = "WEBHOOK_NOT_FOUND", 404;
    /// No delivery with that id in the organization's history.
    DeliveryNotFound = "DELIVERY_NOT_FOUND", 404;
    /// No connector (or connector resource) with that id in the organization.
    ConnectorNotFound = "CONNECTOR_NOT_FOUND", 404;
    /// Creating a connector past the organization's connector limit (the spec's 402).
    PlanLimitExceeded = "PLAN_LIMIT_EXCEEDED", 402;
    MethodNotAllowed = "METHOD_NOT_ALLOWED", 405;
    TenantAlreadyExists = "TENANT_ALREADY_EXISTS", 409;
    DatabaseAlreadyExists = "DATABASE_ALREADY_EXISTS", 409;
    /// Legacy `POST /tenants/create` duplicate (409 with this code, per the spec).
    InvalidInput = "INVALID_INPUT", 409;
    /// A manual retry of a delivery that is not `failed` or `permanently_failed`.
    DeliveryNotRetryable = "DELIVERY_NOT_RETRYABLE", 409;
    /// A connector of that provider and account scope exists in the organization.
    ConnectorAlreadyExists = "CONNECTOR_ALREADY_EXISTS", 409;
    /// A sync asked of a paused connector.
    ConnectorPaused = "CONNECTOR_PAUSED", 409;
    ValidationError = "VALIDATION_ERROR", 422;
    InvalidMemoryFormat = "INVALID_MEMORY_FORMAT", 422;
    InvalidEmbeddingFormat = "INVALID_EMBEDDING_FORMAT", 422;
    RateLimited = "RATE_LIMITED", 429;
    InternalError = "INTERNAL_ERROR", 500;
    /// The connector's provider could not be read (discovery before or after creation).
    ProviderError = "PROVIDER_ERROR", 502;
    ServiceUnavailable = "SERVICE_UNAVAILABLE", 503;
}

/// Codes that say why something failed without being an HTTP answer of ours: why a webhook
/// delivery attempt failed (stored with the attempt, shown in the history) and what a legacy
/// status poll reports for an errored item. One table, like [`ErrorCode`].
macro_rules! failures {
    ($($(#[$doc:meta])* $code:ident = $wire:literal;)+) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum FailureCode {
            $($(#[$doc])* $code,)+
        }

        impl FailureCode {
            pub const ALL: &'static [FailureCode] = &[$(Self::$code),+];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$code => $wire,)+
                }
            }
        }
    };
}

failures! {
    /// The webhook URL cannot be used (not HTTPS, malformed).
    InvalidUrl = "INVALID_URL";
    /// The target resolves to a loopback or private address the outbound policy refuses.
    AddressRefused = "ADDRESS_REFUSED";
    DnsFailed = "DNS_FAILED";
    /// The receiver did not answer within the time-out.
    Timeout = "TIMEOUT";
    ConnectionFailed = "CONNECTION_FAILED";
    RequestFailed = "REQUEST_FAILED";
    /// The receiver answered with a status other than 2xx.
    ReceiverError = "RECEIVER_ERROR";
    /// The organization's webhook was removed before the delivery was sent.
    WebhookNotRegistered = "WEBHOOK_NOT_REGISTERED";
    /// Legacy verify-processing: the item is `errored`.
    ProcessingFailed = "PROCESSING_FAILED";
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, to: S) -> Result<S::Ok, S::Error> {
        to.serialize_str(self.as_str())
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
    fn wire_names_are_unique_screaming_snake_case_and_what_serde_writes() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert_eq!(
                serde_json::to_value(code).unwrap_or_default(),
                serde_json::json!(code.as_str())
            );
            assert!(seen.insert(code.as_str()), "{code:?} twice");
            assert!(code
                .as_str()
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_'));
        }
    }

    #[test]
    fn failure_codes_never_reuse_an_error_code() {
        let errors: std::collections::HashSet<&str> =
            ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        let mut seen = std::collections::HashSet::new();
        for code in FailureCode::ALL {
            assert!(!errors.contains(code.as_str()), "{code:?}");
            assert!(seen.insert(code.as_str()), "{code:?} twice");
        }
    }

    #[test]
    fn statuses_follow_the_spec_table() {
        assert_eq!(ErrorCode::DatabaseAlreadyExists.http_status(), 409);
        assert_eq!(ErrorCode::InvalidInput.http_status(), 409);
        assert_eq!(ErrorCode::ValidationError.http_status(), 422);
        assert_eq!(ErrorCode::RateLimited.http_status(), 429);
        assert_eq!(ErrorCode::Unauthorized.http_status(), 401);
        assert_eq!(ErrorCode::Forbidden.http_status(), 403);
        assert_eq!(ErrorCode::PlanLimitExceeded.http_status(), 402);
        for code in ErrorCode::ALL {
            assert!((400..600).contains(&code.http_status()));
        }
    }
}
