//! engram's retrieval core: chunking (a parsed document's blocks into chunks that fit the
//! embedding model's window, never crossing a page, sheet or slide, starting at headings, with
//! each chunk's layout), the in-memory vector index, and the query side: keyword terms, query
//! analysis (`auto` alpha and mode), hybrid fusion, collection weights, recency, expansion and
//! reranking.

pub mod analysis;
mod chunk;
mod expansion;
mod fusion;
mod graph_lane;
pub mod rerank;
mod retrieve;

pub use analysis::{profile, Mode, QueryProfile};
pub use chunk::{Chunk, Chunker, ChunkerOptions, TokenCounter};
pub use rerank::{EmbeddingReranker, RerankCandidate, RerankError, RerankInput, Reranker};
pub use retrieve::{
    Fusion, Method, RankedChunk, Retriever, SearchError, SearchRequest, SearchTuning, DEEPEST_POOL,
};
