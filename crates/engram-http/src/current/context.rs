//! Current content routes: `/context/*` (ingest, status, list, delete).

use axum::extract::State;
use axum::http::StatusCode;
use engram_app::{App, KnowledgeRequest, MemoryRequest};
use engram_types::{ErrorCode, ItemKind};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::{Envelope, EnvelopeDoc, ErrorEnvelopeDoc};
use crate::error::ApiError;
use crate::extract::{Auth, Json, Query};
use crate::form::Form;
use crate::wire::items::*;
use crate::wire::{lenient, parse_enum, Deprecations, ScopeDto};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(ingest))
        .routes(routes!(status))
        .routes(routes!(list))
        .routes(routes!(delete_items))
}

/// Ingest knowledge (files and/or app content) or memories. Indexing continues in the
/// background; poll `GET /context/status`.
#[utoipa::path(post, path = "/context/ingest", tag = "context",
    request_body(content_type = "multipart/form-data", description = "fields: type, database, collection, upsert, \
        documents (files), document_metadata, app_knowledge, memories (JSON-encoded strings)"),
    responses(
        (status = 202, body = EnvelopeDoc<IngestResultDto>, description = "accepted; per-item results"),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR"),
    ))]
async fn ingest(State(app): State<App>, Auth(who): Auth, form: Form) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
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
    let outcome = match kind {
        ItemKind::Knowledge => {
            let files = form.files_named(&["documents", "files"]);
            let file_metadata = deprecations.pick(
                form.json_array::<FileMetadataDto>("document_metadata")?,
                form.json_array::<FileMetadataDto>("file_metadata")?,
                "document_metadata",
                "file_metadata",
            )?;
            let request = KnowledgeRequest {
                collection: collection.clone(),
                upsert,
                files,
                file_metadata: file_metadata.map(|list| list.into_iter().map(Into::into).collect()),
                file_metadata_field: "document_metadata",
                app_knowledge: app_sources(&form)?,
            };
            app.ingest_knowledge(&who, &database, request).await?
        }
        ItemKind::Memory => {
            let memories = form.json_array::<MemoryDto>("memories")?.ok_or_else(|| {
                ApiError::invalid("missing required field `memories` for type=memory")
            })?;
            let request = MemoryRequest {
                collection,
                upsert,
                memories: memories.into_iter().map(Into::into).collect(),
            };
            app.ingest_memories(&who, &database, request).await?
        }
    };
    let mut envelope = Envelope::new(StatusCode::ACCEPTED, &ingest_result(&outcome))
        .scoped(&outcome.database, Some(outcome.collection.as_str()))
        .deprecations(deprecations);
    envelope.source_type(kind.as_str());
    Ok(envelope)
}

/// Indexing status of ingested items. Unknown ids are reported as `FILE_NOT_FOUND`; when none
/// is known the call is 404.
#[utoipa::path(get, path = "/context/status", tag = "context", params(StatusParams),
    responses(
        (status = 200, body = EnvelopeDoc<StatusListDto>),
        (status = 404, body = ErrorEnvelopeDoc, description = "FILE_NOT_FOUND or DATABASE_NOT_FOUND"),
    ))]
async fn status(
    State(app): State<App>,
    Auth(who): Auth,
    Query(params): Query<StatusParams>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let (database, collection) = deprecations.scope(
        params.database,
        params.tenant_id,
        params.collection,
        params.sub_tenant_id,
    )?;
    let ids = split_ids(&params.ids);
    let (db, statuses) = app
        .item_statuses(&who, &database, collection.as_deref(), &ids)
        .await?;
    let statuses = statuses
        .into_iter()
        .map(|(id, status)| match status {
            Some(s) => StatusDto {
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
            None => StatusDto {
                message: format!("no item with id `{id}`"),
                id,
                indexing_status: "not_found".into(),
                error_code: ErrorCode::FileNotFound.as_str().into(),
                error_message: "file not found".into(),
                success: false,
            },
        })
        .collect();
    let collection = collection.unwrap_or_else(|| db.name.to_string());
    Ok(Envelope::ok(&StatusListDto { statuses })
        .scoped(&db, Some(&collection))
        .deprecations(deprecations))
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

/// List knowledge sources or memories with pagination and filters.
#[utoipa::path(post, path = "/context/list", tag = "context", request_body = ListBody,
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
    let (database, collection) = body.scope.resolve(&mut deprecations)?;
    let kind = body.kind.map_or(ItemKind::Knowledge, ItemKind::from);
    let ids = deprecations
        .pick(body.ids, body.source_ids, "ids", "source_ids")?
        .unwrap_or_default();
    check_include_fields(&body.include_fields)?;
    let request = list_request(
        &mut deprecations,
        body.filters,
        kind,
        collection.clone(),
        ids,
        body.page,
        body.page_size,
    )?;
    let listing = app.list_items(&who, &database, request).await?;
    let db_name = listing.database.name.to_string();
    let include = (!body.include_fields.is_empty()).then_some(body.include_fields.as_slice());
    let data = ListDataDto {
        sources: (kind == ItemKind::Knowledge).then(|| {
            listing
                .page
                .items
                .iter()
                .map(|r| SourceDto::new(r, &db_name, include))
                .collect()
        }),
        user_memories: (kind == ItemKind::Memory).then(|| {
            listing
                .page
                .items
                .iter()
                .map(|r| UserMemoryDto {
                    memory_id: r.id.clone(),
                    memory_content: r.fields.text.clone().unwrap_or_default(),
                })
                .collect()
        }),
        total: listing.page.total,
        pagination: PaginationDto::from(&listing),
    };
    let mut envelope = Envelope::ok(&data)
        .scoped(&listing.database, collection.as_deref())
        .deprecations(deprecations);
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
}

/// Delete ingested items. `deleted: true` means gone from every index, listing and query.
#[utoipa::path(delete, path = "/context", tag = "context", request_body = DeleteBody,
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
    let (database, collection) = body.scope.resolve(&mut deprecations)?;
    let kind = body.kind.map(ItemKind::from);
    let (db, deleted) = app
        .delete_items(&who, &database, collection.as_deref(), kind, &body.ids)
        .await?;
    Ok(Envelope::ok(&DeleteResultDto::new(&deleted))
        .scoped(&db, collection.as_deref())
        .deprecations(deprecations))
}
