//! Feedback on earlier answers: `POST /feedback` keeps it against the answer's request id,
//! `GET /feedback` reads it back.

use axum::extract::State;
use axum::http::StatusCode;
use engram_app::{App, FeedbackInput, FeedbackRecord, GroundTruth};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::{Envelope, EnvelopeDoc, ErrorEnvelopeDoc};
use crate::error::ApiError;
use crate::extract::{Auth, Json, NotedQuery};
use crate::wire::{Deprecations, Ignored, ScopeDto};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new().routes(routes!(submit, read))
}

#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct GroundTruthDto {
    /// The answer a correct system would have given.
    pub answer: Option<String>,
    /// Ids of the sources that hold the answer.
    #[serde(default)]
    pub source_ids: Vec<String>,
}

/// `POST /feedback`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct FeedbackBody {
    /// `meta.request_id` of the answer this is about.
    #[serde(default)]
    pub request_id: String,
    #[serde(flatten)]
    pub scope: ScopeDto,
    /// A comment; required unless `ground_truth` is sent.
    pub feedback: Option<String>,
    /// `positive`, `negative` or `neutral`.
    pub rating: Option<String>,
    /// `user` (default) or `agent`.
    pub source: Option<String>,
    pub ground_truth: Option<GroundTruthDto>,
    /// Free-form string values kept with the feedback.
    #[serde(default)]
    pub metadata: Map<String, Value>,
    /// Fields this route does not know: reported in `meta.ignored_parameters`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// Feedback as kept.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct FeedbackDto {
    pub feedback_id: String,
    pub request_id: String,
    /// When it was recorded (RFC 3339).
    pub created_at: String,
    pub recorded: bool,
    pub message: String,
    /// The database and collection it was given for; empty when none was named.
    pub database: String,
    pub collection: String,
    /// What was said: `feedback`, `rating`, `source`, `ground_truth`, `metadata`.
    pub body: Value,
}

impl From<FeedbackRecord> for FeedbackDto {
    fn from(f: FeedbackRecord) -> Self {
        Self {
            message: format!("feedback recorded for request `{}`", f.request_id),
            feedback_id: f.feedback_id,
            request_id: f.request_id,
            created_at: engram_app::format_ms(f.created_at),
            recorded: true,
            database: f.database,
            collection: f.collection,
            body: f.body,
        }
    }
}

/// Record feedback about an answer already given, by the `request_id` in that answer's `meta`.
/// It never changes the answer.
#[utoipa::path(post, path = "/feedback", tag = "feedback", security(("bearer" = ["write"])), request_body = FeedbackBody,
    responses(
        (status = 201, body = EnvelopeDoc<FeedbackDto>, description = "recorded"),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: request_id missing, collection without database, over a limit"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
        (status = 422, body = ErrorEnvelopeDoc, description = "VALIDATION_ERROR: no comment nor ground truth, unknown rating or source"),
    ))]
async fn submit(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<FeedbackBody>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let ignored = Ignored::of_unknown(&body.unknown);
    let database = deprecations.pick(
        body.scope.database,
        body.scope.tenant_id,
        "database",
        "tenant_id",
    )?;
    let collection = deprecations.pick(
        body.scope.collection,
        body.scope.sub_tenant_id,
        "collection",
        "sub_tenant_id",
    )?;
    let input = FeedbackInput {
        request_id: body.request_id,
        database,
        collection,
        feedback: body.feedback,
        rating: body.rating,
        source: body.source,
        ground_truth: body.ground_truth.map(|t| GroundTruth {
            answer: t.answer,
            source_ids: t.source_ids,
        }),
        metadata: body.metadata,
    };
    let record = app.submit_feedback(&who, input).await?;
    Ok(
        Envelope::new(StatusCode::CREATED, &FeedbackDto::from(record))
            .deprecations(deprecations)
            .ignored(&ignored),
    )
}

/// `GET /feedback`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct FeedbackParams {
    /// The answer's `meta.request_id`.
    #[serde(default)]
    pub request_id: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct FeedbackListDto {
    pub request_id: String,
    pub feedback: Vec<FeedbackDto>,
}

/// The feedback recorded for one answer, oldest first (a key restricted to some databases sees
/// the feedback given for them).
#[utoipa::path(get, path = "/feedback", tag = "feedback", security(("bearer" = ["read"])), params(FeedbackParams),
    responses(
        (status = 200, body = EnvelopeDoc<FeedbackListDto>),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: request_id missing"),
    ))]
async fn read(
    State(app): State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<FeedbackParams>,
) -> Result<Envelope, ApiError> {
    let feedback = app.feedback_for(&who, &params.request_id).await?;
    Ok(Envelope::ok(&FeedbackListDto {
        request_id: params.request_id.trim().to_owned(),
        feedback: feedback.into_iter().map(FeedbackDto::from).collect(),
    })
    .ignored(&ignored))
}
