//! Retrieval: validating a query, resolving its scope, filters and mode, and running it
//! through the retriever. Both API generations call [`App::query`].

use std::collections::HashMap;

use engram_index::TermOperator;
use engram_search::{
    date_of, profile, Answer, AnswerRequest, GraphContext, LinkedChunk, Method, Mode, RankedChunk,
    Retriever, SearchRequest, StageTime, TemporalOutcome, RELATED_CHUNKS_MAX,
};
use engram_store::{ChunkFilter, ChunkHit, FilterValue};
use engram_types::temporal;
use engram_types::{CollectionName, DatabaseName, ItemKind, UnixMs};
use serde_json::{Map, Value};

use crate::filters::FilterBudget;
use crate::ingest::parse_collection;
use crate::{App, AppError, AppResult, DatabaseRecord, Principal};
use engram_types::Scope;

/// `max_results` bounds and default.
pub const MAX_RESULTS_DEFAULT: i64 = 10;
pub const MAX_RESULTS_MAX: i64 = 1_000;
// The retriever's deepest tier ranks at least as many chunks as a query may ask for.
const _: () = assert!(MAX_RESULTS_MAX as usize <= engram_search::DEEPEST_POOL);
/// Most collections one query may name.
pub const COLLECTIONS_MAX: usize = 100;
/// Longest query text (and `additional_context`), in characters.
pub(crate) const QUERY_MAX_CHARS: usize = 10_000;
/// Most source ids and titles one query may scope itself to.
pub(crate) const QUERY_IDS_MAX: usize = 1_000;
pub(crate) const QUERY_TITLES_MAX: usize = 100;

/// Which content a query reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueryKind {
    #[default]
    Knowledge,
    Memory,
    All,
}

impl QueryKind {
    fn kinds(self) -> Vec<ItemKind> {
        match self {
            Self::Knowledge => vec![ItemKind::Knowledge],
            Self::Memory => vec![ItemKind::Memory],
            Self::All => Vec::new(),
        }
    }
}

/// The mode a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequestedMode {
    Fast,
    Thinking,
    #[default]
    Auto,
}

/// `alpha` as given.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Alpha {
    Auto,
    Value(f64),
}

/// `collections` as given: a list (equal weights) or relative weights.
#[derive(Debug, Clone, PartialEq)]
pub enum Collections {
    List(Vec<String>),
    Weighted(Vec<(String, f64)>),
}

/// A query, after alias resolution by the caller.
#[derive(Debug, Clone, Default)]
pub struct QueryRequest {
    pub collection: Option<String>,
    pub collections: Option<Collections>,
    pub query: String,
    pub kind: QueryKind,
    pub method: Option<Method>,
    pub operator: TermOperator,
    pub mode: RequestedMode,
    pub max_results: Option<i64>,
    pub alpha: Option<Alpha>,
    pub recency_bias: Option<f64>,
    /// Top-level keys are schema fields; `additional_metadata` (or `document_metadata`) holds
    /// free-form fields.
    pub metadata_filters: Map<String, Value>,
    pub graph_context: Option<bool>,
    pub query_apps: bool,
    /// Only these sources (by id); empty: all.
    pub ids: Vec<String>,
    /// Only sources with one of these titles (case-insensitive; ANDed with `ids`).
    pub titles: Vec<String>,
    /// Neighbouring chunks on each side of each hit to return beside it.
    pub num_related_chunks: Option<i64>,
    /// Text put before the query for retrieval (`additional_context`).
    pub context: Option<String>,
    /// Temporal reasoning (`temporal_reasoning`), with the time relative phrases of the query
    /// resolve against (`temporal_now`, RFC 3339 or a date; default: now).
    pub temporal: Option<TemporalRequest>,
    /// Merge the graph lane into the ranking; `None`: `[graph] rank`.
    pub graph_rank: Option<bool>,
    /// Return the sources linked to the results' sources (thinking mode; default true).
    pub forceful_relations: Option<bool>,
    /// `graph_vector_prune`: widen the pool with the graph lane and rank it by vector
    /// similarity alone.
    pub graph_vector_prune: bool,
    /// Principals the caller acts for: only sources whose access rule lets one of them read
    /// are searched (`acl`). Empty, or `["*"]`: no filtering.
    pub acl: Vec<String>,
}

