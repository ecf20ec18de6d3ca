//! Legacy tenant routes: `/tenants/*`. Plain objects; `{detail:{…}}` errors.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use engram_app::{App, CreateDatabase};
use engram_types::ErrorCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::wire::*;
use super::{legacy, tenant};
use crate::envelope::LegacyErrorDoc;
use crate::error::ApiError;
use crate::extract::{Auth, Json, Query};
use crate::wire::Ignored;

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(create_tenant))
        .routes(routes!(infra_status))
        .routes(routes!(monitor))
        .routes(routes!(sub_tenant_ids))
        .routes(routes!(tenant_ids))
        .routes(routes!(delete_tenant))
}

/// Create a tenant (legacy). A duplicate id is 409 `INVALID_INPUT`.
#[utoipa::path(post, path = "/tenants/create", tag = "tenants (legacy)", security(("bearer" = ["admin"])), request_body = CreateTenantRequest,
    responses(
        (status = 202, body = TenantCreated),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_TENANT_ID or INVALID_PARAMETERS"),
        (status = 409, body = LegacyErrorDoc, description = "INVALID_INPUT: tenant id in use"),
        (status = 422, body = LegacyErrorDoc, description = "VALIDATION_ERROR"),
    ))]
async fn create_tenant(
    State(app): State<App>,
    Auth(who): Auth,
    Json(body): Json<CreateTenantRequest>,
) -> Result<Response, ApiError> {
    let name = tenant(body.tenant_id.clone())?;
    let mut ignored = Ignored::of_unknown(&body.unknown);
    crate::wire::FieldDto::note_inert(
        body.tenant_metadata_schema.as_deref().unwrap_or_default(),
        "tenant_metadata_schema",
        &mut ignored,
    );
    let request = body.into_request(&name);
    for (parameter, reason) in request.inert() {
        ignored.note(parameter, reason);
    }
    let db = app
        .create_database(&who, request)
        .await
        .map_err(|e| legacy(e).recode(ErrorCode::DatabaseAlreadyExists, ErrorCode::InvalidInput))?;
    let response = (StatusCode::ACCEPTED, axum::Json(TenantCreated::from(&db))).into_response();
    Ok(super::warned(response, &ignored))
}

/// Provisioning readiness flags (legacy).
#[utoipa::path(get, path = "/tenants/infra/status", tag = "tenants (legacy)", security(("bearer" = ["read"])), params(TenantParams),
    responses((status = 200, body = TenantInfraStatus), (status = 404, body = LegacyErrorDoc)))]
async fn infra_status(
    State(app): State<App>,
    Auth(who): Auth,
    Query(params): Query<TenantParams>,
) -> Result<axum::Json<TenantInfraStatus>, ApiError> {
    let db = app
        .database(&who, &tenant(params.tenant_id)?)
        .await
        .map_err(legacy)?;
    Ok(axum::Json(TenantInfraStatus::from(&db)))
}

/// Object counts (legacy).
#[utoipa::path(get, path = "/tenants/monitor", tag = "tenants (legacy)", security(("bearer" = ["read"])), params(TenantParams),
    responses((status = 200, body = TenantMonitor), (status = 404, body = LegacyErrorDoc)))]
async fn monitor(
    State(app): State<App>,
    Auth(who): Auth,
    Query(params): Query<TenantParams>,
) -> Result<axum::Json<TenantMonitor>, ApiError> {
    let stats = app
        .database_stats(&who, &tenant(params.tenant_id)?)
        .await
        .map_err(legacy)?;
    Ok(axum::Json(TenantMonitor::from(&stats)))
}

/// Sub-tenants of a tenant (legacy).
#[utoipa::path(get, path = "/tenants/sub_tenant_ids", tag = "tenants (legacy)", security(("bearer" = ["read"])), params(TenantParams),
    responses((status = 200, body = SubTenantIds), (status = 404, body = LegacyErrorDoc)))]
