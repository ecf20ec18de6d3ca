//! The graph on PostgreSQL (design in migration 4, as SQLite's migration 12): the shared body.

use super::PgStore;

crate::graph::graph_store_impl!(PgStore, sqlx::Postgres, begin());
