//! Legacy content routes: `/ingestion/*`, `/memories/*`, `/list/data`, `/knowledge/*`. Plain
//! objects; `{detail:{…}}` errors; `tenant_id`/`sub_tenant_id` names.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use engram_app::{App, KnowledgeRequest, MemoryRequest};
use engram_types::{ErrorCode, FailureCode, IndexingStatus, ItemErrorCode, ItemKind};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{content, recode, tenant, warned};
use crate::envelope::LegacyErrorDoc;
use crate::error::ApiError;
use crate::extract::{Auth, Json, Query};
use crate::form::Form;
use crate::wire::items::*;
use crate::wire::{Deprecations, Ignored};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(upload_knowledge))
        .routes(routes!(add_memory))
        .routes(routes!(verify_processing))
        .routes(routes!(list_data))
        .routes(routes!(delete_knowledge))
        .routes(routes!(delete_memory))
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct LegacyUploadResult {
    pub source_id: String,
    pub filename: String,
    pub title: String,
    pub status: String,
    pub infer: bool,
    pub error: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct LegacyIngestResponse {
    pub success: bool,
    pub message: String,
    pub results: Vec<LegacyUploadResult>,
    pub success_count: usize,
    pub failed_count: usize,
}

fn legacy_ingest(outcome: &engram_app::IngestOutcome) -> LegacyIngestResponse {
    let current = ingest_result(outcome);
    LegacyIngestResponse {
        success: current.success,
        message: current.message,
        success_count: current.success_count,
        failed_count: current.failed_count,
        results: current
            .results
            .into_iter()
            .map(|r| LegacyUploadResult {
                source_id: r.id,
                filename: r.filename,
                title: r.title,
                status: r.status,
                infer: r.infer,
                error: r.error,
            })
            .collect(),
    }
}

/// Upload knowledge (legacy): multipart `tenant_id`, `sub_tenant_id`, `upsert`, `files`,
/// `file_metadata`, `app_knowledge`.
#[utoipa::path(post, path = "/ingestion/upload_knowledge", tag = "legacy content", security(("bearer" = ["write"])),
    request_body(content = crate::wire::items::UploadKnowledgeFormDoc, content_type = "multipart/form-data"),
    responses((status = 202, body = LegacyIngestResponse),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_FILE_FORMAT: every file of the upload is of an unsupported format (E1002), and nothing else was sent"),
        (status = 422, body = LegacyErrorDoc)))]
