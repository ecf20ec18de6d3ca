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
use crate::wire::{Deprecations, Ignored};

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

/// Marks a response whose body is final as it is (the console's HTML pages, errors included).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rendered;

/// A successful current-generation result, to be wrapped in the envelope.
#[derive(Debug, Clone)]
pub(crate) struct EnvelopeParts {
    pub data: Value,
    /// The database and collection of a scoped call.
    pub scope: Scope,
    /// Route-specific `meta` fields (`source_type`, `mode`, …).
    pub more: Map<String, Value>,
    /// `meta.deprecation` entries for deprecated aliases the request used.
    pub deprecations: Vec<Deprecation>,
    /// The fields of `data` are also written at the top level, for routes whose documented
    /// answer is a plain object while the hosted service's clients read the envelope.
    pub plain_too: bool,
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
                scope: Scope::default(),
                more: Map::new(),
                deprecations: Vec::new(),
                plain_too: false,
            },
        }
    }

    pub(crate) fn ok(data: &impl Serialize) -> Self {
        Self::new(StatusCode::OK, data)
    }

    /// Adds the scope fields of `meta` for a call on one database.
    pub(crate) fn scoped(mut self, db: &DatabaseRecord, collection: Option<&str>) -> Self {
        self.parts.scope = Scope {
            database: Some(db.name.to_string()),
            tenant_id: Some(db.name.to_string()),
            collection: collection.map(str::to_owned),
            sub_tenant_id: collection.map(str::to_owned),
        };
        self
    }

    /// Also writes the fields of `data` at the top level (see [`plain`]).
    pub(crate) fn plain_too(mut self) -> Self {
        self.parts.plain_too = true;
        self
    }

    /// Sets `meta.source_type` (`knowledge` or `memory`).
    pub(crate) fn source_type(&mut self, kind: &str) {
        self.parts.more.insert("source_type".into(), json!(kind));
    }

    /// Sets one more `meta` field.
    pub(crate) fn meta(&mut self, key: &str, value: Value) {
        self.parts.more.insert(key.into(), value);
    }

    /// Sets `meta.ignored_parameters` when the request sent fields engram does not act on.
    pub(crate) fn ignored(mut self, ignored: &Ignored) -> Self {
        if let Some(list) = ignored.to_json() {
            self.meta("ignored_parameters", list);
        }
        self
    }

    pub(crate) fn deprecations(mut self, deprecations: Deprecations) -> Self {
        self.parts.deprecations = deprecations.into_vec();
        self
    }
}

/// A current-generation success whose documented answer is a plain object (webhook management,
/// instructions, schema additions): its fields at the top level, and the same object again as
/// the envelope's `data` beside `success`, `error` and `meta`, so that readers of either shape
/// (the spec's, the hosted service's clients) find what they expect.
pub(crate) fn plain(status: StatusCode, body: impl Serialize) -> Response {
    plain_noting(status, body, &Ignored::default())
}

/// [`plain`], with the request's ignored fields in `meta.ignored_parameters`.
pub(crate) fn plain_noting(
    status: StatusCode,
    body: impl Serialize,
    ignored: &Ignored,
) -> Response {
    Envelope::new(status, &body)
        .plain_too()
        .ignored(ignored)
        .into_response()
}

impl IntoResponse for Envelope {
    fn into_response(self) -> Response {
        let mut response = self.status.into_response();
        response.extensions_mut().insert(self.parts);
        response
    }
}

/// The current envelope `{success, data, error, meta}`, success and error alike: what
/// [`finish`] writes and what the OpenAPI document shows.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct EnvelopeDoc<T> {
    pub success: bool,
    /// The result; null on an error.
    pub data: T,
    pub error: ErrorObject,
    pub meta: Meta,
    /// 400 and 422 only: the error again, in the hosted service's `detail` shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<ErrorDetail>,
}

/// The current error body: the envelope with `data` null.
pub(crate) type ErrorEnvelopeDoc = EnvelopeDoc<Value>;

