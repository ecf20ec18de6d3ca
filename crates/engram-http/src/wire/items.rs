//! Wire types of ingestion, status, listing and deletion, shared by both generations where the
//! shape is the same (the JSON-encoded form fields), plus each generation's responses.

use engram_app::{IngestOutcome, ListRequest, Listing, PAGE_SIZE_DEFAULT};
use engram_types::ItemKind;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use crate::error::ApiError;
use crate::wire::{Deprecations, Ignored};

/// One entry of `document_metadata` / `file_metadata`.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub(crate) struct FileMetadataDto {
    pub id: Option<String>,
    /// Deprecated alias of `id`.
    pub file_id: Option<String>,
    /// Values of the database's schema fields.
    pub metadata: Option<Map<String, Value>>,
    /// Deprecated alias of `metadata`.
    pub tenant_metadata: Option<Map<String, Value>>,
    pub additional_metadata: Option<Map<String, Value>>,
    /// Deprecated alias of `additional_metadata`.
    pub document_metadata: Option<Map<String, Value>>,
    /// Links to other sources of the database: `{"ids": ["other-id"]}`.
    #[schema(value_type = Option<Object>)]
    pub relations: Value,
}

#[derive(Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub(crate) struct ContentDto {
    pub text: String,
}

/// One entry of `app_knowledge`.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub(crate) struct AppSourceDto {
    pub id: Option<String>,
    #[serde(alias = "tenant_id")]
    pub database: Option<String>,
    #[serde(alias = "sub_tenant_id")]
    pub collection: Option<String>,
    pub title: String,
    #[serde(rename = "type")]
    pub source_type: String,
    pub description: String,
    pub note: String,
    pub url: String,
    pub timestamp: String,
    pub content: ContentDto,
    pub metadata: Option<Map<String, Value>>,
    /// Deprecated alias of `metadata`.
    pub tenant_metadata: Option<Map<String, Value>>,
    pub additional_metadata: Option<Map<String, Value>>,
    /// Deprecated alias of `additional_metadata`.
    pub document_metadata: Option<Map<String, Value>>,
    #[schema(value_type = Vec<Object>)]
    pub attachments: Value,
    #[schema(value_type = Object)]
    pub relations: Value,
    /// Principals who may retrieve the item (`acl` on queries, listings and inspection); `[]`:
    /// nobody; omitted: everyone. Stored as `additional_metadata.acl`.
    pub acl: Option<Vec<String>>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub(crate) struct PairDto {
    pub user: String,
    pub assistant: String,
}

/// One memory.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub(crate) struct MemoryDto {
    pub id: Option<String>,
    /// Deprecated alias of `id`.
    pub source_id: Option<String>,
    pub title: String,
    pub text: Option<String>,
    pub user_assistant_pairs: Option<Vec<PairDto>>,
    pub is_markdown: bool,
    pub infer: bool,
    pub custom_instructions: Option<String>,
    pub user_name: Option<String>,
    /// Time to live in seconds.
    pub expiry_time: Option<i64>,
    /// When the memory happened (RFC 3339 or a date), for temporal reasoning.
    pub timestamp: Option<String>,
    /// An object, or (as the legacy clients send it) a JSON-encoded object.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// Deprecated alias of `metadata`.
    #[schema(value_type = Option<Object>)]
    pub tenant_metadata: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub additional_metadata: Option<Value>,
    /// Deprecated alias of `additional_metadata`.
    #[schema(value_type = Option<Object>)]
    pub document_metadata: Option<Value>,
    /// Links to other memories: `{"ids": ["other-id"]}`.
    #[schema(value_type = Option<Object>)]
    pub relations: Value,
}

/// A metadata object given as an object or as a JSON-encoded object (legacy clients).
fn metadata_object(value: Option<Value>, field: &str) -> Result<Map<String, Value>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(map)) => Ok(map),
        Some(Value::String(text)) if text.trim().is_empty() => Ok(Map::new()),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err(ApiError::invalid(format!(
                "`{field}` must be an object or a JSON-encoded object"
            ))),
        },
        Some(_) => Err(ApiError::invalid(format!("`{field}` must be an object"))),
    }
}

