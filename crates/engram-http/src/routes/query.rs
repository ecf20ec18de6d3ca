//! Retrieval routes: current `POST /query` and legacy `/recall/*`.

use axum::extract::State;
use engram_app::{
    Alpha, App, Collections, Method, QueryKind, QueryOutcome, QueryRequest, RequestedMode,
    TermOperator,
};
use serde_json::{json, Map, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::envelope::{EnvelopeDoc, ErrorEnvelopeDoc, LegacyErrorDoc};
use super::legacy_content::{legacy, tenant};
use super::Envelope;
use crate::dto::query::*;
use crate::dto::Deprecations;
use crate::error::ApiError;
use crate::extract::{Auth, Json};

pub fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(query))
        .routes(routes!(full_recall))
        .routes(routes!(recall_preferences))
        .routes(routes!(boolean_recall))
}

/// Reads an enumerated string field; absent or empty gives `None`.
fn choice<T: Copy>(
    field: &str,
    value: Option<&str>,
    options: &[(&str, T)],
) -> Result<Option<T>, ApiError> {
    let Some(value) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    options
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(value))
        .map(|(_, v)| Some(*v))
        .ok_or_else(|| {
            let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
            ApiError::invalid(format!(
                "`{field}` must be one of {}, not `{value}`",
                names.join(", ")
            ))
        })
}

fn operator(value: Option<&str>) -> Result<TermOperator, ApiError> {
    Ok(choice(
        "operator",
        value,
        &[
            ("or", TermOperator::Or),
            ("and", TermOperator::And),
            ("phrase", TermOperator::Phrase),
        ],
    )?
    .unwrap_or_default())
}

fn alpha(value: Option<AlphaDto>) -> Result<Option<Alpha>, ApiError> {
    match value {
        None => Ok(None),
        Some(AlphaDto::Number(a)) => Ok(Some(Alpha::Value(a))),
        Some(AlphaDto::Text(t)) if t.eq_ignore_ascii_case("auto") => Ok(Some(Alpha::Auto)),
        Some(AlphaDto::Text(t)) => Err(ApiError::invalid(format!(
            "`alpha` must be a number from 0 to 1 or \"auto\", not `{t}`"
        ))),
    }
}

fn collections(value: Option<CollectionsDto>) -> Result<Option<Collections>, ApiError> {
    match value {
        None => Ok(None),
        Some(CollectionsDto::List(names)) => Ok(Some(Collections::List(names))),
        Some(CollectionsDto::Weights(weights)) => weights
            .into_iter()
            .map(|(name, w)| match w.as_f64() {
                Some(w) => Ok((name, w)),
                None => Err(ApiError::invalid(format!(
                    "`collections.{name}` weight must be a number"
                ))),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|w| Some(Collections::Weighted(w))),
    }
}

/// `metadata_filters` of the current route: the free-form part under `additional_metadata`,
/// or its deprecated alias `document_metadata` (reported).
fn current_filters(
    deprecations: &mut Deprecations,
    filters: Option<Map<String, Value>>,
) -> Result<Map<String, Value>, ApiError> {
    let mut filters = filters.unwrap_or_default();
    let current = filters.remove("additional_metadata");
    let alias = filters.remove("document_metadata");
    if let Some(free) = deprecations.pick(
        current,
        alias,
        "metadata_filters.additional_metadata",
        "metadata_filters.document_metadata",
    )? {
        filters.insert("additional_metadata".into(), free);
    }
    Ok(filters)
}

fn required_query(query: Option<String>) -> Result<String, ApiError> {
    query.ok_or_else(|| ApiError::invalid("missing required field `query`"))
}

fn meta(envelope: &mut Envelope, outcome: &QueryOutcome) {
    envelope.meta("mode", json!(outcome.mode.as_str()));
    if let Some(reason) = outcome.mode_reason {
        envelope.meta("mode_requested", json!("auto"));
        envelope.meta("mode_reason", json!(reason));
    }
    envelope.meta("alpha", json!(score(outcome.alpha)));
    envelope.meta("ignored_filter_keys", json!(outcome.ignored_filters));
}

/// Query knowledge and/or memories: hybrid BM25 and semantic ranking with filters applied
/// before ranking. `meta.mode` is the mode that ran (`auto` reports its choice) and
/// `meta.ignored_filter_keys` the filter keys the schema does not declare matchable.
#[utoipa::path(post, path = "/query", tag = "query", request_body = QueryBody,
    responses(
        (status = 200, body = EnvelopeDoc<QueryResultDto>),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
        (status = 429, body = ErrorEnvelopeDoc, description = "RATE_LIMITED"),
    ))]
