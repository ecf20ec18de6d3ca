//! Ingested items (knowledge sources and memories), their chunks, and the durable work queue
//! that indexes them. An item row is its own job: claiming takes a lease, and only the holder of
//! the current lease on the current version may write the result, so an item is never indexed
//! twice and an upsert or delete in the meantime always wins.

use async_trait::async_trait;
use engram_types::{
    CollectionName, DatabaseId, IndexingStatus, ItemErrorCode, ItemKind, OrgId, UnixMs,
};
use serde_json::{Map, Value};
use std::time::Duration;

use crate::ChunkKey;
use crate::{DatabaseScope, MetadataEdit, MetadataEditOutcome, StoreResult};

/// How an item arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemOrigin {
    /// An uploaded file; its bytes are kept as the payload.
    File,
    /// Pre-extracted app content.
    App,
    /// A memory: text or user/assistant pairs.
    Memory,
}

impl ItemOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::File => "file",
            Self::App => "app",
            Self::Memory => "memory",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "file" => Some(Self::File),
            "app" => Some(Self::App),
            "memory" => Some(Self::Memory),
            _ => None,
        }
    }
}

/// The descriptive fields of an item, as given at ingestion and as listed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ItemFields {
    pub filename: String,
    pub media_type: String,
    pub title: String,
    pub source_type: String,
    pub description: String,
    pub note: String,
    pub url: String,
    pub timestamp: String,
    /// The text to index: given (app content, memories) or extracted later (files).
    pub text: Option<String>,
    /// Values of the database's schema fields (`tenant_metadata`).
    pub metadata: Value,
    /// Free-form per-item fields.
    pub additional_metadata: Value,
    pub attachments: Value,
    pub relations: Value,
    pub user_name: String,
    pub infer: bool,
    pub expires_at: Option<UnixMs>,
    /// Ingestion instructions in force when the item was accepted: the database's, its
    /// collection's and the item's own, in that order (for inference and graph extraction).
    pub instructions: String,
    /// What inference made of a memory (`infer: true`): its facts about the user. Written by
    /// indexing, never by ingestion.
    pub inferred_content: String,
    /// The id of the request that queued the item (its latest upsert), carried by the log lines
    /// of its indexing; empty when engram queued it itself.
    pub request_id: String,
}

/// An item to enqueue.
#[derive(Debug, Clone, PartialEq)]
pub struct NewItem {
    pub collection: CollectionName,
    pub id: String,
    pub kind: ItemKind,
    pub origin: ItemOrigin,
    pub fields: ItemFields,
    /// Raw bytes of an uploaded file.
    pub payload: Option<Vec<u8>>,
    /// The client's own graph of the item (a checked `graph_payload`, JSON), used instead of
    /// extraction; `None` keeps the one the item had, an empty string drops it.
    pub graph_payload: Option<String>,
}

/// What happened to one item of an enqueue call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnqueueOutcome {
    /// Stored and queued (new, or an upsert replacing an existing item and its chunks).
    Queued,
    /// The id exists and `upsert` was false; nothing changed.
    Exists,
}

/// The indexing state of one item.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemStatus {
    pub id: String,
    pub kind: ItemKind,
    pub status: IndexingStatus,
    pub error_code: String,
    pub error_message: String,
}

/// A state an item entered, when, and the error it carried then (empty when none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub status: IndexingStatus,
    pub error_code: String,
    pub error_message: String,
    pub at: UnixMs,
}

/// What a worker asks of the queue. Work is handed out in turns: the organization served
/// longest ago first, then its database served longest ago, then that database's oldest
/// runnable item; an organization whose items are in the hands of `org_share` other workers
/// (live leases) gets none from this one until one of them is done, so one organization's load
/// never takes every worker.
#[derive(Debug, Clone, Copy)]
pub struct ClaimRequest<'a> {
    pub owner: &'a str,
    pub now: UnixMs,
    pub lease: Duration,
    /// Most items to claim.
    pub limit: u32,
    /// Most workers (lease owners) one organization's items may occupy, this one included.
    pub org_share: u32,
    /// When set, items after the first join the claim only while the first and they are
    /// light: given text (app content, memories; never files) of at most this many bytes.
    pub light_bytes: Option<u64>,
}

