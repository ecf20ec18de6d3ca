//! What both generations' retrieval routes share: `alpha`, graph context, scores, the sources
//! of ranked chunks, and reading enumerated and required fields.

use engram_app::{Alpha, ChunkHit, RankedChunk, TermOperator};

use crate::error::ApiError;
use crate::wire::graph::{evidence_dto, EntityDto, RelationEvidenceDto, Timestamps};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// `alpha`: a number from 0 to 1, or `"auto"`.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(untagged)]
pub(crate) enum AlphaDto {
    Number(f64),
    Text(String),
}

/// What the knowledge graph adds to a query's chunks.
#[derive(Debug, Default, Serialize, ToSchema)]
pub(crate) struct GraphContextDto {
    /// From the entities the query names to the returned chunks, best first.
    pub query_paths: Vec<ScoredPathDto>,
    /// The relations evidenced in each returned chunk, in rank order.
    pub chunk_relations: Vec<ScoredPathDto>,
    /// For each returned chunk on a path: the paths' `group_id`s.
    pub chunk_id_to_group_ids: std::collections::BTreeMap<String, Vec<String>>,
}

/// One step of a path: `source -> relation -> target`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct TripletDto {
    pub source: EntityDto,
    pub relation: RelationEvidenceDto,
    pub target: EntityDto,
}

/// A path of relations with the chunks it leads to.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ScoredPathDto {
    pub triplets: Vec<TripletDto>,
    pub relevancy_score: f64,
    /// The text of the path's evidence.
    pub combined_context: String,
    pub group_id: Option<String>,
    /// `chunk_uuid`s of the returned chunks the path leads to.
    pub source_chunk_ids: Vec<String>,
}

impl From<&engram_app::ScoredPath> for ScoredPathDto {
    fn from(path: &engram_app::ScoredPath) -> Self {
        Self {
            triplets: path
                .triplets
                .iter()
                .map(|r| TripletDto {
                    source: EntityDto::from(&r.source),
                    relation: evidence_dto(r, Timestamps::EpochSeconds),
                    target: EntityDto::from(&r.target),
                })
                .collect(),
            relevancy_score: score(path.score),
            combined_context: path.combined_context.clone(),
            group_id: Some(path.group_id.clone()),
            source_chunk_ids: path.source_chunk_ids.clone(),
        }
    }
}

impl From<&engram_app::GraphContext> for GraphContextDto {
    fn from(context: &engram_app::GraphContext) -> Self {
        Self {
            query_paths: context
                .query_paths
                .iter()
                .map(ScoredPathDto::from)
                .collect(),
            chunk_relations: context
                .chunk_relations
                .iter()
                .map(ScoredPathDto::from)
                .collect(),
            chunk_id_to_group_ids: context.chunk_groups.iter().cloned().collect(),
        }
    }
}

/// A score as sent: six decimals are plenty and avoid `0.800000011920929`.
pub(crate) fn score(x: f32) -> f64 {
    (f64::from(x) * 1e6).round() / 1e6
}

pub(crate) fn object(value: &Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// `source_type` of a hit: the type given at ingestion, else how the item arrived.
/// A chunk's `layout` as the hosted service and its clients carry it: a JSON-encoded string
/// (`"{\"page\": 3}"`), `"{}"` when there is none.
pub(crate) fn layout(hit: &ChunkHit) -> String {
    match &hit.layout {
        Value::Null => "{}".to_owned(),
        layout => layout.to_string(),
    }
}

/// What the current generation says of every chunk it returns (ranked or read directly): the
/// chunk and its source. Flattened into each answer's own chunk type.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ChunkFieldsDto {
    pub chunk_uuid: String,
    pub chunk_content: String,
    pub source_type: String,
    pub source_title: String,
    pub source_upload_time: String,
    pub source_last_updated_time: String,
    /// Where the chunk sits in its source (`page`, `sheet`, `row_range`, `slide`, `headings`),
    /// as a JSON-encoded string.
    pub layout: String,
    pub extra_context_ids: Vec<String>,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    pub collection: String,
    pub sub_tenant_id: String,
}

