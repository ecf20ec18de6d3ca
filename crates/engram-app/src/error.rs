use engram_store::StoreError;
use engram_types::ids::NameError;
use engram_types::ErrorCode;

/// Every failure a use case reports to its caller.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("rate limit exceeded; retry after {retry_after_secs} s")]
    RateLimited { retry_after_secs: u64 },
    #[error("{0}")]
    InvalidParameters(String),
    /// A database or collection name that is not well-formed.
    #[error("`{field}` {reason}")]
    InvalidName {
        field: &'static str,
        reason: NameError,
    },
    #[error("{0}")]
    Validation(String),
    #[error("database `{0}` not found")]
    DatabaseNotFound(String),
    #[error("database `{0}` already exists")]
    DatabaseExists(String),
    /// None of the ids asked about is known.
    #[error("no item with id {0}")]
    FileNotFound(String),
    /// No source (or memory) with this id in the collection.
    #[error("no source with id `{0}`")]
    SourceNotFound(String),
    #[error("key `{0}` not found")]
    KeyNotFound(String),
    #[error("no webhook is registered; register one with POST /webhooks/indexing")]
    WebhookNotFound,
    #[error("no delivery `{0}` in this organization's history")]
    DeliveryNotFound(String),
    #[error(
        "delivery `{id}` is {status}; only failed and permanently_failed deliveries can be retried"
    )]
    DeliveryNotRetryable { id: String, status: &'static str },
    #[error("no provider `{0}` is offered; GET /connectors/providers lists them")]
    ProviderNotFound(String),
    #[error("no connector `{0}` in this organization")]
    ConnectorNotFound(String),
    #[error("{0}")]
    ConnectorExists(String),
    #[error("connector `{0}` is paused; resume it first")]
    ConnectorPaused(String),
    #[error("{0}")]
    PlanLimit(String),
    /// The connector's source could not be read; the message says why (never a secret).
    #[error("{0}")]
    Provider(String),
    /// A dependency (the embedding model, …) cannot serve the request now.
    #[error("{0}")]
    Unavailable(String),
    /// The service cannot start (a model file missing, …).
    #[error("{0}")]
    Startup(String),
    /// A failure the caller cannot act on; its details are logged, never returned.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl AppError {
    /// The one code each error answers with.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Unauthorized(_) => ErrorCode::Unauthorized,
            Self::Forbidden(_) => ErrorCode::Forbidden,
            Self::RateLimited { .. } => ErrorCode::RateLimited,
            Self::InvalidParameters(_) | Self::InvalidName { .. } => ErrorCode::InvalidParameters,
            Self::Validation(_) => ErrorCode::ValidationError,
            Self::DatabaseNotFound(_) => ErrorCode::DatabaseNotFound,
            Self::DatabaseExists(_) => ErrorCode::DatabaseAlreadyExists,
            Self::FileNotFound(_) => ErrorCode::FileNotFound,
            Self::SourceNotFound(_) => ErrorCode::SourceNotFound,
            Self::KeyNotFound(_) => ErrorCode::NotFound,
            Self::WebhookNotFound => ErrorCode::WebhookNotFound,
            Self::DeliveryNotFound(_) => ErrorCode::DeliveryNotFound,
            Self::DeliveryNotRetryable { .. } => ErrorCode::DeliveryNotRetryable,
            Self::ConnectorNotFound(_) => ErrorCode::ConnectorNotFound,
            Self::ProviderNotFound(_) => ErrorCode::NotFound,
            Self::ConnectorExists(_) => ErrorCode::ConnectorAlreadyExists,
            Self::ConnectorPaused(_) => ErrorCode::ConnectorPaused,
            Self::PlanLimit(_) => ErrorCode::PlanLimitExceeded,
            Self::Provider(_) => ErrorCode::ProviderError,
            Self::Unavailable(_) => ErrorCode::ServiceUnavailable,
            Self::Internal(_) | Self::Startup(_) => ErrorCode::InternalError,
        }
    }
}

impl From<StoreError> for AppError {
    /// A transient failure of the store (a deadlock between instances, a busy or unreachable
    /// server) is 503, which clients retry with backoff; anything else is internal.
    fn from(err: StoreError) -> Self {
        if err.is_disk_full() {
            return disk_full(&err);
        }
        if err.is_transient() {
            tracing::warn!(error = %err, "store temporarily unavailable");
            return Self::Unavailable(
                "the store is temporarily unavailable; retry the request".to_owned(),
            );
        }
        Self::Internal(Box::new(err))
    }
}

impl From<engram_index::IndexError> for AppError {
    fn from(err: engram_index::IndexError) -> Self {
        match err {
            engram_index::IndexError::Store(err) => err.into(),
            engram_index::IndexError::DiskFull(_) => disk_full(&err),
            engram_index::IndexError::Keyword(_) | engram_index::IndexError::Task(_) => {
                Self::Internal(Box::new(err))
            }
        }
    }
}

/// A full disk under the store or an index: 503 (nothing was written; the same request
/// succeeds once space is freed), logged as an error for the operator.
fn disk_full(err: &dyn std::fmt::Display) -> AppError {
    tracing::error!(error = %err, "the disk is full: nothing more can be stored until space is freed");
    AppError::Unavailable(
        "engram's disk is full (no space left on the device); nothing was stored: retry once space is freed"
            .to_owned(),
    )
}

impl From<tokio::task::JoinError> for AppError {
    /// A task of ours that panicked or was cancelled: nothing the caller sent is wrong.
    fn from(err: tokio::task::JoinError) -> Self {
        Self::Internal(Box::new(err))
    }
}

pub type AppResult<T, E = AppError> = Result<T, E>;
