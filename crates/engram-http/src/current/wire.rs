//! Wire types of the current generation (`API-Version: 2`). Responses are the `data` of the
//! envelope.

use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use engram_app::{
    Collections, CreateDatabase, DatabaseRecord, DatabaseStats as AppDatabaseStats, Method,
    QueryKind, QueryOutcome, QueryRequest, RequestedMode, TemporalOutcome, TemporalRequest,
};
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::wire::query::OperatorDto;
use crate::wire::query::{alpha, required_query};
use crate::wire::query::{
    distinct_sources, extra_context, object, score, source_type, AlphaDto, ChunkFieldsDto,
    GraphContextDto, RelatedChunkDto,
};
use crate::wire::{lenient, Deprecations, FieldDto, Ignored, ScopeDto};

/// `POST /databases`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct CreateDatabaseRequest {
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
    /// Fields this route does not know: reported in `meta.ignored_parameters`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CreatedDatabase {
    pub database: String,
    pub tenant_id: String,
    /// Always `accepted`: provisioning continues in the background.
    pub status: &'static str,
    pub message: String,
}

/// The database addressed by a query string.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct DatabaseParams {
    /// Database name.
    #[serde(default, deserialize_with = "crate::wire::present")]
    pub database: Option<String>,
    /// Deprecated alias of `database`.
    #[serde(default, deserialize_with = "crate::wire::present")]
    pub tenant_id: Option<String>,
}

