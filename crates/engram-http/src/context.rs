//! Per-request context: each request gets a request id (a well-formed `X-Request-ID` or a new
//! one) and a span carrying it, so every log line written while it is served names it. The
//! response's generation (set by the router that served it) decides its final shape
//! ([`crate::envelope::finish`]); so no response escapes the contract.

use std::time::Instant;

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

use crate::envelope::finish;

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The request's id, for the extractors (the caller carries it into the work it queues).
#[derive(Clone)]
pub(crate) struct RequestId(pub String);

fn request_id_from(req: &Request) -> String {
    req.headers()
        .get(&REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map_or_else(
            || format!("req_{}", uuid::Uuid::new_v4().simple()),
            str::to_owned,
        )
}

/// The metrics label of a request no API route matched: `/mcp` for the MCP service, else
/// `unmatched` (never the raw path, which would make labels unbounded).
fn path_family(path: &str) -> String {
    if path == "/mcp" || path.starts_with("/mcp/") {
        "/mcp".to_owned()
    } else {
        "unmatched".to_owned()
    }
}

/// The request's id and span, and its final shape.
pub(crate) async fn request_context(mut req: Request, next: Next) -> Response {
    let request_id = request_id_from(&req);
    req.extensions_mut().insert(RequestId(request_id.clone()));
    let span = tracing::info_span!("request", request_id = %request_id);
    serve(req, next, request_id).instrument(span).await
}

async fn serve(req: Request, next: Next, request_id: String) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let response = next.run(req).await;
    let mut response = finish(response, &request_id, started).await;
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    let status = response.status().as_u16();
    let route = response
        .extensions()
        .get::<crate::metrics::RouteTemplate>()
        .map_or_else(|| path_family(&path), |r| r.0.clone());
    crate::metrics::record_request(&route, method.as_str(), status, started.elapsed());
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    if status >= 500 {
        tracing::error!(%method, %path, status, latency_ms, "request failed");
    } else {
        tracing::info!(%method, %path, status, latency_ms, "request");
    }
    response
}
