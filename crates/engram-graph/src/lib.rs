//! The knowledge graph. An extractor turns an item's passages into an [`ItemGraph`]
//! (entities resolved to keys, relations with their evidence, mentions by passage) that the
//! store keeps per database, collection and kind. [`RuleExtractor`] is the offline default;
//! [`LlmExtractor`] asks a configured model, through `engram-outbound` (this crate's only I/O).

mod chat;
pub mod infer;
mod inference;
mod llm;
pub mod model;
pub mod payload;
pub mod rank;
pub mod rules;

use async_trait::async_trait;

pub use chat::{ChatError, ChatModel, ChatStream, LlmSettings};
pub use infer::{infer, Fact, Focus, FACTS_PER_MEMORY_MAX};
pub use inference::{InferRequest, Inference, LlmInference, RuleInference};
pub use llm::LlmExtractor;
pub use model::{
    canonical_predicate, entity_key, Entity, ItemGraph, Mention, Origin, Passage, Relation,
};
pub use payload::{CheckedPayload, GraphPayload, PayloadEntity, PayloadRelation};
pub use rank::{personalized_pagerank, query_keys, COMMON_ENTITY_MENTIONS};
pub use rules::{sentences, RuleExtractor};

/// What an extractor reads: an item's title and its passages (chunks, by position), and whose
/// item it is (an extractor that keeps answers keeps them per database, so one organization's
/// text never answers, or times, another's).
#[derive(Debug, Clone, Copy)]
pub struct ExtractRequest<'a> {
    pub org: &'a str,
    pub database: &'a str,
    pub title: &'a str,
    /// The item's ingestion instructions (see `ClaimedItem::instructions`); empty when none.
    pub instructions: &'a str,
    pub passages: &'a [Passage<'a>],
}

/// Why a graph could not be extracted.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// Worth another try later (a model endpoint busy or down).
    #[error("graph extraction failed for now: {0}")]
    Transient(String),
    #[error("graph extraction failed: {0}")]
    Failed(String),
}

/// Turns an item's text into its graph.
#[async_trait]
pub trait GraphExtractor: Send + Sync {
    async fn extract(&self, request: &ExtractRequest<'_>) -> Result<ItemGraph, GraphError>;

    /// The graph made at once on the calling thread, for an extractor that waits on nothing
    /// (CPU work of milliseconds): the pipeline then stores it with the item's chunks in one
    /// transaction. `None` for one that waits (a model): its items' chunks are stored first,
    /// searchable in `graph_creation`, and [`Self::extract`] is awaited after.
    fn extract_now(&self, _request: &ExtractRequest<'_>) -> Option<ItemGraph> {
        None
    }
}
