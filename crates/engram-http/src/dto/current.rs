//! Wire types of the current generation (`API-Version: 2`). Responses are the `data` of the
//! envelope.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::FieldDto;

/// `POST /databases`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateDatabaseRequest {
    /// Name of the database, unique in the organization: 1-25 letters, digits, `-`, `_`.
    pub database: Option<String>,
    /// Deprecated alias of `database`.
    pub tenant_id: Option<String>,
    /// Typed metadata fields; immutable afterwards except for adding fields.
    pub database_metadata_schema: Option<Vec<FieldDto>>,
    /// Deprecated alias of `database_metadata_schema`.
    pub tenant_metadata_schema: Option<Vec<FieldDto>>,
    /// Embedding dimension (default 384).
    pub embeddings_dimension: Option<u32>,
    #[serde(default)]
    pub is_embeddings_tenant: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedDatabase {
    pub database: String,
    pub tenant_id: String,
    /// Always `accepted`: provisioning continues in the background.
    pub status: &'static str,
    pub message: String,
}

/// The database addressed by a query string.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DatabaseParams {
    /// Database name.
    #[serde(default, deserialize_with = "crate::dto::present")]
    pub database: Option<String>,
    /// Deprecated alias of `database`.
    #[serde(default, deserialize_with = "crate::dto::present")]
    pub tenant_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DatabaseList {
    pub databases: Vec<String>,
    /// Deprecated copy of `databases`.
    pub tenant_ids: Vec<String>,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct VectorstoreStatus {
    pub knowledge: bool,
    pub memories: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Infra {
    pub scheduler_status: bool,
    pub graph_status: bool,
    pub vectorstore_status: VectorstoreStatus,
    /// True when every flag above is true.
    pub ready_for_ingestion: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DatabaseStatus {
    pub database: String,
    pub org_id: String,
    pub tenant_id: String,
    pub infra: Infra,
    /// The typed metadata fields of the database.
    pub database_metadata_schema: Vec<FieldDto>,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CollectionList {
    pub collections: Vec<String>,
    /// Deprecated copy of `collections`.
    pub sub_tenant_ids: Vec<String>,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RowCount {
    pub row_count: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DatabaseStats {
    pub database: String,
    pub tenant_id: String,
    pub knowledge_collection: RowCount,
    pub memory_collection: RowCount,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeletedDatabase {
    pub database: String,
    pub tenant_id: String,
    /// Always `deletion_scheduled`.
    pub status: &'static str,
    pub message: String,
}

/// `PATCH /databases/{database}/metadata-schema`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AddSchemaFieldsRequest {
    pub add_fields: Vec<FieldDto>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AddedSchemaFields {
    pub added_fields: Vec<String>,
    pub database: String,
    pub tenant_id: String,
    /// The whole schema after the change.
    pub database_metadata_schema: Vec<FieldDto>,
}
