//! The graph of one source: `GET /context/relations` (its relations, a page at a time).

use axum::extract::State;
use engram_app::{App, RelationsRequest};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::{Envelope, EnvelopeDoc, ErrorEnvelopeDoc};
use crate::error::ApiError;
use crate::extract::{Auth, NotedQuery};
use crate::wire::graph::{relation_groups, RelationGroupDto, Timestamps};
use crate::wire::items::ItemKindDto;
use crate::wire::{Deprecations, ScopeParams};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new().routes(routes!(relations))
}

/// The default page of `GET /context/relations`.
const RELATIONS_LIMIT_DEFAULT: u32 = 5_000;

/// `GET /context/relations`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct RelationsParams {
    /// The source's id.
    #[serde(default)]
    pub id: String,
    /// `knowledge` (default) or `memory`: which graph.
    #[serde(rename = "type")]
    pub kind: Option<ItemKindDto>,
    /// Relations per page: 1 to 10000, default 5000.
    pub limit: Option<i64>,
    /// `next_cursor` of the page before.
    pub cursor: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    pub scope: ScopeParams,
}

/// A page of a source's relations.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RelationsDto {
    /// One element per (source, target) entity pair, with all its evidence on this page.
    pub relations: Vec<RelationGroupDto>,
    pub is_truncated: bool,
    /// Pass as `cursor` for the next page; null on the last.
    pub next_cursor: Option<String>,
    pub success: bool,
    pub message: String,
}

/// The entity relations one source evidences (extracted at indexing, or given with the
/// source), grouped by entity pair. Empty while the source is still being indexed.
#[utoipa::path(get, path = "/context/relations", tag = "context", params(RelationsParams, ScopeParams),
    responses(
        (status = 200, body = EnvelopeDoc<RelationsDto>),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: id missing, limit out of range, a cursor this route did not give"),
        (status = 404, body = ErrorEnvelopeDoc, description = "SOURCE_NOT_FOUND or DATABASE_NOT_FOUND"),
    ))]
async fn relations(
    State(app): State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<RelationsParams>,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let (database, collection) = deprecations.scope_params(params.scope)?;
    let page = app
        .item_relations(
            &who,
            &database,
            RelationsRequest {
                collection: collection.as_deref(),
                id: &params.id,
                kind: params.kind.unwrap_or(ItemKindDto::Knowledge).into(),
                limit: params.limit,
                cursor: params.cursor.as_deref(),
                default_limit: RELATIONS_LIMIT_DEFAULT,
            },
        )
        .await?;
    let data = RelationsDto {
        relations: relation_groups(&page.relations, Timestamps::Rfc3339),
        is_truncated: page.next_cursor.is_some(),
        next_cursor: page.next_cursor.clone(),
        success: true,
        message: format!("{} relations", page.relations.len()),
    };
    let collection = page.collection.to_string();
    Ok(Envelope::ok(&data)
        .scoped(&page.database, Some(&collection))
        .deprecations(deprecations)
        .ignored(&ignored))
}
