//! `/mcp`: the MCP server over Streamable HTTP. Every request is authenticated here, with the
//! same keys, rules and errors as the API (a 401 in the current error envelope); the MCP tools
//! then act as the request's caller, found in its extensions.

use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::{from_fn_with_state, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use engram_app::App;
use tokio_util::sync::CancellationToken;
use tower_http::limit::RequestBodyLimitLayer;

use crate::envelope::Generation;
use crate::extract::Auth;

/// The `/mcp` service; its sessions and streams end when `cancel` fires (at shutdown). A
/// message may carry a document (base64, a third larger than its bytes): bodies are held to the
/// upload limit plus that, read before any work (413 past it).
pub(crate) fn service(app: App, cancel: CancellationToken) -> Router {
    let upload = app.config().ingest.max_upload_bytes;
    let limit = (upload / 3 * 4 + 1024 * 1024).max(engram_types::limits::JSON_BODY_MAX_BYTES);
    Router::new()
        .fallback_service(engram_mcp::http_service(app.clone(), cancel, limit))
        .layer(RequestBodyLimitLayer::new(limit))
        .layer(from_fn_with_state(app, authenticate))
}

async fn authenticate(State(app): State<App>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    match Auth::from_request_parts(&mut parts, &app).await {
        Ok(Auth(who)) => {
            parts.extensions.insert(who);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(err) => Generation::Current.mark(err.into_response()),
    }
}
