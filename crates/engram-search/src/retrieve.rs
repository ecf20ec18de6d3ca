//! Query execution: keyword (BM25) and vector candidates, fused under `alpha`, with collection
//! weights and recency; `thinking` adds query expansion (pseudo-relevance feedback on both
//! sides) and a second-stage rerank. Candidates are ranked by what the indexes hold (BM25 from
//! the keyword index, cosine from the vector index's codes); rows are read from the store only
//! for what ranking needs to see (the rerank's and the feedback's best, every candidate when
//! collection weights or recency apply) and for the results. Everything returned has been read
//! back from the store within the request's scope and filter, so a derived index can never leak
//! a chunk, and a chunk that expired since it was indexed is passed over.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub use engram_config::Fusion;
use engram_config::SearchConfig;
use engram_embed::Embedder;
use engram_index::analyzer::keyword_query;
use engram_index::{IndexError, IndexFilter, Indexes, Keys, LexicalQuery, Passing, TermOperator};
use engram_store::ChunkKey;
use engram_store::{ChunkFilter, ChunkHit, ChunkSearch, DatabaseScope, GraphStore, StoreError};
use engram_types::{ItemKind, UnixMs};

use crate::analysis::Mode;
use crate::answer::{Stage, StageClock, StageScores};
use crate::fusion::Scale;
use crate::rerank::Reranker;

/// How chunks are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Keyword and semantic candidates fused under `alpha`.
    Hybrid,
    /// BM25 alone, deterministic.
    Text,
}

/// How many of the best candidates `graph_vector_prune` re-ranks in the first tier.
const VECTOR_PRUNE_DEPTH: usize = 30;

/// The candidate pool of the deepest tier: at least the largest `limit` a request may ask for.
/// A request asking for more results than the first tier ranked gets this tier's ranking,
/// after the first's (see [`Retriever::search`]).
pub const DEEPEST_POOL: usize = 1_000;

/// How deep one ranking looks: candidates drawn from each side, and how many of the best the
/// vector prune keeps. Never derived from the request's limit, so that the first k results
/// do not move when more are asked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tier {
    pub pool: usize,
    pub prune_depth: usize,
}

/// A validated query.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub scope: DatabaseScope,
    /// Kinds, collections and metadata conditions; applied before ranking.
    pub filter: ChunkFilter,
    /// Relative weight per collection, the largest being 1; collections absent weigh 1.
    pub weights: HashMap<String, f32>,
    pub query: String,
    pub method: Method,
    pub operator: TermOperator,
    pub mode: Mode,
    /// 1.0 is purely semantic, 0.0 purely keyword.
    pub alpha: f32,
    /// 0 ignores age; 1 scales each score fully by its recency.
    pub recency_bias: f32,
    pub limit: usize,
    /// Also draw candidates from app sources alone, so app content is considered even when
    /// other content crowds it out of the candidate pools; the scope is unchanged.
    pub query_apps: bool,
    /// Merge the graph lane into the ranking (see `graph_lane`).
    pub graph_lane: bool,
    /// `graph_vector_prune`: the graph-widened pool re-ranked by vector similarity alone.
    pub vector_prune: bool,
    pub now: UnixMs,
}

/// A chunk in final rank order with its score in 0..=1, and its scores at each stage.
#[derive(Debug, Clone)]
pub struct RankedChunk {
    pub hit: ChunkHit,
    pub score: f32,
    pub scores: StageScores,
}

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("embedding the query failed: {0}")]
    Embed(String),
    #[error(transparent)]
    Rerank(#[from] crate::rerank::RerankError),
}

/// Tuning of candidate pools and the thinking stages: the `[search]` configuration, its one
/// source of defaults.
#[derive(Debug, Clone)]
pub struct SearchTuning {
    pub fusion: Fusion,
    /// Candidates drawn from each side in `fast` mode (at least the request's limit).
    pub fast_pool: usize,
    /// Candidates drawn from each side in `thinking` mode.
    pub thinking_pool: usize,
    /// Feedback chunks used for query expansion.
    pub feedback_chunks: usize,
    /// Expansion terms added from the feedback chunks.
    pub expansion_terms: usize,
    /// Weight of the feedback centroid added to the query vector.
    pub feedback_vector_weight: f32,
    /// Weight of the expansion terms' BM25 relative to the query's own.
    pub expansion_keyword_weight: f32,
    /// Candidates passed to the reranker.
    pub rerank_depth: usize,
    /// Share of the final score that comes from the reranker.
    pub rerank_weight: f32,
    /// Half-life of recency, in days.
    pub recency_half_life_days: f32,
}

impl From<&SearchConfig> for SearchTuning {
    fn from(search: &SearchConfig) -> Self {
        Self {
            fusion: search.fusion,
            fast_pool: search.fast_pool as usize,
            thinking_pool: search.thinking_pool as usize,
            feedback_chunks: search.feedback_chunks as usize,
            expansion_terms: search.expansion_terms as usize,
            feedback_vector_weight: search.feedback_vector_weight,
            expansion_keyword_weight: search.expansion_keyword_weight,
            rerank_depth: search.rerank_depth as usize,
            rerank_weight: search.rerank_weight,
            recency_half_life_days: search.recency_half_life_days,
        }
    }
}