/// How a query asks for temporal reasoning.
#[derive(Debug, Clone, Default)]
pub struct TemporalRequest {
    pub now: Option<String>,
}

/// What a query found, with what it resolved.
#[derive(Debug, Clone)]
pub struct QueryOutcome {
    pub database: DatabaseRecord,
    /// Final rank order.
    pub chunks: Vec<RankedChunk>,
    pub mode: Mode,
    /// Why `auto` chose the mode (absent when the request named one).
    pub mode_reason: Option<&'static str>,
    pub alpha: f32,
    /// Top-level filter keys that the schema does not declare with `enable_match`.
    pub ignored_filters: Vec<String>,
    /// The graph context, when it is returned (after `auto` mode's override).
    pub graph_context: Option<GraphContext>,
    /// For each ranked chunk (same order), its neighbours in its source, in position order:
    /// `num_related_chunks` on each side, for the first [`engram_search::RELATED_HITS_MAX`] hits.
    pub related: Vec<Vec<ChunkHit>>,
    /// Forceful relations, in thinking mode: for each ranked chunk (same order), the chunks of
    /// the sources linked to or from its source.
    pub linked: Vec<Vec<LinkedChunk>>,
    /// Temporal reasoning's findings, when it was asked for.
    pub temporal: Option<TemporalOutcome>,
    /// Each stage's time, in the order stages first ran.
    pub timings: Vec<StageTime>,
    /// Parameters sent that the plan that ran does not act on, with the reason (see
    /// [`inert_parameters`]).
    pub inert: Vec<(&'static str, &'static str)>,
    /// The plan that ran, every resolved setting of it (`meta.plan`): what a parameter acted
    /// on changes.
    pub plan: Value,
}

fn bad(message: impl Into<String>) -> AppError {
    AppError::InvalidParameters(message.into())
}

/// A query filter value: a scalar is an exact match, a list any of its values (of scalars).
fn filter_value(
    budget: &mut FilterBudget,
    path: &str,
    field: &str,
    value: Value,
) -> AppResult<FilterValue> {
    let scalar = |v: &Value| !matches!(v, Value::Object(_) | Value::Array(_));
    let value = budget.condition(path, field, value)?;
    let scalars = match &value {
        FilterValue::In(values) => values.iter().all(scalar),
        FilterValue::Eq(value) => scalar(value),
        FilterValue::Readable(_) => true,
    };
    if !scalars {
        return Err(bad(format!(
            "`{path}.{field}` must be a value or a list of values"
        )));
    }
    Ok(value)
}

/// Splits `metadata_filters` into schema and free-form conditions, and the keys ignored
/// because the schema does not declare them matchable.
#[allow(clippy::type_complexity)]
fn split_filters(
    db: &DatabaseRecord,
    filters: Map<String, Value>,
) -> AppResult<(
    Vec<(String, FilterValue)>,
    Vec<(String, FilterValue)>,
    Vec<String>,
)> {
    let (mut schema, mut free, mut ignored) = (Vec::new(), Vec::new(), Vec::new());
    let mut budget = FilterBudget::default();
    for (key, value) in filters {
        if key == "additional_metadata" || key == "document_metadata" {
            let Value::Object(fields) = value else {
                return Err(bad(format!("`metadata_filters.{key}` must be an object")));
            };
            let path = format!("metadata_filters.{key}");
            for (field, value) in fields {
                let value = filter_value(&mut budget, &path, &field, value)?;
                free.push((field, value));
            }
            continue;
        }
        let value = filter_value(&mut budget, "metadata_filters", &key, value)?;
        match db.schema.field(&key) {
            Some(field) if field.enable_match => schema.push((key, value)),
            _ => ignored.push(key),
        }
    }
    Ok((schema, free, ignored))
}

/// True when `w` has at most one decimal place.
fn one_decimal(w: f64) -> bool {
    ((w * 10.0).round() - w * 10.0).abs() < 1e-9
}

