//! Routes of both generations. Handlers are adapters: extract, authorize (the [`Auth`]
//! extractor), call one app function, map the result.
//!
//! [`Auth`]: crate::extract::Auth

mod context;
mod databases;
mod envelope;
mod legacy_content;
mod query;
mod tenants;
mod webhooks;

use axum::response::{IntoResponse, Response};
use std::sync::Arc;

use axum::routing::get;
use axum::{Json, Router};
use engram_app::App;
use engram_types::ErrorCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use envelope::Envelope;

use crate::error::ApiError;

/// Every route, with its OpenAPI description.
pub fn api() -> OpenApiRouter<App> {
    OpenApiRouter::with_openapi(crate::openapi::base())
        .routes(routes!(healthz))
        .merge(databases::routes())
        .merge(context::routes())
        .merge(legacy_content::routes())
        .merge(query::routes())
        .merge(tenants::routes())
        .merge(webhooks::routes())
}

/// The route serving the OpenAPI document itself (described in the document by `openapi::finish`).
pub fn openapi_route(openapi: utoipa::openapi::OpenApi) -> Router<App> {
    let doc = Arc::new(openapi);
    Router::new().route(
        crate::openapi::PATH,
        get(move || {
            let doc = doc.clone();
            async move { Json(doc.as_ref().clone()) }
        }),
    )
}

/// Health: 200 once the service is ready (its store is open and migrated). No key needed.
#[utoipa::path(get, path = "/healthz", tag = "service", security(()),
    responses((status = 200, description = "the service is ready", body = Object, example = json!({"status": "ok"}))))]
async fn healthz() -> Response {
    Json(serde_json::json!({"status": "ok"})).into_response()
}

/// An unknown route.
pub async fn fallback(uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        ErrorCode::NotFound,
        format!("no route for `{}`", uri.path()),
    )
}
