//! Reading and removing ingested items: indexing status, listing with filters, deletion.

use engram_store::{
    ChunkFilter, ChunkHit, ChunkSelection, DeletedItem, FilterValue, ItemPage, ItemQuery,
    ItemStatus, SourceField,
};
use engram_types::{DatabaseName, ItemKind};
use serde_json::{Map, Value};

use crate::filters::FilterBudget;
use crate::ingest::parse_collection;
use crate::{App, AppError, AppResult, DatabaseRecord, Principal};
use engram_types::Scope;

/// Most ids one status, list or delete call may name.
pub const IDS_MAX: usize = 100;
/// `page_size` bounds and default.
pub const PAGE_SIZE_MAX: u32 = 100;
pub const PAGE_SIZE_DEFAULT: u32 = 50;

/// A listing request, after alias resolution.
#[derive(Debug, Clone, Default)]
pub struct ListRequest {
    pub collection: Option<String>,
    pub kind: Option<ItemKind>,
    pub ids: Vec<String>,
    pub page: Option<i64>,
    pub page_size: Option<i64>,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    pub source_fields: Map<String, Value>,
    /// Principals the caller acts for: only sources one of them may read (`acl`); empty or
    /// `["*"]`: all.
    pub acl: Vec<String>,
    /// Only items in one of these indexing states; empty means any.
    pub statuses: Vec<engram_types::IndexingStatus>,
    /// List every collection of the database (`collection` is then not read).
    pub every_collection: bool,
}

/// One page with the numbers of the pagination object.
#[derive(Debug, Clone)]
pub struct Listing {
    pub database: DatabaseRecord,
    pub page: ItemPage,
    pub page_number: u32,
    pub page_size: u32,
}

impl Listing {
    pub fn total_pages(&self) -> u64 {
        self.page.total.div_ceil(u64::from(self.page_size))
    }
}

fn filters(
    budget: &mut FilterBudget,
    values: Map<String, Value>,
    what: &str,
) -> AppResult<Vec<(String, FilterValue)>> {
    values
        .into_iter()
        .map(|(key, value)| Ok((key.clone(), budget.condition(what, &key, value)?)))
        .collect()
}

/// Most chunks one direct chunk read returns (and chunk ids it may name).
pub const CHUNKS_MAX: u32 = 1_000;
/// Chunks a direct read returns when it gives no `limit`.
pub const CHUNKS_DEFAULT: u32 = 100;

/// A direct read of chunks: every chunk of one source, or chosen chunks by id.
#[derive(Debug, Clone, Default)]
pub struct ChunksRequest {
    pub collection: Option<String>,
    /// The source whose chunks to read (in order).
    pub id: Option<String>,
    /// Chunks to read by id; takes precedence over `id`.
    pub chunk_ids: Vec<String>,
    /// Knowledge (default), memory, or both (`None`).
    pub kind: Option<ItemKind>,
    pub limit: Option<i64>,
    /// Principals the caller acts for: chunks of sources none of them may read are left out
    /// (empty or `["*"]`: all).
    pub acl: Vec<String>,
}

/// What a direct chunk read found.
#[derive(Debug, Clone)]
pub struct ChunkRead {
    pub database: DatabaseRecord,
    /// The chunks, in source then position order.
    pub chunks: Vec<ChunkHit>,
    /// More chunks than `limit` matched: these are the first ones.
    pub truncated: bool,
    /// Asked-for chunk ids that matched no live chunk (among the first `limit`).
    pub missing_chunk_ids: Vec<String>,
}