async fn upload_knowledge(
    State(app): State<App>,
    Auth(who): Auth,
    form: Result<Form, ApiError>,
) -> Result<Response, ApiError> {
    let form = form.map_err(recode)?;
    let mut deprecations = Deprecations::default();
    let mut ignored = Ignored::default();
    for name in form.names() {
        if !crate::wire::items::UPLOAD_FIELDS.contains(&name) {
            ignored.note(name, "not a field of this route");
        }
    }
    crate::wire::items::note_text_files(&form, &["files", "documents"], &mut ignored);
    let database = tenant(form.text("tenant_id")?)?;
    let files = form.files_named(&["files", "documents"]);
    let file_metadata = form
        .json_array::<FileMetadataDto>("file_metadata")?
        .map(|list| {
            list.into_iter()
                .map(|m| m.resolve(&mut deprecations))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    let request = KnowledgeRequest {
        collection: form.text("sub_tenant_id")?,
        upsert: form.flag("upsert", true)?,
        files,
        file_metadata,
        file_metadata_field: "file_metadata",
        app_knowledge: app_sources(&form, &mut deprecations)?,
        graph_payload: form.text("graph_payload")?,
    };
    let outcome = app
        .ingest_knowledge(&who, &database, request)
        .await
        .map_err(content)?;
    unsupported_only(&outcome)?;
    let response = (StatusCode::ACCEPTED, axum::Json(legacy_ingest(&outcome))).into_response();
    Ok(super::warned(
        super::deprecated(response, &deprecations),
        &ignored,
    ))
}

/// A legacy upload whose every item was refused for its format (`E1002`, nothing stored) is
/// 400 `INVALID_FILE_FORMAT` naming the files. With anything accepted beside them, the refused
/// files keep their `E1002` in their own results, as the spec says of every upload.
fn unsupported_only(outcome: &engram_app::IngestOutcome) -> Result<(), ApiError> {
    let unsupported = ItemErrorCode::UnsupportedFormat.as_str();
    if outcome.results.is_empty()
        || outcome
            .results
            .iter()
            .any(|r| r.status.is_some() || r.error_code != unsupported)
    {
        return Ok(());
    }
    let files: Vec<&str> = outcome
        .results
        .iter()
        .map(|r| r.filename.as_str())
        .collect();
    Err(ApiError::new(
        ErrorCode::InvalidFileFormat,
        format!(
            "unsupported file format ({unsupported}): {}",
            files.join(", ")
        ),
    ))
}

#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct AddMemoryBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    /// Memories; one that does not read as a memory is 422 `INVALID_MEMORY_FORMAT`.
    #[serde(default)]
    #[schema(value_type = Vec<MemoryDto>)]
    pub memories: Value,
    pub upsert: Option<bool>,
    /// Fields this route does not know: named in a `Warning`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// The legacy body's `memories`, each read as a memory: anything else (not an array, a
/// memory that is not an object of the memory's fields and types) is 422
/// `INVALID_MEMORY_FORMAT` naming the memory. Absent: none. A memory that reads but says
/// nothing (no text, no pairs) is the app's to refuse, with `VALIDATION_ERROR`.
fn legacy_memories(memories: Value) -> Result<Vec<MemoryDto>, ApiError> {
    let bad = |message: String| ApiError::new(ErrorCode::InvalidMemoryFormat, message);
    let memories = match memories {
        Value::Null => return Ok(Vec::new()),
        Value::Array(memories) => memories,
        _ => return Err(bad("`memories` must be an array of memories".into())),
    };
    memories
        .into_iter()
        .enumerate()
        .map(|(at, memory)| {
            serde_json::from_value(memory).map_err(|e| bad(format!("memories[{at}]: {e}")))
        })
        .collect()
}

/// Add memories (legacy, JSON).
#[utoipa::path(post, path = "/memories/add_memory", tag = "legacy content", security(("bearer" = ["write"])), request_body = AddMemoryBody,
    responses((status = 202, body = LegacyIngestResponse),
        (status = 422, body = LegacyErrorDoc, description = "INVALID_MEMORY_FORMAT: a memory that does not read as one; VALIDATION_ERROR: a memory without text or pairs")))]
