//! Wire types of retrieval: the current `POST /query` and the legacy `/recall/*` routes.

use engram_app::{format_ms, ChunkHit, RankedChunk};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

/// `collections`: a list (equal weights) or `{name: weight}` (one decimal place at most).
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum CollectionsDto {
    List(Vec<String>),
    #[schema(value_type = Object)]
    Weights(Map<String, Value>),
}

/// `alpha`: a number from 0 to 1, or `"auto"`.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum AlphaDto {
    Number(f64),
    Text(String),
}

/// `POST /query`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct QueryBody {
    pub database: Option<String>,
    /// Deprecated alias of `database`.
    pub tenant_id: Option<String>,
    pub collection: Option<String>,
    /// Deprecated alias of `collection`.
    pub sub_tenant_id: Option<String>,
    pub collections: Option<CollectionsDto>,
    /// Deprecated alias of `collections`.
    pub sub_tenant_ids: Option<CollectionsDto>,
    pub query: Option<String>,
    /// `knowledge` (default), `memory` or `all`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// `hybrid` (default) or `text`.
    pub query_by: Option<String>,
    /// `or` (default), `and` or `phrase`.
    pub operator: Option<String>,
    /// `fast`, `thinking` or `auto` (default).
    pub mode: Option<String>,
    /// 1-1000, default 10.
    pub max_results: Option<i64>,
    /// 0..1 (1 = purely semantic) or `"auto"`; default 0.8.
    pub alpha: Option<AlphaDto>,
    /// 0..1, default 0.
    pub recency_bias: Option<f64>,
    pub metadata_filters: Option<Map<String, Value>>,
    /// Default true.
    pub graph_context: Option<bool>,
    pub query_apps: Option<bool>,
    /// A hint for answer generation; accepted for compatibility, not used for ranking.
    #[allow(dead_code)]
    pub additional_context: Option<String>,
}

/// One ranked chunk (current).
#[derive(Debug, Serialize, ToSchema)]
pub struct ChunkDto {
    pub chunk_uuid: String,
    /// The source (or memory) id.
    pub id: String,
    pub chunk_content: String,
    pub source_type: String,
    pub source_title: String,
    pub source_upload_time: String,
    pub source_last_updated_time: String,
    #[schema(value_type = Object)]
    pub layout: Value,
    pub relevancy_score: f64,
    pub extra_context_ids: Vec<String>,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    pub collection: String,
    pub sub_tenant_id: String,
}

/// One source of the ranked chunks (current), each once, in order of first appearance.
#[derive(Debug, Serialize, ToSchema)]
pub struct QuerySourceDto {
    pub id: String,
    pub title: String,
    #[serde(rename = "type")]
    pub source_type: String,
    pub description: String,
    pub url: String,
    pub timestamp: String,
    pub metadata: Map<String, Value>,
    pub additional_metadata: Map<String, Value>,
    pub collection: String,
    pub sub_tenant_id: String,
}

/// Graph context; empty until the knowledge graph lands.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct GraphContextDto {
    #[schema(value_type = Vec<Object>)]
    pub query_paths: Vec<Value>,
    #[schema(value_type = Vec<Object>)]
    pub chunk_relations: Vec<Value>,
    #[schema(value_type = Object)]
    pub chunk_id_to_group_ids: Map<String, Value>,
}

/// `data` of `POST /query`.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueryResultDto {
    pub chunks: Vec<ChunkDto>,
    pub sources: Vec<QuerySourceDto>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_context: Option<GraphContextDto>,
    #[schema(value_type = Object)]
    pub additional_context: Map<String, Value>,
}

/// A score as sent: six decimals are plenty and avoid `0.800000011920929`.
pub fn score(x: f32) -> f64 {
    (f64::from(x) * 1e6).round() / 1e6
}

