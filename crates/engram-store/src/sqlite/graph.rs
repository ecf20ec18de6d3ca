//! The graph on SQLite (design in migration 12): the shared body, writing in an immediate
//! transaction (SQLite has one writer at a time: no other lock is needed).

use super::sql::BEGIN_WRITE;
use super::SqliteStore;

/// SQLite's writers are serialized by the immediate transaction itself.
async fn no_lock(_: &mut sqlx::SqliteConnection) -> crate::StoreResult<()> {
    Ok(())
}

crate::graph::graph_store_impl!(SqliteStore, sqlx::Sqlite, no_lock, begin_with(BEGIN_WRITE));
