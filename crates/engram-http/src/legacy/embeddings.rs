//! Legacy raw-embedding routes, `/embeddings/*`: vectors a client computed itself, in a
//! database created with `is_embeddings_tenant: true` and their declared dimension.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use engram_app::{App, RawDocument, RawFilter, RawVector};
use engram_types::ErrorCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{content, tenant};
use crate::envelope::LegacyErrorDoc;
use crate::error::ApiError;
use crate::extract::{Auth, Json, Query};
use crate::wire::items::split_ids;
use crate::wire::Ignored;

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(insert))
        .routes(routes!(search))
        .routes(routes!(filter))
        .routes(routes!(delete))
}

#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct VectorDto {
    pub chunk_id: String,
    /// A non-empty array of finite numbers (anything else: 422 `INVALID_EMBEDDING_FORMAT`).
    #[schema(value_type = Vec<f32>)]
    pub embedding: Value,
}

/// `value` as a vector: a non-empty array of numbers, each finite as an `f32`. Anything else is
/// 422 `INVALID_EMBEDDING_FORMAT` naming `field` (a well-formed vector of the wrong dimension is
/// the database's to refuse, with `VALIDATION_ERROR`).
fn vector(value: Value, field: &str) -> Result<Vec<f32>, ApiError> {
    let bad = |why: &str| {
        ApiError::new(
            ErrorCode::InvalidEmbeddingFormat,
            format!("`{field}` must be a non-empty array of finite numbers: {why}"),
        )
    };
    let Value::Array(values) = value else {
        return Err(bad("it is not an array"));
    };
    if values.is_empty() {
        return Err(bad("it is empty"));
    }
    values
        .iter()
        .enumerate()
        .map(|(at, v)| {
            v.as_f64()
                .map(|x| x as f32)
                .filter(|x| x.is_finite())
                .ok_or_else(|| bad(&format!("element {at} is {v}")))
        })
        .collect()
}

#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct RawDocumentDto {
    pub source_id: String,
    #[serde(default)]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default)]
    pub embeddings: Vec<VectorDto>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct InsertBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    #[serde(default)]
    pub embeddings: Vec<RawDocumentDto>,
    /// Replace chunk ids that exist (default false: keep them).
    #[serde(default)]
    pub upsert: bool,
    /// Fields this route does not know: named in a `Warning`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct InsertResult {
    pub insert_count: usize,
    pub ids: Vec<String>,
    pub success: bool,
    pub error: Option<String>,
}

/// Store vectors of the database's declared dimension (at most 10,000 per request).
#[utoipa::path(post, path = "/embeddings/insert_raw_embeddings", tag = "legacy embeddings", security(("bearer" = ["write"])),
    request_body = InsertBody,
    responses(
        (status = 200, body = InsertResult),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_PARAMETERS: not an embeddings database, too many vectors"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND"),
        (status = 422, body = LegacyErrorDoc, description = "VALIDATION_ERROR: a vector of the wrong dimension, a bad id; INVALID_EMBEDDING_FORMAT: a vector that is not a non-empty array of finite numbers"),
    ))]
async fn insert(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<InsertBody>,
) -> Result<Response, ApiError> {
    let database = tenant(body.tenant_id)?;
    let ignored = Ignored::of_unknown(&body.unknown);
    let documents = body
        .embeddings
        .into_iter()
        .map(|d| {
            Ok(RawDocument {
                source_id: d.source_id,
                metadata: d.metadata.unwrap_or_default(),
                embeddings: d
                    .embeddings
                    .into_iter()
                    .map(|v| Ok((v.chunk_id, vector(v.embedding, "embedding")?)))
                    .collect::<Result<_, ApiError>>()?,
            })
        })
        .collect::<Result<_, ApiError>>()?;
    let (_, _, ids) = app
        .insert_raw(
            &who,
            &database,
            body.sub_tenant_id.as_deref(),
            documents,
            body.upsert,
        )
        .await
        .map_err(content)?;
    let response = axum::Json(InsertResult {
        insert_count: ids.len(),
        ids,
        success: true,
        error: None,
    });
    Ok(super::warned(response.into_response(), &ignored))
}

/// Which fields each result carries: `chunk_id`, `source_id` and `metadata` by default,
/// `embedding` (the vector) on request.
#[derive(Debug, Clone, Copy)]
struct Output {
    metadata: bool,
    vector: bool,
}