/// The collections a query reads, with weights scaled so the largest is 1.
fn resolve_collections(
    db: &DatabaseRecord,
    collection: Option<&str>,
    collections: Option<Collections>,
) -> AppResult<(Vec<CollectionName>, HashMap<String, f32>)> {
    let given = match collections {
        None => None,
        Some(Collections::List(names)) if names.is_empty() => None,
        Some(Collections::Weighted(weights)) if weights.is_empty() => None,
        Some(c) => Some(c),
    };
    let Some(given) = given else {
        return Ok((
            vec![parse_collection(db, collection, "collection")?],
            HashMap::new(),
        ));
    };
    if collection.is_some_and(|c| !c.is_empty()) {
        return Err(bad("give `collection` or `collections`, not both"));
    }
    let pairs: Vec<(String, f64)> = match given {
        Collections::List(names) => names.into_iter().map(|n| (n, 1.0)).collect(),
        Collections::Weighted(weights) => weights,
    };
    if pairs.len() > COLLECTIONS_MAX {
        return Err(bad(format!(
            "`collections` may name at most {COLLECTIONS_MAX} collections"
        )));
    }
    let mut names = Vec::with_capacity(pairs.len());
    let mut weights = HashMap::new();
    for (name, weight) in &pairs {
        if !weight.is_finite() || *weight <= 0.0 || *weight > 1_000.0 {
            return Err(bad(format!(
                "`collections.{name}` weight must be above 0 and at most 1000"
            )));
        }
        if !one_decimal(*weight) {
            return Err(bad(format!(
                "`collections.{name}` weight {weight} has more than one decimal place"
            )));
        }
        let parsed = parse_collection(db, Some(name), "collections")?;
        if weights.insert(parsed.to_string(), *weight).is_some() {
            return Err(bad(format!("`collections` names `{name}` twice")));
        }
        names.push(parsed);
    }
    let top = pairs.iter().map(|p| p.1).fold(0.0, f64::max);
    let weights = weights
        .into_iter()
        .map(|(name, w)| (name, (w / top) as f32))
        .collect();
    Ok((names, weights))
}

/// The parameters of `request` that the plan resolved from it does not act on, each with the
/// reason: the one place a query's fields meet the plan that runs, so a parameter that does
/// nothing in some combination says so (`meta.ignored_parameters`, a legacy `Warning`). A new
/// parameter of [`QueryRequest`] is decided here: acted on in every plan, or listed.
fn inert_parameters(request: &QueryRequest, plan: &Plan) -> Vec<(&'static str, &'static str)> {
    let mut inert = Vec::new();
    let mut note = |sent: bool, parameter, reason| {
        if sent {
            inert.push((parameter, reason));
        }
    };
    let text = plan.method == Method::Text;
    note(
        text && request.alpha.is_some(),
        "alpha",
        "query_by=text ranks by keywords (BM25) alone",
    );
    note(
        text && request.query_apps,
        "query_apps",
        "its app pools belong to hybrid retrieval; query_by=text reads the keyword index alone",
    );
    note(
        !text && request.query_apps && request.kind == QueryKind::Memory,
        "query_apps",
        "app sources are knowledge; type=memory searches memories",
    );
    note(
        text && request.graph_vector_prune,
        "graph_vector_prune",
        "it ranks by vector similarity; query_by=text ranks by keywords alone",
    );
    note(
        text && request.mode == RequestedMode::Thinking,
        "mode",
        "thinking's query expansion and rerank belong to hybrid retrieval; query_by=text ranks \
         by keywords alone (linked sources are still returned)",
    );
    note(
        plan.mode != Mode::Thinking && request.forceful_relations.is_some(),
        "query_forceful_relations",
        "linked sources are returned in thinking mode only",
    );
    inert
}

/// What a query asks for, checked and resolved before any database is read: the text, the
/// limits, `alpha` and the mode (`auto` resolved by the query's shape).
struct Plan {
    /// What retrieval reads: `additional_context` then the query.
    search_text: String,
    related: u32,
    limit: usize,
    recency_bias: f32,
    alpha: f32,
    method: Method,
    mode: Mode,
    mode_reason: Option<&'static str>,
    graph_context: bool,
    forceful_relations: bool,
}

