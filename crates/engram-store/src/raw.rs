//! Vectors a client computed itself, kept in an embeddings database (`is_embeddings_tenant`)
//! and searched by exact scan. Every call is scoped to one live database of one organization.

use async_trait::async_trait;
use engram_types::{CollectionName, UnixMs};
use serde_json::Value;

use crate::{DatabaseScope, StoreResult};

/// One stored vector: a chunk of a source, with its metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct RawVector {
    pub source_id: String,
    pub chunk_id: String,
    pub embedding: Vec<f32>,
    pub metadata: Value,
}

/// Which vectors a read or delete names: those of one source, these chunk ids, or both (ANDed).
#[derive(Debug, Clone, Copy)]
pub struct RawSelection<'a> {
    pub source_id: Option<&'a str>,
    pub chunk_ids: &'a [String],
}

#[async_trait]
pub trait RawEmbeddingStore: Send + Sync {
    /// Stores vectors in one transaction. A chunk id that exists is replaced with `upsert`,
    /// else kept as it is. Returns the chunk ids written. [`crate::StoreError::NotFound`] when
    /// the database is not live.
    async fn put_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        vectors: &[RawVector],
        upsert: bool,
        at: UnixMs,
    ) -> StoreResult<Vec<String>>;
    /// Up to `limit` vectors of the collection after row `after`, in row order, each with its
    /// row: the pages of a scan.
    async fn raw_page(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        after: i64,
        limit: u32,
    ) -> StoreResult<Vec<(i64, RawVector)>>;
    /// Up to `limit` vectors named by `which`, by source then chunk id.
    async fn select_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        which: RawSelection<'_>,
        limit: u32,
    ) -> StoreResult<Vec<RawVector>>;
    /// Deletes the vectors named by `which`; returns how many went.
    async fn delete_raw(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        which: RawSelection<'_>,
    ) -> StoreResult<u64>;
}