impl<'a> ClaimRequest<'a> {
    /// Up to `limit` items for `owner`, leased until `now + lease`, with no share limit.
    pub fn new(owner: &'a str, now: UnixMs, lease: Duration, limit: u32) -> Self {
        Self {
            owner,
            now,
            lease,
            limit,
            org_share: u32::MAX,
            light_bytes: None,
        }
    }
}

/// An item a worker holds a lease on.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedItem {
    pub item_key: i64,
    pub version: i64,
    pub lease_owner: String,
    pub org: OrgId,
    pub database_id: DatabaseId,
    pub collection: CollectionName,
    pub id: String,
    pub kind: ItemKind,
    pub origin: ItemOrigin,
    pub title: String,
    pub filename: String,
    pub media_type: String,
    pub text: Option<String>,
    pub payload: Option<Vec<u8>>,
    /// The client's own graph of the item (JSON), built instead of an extracted one.
    pub graph_payload: Option<String>,
    /// Whose memory it is, and whether to infer what it says about them.
    pub user_name: String,
    pub infer: bool,
    /// The ingestion instructions in force when it was accepted (database, collection, its
    /// own `custom_instructions`), which inference and graph extraction follow.
    pub instructions: String,
    /// Attempts so far, this one included.
    pub attempts: u32,
    /// What the claim is for.
    pub stage: Stage,
    /// The request that queued the item (empty when engram did).
    pub request_id: String,
}

impl ClaimedItem {
    /// What its chunks are titled by: its title, or its file name when it has none (the
    /// keyword index's title field reads the same, see [`IndexedChunk::title`]).
    pub fn heading(&self) -> &str {
        if self.title.is_empty() {
            &self.filename
        } else {
            &self.title
        }
    }
}

/// What a claimed item needs next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Parsing, chunking and embedding (`queued` or `processing`).
    Index,
    /// Its graph (`graph_creation`: its chunks are stored and searchable).
    Graph,
}

/// Where [`WorkQueue::complete_items`] leaves an item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AfterChunks<'a> {
    /// `completed`, its event recorded, the lease released.
    Completed,
    /// `graph_creation`, the lease kept: the worker builds the graph next and
    /// [`crate::GraphStore::complete_graph`] completes it.
    Graph,
    /// `completed` with this graph stored beside the chunks, in the same transaction: a graph
    /// made without waiting on anything (the rules, the client's own, inference's facts).
    WithGraph(&'a engram_graph::ItemGraph),
}

/// One item of a batch [`WorkQueue::complete_items`] writes: its chunks and where it goes next.
#[derive(Debug, Clone, Copy)]
pub struct Completion<'a> {
    pub item: &'a ClaimedItem,
    pub chunks: &'a [NewChunk],
    pub then: AfterChunks<'a>,
}

/// A chunk produced by indexing.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChunk {
    pub chunk_id: String,
    pub position: u32,
    pub content: String,
    /// Text indexed with the chunk (keyword and vector) but not part of it: for a memory that
    /// continues a conversation, the memory before it. Empty when there is none.
    pub context: String,
    /// Structure of the chunk in its source (page, sheet, heading, …).
    pub layout: Value,
    pub embedding: Vec<f32>,
}

/// How an attempt failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemFailure {
    pub code: ItemErrorCode,
    pub message: String,
    /// `Some(t)`: transient, run again at `t`. `None`: terminal, the item is `errored`.
    pub retry_at: Option<UnixMs>,
}

/// The result of deleting one id.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletedItem {
    pub id: String,
    pub deleted: bool,
}

/// An item as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemRecord {
    pub id: String,
    pub collection: CollectionName,
    pub kind: ItemKind,
    pub origin: ItemOrigin,
    pub fields: ItemFields,
    pub status: IndexingStatus,
    pub created_at: UnixMs,
    pub updated_at: UnixMs,
}

