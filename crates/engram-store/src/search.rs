//! Reading chunks for retrieval: the keys that pass a filter (to check or restrict what the
//! derived indexes found), and the chunks themselves joined with their items. Every call is
//! scoped to one database of one organization and sees only live chunks (a live database, an
//! unexpired item), so the derived indexes may be briefly stale but a query never returns
//! anything the store does not hold for that scope.

use async_trait::async_trait;
use engram_types::{CollectionName, ItemKind, UnixMs};
use serde_json::Value;

use crate::ChunkKey;
use crate::{DatabaseScope, FilterValue, ItemOrigin, ItemRecord, StoreResult};

/// Which chunks a retrieval call may see, beyond its database. All conditions are ANDed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChunkFilter {
    /// Only these kinds; empty means both.
    pub kinds: Vec<ItemKind>,
    /// Only these collections; empty means every collection of the database.
    pub collections: Vec<CollectionName>,
    /// Exact matches on the item's `metadata.<key>` (schema fields).
    pub metadata: Vec<(String, FilterValue)>,
    /// Exact matches on the item's `additional_metadata.<key>`.
    pub additional_metadata: Vec<(String, FilterValue)>,
    /// Only items that arrived this way.
    pub origin: Option<ItemOrigin>,
    /// Only app sources: app knowledge, and items a connector synced (files included; they
    /// carry `additional_metadata.connector_id`).
    pub apps: bool,
    /// Only these items (by id); empty means any.
    pub ids: Vec<String>,
    /// Only items with one of these titles, compared case-insensitively (Unicode lowercase);
    /// empty means any.
    pub titles: Vec<String>,
}

impl ChunkFilter {
    /// Whether the filter looks into item fields (so the vector scan must be restricted to the
    /// keys the store selects).
    pub fn has_item_conditions(&self) -> bool {
        !self.metadata.is_empty()
            || !self.additional_metadata.is_empty()
            || self.origin.is_some()
            || self.apps
            || !self.ids.is_empty()
            || !self.titles.is_empty()
    }
}

/// A chunk found by retrieval, with its item.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkHit {
    pub chunk_key: ChunkKey,
    pub chunk_id: String,
    pub position: u32,
    pub content: String,
    pub layout: Value,
    /// The chunk's stored embedding (empty when none was stored).
    pub embedding: Vec<f32>,
    pub created_at: UnixMs,
    /// The item, without its full text.
    pub item: ItemRecord,
}

/// Which chunks a direct read names.
#[derive(Debug, Clone, Copy)]
pub enum ChunkSelection<'a> {
    /// Every chunk of the item with this id, in position order.
    Item(&'a str),
    /// These chunks (by chunk id), in item then position order.
    Ids(&'a [String]),
    /// The chunks of the item with this id at positions `from..=to`, in position order.
    Span { id: &'a str, from: u32, to: u32 },
}

/// Retrieval reads, scoped by organization and database.
#[async_trait]
pub trait ChunkSearch: Send + Sync {
    /// Keys of the live chunks passing `filter`, at most `limit`, in key order.
    async fn filtered_chunk_keys(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        limit: u32,
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkKey>>;
    /// Which of the given chunks are live and pass `filter`, in no set order: `fetch_chunks`
    /// without reading them.
    async fn passing_chunk_keys(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        keys: &[ChunkKey],
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkKey>>;
    /// Keys of the live chunks `which` names that pass `filter`, in item then position order,
    /// at most `limit`.
    async fn selected_chunk_keys(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        which: ChunkSelection<'_>,
        limit: u32,
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkKey>>;
    /// The given chunks that are live and pass `filter`, with their items, in no set order.
    async fn fetch_chunks(
        &self,
        scope: &DatabaseScope,
        filter: &ChunkFilter,
        keys: &[ChunkKey],
        now: UnixMs,
    ) -> StoreResult<Vec<ChunkHit>>;
}
