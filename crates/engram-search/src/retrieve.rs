//! Query execution: keyword (BM25) and vector candidates, fused under `alpha`, with collection
//! weights and recency; `thinking` adds query expansion (pseudo-relevance feedback on both
//! sides) and a second-stage rerank. Everything returned has been read back from the store
//! within the request's scope and filter, so the derived vector index can never leak a chunk.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub use engram_config::Fusion;
use engram_config::SearchConfig;
use engram_embed::Embedder;
use engram_index::analyzer::{content_terms, keyword_query};
use engram_index::{IndexError, IndexFilter, Indexes, LexicalQuery, TermOperator};
use engram_store::{ChunkFilter, ChunkHit, ChunkSearch, DatabaseScope, StoreError};
use engram_types::ItemKind;

use crate::analysis::Mode;
use crate::rerank::{dot, RerankCandidate, RerankInput, Reranker};

/// How chunks are matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Keyword and semantic candidates fused under `alpha`.
    Hybrid,
    /// BM25 alone, deterministic.
    Text,
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
    pub now: i64,
}

/// A chunk in final rank order with its score in 0..=1.
#[derive(Debug, Clone)]
pub struct RankedChunk {
    pub hit: ChunkHit,
    pub score: f32,
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
    pub indexes: &'a Indexes,
    pub embedder: Arc<dyn Embedder>,
    pub reranker: &'a dyn Reranker,
    pub tuning: &'a SearchTuning,
}

/// One candidate and what is known about it.
struct Candidate {
    hit: ChunkHit,
    keyword: f32,
    expansion_keyword: f32,
    semantic: f32,
    fused: f32,
}

/// A linear map of scores onto 0..=1, fixed from one set of values.
#[derive(Debug, Clone, Copy)]
struct Scale {
    low: f32,
    high: f32,
    /// What every value maps to when the range is empty.
    flat: f32,
}

impl Scale {
    /// `x / max`; everything 0 when every value is 0.
    fn by_max(values: impl Iterator<Item = f32>) -> Self {
        Self {
            low: 0.0,
            high: values.fold(0.0f32, f32::max),
            flat: 0.0,
        }
    }

    /// `(x - min) / (max - min)`; everything 1 when all values are equal.
    fn min_max(values: impl Iterator<Item = f32>) -> Self {
        let (low, high) = values.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
        Self {
            low,
            high,
            flat: 1.0,
        }
    }

    fn apply(self, x: f32) -> f32 {
        if self.high > self.low {
            (x - self.low) / (self.high - self.low)
        } else {
            self.flat
        }
    }
}