async fn query(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<QueryBody>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let (database, collection) = deprecations.scope(
        body.database,
        body.tenant_id,
        body.collection,
        body.sub_tenant_id,
    )?;
    let named = deprecations.pick(
        body.collections,
        body.sub_tenant_ids,
        "collections",
        "sub_tenant_ids",
    )?;
    let kind = choice(
        "type",
        body.kind.as_deref(),
        &[
            ("knowledge", QueryKind::Knowledge),
            ("memory", QueryKind::Memory),
            ("memories", QueryKind::Memory),
            ("all", QueryKind::All),
        ],
    )?
    .unwrap_or_default();
    let request = QueryRequest {
        collection: collection.clone(),
        collections: collections(named)?,
        query: required_query(body.query)?,
        kind,
        method: choice(
            "query_by",
            body.query_by.as_deref(),
            &[("hybrid", Method::Hybrid), ("text", Method::Text)],
        )?,
        operator: operator(body.operator.as_deref())?,
        mode: choice(
            "mode",
            body.mode.as_deref(),
            &[
                ("fast", RequestedMode::Fast),
                ("thinking", RequestedMode::Thinking),
                ("auto", RequestedMode::Auto),
            ],
        )?
        .unwrap_or_default(),
        max_results: body.max_results,
        alpha: alpha(body.alpha)?,
        recency_bias: body.recency_bias,
        metadata_filters: current_filters(&mut deprecations, body.metadata_filters)?,
        graph_context: body.graph_context,
        query_apps: body.query_apps.unwrap_or(false),
    };
    let outcome = app.query(&who, &database, request).await?;
    let data = QueryResultDto::new(&outcome.chunks, outcome.graph_context);
    let mut envelope = Envelope::ok(&data)
        .scoped(&outcome.database, collection.as_deref())
        .deprecations(deprecations);
    envelope.source_type(match kind {
        QueryKind::Knowledge => "knowledge",
        QueryKind::Memory => "memory",
        QueryKind::All => "all",
    });
    meta(&mut envelope, &outcome);
    Ok(envelope)
}

/// The legacy recall routes share one request; `kind` is what the route reads.
async fn recall(
    app: &App,
    who: &engram_app::Principal,
    body: RecallBody,
    kind: QueryKind,
) -> Result<axum::Json<RecallResponse>, ApiError> {
    let database = tenant(body.tenant_id)?;
    let mode = choice(
        "mode",
        body.mode.as_deref(),
        &[
            ("fast", RequestedMode::Fast),
            ("thinking", RequestedMode::Thinking),
        ],
    )?
    .unwrap_or(RequestedMode::Fast);
    let request = QueryRequest {
        collection: body.sub_tenant_id,
        collections: None,
        query: required_query(body.query)?,
        kind,
        method: Some(Method::Hybrid),
        operator: TermOperator::Or,
        mode,
        max_results: body.max_results,
        alpha: alpha(body.alpha)?,
        recency_bias: body.recency_bias,
        metadata_filters: body.metadata_filters.unwrap_or_default(),
        graph_context: Some(body.graph_context.unwrap_or(false)),
        query_apps: false,
    };
    let outcome = app.query(who, &database, request).await.map_err(legacy)?;
    Ok(axum::Json(RecallResponse::new(
        &outcome.chunks,
        outcome.graph_context,
        outcome.ignored_filters,
    )))
}

/// Query knowledge (legacy).
#[utoipa::path(post, path = "/recall/full_recall", tag = "legacy recall", request_body = RecallBody,
    responses(
        (status = 200, body = RecallResponse),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_PARAMETERS"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND"),
        (status = 429, body = LegacyErrorDoc, description = "RATE_LIMITED"),
    ))]
async fn full_recall(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<RecallBody>,
) -> Result<axum::Json<RecallResponse>, ApiError> {
    recall(&app, &who, body, QueryKind::Knowledge).await
}

/// Query memories (legacy).
#[utoipa::path(post, path = "/recall/recall_preferences", tag = "legacy recall", request_body = RecallBody,
    responses(
        (status = 200, body = RecallResponse),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_PARAMETERS"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND"),
        (status = 429, body = LegacyErrorDoc, description = "RATE_LIMITED"),
    ))]
async fn recall_preferences(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<RecallBody>,
) -> Result<axum::Json<RecallResponse>, ApiError> {
    recall(&app, &who, body, QueryKind::Memory).await
}

/// Boolean recall (legacy): deterministic BM25 over sources or memories, with `or`, `and` or
/// `phrase`.
#[utoipa::path(post, path = "/recall/boolean_recall", tag = "legacy recall", request_body = BooleanRecallBody,
    responses(
        (status = 200, body = RecallResponse),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_PARAMETERS"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND"),
        (status = 429, body = LegacyErrorDoc, description = "RATE_LIMITED"),
    ))]
async fn boolean_recall(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<BooleanRecallBody>,
) -> Result<axum::Json<RecallResponse>, ApiError> {
    let database = tenant(body.tenant_id)?;
    let kind = choice(
        "search_mode",
        body.search_mode.as_deref(),
        &[
            ("sources", QueryKind::Knowledge),
            ("memories", QueryKind::Memory),
        ],
    )?
    .unwrap_or(QueryKind::Knowledge);
    let request = QueryRequest {
        collection: body.sub_tenant_id,
        query: required_query(body.query)?,
        kind,
        method: Some(Method::Text),
        operator: operator(body.operator.as_deref())?,
        mode: RequestedMode::Fast,
        max_results: body.max_results,
        metadata_filters: Map::<String, Value>::new(),
        graph_context: Some(false),
        ..QueryRequest::default()
    };
    let outcome = app.query(&who, &database, request).await.map_err(legacy)?;
    Ok(axum::Json(RecallResponse::new(
        &outcome.chunks,
        false,
        outcome.ignored_filters,
    )))
}