/// Most keys an `and`/`phrase` restriction or a metadata pre-filter selects for the vector
/// scan.
const RESTRICT_MAX: u32 = 1_000_000;

/// With item conditions (metadata filters), the vector scan first reads these many times its
/// pool and checks the conditions on what it found, before it reads every passing key.
const FILTER_OVERFETCH: [usize; 2] = [4, 32];

/// Runs queries over one store, its derived indexes and the embedding model.
pub struct Retriever<'a> {
    pub store: &'a dyn ChunkSearch,
    /// The graph the graph lane walks.
    pub graph: &'a dyn GraphStore,
    pub indexes: &'a Indexes,
    pub embedder: Arc<dyn Embedder>,
    pub reranker: &'a dyn Reranker,
    pub tuning: &'a SearchTuning,
    /// Each stage's time, as the query runs (see [`Self::answer`]).
    pub clock: StageClock,
}

/// What one hybrid query has gathered: its candidates and the evidence they are scored with.
pub(crate) struct Evidence {
    pub candidates: HashMap<ChunkKey, Candidate>,
    /// BM25 from the query's keyword pools.
    pub keyword: HashMap<ChunkKey, f32>,
    /// BM25 of the expansion query (`thinking`).
    pub expanded: HashMap<ChunkKey, f32>,
    pub expansion: LexicalQuery,
    /// The query's vector, then the feedback vector (`thinking`).
    pub query_vectors: Vec<Vec<f32>>,
}

/// One candidate and what is known about it.
#[derive(Default)]
pub(crate) struct Candidate {
    /// Its row, once read (see [`Retriever::read_best`]).
    pub hit: Option<ChunkHit>,
    pub keyword: f32,
    pub expansion_keyword: f32,
    pub semantic: f32,
    pub fused: f32,
    /// What each stage scored it (fusion and rerank fill it).
    pub scores: StageScores,
}

/// A candidate of one tier in its place: its key, its score, and its row when ranking read it.
#[derive(Debug)]
pub(crate) struct Ranked {
    pub key: ChunkKey,
    pub score: f32,
    pub hit: Option<ChunkHit>,
    pub scores: StageScores,
}

/// Adds the keys not yet known to `candidates`, unread.
pub(crate) fn add_candidates(
    candidates: &mut HashMap<ChunkKey, Candidate>,
    keys: impl IntoIterator<Item = ChunkKey>,
) {
    for key in keys {
        candidates.entry(key).or_default();
    }
}

/// The best `n` of `candidates` by fused score (ties by key).
pub(crate) fn best_keys(candidates: &HashMap<ChunkKey, Candidate>, n: usize) -> Vec<ChunkKey> {
    let mut order: Vec<ChunkKey> = candidates.keys().copied().collect();
    order.sort_by(|a, b| {
        candidates[b]
            .fused
            .total_cmp(&candidates[a].fused)
            .then(a.cmp(b))
    });
    order.truncate(n);
    order
}

