//! The second ranking stage of `thinking` queries. A [`Reranker`] scores the best fused
//! candidates against the query; the default one uses the exact (f32) embedding model, and a
//! cross-encoder can implement the same trait.

/// A candidate as a reranker sees it.
#[derive(Debug, Clone, Copy)]
pub struct RerankCandidate<'a> {
    pub title: &'a str,
    pub content: &'a str,
    /// The chunk's stored f32 embedding (empty when none was stored).
    pub embedding: &'a [f32],
}

/// What a reranker gets: the query, its vectors (the query's own first, then any expansions),
/// and the candidates.
#[derive(Debug, Clone, Copy)]
pub struct RerankInput<'a> {
    pub query: &'a str,
    pub query_vectors: &'a [Vec<f32>],
    pub candidates: &'a [RerankCandidate<'a>],
}

#[derive(Debug, thiserror::Error)]
#[error("reranking failed: {0}")]
pub struct RerankError(pub String);

/// Scores candidates against a query; higher is more relevant. Scores need only be comparable
/// within one call.
pub trait Reranker: Send + Sync {
    fn name(&self) -> &'static str;
    fn rerank(&self, input: &RerankInput<'_>) -> Result<Vec<f32>, RerankError>;
}

/// Reranks by exact cosine between the f32 query vectors and each candidate's stored f32
/// vector (the first stage scans int8 codes). The query's own vector counts most; expansion
/// vectors add their best agreement.
#[derive(Debug, Clone, Copy, Default)]
pub struct EmbeddingReranker;

pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

impl Reranker for EmbeddingReranker {
    fn name(&self) -> &'static str {
        "embedding"
    }

    fn rerank(&self, input: &RerankInput<'_>) -> Result<Vec<f32>, RerankError> {
        let Some((own, expansions)) = input.query_vectors.split_first() else {
            return Err(RerankError("no query vector".into()));
        };
        Ok(input
            .candidates
            .iter()
            .map(|c| {
                if c.embedding.len() != own.len() {
                    return 0.0;
                }
                let direct = dot(own, c.embedding);
                let expanded = expansions
                    .iter()
                    .map(|v| dot(v, c.embedding))
                    .fold(f32::NEG_INFINITY, f32::max);
                if expanded.is_finite() {
                    0.7 * direct + 0.3 * expanded
                } else {
                    direct
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closer_vectors_score_higher() {
        let query = vec![vec![1.0, 0.0]];
        let near = [0.9, 0.1];
        let far = [0.0, 1.0];
        let candidates = [
            RerankCandidate {
                title: "",
                content: "far",
                embedding: &far,
            },
            RerankCandidate {
                title: "",
                content: "near",
                embedding: &near,
            },
            RerankCandidate {
                title: "",
                content: "none",
                embedding: &[],
            },
        ];
        let scores = EmbeddingReranker
            .rerank(&RerankInput {
                query: "q",
                query_vectors: &query,
                candidates: &candidates,
            })
            .unwrap();
        assert!(scores[1] > scores[0]);
        assert_eq!(scores[2], 0.0);
        assert!(EmbeddingReranker
            .rerank(&RerankInput {
                query: "q",
                query_vectors: &[],
                candidates: &candidates,
            })
            .is_err());
    }
}
