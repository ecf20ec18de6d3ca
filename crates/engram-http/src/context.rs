//! Per-request context and the final shape of every response. Each request gets a request id
//! (taken from a well-formed `X-Request-ID` or generated) and its API generation, decided by
//! path. Handlers and extractors leave their result in response extensions ([`ErrorParts`],
//! [`EnvelopeParts`]); this middleware writes the generation's body around it, with the request
//! id and latency, so both generations' contracts are kept in one place. A 4xx or 5xx that
//! axum itself produced (unknown method, body too large) is turned into the same error shape.

use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use engram_types::ErrorCode;
use serde_json::{json, Map, Value};
use tracing::Instrument;

use crate::error::ErrorParts;

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub const API_VERSION: HeaderName = HeaderName::from_static("api-version");

/// Which API generation a route belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// `/tenants/*`, `/ingestion/*`, …: plain objects, `{detail:{…}}` errors.
    Legacy,
    /// `/databases`, `/context/*`, `/query`, `/connectors*`, `/webhooks/indexing*`: the envelope.
    Current,
    /// `/healthz`, `/openapi.json`: answered as they are.
    Plain,
}

impl Generation {
    pub fn of_path(path: &str) -> Self {
        let under = |prefix: &str| {
            path.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        if [
            "/databases",
            "/context",
            "/query",
            "/connectors",
            "/webhooks",
        ]
        .into_iter()
        .any(under)
        {
            Self::Current
        } else if ["/healthz", "/openapi.json"].into_iter().any(under) {
            Self::Plain
        } else {
            Self::Legacy
        }
    }
}

/// A successful current-generation result, to be wrapped in the envelope.
#[derive(Debug, Clone)]
pub struct EnvelopeParts {
    pub data: Value,
    /// Extra `meta` fields (`database`, `collection`, … on scoped calls).
    pub meta: Map<String, Value>,
    /// `meta.deprecation` entries for deprecated aliases the request used.
    pub deprecations: Vec<Value>,
}

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

/// The request's id, generation and final shape; every log line written while the request is
/// served carries its id (a span around the whole request).
pub async fn request_context(req: Request, next: Next) -> Response {
    let request_id = request_id_from(&req);
    let span = tracing::info_span!("request", request_id = %request_id);
    serve(req, next, request_id).instrument(span).await
}

async fn serve(req: Request, next: Next, request_id: String) -> Response {
    let started = Instant::now();
    let generation = Generation::of_path(req.uri().path());
    let method = req.method().clone();
    let path = req.uri().path().to_owned();

    let version = req
        .headers()
        .get(&API_VERSION)
        .map(|v| v.to_str().unwrap_or("").trim().to_owned());
    let response = match version {
        Some(v) if generation == Generation::Current && v != "2" => ErrorParts::new(
            ErrorCode::InvalidParameters,
            format!("unsupported API-Version `{v}`; this route serves API-Version 2"),
        )
        .into_response(),
        _ => next.run(req).await,
    };
    let mut response = finish(response, generation, &request_id, started).await;
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert(REQUEST_ID, value);
    }
    let status = response.status().as_u16();
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    if status >= 500 {
        tracing::error!(%method, %path, status, latency_ms, "request failed");
    } else {
        tracing::info!(%method, %path, status, latency_ms, "request");
    }
    response
}

fn latency_ms(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
}

async fn finish(
    response: Response,
    generation: Generation,
    request_id: &str,
    started: Instant,
) -> Response {
    let (mut parts, body) = response.into_parts();
    let error = parts.extensions.remove::<ErrorParts>();
    let envelope = parts.extensions.remove::<EnvelopeParts>();
    let body_json = match (error, envelope) {
        (Some(error), _) => error_body(&error, generation, request_id, started),
        (None, Some(envelope)) => {
            if !envelope.deprecations.is_empty() {
                parts
                    .headers
                    .insert("deprecation", HeaderValue::from_static("true"));
            }
            success_body(envelope, request_id, started)
        }
        (None, None) if parts.status.is_client_error() || parts.status.is_server_error() => {
            // A rejection produced outside our handlers (axum, tower-http): same contract.
            let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
            let error =
                ErrorParts::from_status(parts.status, String::from_utf8_lossy(&text).trim());
            error_body(&error, generation, request_id, started)
        }
        (None, None) => return Response::from_parts(parts, body),
    };
    parts.headers.insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body_json.to_string()))
}

fn meta(request_id: &str, started: Instant) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert("request_id".into(), json!(request_id));
    meta.insert("latency_ms".into(), json!(latency_ms(started)));
    meta.insert("api_version".into(), json!("2"));
    meta
}

fn success_body(envelope: EnvelopeParts, request_id: &str, started: Instant) -> Value {
    let mut meta = meta(request_id, started);
    meta.extend(envelope.meta);
    if !envelope.deprecations.is_empty() {
        meta.insert("deprecation".into(), Value::Array(envelope.deprecations));
    }
    json!({
        "success": true,
        "data": envelope.data,
        "error": {"code": "", "message": ""},
        "meta": meta,
    })
}

fn error_body(
    error: &ErrorParts,
    generation: Generation,
    request_id: &str,
    started: Instant,
) -> Value {
    match generation {
        Generation::Current => {
            let mut body = json!({
                "success": false,
                "data": null,
                "error": {"code": error.code.as_str(), "message": error.message},
                "meta": meta(request_id, started),
            });
            if matches!(error.code.http_status(), 400 | 422) {
                body["detail"] = json!({
                    "error_code": error.code.as_str(),
                    "message": error.message,
                    "deprecated": false,
                    "deprecated_field": null,
                    "preferred_field": null,
                });
            }
            body
        }
        Generation::Legacy | Generation::Plain => json!({
            "detail": {"success": false, "message": error.message, "error_code": error.code.as_str()}
        }),
    }
}

/// Status of a response that carries no error of ours, mapped to the code registry.
pub fn code_for_status(status: StatusCode) -> ErrorCode {
    match status.as_u16() {
        401 => ErrorCode::Unauthorized,
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        413 => ErrorCode::PayloadTooLarge,
        422 => ErrorCode::ValidationError,
        429 => ErrorCode::RateLimited,
        503 => ErrorCode::ServiceUnavailable,
        400..=499 => ErrorCode::InvalidParameters,
        _ => ErrorCode::InternalError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_follow_the_spec_route_lists() {
        for path in [
            "/databases",
            "/databases/status",
            "/context/ingest",
            "/query",
            "/connectors/x",
            "/webhooks/indexing",
        ] {
            assert_eq!(Generation::of_path(path), Generation::Current, "{path}");
        }
        for path in [
            "/tenants/create",
            "/list/data",
            "/recall/full_recall",
            "/databasesx",
            "/querying",
        ] {
            assert_eq!(Generation::of_path(path), Generation::Legacy, "{path}");
        }
        assert_eq!(Generation::of_path("/healthz"), Generation::Plain);
    }
}
