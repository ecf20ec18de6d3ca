//! Current retrieval: `POST /query`.

use axum::extract::State;
use engram_app::{App, Collections, Method, QueryKind, QueryOutcome, QueryRequest, RequestedMode};
use serde_json::{json, Map, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::wire::*;
use crate::envelope::{Envelope, EnvelopeDoc, ErrorEnvelopeDoc};
use crate::error::ApiError;
use crate::extract::{Auth, Json};
use crate::wire::query::*;
use crate::wire::Deprecations;

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new().routes(routes!(query))
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
    let (database, collection) = body.scope.resolve(&mut deprecations)?;
    let named = deprecations.pick(
        body.collections,
        body.sub_tenant_ids,
        "collections",
        "sub_tenant_ids",
    )?;
    let kind = body.kind.map(QueryKind::from).unwrap_or_default();
    let request = QueryRequest {
        collection: collection.clone(),
        collections: collections(named)?,
        query: required_query(body.query)?,
        kind,
        method: body.query_by.map(Method::from),
        operator: body.operator.unwrap_or_default().into(),
        mode: body.mode.map(RequestedMode::from).unwrap_or_default(),
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
