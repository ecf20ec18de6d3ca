//! `POST /recall/qna` (legacy): retrieve, then answer with the configured model from what was
//! retrieved, citing the chunks used; `stream: true` sends the answer as server-sent events as
//! it is written.

use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use engram_app::{App, Method, QnaRequest, QnaStream, QueryKind, QueryRequest, RequestedMode};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::wire::{LegacyChunkDto, RecallModeDto, RecallResponse, SearchModeDto};
use super::{content, search, tenant, warned};
use crate::envelope::LegacyErrorDoc;
use crate::error::ApiError;
use crate::extract::{Auth, Json};
use crate::wire::query::{alpha, AlphaDto, GraphContextDto};
use crate::wire::{lenient, Ignored};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new().routes(routes!(qna))
}

/// Passages retrieved for an answer unless `max_chunks` says otherwise.
const DEFAULT_CHUNKS: i64 = 8;
/// Most passages one answer may retrieve.
const MAX_CHUNKS: i64 = 50;

/// Legacy `POST /recall/qna`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct QnaBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    /// The question (at most 10,000 characters).
    pub question: Option<String>,
    /// Chunks retrieved and given to the model: 1-50, default 8 (fewer when they pass
    /// `llm.answer_context_chars`).
    pub max_chunks: Option<i64>,
    /// `fast` (default) or `thinking`.
    #[serde(default, deserialize_with = "lenient")]
    pub mode: Option<RecallModeDto>,
    /// Default 0.8.
    pub alpha: Option<AlphaDto>,
    /// `sources` (default) or `memories`.
    #[serde(default, deserialize_with = "lenient")]
    pub search_mode: Option<SearchModeDto>,
    /// Return the graph context of the retrieval too; default false.
    pub include_graph_context: Option<bool>,
    /// More for the model to know (at most 4,000 characters); not retrieved with.
    pub extra_context: Option<String>,
    /// Not acted on: the server's `[llm]` model answers (named in a `Warning`).
    pub llm_provider: Option<String>,
    /// Not acted on unless it names the configured model (a `Warning` says so).
    pub model: Option<String>,
    /// 0 to 2; default 0.
    pub temperature: Option<f64>,
    /// Most tokens of the answer; at most `llm.answer_max_tokens` (more is cut, with a
    /// `Warning`).
    pub max_tokens: Option<i64>,
    /// Send the answer as server-sent events as it is written: `chunks`, then `delta` events,
    /// then `done` (or `error`).
    #[serde(default)]
    pub stream: bool,
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

/// An answer.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct QnaResponse {
    pub success: bool,
    /// The model's answer from the chunks; `I cannot answer that from the provided context.`
    /// when they do not hold one.
    pub answer: String,
    /// The chunks the model was given, best first.
    pub chunks: Vec<LegacyChunkDto>,
    /// `chunk_uuid` of each chunk the answer cites, in the order first cited.
    pub citations: Vec<String>,
    #[schema(value_type = Object)]
    pub graph_context: Option<GraphContextDto>,
    pub model_used: String,
    /// `retrieval_ms`, `answer_ms`, `total_ms`.
    #[schema(value_type = Object)]
    pub timing: Map<String, Value>,
}

/// Answer a question from the tenant's sources (or a user's memories) with the configured
/// model (`[llm]`), citing the chunks it used.
#[utoipa::path(post, path = "/recall/qna", tag = "legacy recall", security(("bearer" = ["read"])), request_body = QnaBody,
    responses(
        (status = 200, body = QnaResponse, description = "the answer; with `stream: true`, `text/event-stream`"),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_SEARCH_PARAMETERS: question missing, max_chunks, temperature or max_tokens out of range; INVALID_TENANT_ID"),
        (status = 403, body = LegacyErrorDoc, description = "FORBIDDEN: no model is configured ([llm]), or the key may not use the tenant"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND"),
        (status = 502, body = LegacyErrorDoc, description = "PROVIDER_ERROR: the model refused the request or answered something unusable"),
        (status = 503, body = LegacyErrorDoc, description = "SERVICE_UNAVAILABLE: the model is busy or unreachable after retries"),
    ))]