impl Retriever<'_> {
    /// The best `request.limit` chunks, best first. The ranking is stable under the limit:
    /// the first k results of a request are the first k of the same request with a larger
    /// limit. The first tier ranks the candidates of the mode's pool, which never depends on
    /// the limit; only when it ranked fewer chunks than asked, the deepest tier ranks a pool
    /// of [`DEEPEST_POOL`] and its chunks not yet ranked follow, scaled below the last.
    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<RankedChunk>, SearchError> {
        if request.limit == 0 {
            return Ok(Vec::new());
        }
        // Every write made before the query is in the indexes it reads.
        self.clock
            .time(Stage::CatchUp, self.indexes.catch_up())
            .await?;
        let first = Tier {
            pool: match (request.method, request.mode) {
                (Method::Hybrid, Mode::Thinking) => self.tuning.thinking_pool,
                _ => self.tuning.fast_pool,
            }
            .min(DEEPEST_POOL),
            prune_depth: VECTOR_PRUNE_DEPTH,
        };
        // The query's entities (for the graph lane) are read once, beside the first tier.
        let named = tokio::sync::OnceCell::new();
        let ranked = self.ranked(request, first, &named).await?;
        let seen: HashSet<ChunkKey> = ranked.iter().map(|r| r.key).collect();
        let mut found = self.read_in_order(request, ranked, request.limit).await?;
        if found.len() < request.limit && first.pool < DEEPEST_POOL {
            // Every chunk of the first tier is in `found` or no longer readable.
            let floor = found.last().map_or(1.0, |r| r.score);
            let deepest = Tier {
                pool: DEEPEST_POOL,
                prune_depth: DEEPEST_POOL,
            };
            let deeper: Vec<Ranked> = self
                .ranked(request, deepest, &named)
                .await?
                .into_iter()
                .filter(|r| !seen.contains(&r.key))
                .map(|r| Ranked {
                    score: r.score * floor,
                    ..r
                })
                .collect();
            let more = request.limit - found.len();
            found.extend(self.read_in_order(request, deeper, more).await?);
        }
        Ok(found)
    }

    /// The first `limit` of `ranked` (in order) whose rows the store still gives within the
    /// request's scope and filter, read a page at a time; a chunk it no longer gives (expired
    /// since it was indexed) is passed over.
    async fn read_in_order(
        &self,
        request: &SearchRequest,
        ranked: Vec<Ranked>,
        limit: usize,
    ) -> Result<Vec<RankedChunk>, SearchError> {
        let mut found = Vec::with_capacity(limit.min(ranked.len()));
        let mut rest = ranked.into_iter();
        while found.len() < limit {
            let mut page: Vec<Ranked> = rest.by_ref().take(limit - found.len()).collect();
            if page.is_empty() {
                break;
            }
            self.clock
                .time(Stage::Read, self.read_ranked(request, &mut page))
                .await?;
            found.extend(page.into_iter().filter_map(|r| {
                Some(RankedChunk {
                    hit: r.hit?,
                    score: r.score,
                    scores: r.scores,
                })
            }));
        }
        Ok(found)
    }

    /// Reads the row of every chunk of `ranked` not read yet; a chunk whose row the store no
    /// longer gives leaves.
    async fn read_ranked(
        &self,
        request: &SearchRequest,
        ranked: &mut Vec<Ranked>,
    ) -> Result<(), SearchError> {
        let unread: Vec<ChunkKey> = ranked
            .iter()
            .filter(|r| r.hit.is_none())
            .map(|r| r.key)
            .collect();
        let mut rows = self.read_rows(request, &unread).await?;
        ranked.retain_mut(|r| {
            if r.hit.is_none() {
                r.hit = rows.remove(&r.key);
            }
            r.hit.is_some()
        });
        Ok(())
    }

    /// The rows of `keys` the store gives within the request's scope and filter.
    async fn read_rows(
        &self,
        request: &SearchRequest,
        keys: &[ChunkKey],
    ) -> Result<HashMap<ChunkKey, ChunkHit>, SearchError> {
        if keys.is_empty() {
            return Ok(HashMap::new());
        }
        Ok(self
            .store
            .fetch_chunks(&request.scope, &request.filter, keys, request.now)
            .await?
            .into_iter()
            .map(|hit| (hit.chunk_key, hit))
            .collect())
    }

    /// Reads the rows of the best `n` candidates (by fused score) until each of the best `n`
    /// has its row: a candidate whose row the store no longer gives leaves the candidates.
    pub(crate) async fn read_best(
        &self,
        request: &SearchRequest,
        candidates: &mut HashMap<ChunkKey, Candidate>,
        n: usize,
    ) -> Result<(), SearchError> {
        loop {
            let unread: Vec<ChunkKey> = best_keys(candidates, n)
                .into_iter()
                .filter(|k| candidates[k].hit.is_none())
                .collect();
            if unread.is_empty() {
                return Ok(());
            }
            let mut rows = self.read_rows(request, &unread).await?;
            for key in unread {
                match rows.remove(&key) {
                    Some(hit) => {
                        if let Some(c) = candidates.get_mut(&key) {
                            c.hit = Some(hit);
                        }
                    }
                    None => {
                        candidates.remove(&key);
                    }
                }
            }
        }
    }

    /// Every candidate of one tier, in final order.
    /// `named` holds the query's entities once read (see [`Self::lane_entities`]).
    async fn ranked(
        &self,
        request: &SearchRequest,
        tier: Tier,
        named: &tokio::sync::OnceCell<Option<Vec<(i64, u64)>>>,
    ) -> Result<Vec<Ranked>, SearchError> {
        let lexical = keyword_query(&request.query, request.operator);
        let first = async {
            match request.method {
                Method::Text => self.text(request, &lexical, tier.pool).await,
                Method::Hybrid => self.hybrid(request, &lexical, tier.pool).await,
            }
        };
        let lane = named.get_or_try_init(|| async {
            if request.graph_lane || request.vector_prune {
                let entities = self.lane_entities(request);
                self.clock.time(Stage::GraphLane, entities).await
            } else {
                Ok(None)
            }
        });
        let (ranked, named) = tokio::join!(first, lane);
        let mut ranked = ranked?;
        if let Some(named) = named? {
            self.clock
                .time(
                    Stage::GraphLane,
                    self.graph_lane(request, &mut ranked, named),
                )
                .await?;
        }
        if request.vector_prune && request.method == Method::Hybrid {
            self.clock
                .time(
                    Stage::GraphLane,
                    self.vector_prune(request, &mut ranked, tier.prune_depth),
                )
                .await?;
        }
        self.clock
            .time(Stage::Weights, self.finish(request, &mut ranked))
            .await?;
        Ok(ranked)
    }

    /// BM25 alone: the keyword pool, scaled by the best score.
    async fn text(
        &self,
        request: &SearchRequest,
        lexical: &LexicalQuery,
        pool: usize,
    ) -> Result<Vec<Ranked>, SearchError> {
        if lexical.is_empty() {
            return Ok(Vec::new());
        }
        let found = self.indexes.keyword_ranked(
            &request.scope,
            &request.filter,
            lexical,
            pool,
            request.now,
        );
        let found = self.clock.time(Stage::Keyword, found).await?;
        let scale = Scale::by_max(found.iter().map(|f| f.1));
        Ok(found
            .into_iter()
            .map(|(key, score)| Ranked {
                key,
                score: scale.apply(score),
                hit: None,
                scores: StageScores {
                    keyword: Some(score),
                    ..StageScores::default()
                },
            })
            .collect())
    }

    /// The best `pool` chunks by BM25 within the request's scope and `filter`.
    pub(crate) async fn keyword_pool(
        &self,
        request: &SearchRequest,
        filter: &ChunkFilter,
        lexical: &LexicalQuery,
        pool: usize,
    ) -> Result<Vec<(ChunkKey, f32)>, SearchError> {
        Ok(self
            .indexes
            .keyword_search(&request.scope, filter, lexical, pool, request.now)
            .await?)
    }

    /// `graph_vector_prune`: the best `depth` of the graph-widened pool ranked again by their
    /// vectors' cosine similarity to the query's alone, which becomes their score.
    async fn vector_prune(
        &self,
        request: &SearchRequest,
        ranked: &mut Vec<Ranked>,
        depth: usize,
    ) -> Result<(), SearchError> {
        sort(ranked);
        ranked.truncate(depth);
        let query = self.embed(&request.query).await?;
        let keys: Vec<ChunkKey> = ranked.iter().map(|r| r.key).collect();
        let similar = self
            .indexes
            .similarities(&request.scope, &query, &keys)
            .await?;
        for r in ranked.iter_mut() {
            r.score = similar.get(&r.key).copied().unwrap_or(0.0).max(0.0);
        }
        Ok(())
    }

    async fn embed(&self, text: &str) -> Result<Vec<f32>, SearchError> {
        let embedder = self.embedder.clone();
        let text = text.to_owned();
        let mut vectors = tokio::task::spawn_blocking(move || embedder.embed(&[text.as_str()]))
            .await
            .map_err(|e| SearchError::Embed(e.to_string()))?
            .map_err(|e| SearchError::Embed(e.to_string()))?;
        vectors
            .pop()
            .ok_or_else(|| SearchError::Embed("no vector returned".into()))
    }

    /// The `pool` nearest chunks of the request's collections and kinds (and of `only`),
    /// best first; `apps_only` keeps knowledge alone (app sources are knowledge).
    async fn nearest(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        pool: usize,
        only: Option<Arc<Keys>>,
        apps_only: bool,
    ) -> Result<Vec<ChunkKey>, SearchError> {
        let mut filter = IndexFilter::from(&request.filter);
        if apps_only {
            if !filter.accepts_kind(ItemKind::Knowledge) {
                return Ok(Vec::new());
            }
            filter.kinds = vec![ItemKind::Knowledge];
        }
        Ok(self
            .indexes
            .nearest(&request.scope, Arc::from(vector), pool, &filter, only)
            .await?
            .into_iter()
            .map(|(key, _)| key)
            .collect())
    }

    /// Keys the vector scan may consider when an `and`/`phrase` query narrows it to its
    /// matches (item conditions are `nearest_passing`'s).
    async fn restriction(
        &self,
        request: &SearchRequest,
        lexical: &LexicalQuery,
    ) -> Result<Option<Arc<Keys>>, SearchError> {
        if request.operator == TermOperator::Or {
            return Ok(None);
        }
        let matches = self
            .keyword_pool(request, &request.filter, lexical, RESTRICT_MAX as usize)
            .await?;
        Ok(Some(Arc::new(matches.into_iter().map(|m| m.0).collect())))
    }

    /// The `pool` nearest chunks that pass the request's item conditions (metadata filters)
    /// and `restriction`. The indexes hold what metadata, origin and app conditions pass
    /// ([`Passing::Only`]): the vector index searches within those chunks (its graph with the
    /// set as a predicate, or an exact scan of the set when it is small). Conditions only the
    /// store evaluates (item ids, titles): the scan first reads a few times the pool
    /// (`FILTER_OVERFETCH`) without the conditions and checks them on what it found: when at
    /// least `pool` pass (or the scan read everything), those are exactly the nearest passing
    /// chunks, since every passing chunk it did not read ranks below them. Only a filter
    /// passing under 1 in 32 of the nearest makes it read every passing key and scan within
    /// them. `all_passing` keeps the passing set for the request's next scan.
    pub(crate) async fn nearest_passing(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        pool: usize,
        restriction: Option<&Arc<Keys>>,
        all_passing: &mut Option<Arc<Keys>>,
    ) -> Result<Vec<ChunkKey>, SearchError> {
        if !request.filter.has_item_conditions() {
            return self
                .nearest(request, vector, pool, restriction.cloned(), false)
                .await;
        }
        if all_passing.is_none() {
            if let Passing::Only(keys) = self.indexes.passing(&request.scope, &request.filter) {
                *all_passing = Some(keys);
            }
        }
        if all_passing.is_none() {
            let filter = IndexFilter::from(&request.filter);
            let query: Arc<[f32]> = Arc::from(vector);
            let pages = FILTER_OVERFETCH.map(|factor| pool.saturating_mul(factor));
            let found = self
                .indexes
                .widen_until_passing(
                    &request.scope,
                    &request.filter,
                    pool,
                    request.now,
                    pages,
                    |wide| {
                        self.indexes.nearest(
                            &request.scope,
                            query.clone(),
                            wide,
                            &filter,
                            restriction.cloned(),
                        )
                    },
                )
                .await?;
            if let Some(found) = found {
                return Ok(found.into_iter().map(|(key, _)| key).collect());
            }
            let keys = self
                .store
                .filtered_chunk_keys(&request.scope, &request.filter, RESTRICT_MAX, request.now)
                .await?;
            *all_passing = Some(Arc::new(keys.into_iter().collect()));
        }
        let Some(all) = all_passing.as_ref() else {
            return Ok(Vec::new());
        };
        let only = match restriction {
            Some(restriction) => Arc::new(all.intersection(restriction)),
            None => all.clone(),
        };
        self.nearest(request, vector, pool, Some(only), false).await
    }

    async fn hybrid(
        &self,
        request: &SearchRequest,
        lexical: &LexicalQuery,
        pool: usize,
    ) -> Result<Vec<Ranked>, SearchError> {
        let thinking = request.mode == Mode::Thinking;
        let restriction = self.restriction(request, lexical).await?;
        if restriction.as_ref().is_some_and(|r| r.is_empty()) {
            return Ok(Vec::new());
        }
        let mut all_passing = None;
        let mut evidence = self
            .first_stage(
                request,
                lexical,
                pool,
                restriction.as_ref(),
                &mut all_passing,
            )
            .await?;
        self.fuse(request, lexical, &mut evidence).await?;
        if thinking && !evidence.candidates.is_empty() {
            let expand = self.expand(
                request,
                lexical,
                pool,
                restriction.as_ref(),
                &mut all_passing,
                &mut evidence,
            );
            self.clock.time(Stage::Expand, expand).await?;
            self.fuse(request, lexical, &mut evidence).await?;
            self.clock
                .time(Stage::Rerank, async {
                    self.read_best(request, &mut evidence.candidates, self.tuning.rerank_depth)
                        .await?;
                    self.rerank(request, &mut evidence)
                })
                .await?;
        }
        Ok(evidence
            .candidates
            .into_iter()
            .map(|(key, c)| Ranked {
                key,
                score: c.fused,
                hit: c.hit,
                scores: c.scores,
            })
            .collect())
    }

    /// Each candidate's similarity (see [`Self::measure`]), then the fusion of the signals
    /// (see [`Self::score`]).
    async fn fuse(
        &self,
        request: &SearchRequest,
        lexical: &LexicalQuery,
        evidence: &mut Evidence,
    ) -> Result<(), SearchError> {
        self.clock
            .time(Stage::Fuse, async {
                self.measure(request, evidence).await?;
                self.score(request, lexical, evidence);
                Ok(())
            })
            .await
    }

    /// Keyword and vector pools (and app-only pools when asked) as candidates, unread. BM25
    /// comes from the keyword pools: a chunk outside them scores below the pool's last, and
    /// counts as 0 (scoring it exactly costs a second pass over the postings). The keyword
    /// search runs while the model embeds the query and the vector search follows (each on a
    /// blocking thread of its own), so a query takes the longer of the two sides, not their sum.
    async fn first_stage(
        &self,
        request: &SearchRequest,
        lexical: &LexicalQuery,
        pool: usize,
        restriction: Option<&Arc<Keys>>,
        all_passing: &mut Option<Arc<Keys>>,
    ) -> Result<Evidence, SearchError> {
        let keyword_side = async {
            if lexical.is_empty() {
                return Ok(Vec::new());
            }
            self.indexes
                .keyword_ranked(&request.scope, &request.filter, lexical, pool, request.now)
                .await
        };
        let vector_side = async {
            let query_vector = self
                .clock
                .time(Stage::Embed, self.embed(&request.query))
                .await?;
            let keys = self.nearest_passing(request, &query_vector, pool, restriction, all_passing);
            let keys = self.clock.time(Stage::Vector, keys).await?;
            Ok::<_, SearchError>((query_vector, keys))
        };
        let (vector_side, found) =
            tokio::join!(vector_side, self.clock.time(Stage::Keyword, keyword_side));
        let (query_vector, keys) = vector_side?;
        let mut keyword: HashMap<ChunkKey, f32> = found?.into_iter().collect();
        let mut candidates = HashMap::new();
        add_candidates(&mut candidates, keyword.keys().copied());
        add_candidates(&mut candidates, keys);
        if request.query_apps {
            let pools = self.app_pools(request, lexical, &query_vector, pool, restriction);
            let (app_keys, app_keyword) = self.clock.time(Stage::Vector, pools).await?;
            add_candidates(&mut candidates, app_keys);
            keyword.extend(app_keyword);
        }
        Ok(Evidence {
            candidates,
            keyword,
            expanded: HashMap::new(),
            expansion: LexicalQuery {
                terms: Vec::new(),
                operator: TermOperator::Or,
            },
            query_vectors: vec![query_vector],
        })
    }

    /// Pools drawn from app sources alone, so app content is considered even when other content
    /// crowds it out of the main pools: keys, and the BM25 of those found by keyword.
    async fn app_pools(
        &self,
        request: &SearchRequest,
        lexical: &LexicalQuery,
        query_vector: &[f32],
        pool: usize,
        restriction: Option<&Arc<Keys>>,
    ) -> Result<(Vec<ChunkKey>, Vec<(ChunkKey, f32)>), SearchError> {
        let apps = ChunkFilter {
            apps: true,
            ..request.filter.clone()
        };
        let found = if lexical.is_empty() {
            Vec::new()
        } else {
            self.keyword_pool(request, &apps, lexical, pool).await?
        };
        let mut keys: Vec<ChunkKey> = found.iter().map(|f| f.0).collect();
        let app_keys: Keys = match self.indexes.passing(&request.scope, &apps) {
            Passing::Only(keys) => match restriction {
                Some(restriction) => keys.intersection(restriction),
                None => Keys::clone(&keys),
            },
            Passing::Any | Passing::Store => self
                .store
                .filtered_chunk_keys(&request.scope, &apps, RESTRICT_MAX, request.now)
                .await?
                .into_iter()
                .filter(|k| restriction.is_none_or(|r| r.contains(*k)))
                .collect(),
        };
        keys.extend(
            self.nearest(request, query_vector, pool, Some(Arc::new(app_keys)), true)
                .await?,
        );
        Ok((keys, found))
    }

    /// Collection weights and recency (which read every candidate's row: a candidate whose
    /// row the store no longer gives leaves), then the final order.
    async fn finish(
        &self,
        request: &SearchRequest,
        ranked: &mut Vec<Ranked>,
    ) -> Result<(), SearchError> {
        if !request.weights.is_empty() || request.recency_bias > 0.0 {
            self.read_ranked(request, ranked).await?;
        }
        let half_life_ms = f64::from(self.tuning.recency_half_life_days) * 86_400_000.0;
        for r in ranked.iter_mut() {
            let Some(hit) = &r.hit else {
                continue;
            };
            let weight = request
                .weights
                .get(hit.item.collection.as_str())
                .copied()
                .unwrap_or(1.0);
            r.score *= weight;
            if request.recency_bias > 0.0 {
                let age = request.now.since(item_time(&hit.item)).as_millis() as f64;
                let freshness = 0.5f64.powf(age / half_life_ms) as f32;
                r.score *= 1.0 - request.recency_bias + request.recency_bias * freshness;
            }
        }
        for r in ranked.iter_mut() {
            r.score = r.score.clamp(0.0, 1.0);
        }
        sort(ranked);
        Ok(())
    }
}

