//! The current generation's success response; the request-context middleware completes it
//! with the request id, latency and deprecations.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use engram_app::DatabaseRecord;
use serde::Serialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use crate::context::EnvelopeParts;
use crate::dto::Deprecations;

/// A success in the envelope `{success, data, error, meta}`.
pub struct Envelope {
    status: StatusCode,
    parts: EnvelopeParts,
}

impl Envelope {
    pub fn new(status: StatusCode, data: &impl Serialize) -> Self {
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

    pub fn ok(data: &impl Serialize) -> Self {
        Self::new(StatusCode::OK, data)
    }

    /// Adds the scope fields of `meta` for a call on one database.
    pub fn scoped(mut self, db: &DatabaseRecord, collection: Option<&str>) -> Self {
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
    pub fn source_type(&mut self, kind: &str) {
        self.parts.meta.insert("source_type".into(), json!(kind));
    }

    /// Sets one more `meta` field.
    pub fn meta(&mut self, key: &str, value: Value) {
        self.parts.meta.insert(key.into(), value);
    }

    pub fn deprecations(mut self, deprecations: Deprecations) -> Self {
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
pub struct EnvelopeDoc<T> {
    pub success: bool,
    pub data: T,
    pub error: ErrorObject,
    pub meta: Meta,
}

/// `{code, message}`; both empty on success.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ErrorObject {
    pub code: String,
    pub message: String,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub struct Meta {
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
pub struct DeprecationDoc {
    pub deprecated: bool,
    pub deprecated_field: String,
    pub deprecated_since: String,
    pub message: String,
    pub preferred_field: String,
}

/// The current error body.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ErrorEnvelopeDoc {
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
pub struct LegacyErrorDoc {
    pub detail: LegacyErrorDetail,
}

#[derive(ToSchema)]
#[allow(dead_code)]
pub struct LegacyErrorDetail {
    pub success: bool,
    pub message: String,
    pub error_code: Option<String>,
}
