//! Current content routes: `/context/*` (ingest, status, list, delete).

use axum::extract::State;
use axum::http::StatusCode;
use engram_app::{App, ChunksRequest, KnowledgeRequest, ListRequest, Listing, MemoryRequest};
use engram_types::ItemKind;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::{Envelope, EnvelopeDoc, ErrorEnvelopeDoc};
use crate::error::ApiError;
use crate::extract::{Auth, Json, NotedQuery};
use crate::form::Form;
use crate::wire::items::*;
use crate::wire::{lenient, parse_enum, Deprecations, Ignored, ScopeDto, ScopeParams};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(ingest))
        .routes(routes!(status))
        .routes(routes!(chunks))
        .routes(routes!(list))
        .routes(routes!(delete_items))
}

/// Ingest knowledge (files and/or app content) or memories. Indexing continues in the
/// background; poll `GET /context/status`.
#[utoipa::path(post, path = "/context/ingest", tag = "context", security(("bearer" = ["write"])),
    request_body(content = crate::wire::items::IngestFormDoc, content_type = "multipart/form-data"),
    responses(
        (status = 202, body = EnvelopeDoc<IngestResultDto>, description = "accepted; per-item results"),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR"),
    ))]
async fn ingest(State(app): State<App>, Auth(who): Auth, form: Form) -> Result<Envelope, ApiError> {
    let (mut deprecations, mut ignored) = (Deprecations::default(), Ignored::default());
    let (database, request) = ingest_request(&form, &mut deprecations, &mut ignored)?;
    let memory = matches!(request, Ingest::Memory(_));
    for name in form.names() {
        if let Some(reason) = ingest_field_unread(name, memory) {
            ignored.note(name, reason);
        }
    }
    if !memory {
        crate::wire::items::note_text_files(&form, &["documents", "files"], &mut ignored);
    }
    let (outcome, kind) = match request {
        Ingest::Knowledge(request) => (
            app.ingest_knowledge(&who, &database, request).await?,
            ItemKind::Knowledge,
        ),
        Ingest::Memory(request) => (
            {
                crate::wire::items::note_inert_memories(&app, &request.memories, &mut ignored);
                app.ingest_memories(&who, &database, request).await?
            },
            ItemKind::Memory,
        ),
    };
    let mut envelope = Envelope::new(StatusCode::ACCEPTED, &ingest_result(&outcome))
        .scoped(&outcome.database, Some(outcome.collection.as_str()))
        .deprecations(deprecations)
        .ignored(&ignored);
    envelope.source_type(kind.as_str());
    Ok(envelope)
}

/// Fields every ingest reads (current names and deprecated aliases).
const INGEST_FIELDS: &[&str] = &[
    "type",
    "database",
    "tenant_id",
    "collection",
    "sub_tenant_id",
    "upsert",
];
/// Fields `type=knowledge` reads (and `type=memory` does not).
const KNOWLEDGE_FIELDS: &[&str] = &[
    "documents",
    "files",
    "document_metadata",
    "file_metadata",
    "app_knowledge",
    "app_sources",
    "graph_payload",
];
/// Fields `type=memory` reads (and `type=knowledge` does not).
const MEMORY_FIELDS: &[&str] = &["memories"];

/// Why an ingest of that type does not read the field `name`; `None` when it does.
fn ingest_field_unread(name: &str, memory: bool) -> Option<&'static str> {
    if INGEST_FIELDS.contains(&name) {
        None
    } else if KNOWLEDGE_FIELDS.contains(&name) {
        memory.then_some("type=memory reads `memories`; this field is read with type=knowledge")
    } else if MEMORY_FIELDS.contains(&name) {
        (!memory).then_some(
            "type=knowledge reads documents and app content; `memories` is read with type=memory",
        )
    } else {
        Some("not a field of this route")
    }
}

/// What an ingest form asks the app for.
pub(crate) enum Ingest {
    Knowledge(KnowledgeRequest),
    Memory(MemoryRequest),
}