impl Plan {
    fn resolve(request: &QueryRequest) -> AppResult<Self> {
        let text = request.query.trim();
        if text.is_empty() {
            return Err(bad("`query` must not be empty"));
        }
        if text.chars().count() > QUERY_MAX_CHARS {
            return Err(bad(format!(
                "`query` must be at most {QUERY_MAX_CHARS} characters"
            )));
        }
        let limit = request.max_results.unwrap_or(MAX_RESULTS_DEFAULT);
        if !(1..=MAX_RESULTS_MAX).contains(&limit) {
            return Err(bad(format!(
                "`max_results` must be between 1 and {MAX_RESULTS_MAX}"
            )));
        }
        let recency_bias = request.recency_bias.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&recency_bias) {
            return Err(bad("`recency_bias` must be between 0 and 1"));
        }
        if request.ids.len() > QUERY_IDS_MAX {
            return Err(bad(format!(
                "`ids` may name at most {QUERY_IDS_MAX} sources"
            )));
        }
        if request.titles.len() > QUERY_TITLES_MAX {
            return Err(bad(format!(
                "`titles` may name at most {QUERY_TITLES_MAX} titles"
            )));
        }
        let related = request.num_related_chunks.unwrap_or(0);
        if !(0..=RELATED_CHUNKS_MAX).contains(&related) {
            return Err(bad(format!(
                "`num_related_chunks` must be between 0 and {RELATED_CHUNKS_MAX}"
            )));
        }
        let context = request
            .context
            .as_deref()
            .map(str::trim)
            .unwrap_or_default();
        if context.chars().count() > QUERY_MAX_CHARS {
            return Err(bad(format!(
                "`additional_context` must be at most {QUERY_MAX_CHARS} characters"
            )));
        }
        let search_text = if context.is_empty() {
            text.to_owned()
        } else {
            format!("{context}\n{text}")
        };
        let shape = profile(text);
        // Without `alpha` a query gets the per-query choice `auto` makes (reported in
        // `meta.alpha`): on SciFact it beats the hosted service's documented 0.8.
        let alpha = match request.alpha.unwrap_or(Alpha::Auto) {
            Alpha::Auto => shape.auto_alpha(),
            Alpha::Value(a) if (0.0..=1.0).contains(&a) => a as f32,
            Alpha::Value(_) => return Err(bad("`alpha` must be between 0 and 1, or \"auto\"")),
        };
        let (mode, mode_reason) = match request.mode {
            RequestedMode::Fast => (Mode::Fast, None),
            RequestedMode::Thinking => (Mode::Thinking, None),
            RequestedMode::Auto => {
                let (mode, reason) = shape.route();
                (mode, Some(reason))
            }
        };
        // Unsent, `auto` returns graph context with the mode it chose; sent, it is honoured.
        let graph_context = match request.mode {
            RequestedMode::Auto => request.graph_context.unwrap_or(mode == Mode::Thinking),
            RequestedMode::Fast | RequestedMode::Thinking => request.graph_context.unwrap_or(true),
        };
        Ok(Self {
            search_text,
            related: related as u32,
            limit: limit as usize,
            recency_bias: recency_bias as f32,
            alpha,
            method: request.method.unwrap_or(Method::Hybrid),
            mode,
            mode_reason,
            graph_context,
            forceful_relations: mode == Mode::Thinking
                && request.forceful_relations.unwrap_or(true),
        })
    }

    /// Every resolved setting of the plan and its search, as `meta.plan` shows them.
    fn described(
        &self,
        search: &SearchRequest,
        temporal_now: Option<impl std::fmt::Display>,
    ) -> Value {
        let mut weights: Vec<(&String, &f32)> = search.weights.iter().collect();
        weights.sort_by(|a, b| a.0.cmp(b.0));
        let filter = &search.filter;
        serde_json::json!({
            "search_text": search.query,
            "method": format!("{:?}", search.method).to_lowercase(),
            "operator": format!("{:?}", search.operator).to_lowercase(),
            "mode": self.mode.as_str(),
            "alpha": search.alpha,
            "recency_bias": search.recency_bias,
            "limit": search.limit,
            "related_chunks": self.related,
            "graph_context": self.graph_context,
            "graph_lane": search.graph_lane,
            "forceful_relations": self.forceful_relations,
            "query_apps": search.query_apps,
            "vector_prune": search.vector_prune,
            "temporal_now": temporal_now.map(|now| now.to_string()),
            "kinds": filter.kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
            "collections": filter.collections.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
            "weights": weights.iter().map(|(c, w)| serde_json::json!([c, w])).collect::<Vec<_>>(),
            "metadata": format!("{:?}", filter.metadata),
            "additional_metadata": format!("{:?}", filter.additional_metadata),
            "ids": filter.ids,
            "titles": filter.titles,
        })
    }

    /// The search on `db`: collections and weights, and filters checked against its schema.
    /// Also returns the filter keys its schema does not declare matchable (ignored).
    fn search(
        &self,
        db: &DatabaseRecord,
        request: QueryRequest,
        now: UnixMs,
    ) -> AppResult<(SearchRequest, Vec<String>)> {
        let (collections, weights) =
            resolve_collections(db, request.collection.as_deref(), request.collections)?;
        let (metadata, mut additional_metadata, ignored) =
            split_filters(db, request.metadata_filters)?;
        if let Some(readable) = crate::filters::readable_by(&request.acl)? {
            additional_metadata.push(readable);
        }
        let search = SearchRequest {
            scope: db.scope(),
            filter: ChunkFilter {
                kinds: request.kind.kinds(),
                collections,
                metadata,
                additional_metadata,
                origin: None,
                apps: false,
                ids: request.ids,
                titles: request.titles,
            },
            weights,
            query: self.search_text.clone(),
            method: self.method,
            operator: request.operator,
            mode: self.mode,
            alpha: self.alpha,
            recency_bias: self.recency_bias,
            limit: self.limit,
            query_apps: request.query_apps,
            graph_lane: false,
            vector_prune: request.graph_vector_prune && self.method == Method::Hybrid,
            now,
        };
        Ok((search, ignored))
    }
}

