//! engram's query side, the one owner of answering a query: query analysis (`auto` alpha and
//! mode), keyword and vector candidates, hybrid fusion, collection weights, recency, expansion,
//! reranking, the graph lane, temporal reasoning, and what an answer carries beside its chunks
//! (neighbouring chunks, linked sources, graph context), with each stage's time.

pub mod analysis;
mod answer;
mod context;
mod expansion;
mod fusion;
mod graph_lane;
pub mod rerank;
mod retrieve;
mod temporal;

pub use analysis::{profile, Mode, QueryProfile};
pub use answer::{Answer, AnswerRequest, Stage, StageClock, StageScores, StageTime};
pub use context::{
    GraphContext, LinkedChunk, ScoredPath, FORCEFUL_CHUNKS_PER_SOURCE, FORCEFUL_SOURCES_MAX,
    RELATED_CHUNKS_MAX, RELATED_HITS_MAX,
};
pub use rerank::{EmbeddingReranker, RerankCandidate, RerankError, RerankInput, Reranker};
pub use retrieve::{
    Fusion, Method, RankedChunk, Retriever, SearchError, SearchRequest, SearchTuning, DEEPEST_POOL,
};
pub use temporal::{date_of, TemporalOutcome, TEMPORAL_POOL};