/// Best first, ties by key: the same state always gives the same order.
pub(crate) fn sort(ranked: &mut [Ranked]) {
    ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.key.cmp(&b.key)));
}

/// When an item happened: its own `timestamp` when it parses as RFC 3339, else when it was
/// last written.
fn item_time(item: &engram_store::ItemRecord) -> UnixMs {
    time::OffsetDateTime::parse(
        &item.fields.timestamp,
        &time::format_description::well_known::Rfc3339,
    )
    .map(|t| UnixMs::from_millis((t.unix_timestamp_nanos() / 1_000_000) as i64))
    .unwrap_or(item.updated_at)
}

#[cfg(test)]
mod tests {
    mod without_a_model {
        #![allow(clippy::unwrap_used)]

        use std::sync::Arc;

        use engram_config::SearchConfig;
        use engram_index::Indexes;
        use engram_store::conformance::{chunk, claim_ours, item, setup};
        use engram_store::{NewChunk, NewItem, Store};
        use engram_testkit::{HashEmbedder, TempStore};

        use super::super::*;
        use crate::rerank::dot;
        use crate::EmbeddingReranker;

        const NOW: UnixMs = UnixMs::from_millis(1_700_000_000_000);

        struct Kit {
            _store: TempStore,
            store: Arc<dyn Store>,
            indexes: Indexes,
            scope: DatabaseScope,
            tuning: SearchTuning,
        }

