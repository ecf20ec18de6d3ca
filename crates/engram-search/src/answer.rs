//! Answering a query, every stage in one place: retrieval (keyword and vector candidates,
//! fusion, expansion, rerank, the graph lane, weights and recency), temporal reasoning, and
//! what the answer carries beside its chunks (neighbours, linked sources, graph context). Each
//! stage's time is measured where it runs, and each chunk keeps the scores it had at each stage,
//! so a caller can show why a chunk ranked where it did.

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use engram_store::ChunkHit;
use engram_types::temporal::TemporalIntent;

use crate::context::{GraphContext, LinkedChunk};
use crate::temporal::{temporal_rerank, TemporalOutcome, TEMPORAL_POOL};
use crate::{RankedChunk, Retriever, SearchError, SearchRequest};

/// A stage of answering a query. Stages may overlap (the query is embedded while the keyword
/// index is searched), so their times need not add up to the whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// The derived indexes catching up with the store's change feed.
    CatchUp,
    /// Embedding the query.
    Embed,
    /// Keyword (BM25) candidates.
    Keyword,
    /// Vector candidates (nearest chunks, with filters).
    Vector,
    /// Each candidate's similarity, then hybrid fusion under `alpha`.
    Fuse,
    /// Query expansion from the first candidates (thinking mode).
    Expand,
    /// The second-stage rerank (thinking mode).
    Rerank,
    /// The graph lane: entities the query names, bridges and the walk.
    GraphLane,
    /// Collection weights and recency.
    Weights,
    /// Reading the ranked chunks' rows from the store.
    Read,
    /// Temporal reasoning's promotion.
    Temporal,
    /// Neighbouring chunks of each hit.
    Related,
    /// Chunks of the linked sources (forceful relations).
    Linked,
    /// The graph context.
    GraphContext,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CatchUp => "catch_up",
            Self::Embed => "embed",
            Self::Keyword => "keyword",
            Self::Vector => "vector",
            Self::Fuse => "fuse",
            Self::Expand => "expand",
            Self::Rerank => "rerank",
            Self::GraphLane => "graph_lane",
            Self::Weights => "weights",
            Self::Read => "read",
            Self::Temporal => "temporal",
            Self::Related => "related",
            Self::Linked => "linked",
            Self::GraphContext => "graph_context",
        }
    }
}

/// How long one stage took over a whole answer (a stage run twice, as in the deepest tier,
/// adds up).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageTime {
    pub stage: Stage,
    pub elapsed: Duration,
}

/// Collects stage times while a query runs, in the order stages first ran.
#[derive(Debug, Default)]
pub struct StageClock(Mutex<Vec<StageTime>>);

impl StageClock {
    /// Runs `work`, adding its time to `stage`.
    pub(crate) async fn time<T>(&self, stage: Stage, work: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let out = work.await;
        self.add(stage, started.elapsed());
        out
    }

    fn add(&self, stage: Stage, elapsed: Duration) {
        let mut times = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match times.iter_mut().find(|t| t.stage == stage) {
            Some(time) => time.elapsed += elapsed,
            None => times.push(StageTime { stage, elapsed }),
        }
    }

    /// The times collected so far, leaving the clock empty.
    pub fn take(&self) -> Vec<StageTime> {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }
}

/// A chunk's scores at each stage that scored it; `None` where a stage did not (a chunk found
/// only by its vector has no keyword score; only thinking mode reranks).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StageScores {
    /// BM25, as the keyword index scored it.
    pub keyword: Option<f32>,
    /// Cosine similarity to the query vector (blended with the feedback vector in thinking
    /// mode).
    pub vector: Option<f32>,
    /// The hybrid fusion of both, in 0..=1.
    pub fused: Option<f32>,
    /// The reranker's score, scaled to 0..=1.
    pub rerank: Option<f32>,
}

/// What one answer asks for beyond the ranking.
#[derive(Debug, Clone)]
pub struct AnswerRequest {
    pub search: SearchRequest,
    /// Temporal reasoning: what time the query names, and the day its relative phrases
    /// resolve against.
    pub temporal: Option<(TemporalIntent, time::Date)>,
    /// Neighbouring chunks on each side of each hit (`num_related_chunks`).
    pub related: u32,
    /// The chunks of the sources linked to or from each result's source.
    pub forceful_relations: bool,
    pub graph_context: bool,
}

/// One answer: the ranked chunks and everything gathered for them.
#[derive(Debug, Clone)]
pub struct Answer {
    /// Final rank order.
    pub chunks: Vec<RankedChunk>,
    /// For each ranked chunk (same order), its neighbours in its source, in position order.
    pub related: Vec<Vec<ChunkHit>>,
    /// For each ranked chunk (same order), the chunks of the sources linked to or from its
    /// source (forceful relations).
    pub linked: Vec<Vec<LinkedChunk>>,
    pub graph_context: Option<GraphContext>,
    pub temporal: Option<TemporalOutcome>,
    /// Each stage's time, in the order stages first ran.
    pub timings: Vec<StageTime>,
}

impl Retriever<'_> {
    /// Answers a resolved query: the ranking (see [`Self::search`]), temporal reasoning over
    /// its first results, then the neighbours, linked sources and graph context of what is
    /// returned.
    pub async fn answer(&self, request: &AnswerRequest) -> Result<Answer, SearchError> {
        let limit = request.search.limit;
        let mut search = request.search.clone();
        if request.temporal.is_some() {
            // Temporal reasoning reorders a pool of its own before the limit applies.
            search.limit = limit.max(TEMPORAL_POOL);
        }
        let mut chunks = self.search(&search).await?;
        let temporal = match request.temporal.clone() {
            None => None,
            Some((intent, now)) => Some(
                self.clock
                    .time(Stage::Temporal, async {
                        temporal_rerank(&mut chunks, intent, now, limit)
                    })
                    .await,
            ),
        };
        let related = if request.related == 0 {
            vec![Vec::new(); chunks.len()]
        } else {
            let related = self.related_chunks(&search.scope, &chunks, request.related, search.now);
            self.clock.time(Stage::Related, related).await?
        };
        let linked = if request.forceful_relations {
            self.clock
                .time(Stage::Linked, self.forceful_context(&search, &chunks))
                .await?
        } else {
            vec![Vec::new(); chunks.len()]
        };
        let graph_context = if request.graph_context {
            let context =
                self.graph_context(&search.scope, &search.filter.kinds, &search.query, &chunks);
            Some(self.clock.time(Stage::GraphContext, context).await?)
        } else {
            None
        };
        Ok(Answer {
            chunks,
            related,
            linked,
            graph_context,
            temporal,
            timings: self.clock.take(),
        })
    }
}
