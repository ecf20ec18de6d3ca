//! engram's HTTP layer: axum routers for both API generations, their DTOs and conversions into
//! app calls, the auth extractor, the response envelope and error mapping, and the OpenAPI
//! document generated from the same route declarations. Nothing below this crate knows axum.

mod context;
mod dto;
mod error;
mod extract;
mod form;
mod openapi;
mod routes;

use std::future::Future;

use axum::extract::DefaultBodyLimit;
use axum::Router;
use engram_app::App;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;

pub use error::ApiError;

/// The whole HTTP application and its OpenAPI document.
pub fn router(app: App) -> Router {
    // Uploads are the largest bodies; JSON bodies are bounded by the same limit.
    let body_limit = app
        .config()
        .ingest
        .max_upload_bytes
        .max(engram_types::limits::JSON_BODY_MAX_BYTES);
    let (api, openapi) = routes::api().split_for_parts();
    let openapi = openapi::finish(openapi);
    api.merge(routes::openapi_route(openapi))
        .fallback(routes::fallback)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(CatchPanicLayer::custom(error::panic_response))
        .layer(axum::middleware::from_fn(context::request_context))
        .with_state(app)
}

/// The OpenAPI 3.1 document of every route (also served at `GET /openapi.json`).
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    openapi::finish(routes::api().split_for_parts().1)
}

/// Serves until `shutdown` resolves, then stops accepting and drains in-flight requests.
pub async fn serve(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
}