/// `DELETE /databases/collections` answer.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CollectionDeleted {
    pub database: String,
    pub tenant_id: String,
    pub collection: String,
    pub sub_tenant_id: String,
    /// Always `deleted`.
    pub status: String,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DatabaseList {
    pub databases: Vec<String>,
    /// Deprecated copy of `databases`.
    pub tenant_ids: Vec<String>,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct VectorstoreStatus {
    pub knowledge: bool,
    pub memories: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct Infra {
    pub scheduler_status: bool,
    pub graph_status: bool,
    pub vectorstore_status: VectorstoreStatus,
    /// True when every flag above is true.
    pub ready_for_ingestion: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DatabaseStatus {
    pub database: String,
    pub org_id: String,
    pub tenant_id: String,
    pub infra: Infra,
    /// The typed metadata fields of the database.
    pub database_metadata_schema: Vec<FieldDto>,
    /// Whether the database holds raw embeddings its clients bring.
    pub is_embeddings_tenant: bool,
    /// The dimension of its vectors: the raw embeddings' or the embedding model's.
    pub embeddings_dimension: u32,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct CollectionList {
    pub collections: Vec<String>,
    /// Deprecated copy of `collections`.
    pub sub_tenant_ids: Vec<String>,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RowCount {
    pub row_count: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DatabaseStats {
    pub database: String,
    pub tenant_id: String,
    pub knowledge_collection: RowCount,
    pub memory_collection: RowCount,
    pub message: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DeletedDatabase {
    pub database: String,
    pub tenant_id: String,
    /// Always `deletion_scheduled`.
    pub status: &'static str,
    pub message: String,
}

/// `PATCH /databases/{database}/metadata-schema`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct AddSchemaFieldsRequest {
    pub add_fields: Vec<FieldDto>,
    /// Fields this route does not know: reported in `meta.ignored_parameters`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// `GET /databases/{database}/metadata-schema`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct MetadataSchema {
    pub database: String,
    /// Deprecated spelling of `database`.
    pub tenant_id: String,
    pub fields: Vec<FieldDto>,
}

/// `PATCH /databases/{database}/metadata-schema`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct AddedSchemaFields {
    pub added_fields: Vec<String>,
    pub database: String,
    pub tenant_id: String,
    /// The whole schema after the change.
    pub database_metadata_schema: Vec<FieldDto>,
}

/// `PATCH /databases/{database}`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct RenameRequest {
    /// The new name; the same rules as at creation, unique in the organization.
    #[serde(default)]
    pub new_name: String,
    /// Fields this route does not know: reported in `meta.ignored_parameters`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// A renamed database.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RenamedDatabase {
    pub database: String,
    pub tenant_id: String,
    pub old_database: String,
    pub old_tenant_id: String,
    /// `renamed`.
    pub status: &'static str,
    pub message: String,
    /// How connectors syncing into the database were repointed: always `complete` (they
    /// follow the database, not its name).
    pub connector_reassignment: &'static str,
}

/// `PATCH /databases/{database}/instructions`: what to set; what is absent stays.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct InstructionsRequest {
    /// The database's own instructions; `""` clears them.
    pub custom_instructions: Option<String>,
    /// Per collection: a text sets, `""` or null clears, an absent collection stays.
    #[serde(default)]
    pub collections: std::collections::BTreeMap<String, Option<String>>,
    /// Fields this route does not know: reported in `meta.ignored_parameters`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: serde_json::Map<String, serde_json::Value>,
}

/// A database's custom ingestion instructions (a plain object, as the hosted service answers).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct InstructionsDto {
    pub database: String,
    pub tenant_id: String,
    /// Applies to every item ingested into the database.
    pub custom_instructions: String,
    /// Each collection's own, applied on top of the database's.
    pub collections: std::collections::BTreeMap<String, String>,
}

impl From<&DatabaseRecord> for InstructionsDto {
    fn from(db: &DatabaseRecord) -> Self {
        Self {
            database: db.name.to_string(),
            tenant_id: db.name.to_string(),
            custom_instructions: db.instructions.custom_instructions.clone(),
            collections: db.instructions.collections.clone(),
        }
    }
}

/// `collections`: a list (equal weights) or `{name: weight}` (one decimal place at most).
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(untagged)]
pub(super) enum CollectionsDto {
    List(Vec<String>),
    #[schema(value_type = Object)]
    Weights(Map<String, Value>),
}

/// `POST /query`.
#[derive(Debug, Deserialize, ToSchema)]
pub(super) struct QueryBody {
    #[serde(flatten)]
    pub scope: ScopeDto,
    pub collections: Option<CollectionsDto>,
    /// Deprecated alias of `collections`.
    pub sub_tenant_ids: Option<CollectionsDto>,
    pub query: Option<String>,
    /// `knowledge` (default), `memory` or `all`.
    #[serde(rename = "type", default, deserialize_with = "lenient")]
    pub kind: Option<QueryKindDto>,
    /// `hybrid` (default) or `text`.
    #[serde(default, deserialize_with = "lenient")]
    pub query_by: Option<MethodDto>,
    /// `or` (default), `and` or `phrase`.
    #[serde(default, deserialize_with = "lenient")]
    pub operator: Option<OperatorDto>,
    /// `fast`, `thinking` or `auto` (default).
    #[serde(default, deserialize_with = "lenient")]
    pub mode: Option<ModeDto>,
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
    /// Text put before the query for retrieval (keyword and semantic), to steer relevance.
    pub additional_context: Option<String>,
    /// Only these sources (by id), ANDed with `titles`.
    pub ids: Option<Vec<String>>,
    /// Only sources with one of these titles (exact, case-insensitive).
    pub titles: Option<Vec<String>>,
    /// Neighbouring chunks (0-10) on each side of each hit, returned in `additional_context`
    /// and named in the hit's `extra_context_ids`.
    pub num_related_chunks: Option<i64>,
    /// Omitted: the result with `llm_prompt` (the chunks rendered as Markdown) beside it;
    /// `structured`: the result alone; `markdown`: `data` is the Markdown string alone.
    #[serde(default, deserialize_with = "lenient")]
    pub response_format: Option<ResponseFormatDto>,
    /// Temporal reasoning: dates in the query and in the results (relative phrases resolved
    /// against each item's `timestamp`), a bounded promotion of results in the time the query
    /// names (or that carry a date, for a question asking when), and the resolved dates in
    /// `temporal_facts` and `temporal_filter`.
    pub temporal_reasoning: Option<bool>,
    /// What "now" is for the query's relative phrases (RFC 3339 or a date); default: now.
    pub temporal_now: Option<String>,
    /// Not supported: reported in `meta.ignored_parameters`.
    pub temporal_intent: Option<Value>,
    /// Not supported: reported in `meta.ignored_parameters`.
    pub code_search: Option<Value>,
    pub attributes: Option<Value>,
    /// Principals the caller acts for: only sources they may read (their access rule, from a
    /// connector resource, names one of them or `__public__`, or there is none). Absent, empty
    /// or `["*"]`: no filtering.
    #[schema(value_type = Option<Vec<String>>)]
    pub acl: Option<Value>,
    /// Widen the candidates with the graph lane and rank them by vector similarity to the
    /// query alone (hybrid); default false.
    pub graph_vector_prune: Option<bool>,
    pub graph_vector_prune_spacy_entities: Option<Value>,
    /// In thinking mode, return the chunks of the sources linked to the results' sources
    /// (`relations.ids` at ingestion) in `additional_context` and `forceful_relations`;
    /// default true.
    pub query_forceful_relations: Option<bool>,
    /// Fields this route does not know: reported in `meta.ignored_parameters`.
    #[serde(flatten)]
    #[schema(ignore)]
    pub unknown: Map<String, Value>,
}

/// `response_format` of a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum ResponseFormatDto {
    Structured,
    Markdown,
}