/// The database and request of an ingest form: `type` (default knowledge), scope, `upsert`,
/// and the files and app content, or the memories (JSON-encoded form fields).
pub(crate) fn ingest_request(
    form: &Form,
    deprecations: &mut Deprecations,
    ignored: &mut Ignored,
) -> Result<(engram_types::DatabaseName, Ingest), ApiError> {
    let (database, collection) = deprecations.scope(
        form.text("database")?,
        form.text("tenant_id")?,
        form.text("collection")?,
        form.text("sub_tenant_id")?,
    )?;
    let upsert = form.flag("upsert", true)?;
    let kind = match form.text("type")? {
        Some(raw) => parse_enum::<ItemKindDto>(&raw)
            .map_err(|e| ApiError::invalid(format!("invalid `type`: {e}")))?
            .map_or(ItemKind::Knowledge, ItemKind::from),
        None => ItemKind::Knowledge,
    };
    let request = match kind {
        ItemKind::Knowledge => {
            let file_metadata = deprecations
                .pick(
                    form.json_array::<FileMetadataDto>("document_metadata")?,
                    form.json_array::<FileMetadataDto>("file_metadata")?,
                    "document_metadata",
                    "file_metadata",
                )?
                .map(|list| {
                    list.into_iter()
                        .map(|m| m.resolve(deprecations))
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?;
            Ingest::Knowledge(KnowledgeRequest {
                collection,
                upsert,
                files: form.files_named(&["documents", "files"]),
                file_metadata,
                file_metadata_field: "document_metadata",
                app_knowledge: app_sources(form, deprecations)?,
                graph_payload: form.text("graph_payload")?,
            })
        }
        ItemKind::Memory => {
            let memories = form.json_array::<MemoryDto>("memories")?.ok_or_else(|| {
                ApiError::invalid("missing required field `memories` for type=memory")
            })?;
            Ingest::Memory(MemoryRequest {
                collection,
                upsert,
                memories: memories
                    .into_iter()
                    .map(|m| m.resolve(deprecations, ignored))
                    .collect::<Result<_, _>>()?,
            })
        }
    };
    Ok((database, request))
}

/// Indexing status of ingested items. Unknown ids are reported as `FILE_NOT_FOUND`; when none
/// is known the call is 404.
#[utoipa::path(get, path = "/context/status", tag = "context", security(("bearer" = ["read"])), params(StatusParams, ScopeParams),
    responses(
        (status = 200, body = EnvelopeDoc<StatusListDto>),
        (status = 404, body = ErrorEnvelopeDoc, description = "FILE_NOT_FOUND or DATABASE_NOT_FOUND"),
    ))]
async fn status(
    State(app): State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<StatusParams>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let (database, collection) = deprecations.scope_params(params.scope)?;
    let mut ids = split_ids(&params.ids);
    ids.extend(params.id.filter(|id| !id.is_empty()));
    let (db, statuses) = app
        .item_statuses(&who, &database, collection.as_deref(), &ids)
        .await?;
    let statuses = statuses.into_iter().map(StatusDto::from).collect();
    let collection = collection.unwrap_or_else(|| db.default_collection.to_string());
    Ok(Envelope::ok(&StatusListDto { statuses })
        .scoped(&db, Some(&collection))
        .deprecations(deprecations)
        .ignored(&ignored))
}

/// The indexed chunks of one source in order, or chosen chunks by id (the ids query results
/// and relations cite).
#[utoipa::path(get, path = "/context/chunks", tag = "context", security(("bearer" = ["read"])), params(ChunksParams, ScopeParams),
    responses(
        (status = 200, body = EnvelopeDoc<ChunkReadDto>),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: neither id nor chunk_ids, limit out of range"),
        (status = 404, body = ErrorEnvelopeDoc, description = "SOURCE_NOT_FOUND or DATABASE_NOT_FOUND"),
    ))]
async fn chunks(
    State(app): State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<ChunksParams>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let (database, collection) = deprecations.scope_params(params.scope)?;
    let kind = match params.kind {
        None | Some(ChunkCorpusDto::Knowledge) => Some(ItemKind::Knowledge),
        Some(ChunkCorpusDto::Memory) => Some(ItemKind::Memory),
        Some(ChunkCorpusDto::All) => None,
    };
    let request = ChunksRequest {
        collection: collection.clone(),
        id: params.id,
        chunk_ids: split_ids(&params.chunk_ids),
        kind,
        limit: params.limit,
        acl: split_ids(&params.acl),
    };
    let read = app.read_chunks(&who, &database, request).await?;
    let collection = collection.unwrap_or_else(|| read.database.default_collection.to_string());
    Ok(Envelope::ok(&ChunkReadDto::from(&read))
        .scoped(&read.database, Some(&collection))
        .deprecations(deprecations)
        .ignored(&ignored))
}

