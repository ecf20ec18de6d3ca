//! The graph of one source: `GET /context/relations` (its relations, a page at a time) and
//! `GET /context/subgraph` (the sources linked to it, breadth first).

use axum::extract::{Path, State};
use engram_app::{App, RelationsRequest, Subgraph, SubgraphRequest};
use engram_types::ItemKind;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::envelope::{Envelope, EnvelopeDoc, ErrorEnvelopeDoc};
use crate::error::ApiError;
use crate::extract::{Auth, NotedQuery};
use crate::wire::graph::{
    relation_groups, EntityDto, RelationEvidenceDto, RelationGroupDto, Timestamps,
};
use crate::wire::items::{ChunkCorpusDto, ItemKindDto};
use crate::wire::{Deprecations, ScopeParams};

pub(super) fn routes() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(relations))
        .routes(routes!(subgraph))
        .routes(routes!(subgraph_by_path))
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
#[utoipa::path(get, path = "/context/relations", tag = "context", security(("bearer" = ["read"])), params(RelationsParams, ScopeParams),
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

/// `GET /context/subgraph` and `GET /context/{id}/subgraph`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct SubgraphParams {
    /// The seed source's id (the query form; the path form names it in the path).
    #[serde(default)]
    pub id: String,
    /// `knowledge` (default), `memory`, or `all` (answered from knowledge).
    #[serde(rename = "type")]
    pub kind: Option<ChunkCorpusDto>,
    /// Most hops from the seed: 1 to 5, default 2.
    pub depth: Option<i64>,
    /// Most sources returned, seed included: 1 to 500, default 50.
    pub max_sources: Option<i64>,
    #[serde(flatten)]
    #[param(ignore)]
    pub scope: ScopeParams,
}

/// A source of a subgraph.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SubgraphSourceDto {
    pub source_id: String,
    pub title: String,
    /// Hops from the seed (0 for the seed).
    pub depth: u32,
    /// The member it was first reached from; empty for the seed.
    pub discovered_via: String,
    /// How: `relates_to` (a declared link); empty for the seed.
    pub discovered_relation: String,
    /// `resolved`: every member is an ingested source.
    pub hydration: &'static str,
}

/// The sources connected to one source.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SubgraphDto {
    pub seed_source_id: String,
    /// Seed first, then in discovery order (breadth first).
    pub sources: Vec<SubgraphSourceDto>,
    /// Source -> source: the declared links (`RELATES_TO`) between members.
    pub relations: Vec<RelationGroupDto>,
    /// Entity -> source: the entities each member's chunks mention (`MENTIONED_IN`).
    pub auxiliary_relations: Vec<RelationGroupDto>,
    pub auxiliary_truncated: bool,
    /// The depth or source bound left connected sources out.
    pub is_truncated: bool,
    pub max_depth_reached: u32,
    pub success: bool,
    pub message: String,
}

fn source_node(id: &str, title: &str) -> EntityDto {
    EntityDto {
        name: if title.is_empty() { id } else { title }.to_owned(),
        kind: "SOURCE".into(),
        namespace: "default".into(),
        entity_id: id.to_owned(),
        identifier: Some(id.to_owned()),
    }
}

fn structural(source: EntityDto, target: EntityDto, predicate: &str) -> RelationGroupDto {
    let evidence = RelationEvidenceDto {
        canonical_predicate: predicate.to_uppercase(),
        raw_predicate: predicate.to_lowercase().replace('_', " "),
        context: String::new(),
        confidence: 1.0,
        temporal_details: None,
        timestamp: serde_json::Value::Null,
        relationship_id: format!(
            "{}:{}:{}",
            predicate.to_lowercase(),
            source.entity_id,
            target.entity_id
        ),
        chunk_id: String::new(),
        source_entity_id: source.entity_id.clone(),
        target_entity_id: target.entity_id.clone(),
        origin: None,
    };
    RelationGroupDto {
        source,
        target,
        relations: vec![evidence],
        chunk_id: String::new(),
    }
}