/// One ranked chunk (current).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ChunkDto {
    #[serde(flatten)]
    pub chunk: ChunkFieldsDto,
    /// The source (or memory) id.
    pub id: String,
    pub relevancy_score: f64,
}

/// One source of the ranked chunks (current), each once, in order of first appearance.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct QuerySourceDto {
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

/// `data` of `POST /query`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct QueryResultDto {
    pub chunks: Vec<ChunkDto>,
    pub sources: Vec<QuerySourceDto>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub graph_context: Option<GraphContextDto>,
    /// Chunks named by the hits' `extra_context_ids` (neighbours asked for with
    /// `num_related_chunks`, and in thinking mode the chunks of linked sources), by chunk id.
    #[schema(value_type = Object)]
    pub additional_context: Map<String, Value>,
    /// The linked sources' chunks with the link each came by (thinking mode).
    pub forceful_relations: ForcefulRelationsDto,
    /// The chunks rendered as Markdown for a prompt (unless `response_format` says otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_prompt: Option<String>,
    /// With `temporal_reasoning`: every date phrase of the returned chunks, resolved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temporal_facts: Option<Vec<TemporalFactDto>>,
    /// With `temporal_reasoning`: what the temporal layer did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temporal_filter: Option<TemporalFilterDto>,
}

/// Forceful relations: the chunks of sources linked at ingestion, each with its link.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ForcefulRelationsDto {
    /// Links declared with `relations.ids`.
    pub declared: Vec<ForcefulEntryDto>,
    /// Links engram inferred itself: none (engram infers no links between sources).
    pub inferred: Vec<ForcefulEntryDto>,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ForcefulEntryDto {
    pub chunk: RelatedChunkDto,
    pub via: ViaDto,
}

/// A declared link: the source that declared it and the one it names.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ViaDto {
    pub from: String,
    pub to: String,
}

/// A date phrase of a returned chunk, resolved against its item's time.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TemporalFactDto {
    pub chunk_id: String,
    pub source_id: String,
    /// The phrase as written ("yesterday", "8 May 2023").
    pub evidence_phrase: String,
    /// `day`, `week`, `month` or `year`.
    pub date_precision: &'static str,
    /// First and last day the phrase covers, as Unix seconds (midnight UTC) and as dates.
    pub event_start: i64,
    pub event_end: i64,
    pub start_date: String,
    pub end_date: String,
    /// The day relative phrases resolved against: the item's `timestamp`, else when it was
    /// stored.
    pub anchor_date: String,
    /// `mention`.
    pub fact_type: &'static str,
}