impl App {
    /// Runs a query over one database: validation, scope, filters (before ranking), the mode
    /// `auto` resolves to, and the ranked chunks.
    pub async fn query(
        &self,
        who: &Principal,
        database: &DatabaseName,
        request: QueryRequest,
    ) -> AppResult<QueryOutcome> {
        who.require(Scope::Read)?;
        let plan = Plan::resolve(&request)?;
        let temporal = match &request.temporal {
            None => None,
            Some(asked) => {
                let now = match asked
                    .now
                    .as_deref()
                    .map(str::trim)
                    .filter(|n| !n.is_empty())
                {
                    None => date_of(self.now()),
                    Some(text) => temporal::anchor_of(text, date_of(self.now()))
                        .ok_or_else(|| bad(format!("`temporal_now` `{text}` names no date")))?,
                };
                Some((temporal::intent(&request.query, now), now))
            }
        };
        let db = self.authorize_database(who, database, Scope::Read).await?;
        let graph_rank = request.graph_rank.unwrap_or_else(|| {
            let kinds = request.kind.kinds();
            let searches = |kind| kinds.is_empty() || kinds.contains(&kind);
            self.config()
                .graph
                .rank
                .ranks(searches(ItemKind::Knowledge), searches(ItemKind::Memory))
        });
        let inert = inert_parameters(&request, &plan);
        let (mut search, ignored_filters) = plan.search(&db, request, self.now())?;
        search.graph_lane = graph_rank;
        let described = plan.described(&search, temporal.as_ref().map(|(_, now)| *now));
        let answer = self
            .answer(&AnswerRequest {
                search,
                temporal,
                related: plan.related,
                forceful_relations: plan.forceful_relations,
                graph_context: plan.graph_context,
            })
            .await?;
        Ok(QueryOutcome {
            database: db,
            chunks: answer.chunks,
            mode: plan.mode,
            mode_reason: plan.mode_reason,
            alpha: plan.alpha,
            ignored_filters,
            graph_context: answer.graph_context,
            related: answer.related,
            linked: answer.linked,
            temporal: answer.temporal,
            timings: answer.timings,
            inert,
            plan: described,
        })
    }

