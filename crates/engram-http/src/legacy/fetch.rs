//! Legacy `POST /fetch/content`: one source's text and/or a signed download link.

use axum::extract::State;
use axum::http::HeaderMap;
use engram_app::App;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{content, tenant, warned};
use crate::envelope::LegacyErrorDoc;
use crate::error::ApiError;
use crate::extract::{Auth, Json};
use crate::wire::items::{download_url, FetchMode, EXPIRY_WITHOUT_LINK};
use crate::wire::Ignored;
use axum::response::{IntoResponse, Response};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new().routes(routes!(fetch_content))
}

#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct FetchBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    #[serde(default)]
    pub source_id: String,
    /// `content`, `url` or `both` (default).
    pub mode: Option<String>,
    /// Lifetime of `presigned_url` in seconds: 1 to 604800, default 3600.
    pub expiry_seconds: Option<i64>,
    /// Fields this route does not know: named in a `Warning`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct FetchResponse {
    pub success: bool,
    pub source_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presigned_url: Option<String>,
    pub content_type: String,
    pub size_bytes: u64,
    pub message: String,
    pub error: Option<String>,
}

/// A source's text (`content`), a link that downloads it as uploaded until `expiry_seconds`
/// pass (`url`), or both.
#[utoipa::path(post, path = "/fetch/content", tag = "legacy content", security(("bearer" = ["read"])), request_body = FetchBody,
    responses(
        (status = 200, body = FetchResponse),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_PARAMETERS: source_id missing, unknown mode, expiry out of range"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND or SOURCE_NOT_FOUND"),
    ))]
async fn fetch_content(
    State(app): State<App>,
    Auth(who): Auth,
    headers: HeaderMap,
    Json(body): Json<FetchBody>,
) -> Result<Response, ApiError> {
    let database = tenant(body.tenant_id)?;
    let mode = FetchMode::parse(body.mode.as_deref())?;
    let mut ignored = Ignored::of_unknown(&body.unknown);
    ignored.note_if(
        body.expiry_seconds.is_some() && !mode.url(),
        "expiry_seconds",
        EXPIRY_WITHOUT_LINK,
    );
    let view = app
        .inspect_source(
            &who,
            &database,
            body.sub_tenant_id.as_deref(),
            &body.source_id,
            body.expiry_seconds,
            &[],
        )
        .await
        .map_err(content)?;
    let response = axum::Json(FetchResponse {
        success: true,
        source_id: view.item.id.clone(),
        content: mode.content().then(|| view.content.clone()),
        presigned_url: mode.url().then(|| download_url(&headers, &view.link.token)),
        content_type: view.content_type().to_owned(),
        size_bytes: view.size_bytes(),
        message: "source fetched".into(),
        error: None,
    })
    .into_response();
    Ok(warned(response, &ignored))
}