impl App {
    /// The chunks of one source in order, or chosen chunks by id, as indexed. An unknown source
    /// is `SOURCE_NOT_FOUND`; a source not yet indexed has no chunks yet.
    pub async fn read_chunks(
        &self,
        who: &Principal,
        database: &DatabaseName,
        request: ChunksRequest,
    ) -> AppResult<ChunkRead> {
        who.require(Scope::Read)?;
        let limit = request.limit.unwrap_or(i64::from(CHUNKS_DEFAULT));
        if !(1..=i64::from(CHUNKS_MAX)).contains(&limit) {
            return Err(AppError::InvalidParameters(format!(
                "`limit` must be between 1 and {CHUNKS_MAX}"
            )));
        }
        if request.chunk_ids.len() > CHUNKS_MAX as usize {
            return Err(AppError::InvalidParameters(format!(
                "`chunk_ids` may name at most {CHUNKS_MAX} chunks"
            )));
        }
        let id = request.id.filter(|id| !id.is_empty());
        if request.chunk_ids.is_empty() && id.is_none() {
            return Err(AppError::InvalidParameters(
                "give the source `id` or `chunk_ids`".into(),
            ));
        }
        let db = self.authorize_database(who, database, Scope::Read).await?;
        let collection = parse_collection(&db, request.collection.as_deref(), "collection")?;
        let (scope, now) = (db.scope(), self.now());
        let filter = ChunkFilter {
            kinds: request.kind.into_iter().collect(),
            collections: vec![collection.clone()],
            additional_metadata: crate::filters::readable_by(&request.acl)?
                .into_iter()
                .collect(),
            ..ChunkFilter::default()
        };
        let item_id;
        let which = if request.chunk_ids.is_empty() {
            let id = id.unwrap_or_default();
            let known = self
                .store()
                .item_statuses(&scope, &collection, std::slice::from_ref(&id), now)
                .await?;
            if known.is_empty() {
                return Err(AppError::SourceNotFound(id));
            }
            item_id = id;
            ChunkSelection::Item(&item_id)
        } else {
            ChunkSelection::Ids(&request.chunk_ids)
        };
        let limit = limit as u32;
        let mut keys = self
            .store()
            .selected_chunk_keys(&scope, &filter, which, limit + 1, now)
            .await?;
        let truncated = keys.len() > limit as usize;
        keys.truncate(limit as usize);
        let mut hits = self
            .store()
            .fetch_chunks(&scope, &filter, &keys, now)
            .await?;
        hits.sort_by_key(|h| keys.iter().position(|k| *k == h.chunk_key));
        let missing_chunk_ids = request
            .chunk_ids
            .iter()
            .filter(|id| !hits.iter().any(|h| &h.chunk_id == *id))
            .cloned()
            .collect();
        Ok(ChunkRead {
            database: db,
            chunks: hits,
            truncated,
            missing_chunk_ids,
        })
    }

    /// Indexing states of items in one collection, in the order asked; `None` for unknown ids.
    /// `FILE_NOT_FOUND` when no id is known (an item refused at upload has no status record).
    pub async fn item_statuses(
        &self,
        who: &Principal,
        database: &DatabaseName,
        collection: Option<&str>,
        ids: &[String],
    ) -> AppResult<(DatabaseRecord, Vec<(String, Option<ItemStatus>)>)> {
        who.require(Scope::Read)?;
        if ids.is_empty() {
            return Err(AppError::InvalidParameters("give at least one id".into()));
        }
        if ids.len() > IDS_MAX {
            return Err(AppError::InvalidParameters(format!(
                "at most {IDS_MAX} ids per call"
            )));
        }
        let db = self.authorize_database(who, database, Scope::Read).await?;
        let collection = parse_collection(&db, collection, "collection")?;
        let found = self
            .store()
            .item_statuses(&db.scope(), &collection, ids, self.now())
            .await?;
        let statuses = ids
            .iter()
            .map(|id| (id.clone(), found.iter().find(|s| &s.id == id).cloned()))
            .collect::<Vec<_>>();
        if statuses.iter().all(|(_, s)| s.is_none()) {
            return Err(AppError::FileNotFound(ids.join(", ")));
        }
        Ok((db, statuses))
    }

    /// Deletes items; when this returns `deleted: true` the item is gone from every index,
    /// listing and query. An item still being indexed is removed too: its worker's result is
    /// refused by the store.
    pub async fn delete_items(
        &self,
        who: &Principal,
        database: &DatabaseName,
        collection: Option<&str>,
        kind: Option<ItemKind>,
        ids: &[String],
    ) -> AppResult<(DatabaseRecord, Vec<DeletedItem>)> {
        who.require(Scope::Write)?;
        if ids.is_empty() {
            return Err(AppError::InvalidParameters(
                "`ids` must name at least one item".into(),
            ));
        }
        if ids.len() > IDS_MAX {
            return Err(AppError::InvalidParameters(format!(
                "at most {IDS_MAX} ids per call"
            )));
        }
        let db = self.authorize_database(who, database, Scope::Write).await?;
        let collection = parse_collection(&db, collection, "collection")?;
        let deleted = self
            .store()
            .delete_items(&db.scope(), &collection, kind, ids, self.now())
            .await
            .map_err(|e| match e {
                engram_store::StoreError::NotFound(_) => {
                    AppError::DatabaseNotFound(db.name.to_string())
                }
                other => other.into(),
            })?;
        Ok((db, deleted))
    }