impl FileMetadataDto {
    /// The app's file metadata, deprecated names resolved and reported.
    pub(crate) fn resolve(
        self,
        deprecations: &mut Deprecations,
    ) -> Result<engram_app::FileMetadata, ApiError> {
        Ok(engram_app::FileMetadata {
            id: deprecations.pick(
                self.id,
                self.file_id,
                "document_metadata[].id",
                "document_metadata[].file_id",
            )?,
            metadata: deprecations
                .pick(
                    self.metadata,
                    self.tenant_metadata,
                    "document_metadata[].metadata",
                    "document_metadata[].tenant_metadata",
                )?
                .unwrap_or_default(),
            additional_metadata: deprecations
                .pick(
                    self.additional_metadata,
                    self.document_metadata,
                    "document_metadata[].additional_metadata",
                    "document_metadata[].document_metadata",
                )?
                .unwrap_or_default(),
            relations: self.relations,
        })
    }
}

impl AppSourceDto {
    /// The app's app source, deprecated names resolved and reported.
    pub(crate) fn resolve(
        self,
        deprecations: &mut Deprecations,
    ) -> Result<engram_app::AppSource, ApiError> {
        let metadata = deprecations.pick(
            self.metadata,
            self.tenant_metadata,
            "app_knowledge[].metadata",
            "app_knowledge[].tenant_metadata",
        )?;
        let additional_metadata = deprecations.pick(
            self.additional_metadata,
            self.document_metadata,
            "app_knowledge[].additional_metadata",
            "app_knowledge[].document_metadata",
        )?;
        Ok(engram_app::AppSource {
            id: self.id,
            database: self.database,
            collection: self.collection,
            title: self.title,
            source_type: self.source_type,
            description: self.description,
            note: self.note,
            url: self.url,
            timestamp: self.timestamp,
            text: self.content.text,
            metadata: metadata.unwrap_or_default(),
            additional_metadata: additional_metadata.unwrap_or_default(),
            attachments: self.attachments,
            relations: self.relations,
            acl: self.acl,
        })
    }
}

impl MemoryDto {
    /// The app's memory, deprecated names resolved and reported; `is_markdown` noted in
    /// `ignored` when set (memories are chunked as plain text).
    pub(crate) fn resolve(
        self,
        deprecations: &mut Deprecations,
        ignored: &mut Ignored,
    ) -> Result<engram_app::MemoryInput, ApiError> {
        ignored.note_if(
            self.is_markdown,
            "memories[].is_markdown",
            "memories are chunked as plain text; Markdown marks stay in the text",
        );
        let metadata = deprecations.pick(
            self.metadata,
            self.tenant_metadata,
            "memories[].metadata",
            "memories[].tenant_metadata",
        )?;
        let additional_metadata = deprecations.pick(
            self.additional_metadata,
            self.document_metadata,
            "memories[].additional_metadata",
            "memories[].document_metadata",
        )?;
        let memory = engram_app::MemoryInput {
            id: deprecations.pick(
                self.id,
                self.source_id,
                "memories[].id",
                "memories[].source_id",
            )?,
            title: self.title,
            text: self.text,
            pairs: self
                .user_assistant_pairs
                .map(|pairs| pairs.into_iter().map(|p| (p.user, p.assistant)).collect()),
            infer: self.infer,
            custom_instructions: self.custom_instructions,
            user_name: self.user_name,
            expiry_time: self.expiry_time,
            timestamp: self.timestamp,
            metadata: metadata_object(metadata, "memories[].metadata")?,
            additional_metadata: metadata_object(
                additional_metadata,
                "memories[].additional_metadata",
            )?,
            relations: self.relations,
        };
        Ok(memory)
    }
}

/// `data` of `POST /context/ingest`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct IngestResultDto {
    pub success: bool,
    pub message: String,
    pub success_count: usize,
    pub failed_count: usize,
    pub results: Vec<IngestItemDto>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct IngestItemDto {
    pub id: String,
    pub filename: String,
    pub title: String,
    /// `queued` when accepted, `failed` when refused.
    pub status: String,
    pub infer: bool,
    /// Relations of the source's `graph_payload` that will be stored.
    pub relations_created: u32,
    /// Why relations of the source's `graph_payload` were refused; null when none were.
    pub relations_error: Option<String>,
    /// Empty when accepted; for a refused file it carries an `E####` code.
    pub error: String,
    pub error_code: String,
}