impl From<&Subgraph> for SubgraphDto {
    fn from(g: &Subgraph) -> Self {
        let titles: std::collections::HashMap<i64, (&str, &str)> = g
            .members
            .iter()
            .map(|m| (m.item.item_key, (m.item.id.as_str(), m.item.title.as_str())))
            .collect();
        Self {
            seed_source_id: g.seed.clone(),
            sources: g
                .members
                .iter()
                .map(|m| SubgraphSourceDto {
                    source_id: m.item.id.clone(),
                    title: m.item.title.clone(),
                    depth: m.depth,
                    discovered_via: m.via.clone().unwrap_or_default(),
                    discovered_relation: if m.via.is_some() { "relates_to" } else { "" }.into(),
                    hydration: "resolved",
                })
                .collect(),
            relations: g
                .links
                .iter()
                .map(|l| {
                    structural(
                        source_node(&l.from.id, &l.from.title),
                        source_node(&l.to.id, &l.to.title),
                        "RELATES_TO",
                    )
                })
                .collect(),
            auxiliary_relations: g
                .entities
                .iter()
                .filter_map(|(key, entity)| {
                    let (id, title) = titles.get(key)?;
                    Some(structural(
                        EntityDto::from(entity),
                        source_node(id, title),
                        "MENTIONED_IN",
                    ))
                })
                .collect(),
            auxiliary_truncated: g.entities_truncated,
            is_truncated: g.is_truncated,
            max_depth_reached: g.max_depth_reached,
            success: true,
            message: format!("{} sources, {} links", g.members.len(), g.links.len()),
        }
    }
}

/// The sources connected to one source through the links sources declare at ingestion
/// (`relations.ids`, either way), breadth first, within the collection; the links among them
/// and the entities their chunks mention. An unknown id gives an empty subgraph, not an error.
#[utoipa::path(get, path = "/context/subgraph", tag = "context", security(("bearer" = ["read"])), params(SubgraphParams, ScopeParams),
    responses(
        (status = 200, body = EnvelopeDoc<SubgraphDto>),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: id missing, depth or max_sources out of range"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn subgraph(
    State(app): State<App>,
    Auth(who): Auth,
    NotedQuery(params, ignored): NotedQuery<SubgraphParams>,
) -> Result<Envelope, ApiError> {
    let id = params.id.clone();
    answer_subgraph(&app, &who, params, &id, ignored).await
}

/// The path form of `GET /context/subgraph`: the same parameters, answer and rules.
#[utoipa::path(get, path = "/context/{id}/subgraph", tag = "context", security(("bearer" = ["read"])),
    params(("id" = String, Path, description = "the seed source's id"), SubgraphParams, ScopeParams),
    responses(
        (status = 200, body = EnvelopeDoc<SubgraphDto>),
        (status = 400, body = ErrorEnvelopeDoc, description = "INVALID_PARAMETERS: depth or max_sources out of range"),
        (status = 404, body = ErrorEnvelopeDoc, description = "DATABASE_NOT_FOUND"),
    ))]
async fn subgraph_by_path(
    State(app): State<App>,
    Auth(who): Auth,
    Path(id): Path<String>,
    NotedQuery(params, ignored): NotedQuery<SubgraphParams>,
) -> Result<Envelope, ApiError> {
    answer_subgraph(&app, &who, params, &id, ignored).await
}

async fn answer_subgraph(
    app: &App,
    who: &engram_app::Principal,
    params: SubgraphParams,
    id: &str,
    ignored: crate::wire::Ignored,
) -> Result<Envelope, ApiError> {
    let mut deprecations = Deprecations::default();
    let (database, collection) = deprecations.scope_params(params.scope)?;
    let kind = match params.kind {
        Some(ChunkCorpusDto::Memory) => ItemKind::Memory,
        _ => ItemKind::Knowledge,
    };
    let graph = app
        .subgraph(
            who,
            &database,
            SubgraphRequest {
                collection: collection.as_deref(),
                id,
                kind,
                depth: params.depth,
                max_sources: params.max_sources,
            },
        )
        .await?;
    let collection = graph.collection.to_string();
    let mut envelope = Envelope::ok(&SubgraphDto::from(&graph))
        .scoped(&graph.database, Some(&collection))
        .deprecations(deprecations)
        .ignored(&ignored);
    envelope.source_type(kind.as_str());
    Ok(envelope)
}
