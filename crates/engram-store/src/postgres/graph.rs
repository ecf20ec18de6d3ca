//! The graph on PostgreSQL (design in migration 4, as SQLite's migration 12): the shared body.
//! Writing an item's graph takes the chunk feed's lock first, like every transaction that
//! removes chunks (and with them, by cascade and trigger, mentions and entities): entities are
//! shared by the items of a collection, so without one lock order a graph being written and an
//! item being deleted can deadlock on two entities.

use super::PgStore;

crate::graph::graph_store_impl!(PgStore, sqlx::Postgres, super::sql::lock_feed, begin());
