//! Legacy `GET /list/graph_relations_by_id`: one source's relations, `tenant_id` names.

use axum::extract::State;
use engram_app::{App, RelationsRequest};
use engram_types::ItemKind;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{content, tenant};
use crate::envelope::LegacyErrorDoc;
use crate::error::ApiError;
use crate::extract::{Auth, Query};
use crate::wire::graph::{relation_groups, RelationGroupDto, Timestamps};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new().routes(routes!(graph_relations_by_id))
}

/// The legacy route's default page.
const LEGACY_RELATIONS_LIMIT_DEFAULT: u32 = 250;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct GraphRelationsParams {
    /// The source's id.
    #[serde(default)]
    pub source_id: String,
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    /// The memory graph instead of the knowledge graph.
    #[serde(default)]
    pub is_memory: bool,
    /// 1 to 10000, default 250.
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct GraphRelationsResponse {
    pub success: bool,
    pub message: String,
    pub relations: Vec<RelationGroupDto>,
}

/// The entity relations of one source (legacy), grouped by entity pair.
#[utoipa::path(get, path = "/list/graph_relations_by_id", tag = "legacy content", security(("bearer" = ["read"])), params(GraphRelationsParams),
    responses((status = 200, body = GraphRelationsResponse),
        (status = 400, body = LegacyErrorDoc, description = "INVALID_PARAMETERS"),
        (status = 404, body = LegacyErrorDoc, description = "TENANT_NOT_FOUND or SOURCE_NOT_FOUND")))]
async fn graph_relations_by_id(
    State(app): State<App>,
    Auth(who): Auth,
    Query(params): Query<GraphRelationsParams>,
) -> Result<axum::Json<GraphRelationsResponse>, ApiError> {
    let database = tenant(params.tenant_id)?;
    let page = app
        .item_relations(
            &who,
            &database,
            RelationsRequest {
                collection: params.sub_tenant_id.as_deref(),
                id: &params.source_id,
                kind: if params.is_memory {
                    ItemKind::Memory
                } else {
                    ItemKind::Knowledge
                },
                limit: params.limit,
                cursor: None,
                default_limit: LEGACY_RELATIONS_LIMIT_DEFAULT,
            },
        )
        .await
        .map_err(content)?;
    Ok(axum::Json(GraphRelationsResponse {
        success: true,
        message: format!("{} relations", page.relations.len()),
        relations: relation_groups(&page.relations, Timestamps::EpochSeconds),
    }))
}