fn object(value: &Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

/// `source_type` of a hit: the type given at ingestion, else how the item arrived.
fn source_type(hit: &ChunkHit) -> String {
    if hit.item.fields.source_type.is_empty() {
        hit.item.origin.as_str().to_owned()
    } else {
        hit.item.fields.source_type.clone()
    }
}

/// Sources in order of first appearance among the chunks.
fn distinct_sources(chunks: &[RankedChunk]) -> Vec<&ChunkHit> {
    let mut seen = std::collections::HashSet::new();
    chunks
        .iter()
        .map(|c| &c.hit)
        .filter(|hit| seen.insert((hit.item.collection.as_str(), hit.item.id.as_str())))
        .collect()
}

impl QueryResultDto {
    pub fn new(chunks: &[RankedChunk], graph_context: bool) -> Self {
        Self {
            chunks: chunks
                .iter()
                .map(|c| {
                    let hit = &c.hit;
                    ChunkDto {
                        chunk_uuid: hit.chunk_id.clone(),
                        id: hit.item.id.clone(),
                        chunk_content: hit.content.clone(),
                        source_type: source_type(hit),
                        source_title: hit.item.fields.title.clone(),
                        source_upload_time: format_ms(hit.item.created_at),
                        source_last_updated_time: format_ms(hit.item.updated_at),
                        layout: hit.layout.clone(),
                        relevancy_score: score(c.score),
                        extra_context_ids: Vec::new(),
                        metadata: object(&hit.item.fields.metadata),
                        additional_metadata: object(&hit.item.fields.additional_metadata),
                        collection: hit.item.collection.to_string(),
                        sub_tenant_id: hit.item.collection.to_string(),
                    }
                })
                .collect(),
            sources: distinct_sources(chunks)
                .into_iter()
                .map(|hit| QuerySourceDto {
                    id: hit.item.id.clone(),
                    title: hit.item.fields.title.clone(),
                    source_type: source_type(hit),
                    description: hit.item.fields.description.clone(),
                    url: hit.item.fields.url.clone(),
                    timestamp: hit.item.fields.timestamp.clone(),
                    metadata: object(&hit.item.fields.metadata),
                    additional_metadata: object(&hit.item.fields.additional_metadata),
                    collection: hit.item.collection.to_string(),
                    sub_tenant_id: hit.item.collection.to_string(),
                })
                .collect(),
            graph_context: graph_context.then(GraphContextDto::default),
            additional_context: Map::new(),
        }
    }
}

/// Legacy `POST /recall/full_recall` and `/recall/recall_preferences`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RecallBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    pub query: Option<String>,
    pub max_results: Option<i64>,
    /// `fast` (default) or `thinking`.
    pub mode: Option<String>,
    /// Default 0.8.
    pub alpha: Option<AlphaDto>,
    pub recency_bias: Option<f64>,
    /// Default false.
    pub graph_context: Option<bool>,
    /// Accepted; forceful relations come with the knowledge graph.
    #[allow(dead_code)]
    pub search_forceful_relations: Option<bool>,
    /// A hint for answer generation; accepted for compatibility, not used for ranking.
    #[allow(dead_code)]
    pub additional_context: Option<String>,
    pub metadata_filters: Option<Map<String, Value>>,
}

/// Legacy `POST /recall/boolean_recall`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct BooleanRecallBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    pub query: Option<String>,
    /// `or` (default), `and` or `phrase`.
    pub operator: Option<String>,
    /// Default 10.
    pub max_results: Option<i64>,
    /// `sources` (default) or `memories`.
    pub search_mode: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LegacyChunkDto {
    pub chunk_uuid: String,
    pub source_id: String,
    pub chunk_content: String,
    pub source_type: String,
    pub source_upload_time: String,
    pub source_title: String,
    pub source_last_updated_time: String,
    #[schema(value_type = Object)]
    pub layout: Value,
    pub relevancy_score: f64,
    pub document_metadata: Map<String, Value>,
    pub tenant_metadata: Map<String, Value>,
    pub extra_context_ids: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct LegacySourceDto {
    pub id: String,
    pub title: String,
    #[serde(rename = "type")]
    pub source_type: String,
    pub description: String,
    pub url: String,
    pub timestamp: String,
    pub tenant_metadata: Map<String, Value>,
    pub document_metadata: Map<String, Value>,
}

/// Response of the legacy recall routes.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecallResponse {
    pub chunks: Vec<LegacyChunkDto>,
    pub sources: Vec<LegacySourceDto>,
    #[schema(value_type = Object)]
    pub graph_context: Option<GraphContextDto>,
    #[schema(value_type = Object)]
    pub additional_context: Map<String, Value>,
    /// Filter keys ignored because the tenant schema does not declare them matchable.
    pub ignored_filter_keys: Vec<String>,
}

impl RecallResponse {
    pub fn new(chunks: &[RankedChunk], graph_context: bool, ignored: Vec<String>) -> Self {
        Self {
            chunks: chunks
                .iter()
                .map(|c| {
                    let hit = &c.hit;
                    LegacyChunkDto {
                        chunk_uuid: hit.chunk_id.clone(),
                        source_id: hit.item.id.clone(),
                        chunk_content: hit.content.clone(),
                        source_type: source_type(hit),
                        source_upload_time: format_ms(hit.item.created_at),
                        source_title: hit.item.fields.title.clone(),
                        source_last_updated_time: format_ms(hit.item.updated_at),
                        layout: hit.layout.clone(),
                        relevancy_score: score(c.score),
                        document_metadata: object(&hit.item.fields.additional_metadata),
                        tenant_metadata: object(&hit.item.fields.metadata),
                        extra_context_ids: Vec::new(),
                    }
                })
                .collect(),
            sources: distinct_sources(chunks)
                .into_iter()
                .map(|hit| LegacySourceDto {
                    id: hit.item.id.clone(),
                    title: hit.item.fields.title.clone(),
                    source_type: source_type(hit),
                    description: hit.item.fields.description.clone(),
                    url: hit.item.fields.url.clone(),
                    timestamp: hit.item.fields.timestamp.clone(),
                    tenant_metadata: object(&hit.item.fields.metadata),
                    document_metadata: object(&hit.item.fields.additional_metadata),
                })
                .collect(),
            graph_context: graph_context.then(GraphContextDto::default),
            additional_context: Map::new(),
            ignored_filter_keys: ignored,
        }
    }
}