impl ItemRecord {
    /// What to call the item for a reader: its title, else its id.
    pub fn label(&self) -> &str {
        if self.fields.title.is_empty() {
            &self.id
        } else {
            &self.fields.title
        }
    }
}

/// A metadata filter value: one exact value, or any of several.
#[derive(Debug, Clone, PartialEq)]
pub enum FilterValue {
    Eq(Value),
    In(Vec<Value>),
    /// An access rule readable by one of these principals: the value is absent, null or an
    /// empty list (no rule), or a list holding one of them.
    Readable(Vec<String>),
}

/// What to list. All filters are ANDed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ItemQuery {
    pub kind: Option<ItemKind>,
    /// Only these collections; empty means every collection.
    pub collections: Vec<CollectionName>,
    /// Only these ids; empty means any.
    pub ids: Vec<String>,
    /// Exact matches on `metadata.<key>`.
    pub metadata: Vec<(String, FilterValue)>,
    /// Exact matches on `additional_metadata.<key>`.
    pub additional_metadata: Vec<(String, FilterValue)>,
    /// Exact matches on top-level fields: `title`, `type`, `description`, `url`, `timestamp`.
    pub fields: Vec<(SourceField, String)>,
    /// Only items in one of these indexing states; empty means any.
    pub statuses: Vec<IndexingStatus>,
    /// 1-based page.
    pub page: u32,
    pub page_size: u32,
}

/// Top-level item fields a listing may filter on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceField {
    Title,
    Type,
    Description,
    Url,
    Timestamp,
}

impl SourceField {
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "title" => Self::Title,
            "type" => Self::Type,
            "description" => Self::Description,
            "url" => Self::Url,
            "timestamp" => Self::Timestamp,
            _ => return None,
        })
    }

    pub(crate) fn column(self) -> &'static str {
        match self {
            Self::Title => "title",
            Self::Type => "source_type",
            Self::Description => "description",
            Self::Url => "url",
            Self::Timestamp => "timestamp",
        }
    }
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemPage {
    pub items: Vec<ItemRecord>,
    pub total: u64,
}

/// A chunk as the derived indexes (keyword and vector) hold it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedChunk {
    pub chunk_key: ChunkKey,
    pub database_id: DatabaseId,
    pub collection: CollectionName,
    pub kind: ItemKind,
    pub content: String,
    /// Indexed with the content (see [`NewChunk::context`]).
    pub context: String,
    /// The item's title, or its file name when it has none: a keyword field of its own.
    pub title: String,
    /// Empty when none was stored.
    pub embedding: Vec<f32>,
    /// What the item conditions of a filter read, carried with each of the item's chunks.
    pub facets: ItemFacets,
}

/// The fields of a chunk's item that [`crate::ChunkFilter`]'s item conditions test, as the
/// derived indexes hold them to apply a filter inside the index (a metadata edit logs the item's
/// chunks in the feed, so they follow it).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ItemFacets {
    /// `None` where the row was read without its item.
    pub origin: Option<ItemOrigin>,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
}

/// One page of the chunk change feed, ready to apply: every chunk in `removed` leaves the
/// index of the database named with it, then every chunk in `current` enters its database's
/// index, and the indexes of the databases in `gone` are dropped whole. Applying a page twice
/// changes nothing, so a reader that fails part-way simply applies it again.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChunkChanges {
    /// The sequence number of the last change in the page (the reader's next cursor); the
    /// cursor it was asked for when the page is empty.
    pub through: i64,
    /// Every chunk changed (inserted, updated or deleted), with the database it was in.
    pub removed: Vec<(DatabaseId, ChunkKey)>,
    /// The current rows of the changed chunks that still exist.
    pub current: Vec<IndexedChunk>,
    /// Databases named by the page that no longer exist.
    pub gone: Vec<DatabaseId>,
}

impl ChunkChanges {
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.current.is_empty() && self.gone.is_empty()
    }
}

