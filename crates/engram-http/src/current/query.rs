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
    envelope.meta("plan", outcome.plan.clone());
    envelope.meta("ignored_filter_keys", json!(outcome.ignored_filters));
    let timings: serde_json::Map<String, serde_json::Value> = outcome
        .timings
        .iter()
        .map(|t| {
            let ms = (t.elapsed.as_secs_f64() * 1_000_000.0).round() / 1_000.0;
            (t.stage.as_str().to_owned(), json!(ms))
        })
        .collect();
    envelope.meta("timings_ms", serde_json::Value::Object(timings));
}

/// Query knowledge and/or memories: hybrid BM25 and semantic ranking with filters applied
/// before ranking. `meta.mode` is the mode that ran (`auto` reports its choice) and
/// `meta.ignored_filter_keys` the filter keys the schema does not declare matchable;
/// `meta.timings_ms` is each stage's time in milliseconds (stages may overlap).
#[utoipa::path(post, path = "/query", tag = "query", security(("bearer" = ["read"])), request_body = QueryBody,
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
    let mut ignored = scoped.ignored;
    let outcome = app.query(&who, &scoped.database, scoped.request).await?;
    for (parameter, reason) in &outcome.inert {
        ignored.note(*parameter, *reason);
    }
    let mut data = QueryResultDto::new(&outcome);
    let mut envelope = match scoped.response_format {
        None => {
            data.llm_prompt = Some(markdown(&outcome));
            Envelope::ok(&data)
        }
        Some(ResponseFormatDto::Structured) => Envelope::ok(&data),
        Some(ResponseFormatDto::Markdown) => Envelope::ok(&markdown(&outcome)),
    }
    .scoped(&outcome.database, scoped.collection.as_deref())
    .deprecations(deprecations)
    .ignored(&ignored);
    envelope.source_type(kind_name(kind));
    meta(&mut envelope, &outcome);
    Ok(envelope)
}

/// Runs a body of `POST /query` given as JSON (the console's search playground): the same
/// reading of every field, the same query. Returns the outcome and what was not acted on.
pub(crate) async fn run(
    app: &App,
    who: &engram_app::Principal,
    body: serde_json::Value,
) -> Result<(QueryOutcome, crate::wire::Ignored), ApiError> {
    let body: QueryBody = serde_path_to_error::deserialize(body)
        .map_err(|err| ApiError::invalid(format!("invalid `{}`: {}", err.path(), err.inner())))?;
    let mut deprecations = Deprecations::default();
    let scoped = body.into_request(&mut deprecations)?;
    let mut ignored = scoped.ignored;
    let outcome = app.query(who, &scoped.database, scoped.request).await?;
    for (parameter, reason) in &outcome.inert {
        ignored.note(*parameter, *reason);
    }
    Ok((outcome, ignored))
}

/// The ranked chunks as Markdown for a model's prompt: numbered, each with its source, score,
/// metadata and text, and its neighbours (`num_related_chunks`) after it.
fn markdown(outcome: &QueryOutcome) -> String {
    let mut out = String::from("# Context\n");
    if outcome.chunks.is_empty() {
        out.push_str("\nNothing relevant was found.\n");
    }
    for (i, ranked) in outcome.chunks.iter().enumerate() {
        let hit = &ranked.hit;
        let title = hit.item.label();
        out.push_str(&format!(
            "\n## {}. {title} (id: {}, score: {:.2})\n",
            i + 1,
            hit.item.id,
            score(ranked.score)
        ));
        let metadata: Vec<String> = [
            &hit.item.fields.metadata,
            &hit.item.fields.additional_metadata,
        ]
        .into_iter()
        .filter_map(|v| v.as_object())
        .flatten()
        .map(|(k, v)| match v.as_str() {
            Some(text) => format!("{k}: {text}"),
            None => format!("{k}: {v}"),
        })
        .collect();
        if !metadata.is_empty() {
            out.push_str(&format!("Metadata: {}\n", metadata.join(" | ")));
        }
        if let Some((mentions, _)) = outcome.temporal.as_ref().and_then(|t| t.facts.get(i)) {
            let dates: Vec<String> = mentions
                .iter()
                .map(|m| {
                    if m.start == m.end {
                        format!("\"{}\" = {}", m.phrase, m.start)
                    } else {
                        format!("\"{}\" = {} to {}", m.phrase, m.start, m.end)
                    }
                })
                .collect();
            if !dates.is_empty() {
                out.push_str(&format!("Dates: {}\n", dates.join("; ")));
            }
        }
        out.push('\n');
        out.push_str(hit.content.trim());
        out.push('\n');
        for neighbour in outcome.related.get(i).into_iter().flatten() {
            out.push_str(&format!(
                "\n> (nearby, part {}) {}\n",
                neighbour.position + 1,
                neighbour.content.trim().replace('\n', "\n> ")
            ));
        }
    }
    out
}
