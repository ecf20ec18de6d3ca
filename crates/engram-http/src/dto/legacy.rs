//! Wire types of the legacy generation (`/tenants/*`): plain objects. Frozen.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::FieldDto;

/// `POST /tenants/create`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateTenantRequest {
    pub tenant_id: Option<String>,
    pub tenant_metadata_schema: Option<Vec<FieldDto>>,
    pub embeddings_dimension: Option<u32>,
    #[serde(default)]
    pub is_embeddings_tenant: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TenantCreated {
    pub status: &'static str,
    pub tenant_id: String,
    pub message: String,
}

/// The tenant addressed by a query string.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TenantParams {
    #[serde(default, deserialize_with = "crate::dto::present")]
    pub tenant_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TenantInfra {
    pub scheduler_status: bool,
    pub graph_status: bool,
    /// `[memories_ready, knowledge_ready]`.
    pub vectorstore_status: [bool; 2],
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TenantInfraStatus {
    pub tenant_id: String,
    pub org_id: String,
    pub infra: TenantInfra,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CollectionCount {
    pub row_count: u64,
    pub dimensions: u32,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TenantMonitor {
    pub tenant_id: String,
    pub normal_collection: CollectionCount,
    pub memory_collection: CollectionCount,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SubTenantIds {
    pub sub_tenant_ids: Vec<String>,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TenantIds {
    pub tenant_ids: Vec<String>,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TenantDeleted {
    pub tenant_id: String,
    pub status: &'static str,
    pub message: String,
}
