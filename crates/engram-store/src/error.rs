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

impl StoreError {
    /// The store could not serve this call now, though nothing about it is wrong: a deadlock
    /// or serialization failure between concurrent transactions (PostgreSQL `40P01`, `40001`),
    /// a lock or connection that was not to be had in time (`55P03`, SQLite busy or locked, the
    /// pool timed out), the server going away (class `08`, `57P01`). Trying again later may
    /// succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Backend(sqlx::Error::Database(db)) => {
                let code = db.code().unwrap_or_default();
                if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                    // SQLITE_BUSY, SQLITE_LOCKED (an extended code keeps its primary code in
                    // the low byte).
                    code.parse::<u32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6))
                } else {
                    matches!(
                        &*code,
                        "40P01" | "40001" | "55P03" | "57P01" | "57P02" | "57P03"
                    ) || code.starts_with("08")
                }
            }
            Self::Backend(err) => matches!(err, sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)),
            Self::Conflict(_)
            | Self::NotFound(_)
            | Self::Corrupt(_)
            | Self::Migration(_)
            | Self::FeedBehind(_)
            | Self::Io(_) => false,
        }
    }
}

impl StoreError {
    /// The disk under the store is full: SQLite's `SQLITE_FULL`, PostgreSQL's `53100`
    /// (`disk_full`), or `ENOSPC` from the file system. Nothing was written; once space is
    /// freed the same call succeeds.
    pub fn is_disk_full(&self) -> bool {
        match self {
            Self::Backend(sqlx::Error::Database(db)) => {
                let code = db.code().unwrap_or_default();
                if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                    code.parse::<u32>().is_ok_and(|c| c & 0xff == 13)
                } else {
                    code == "53100"
                }
            }
            Self::Backend(sqlx::Error::Io(err)) | Self::Io(err) => is_enospc(err),
            Self::Backend(_)
            | Self::Conflict(_)
            | Self::NotFound(_)
            | Self::Corrupt(_)
            | Self::Migration(_)
            | Self::FeedBehind(_) => false,
        }
    }
}

/// Whether an I/O error says that no space is left on the device (`ENOSPC`).
pub fn is_enospc(err: &std::io::Error) -> bool {
    err.raw_os_error() == Some(28) || err.kind() == std::io::ErrorKind::StorageFull
}

pub type StoreResult<T, E = StoreError> = Result<T, E>;

pub(crate) fn corrupt(what: &str, err: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{what}: {err}"))
}

pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

impl StoreError {
    /// `Conflict(what)` for a broken uniqueness rule; any other error as it is.
    pub(crate) fn on_unique(self, what: impl FnOnce() -> String) -> Self {
        if let Self::Backend(err) = &self {
            if is_unique_violation(err) {
                return Self::Conflict(what());
            }
        }
        self
    }
}
