//! Routes of both generations. Handlers are adapters: extract, authorize (the [`Auth`]
//! extractor), call one app function, map the result.
//!
//! [`Auth`]: crate::extract::Auth

mod databases;
mod envelope;
mod tenants;

use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use engram_app::App;
use engram_types::ErrorCode;
use utoipa_axum::router::OpenApiRouter;

pub use envelope::Envelope;

use crate::error::ApiError;

/// Every authenticated route, with its OpenAPI description.
pub fn api() -> OpenApiRouter<App> {
    OpenApiRouter::with_openapi(crate::openapi::base()).merge(databases::routes()).merge(tenants::routes())
}

/// Routes that need no key: health and the OpenAPI document.
pub fn unauthenticated(openapi: utoipa::openapi::OpenApi) -> Router<App> {
    let doc = std::sync::Arc::new(openapi);
    Router::new().route("/healthz", get(healthz)).route(
        "/openapi.json",
        get(move || {
            let doc = doc.clone();
            async move { Json(doc.as_ref().clone()) }
        }),
    )
}

/// Liveness and readiness: the server answers only once its store is open and migrated.
async fn healthz() -> Response {
    Json(serde_json::json!({"status": "ok"})).into_response()
}

/// An unknown route.
pub async fn fallback(uri: axum::http::Uri) -> ApiError {
    ApiError::new(ErrorCode::NotFound, format!("no route for `{}`", uri.path()))
}