impl Output {
    fn parse(fields: Option<Vec<String>>) -> Result<Self, ApiError> {
        let Some(fields) = fields else {
            return Ok(Self {
                metadata: true,
                vector: false,
            });
        };
        for field in &fields {
            if !["chunk_id", "source_id", "metadata", "embedding"].contains(&field.as_str()) {
                return Err(ApiError::invalid(format!(
                    "unknown output field `{field}`; known: chunk_id, source_id, metadata, embedding"
                )));
            }
        }
        let has = |name: &str| fields.iter().any(|f| f == name);
        Ok(Self {
            metadata: has("metadata"),
            vector: has("embedding"),
        })
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct VectorOut {
    pub chunk_id: String,
    /// The vector, when `output_fields` asks for `embedding`; else empty.
    pub embedding: Vec<f32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RawResult {
    pub source_id: String,
    pub embedding: VectorOut,
    /// Cosine similarity to the query (search only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f32>,
    /// `1 - score` (search only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distance: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
}

fn result(vector: RawVector, score: Option<f32>, output: Output) -> RawResult {
    RawResult {
        source_id: vector.source_id,
        embedding: VectorOut {
            chunk_id: vector.chunk_id,
            embedding: if output.vector {
                vector.embedding
            } else {
                Vec::new()
            },
        },
        score,
        distance: score.map(|s| 1.0 - s),
        metadata: output.metadata.then_some(vector.metadata),
    }
}

#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct SearchBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    /// A non-empty array of finite numbers (anything else: 422 `INVALID_EMBEDDING_FORMAT`).
    #[schema(value_type = Vec<f32>)]
    pub query_embedding: Option<Value>,
    /// 1-1000, default 10.
    pub limit: Option<i64>,
    /// `source_id == "x"`, `chunk_id in ["a", "b"]`, clauses joined by `and`.
    pub filter_expr: Option<String>,
    pub output_fields: Option<Vec<String>>,
    /// Fields this route does not know: named in a `Warning`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// The stored vectors most similar to `query_embedding` (cosine, exact), best first.
#[utoipa::path(post, path = "/embeddings/search_raw_embeddings", tag = "legacy embeddings", security(("bearer" = ["read"])),
    request_body = SearchBody,
    responses(
        (status = 200, body = Vec<RawResult>),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_PARAMETERS: not an embeddings database, limit, filter_expr outside the supported subset"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND"),
        (status = 422, body = LegacyErrorDoc, description = "VALIDATION_ERROR: a query of the wrong dimension; INVALID_EMBEDDING_FORMAT: a query that is not a non-empty array of finite numbers"),
    ))]
async fn search(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<SearchBody>,
) -> Result<Response, ApiError> {
    let database = tenant(body.tenant_id)?;
    let ignored = Ignored::of_unknown(&body.unknown);
    let query = body
        .query_embedding
        .ok_or_else(|| ApiError::invalid("missing required field `query_embedding`"))?;
    let query = vector(query, "query_embedding")?;
    let output = Output::parse(body.output_fields)?;
    let filter = match body.filter_expr.as_deref().map(str::trim) {
        None | Some("") => RawFilter::default(),
        Some(expr) => RawFilter::parse(expr).map_err(content)?,
    };
    let hits = app
        .search_raw(
            &who,
            &database,
            body.sub_tenant_id.as_deref(),
            &query,
            body.limit,
            &filter,
        )
        .await
        .map_err(content)?;
    let response = axum::Json(
        hits.into_iter()
            .map(|hit| result(hit.vector, Some(hit.score), output))
            .collect::<Vec<_>>(),
    );
    Ok(super::warned(response.into_response(), &ignored))
}

#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct FilterBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    pub source_id: Option<String>,
    #[serde(default)]
    pub chunk_ids: Vec<String>,
    pub output_fields: Option<Vec<String>>,
    /// 1-1000, default 1000.
    pub limit: Option<i64>,
    /// Fields this route does not know: named in a `Warning`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// Stored vectors of one source and/or these chunk ids.
#[utoipa::path(post, path = "/embeddings/filter_raw_embeddings", tag = "legacy embeddings", security(("bearer" = ["read"])),
    request_body = FilterBody,
    responses(
        (status = 200, body = Vec<RawResult>),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_PARAMETERS: neither source_id nor chunk_ids, not an embeddings database"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND"),
    ))]
async fn filter(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<FilterBody>,
) -> Result<Response, ApiError> {
    let database = tenant(body.tenant_id)?;
    let ignored = Ignored::of_unknown(&body.unknown);
    let output = Output::parse(body.output_fields)?;
    let vectors = app
        .filter_raw(
            &who,
            &database,
            body.sub_tenant_id.as_deref(),
            body.source_id.as_deref(),
            &body.chunk_ids,
            body.limit,
        )
        .await
        .map_err(content)?;
    let response = axum::Json(
        vectors
            .into_iter()
            .map(|v| result(v, None, output))
            .collect::<Vec<_>>(),
    );
    Ok(super::warned(response.into_response(), &ignored))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DeleteParams {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    pub source_id: Option<String>,
    /// Repeated (`chunk_ids=a&chunk_ids=b`) or comma-separated.
    #[serde(default)]
    pub chunk_ids: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DeleteResult {
    pub delete_count: u64,
    pub success: bool,
    pub error: Option<String>,
}

/// Delete the vectors of one source and/or these chunk ids.
#[utoipa::path(delete, path = "/embeddings/delete_raw_embeddings", tag = "legacy embeddings", security(("bearer" = ["write"])),
    params(DeleteParams),
    responses(
        (status = 200, body = DeleteResult),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_PARAMETERS: neither source_id nor chunk_ids, not an embeddings database"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND"),
    ))]
async fn delete(
    State(app): State<App>,
    Auth(who): Auth,
    Query(params): Query<DeleteParams>,
) -> Result<axum::Json<DeleteResult>, ApiError> {
    let database = tenant(params.tenant_id)?;
    let deleted = app
        .delete_raw(
            &who,
            &database,
            params.sub_tenant_id.as_deref(),
            params.source_id.as_deref(),
            &split_ids(&params.chunk_ids),
        )
        .await
        .map_err(content)?;
    Ok(axum::Json(DeleteResult {
        delete_count: deleted,
        success: true,
        error: None,
    }))
}