impl From<&ChunkHit> for ChunkFieldsDto {
    fn from(hit: &ChunkHit) -> Self {
        Self {
            chunk_uuid: hit.chunk_id.clone(),
            chunk_content: hit.content.clone(),
            source_type: source_type(hit),
            source_title: hit.item.fields.title.clone(),
            source_upload_time: engram_app::format_ms(hit.item.created_at),
            source_last_updated_time: engram_app::format_ms(hit.item.updated_at),
            layout: layout(hit),
            extra_context_ids: Vec::new(),
            metadata: object(&hit.item.fields.metadata),
            additional_metadata: object(&hit.item.fields.additional_metadata),
            collection: hit.item.collection.to_string(),
            sub_tenant_id: hit.item.collection.to_string(),
        }
    }
}

pub(crate) fn source_type(hit: &ChunkHit) -> String {
    if hit.item.fields.source_type.is_empty() {
        hit.item.origin.as_str().to_owned()
    } else {
        hit.item.fields.source_type.clone()
    }
}

/// Sources in order of first appearance among the chunks.
pub(crate) fn distinct_sources(chunks: &[RankedChunk]) -> Vec<&ChunkHit> {
    let mut seen = std::collections::HashSet::new();
    chunks
        .iter()
        .map(|c| &c.hit)
        .filter(|hit| seen.insert((hit.item.collection.as_str(), hit.item.id.as_str())))
        .collect()
}

/// `operator` of a keyword query: `or` (default), `and` or `phrase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OperatorDto {
    #[default]
    Or,
    And,
    Phrase,
}

impl From<OperatorDto> for TermOperator {
    fn from(operator: OperatorDto) -> Self {
        match operator {
            OperatorDto::Or => Self::Or,
            OperatorDto::And => Self::And,
            OperatorDto::Phrase => Self::Phrase,
        }
    }
}

pub(crate) fn alpha(value: Option<AlphaDto>) -> Result<Option<Alpha>, ApiError> {
    match value {
        None => Ok(None),
        Some(AlphaDto::Number(a)) => Ok(Some(Alpha::Value(a))),
        Some(AlphaDto::Text(t)) if t.eq_ignore_ascii_case("auto") => Ok(Some(Alpha::Auto)),
        Some(AlphaDto::Text(t)) => Err(ApiError::invalid(format!(
            "`alpha` must be a number from 0 to 1 or \"auto\", not `{t}`"
        ))),
    }
}

pub(crate) fn required_query(query: Option<String>) -> Result<String, ApiError> {
    query.ok_or_else(|| ApiError::invalid("missing required field `query`"))
}

/// A chunk returned beside the results (`additional_context`): a neighbour of a hit, or a
/// chunk of a linked source.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct RelatedChunkDto {
    #[serde(flatten)]
    pub chunk: ChunkFieldsDto,
    /// The source (or memory) id.
    pub id: String,
    /// Its place in the source.
    pub position: u32,
}

impl From<&ChunkHit> for RelatedChunkDto {
    fn from(hit: &ChunkHit) -> Self {
        Self {
            chunk: hit.into(),
            id: hit.item.id.clone(),
            position: hit.position,
        }
    }
}

/// The chunks returned beside a query's results by chunk id (neighbours, then the chunks of
/// linked sources), and for each result (same order) the ids of its own, its
/// `extra_context_ids`.
pub(crate) fn extra_context(
    outcome: &engram_app::QueryOutcome,
) -> (Map<String, Value>, Vec<Vec<String>>) {
    let mut additional = Map::new();
    let mut ids = vec![Vec::new(); outcome.chunks.len()];
    let linked = outcome
        .linked
        .iter()
        .map(|l| l.iter().map(|c| &c.hit).collect::<Vec<_>>());
    let related = outcome.related.iter().map(|r| r.iter().collect::<Vec<_>>());
    for (hits, own) in related.zip(ids.iter_mut()) {
        push_extra(&hits, own, &mut additional);
    }
    for (hits, own) in linked.zip(ids.iter_mut()) {
        push_extra(&hits, own, &mut additional);
    }
    (additional, ids)
}

fn push_extra(hits: &[&ChunkHit], own: &mut Vec<String>, additional: &mut Map<String, Value>) {
    for hit in hits {
        if !own.contains(&hit.chunk_id) {
            own.push(hit.chunk_id.clone());
        }
        additional.entry(hit.chunk_id.clone()).or_insert_with(|| {
            serde_json::to_value(RelatedChunkDto::from(*hit)).unwrap_or_default()
        });
    }
}
