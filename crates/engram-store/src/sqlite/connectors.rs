//! Connectors on SQLite (design in migration 15): the shared body, writing in an immediate
//! transaction (one writer at a time: the claim needs no other lock).

use super::sql::BEGIN_WRITE;
use super::SqliteStore;

crate::connectors::connector_store_impl!(SqliteStore, sqlx::Sqlite, "", begin_with(BEGIN_WRITE));