/// `{code, message}`; both empty on success.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorObject {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct Meta {
    pub request_id: String,
    pub latency_ms: f64,
    pub api_version: String,
    #[serde(flatten)]
    pub scope: Scope,
    /// Route-specific fields (`source_type`, `mode`, `alpha`, …).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub more: Map<String, Value>,
    /// Deprecated aliases the request used.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deprecation: Vec<Deprecation>,
}

/// The database and collection of a scoped call, under their current and deprecated names.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
pub(crate) struct Scope {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collection: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sub_tenant_id: Option<String>,
}

/// A deprecated alias a request used, reported in `meta.deprecation`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub(crate) struct Deprecation {
    pub deprecated: bool,
    pub deprecated_field: String,
    pub preferred_field: String,
    pub deprecated_since: String,
    pub message: String,
}

/// The `detail` of a current 400 or 422.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorDetail {
    pub error_code: String,
    pub message: String,
    pub deprecated: bool,
    pub deprecated_field: Option<String>,
    pub preferred_field: Option<String>,
}

/// The legacy error body `{detail: {success, message, error_code}}`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LegacyErrorDoc {
    pub detail: LegacyErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LegacyErrorDetail {
    pub success: bool,
    pub message: String,
    pub error_code: String,
}

fn latency_ms(started: Instant) -> f64 {
    (started.elapsed().as_secs_f64() * 1_000_000.0).round() / 1000.0
}

/// Writes the body of a response in its generation's shape (unmarked: as legacy).
pub(crate) async fn finish(response: Response, request_id: &str, started: Instant) -> Response {
    let (mut parts, body) = response.into_parts();
    if parts.extensions.remove::<Rendered>().is_some() {
        return Response::from_parts(parts, body);
    }
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

fn meta(request_id: &str, started: Instant) -> Meta {
    Meta {
        request_id: request_id.to_owned(),
        latency_ms: latency_ms(started),
        api_version: "2".into(),
        scope: Scope::default(),
        more: Map::new(),
        deprecation: Vec::new(),
    }
}

fn to_json(body: &impl Serialize) -> Value {
    serde_json::to_value(body).unwrap_or_else(|err| {
        tracing::error!(error = %err, "response body did not serialize");
        Value::Null
    })
}

fn success_body(envelope: EnvelopeParts, request_id: &str, started: Instant) -> Value {
    let top_level = envelope
        .plain_too
        .then(|| envelope.data.as_object().cloned())
        .flatten();
    let mut body = to_json(&EnvelopeDoc {
        success: true,
        data: envelope.data,
        error: ErrorObject {
            code: String::new(),
            message: String::new(),
        },
        meta: Meta {
            scope: envelope.scope,
            more: envelope.more,
            deprecation: envelope.deprecations,
            ..meta(request_id, started)
        },
        detail: None,
    });
    if let (Some(fields), Some(object)) = (top_level, body.as_object_mut()) {
        for (key, value) in fields {
            object.entry(key).or_insert(value);
        }
    }
    body
}

fn error_body(
    error: &ErrorParts,
    generation: Generation,
    request_id: &str,
    started: Instant,
) -> Value {
    let code = error.code.as_str().to_owned();
    match generation {
        Generation::Current => to_json(&EnvelopeDoc {
            success: false,
            data: Value::Null,
            error: ErrorObject {
                code: code.clone(),
                message: error.message.clone(),
            },
            meta: meta(request_id, started),
            detail: matches!(error.code.http_status(), 400 | 422).then(|| ErrorDetail {
                error_code: code,
                message: error.message.clone(),
                deprecated: false,
                deprecated_field: None,
                preferred_field: None,
            }),
        }),
        Generation::Legacy | Generation::Plain => to_json(&LegacyErrorDoc {
            detail: LegacyErrorDetail {
                success: false,
                message: error.message.clone(),
                error_code: code,
            },
        }),
    }
}
