/// Failures of a storage backend.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule was violated (for example a live database of the same name).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The scope named a database that does not exist (or is being deleted).
    #[error("not found: {0}")]
    NotFound(String),
    /// The store holds something this version cannot read.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// The data directory was migrated by a newer engram, or a migration was edited.
    #[error("migration: {0}")]
    Migration(String),
    /// A reader of the chunk feed fell behind its retention (it was away too long): it must
    /// rebuild from the chunks instead of following the feed.
    #[error("chunk feed: {0}")]
    FeedBehind(String),
    #[error("storage backend: {0}")]
    Backend(#[from] sqlx::Error),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

pub type StoreResult<T, E = StoreError> = Result<T, E>;

pub(crate) fn corrupt(what: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {err}"))
}

pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}