async fn qna(
    State(app): State<App>,
    Auth(who): Auth,
    body: Result<Json<QnaBody>, ApiError>,
) -> Result<Response, ApiError> {
    let Json(body) = body.map_err(search)?;
    let database = tenant(body.tenant_id.clone()).map_err(search)?;
    let mut ignored = Ignored::of_unknown(&body.unknown);
    ignored.note_if(
        body.llm_provider.is_some(),
        "llm_provider",
        "this server answers with its configured model ([llm])",
    );
    let configured = app.config().llm.model.clone();
    ignored.note_if(
        body.model.as_deref().is_some_and(|m| m != configured),
        "model",
        "this server answers with its configured model ([llm] model), named in model_used",
    );
    let max_chunks = body.max_chunks.unwrap_or(DEFAULT_CHUNKS);
    if !(1..=MAX_CHUNKS).contains(&max_chunks) {
        return Err(search(ApiError::invalid(format!(
            "`max_chunks` must be between 1 and {MAX_CHUNKS}"
        ))));
    }
    let include_graph = body.include_graph_context.unwrap_or(false);
    let question = body
        .question
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| search(ApiError::invalid("missing required field `question`")))?;
    let request = QnaRequest {
        query: QueryRequest {
            collection: body.sub_tenant_id,
            query: question,
            kind: body
                .search_mode
                .map_or(QueryKind::Knowledge, QueryKind::from),
            method: Some(Method::Hybrid),
            mode: body.mode.map_or(RequestedMode::Fast, RequestedMode::from),
            max_results: Some(max_chunks),
            alpha: alpha(body.alpha).map_err(search)?,
            graph_context: Some(include_graph),
            ..QueryRequest::default()
        },
        extra_context: body.extra_context,
        max_tokens: body.max_tokens,
        temperature: body.temperature,
    };
    let asked_tokens = body.max_tokens;
    let failed = |e| search(content(e));
    if body.stream {
        let (outcome, stream) = app
            .qna_streamed(&who, &database, request)
            .await
            .map_err(failed)?;
        note_cut_tokens(&mut ignored, asked_tokens, stream.max_tokens);
        return Ok(warned(streamed(outcome, stream, include_graph), &ignored));
    }
    let answer = app.qna(&who, &database, request).await.map_err(failed)?;
    let stream = answer.stream;
    note_cut_tokens(&mut ignored, asked_tokens, stream.max_tokens);
    let (chunks, citations, graph_context) = given(
        answer.outcome,
        stream.passages,
        include_graph,
        &answer.cited,
    );
    let timing = timing(stream.retrieval_ms, answer.answer_ms);
    let response = QnaResponse {
        success: true,
        answer: answer.text,
        chunks,
        citations,
        graph_context,
        model_used: stream.model,
        timing,
    };
    Ok(warned(axum::Json(response).into_response(), &ignored))
}

fn note_cut_tokens(ignored: &mut Ignored, asked: Option<i64>, allowed: u32) {
    if asked.is_some_and(|asked| asked > i64::from(allowed)) {
        ignored.note(
            "max_tokens",
            format!("cut to {allowed}, the most this server allows (llm.answer_max_tokens)"),
        );
    }
}

/// The chunks given to the model, the `chunk_uuid`s of those cited, and the graph context.
fn given(
    outcome: engram_app::QueryOutcome,
    passages: usize,
    include_graph: bool,
    cited: &[usize],
) -> (Vec<LegacyChunkDto>, Vec<String>, Option<GraphContextDto>) {
    let mut recalled = RecallResponse::new(outcome, include_graph);
    recalled.chunks.truncate(passages);
    let citations = cited
        .iter()
        .filter_map(|&i| recalled.chunks.get(i).map(|c| c.chunk_uuid.clone()))
        .collect();
    (recalled.chunks, citations, recalled.graph_context)
}

fn timing(retrieval_ms: f64, answer_ms: f64) -> Map<String, Value> {
    let round = |ms: f64| (ms * 1000.0).round() / 1000.0;
    let mut timing = Map::new();
    timing.insert("retrieval_ms".into(), json!(round(retrieval_ms)));
    timing.insert("answer_ms".into(), json!(round(answer_ms)));
    timing.insert("total_ms".into(), json!(round(retrieval_ms + answer_ms)));
    timing
}

/// The answer as server-sent events: `chunks` (what the model was given), a `delta` per piece
/// of the answer, then `done` with the whole answer, its citations and timing; a failure of the
/// model midway is an `error` event with the code a whole answer would have had. A client that
/// goes away stops the model's answer.
fn streamed(
    outcome: engram_app::QueryOutcome,
    mut stream: QnaStream,
    include_graph: bool,
) -> Response {
    let (chunks, _, graph_context) = given(outcome, stream.passages, include_graph, &[]);
    let ids: Vec<String> = chunks.iter().map(|c| c.chunk_uuid.clone()).collect();
    let first = json!({"chunks": chunks, "graph_context": graph_context,
                       "model_used": stream.model});
    let (events, received) = tokio::sync::mpsc::channel::<Event>(32);
    tokio::spawn(async move {
        if events
            .send(Event::default().event("chunks").data(first.to_string()))
            .await
            .is_err()
        {
            return;
        }
        let mut text = String::new();
        let last = loop {
            // A client that leaves stops the model's answer at once, not at the next piece.
            let next = tokio::select! {
                next = stream.next_delta() => next,
                () = events.closed() => return,
            };
            match next {
                Ok(Some(delta)) => {
                    text.push_str(&delta);
                    let event = Event::default()
                        .event("delta")
                        .data(json!({"text": delta}).to_string());
                    if events.send(event).await.is_err() {
                        return; // the client left: the model's answer is dropped with it
                    }
                }
                Ok(None) => {
                    let answer = text.trim();
                    let citations: Vec<&String> = engram_app::citations(answer, stream.passages)
                        .into_iter()
                        .filter_map(|i| ids.get(i))
                        .collect();
                    let done = json!({"success": true, "answer": answer, "citations": citations,
                                      "model_used": stream.model,
                                      "timing": timing(stream.retrieval_ms, stream.answer_ms())});
                    break Event::default().event("done").data(done.to_string());
                }
                Err(err) => {
                    let ApiError(parts) = search(content(err));
                    let failed = json!({"success": false, "error_code": parts.code.as_str(),
                                        "message": parts.message});
                    break Event::default().event("error").data(failed.to_string());
                }
            }
        };
        let _ = events.send(last).await;
    });
    let events = futures_util::stream::unfold(received, |mut received| async move {
        received
            .recv()
            .await
            .map(|event| (Ok::<_, Infallible>(event), received))
    });
    Sse::new(events)
        .keep_alive(axum::response::sse::KeepAlive::default())
        .into_response()
}