        /// A store whose items are indexed as one chunk each, embedded by the testkit.
        async fn kit(items: Vec<NewItem>) -> Kit {
            let temp = TempStore::new().await;
            let store: Arc<dyn Store> = temp.store.clone();
            let scope = setup(store.as_ref(), "db_retrieve", "org-retrieve").await;
            store
                .enqueue_items(&scope, &items, true, NOW)
                .await
                .unwrap();
            for claimed in claim_ours(store.as_ref(), &scope, "w", NOW).await {
                let text = claimed.text.clone().unwrap();
                let chunk = NewChunk {
                    embedding: HashEmbedder::vector(&text),
                    ..chunk(&claimed.id, 0, &text)
                };
                assert!(store
                    .complete_item(
                        &claimed,
                        &[chunk],
                        engram_store::AfterChunks::Completed,
                        NOW
                    )
                    .await
                    .unwrap());
            }
            let indexes = Indexes::in_memory(store.clone(), engram_testkit::DIMENSION);
            Kit {
                _store: temp,
                store,
                indexes,
                scope,
                tuning: SearchTuning::from(&SearchConfig::default()),
            }
        }

        impl Kit {
            fn request(&self, query: &str) -> SearchRequest {
                SearchRequest {
                    scope: self.scope.clone(),
                    filter: ChunkFilter::default(),
                    weights: HashMap::new(),
                    query: query.into(),
                    method: Method::Hybrid,
                    operator: TermOperator::Or,
                    mode: Mode::Fast,
                    alpha: 0.5,
                    recency_bias: 0.0,
                    limit: 10,
                    query_apps: false,
                    graph_lane: false,
                    vector_prune: false,
                    now: NOW,
                }
            }

