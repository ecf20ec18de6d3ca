//! Legacy retrieval routes: `/recall/*`.

use axum::extract::State;
use engram_app::{App, Method, QueryKind, QueryRequest, RequestedMode, TermOperator};
use serde_json::{Map, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::wire::*;
use super::{content, search, tenant};
use crate::envelope::LegacyErrorDoc;
use crate::error::ApiError;
use crate::extract::{Auth, Json};
use crate::wire::query::{alpha, required_query};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(full_recall))
        .routes(routes!(recall_preferences))
        .routes(routes!(boolean_recall))
}

/// The legacy recall routes share one request; `kind` is what the route reads.
async fn recall(
    app: &App,
    who: &engram_app::Principal,
    body: Result<Json<RecallBody>, ApiError>,
    kind: QueryKind,
) -> Result<axum::Json<RecallResponse>, ApiError> {
    let Json(body) = body.map_err(search)?;
    let database = tenant(body.tenant_id.clone()).map_err(search)?;
    let request = body.into_request(kind).map_err(search)?;
    let outcome = app
        .query(who, &database, request)
        .await
        .map_err(content)
        .map_err(search)?;
    Ok(axum::Json(RecallResponse::new(outcome, true)))
}

/// Query knowledge (legacy).
#[utoipa::path(post, path = "/recall/full_recall", tag = "legacy recall", security(("bearer" = ["read"])), request_body = RecallBody,
    responses(
        (status = 200, body = RecallResponse),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_SEARCH_PARAMETERS, or INVALID_TENANT_ID"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND"),
        (status = 429, body = LegacyErrorDoc, description = "RATE_LIMITED"),
    ))]
async fn full_recall(
    State(app): State<App>,
    Auth(who): Auth,
    body: Result<Json<RecallBody>, ApiError>,
) -> Result<axum::Json<RecallResponse>, ApiError> {
    recall(&app, &who, body, QueryKind::Knowledge).await
}

/// Query memories (legacy).
#[utoipa::path(post, path = "/recall/recall_preferences", tag = "legacy recall", security(("bearer" = ["read"])), request_body = RecallBody,
    responses(
        (status = 200, body = RecallResponse),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_SEARCH_PARAMETERS, or INVALID_TENANT_ID"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND"),
        (status = 429, body = LegacyErrorDoc, description = "RATE_LIMITED"),
    ))]
async fn recall_preferences(
    State(app): State<App>,
    Auth(who): Auth,
    body: Result<Json<RecallBody>, ApiError>,
) -> Result<axum::Json<RecallResponse>, ApiError> {
    recall(&app, &who, body, QueryKind::Memory).await
}

/// Boolean recall (legacy): deterministic BM25 over sources or memories, with `or`, `and` or
/// `phrase`.
#[utoipa::path(post, path = "/recall/boolean_recall", tag = "legacy recall", security(("bearer" = ["read"])), request_body = BooleanRecallBody,
    responses(
        (status = 200, body = RecallResponse),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_SEARCH_PARAMETERS, or INVALID_TENANT_ID"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND"),
        (status = 429, body = LegacyErrorDoc, description = "RATE_LIMITED"),
    ))]
async fn boolean_recall(
    State(app): State<App>,
    Auth(who): Auth,
    body: Result<Json<BooleanRecallBody>, ApiError>,
) -> Result<axum::Json<RecallResponse>, ApiError> {
    let Json(body) = body.map_err(search)?;
    let database = tenant(body.tenant_id.clone()).map_err(search)?;
    let request = body.into_request().map_err(search)?;
    let outcome = app
        .query(&who, &database, request)
        .await
        .map_err(content)
        .map_err(search)?;
    Ok(axum::Json(RecallResponse::new(outcome, false)))
}

impl RecallBody {
    /// The app's hybrid query over `kind` (full recall: knowledge; preferences: memories).
    fn into_request(self, kind: QueryKind) -> Result<QueryRequest, ApiError> {
        Ok(QueryRequest {
            collection: self.sub_tenant_id,
            collections: None,
            query: required_query(self.query)?,
            kind,
            method: Some(Method::Hybrid),
            operator: TermOperator::Or,
            mode: self.mode.map_or(RequestedMode::Fast, RequestedMode::from),
            max_results: self.max_results,
            alpha: alpha(self.alpha)?,
            recency_bias: self.recency_bias,
            metadata_filters: self.metadata_filters.unwrap_or_default(),
            graph_context: Some(self.graph_context.unwrap_or(false)),
            query_apps: false,
            context: self.additional_context,
            forceful_relations: self.search_forceful_relations,
            ..QueryRequest::default()
        })
    }
}

impl BooleanRecallBody {
    /// The app's deterministic BM25 query (`query_by=text`) with the body's operator.
    fn into_request(self) -> Result<QueryRequest, ApiError> {
        Ok(QueryRequest {
            collection: self.sub_tenant_id,
            query: required_query(self.query)?,
            kind: self
                .search_mode
                .map_or(QueryKind::Knowledge, QueryKind::from),
            method: Some(Method::Text),
            operator: self.operator.unwrap_or_default().into(),
            mode: RequestedMode::Fast,
            max_results: self.max_results,
            metadata_filters: Map::<String, Value>::new(),
            graph_context: Some(false),
            ..QueryRequest::default()
        })
    }
}