impl Retriever<'_> {
    pub async fn search(&self, request: &SearchRequest) -> Result<Vec<RankedChunk>, SearchError> {
        let lexical = keyword_query(&request.query, request.operator);
        if request.limit == 0 {
            return Ok(Vec::new());
        }
        // Every write made before the query is in the indexes it reads.
        self.indexes.catch_up().await?;
        let mut ranked = match request.method {
            Method::Text => self.text(request, &lexical).await?,
            Method::Hybrid => self.hybrid(request, &lexical).await?,
        };
        self.finish(request, &mut ranked);
        Ok(ranked)
    }

    /// BM25 alone: the keyword pool, scaled by the best score.
    async fn text(
        &self,
        request: &SearchRequest,
        lexical: &LexicalQuery,
    ) -> Result<Vec<RankedChunk>, SearchError> {
        if lexical.is_empty() {
            return Ok(Vec::new());
        }
        // Weights and recency may reorder: draw more than the limit when they apply.
        let reorders = request.recency_bias > 0.0 || request.weights.values().any(|w| *w < 1.0);
        let pool = if reorders {
            request.limit.max(self.tuning.fast_pool)
        } else {
            request.limit
        };
        let found = self
            .keyword_pool(request, &request.filter, lexical, pool)
            .await?;
        let scores: HashMap<i64, f32> = found.iter().copied().collect();
        let keys: Vec<i64> = found.iter().map(|f| f.0).collect();
        let hits = self
            .store
            .fetch_chunks(&request.scope, &request.filter, &keys, request.now)
            .await?;
        let scale = Scale::by_max(found.iter().map(|f| f.1));
        Ok(hits
            .into_iter()
            .map(|hit| {
                let score = scale.apply(scores.get(&hit.chunk_key).copied().unwrap_or(0.0));
                RankedChunk { hit, score }
            })
            .collect())
    }

    /// The best `pool` chunks by BM25 within the request's scope and `filter`.
    async fn keyword_pool(
        &self,
        request: &SearchRequest,
        filter: &ChunkFilter,
        lexical: &LexicalQuery,
        pool: usize,
    ) -> Result<Vec<(i64, f32)>, SearchError> {
        Ok(self
            .indexes
            .keyword_search(&request.scope, filter, lexical, pool, request.now)
            .await?)
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
        only: Option<Arc<HashSet<i64>>>,
        apps_only: bool,
    ) -> Result<Vec<i64>, SearchError> {
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
    ) -> Result<Option<Arc<HashSet<i64>>>, SearchError> {
        if request.operator == TermOperator::Or {
            return Ok(None);
        }
        let matches = self
            .keyword_pool(request, &request.filter, lexical, RESTRICT_MAX as usize)
            .await?;
        Ok(Some(Arc::new(matches.into_iter().map(|m| m.0).collect())))
    }

    /// The `pool` nearest chunks that pass the request's item conditions (metadata filters)
    /// and `restriction`. The scan first reads a few times the pool (`FILTER_OVERFETCH`)
    /// without the conditions and checks them on what it found: when at least `pool` pass (or
    /// the scan read everything), those are exactly the nearest passing chunks, since every
    /// passing chunk it did not read ranks below them. Only a filter passing under 1 in 32 of
    /// the nearest makes it read every passing key and scan within them; `all_passing` keeps
    /// those for the request's next scan.
    async fn nearest_passing(
        &self,
        request: &SearchRequest,
        vector: &[f32],
        pool: usize,
        restriction: Option<&Arc<HashSet<i64>>>,
        all_passing: &mut Option<Arc<HashSet<i64>>>,
    ) -> Result<Vec<i64>, SearchError> {
        if !request.filter.has_item_conditions() {
            return self
                .nearest(request, vector, pool, restriction.cloned(), false)
                .await;
        }
        if all_passing.is_none() {
            for factor in FILTER_OVERFETCH {
                let wide = pool.saturating_mul(factor);
                let found = self
                    .nearest(request, vector, wide, restriction.cloned(), false)
                    .await?;
                let passing: HashSet<i64> = self
                    .store
                    .passing_chunk_keys(&request.scope, &request.filter, &found, request.now)
                    .await?
                    .into_iter()
                    .collect();
                if passing.len() >= pool || found.len() < wide {
                    return Ok(found
                        .into_iter()
                        .filter(|k| passing.contains(k))
                        .take(pool)
                        .collect());
                }
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
            Some(restriction) => Arc::new(all.intersection(restriction).copied().collect()),
            None => all.clone(),
        };
        self.nearest(request, vector, pool, Some(only), false).await
    }

    /// Adds the chunks of `keys` not yet known to `candidates` (read back within scope).
    async fn add_candidates(
        &self,
        request: &SearchRequest,
        keys: impl IntoIterator<Item = i64>,
        candidates: &mut HashMap<i64, Candidate>,
    ) -> Result<(), SearchError> {
        let new: Vec<i64> = keys
            .into_iter()
            .filter(|k| !candidates.contains_key(k))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        for hit in self
            .store
            .fetch_chunks(&request.scope, &request.filter, &new, request.now)
            .await?
        {
            candidates.insert(
                hit.chunk_key,
                Candidate {
                    hit,
                    keyword: 0.0,
                    expansion_keyword: 0.0,
                    semantic: 0.0,
                    fused: 0.0,
                },
            );
        }
        Ok(())
    }

    async fn hybrid(
        &self,
        request: &SearchRequest,
        lexical: &LexicalQuery,
    ) -> Result<Vec<RankedChunk>, SearchError> {
        let thinking = request.mode == Mode::Thinking;
        let pool = request.limit.max(if thinking {
            self.tuning.thinking_pool
        } else {
            self.tuning.fast_pool
        });
        let restriction = self.restriction(request, lexical).await?;
        if restriction.as_ref().is_some_and(|r| r.is_empty()) {
            return Ok(Vec::new());
        }
        // First stage: keyword and vector pools (and app-only pools when asked).
        // BM25 comes from the keyword pools: a chunk outside them scores below the pool's
        // last, and counts as 0 (scoring it exactly costs a second pass over the postings).
        // The keyword search runs while the model embeds the query.
        let keyword_pool = async {
            if lexical.is_empty() {
                return Ok(Vec::new());
            }
            self.keyword_pool(request, &request.filter, lexical, pool)
                .await
        };
        let (query_vector, found) = tokio::join!(self.embed(&request.query), keyword_pool);
        let query_vector = query_vector?;
        let mut keyword: HashMap<i64, f32> = found?.into_iter().collect();
        let mut keys: Vec<i64> = keyword.keys().copied().collect();
        let mut all_passing = None;
        keys.extend(
            self.nearest_passing(
                request,
                &query_vector,
                pool,
                restriction.as_ref(),
                &mut all_passing,
            )
            .await?,
        );
        if request.query_apps {
            let apps = ChunkFilter {
                origin: Some(engram_store::ItemOrigin::App),
                ..request.filter.clone()
            };
            if !lexical.is_empty() {
                let found = self.keyword_pool(request, &apps, lexical, pool).await?;
                keys.extend(found.iter().map(|f| f.0));
                keyword.extend(found);
            }
            let app_keys: HashSet<i64> = self
                .store
                .filtered_chunk_keys(&request.scope, &apps, RESTRICT_MAX, request.now)
                .await?
                .into_iter()
                .filter(|k| restriction.as_ref().is_none_or(|r| r.contains(k)))
                .collect();
            keys.extend(
                self.nearest(request, &query_vector, pool, Some(Arc::new(app_keys)), true)
                    .await?,
            );
        }
        let mut candidates = HashMap::new();
        self.add_candidates(request, keys, &mut candidates).await?;
        let mut query_vectors = vec![query_vector];
        let mut expansion = LexicalQuery {
            terms: Vec::new(),
            operator: TermOperator::Or,
        };
        let mut expanded: HashMap<i64, f32> = HashMap::new();
        self.score(
            request,
            lexical,
            &expansion,
            (&keyword, &expanded),
            &query_vectors,
            &mut candidates,
        );

        if thinking && !candidates.is_empty() {
            // Expansion from the best first-stage chunks: their centroid joins the query
            // vector, and their shared distinctive terms form a second keyword query.
            let mut best: Vec<&Candidate> = candidates.values().collect();
            best.sort_by(|a, b| b.fused.total_cmp(&a.fused));
            best.truncate(self.tuning.feedback_chunks);
            let feedback_vector = feedback_vector(
                &query_vectors[0],
                best.iter().map(|c| c.hit.embedding.as_slice()),
                self.tuning.feedback_vector_weight,
            );
            expansion.terms = expansion_terms(
                lexical,
                best.iter().map(|c| c.hit.content.as_str()),
                self.tuning.expansion_terms,
            );
            let mut more = Vec::new();
            if let Some(vector) = feedback_vector {
                more.extend(
                    self.nearest_passing(
                        request,
                        &vector,
                        pool,
                        restriction.as_ref(),
                        &mut all_passing,
                    )
                    .await?,
                );
                query_vectors.push(vector);
            }
            if !expansion.is_empty() {
                let found = self
                    .keyword_pool(request, &request.filter, &expansion, pool)
                    .await?;
                let found: Vec<(i64, f32)> = found
                    .into_iter()
                    .filter(|(k, _)| restriction.as_ref().is_none_or(|r| r.contains(k)))
                    .collect();
                more.extend(found.iter().map(|f| f.0));
                expanded.extend(found);
            }
            self.add_candidates(request, more, &mut candidates).await?;
            self.score(
                request,
                lexical,
                &expansion,
                (&keyword, &expanded),
                &query_vectors,
                &mut candidates,
            );
            self.rerank(request, &query_vectors, &mut candidates)?;
        }

        Ok(candidates
            .into_values()
            .map(|c| RankedChunk {
                score: c.fused,
                hit: c.hit,
            })
            .collect())
    }

    /// Sets every candidate's signals (BM25 from the keyword pools, exact cosine from the
    /// stored vectors) and fuses them under `alpha`.
    fn score(
        &self,
        request: &SearchRequest,
        lexical: &LexicalQuery,
        expansion: &LexicalQuery,
        (keyword, expanded): (&HashMap<i64, f32>, &HashMap<i64, f32>),
        query_vectors: &[Vec<f32>],
        candidates: &mut HashMap<i64, Candidate>,
    ) {
        for (key, c) in candidates.iter_mut() {
            c.keyword = keyword.get(key).copied().unwrap_or(0.0);
            c.expansion_keyword = expanded.get(key).copied().unwrap_or(0.0);
            c.semantic = if c.hit.embedding.len() == query_vectors[0].len() {
                let own = dot(&query_vectors[0], &c.hit.embedding);
                match query_vectors.get(1) {
                    Some(feedback) => {
                        let w = self.tuning.feedback_vector_weight;
                        (own + w * dot(feedback, &c.hit.embedding)) / (1.0 + w)
                    }
                    None => own,
                }
            } else {
                0.0
            };
        }
        let keyword_scale = Scale::by_max(candidates.values().map(|c| c.keyword));
        let expansion_scale = Scale::by_max(candidates.values().map(|c| c.expansion_keyword));
        let semantic_scale = Scale::min_max(candidates.values().map(|c| c.semantic));
        let lexical_weight = if expansion.is_empty() {
            0.0
        } else {
            self.tuning.expansion_keyword_weight
        };
        let alpha = if lexical.is_empty() {
            1.0
        } else {
            request.alpha
        };
        for c in candidates.values_mut() {
            let keyword = (keyword_scale.apply(c.keyword)
                + lexical_weight * expansion_scale.apply(c.expansion_keyword))
                / (1.0 + lexical_weight);
            c.fused = alpha * semantic_scale.apply(c.semantic) + (1.0 - alpha) * keyword;
        }
        if self.tuning.fusion == Fusion::Rrf {
            // Ranks by each signal; a chunk without any keyword match has no keyword rank.
            const K: f32 = 60.0;
            let keyword_of = |c: &Candidate| {
                keyword_scale.apply(c.keyword)
                    + lexical_weight * expansion_scale.apply(c.expansion_keyword)
            };
            let mut by_semantic: Vec<i64> = candidates.keys().copied().collect();
            by_semantic.sort_by(|a, b| candidates[b].semantic.total_cmp(&candidates[a].semantic));
            let mut by_keyword: Vec<i64> = candidates
                .iter()
                .filter(|(_, c)| keyword_of(c) > 0.0)
                .map(|(k, _)| *k)
                .collect();
            by_keyword
                .sort_by(|a, b| keyword_of(&candidates[b]).total_cmp(&keyword_of(&candidates[a])));
            let mut fused: HashMap<i64, f32> = HashMap::new();
            for (rank, key) in by_semantic.iter().enumerate() {
                *fused.entry(*key).or_default() += alpha / (K + 1.0 + rank as f32);
            }
            for (rank, key) in by_keyword.iter().enumerate() {
                *fused.entry(*key).or_default() += (1.0 - alpha) / (K + 1.0 + rank as f32);
            }
            // Scaled so that first on both sides scores 1.
            for (key, c) in candidates.iter_mut() {
                c.fused = fused.get(key).copied().unwrap_or(0.0) * (K + 1.0);
            }
        }
    }

    /// Second stage: the reranker scores the best fused candidates; its scaled score takes
    /// `rerank_weight` of theirs. Candidates below the depth keep their place below.
    fn rerank(
        &self,
        request: &SearchRequest,
        query_vectors: &[Vec<f32>],
        candidates: &mut HashMap<i64, Candidate>,
    ) -> Result<(), SearchError> {
        let mut order: Vec<i64> = candidates.keys().copied().collect();
        order.sort_by(|a, b| candidates[b].fused.total_cmp(&candidates[a].fused));
        order.truncate(self.tuning.rerank_depth);
        let inputs: Vec<RerankCandidate<'_>> = order
            .iter()
            .map(|k| {
                let hit = &candidates[k].hit;
                RerankCandidate {
                    title: &hit.item.fields.title,
                    content: &hit.content,
                    embedding: &hit.embedding,
                }
            })
            .collect();
        let scores = self.reranker.rerank(&RerankInput {
            query: &request.query,
            query_vectors,
            candidates: &inputs,
        })?;
        let scale = Scale::min_max(scores.iter().copied());
        let floor = order
            .iter()
            .map(|k| candidates[k].fused)
            .fold(f32::INFINITY, f32::min);
        let w = self.tuning.rerank_weight;
        for (key, score) in order.iter().zip(scores) {
            let c = candidates
                .get_mut(key)
                .expect("reranked keys are candidates");
            c.fused = (1.0 - w) * c.fused + w * scale.apply(score);
        }
        // Keep unreranked candidates below every reranked one.
        let reranked: HashSet<i64> = order.into_iter().collect();
        for (key, c) in candidates.iter_mut() {
            if !reranked.contains(key) {
                c.fused = c.fused.min(floor) * (1.0 - w);
            }
        }
        Ok(())
    }

    /// Collection weights and recency, then the final order (score, then key: deterministic)
    /// and the limit.
    fn finish(&self, request: &SearchRequest, ranked: &mut Vec<RankedChunk>) {
        let half_life_ms = f64::from(self.tuning.recency_half_life_days) * 86_400_000.0;
        for r in ranked.iter_mut() {
            let weight = request
                .weights
                .get(r.hit.item.collection.as_str())
                .copied()
                .unwrap_or(1.0);
            r.score *= weight;
            if request.recency_bias > 0.0 {
                let at = item_time_ms(&r.hit.item);
                let age = (request.now - at).max(0) as f64;
                let freshness = 0.5f64.powf(age / half_life_ms) as f32;
                r.score *= 1.0 - request.recency_bias + request.recency_bias * freshness;
            }
            r.score = r.score.clamp(0.0, 1.0);
        }
        ranked.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.hit.chunk_key.cmp(&b.hit.chunk_key))
        });
        ranked.truncate(request.limit);
    }
}

