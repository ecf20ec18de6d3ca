//! Connectors on PostgreSQL (design in SQLite's migration 15; migration 7 here): the shared
//! body. A claim is one `UPDATE` that re-checks the lease on the row it locks, so two instances
//! picking the same due connector cannot both take it: the second finds the lease live and
//! updates nothing.

use super::PgStore;

crate::connectors::connector_store_impl!(
    PgStore,
    sqlx::Postgres,
    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
    begin()
);
