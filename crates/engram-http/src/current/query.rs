//! Current retrieval: `POST /query`.

use axum::extract::State;
use engram_app::{App, QueryOutcome};
use serde_json::json;
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
    let scoped = body.into_request(&mut deprecations)?;
    let kind = scoped.request.kind;
    let outcome = app.query(&who, &scoped.database, scoped.request).await?;
    let data = QueryResultDto::new(&outcome.chunks, outcome.graph_context);
    let mut envelope = Envelope::ok(&data)
        .scoped(&outcome.database, scoped.collection.as_deref())
        .deprecations(deprecations);
    envelope.source_type(kind_name(kind));
    meta(&mut envelope, &outcome);
    Ok(envelope)
}