            async fn ids(&self, request: &SearchRequest) -> Vec<(String, f32)> {
                let retriever = Retriever {
                    store: self.store.as_ref(),
                    graph: self.store.as_ref(),
                    indexes: &self.indexes,
                    embedder: Arc::new(HashEmbedder),
                    reranker: &EmbeddingReranker,
                    tuning: &self.tuning,
                    clock: StageClock::default(),
                };
                retriever
                    .search(request)
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|r| (r.hit.item.id, r.score))
                    .collect()
            }
        }

        fn in_collection(coll: &str, id: &str, text: &str) -> NewItem {
            item(coll, id, text)
        }

        /// Ranking reads what the indexes hold; a chunk that expired since it was indexed (not
        /// yet purged) is passed over when the results are read, and the request still gets
        /// what is live, even when the expired fill the whole first tier.
        #[tokio::test]
        async fn chunks_expired_since_indexing_are_passed_over() {
            let mut items: Vec<NewItem> = (0..20)
                .map(|i| {
                    let mut memory = item("c", &format!("m{i}"), "zebra zebra zebra stripes");
                    memory.kind = ItemKind::Memory;
                    memory.origin = engram_store::ItemOrigin::Memory;
                    memory.fields.expires_at = Some(NOW.after(std::time::Duration::from_secs(1)));
                    memory
                })
                .collect();
            items.extend((0..3).map(|i| item("c", &format!("k{i}"), &format!("a zebra once {i}"))));
            let mut kit = kit(items).await;
            kit.tuning.fast_pool = 10;
            for method in [Method::Hybrid, Method::Text] {
                for mode in [Mode::Fast, Mode::Thinking] {
                    let mut request = kit.request("zebra stripes");
                    (request.method, request.mode) = (method, mode);
                    let live = kit.ids(&request).await;
                    assert_eq!(live.len(), 10, "{method:?} {mode:?} before expiry");
                    request.now = NOW.after(std::time::Duration::from_secs(2));
                    let after = kit.ids(&request).await;
                    let mut ids: Vec<&str> = after.iter().map(|(id, _)| id.as_str()).collect();
                    ids.sort_unstable();
                    assert_eq!(ids, ["k0", "k1", "k2"], "{method:?} {mode:?}");
                    request.limit = 2;
                    assert_eq!(kit.ids(&request).await, after[..2], "{method:?} {mode:?}");
                }
            }
        }