/// What temporal reasoning did for a query.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct TemporalFilterDto {
    /// Always true when temporal reasoning was asked for.
    pub applied: bool,
    /// `range` (the query names a time), `when` (it asks for one), `duration` or `none`.
    pub mode: &'static str,
    /// `soft`: results are promoted within a bounded margin, never filtered out.
    pub scope: &'static str,
    /// Date phrases found in the returned chunks.
    pub matched_facts: usize,
    /// Returned chunks promoted for matching the query's time.
    pub promoted: usize,
    /// The time the query names (`range`), as dates.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_start: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_end: Option<String>,
    /// What the query's relative phrases resolved against.
    pub now: String,
    pub degraded: bool,
    pub truncated: bool,
}

fn day_seconds(day: time::Date) -> i64 {
    day.midnight().assume_utc().unix_timestamp()
}

impl TemporalFilterDto {
    fn new(outcome: &TemporalOutcome) -> Self {
        Self {
            applied: true,
            mode: outcome.mode,
            scope: "soft",
            matched_facts: outcome.facts.iter().map(|(m, _)| m.len()).sum(),
            promoted: outcome.promoted,
            window_start: outcome.window.as_ref().map(|w| w.start.to_string()),
            window_end: outcome.window.as_ref().map(|w| w.end.to_string()),
            now: outcome.now.to_string(),
            degraded: false,
            truncated: false,
        }
    }
}

impl QueryResultDto {
    pub(super) fn new(outcome: &QueryOutcome) -> Self {
        let chunks = &outcome.chunks;
        let (additional_context, extra_ids) = extra_context(outcome);
        let mut declared = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for linked in outcome.linked.iter().flatten() {
            if seen.insert((&linked.hit.chunk_id, &linked.from, &linked.to)) {
                declared.push(ForcefulEntryDto {
                    chunk: RelatedChunkDto::from(&linked.hit),
                    via: ViaDto {
                        from: linked.from.clone(),
                        to: linked.to.clone(),
                    },
                });
            }
        }
        Self {
            chunks: chunks
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let hit = &c.hit;
                    let mut chunk = ChunkFieldsDto::from(hit);
                    chunk.extra_context_ids = extra_ids.get(i).cloned().unwrap_or_default();
                    ChunkDto {
                        chunk,
                        id: hit.item.id.clone(),
                        relevancy_score: score(c.score),
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
            graph_context: outcome.graph_context.as_ref().map(GraphContextDto::from),
            additional_context,
            forceful_relations: ForcefulRelationsDto {
                declared,
                inferred: Vec::new(),
            },
            llm_prompt: None,
            temporal_facts: outcome.temporal.as_ref().map(|t| {
                chunks
                    .iter()
                    .zip(&t.facts)
                    .flat_map(|(c, (mentions, anchor))| {
                        mentions.iter().map(move |m| TemporalFactDto {
                            chunk_id: c.hit.chunk_id.clone(),
                            source_id: c.hit.item.id.clone(),
                            evidence_phrase: m.phrase.clone(),
                            date_precision: m.precision.as_str(),
                            event_start: day_seconds(m.start),
                            event_end: day_seconds(m.end),
                            start_date: m.start.to_string(),
                            end_date: m.end.to_string(),
                            anchor_date: anchor.to_string(),
                            fact_type: "mention",
                        })
                    })
                    .collect()
            }),
            temporal_filter: outcome.temporal.as_ref().map(TemporalFilterDto::new),
        }
    }
}

/// `type` of a query: `knowledge` (default), `memory` (also `memories`) or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum QueryKindDto {
    Knowledge,
    #[serde(alias = "memories")]
    Memory,
    All,
}

impl From<QueryKindDto> for QueryKind {
    fn from(kind: QueryKindDto) -> Self {
        match kind {
            QueryKindDto::Knowledge => Self::Knowledge,
            QueryKindDto::Memory => Self::Memory,
            QueryKindDto::All => Self::All,
        }
    }
}

/// `query_by`: `hybrid` (default) or `text` (BM25 alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum MethodDto {
    Hybrid,
    Text,
}

impl From<MethodDto> for Method {
    fn from(method: MethodDto) -> Self {
        match method {
            MethodDto::Hybrid => Self::Hybrid,
            MethodDto::Text => Self::Text,
        }
    }
}

/// `mode`: `fast`, `thinking` or `auto` (default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum ModeDto {
    Fast,
    Thinking,
    Auto,
}

