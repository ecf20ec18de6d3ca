//! One source after ingestion: `GET /context/inspect` (its text, bytes and a signed download
//! link), `GET /context/download` (what such a link opens, no key needed) and
//! `PATCH /context/{id}/metadata` (merge new metadata in place).

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use engram_app::{App, MetadataEditRequest};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::{Envelope, EnvelopeDoc, ErrorEnvelopeDoc};
use crate::error::ApiError;
use crate::extract::{Auth, Json, NotedQuery, Query};
use crate::wire::items::{download_url, FetchMode, EXPIRY_WITHOUT_LINK};
use crate::wire::{Deprecations, Ignored, ScopeDto, ScopeParams};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(inspect))
        .routes(routes!(download))
        .routes(routes!(edit_metadata))
}

/// `GET /context/inspect`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct InspectParams {
    /// The source's id.
    #[serde(default)]
    pub id: String,
    /// Lifetime of `presigned_url` in seconds: 1 to 604800, default 3600.
    pub expiry_seconds: Option<i64>,
    /// `content` (the text), `url` (the download link) or `both` (default).
    pub mode: Option<String>,
    /// Principals to answer as, repeated (`acl=a&acl=b`) or comma-separated: a source none of
    /// them may read (its access rule names none of them and is not `__public__`) is 404.
    #[serde(default)]
    pub acl: Vec<String>,
    #[serde(flatten)]
    #[param(ignore)]
    pub scope: ScopeParams,
}

/// A source read back.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct InspectDto {
    pub id: String,
    /// The text engram indexed: as given (app content, memories) or extracted (files; empty
    /// until the file is indexed). Absent with `mode=url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// The uploaded bytes, base64-encoded, for files that are not plain text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_base64: Option<String>,
    /// MIME type of the source.
    pub content_type: String,
    /// What inference made of a memory (`infer: true`); empty when none was made.
    pub inferred_content: String,
    /// Downloads the source as uploaded, without an API key, until it expires. Absent with
    /// `mode=content`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presigned_url: Option<String>,
    /// When `presigned_url` stops working (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presigned_url_expires_at: Option<String>,
    pub size_bytes: u64,
    pub success: bool,
    pub message: String,
    /// Empty on success.
    pub error: String,
}

/// A source's text, its uploaded bytes and a signed link that downloads it until
/// `expiry_seconds` have passed.
#[utoipa::path(get, path = "/context/inspect", tag = "context", security(("bearer" = ["read"])), params(InspectParams, ScopeParams),
    responses(
        (status = 200, body = EnvelopeDoc<InspectDto>),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: id missing, expiry_seconds out of range, unknown mode"),
        (status = 404, body = ErrorEnvelopeDoc, description = "SOURCE_NOT_FOUND or DATABASE_NOT_FOUND"),
    ))]
async fn inspect(
    State(app): State<App>,
    Auth(who): Auth,
    headers: HeaderMap,
    NotedQuery(params, mut ignored): NotedQuery<InspectParams>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let (database, collection) = deprecations.scope_params(params.scope)?;
    let mode = FetchMode::parse(params.mode.as_deref())?;
    ignored.note_if(
        params.expiry_seconds.is_some() && !mode.url(),
        "expiry_seconds",
        EXPIRY_WITHOUT_LINK,
    );
    let acl = crate::wire::items::split_ids(&params.acl);
    let view = app
        .inspect_source(
            &who,
            &database,
            collection.as_deref(),
            &params.id,
            params.expiry_seconds,
            &acl,
        )
        .await?;
    let content_type = view.content_type().to_owned();
    let content_base64 = view
        .payload
        .as_ref()
        .filter(|_| mode.content() && !content_type.starts_with("text/"))
        .map(|bytes| base64::engine::general_purpose::STANDARD.encode(bytes));
    let data = InspectDto {
        id: view.item.id.clone(),
        content: mode.content().then(|| view.content.clone()),
        content_base64,
        content_type,
        inferred_content: view.item.fields.inferred_content.clone(),
        presigned_url: mode.url().then(|| download_url(&headers, &view.link.token)),
        presigned_url_expires_at: mode
            .url()
            .then(|| engram_app::format_ms(view.link.expires_at)),
        size_bytes: view.size_bytes(),
        success: true,
        message: "source fetched".into(),
        error: String::new(),
    };
    let collection = view.item.collection.to_string();
    let mut envelope = Envelope::ok(&data)
        .scoped(&view.database, Some(&collection))
        .deprecations(deprecations)
        .ignored(&ignored);
    envelope.source_type(view.item.kind.as_str());
    Ok(envelope)
}

/// `GET /context/download`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DownloadParams {
    /// The signed token of a `presigned_url`.
    #[serde(default)]
    pub token: String,
}

/// What a `presigned_url` from `GET /context/inspect` opens: the source as uploaded (app
/// content and memories as text). No API key: the signed link is the permission, until it
/// expires.
#[utoipa::path(get, path = "/context/download", tag = "context", params(DownloadParams),
    security(()),
    responses(
        (status = 200, description = "the source's bytes, with its media type and file name"),
        (status = 403, body = ErrorEnvelopeDoc, description = "FORBIDDEN: the link is not valid or has expired"),
        (status = 404, body = ErrorEnvelopeDoc, description = "SOURCE_NOT_FOUND: the source was deleted"),
    ))]
