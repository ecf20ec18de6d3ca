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
    #[error("storage backend: {0}")]
    Backend(#[from] sqlx::Error),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

pub type StoreResult<T, E = StoreError> = Result<T, E>;