impl From<ModeDto> for RequestedMode {
    fn from(mode: ModeDto) -> Self {
        match mode {
            ModeDto::Fast => Self::Fast,
            ModeDto::Thinking => Self::Thinking,
            ModeDto::Auto => Self::Auto,
        }
    }
}

/// A query request resolved from its wire form: the database, the collection it named, and what
/// the app runs.
pub(super) struct ScopedQuery {
    pub database: engram_types::DatabaseName,
    pub collection: Option<String>,
    pub request: QueryRequest,
    pub response_format: Option<ResponseFormatDto>,
    /// Fields sent that engram does not act on, with why.
    pub ignored: Ignored,
}

/// Why each query field engram accepts but does not act on is not acted on.
const NOT_YET: &[(&str, &str)] = &[
    (
        "temporal_intent",
        "engram classifies the query itself; a caller's classification is not taken",
    ),
    ("code_search", "engram has no code-search branch"),
    (
        "attributes",
        "operator filters are not supported; use metadata_filters (exact matches and lists)",
    ),
    (
        "graph_vector_prune_spacy_entities",
        "engram's graph extractor does not use spaCy",
    ),
];

impl QueryBody {
    /// The app's request, aliases resolved (and reported in `deprecations`).
    pub(super) fn into_request(
        self,
        deprecations: &mut Deprecations,
    ) -> Result<ScopedQuery, ApiError> {
        let (database, collection) = self.scope.resolve(deprecations)?;
        let named = deprecations.pick(
            self.collections,
            self.sub_tenant_ids,
            "collections",
            "sub_tenant_ids",
        )?;
        let mut ignored = Ignored::default();
        ignored.note_if(
            self.temporal_now.is_some() && self.temporal_reasoning != Some(true),
            "temporal_now",
            "it is read only with temporal_reasoning: true",
        );
        let sent = [
            self.temporal_intent.is_some(),
            self.code_search.is_some(),
            self.attributes.is_some(),
            self.graph_vector_prune_spacy_entities.is_some(),
        ];
        for ((field, reason), sent) in NOT_YET.iter().zip(sent) {
            ignored.note_if(sent, field, reason);
        }
        ignored.unknown_fields(&self.unknown);
        let request = QueryRequest {
            collection: collection.clone(),
            collections: named.map(Collections::try_from).transpose()?,
            query: required_query(self.query)?,
            kind: self.kind.map(QueryKind::from).unwrap_or_default(),
            method: self.query_by.map(Method::from),
            operator: self.operator.unwrap_or_default().into(),
            mode: self.mode.map(RequestedMode::from).unwrap_or_default(),
            max_results: self.max_results,
            alpha: alpha(self.alpha)?,
            recency_bias: self.recency_bias,
            metadata_filters: current_filters(deprecations, self.metadata_filters)?,
            graph_context: self.graph_context,
            query_apps: self.query_apps.unwrap_or(false),
            ids: self.ids.unwrap_or_default(),
            titles: self.titles.unwrap_or_default(),
            num_related_chunks: self.num_related_chunks,
            context: self.additional_context,
            temporal: (self.temporal_reasoning == Some(true)).then_some(TemporalRequest {
                now: self.temporal_now,
            }),
            graph_rank: None,
            forceful_relations: self.query_forceful_relations,
            graph_vector_prune: self.graph_vector_prune.unwrap_or(false),
            acl: principals(self.acl)?,
        };
        Ok(ScopedQuery {
            database,
            collection,
            request,
            response_format: self.response_format,
            ignored,
        })
    }
}

/// `acl`: a list of principals (strings); null or absent is none.
pub(super) fn principals(acl: Option<Value>) -> Result<Vec<String>, ApiError> {
    match acl {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(value) => serde_json::from_value(value)
            .map_err(|_| ApiError::invalid("`acl` must be a list of principals (strings)")),
    }
}

impl TryFrom<CollectionsDto> for Collections {
    type Error = ApiError;

