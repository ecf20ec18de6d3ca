//! engram's HTTP layer: one folder per API generation (`current/`, `legacy/`), each with its
//! routes, wire types and router, which marks its responses with its generation; the response
//! contract of both in one place (`envelope`); the auth, JSON, query and multipart extractors;
//! error mapping; and the OpenAPI document generated from the same route declarations. Nothing
//! below this crate knows axum.

// Adapters pass other layers' errors and JSON values through (`other => other.into()`): a
// wildcard over someone else's enum is the point there. Domain enums are matched exhaustively.
#![allow(clippy::wildcard_enum_match_arm)]

mod console;
mod context;
mod current;
mod envelope;
mod error;
mod extract;
mod form;
mod legacy;
mod mcp;
mod metrics;
mod openapi;
mod server;
mod service;
mod wire;

use std::future::Future;
use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::Router;
use engram_app::App;
use tokio::net::TcpListener;
use tower_http::catch_panic::CatchPanicLayer;
use utoipa_axum::router::OpenApiRouter;

pub use error::ApiError;
pub use metrics::{
    install as install_metrics, listener_router as metrics_router, rendered as render_metrics,
};

/// Every documented route of both generations and the service.
fn api() -> (OpenApiRouter<App>, Arc<std::collections::HashSet<String>>) {
    let current = current::routes();
    let current_segments = Arc::new(service::first_segments(&current));
    let api = OpenApiRouter::with_openapi(openapi::base())
        .merge(service::routes())
        .merge(current)
        .merge(legacy::routes());
    (api, current_segments)
}

/// The whole HTTP application and its OpenAPI document.
pub fn router(app: App) -> Router {
    router_until(app, tokio_util::sync::CancellationToken::new())
}

/// [`router`], whose long-lived streams (MCP sessions) end when `cancel` fires.
fn router_until(app: App, cancel: tokio_util::sync::CancellationToken) -> Router {
    // Uploads are the largest bodies; JSON bodies are bounded by the same limit.
    let body_limit = app
        .config()
        .ingest
        .max_upload_bytes
        .max(engram_types::limits::JSON_BODY_MAX_BYTES);
    let body_timeout = app.config().http.body_timeout;
    let (api, current_segments) = api();
    let (api, openapi) = api.split_for_parts();
    let openapi = openapi::finish(openapi);
    api.merge(service::openapi_route(openapi))
        .route("/metrics", axum::routing::get(metrics::main_listener))
        .route_layer(axum::middleware::from_fn(metrics::remember_route))
        .nest_service("/mcp", mcp::service(app.clone(), cancel))
        .merge(console::routes(&app))
        .fallback(move |uri: axum::http::Uri| {
            let segments = current_segments.clone();
            async move { service::not_found(&segments, &uri) }
        })
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::map_request(move |request| async move {
            server::body_deadline(request, body_timeout)
        }))
        .layer(CatchPanicLayer::custom(error::panic_response))
        .layer(axum::middleware::from_fn(context::request_context))
        .with_state(app)
}

/// The OpenAPI 3.1 document of every route (also served at `GET /openapi.json`).
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    openapi::finish(api().0.split_for_parts().1)
}

/// Serves until `shutdown` resolves, then stops accepting and drains in-flight requests.
/// Connections are held to the `[http]` timeouts.
pub async fn serve(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let header_timeout = app.config().http.header_timeout;
    let cancel = tokio_util::sync::CancellationToken::new();
    let streams = cancel.clone();
    let shutdown = async move {
        shutdown.await;
        streams.cancel();
    };
    server::serve(
        listener,
        router_until(app, cancel),
        header_timeout,
        shutdown,
    )
    .await
}