/// The change feed the derived indexes follow; across organizations by design (the indexes
/// are per database and every read through them is checked against the store). Every write to
/// `chunks`, whichever path makes it (completion, upsert, delete, expiry purge, database purge,
/// a conversation's context cleared), is logged in its own transaction with an increasing
/// sequence number that is never reused.
#[async_trait]
pub trait ChunkFeed: Send + Sync {
    /// The sequence number of the newest change (0 when none was ever logged). A reader that
    /// rebuilds from [`ChunkFeed::scan_chunks`] first takes the head, then follows from it.
    async fn chunk_feed_head(&self) -> StoreResult<i64>;
    /// The changes after `after`, at most `limit`, in order, with the current rows.
    async fn chunk_changes(&self, after: i64, limit: u32) -> StoreResult<ChunkChanges>;
    /// Records that `reader` has applied every change through `at`, and returns the position
    /// every live reader has reached: how far the feed may be trimmed. A reader not heard from
    /// for a while (an instance that is gone) holds nothing back; should it come back behind
    /// the trimmed part, this fails with [`crate::StoreError::FeedBehind`] and it rebuilds. A
    /// reader calls this before following the feed when it has not for a while, and after
    /// applying changes (and a restarted one with the position of an index it saved). A store
    /// with one reader returns `at`, or fails with `FeedBehind` when `at` was trimmed.
    async fn feed_reader_at(&self, reader: &str, at: i64) -> StoreResult<i64>;
    /// Forgets the changes up to and including `through` (every reader has applied them).
    async fn trim_chunk_changes(&self, through: i64) -> StoreResult<()>;
    /// Chunks of live databases with keys above `after`, in key order, at most `limit`: what
    /// an index is rebuilt from. With [`ChunkScan::Vectors`] the text fields come back empty
    /// (a restart that kept its keyword index reads only what the vector index holds).
    async fn scan_chunks(
        &self,
        after: ChunkKey,
        limit: u32,
        scan: ChunkScan,
    ) -> StoreResult<Vec<IndexedChunk>>;
    /// This feed's name, drawn when the store was created: an index saved on disk is trusted
    /// only by the feed it followed (never by another store at the same path).
    async fn chunk_feed_id(&self) -> StoreResult<String>;
}

/// What [`ChunkFeed::scan_chunks`] reads of each chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkScan {
    /// Every indexed field.
    Full,
    /// The key, scope and vector; the text fields empty.
    Vectors,
}

/// Items of databases, scoped by organization.
#[async_trait]
pub trait ItemStore: Send + Sync {
    /// Stores and queues items in one transaction. An existing id is replaced when `upsert`
    /// (its old chunks are removed at once) and left alone otherwise.
    async fn enqueue_items(
        &self,
        scope: &DatabaseScope,
        items: &[NewItem],
        upsert: bool,
        now: UnixMs,
    ) -> StoreResult<Vec<EnqueueOutcome>>;
    /// States of the given ids in one collection; unknown and expired ids are absent.
    async fn item_statuses(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        ids: &[String],
        now: UnixMs,
    ) -> StoreResult<Vec<ItemStatus>>;
    /// Deletes items with their chunks and payloads, in one transaction. An expired item is
    /// already gone: it is reported as not found (the sweeper removes it).
    async fn delete_items(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        kind: Option<ItemKind>,
        ids: &[String],
        now: UnixMs,
    ) -> StoreResult<Vec<DeletedItem>>;
    /// Deletes every item of one collection with their chunks and payloads, in one
    /// transaction; with `forget`, the collection leaves the database's list too (the default
    /// collection stays). `None` when the database has no such collection; else how many items
    /// went.
    async fn delete_collection(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        forget: bool,
    ) -> StoreResult<Option<u64>>;
    /// The indexing history of the live item `id` of the collection (any kind), oldest first:
    /// the newest 50 states it entered. Empty when there is no such item.
    async fn item_history(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        id: &str,
        now: UnixMs,
    ) -> StoreResult<Vec<HistoryEntry>>;
    /// How many live items of the database (every collection and kind) are in each indexing
    /// state of `only` (every state when empty); states without items are left out.
    async fn item_status_counts(
        &self,
        scope: &DatabaseScope,
        only: &[IndexingStatus],
        now: UnixMs,
    ) -> StoreResult<Vec<(IndexingStatus, u64)>>;
    /// One page of live (unexpired) items, newest first.
    async fn list_items(
        &self,
        scope: &DatabaseScope,
        query: &ItemQuery,
        now: UnixMs,
    ) -> StoreResult<ItemPage>;
    /// One live item with its full text and, for an uploaded file, the bytes it came as.
    async fn item_source(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        id: &str,
        now: UnixMs,
    ) -> StoreResult<Option<ItemSource>>;
    /// Merges `edit` into one live item's metadata in one transaction, written only when
    /// `check` accepts the merged values. Work in flight on the item is not disturbed: the
    /// values are read by every query from here on, and indexing never writes them.
    async fn edit_item_metadata(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        id: &str,
        edit: &MetadataEdit,
        check: &MetadataCheck<'_>,
        now: UnixMs,
    ) -> StoreResult<MetadataEditOutcome>;
}