    /// One page of items with filters (ANDed exact matches).
    pub async fn list_items(
        &self,
        who: &Principal,
        database: &DatabaseName,
        request: ListRequest,
    ) -> AppResult<Listing> {
        who.require(Scope::Read)?;
        let page = request.page.unwrap_or(1);
        if page < 1 || page > i64::from(u32::MAX) {
            return Err(AppError::InvalidParameters(
                "`page` must be 1 or more".into(),
            ));
        }
        let page_size = request.page_size.unwrap_or(i64::from(PAGE_SIZE_DEFAULT));
        if !(1..=i64::from(PAGE_SIZE_MAX)).contains(&page_size) {
            return Err(AppError::InvalidParameters(format!(
                "`page_size` must be between 1 and {PAGE_SIZE_MAX}"
            )));
        }
        if request.ids.len() > IDS_MAX {
            return Err(AppError::InvalidParameters(format!(
                "`source_ids` may hold at most {IDS_MAX} ids"
            )));
        }
        let mut fields = Vec::new();
        for (key, value) in request.source_fields {
            let field = SourceField::parse(&key).ok_or_else(|| {
                AppError::InvalidParameters(format!(
                    "`source_fields` key `{key}` is not allowed; allowed: description, timestamp, title, type, url"
                ))
            })?;
            let Value::String(value) = value else {
                return Err(AppError::InvalidParameters(format!(
                    "`source_fields.{key}` must be a string"
                )));
            };
            fields.push((field, value));
        }
        let db = self.authorize_database(who, database, Scope::Read).await?;
        // A listing without a collection lists the default collection, like every other call.
        let collections = if request.every_collection {
            Vec::new()
        } else {
            vec![parse_collection(
                &db,
                request.collection.as_deref(),
                "collection",
            )?]
        };
        let (page, page_size) = (page as u32, page_size as u32);
        let mut budget = FilterBudget::default();
        let mut additional_metadata = filters(
            &mut budget,
            request.additional_metadata,
            "additional_metadata",
        )?;
        if let Some(readable) = crate::filters::readable_by(&request.acl)? {
            additional_metadata.push(readable);
        }
        let query = ItemQuery {
            kind: request.kind,
            collections,
            ids: request.ids,
            metadata: filters(&mut budget, request.metadata, "tenant_metadata")?,
            additional_metadata,
            fields,
            statuses: request.statuses,
            page,
            page_size,
        };
        let found = self
            .store()
            .list_items(&db.scope(), &query, self.now())
            .await?;
        Ok(Listing {
            database: db,
            page: found,
            page_number: page,
            page_size,
        })
    }
}

impl App {
    /// How many live items of the database are in each indexing state of `only` (every state
    /// when empty), over every collection.
    pub async fn item_status_counts(
        &self,
        who: &Principal,
        database: &DatabaseName,
        only: &[engram_types::IndexingStatus],
    ) -> AppResult<Vec<(engram_types::IndexingStatus, u64)>> {
        who.require(Scope::Read)?;
        let db = self.authorize_database(who, database, Scope::Read).await?;
        Ok(self
            .store()
            .item_status_counts(&db.scope(), only, self.now())
            .await?)
    }
}

impl App {
    /// The indexing history of one item: the newest 50 states it entered, oldest first.
    pub async fn item_history(
        &self,
        who: &Principal,
        database: &DatabaseName,
        collection: Option<&str>,
        id: &str,
    ) -> AppResult<Vec<engram_store::HistoryEntry>> {
        who.require(Scope::Read)?;
        let db = self.authorize_database(who, database, Scope::Read).await?;
        let collection = parse_collection(&db, collection, "collection")?;
        Ok(self
            .store()
            .item_history(&db.scope(), &collection, id, self.now())
            .await?)
    }
}