async fn add_memory(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<AddMemoryBody>,
) -> Result<Response, ApiError> {
    let database = tenant(body.tenant_id)?;
    let mut deprecations = Deprecations::default();
    let mut ignored = Ignored::of_unknown(&body.unknown);
    let request = MemoryRequest {
        collection: body.sub_tenant_id,
        upsert: body.upsert.unwrap_or(true),
        memories: legacy_memories(body.memories)?
            .into_iter()
            .map(|m| m.resolve(&mut deprecations, &mut ignored))
            .collect::<Result<_, _>>()?,
    };
    crate::wire::items::note_inert_memories(&app, &request.memories, &mut ignored);
    let outcome = app
        .ingest_memories(&who, &database, request)
        .await
        .map_err(content)?;
    let response = (StatusCode::ACCEPTED, axum::Json(legacy_ingest(&outcome))).into_response();
    Ok(super::warned(
        super::deprecated(response, &deprecations),
        &ignored,
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct VerifyParams {
    /// Comma-separated or repeated item ids.
    #[serde(default)]
    pub file_ids: Vec<String>,
    /// One item id (added to `file_ids`).
    pub file_id: Option<String>,
    #[serde(default, deserialize_with = "crate::wire::present")]
    pub tenant_id: Option<String>,
    #[serde(default, deserialize_with = "crate::wire::present")]
    pub sub_tenant_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct LegacyStatus {
    pub file_id: String,
    pub indexing_status: String,
    pub error_code: Option<String>,
    pub success: bool,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct LegacyStatuses {
    pub statuses: Vec<LegacyStatus>,
}

/// Poll indexing status (legacy). An errored item reports `PROCESSING_FAILED`.
#[utoipa::path(post, path = "/ingestion/verify_processing", tag = "legacy content", security(("bearer" = ["read"])), params(VerifyParams),
    responses((status = 200, body = LegacyStatuses), (status = 404, body = LegacyErrorDoc, description = "FILE_NOT_FOUND")))]
async fn verify_processing(
    State(app): State<App>,
    Auth(who): Auth,
    Query(params): Query<VerifyParams>,
) -> Result<axum::Json<LegacyStatuses>, ApiError> {
    let database = tenant(params.tenant_id)?;
    let mut ids = split_ids(&params.file_ids);
    ids.extend(params.file_id.filter(|id| !id.is_empty()));
    let (_, statuses) = app
        .item_statuses(&who, &database, params.sub_tenant_id.as_deref(), &ids)
        .await
        .map_err(content)?;
    let statuses = statuses.into_iter().map(LegacyStatus::from).collect();
    Ok(axum::Json(LegacyStatuses { statuses }))
}

#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct ListDataBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    /// `knowledge` (default) or `memories`.
    pub kind: Option<String>,
    pub page: Option<i64>,
    pub page_size: Option<i64>,
    #[serde(default)]
    pub source_ids: Vec<String>,
    #[serde(default)]
    pub filters: ListFiltersDto,
    #[serde(default)]
    pub include_fields: Vec<String>,
    /// Fields this route does not know: named in a `Warning`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ListDataResponse {
    pub success: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<SourceDto>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_memories: Option<Vec<UserMemoryDto>>,
    pub total: u64,
    pub pagination: PaginationDto,
}

/// List knowledge or memories (legacy). Machine-readable version `0.0.1`.
#[utoipa::path(post, path = "/list/data", tag = "legacy content", security(("bearer" = ["read"])), request_body = ListDataBody,
    responses((status = 200, body = ListDataResponse), (status = 400, body = LegacyErrorDoc, description = "INVALID_PARAMETERS"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND")))]
async fn list_data(
    State(app): State<App>,
    Auth(who): Auth,
    Json(mut body): Json<ListDataBody>,
) -> Result<Response, ApiError> {
    let database = tenant(body.tenant_id.clone())?;
    let mut ignored = Ignored::of_unknown(&body.unknown);
    body.filters.note_unknown(&mut ignored);
    let (kind, request) = body.request()?;
    ignored.note_if(
        kind == ItemKind::Memory && !body.include_fields.is_empty(),
        "include_fields",
        crate::wire::items::INCLUDE_FIELDS_FOR_MEMORIES,
    );
    let listing = app
        .list_items(&who, &database, request)
        .await
        .map_err(content)?;
    let include = (!body.include_fields.is_empty()).then_some(body.include_fields.as_slice());
    let response = axum::Json(ListDataResponse::new(&listing, kind, include)).into_response();
    Ok(warned(response, &ignored))
}

#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct DeleteKnowledgeBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    #[serde(default)]
    pub ids: Vec<String>,
    /// Fields this route does not know: named in a `Warning`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// Delete knowledge by ids (legacy); 200 with per-item results.
#[utoipa::path(post, path = "/knowledge/delete_knowledge", tag = "legacy content", security(("bearer" = ["write"])), request_body = DeleteKnowledgeBody,
    responses((status = 200, body = DeleteResultDto), (status = 404, body = LegacyErrorDoc)))]
async fn delete_knowledge(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<DeleteKnowledgeBody>,
) -> Result<Response, ApiError> {
    let database = tenant(body.tenant_id)?;
    let ignored = Ignored::of_unknown(&body.unknown);
    let (_, deleted) = app
        .delete_items(
            &who,
            &database,
            body.sub_tenant_id.as_deref(),
            Some(ItemKind::Knowledge),
            &body.ids,
        )
        .await
        .map_err(content)?;
    Ok(super::warned(
        axum::Json(DeleteResultDto::new(&deleted)).into_response(),
        &ignored,
    ))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DeleteMemoryParams {
    #[serde(default, deserialize_with = "crate::wire::present")]
    pub tenant_id: Option<String>,
    #[serde(default, deserialize_with = "crate::wire::present")]
    pub memory_id: Option<String>,
    #[serde(default, deserialize_with = "crate::wire::present")]
    pub sub_tenant_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DeleteMemoryResponse {
    pub success: bool,
    pub user_memory_deleted: bool,
}

/// Delete one memory (legacy). An unknown memory id is 404 `MEMORY_NOT_FOUND`.
#[utoipa::path(delete, path = "/memories/delete_memory", tag = "legacy content", security(("bearer" = ["write"])), params(DeleteMemoryParams),
    responses((status = 200, body = DeleteMemoryResponse), (status = 404, body = LegacyErrorDoc, description = "MEMORY_NOT_FOUND")))]
async fn delete_memory(
    State(app): State<App>,
    Auth(who): Auth,
    Query(params): Query<DeleteMemoryParams>,
) -> Result<axum::Json<DeleteMemoryResponse>, ApiError> {
    let database = tenant(params.tenant_id.clone())?;
    let memory_id = params.memory_id()?;
    let (_, deleted) = app
        .delete_items(
            &who,
            &database,
            params.sub_tenant_id.as_deref(),
            Some(ItemKind::Memory),
            std::slice::from_ref(&memory_id),
        )
        .await
        .map_err(content)?;
    if !deleted.first().is_some_and(|d| d.deleted) {
        return Err(ApiError::new(
            ErrorCode::MemoryNotFound,
            format!("memory `{memory_id}` not found"),
        ));
    }
    Ok(axum::Json(DeleteMemoryResponse {
        success: true,
        user_memory_deleted: true,
    }))
}

impl From<(String, Option<engram_app::ItemStatus>)> for LegacyStatus {
    /// The legacy status of one asked id: an errored item reports `PROCESSING_FAILED`.
    fn from((id, status): (String, Option<engram_app::ItemStatus>)) -> Self {
        let Some(s) = status else {
            return Self {
                message: format!("no file with id `{id}`"),
                file_id: id,
                indexing_status: "not_found".into(),
                error_code: Some(ErrorCode::FileNotFound.as_str().into()),
                success: false,
            };
        };
        let errored = s.status == IndexingStatus::Errored;
        Self {
            file_id: id,
            indexing_status: s.status.as_str().to_owned(),
            error_code: errored.then(|| FailureCode::ProcessingFailed.to_string()),
            success: !errored,
            message: if errored {
                format!("{}: {}", s.error_code, s.error_message)
            } else {
                s.status.as_str().to_owned()
            },
        }
    }
}

impl ListDataBody {
    /// The kind listed (`knowledge`, or `memories`/`memory`) and the app's request; the
    /// body's filters, ids and paging as the legacy contract names them.
    fn request(&mut self) -> Result<(ItemKind, engram_app::ListRequest), ApiError> {
        let kind = match self.kind.as_deref() {
            None | Some("" | "knowledge") => ItemKind::Knowledge,
            Some("memories" | "memory") => ItemKind::Memory,
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "`kind` must be `knowledge` or `memories`, not `{other}`"
                )))
            }
        };
        if kind == ItemKind::Knowledge {
            check_include_fields(&self.include_fields)?;
        }
        let request = list_request(
            &mut Deprecations::default(),
            std::mem::take(&mut self.filters),
            kind,
            self.sub_tenant_id.take(),
            std::mem::take(&mut self.source_ids),
            self.page,
            self.page_size,
        )?;
        Ok((kind, request))
    }
}

impl ListDataResponse {
    fn new(listing: &engram_app::Listing, kind: ItemKind, include: Option<&[String]>) -> Self {
        let (sources, user_memories) = listed_items(listing, kind, include);
        Self {
            success: true,
            message: (kind == ItemKind::Knowledge)
                .then(|| format!("{} sources", listing.page.total)),
            sources,
            user_memories,
            total: listing.page.total,
            pagination: PaginationDto::from(listing),
        }
    }
}

impl DeleteMemoryParams {
    /// The required, non-empty `memory_id`.
    fn memory_id(&self) -> Result<String, ApiError> {
        self.memory_id
            .clone()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| ApiError::invalid("missing required parameter `memory_id`"))
    }
}
