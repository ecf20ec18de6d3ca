//! engram's storage: the traits every backend implements, each implemented once for both
//! backends ([`SqlStore`] over a crate-private dialect: the embedded SQLite file in WAL mode, or
//! PostgreSQL for several engram instances on one server), their numbered migrations, and the
//! conformance suite both must pass.
//!
//! Tenancy is structural: every read or write of a database's data takes the organization
//! ([`DatabaseScope`]) and the backend checks it in the query itself, so a handler bug cannot
//! read another organization's rows.

// `SqlStore<B>` implements the store traits for every `B: Backend`, a crate-private (sealed)
// trait: outside the crate the store is only ever `SqliteStore` or `PgStore`.
#![allow(private_bounds)]

mod backend;
mod check;
mod connectors;
mod databases;
mod error;
mod feedback;
mod graph;
mod graph_store;
mod item_store;
mod items;
mod keys;
mod migration;
pub mod postgres;
mod queue;
mod raw;
mod records;
mod rows;
mod search;
pub mod sqlite;
mod webhooks;

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;

use async_trait::async_trait;
use engram_types::{CollectionName, DatabaseId, DatabaseName, OrgId, UnixMs};

pub use backend::SqlStore;
pub use check::{Consistency, Finding, Repair};
pub use connectors::*;
pub use error::{is_enospc, StoreError, StoreResult};
pub use feedback::*;
pub use graph::*;
pub use items::*;
pub use keys::*;
pub use raw::*;
pub use records::*;
pub use search::*;
pub use webhooks::*;

/// Databases (tenants), their collections and their lifecycle.
#[async_trait]
pub trait DatabaseStore: Send + Sync {
    /// Creates a database in `provisioning` with its default collection, in one transaction.
    /// [`StoreError::Conflict`] when a live database of that name exists in the organization.
    async fn create_database(&self, new: &NewDatabase) -> StoreResult<DatabaseRecord>;
    /// The live (not deleting) database of that name in the organization.
    async fn find_database(
        &self,
        org: &OrgId,
        name: &DatabaseName,
    ) -> StoreResult<Option<DatabaseRecord>>;
    /// Live databases of the organization, by name.
    async fn list_databases(&self, org: &OrgId) -> StoreResult<Vec<DatabaseRecord>>;
    /// Adds fields to the metadata schema atomically (read, check, write in one write
    /// transaction). The inner error says why the fields were refused; nothing is added then.
    /// `Ok(Err(..))` for refused fields; [`StoreError::NotFound`] when the database is not live.
    async fn add_schema_fields(
        &self,
        scope: &DatabaseScope,
        fields: &[engram_types::schema::SchemaField],
        at: UnixMs,
    ) -> StoreResult<Result<engram_types::schema::MetadataSchema, engram_types::schema::SchemaError>>;
    /// Renames a live database in place (its id, data and default collection stay); keys
    /// restricted to it follow it to the new name, in the same transaction.
    /// [`StoreError::Conflict`] when the organization has a live database of that name,
    /// [`StoreError::NotFound`] when the database is not live.
    async fn rename_database(
        &self,
        scope: &DatabaseScope,
        new_name: &DatabaseName,
        at: UnixMs,
    ) -> StoreResult<DatabaseRecord>;
    /// Merges an instructions update into the stored ones atomically; returns them as they are
    /// now. [`StoreError::NotFound`] when the database is not live, [`StoreError::Conflict`]
    /// (nothing written) when the result would hold more than `max_collections` collections.
    async fn update_instructions(
        &self,
        scope: &DatabaseScope,
        update: &InstructionsUpdate,
        max_collections: usize,
        at: UnixMs,
    ) -> StoreResult<Instructions>;
    /// Marks a live database `deleting`; its name is free at once. False when not live.
    async fn schedule_deletion(&self, scope: &DatabaseScope, at: UnixMs) -> StoreResult<bool>;
    /// Creates the collection if it does not exist yet (collections appear on first use).
    async fn ensure_collection(
        &self,
        scope: &DatabaseScope,
        name: &CollectionName,
        at: UnixMs,
    ) -> StoreResult<()>;
    /// Collection names of the database, by name.
    async fn list_collections(&self, scope: &DatabaseScope) -> StoreResult<Vec<CollectionName>>;
    /// Object counts of the database.
    /// Object counts of the database at `now` (expired memories are not counted).
    async fn counts(&self, scope: &DatabaseScope, now: UnixMs) -> StoreResult<DatabaseCounts>;
}

/// What the background lifecycle worker needs; it works across organizations by design.
#[async_trait]
pub trait LifecycleStore: Send + Sync {
    /// Databases in a state that needs background work (`provisioning` or `deleting`).
    async fn databases_needing_work(&self) -> StoreResult<Vec<DatabaseRecord>>;
    /// Records provisioning progress; the database turns `ready` when every flag is true.
    async fn set_infra(&self, id: &DatabaseId, infra: InfraFlags, at: UnixMs) -> StoreResult<()>;
    /// Removes a `deleting` database and every row that belongs to it.
    async fn purge_database(&self, id: &DatabaseId) -> StoreResult<()>;
    /// Counts across the service for metrics (live databases only).
    async fn service_counts(&self) -> StoreResult<ServiceCounts>;
}

/// Everything engram stores, behind one handle.
#[async_trait]
pub trait Store:
    KeyStore
    + DatabaseStore
    + LifecycleStore
    + ItemStore
    + WorkQueue
    + ChunkFeed
    + ChunkSearch
    + WebhookStore
    + DeliveryQueue
    + FeedbackStore
    + RawEmbeddingStore
    + GraphStore
    + ConnectorStore
    + Consistency
    + Send
    + Sync
    + 'static
{
    /// Flushes and closes the backend; called once at shutdown.
    async fn close(&self);

    /// The store's own clock, where instances on several machines share the store (PostgreSQL):
    /// the one time base their leases, expiries and schedules are taken from. `None` where one
    /// process serves the store (its machine's clock is the only one).
    async fn clock(&self) -> StoreResult<Option<UnixMs>>;
}