/// Says whether merged `metadata` and `additional_metadata` may be stored, and if not why.
pub type MetadataCheck<'a> =
    dyn Fn(&Map<String, Value>, &Map<String, Value>) -> Result<(), String> + Send + Sync + 'a;

/// An item as stored, with the bytes of an uploaded file.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemSource {
    pub item: ItemRecord,
    pub payload: Option<Vec<u8>>,
}

/// The indexing queue, used by pipeline workers across organizations.
#[async_trait]
pub trait WorkQueue: Send + Sync {
    /// Leases up to `limit` runnable items (queued and due, or with an expired lease), in
    /// turns across organizations and databases (see [`ClaimRequest`]).
    async fn claim_items(&self, claim: &ClaimRequest<'_>) -> StoreResult<Vec<ClaimedItem>>;
    /// Extends the lease the item's owner holds to `until` (the worker's heartbeat). False
    /// when the claim is no longer current (the item was upserted, deleted or claimed by another
    /// worker meanwhile, or its database is being deleted): the worker then stops and writes
    /// nothing.
    async fn extend_lease(&self, item: &ClaimedItem, until: UnixMs) -> StoreResult<bool>;
    /// Called once by a serving process as it starts, before its workers: releases the claims
    /// (indexing items and webhook deliveries) that no live worker can hold, so interrupted
    /// work resumes at once instead of after its lease. The embedded store is served by one
    /// process, so every claim found at start is a dead one's; a store shared by several
    /// instances releases none and relies on the short, heartbeat-renewed leases. Returns how
    /// many claims were released.
    async fn release_dead_claims(&self) -> StoreResult<u64>;
    /// Writes each item's chunks and moves it on (see [`AfterChunks`]), the whole batch in one
    /// transaction (one write lock and one commit for the items a worker claimed together);
    /// for each item (same order), whether its claim was still current. An item upserted,
    /// deleted or re-leased meanwhile gets false and nothing of it is written; the others are.
    /// Replaced chunks go, and with them their graph.
    async fn complete_items(&self, batch: &[Completion<'_>], now: UnixMs)
        -> StoreResult<Vec<bool>>;
    /// [`Self::complete_items`] for one item.
    async fn complete_item(
        &self,
        item: &ClaimedItem,
        chunks: &[NewChunk],
        then: AfterChunks<'_>,
        now: UnixMs,
    ) -> StoreResult<bool> {
        let batch = [Completion { item, chunks, then }];
        Ok(self.complete_items(&batch, now).await?.first() == Some(&true))
    }
    /// Records a failed attempt: back to `queued` for a later retry, or `errored`.
    async fn fail_item(
        &self,
        item: &ClaimedItem,
        failure: &ItemFailure,
        now: UnixMs,
    ) -> StoreResult<bool>;
    /// Deletes up to `limit` expired items with their chunks; returns how many chunks went.
    async fn purge_expired(&self, now: UnixMs, limit: u32) -> StoreResult<u64>;
    /// For a memory that continues a conversation, the text of the memory before it: the live
    /// memory of the same database, collection, user and (non-empty) title that was added just
    /// before it. `None` for anything else.
    async fn preceding_memory(
        &self,
        item: &ClaimedItem,
        now: UnixMs,
    ) -> StoreResult<Option<String>>;
}