        #[tokio::test]
        async fn collection_weights_scale_scores() {
            let kit = kit(vec![
                in_collection("a", "in-a", "zebras graze on the savanna"),
                in_collection("b", "in-b", "zebras graze on the savanna"),
            ])
            .await;
            let mut request = kit.request("zebras savanna");
            let even = kit.ids(&request).await;
            assert_eq!(even.len(), 2);
            assert!((even[0].1 - even[1].1).abs() < 1e-6, "{even:?}");
            request.weights = HashMap::from([("b".to_owned(), 0.5)]);
            let weighted = kit.ids(&request).await;
            assert_eq!(weighted[0].0, "in-a", "{weighted:?}");
            assert!(
                (weighted[1].1 - weighted[0].1 * 0.5).abs() < 1e-4,
                "{weighted:?}"
            );
        }

        #[tokio::test]
        async fn recency_bias_prefers_the_newer_of_equals() {
            let mut old = item("c", "old", "the quarterly report on river otters");
            old.fields.timestamp = "2020-01-01T00:00:00Z".into();
            let mut new = item("c", "new", "the quarterly report on river otters");
            new.fields.timestamp = "2023-11-10T00:00:00Z".into();
            let kit = kit(vec![old, new]).await;
            let mut request = kit.request("river otters report");
            request.recency_bias = 1.0;
            let ranked = kit.ids(&request).await;
            assert_eq!(ranked[0].0, "new", "{ranked:?}");
            assert!(
                ranked[1].1 < 0.01,
                "three years at a 30-day half-life: {ranked:?}"
            );
        }

