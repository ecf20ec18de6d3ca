//! The graph on SQLite (design in migration 12): the shared body, writing in an immediate
//! transaction.

use super::sql::BEGIN_WRITE;
use super::SqliteStore;

crate::graph::graph_store_impl!(SqliteStore, sqlx::Sqlite, begin_with(BEGIN_WRITE));
