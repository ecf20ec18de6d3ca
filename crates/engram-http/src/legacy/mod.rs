//! The legacy generation: `/tenants/*`, `/ingestion/*`, `/memories/*`, `/list/data`,
//! `/knowledge/*`, `/recall/*`, `/fetch/content`, `/embeddings/*`. Plain objects, `{detail:{…}}` errors, `tenant_id` and
//! `sub_tenant_id` names. Frozen: it changes only to fix a mismatch with the legacy contract.
//! Retiring it means deleting this folder and its line in the crate's router.

mod content;
mod embeddings;
mod fetch;
mod graph;
mod qna;
mod recall;
mod tenants;
mod wire;

use axum::http::HeaderValue;
use axum::middleware::map_response;
use axum::response::Response;
use engram_app::{parse_database_name, App, AppError};
use engram_types::{DatabaseName, ErrorCode};
use tower_http::catch_panic::CatchPanicLayer;
use utoipa_axum::router::OpenApiRouter;

use crate::envelope::Generation;
use crate::error::{panic_response, ApiError};
use crate::wire::Deprecations;

/// Every route of the generation, marked as legacy.
pub(crate) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .merge(tenants::routes())
        .merge(content::routes())
        .merge(recall::routes())
        .merge(qna::routes())
        .merge(fetch::routes())
        .merge(embeddings::routes())
        .merge(graph::routes())
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(map_response(mark))
}

async fn mark(response: Response) -> Response {
    Generation::Legacy.mark(response)
}

/// The legacy contract's codes for an app error: a malformed tenant id is `INVALID_TENANT_ID`.
/// The tenant routes answer with these; the content and recall routes with [`content`].
fn legacy(err: AppError) -> ApiError {
    match err {
        AppError::InvalidName {
            field: "tenant_id", ..
        } => ApiError::new(ErrorCode::InvalidTenantId, err.to_string()),
        other => other.into(),
    }
}

/// The content and recall routes' own code: a missing tenant is `TENANT_NOT_FOUND`.
fn recode(err: ApiError) -> ApiError {
    err.recode(ErrorCode::DatabaseNotFound, ErrorCode::TenantNotFound)
}

/// The recall routes' code for a request they cannot run: `INVALID_SEARCH_PARAMETERS` where the
/// current routes say `INVALID_PARAMETERS` (a missing or malformed field, malformed JSON). A
/// malformed tenant id keeps `INVALID_TENANT_ID`.
fn search(err: ApiError) -> ApiError {
    err.recode(
        ErrorCode::InvalidParameters,
        ErrorCode::InvalidSearchParameters,
    )
}

/// An app error in the content routes' codes.
fn content(err: AppError) -> ApiError {
    recode(legacy(err))
}

/// A legacy answer that used deprecated field names: `Deprecation: true` and a `Warning`
/// naming them (the body stays the legacy contract's plain object).
fn deprecated(mut response: Response, deprecations: &Deprecations) -> Response {
    if deprecations.is_empty() {
        return response;
    }
    let warning = format!(
        "299 engram \"deprecated fields: {}\"",
        deprecations.fields().join(", ")
    );
    let headers = response.headers_mut();
    headers.insert("deprecation", HeaderValue::from_static("true"));
    if let Ok(value) = HeaderValue::from_str(&warning) {
        headers.insert(axum::http::header::WARNING, value);
    }
    response
}

/// `Warning: 299 engram "ignored: …"` naming what the request sent and the answer did not act on.
pub(super) fn warned(mut response: Response, ignored: &crate::wire::Ignored) -> Response {
    if let Some(text) = ignored.summary() {
        if let Ok(value) = HeaderValue::from_str(&format!("299 engram \"ignored: {text}\"")) {
            response
                .headers_mut()
                .append(axum::http::header::WARNING, value);
        }
    }
    response
}

/// The required `tenant_id` of a request, checked.
fn tenant(tenant_id: Option<String>) -> Result<DatabaseName, ApiError> {
    let tenant_id =
        tenant_id.ok_or_else(|| ApiError::invalid("missing required field `tenant_id`"))?;
    parse_database_name("tenant_id", &tenant_id).map_err(legacy)
}
