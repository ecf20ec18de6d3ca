//! Wire types of the legacy generation: plain objects. Frozen.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use engram_app::{format_ms, QueryKind, RequestedMode};
use serde_json::{Map, Value};

use crate::wire::query::OperatorDto;
use crate::wire::query::{
    distinct_sources, layout, object, score, source_type, AlphaDto, GraphContextDto,
};
use crate::wire::{lenient, FieldDto};

/// `POST /tenants/create`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct CreateTenantRequest {
    pub tenant_id: Option<String>,
    pub tenant_metadata_schema: Option<Vec<FieldDto>>,
    pub embeddings_dimension: Option<u32>,
    #[serde(default)]
    pub is_embeddings_tenant: bool,
    /// Fields this route does not know: named in a `Warning`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TenantCreated {
    pub status: &'static str,
    pub tenant_id: String,
    pub message: String,
}

/// The tenant addressed by a query string.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct TenantParams {
    #[serde(default, deserialize_with = "crate::wire::present")]
    pub tenant_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TenantInfra {
    pub scheduler_status: bool,
    pub graph_status: bool,
    /// `[memories_ready, knowledge_ready]`.
    pub vectorstore_status: [bool; 2],
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TenantInfraStatus {
    pub tenant_id: String,
    pub org_id: String,
    pub infra: TenantInfra,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CollectionCount {
    pub row_count: u64,
    pub dimensions: u32,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TenantMonitor {
    pub tenant_id: String,
    pub normal_collection: CollectionCount,
    pub memory_collection: CollectionCount,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SubTenantIds {
    pub sub_tenant_ids: Vec<String>,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TenantIds {
    pub tenant_ids: Vec<String>,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TenantDeleted {
    pub tenant_id: String,
    pub status: &'static str,
    pub message: String,
}

/// Legacy `POST /recall/full_recall` and `/recall/recall_preferences`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct RecallBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    pub query: Option<String>,
    pub max_results: Option<i64>,
    /// `fast` (default) or `thinking`.
    #[serde(default, deserialize_with = "lenient")]
    pub mode: Option<RecallModeDto>,
    /// Default 0.8.
    pub alpha: Option<AlphaDto>,
    pub recency_bias: Option<f64>,
    /// Default false.
    pub graph_context: Option<bool>,
    /// In thinking mode, return the chunks of the sources linked to the results' sources
    /// (`relations.ids` at ingestion) in `additional_context`; default true.
    pub search_forceful_relations: Option<bool>,
    /// Text put before the query for retrieval, to steer relevance.
    pub additional_context: Option<String>,
    pub metadata_filters: Option<Map<String, Value>>,
    /// Fields this route does not know: named in a `Warning`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

/// Legacy `POST /recall/boolean_recall`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct BooleanRecallBody {
    pub tenant_id: Option<String>,
    pub sub_tenant_id: Option<String>,
    pub query: Option<String>,
    /// `or` (default), `and` or `phrase`.
    #[serde(default, deserialize_with = "lenient")]
    pub operator: Option<OperatorDto>,
    /// Default 10.
    pub max_results: Option<i64>,
    /// `sources` (default) or `memories`.
    #[serde(default, deserialize_with = "lenient")]
    pub search_mode: Option<SearchModeDto>,
    /// Fields this route does not know: named in a `Warning`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct LegacyChunkDto {
    pub chunk_uuid: String,
    pub source_id: String,
    pub chunk_content: String,
    pub source_type: String,
    pub source_upload_time: String,
    pub source_title: String,
    pub source_last_updated_time: String,
    /// Where the chunk sits in its source (`page`, `sheet`, `row_range`, `slide`, `headings`),
    /// as a JSON-encoded string.
    pub layout: String,
    pub relevancy_score: f64,
    pub document_metadata: Map<String, Value>,
    pub tenant_metadata: Map<String, Value>,
    pub extra_context_ids: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct LegacySourceDto {
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
pub(super) struct RecallResponse {
    pub chunks: Vec<LegacyChunkDto>,
    pub sources: Vec<LegacySourceDto>,
    #[schema(value_type = Object)]
    pub graph_context: Option<GraphContextDto>,
    #[schema(value_type = Object)]
    pub additional_context: Map<String, Value>,
    /// Filter keys ignored because the tenant schema does not declare them matchable.
    pub ignored_filter_keys: Vec<String>,
    /// The `alpha` the ranking used (`auto`'s choice when none was sent).
    pub alpha: f64,
    /// The mode that ran (`fast` or `thinking`).
    pub mode: &'static str,
    /// Every resolved setting of the plan that ran.
    #[schema(value_type = Object)]
    pub plan: Value,
}

impl RecallResponse {
    pub(super) fn new(outcome: engram_app::QueryOutcome, graph_context: bool) -> Self {
        let (additional_context, extra_ids) = crate::wire::query::extra_context(&outcome);
        let chunks = &outcome.chunks;
        Self {
            chunks: chunks
                .iter()
                .zip(extra_ids)
                .map(|(c, extra_context_ids)| {
                    let hit = &c.hit;
                    LegacyChunkDto {
                        chunk_uuid: hit.chunk_id.clone(),
                        source_id: hit.item.id.clone(),
                        chunk_content: hit.content.clone(),
                        source_type: source_type(hit),
                        source_upload_time: format_ms(hit.item.created_at),
                        source_title: hit.item.fields.title.clone(),
                        source_last_updated_time: format_ms(hit.item.updated_at),
                        layout: layout(hit),
                        relevancy_score: score(c.score),
                        document_metadata: object(&hit.item.fields.additional_metadata),
                        tenant_metadata: object(&hit.item.fields.metadata),
                        extra_context_ids,
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
            graph_context: outcome
                .graph_context
                .as_ref()
                .filter(|_| graph_context)
                .map(GraphContextDto::from),
            additional_context,
            ignored_filter_keys: outcome.ignored_filters.clone(),
            alpha: score(outcome.alpha),
            mode: outcome.mode.as_str(),
            plan: outcome.plan.clone(),
        }
    }
}

/// `mode` of the legacy recall routes: `fast` (default) or `thinking`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum RecallModeDto {
    Fast,
    Thinking,
}

impl From<RecallModeDto> for RequestedMode {
    fn from(mode: RecallModeDto) -> Self {
        match mode {
            RecallModeDto::Fast => Self::Fast,
            RecallModeDto::Thinking => Self::Thinking,
        }
    }
}

/// `search_mode` of boolean recall: `sources` (default) or `memories`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum SearchModeDto {
    Sources,
    Memories,
}

impl From<SearchModeDto> for QueryKind {
    fn from(mode: SearchModeDto) -> Self {
        match mode {
            SearchModeDto::Sources => Self::Knowledge,
            SearchModeDto::Memories => Self::Memory,
        }
    }
}