    fn try_from(value: CollectionsDto) -> Result<Self, ApiError> {
        match value {
            CollectionsDto::List(names) => Ok(Self::List(names)),
            CollectionsDto::Weights(weights) => weights
                .into_iter()
                .map(|(name, w)| match w.as_f64() {
                    Some(w) => Ok((name, w)),
                    None => Err(ApiError::invalid(format!(
                        "`collections.{name}` weight must be a number"
                    ))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Self::Weighted),
        }
    }
}

/// `meta.source_type` of a query.
pub(super) fn kind_name(kind: QueryKind) -> &'static str {
    match kind {
        QueryKind::Knowledge => "knowledge",
        QueryKind::Memory => "memory",
        QueryKind::All => "all",
    }
}

/// `metadata_filters` of the current route: the free-form part under `additional_metadata`,
/// or its deprecated alias `document_metadata` (reported).
fn current_filters(
    deprecations: &mut Deprecations,
    filters: Option<Map<String, Value>>,
) -> Result<Map<String, Value>, ApiError> {
    let mut filters = filters.unwrap_or_default();
    let current = filters.remove("additional_metadata");
    let alias = filters.remove("document_metadata");
    if let Some(free) = deprecations.pick(
        current,
        alias,
        "metadata_filters.additional_metadata",
        "metadata_filters.document_metadata",
    )? {
        filters.insert("additional_metadata".into(), free);
    }
    Ok(filters)
}

/// The metadata schema of a database as sent and returned.
pub(super) fn schema_dto(db: &DatabaseRecord) -> Vec<FieldDto> {
    db.schema.fields().iter().map(FieldDto::from).collect()
}

impl CreateDatabaseRequest {
    /// The app's request, aliases resolved (and reported in `deprecations`).
    pub(super) fn into_request(
        self,
        deprecations: &mut Deprecations,
    ) -> Result<CreateDatabase, ApiError> {
        let name = deprecations.require(self.database, self.tenant_id, "database", "tenant_id")?;
        let schema = deprecations.pick(
            self.database_metadata_schema,
            self.tenant_metadata_schema,
            "database_metadata_schema",
            "tenant_metadata_schema",
        )?;
        Ok(CreateDatabase {
            name,
            schema: schema
                .unwrap_or_default()
                .into_iter()
                .map(Into::into)
                .collect(),
            embeddings_dimension: self.embeddings_dimension,
            is_embeddings_tenant: self.is_embeddings_tenant,
        })
    }
}

impl From<&DatabaseRecord> for CreatedDatabase {
    fn from(db: &DatabaseRecord) -> Self {
        Self {
            database: db.name.to_string(),
            tenant_id: db.name.to_string(),
            status: "accepted",
            message: format!(
                "database `{}` accepted; provisioning in the background",
                db.name
            ),
        }
    }
}

impl From<&DatabaseRecord> for DatabaseStatus {
    fn from(db: &DatabaseRecord) -> Self {
        let infra = db.infra;
        Self {
            database: db.name.to_string(),
            org_id: db.org.to_string(),
            tenant_id: db.name.to_string(),
            infra: Infra {
                scheduler_status: infra.scheduler,
                graph_status: infra.graph,
                vectorstore_status: VectorstoreStatus {
                    knowledge: infra.knowledge_vectors,
                    memories: infra.memory_vectors,
                },
                ready_for_ingestion: infra.all_ready(),
            },
            database_metadata_schema: schema_dto(db),
            is_embeddings_tenant: db.is_embeddings_tenant,
            embeddings_dimension: db.vector_dimension(),
            message: if infra.all_ready() {
                "database is ready".into()
            } else {
                "database is provisioning".into()
            },
        }
    }
}

impl From<&AppDatabaseStats> for DatabaseStats {
    fn from(stats: &AppDatabaseStats) -> Self {
        let db = &stats.database;
        Self {
            database: db.name.to_string(),
            tenant_id: db.name.to_string(),
            knowledge_collection: RowCount {
                row_count: stats.counts.knowledge_chunks,
            },
            memory_collection: RowCount {
                row_count: stats.counts.memory_chunks,
            },
            message: format!("{} collections", stats.counts.collections),
        }
    }
}