async fn sub_tenant_ids(
    State(app): State<App>,
    Auth(who): Auth,
    Query(params): Query<TenantParams>,
) -> Result<axum::Json<SubTenantIds>, ApiError> {
    let names = app
        .list_collections(&who, &tenant(params.tenant_id)?)
        .await
        .map_err(legacy)?;
    let sub_tenant_ids: Vec<String> = names.into_iter().map(|c| c.to_string()).collect();
    let message = format!("{} sub-tenants", sub_tenant_ids.len());
    Ok(axum::Json(SubTenantIds {
        sub_tenant_ids,
        message,
    }))
}

/// Tenants of the organization (legacy).
#[utoipa::path(get, path = "/tenants/tenant_ids", tag = "tenants (legacy)", security(("bearer" = ["read"])),
    responses((status = 200, body = TenantIds)))]
async fn tenant_ids(
    State(app): State<App>,
    Auth(who): Auth,
) -> Result<axum::Json<TenantIds>, ApiError> {
    let tenant_ids: Vec<String> = app
        .list_databases(&who)
        .await
        .map_err(legacy)?
        .into_iter()
        .map(|d| d.name.to_string())
        .collect();
    let message = format!("{} tenants", tenant_ids.len());
    Ok(axum::Json(TenantIds {
        tenant_ids,
        message,
    }))
}

/// Delete a tenant: scheduled, asynchronous, irreversible (legacy).
#[utoipa::path(delete, path = "/tenants/delete", tag = "tenants (legacy)", security(("bearer" = ["admin"])), params(TenantParams),
    responses((status = 200, body = TenantDeleted), (status = 404, body = LegacyErrorDoc)))]
async fn delete_tenant(
    State(app): State<App>,
    Auth(who): Auth,
    Query(params): Query<TenantParams>,
) -> Result<axum::Json<TenantDeleted>, ApiError> {
    let db = app
        .delete_database(&who, &tenant(params.tenant_id)?)
        .await
        .map_err(legacy)?;
    Ok(axum::Json(TenantDeleted {
        tenant_id: db.name.to_string(),
        status: "deletion_scheduled",
        message: format!("tenant `{}` is scheduled for deletion", db.name),
    }))
}

impl CreateTenantRequest {
    /// The app's request for the (already checked) tenant `name`.
    fn into_request(self, name: &engram_types::DatabaseName) -> CreateDatabase {
        CreateDatabase {
            name: name.to_string(),
            schema: self
                .tenant_metadata_schema
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            embeddings_dimension: self.embeddings_dimension,
            is_embeddings_tenant: self.is_embeddings_tenant,
        }
    }
}

impl From<&engram_app::DatabaseRecord> for TenantCreated {
    fn from(db: &engram_app::DatabaseRecord) -> Self {
        Self {
            status: "accepted",
            tenant_id: db.name.to_string(),
            message: format!(
                "tenant `{}` accepted; provisioning in the background",
                db.name
            ),
        }
    }
}

impl From<&engram_app::DatabaseRecord> for TenantInfraStatus {
    fn from(db: &engram_app::DatabaseRecord) -> Self {
        let infra = db.infra;
        Self {
            tenant_id: db.name.to_string(),
            org_id: db.org.to_string(),
            infra: TenantInfra {
                scheduler_status: infra.scheduler,
                graph_status: infra.graph,
                vectorstore_status: [infra.memory_vectors, infra.knowledge_vectors],
            },
            message: if infra.all_ready() {
                "tenant is ready".into()
            } else {
                "tenant is provisioning".into()
            },
        }
    }
}

impl From<&engram_app::DatabaseStats> for TenantMonitor {
    fn from(stats: &engram_app::DatabaseStats) -> Self {
        let dimensions = stats.database.vector_dimension();
        Self {
            tenant_id: stats.database.name.to_string(),
            normal_collection: CollectionCount {
                row_count: stats.counts.knowledge_chunks,
                dimensions,
            },
            memory_collection: CollectionCount {
                row_count: stats.counts.memory_chunks,
                dimensions,
            },
            message: format!("{} sub-tenants", stats.counts.collections),
        }
    }
}
