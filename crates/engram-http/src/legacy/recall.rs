//! Legacy retrieval routes: `/recall/*`.

use axum::extract::State;
use engram_app::{App, Method, QueryKind, QueryRequest, RequestedMode, TermOperator};
use serde_json::{Map, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::wire::*;
use super::{content, search, tenant, warned};
use crate::envelope::LegacyErrorDoc;
use crate::error::ApiError;
use crate::extract::{Auth, Json};
use crate::wire::query::{alpha, required_query};
use crate::wire::Ignored;
use axum::response::{IntoResponse, Response};

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
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(search)?;
    let database = tenant(body.tenant_id.clone()).map_err(search)?;
    let ignored = Ignored::of_unknown(&body.unknown);
    let request = body.into_request(kind).map_err(search)?;
    answered(app, who, &database, request, ignored, true).await
}

/// The recall answer to `request`, with a `Warning` naming what was sent and not acted on
/// (unknown fields, parameters the plan that ran does not read).
async fn answered(
    app: &App,
    who: &engram_app::Principal,
    database: &engram_types::DatabaseName,
    request: QueryRequest,
    mut ignored: Ignored,
    graph_context: bool,
) -> Result<Response, ApiError> {
    let outcome = app
        .query(who, database, request)
        .await
        .map_err(content)
        .map_err(search)?;
    for (parameter, reason) in &outcome.inert {
        // The legacy body's own names.
        let parameter = match *parameter {
            "query_forceful_relations" => "search_forceful_relations",
            "type" => "search_mode",
            other => other,
        };
        ignored.note(parameter, *reason);
    }
    let response = axum::Json(RecallResponse::new(outcome, graph_context)).into_response();
    Ok(warned(response, &ignored))
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
) -> Result<Response, ApiError> {
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
) -> Result<Response, ApiError> {
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
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(search)?;
    let database = tenant(body.tenant_id.clone()).map_err(search)?;
    let ignored = Ignored::of_unknown(&body.unknown);
    let request = body.into_request().map_err(search)?;
    answered(&app, &who, &database, request, ignored, false).await
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