        #[tokio::test]
        async fn alpha_zero_ranks_by_keywords_and_alpha_one_by_meaning() {
            let docs = [
                ("a", "zygote zygote zygote"),
                ("b", "cells divide in the early embryo"),
                (
                    "c",
                    "zygote cells embryo development stages of growth in mammals and birds",
                ),
            ];
            let kit = kit(docs.iter().map(|(id, t)| item("c", id, t)).collect()).await;
            let query = "zygote embryo cells";
            let order =
                |ranked: Vec<(String, f32)>| ranked.into_iter().map(|r| r.0).collect::<Vec<_>>();
            let mut text_only = kit.request(query);
            text_only.method = Method::Text;
            let by_keywords = order(kit.ids(&text_only).await);
            let q = HashEmbedder::vector(query);
            let mut by_meaning: Vec<(String, f32)> = docs
                .iter()
                .map(|(id, t)| ((*id).to_owned(), dot(&q, &HashEmbedder::vector(t))))
                .collect();
            by_meaning.sort_by(|x, y| y.1.total_cmp(&x.1));
            let by_meaning = order(by_meaning);
            assert_ne!(
                by_keywords[0], by_meaning[0],
                "the two signals disagree here"
            );

            let mut request = kit.request(query);
            request.alpha = 0.0;
            assert_eq!(order(kit.ids(&request).await), by_keywords);
            request.alpha = 1.0;
            let semantic = kit.ids(&request).await;
            assert!(
                semantic.iter().all(|(_, s)| (0.0..=1.0).contains(s)),
                "{semantic:?}"
            );
            assert_eq!(order(semantic), by_meaning);
        }

        /// Words of the generated corpus: few, so that chunks share words and scores tie.
        const VOCAB: [&str; 12] = [
            "otter",
            "river",
            "report",
            "zebra",
            "savanna",
            "quarterly",
            "lighthouse",
            "keeper",
            "embryo",
            "cells",
            "growth",
            "harbour",
        ];

        /// 240 one-chunk items of 3 to 8 vocabulary words in two collections, every tenth a
        /// copy of the one before (equal scores), dated a day apart.
        fn generated_corpus() -> Vec<NewItem> {
            let mut seed: u64 = 0x5eed;
            let mut next = move || {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (seed >> 33) as usize
            };
            let mut texts: Vec<String> = Vec::new();
            for i in 0..240 {
                let text = if i % 10 == 9 {
                    texts[i - 1].clone()
                } else {
                    let n = 3 + next() % 6;
                    (0..n)
                        .map(|_| VOCAB[next() % VOCAB.len()])
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                texts.push(text);
            }
            texts
                .iter()
                .enumerate()
                .map(|(i, text)| {
                    let mut it = item(if i % 3 == 0 { "b" } else { "a" }, &format!("g{i}"), text);
                    it.fields.timestamp =
                        format!("2023-{:02}-{:02}T00:00:00Z", 1 + i % 12, 1 + i % 28);
                    it
                })
                .collect()
        }

        /// The first k results of a request are the first k of the same request asking for
        /// more, in every mode and method, with weights and recency, across the tier boundary
        /// (pools of 20 and 30 here).
        #[test]
        fn the_first_results_do_not_move_when_more_are_asked() {
            use proptest::prelude::*;
            let runtime = tokio::runtime::Runtime::new().unwrap();
            let mut kit = runtime.block_on(kit(generated_corpus()));
            kit.tuning.fast_pool = 20;
            kit.tuning.thinking_pool = 30;
            let config = ProptestConfig {
                cases: 40,
                failure_persistence: None,
                ..ProptestConfig::default()
            };
            proptest!(config, |(
                words in proptest::collection::vec(0..VOCAB.len(), 1..4),
                k in 1usize..60,
                more in 1usize..260,
                thinking: bool,
                text: bool,
                weighted: bool,
                recent: bool,
            )| {
                let query: Vec<&str> = words.iter().map(|w| VOCAB[*w]).collect();
                let mut request = kit.request(&query.join(" "));
                request.mode = if thinking { Mode::Thinking } else { Mode::Fast };
                request.method = if text { Method::Text } else { Method::Hybrid };
                if weighted {
                    request.weights = HashMap::from([("b".to_owned(), 0.5)]);
                }
                if recent {
                    request.recency_bias = 0.5;
                }
                request.limit = k;
                let few = runtime.block_on(kit.ids(&request));
                request.limit = k + more;
                let many = runtime.block_on(kit.ids(&request));
                prop_assert_eq!(few.len(), k.min(many.len()));
                let few: Vec<&String> = few.iter().map(|r| &r.0).collect();
                let prefix: Vec<&String> = many.iter().take(k).map(|r| &r.0).collect();
                prop_assert_eq!(few, prefix);
                prop_assert!(many.windows(2).all(|w| w[0].1 >= w[1].1), "{many:?}");
            });
        }

        #[tokio::test]
        async fn a_written_chunk_is_found_by_the_next_query_and_a_deleted_one_never() {
            let kit = kit(vec![item("c", "first", "lighthouse keepers log")]).await;
            let request = kit.request("lighthouse");
            assert_eq!(kit.ids(&request).await.len(), 1);
            kit.store
                .delete_items(
                    &kit.scope,
                    &engram_store::conformance::collection("c"),
                    None,
                    &["first".into()],
                    NOW,
                )
                .await
                .unwrap();
            assert!(
                kit.ids(&request).await.is_empty(),
                "deleted at once for queries"
            );
        }
    }
}