    /// Answers a resolved query with the query model, the store and the indexes.
    async fn answer(&self, request: &AnswerRequest) -> AppResult<Answer> {
        let models = self
            .inner
            .models
            .as_ref()
            .ok_or_else(|| AppError::Unavailable("the embedding model is not loaded".into()))?;
        let retriever = Retriever {
            store: self.store(),
            graph: self.store(),
            indexes: &self.inner.indexes,
            embedder: models.query_embedder.clone(),
            reranker: self.inner.reranker.as_ref(),
            tuning: &self.inner.tuning,
            clock: engram_search::StageClock::default(),
        };
        retriever.answer(request).await.map_err(|e| match e {
            engram_search::SearchError::Store(e) => e.into(),
            engram_search::SearchError::Index(e) => e.into(),
            other => AppError::Unavailable(other.to_string()),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::testing::{acme_docs, config_with_model};
    use crate::AppSource;

    /// A memory with a time to live is found while it lives and by no query once the clock
    /// passes its expiry, before any sweep; its neighbour stays. The clock is the test's.
    #[tokio::test]
    async fn an_expiring_memory_is_found_while_it_lives_and_never_after() {
        use std::sync::Arc;

        use engram_testkit::{HashEmbedder, ManualClock, TempStore};

        let kit = TempStore::new().await;
        let clock = ManualClock::at(1_700_000_000_000);
        let models = crate::Models {
            embedder: Arc::new(HashEmbedder),
            query_embedder: Arc::new(HashEmbedder),
            tokens: Arc::new(HashEmbedder),
        };
        let config = engram_config::Config {
            data_dir: kit.path().to_owned(),
            ..engram_config::Config::default()
        };
        let app = App::with_store(
            config.clone(),
            kit.store.clone(),
            clock.clone(),
            Some(models),
        )
        .unwrap();
        let (who, db) = acme_docs(&app).await;
        let memory = |id: &str, text: &str, ttl: Option<i64>| crate::MemoryInput {
            id: Some(id.into()),
            text: Some(text.into()),
            expiry_time: ttl,
            ..Default::default()
        };
        let request = crate::MemoryRequest {
            collection: Some("user_t".into()),
            upsert: true,
            memories: vec![
                memory(
                    "keep",
                    "The loading dock door code is changed every month.",
                    None,
                ),
                memory(
                    "ttl",
                    "Temporary loading dock door code 7788 for the delivery.",
                    Some(8),
                ),
            ],
        };
        app.ingest_memories(&who, &db.name, request).await.unwrap();
        let pipeline = engram_pipeline::Pipeline::new(
            kit.store.clone(),
            Arc::new(HashEmbedder),
            Arc::new(HashEmbedder),
            clock.clone(),
            engram_pipeline::PipelineOptions::new(&config.pipeline, &config.budgets),
        );
        while pipeline.run_once().await.unwrap() > 0 {}
        let found = || async {
            let request = QueryRequest {
                collection: Some("user_t".into()),
                query: "loading dock door code".into(),
                kind: QueryKind::Memory,
                ..QueryRequest::default()
            };
            let outcome = app.query(&who, &db.name, request).await.unwrap();
            let mut ids: Vec<String> = outcome.chunks.into_iter().map(|c| c.hit.item.id).collect();
            ids.sort();
            ids
        };
        assert_eq!(found().await, ["keep", "ttl"], "alive: found");
        clock.advance(7_999);
        assert_eq!(
            found().await,
            ["keep", "ttl"],
            "a millisecond before its expiry"
        );
        clock.advance(1);
        assert_eq!(
            found().await,
            ["keep"],
            "expired: gone at once, before any sweep"
        );
    }

    /// Metadata filters apply before ranking, whatever share of the database they pass: a
    /// broad one (checked on an over-fetched scan), a narrow one (a wider scan) and a rare one
    /// (every passing key read) all give the nearest passing chunks, as exact cosine over
    /// every passing chunk ranks them. Needs the model from `make setup`.
    #[tokio::test]
    async fn filtered_queries_return_the_nearest_passing_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config_with_model(dir.path());
        // A small pool, so that 400 chunks exercise every stage of the filtered scan.
        config.search.fast_pool = 10;
        let app = App::open(config)
            .await
            .expect("the model is set up (make setup)");
        let (who, db) = acme_docs(&app).await;
        let animals = [
            "fox", "heron", "otter", "badger", "lynx", "owl", "trout", "beetle",
        ];
        let places = ["garden", "river", "forest", "harbour", "meadow"];
        let doings = ["sleeps", "hunts", "swims", "sings", "hides"];
        let texts: Vec<String> = (0..400)
            .map(|i| {
                format!(
                    "Field note {i}: the {} {} near the {}.",
                    animals[i % animals.len()],
                    doings[(i / 8) % doings.len()],
                    places[(i / 40) % places.len()]
                )
            })
            .collect();
        let sources = texts
            .iter()
            .enumerate()
            .map(|(i, text)| AppSource {
                id: Some(format!("n{i}")),
                text: text.clone(),
                additional_metadata: serde_json::Map::from_iter([
                    ("half".to_owned(), json!(i.is_multiple_of(2))),
                    ("twentieth".to_owned(), json!(i % 20 == 3)),
                    ("rare".to_owned(), json!(i % 80 == 7)),
                ]),
                attachments: json!([]),
                relations: json!({}),
                ..AppSource::default()
            })
            .collect();
        let request = crate::KnowledgeRequest {
            upsert: true,
            file_metadata_field: "document_metadata",
            app_knowledge: sources,
            ..Default::default()
        };
        app.ingest_knowledge(&who, &db.name, request).await.unwrap();
        let token = CancellationToken::new();
        let workers = app.start_workers(token.clone());
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        while app.indexes().vector_count(&db.id).await.unwrap() < texts.len() {
            assert!(
                std::time::Instant::now() < deadline,
                "indexing did not finish"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        workers.shutdown(Duration::from_secs(10)).await;

        let models = app.inner.models.as_ref().unwrap();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let vectors = models.embedder.embed(&refs).unwrap();
        let question = "an otter swimming in the river";
        let query_vector = models.query_embedder.embed(&[question]).unwrap().remove(0);
        let cosine = |v: &[f32]| v.iter().zip(&query_vector).map(|(a, b)| a * b).sum::<f32>();
        for (key, passes) in [
            (
                "half",
                (|i: usize| i.is_multiple_of(2)) as fn(usize) -> bool,
            ),
            ("twentieth", |i| i % 20 == 3),
            ("rare", |i| i % 80 == 7),
        ] {
            let mut expected: Vec<(f32, String)> = (0..texts.len())
                .filter(|&i| passes(i))
                .map(|i| (cosine(&vectors[i]), format!("n{i}")))
                .collect();
            expected.sort_by(|a, b| b.0.total_cmp(&a.0));
            let expected: Vec<String> = expected.into_iter().take(5).map(|e| e.1).collect();
            let outcome = app
                .query(
                    &who,
                    &db.name,
                    QueryRequest {
                        query: question.into(),
                        kind: QueryKind::Knowledge,
                        mode: RequestedMode::Fast,
                        max_results: Some(5),
                        alpha: Some(Alpha::Value(1.0)),
                        metadata_filters: serde_json::Map::from_iter([(
                            "additional_metadata".to_owned(),
                            json!({ key: true }),
                        )]),
                        ..QueryRequest::default()
                    },
                )
                .await
                .unwrap();
            let found: Vec<String> = outcome
                .chunks
                .iter()
                .map(|c| c.hit.item.id.clone())
                .collect();
            assert_eq!(found, expected, "filter {key}");
        }
        app.close().await;
    }

    #[test]
    fn weights_need_one_decimal_and_scale_to_the_largest() {
        assert!(one_decimal(0.5) && one_decimal(2.0) && one_decimal(1.3));
        assert!(!one_decimal(0.25) && !one_decimal(1.05));
    }
}
