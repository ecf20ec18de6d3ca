//! The response contract of both generations, in one place. Handlers leave their result in
//! response extensions ([`EnvelopeParts`] through [`Envelope`], or [`ErrorParts`]) and each
//! generation's router marks its responses with its [`Generation`]; [`finish`] then writes the
//! body in that generation's shape with the request id and latency. A 4xx or 5xx that axum
//! itself produced (unknown method, body too large) gets the same shape.

use std::time::Instant;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use engram_app::DatabaseRecord;
use serde::Serialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use crate::error::ErrorParts;
use crate::wire::Deprecations;

/// The API generation that answered a request, set on each generation's router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Generation {
    /// `{detail:{…}}` errors, plain objects.
    Legacy,
    /// The envelope `{success, data, error, meta}` (`API-Version: 2`).
    Current,
    /// Answered as they are (`/healthz`, `/openapi.json`); errors as legacy.
    Plain,
}

impl Generation {
    /// Marks a response as this generation's (the routers' response layer).
    pub(crate) fn mark(self, mut response: Response) -> Response {
        response.extensions_mut().insert(self);
        response
    }
}

/// A successful current-generation result, to be wrapped in the envelope.
#[derive(Debug, Clone)]
pub(crate) struct EnvelopeParts {
    pub data: Value,
    /// Extra `meta` fields (`database`, `collection`, … on scoped calls).
    pub meta: Map<String, Value>,
    /// `meta.deprecation` entries for deprecated aliases the request used.
    pub deprecations: Vec<Value>,
}

/// A success in the envelope `{success, data, error, meta}`.
pub(crate) struct Envelope {
    status: StatusCode,
    parts: EnvelopeParts,
}

impl Envelope {
    pub(crate) fn new(status: StatusCode, data: &impl Serialize) -> Self {
        let data = serde_json::to_value(data).unwrap_or_else(|err| {
            tracing::error!(error = %err, "response data did not serialize");
            Value::Null
        });
        Self {
            status,
            parts: EnvelopeParts {
                data,
                meta: Map::new(),
                deprecations: Vec::new(),
            },
        }
    }

    pub(crate) fn ok(data: &impl Serialize) -> Self {
        Self::new(StatusCode::OK, data)
    }

    /// Adds the scope fields of `meta` for a call on one database.
    pub(crate) fn scoped(mut self, db: &DatabaseRecord, collection: Option<&str>) -> Self {
        let meta = &mut self.parts.meta;
        meta.insert("database".into(), json!(db.name.as_str()));
        meta.insert("tenant_id".into(), json!(db.name.as_str()));
        if let Some(collection) = collection {
            meta.insert("collection".into(), json!(collection));
            meta.insert("sub_tenant_id".into(), json!(collection));
        }
        self
    }

    /// Sets `meta.source_type` (`knowledge` or `memory`).
    pub(crate) fn source_type(&mut self, kind: &str) {
        self.parts.meta.insert("source_type".into(), json!(kind));
    }

    /// Sets one more `meta` field.
    pub(crate) fn meta(&mut self, key: &str, value: Value) {
        self.parts.meta.insert(key.into(), value);
    }

    pub(crate) fn deprecations(mut self, deprecations: Deprecations) -> Self {
        self.parts.deprecations = deprecations.into_vec();
        self
    }
}

impl IntoResponse for Envelope {
    fn into_response(self) -> Response {
        let mut response = self.status.into_response();
        response.extensions_mut().insert(self.parts);
        response
    }
}

/// The envelope as documented in the OpenAPI document.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct EnvelopeDoc<T> {
    pub success: bool,
    pub data: T,
    pub error: ErrorObject,
    pub meta: Meta,
}

/// `{code, message}`; both empty on success.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct ErrorObject {
    pub code: String,
    pub message: String,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct Meta {
    pub request_id: String,
    pub latency_ms: f64,
    pub api_version: String,
    pub database: Option<String>,
    pub collection: Option<String>,
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    /// Deprecated aliases the request used.
    pub deprecation: Option<Vec<DeprecationDoc>>,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct DeprecationDoc {
    pub deprecated: bool,
    pub deprecated_field: String,
    pub deprecated_since: String,
    pub message: String,
    pub preferred_field: String,
}

/// The current error body.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct ErrorEnvelopeDoc {
    /// Always false.
    pub success: bool,
    /// Always null.
    pub data: Option<String>,
    pub error: ErrorObject,
    pub meta: Meta,
}

/// The legacy error body `{detail: {success, message, error_code}}`.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct LegacyErrorDoc {
    pub detail: LegacyErrorDetail,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct LegacyErrorDetail {
    pub success: bool,
    pub message: String,
    pub error_code: Option<String>,
}

fn latency_ms(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// Writes the body of a response in its generation's shape (unmarked: as legacy).
pub(crate) async fn finish(response: Response, request_id: &str, started: Instant) -> Response {
    let (mut parts, body) = response.into_parts();
    let generation = parts
        .extensions
        .remove::<Generation>()
        .unwrap_or(Generation::Plain);
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