/// `GET /context/status` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct StatusParams {
    /// Item ids: repeated (`ids=a&ids=b`) or comma-separated.
    #[serde(default)]
    pub ids: Vec<String>,
    /// One item id (added to `ids`).
    pub id: Option<String>,
    /// Documented by `ScopeParams` beside this in the route's `params`.
    #[serde(flatten)]
    #[param(ignore)]
    pub scope: crate::wire::ScopeParams,
}

/// Which corpus a chunk read addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ChunkCorpusDto {
    Knowledge,
    Memory,
    All,
}

/// `GET /context/chunks` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ChunksParams {
    /// Documented by `ScopeParams` beside this in the route's `params`.
    #[serde(flatten)]
    #[param(ignore)]
    pub scope: crate::wire::ScopeParams,
    /// The source whose chunks to read, in order. Required unless `chunk_ids` is given.
    #[serde(default, deserialize_with = "crate::wire::present")]
    pub id: Option<String>,
    /// Chunks to read: repeated (`chunk_ids=a&chunk_ids=b`) or comma-separated; takes
    /// precedence over `id`.
    #[serde(default)]
    pub chunk_ids: Vec<String>,
    /// `knowledge` (default), `memory` or `all`.
    #[serde(rename = "type", default, deserialize_with = "crate::wire::lenient")]
    #[param(value_type = Option<String>)]
    pub kind: Option<ChunkCorpusDto>,
    /// Most chunks to return, 1-1000 (default 100).
    #[serde(default)]
    pub limit: Option<i64>,
    /// Principals to answer as, repeated (`acl=a&acl=b`) or comma-separated: chunks of sources
    /// none of them may read are left out.
    #[serde(default)]
    pub acl: Vec<String>,
}

/// One chunk as read directly.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ReadChunkDto {
    #[serde(flatten)]
    pub chunk: crate::wire::query::ChunkFieldsDto,
    pub source_id: String,
    /// The chunk's position in its source (0 first).
    pub position: u32,
}

/// `GET /context/chunks` answer.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ChunkReadDto {
    pub success: bool,
    pub message: String,
    pub chunks: Vec<ReadChunkDto>,
    /// The source has more chunks than `limit`: these are its first ones.
    pub is_truncated: bool,
    pub missing_chunk_ids: Vec<String>,
}