async fn download(
    State(app): State<App>,
    Query(params): Query<DownloadParams>,
) -> Result<Response, ApiError> {
    let file = app.download(&params.token).await?;
    let disposition = format!(
        "attachment; filename=\"{}\"",
        file.filename
            .chars()
            .filter(|c| !c.is_control() && *c != '"' && *c != '\\')
            .collect::<String>()
    );
    let mut response = (StatusCode::OK, file.bytes).into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, file.media_type),
        (header::CONTENT_DISPOSITION, disposition),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    Ok(response)
}

/// `PATCH /context/{id}/metadata`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct MetadataEditBody {
    #[serde(flatten)]
    pub scope: ScopeDto,
    /// Schema field values to merge into the source's `metadata`; null removes a key.
    pub database_metadata: Option<Map<String, Value>>,
    /// Deprecated alias of `database_metadata`.
    pub tenant_metadata: Option<Map<String, Value>>,
    /// Free-form values to merge into `additional_metadata`; null removes a key.
    pub additional_metadata: Option<Map<String, Value>>,
    /// Not accepted here: send `additional_metadata`.
    pub document_metadata: Option<Value>,
    /// When present, replaces the source's access rule (the complete new list of principals;
    /// `[]`: readable by nobody; `["__public__"]`: by everyone); absent or null: unchanged.
    #[schema(value_type = Option<Vec<String>>)]
    pub acl: Option<Value>,
    /// Fields this route does not know: reported in `meta.ignored_parameters`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// What a metadata edit did.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct MetadataEditedDto {
    pub id: String,
    pub database: String,
    pub tenant_id: String,
    pub collection: String,
    pub sub_tenant_id: String,
    pub updated: bool,
    pub database_metadata_keys: Vec<String>,
    pub tenant_metadata_keys: Vec<String>,
    pub additional_metadata_keys: Vec<String>,
    /// The source's values after the edit.
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    /// Chunks of the source that now carry the new values (all of them, at once).
    pub chunk_rows_matched: u64,
    pub chunk_rows_modified: u64,
    /// Always false: filters read metadata from the store, so no index needs syncing.
    pub vector_sync_required: bool,
    pub acl_updated: bool,
}

/// Merge new metadata into one source in place, without reindexing: filters see it from the
/// next query on.
#[utoipa::path(patch, path = "/context/{id}/metadata", tag = "context", security(("bearer" = ["write"])),
    params(("id" = String, Path, description = "the source's id")),
    request_body = MetadataEditBody,
    responses(
        (status = 200, body = EnvelopeDoc<MetadataEditedDto>),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: nothing to merge, document_metadata sent, over the metadata limits"),
        (status = 404, body = ErrorEnvelopeDoc, description = "SOURCE_NOT_FOUND or DATABASE_NOT_FOUND"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: a value does not fit its schema field"),
    ))]
async fn edit_metadata(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
    Json(body): Json<MetadataEditBody>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let (database, collection) = body.scope.resolve(&mut deprecations)?;
    if body
        .document_metadata
        .as_ref()
        .is_some_and(|v| !v.is_null())
    {
        return Err(ApiError::invalid(
            "`document_metadata` is not accepted here; send `additional_metadata`",
        ));
    }
    let ignored = Ignored::of_unknown(&body.unknown);
    let acl = match body.acl {
        None | Some(Value::Null) => None,
        given @ Some(_) => Some(super::wire::principals(given)?),
    };
    let acl_updated = acl.is_some();
    let metadata = deprecations.pick(
        body.database_metadata,
        body.tenant_metadata,
        "database_metadata",
        "tenant_metadata",
    )?;
    let request = MetadataEditRequest {
        collection,
        metadata: metadata.unwrap_or_default(),
        additional_metadata: body.additional_metadata.unwrap_or_default(),
        acl,
    };
    let keys = |map: &Map<String, Value>| map.keys().cloned().collect::<Vec<_>>();
    let (database_keys, additional_keys) =
        (keys(&request.metadata), keys(&request.additional_metadata));
    let edited = app
        .edit_source_metadata(&who, &database, &id, request)
        .await?;
    let collection = edited.collection.to_string();
    let data = MetadataEditedDto {
        id: edited.id,
        database: edited.database.name.to_string(),
        tenant_id: edited.database.name.to_string(),
        collection: collection.clone(),
        sub_tenant_id: collection.clone(),
        updated: true,
        tenant_metadata_keys: database_keys.clone(),
        database_metadata_keys: database_keys,
        additional_metadata_keys: additional_keys,
        metadata: edited.metadata,
        additional_metadata: edited.additional_metadata,
        chunk_rows_matched: edited.chunks,
        chunk_rows_modified: edited.chunks,
        vector_sync_required: false,
        acl_updated,
    };
    Ok(Envelope::ok(&data)
        .scoped(&edited.database, Some(&collection))
        .deprecations(deprecations)
        .ignored(&ignored))
}