/// `POST /context/list`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct ListBody {
    #[serde(flatten)]
    pub scope: ScopeDto,
    /// `knowledge` (default) or `memory`.
    #[serde(rename = "type", default, deserialize_with = "lenient")]
    pub kind: Option<ItemKindDto>,
    pub ids: Option<Vec<String>>,
    pub source_ids: Option<Vec<String>>,
    pub page: Option<i64>,
    pub page_size: Option<i64>,
    #[serde(default)]
    pub filters: ListFiltersDto,
    #[serde(default)]
    pub include_fields: Vec<String>,
    /// Principals the caller acts for: only sources one of them may read (their access rule
    /// names one of them or `__public__`, or there is none). Absent, empty or `["*"]`: all.
    #[schema(value_type = Option<Vec<String>>)]
    pub acl: Option<serde_json::Value>,
    /// Fields this route does not know: reported in `meta.ignored_parameters`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, serde::Serialize, ToSchema)]
pub(super) struct ListDataDto {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<SourceDto>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_memories: Option<Vec<UserMemoryDto>>,
    pub total: u64,
    pub pagination: PaginationDto,
}

/// A listing request resolved from its wire form.
struct ScopedList {
    database: engram_types::DatabaseName,
    collection: Option<String>,
    kind: ItemKind,
    /// Only these fields of each source (`include_fields`); `None`: all.
    include_fields: Option<Vec<String>>,
    request: ListRequest,
}

impl ListBody {
    fn into_request(self, deprecations: &mut Deprecations) -> Result<ScopedList, ApiError> {
        let (database, collection) = self.scope.resolve(deprecations)?;
        let kind = self.kind.map_or(ItemKind::Knowledge, ItemKind::from);
        let ids = deprecations
            .pick(self.ids, self.source_ids, "ids", "source_ids")?
            .unwrap_or_default();
        check_include_fields(&self.include_fields)?;
        let mut request = list_request(
            deprecations,
            self.filters,
            kind,
            collection.clone(),
            ids,
            self.page,
            self.page_size,
        )?;
        request.acl = super::wire::principals(self.acl)?;
        Ok(ScopedList {
            database,
            collection,
            kind,
            include_fields: (!self.include_fields.is_empty()).then_some(self.include_fields),
            request,
        })
    }
}

impl ListDataDto {
    fn new(listing: &Listing, kind: ItemKind, include: Option<&[String]>) -> Self {
        let (sources, user_memories) = listed_items(listing, kind, include);
        Self {
            sources,
            user_memories,
            total: listing.page.total,
            pagination: PaginationDto::from(listing),
        }
    }
}

/// List knowledge sources or memories with pagination and filters.
#[utoipa::path(post, path = "/context/list", tag = "context", security(("bearer" = ["read"])), request_body = ListBody,
    responses(
        (status = 200, body = EnvelopeDoc<ListDataDto>),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: page, page_size, ids, filters"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn list(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<ListBody>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let mut ignored = Ignored::of_unknown(&body.unknown);
    body.filters.note_unknown(&mut ignored);
    let scoped = body.into_request(&mut deprecations)?;
    ignored.note_if(
        scoped.kind == ItemKind::Memory && scoped.include_fields.is_some(),
        "include_fields",
        crate::wire::items::INCLUDE_FIELDS_FOR_MEMORIES,
    );
    let listing = app
        .list_items(&who, &scoped.database, scoped.request)
        .await?;
    let (kind, collection) = (scoped.kind, scoped.collection);
    let data = ListDataDto::new(&listing, kind, scoped.include_fields.as_deref());
    let mut envelope = Envelope::ok(&data)
        .scoped(&listing.database, collection.as_deref())
        .deprecations(deprecations)
        .ignored(&ignored);
    envelope.source_type(kind.as_str());
    Ok(envelope)
}

/// `DELETE /context`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct DeleteBody {
    #[serde(flatten)]
    pub scope: ScopeDto,
    #[serde(default)]
    pub ids: Vec<String>,
    /// `knowledge` or `memory`; omitted: either.
    #[serde(rename = "type", default, deserialize_with = "lenient")]
    pub kind: Option<ItemKindDto>,
    /// Fields this route does not know: reported in `meta.ignored_parameters`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// Delete ingested items. `deleted: true` means gone from every index, listing and query.
#[utoipa::path(delete, path = "/context", tag = "context", security(("bearer" = ["write"])), request_body = DeleteBody,
    responses(
        (status = 200, body = EnvelopeDoc<DeleteResultDto>, description = "per-item results"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn delete_items(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<DeleteBody>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let ignored = Ignored::of_unknown(&body.unknown);
    let (database, collection) = body.scope.resolve(&mut deprecations)?;
    let kind = body.kind.map(ItemKind::from);
    let (db, deleted) = app
        .delete_items(&who, &database, collection.as_deref(), kind, &body.ids)
        .await?;
    Ok(Envelope::ok(&DeleteResultDto::new(&deleted))
        .scoped(&db, collection.as_deref())
        .deprecations(deprecations)
        .ignored(&ignored))
}