impl From<&engram_app::ChunkRead> for ChunkReadDto {
    fn from(read: &engram_app::ChunkRead) -> Self {
        let chunks: Vec<ReadChunkDto> = read
            .chunks
            .iter()
            .map(|hit| ReadChunkDto {
                chunk: hit.into(),
                source_id: hit.item.id.clone(),
                position: hit.position,
            })
            .collect();
        Self {
            success: true,
            message: format!("{} chunks", chunks.len()),
            chunks,
            is_truncated: read.truncated,
            missing_chunk_ids: read.missing_chunk_ids.clone(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StatusListDto {
    pub statuses: Vec<StatusDto>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StatusDto {
    pub id: String,
    /// `queued|processing|graph_creation|completed|errored`, or `not_found`.
    pub indexing_status: String,
    /// `E####` when indexing failed, `FILE_NOT_FOUND` for an unknown id, else empty.
    pub error_code: String,
    pub error_message: String,
    /// False iff errored or unknown.
    pub success: bool,
    pub message: String,
}

/// Filters of a listing; aliases route to the same filter.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(default)]
pub(crate) struct ListFiltersDto {
    pub tenant_metadata: Option<Map<String, Value>>,
    pub metadata: Option<Map<String, Value>>,
    pub additional_metadata: Option<Map<String, Value>>,
    pub document_metadata: Option<Map<String, Value>>,
    pub source_fields: Option<Map<String, Value>>,
    /// Keys that are no kind of filter: reported, never matched.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

impl ListFiltersDto {
    /// Notes the keys that are no kind of filter, as `filters.<key>`.
    pub(crate) fn note_unknown(&self, ignored: &mut crate::wire::Ignored) {
        for key in self.unknown.keys() {
            ignored.note(
                format!("filters.{key}"),
                "not a kind of filter: filters take tenant_metadata, additional_metadata or \
                 source_fields",
            );
        }
    }
}

/// The pagination object of every list response.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PaginationDto {
    pub page: u32,
    pub page_size: u32,
    pub total: u64,
    pub total_pages: u64,
    pub has_next: bool,
    pub has_previous: bool,
}

impl From<&engram_app::Listing> for PaginationDto {
    fn from(l: &engram_app::Listing) -> Self {
        let total_pages = l.total_pages();
        Self {
            page: l.page_number,
            page_size: l.page_size,
            total: l.page.total,
            total_pages,
            has_next: u64::from(l.page_number) < total_pages,
            has_previous: l.page_number > 1,
        }
    }
}

/// A knowledge source as listed.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SourceDto {
    pub id: String,
    /// The database the source was listed from (`tenant_id` is its deprecated spelling).
    pub database: String,
    /// Its collection (`sub_tenant_id` is its deprecated spelling).
    pub collection: String,
    pub tenant_id: String,
    pub sub_tenant_id: String,
    pub title: String,
    #[serde(rename = "type")]
    pub source_type: String,
    pub description: String,
    pub note: String,
    pub url: String,
    pub timestamp: String,
    pub content: Option<SourceContentDto>,
    pub tenant_metadata: Map<String, Value>,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    /// The same as `additional_metadata`, under the name legacy clients read.
    pub document_metadata: Map<String, Value>,
    #[schema(value_type = Vec<Object>)]
    pub attachments: Value,
    #[schema(value_type = Object)]
    pub relations: Value,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct SourceContentDto {
    pub text: String,
}

/// A memory as listed.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct UserMemoryDto {
    pub memory_id: String,
    pub memory_content: String,
    /// What inference made of the memory (`infer: true`): its new facts about the user; empty
    /// when none were made.
    pub inferred_content: String,
    pub database: String,
    pub collection: String,
    pub tenant_id: String,
    pub sub_tenant_id: String,
}

/// Fields `include_fields` may name.
pub(crate) const INCLUDE_FIELDS: [&str; 13] = [
    "attachments",
    "content",
    "description",
    "additional_metadata",
    "note",
    "relations",
    "metadata",
    "timestamp",
    "title",
    "type",
    "url",
    "document_metadata",
    "tenant_metadata",
];

fn object(value: &Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

impl SourceDto {
    /// Builds a listed source; with `include`, only those fields (plus ids) are filled.
    pub(crate) fn new(
        record: &engram_app::ItemRecord,
        database: &str,
        include: Option<&[String]>,
    ) -> Self {
        let wants = |field: &str| include.is_none_or(|list| list.iter().any(|f| f == field));
        let metadata = if wants("metadata") || wants("tenant_metadata") {
            object(&record.fields.metadata)
        } else {
            Map::new()
        };
        let f = &record.fields;
        let additional = if wants("additional_metadata") || wants("document_metadata") {
            object(&f.additional_metadata)
        } else {
            Map::new()
        };
        let text = |on: bool, v: &String| if on { v.clone() } else { String::new() };
        Self {
            id: record.id.clone(),
            database: database.to_owned(),
            collection: record.collection.to_string(),
            tenant_id: database.to_owned(),
            sub_tenant_id: record.collection.to_string(),
            title: text(wants("title"), &f.title),
            source_type: text(wants("type"), &f.source_type),
            description: text(wants("description"), &f.description),
            note: text(wants("note"), &f.note),
            url: text(wants("url"), &f.url),
            timestamp: text(wants("timestamp"), &f.timestamp),
            content: wants("content").then(|| SourceContentDto {
                text: f.text.clone().unwrap_or_default(),
            }),
            tenant_metadata: metadata.clone(),
            metadata,
            document_metadata: additional.clone(),
            additional_metadata: additional,
            attachments: if wants("attachments") {
                f.attachments.clone()
            } else {
                Value::Array(Vec::new())
            },
            relations: if wants("relations") {
                f.relations.clone()
            } else {
                Value::Object(Map::new())
            },
        }
    }
}

/// Per-item result of a deletion.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeleteItemDto {
    pub id: String,
    pub deleted: bool,
    pub error: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct DeleteResultDto {
    pub success: bool,
    pub message: String,
    pub results: Vec<DeleteItemDto>,
    pub deleted_count: usize,
}

impl DeleteResultDto {
    pub(crate) fn new(deleted: &[engram_app::DeletedItem]) -> Self {
        let results: Vec<DeleteItemDto> = deleted
            .iter()
            .map(|d| DeleteItemDto {
                id: d.id.clone(),
                deleted: d.deleted,
                error: if d.deleted {
                    String::new()
                } else {
                    "not found".into()
                },
            })
            .collect();
        let deleted_count = results.iter().filter(|r| r.deleted).count();
        Self {
            success: deleted_count == results.len(),
            message: format!("{deleted_count} of {} deleted", results.len()),
            results,
            deleted_count,
        }
    }
}

/// Splits `a,b` and repeated values into one list, dropping empties.
pub(crate) fn split_ids(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Checks `include_fields` against the allowed names.
pub(crate) fn check_include_fields(fields: &[String]) -> Result<(), crate::error::ApiError> {
    match fields
        .iter()
        .find(|f| !INCLUDE_FIELDS.contains(&f.as_str()))
    {
        Some(bad) => Err(crate::error::ApiError::invalid(format!(
            "`include_fields` value `{bad}` is not allowed; allowed: {}",
            INCLUDE_FIELDS.join(", ")
        ))),
        None => Ok(()),
    }
}

/// The `app_knowledge` form field (or its deprecated name `app_sources`, which legacy clients
/// send, as one source or an array) as app sources.
pub(crate) fn app_sources(
    form: &crate::form::Form,
    deprecations: &mut Deprecations,
) -> Result<Vec<engram_app::AppSource>, crate::error::ApiError> {
    let sources = deprecations.pick(
        form.json_array::<AppSourceDto>("app_knowledge")?,
        form.json_array_or_object::<AppSourceDto>("app_sources")?,
        "app_knowledge",
        "app_sources",
    )?;
    sources
        .unwrap_or_default()
        .into_iter()
        .map(|source| source.resolve(deprecations))
        .collect()
}

/// The answer to an ingest call (both generations start from it).
pub(crate) fn ingest_result(outcome: &IngestOutcome) -> IngestResultDto {
    let results: Vec<IngestItemDto> = outcome
        .results
        .iter()
        .map(|r| IngestItemDto {
            id: r.id.clone(),
            filename: r.filename.clone(),
            title: r.title.clone(),
            status: r.status.map_or("failed", |s| s.as_str()).to_owned(),
            infer: r.infer,
            relations_created: r.relations_created,
            relations_error: Some(r.relations_error.clone()).filter(|e| !e.is_empty()),
            error: r.error.clone(),
            error_code: r.error_code.clone(),
        })
        .collect();
    let (ok, failed) = (outcome.success_count(), outcome.failed_count());
    IngestResultDto {
        success: failed == 0,
        message: format!("{ok} queued, {failed} failed"),
        success_count: ok,
        failed_count: failed,
        results,
    }
}

/// Resolves the aliases of list filters into one request (shared with the legacy route).
pub(crate) fn list_request(
    deprecations: &mut Deprecations,
    filters: ListFiltersDto,
    kind: ItemKind,
    collection: Option<String>,
    ids: Vec<String>,
    page: Option<i64>,
    page_size: Option<i64>,
) -> Result<ListRequest, ApiError> {
    let metadata = deprecations.pick(
        filters.tenant_metadata,
        filters.metadata,
        "tenant_metadata",
        "metadata",
    )?;
    let additional = deprecations.pick(
        filters.additional_metadata,
        filters.document_metadata,
        "additional_metadata",
        "document_metadata",
    )?;
    Ok(ListRequest {
        collection,
        kind: Some(kind),
        ids,
        page,
        page_size: page_size.or(Some(i64::from(PAGE_SIZE_DEFAULT))),
        metadata: metadata.unwrap_or_default(),
        additional_metadata: additional.unwrap_or_default(),
        source_fields: filters.source_fields.unwrap_or_default(),
        acl: Vec::new(),
        statuses: Vec::new(),
        every_collection: false,
    })
}

/// `type` of an item request: `knowledge` or `memory` (also `memories`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ItemKindDto {
    Knowledge,
    #[serde(alias = "memories")]
    Memory,
}

impl From<ItemKindDto> for ItemKind {
    fn from(kind: ItemKindDto) -> Self {
        match kind {
            ItemKindDto::Knowledge => Self::Knowledge,
            ItemKindDto::Memory => Self::Memory,
        }
    }
}

impl From<(String, Option<engram_app::ItemStatus>)> for StatusDto {
    /// The status of one asked id: its item's state, or `not_found`.
    fn from((id, status): (String, Option<engram_app::ItemStatus>)) -> Self {
        match status {
            Some(s) => Self {
                id,
                indexing_status: s.status.as_str().to_owned(),
                success: s.status != engram_types::IndexingStatus::Errored,
                message: if s.error_message.is_empty() {
                    s.status.as_str().to_owned()
                } else {
                    s.error_message.clone()
                },
                error_code: s.error_code,
                error_message: s.error_message,
            },
            None => Self {
                message: format!("no item with id `{id}`"),
                id,
                indexing_status: "not_found".into(),
                error_code: engram_types::ErrorCode::FileNotFound.as_str().into(),
                error_message: "file not found".into(),
                success: false,
            },
        }
    }
}

/// A listing page as sources (knowledge, only the `include` fields when given) or as memories,
/// for either generation's response.
pub(crate) fn listed_items(
    listing: &Listing,
    kind: ItemKind,
    include: Option<&[String]>,
) -> (Option<Vec<SourceDto>>, Option<Vec<UserMemoryDto>>) {
    let db_name = listing.database.name.to_string();
    let items = &listing.page.items;
    match kind {
        ItemKind::Knowledge => (
            Some(
                items
                    .iter()
                    .map(|r| SourceDto::new(r, &db_name, include))
                    .collect(),
            ),
            None,
        ),
        ItemKind::Memory => (
            None,
            Some(
                items
                    .iter()
                    .map(|r| UserMemoryDto {
                        memory_id: r.id.clone(),
                        memory_content: r.fields.text.clone().unwrap_or_default(),
                        inferred_content: r.fields.inferred_content.clone(),
                        database: db_name.clone(),
                        collection: r.collection.to_string(),
                        tenant_id: db_name.clone(),
                        sub_tenant_id: r.collection.to_string(),
                    })
                    .collect(),
            ),
        ),
    }
}

/// What a source read returns (`mode`): its text, a download link, or both (the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FetchMode {
    Content,
    Url,
    Both,
}

impl FetchMode {
    pub(crate) fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        match raw.map(str::trim) {
            None | Some("" | "both") => Ok(Self::Both),
            Some("content") => Ok(Self::Content),
            Some("url") => Ok(Self::Url),
            Some(other) => Err(ApiError::invalid(format!(
                "unknown `mode` `{other}`; expected content, url or both"
            ))),
        }
    }

    pub(crate) fn content(self) -> bool {
        self != Self::Url
    }

    pub(crate) fn url(self) -> bool {
        self != Self::Content
    }
}

/// The base URL this request reached the service at: `X-Forwarded-Proto` and
/// `X-Forwarded-Host` when a proxy sets them, else `http` and `Host`.
fn public_base(headers: &axum::http::HeaderMap) -> String {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(',').next())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let scheme = get("x-forwarded-proto")
        .filter(|p| matches!(*p, "http" | "https"))
        .unwrap_or("http");
    let host = get("x-forwarded-host")
        .or_else(|| get("host"))
        .unwrap_or("localhost");
    format!("{scheme}://{host}")
}

/// Why `include_fields` does nothing when memories are listed.
pub(crate) const INCLUDE_FIELDS_FOR_MEMORIES: &str =
    "it selects the fields of listed sources; memories are listed whole";

/// Why `expiry_seconds` does nothing with `mode=content`.
pub(crate) const EXPIRY_WITHOUT_LINK: &str =
    "it is the lifetime of the download link, which mode=content does not return";

/// The URL a download token opens, on the base this request reached the service at.
pub(crate) fn download_url(headers: &axum::http::HeaderMap, token: &str) -> String {
    format!("{}/context/download?token={token}", public_base(headers))
}

/// The multipart form of `POST /context/ingest` (documentation: the handler reads the parts
/// by name). JSON values travel as JSON-encoded text parts; files as file parts.
#[derive(ToSchema)]
#[allow(dead_code)] // read field by field from the form, described here for the document
pub(crate) struct IngestFormDoc {
    /// `knowledge` (default) or `memory`.
    #[schema(value_type = Option<ItemKindDto>)]
    r#type: Option<String>,
    /// The database (required).
    database: Option<String>,
    /// Deprecated alias of `database`.
    #[schema(deprecated)]
    tenant_id: Option<String>,
    /// The collection (default: the database's default collection).
    collection: Option<String>,
    /// Deprecated alias of `collection`.
    #[schema(deprecated)]
    sub_tenant_id: Option<String>,
    /// Replace an item of the same id (default true).
    upsert: Option<bool>,
    /// Files to parse (file parts), with `type=knowledge`.
    #[schema(value_type = Option<Vec<String>>, format = Binary)]
    documents: Option<Vec<String>>,
    /// Deprecated alias of `documents`.
    #[schema(value_type = Option<Vec<String>>, format = Binary, deprecated)]
    files: Option<Vec<String>>,
    /// JSON array of per-file metadata, in the order of the files.
    document_metadata: Option<String>,
    /// Deprecated alias of `document_metadata`.
    #[schema(deprecated)]
    file_metadata: Option<String>,
    /// JSON array of pre-extracted app content items.
    app_knowledge: Option<String>,
    /// Deprecated alias of `app_knowledge`.
    #[schema(deprecated)]
    app_sources: Option<String>,
    /// JSON array of memories, with `type=memory`.
    memories: Option<String>,
    /// JSON graph of entities and relations to store beside the content.
    graph_payload: Option<String>,
}

/// The multipart form of the legacy `POST /ingestion/upload_knowledge` (documentation).
#[derive(ToSchema)]
#[allow(dead_code)] // read field by field from the form, described here for the document
pub(crate) struct UploadKnowledgeFormDoc {
    /// The tenant (required).
    tenant_id: Option<String>,
    /// The sub-tenant (default: the tenant's default).
    sub_tenant_id: Option<String>,
    /// Replace an item of the same id (default true).
    upsert: Option<bool>,
    /// Files to parse (file parts).
    #[schema(value_type = Option<Vec<String>>, format = Binary)]
    files: Option<Vec<String>>,
    /// Alias of `files`.
    #[schema(value_type = Option<Vec<String>>, format = Binary)]
    documents: Option<Vec<String>>,
    /// JSON array of per-file metadata, in the order of the files.
    file_metadata: Option<String>,
    /// JSON array of pre-extracted app content items.
    app_knowledge: Option<String>,
    /// Deprecated alias of `app_knowledge`.
    #[schema(deprecated)]
    app_sources: Option<String>,
    /// JSON graph of entities and relations to store beside the content.
    graph_payload: Option<String>,
}

/// Notes the fields of `memories` that do nothing as sent (see [`engram_app::MemoryInput::inert`]).
pub(crate) fn note_inert_memories(
    app: &engram_app::App,
    memories: &[engram_app::MemoryInput],
    ignored: &mut Ignored,
) {
    for memory in memories {
        for (field, reason) in memory.inert(app.graph_reads_instructions()) {
            ignored.note(format!("memories[].{field}"), reason);
        }
    }
}

/// Fields the legacy upload form reads.
pub(crate) const UPLOAD_FIELDS: &[&str] = &[
    "tenant_id",
    "sub_tenant_id",
    "upsert",
    "files",
    "documents",
    "file_metadata",
    "app_knowledge",
    "app_sources",
    "graph_payload",
];

/// Notes the file fields of `form` sent as text parts: files are read from file parts only.
pub(crate) fn note_text_files(form: &crate::form::Form, names: &[&str], ignored: &mut Ignored) {
    for name in names {
        if form.has_text(name) {
            ignored.note(
                *name,
                "sent as a text part; files are read from file parts (with a filename)",
            );
        }
    }
}