/// When an item happened: its own `timestamp` when it parses as RFC 3339, else when it was
/// last written.
fn item_time_ms(item: &engram_store::ItemRecord) -> i64 {
    time::OffsetDateTime::parse(
        &item.fields.timestamp,
        &time::format_description::well_known::Rfc3339,
    )
    .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
    .unwrap_or(item.updated_at)
}

/// `normalize(query + weight * mean(feedback))`, when there is feedback.
fn feedback_vector<'a>(
    query: &[f32],
    feedback: impl Iterator<Item = &'a [f32]>,
    weight: f32,
) -> Option<Vec<f32>> {
    let mut sum = vec![0.0f32; query.len()];
    let mut n = 0;
    for v in feedback.filter(|v| v.len() == query.len()) {
        sum.iter_mut().zip(v).for_each(|(s, x)| *s += x);
        n += 1;
    }
    if n == 0 {
        return None;
    }
    let mut out: Vec<f32> = query
        .iter()
        .zip(&sum)
        .map(|(q, s)| q + weight * s / n as f32)
        .collect();
    let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        out.iter_mut().for_each(|x| *x /= norm);
    }
    Some(out)
}

/// Terms shared by at least two feedback chunks (or the most frequent ones of a single chunk),
/// not already in the query, most widespread first.
fn expansion_terms<'a>(
    query: &LexicalQuery,
    feedback: impl Iterator<Item = &'a str>,
    limit: usize,
) -> Vec<String> {
    let known: HashSet<&str> = query.terms.iter().map(String::as_str).collect();
    let mut spread: HashMap<String, (usize, usize)> = HashMap::new();
    let mut chunks = 0;
    for text in feedback {
        chunks += 1;
        let mut seen = HashSet::new();
        for term in content_terms(text) {
            if term.chars().count() < 3 || known.contains(term.as_str()) {
                continue;
            }
            let entry = spread.entry(term.clone()).or_default();
            entry.1 += 1;
            if seen.insert(term) {
                entry.0 += 1;
            }
        }
    }
    let min_spread = if chunks > 1 { 2 } else { 1 };
    let mut terms: Vec<(String, (usize, usize))> = spread
        .into_iter()
        .filter(|(_, (docs, _))| *docs >= min_spread)
        .collect();
    terms.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    terms.into_iter().take(limit).map(|t| t.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scaled values of `values`, sorted by the value: each in 0..=1, in non-decreasing order.
    fn bounded_and_monotone(values: &[f32], scale: Scale) -> Result<(), String> {
        let mut scaled: Vec<(f32, f32)> = values.iter().map(|v| (*v, scale.apply(*v))).collect();
        scaled.sort_by(|a, b| a.0.total_cmp(&b.0));
        let bounded = scaled.iter().all(|(_, s)| (0.0..=1.0 + 1e-6).contains(s));
        let monotone = scaled.windows(2).all(|p| p[0].1 <= p[1].1 + 1e-6);
        (bounded && monotone)
            .then_some(())
            .ok_or(format!("{scaled:?}"))
    }

    proptest::proptest! {
        /// BM25 scores (non-negative) scaled by their best, and cosines scaled min-max: every
        /// candidate lands in 0..=1 and keeps its order.
        #[test]
        fn scaling_is_bounded_and_monotone(values in proptest::collection::vec(-1e6f32..1e6, 1..50)) {
            let scores: Vec<f32> = values.iter().map(|v| v.abs()).collect();
            let by_max = bounded_and_monotone(&scores, Scale::by_max(scores.iter().copied()));
            proptest::prop_assert!(by_max.is_ok(), "{by_max:?}");
            let min_max = bounded_and_monotone(&values, Scale::min_max(values.iter().copied()));
            proptest::prop_assert!(min_max.is_ok(), "{min_max:?}");
        }
    }

    #[test]
    fn normalisers_are_safe_on_degenerate_input() {
        assert_eq!(Scale::by_max([0.0, 0.0].into_iter()).apply(0.0), 0.0);
        assert_eq!(Scale::min_max([0.3, 0.3].into_iter()).apply(0.3), 1.0);
        let m = Scale::min_max([0.2, 0.6].into_iter());
        assert!((m.apply(0.4) - 0.5).abs() < 1e-6);
        assert!((Scale::by_max([2.0, 4.0].into_iter()).apply(2.0) - 0.5).abs() < 1e-6);
    }

    #[test]
    fn expansion_takes_shared_new_terms() {
        let query = keyword_query("protein folding", TermOperator::Or);
        let terms = expansion_terms(
            &query,
            [
                "chaperone proteins assist folding; chaperone",
                "the chaperone binds misfolded protein",
                "kinase signalling",
            ]
            .into_iter(),
            5,
        );
        assert_eq!(terms, ["chaperone"]);
    }

    mod without_a_model {
        #![allow(clippy::unwrap_used)]

        use std::sync::Arc;

        use engram_config::SearchConfig;
        use engram_index::Indexes;
        use engram_store::conformance::{chunk, claim_ours, item, setup};
        use engram_store::{NewChunk, NewItem, Store};
        use engram_testkit::{HashEmbedder, TempStore};

        use super::super::*;
        use crate::EmbeddingReranker;

        const NOW: i64 = 1_700_000_000_000;

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
                assert!(store.complete_item(&claimed, &[chunk], NOW).await.unwrap());
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
                    now: NOW,
                }
            }

            async fn ids(&self, request: &SearchRequest) -> Vec<(String, f32)> {
                let retriever = Retriever {
                    store: self.store.as_ref(),
                    indexes: &self.indexes,
                    embedder: Arc::new(HashEmbedder),
                    reranker: &EmbeddingReranker,
                    tuning: &self.tuning,
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

    #[test]
    fn feedback_vector_is_unit_length() {
        let v = feedback_vector(&[1.0, 0.0], [[0.0f32, 1.0].as_slice()].into_iter(), 1.0).unwrap();
        assert!((v[0] - v[1]).abs() < 1e-6);
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        assert!(feedback_vector(&[1.0], std::iter::empty(), 1.0).is_none());
    }
}
