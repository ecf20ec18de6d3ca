//! Fusion: keyword and semantic evidence scaled onto 0..=1 and combined under `alpha` (convex
//! or reciprocal rank), and the second-stage rerank of `thinking`.

use std::collections::{HashMap, HashSet};

use engram_index::LexicalQuery;
use engram_store::ChunkKey;

use crate::answer::StageScores;
use crate::rerank::{RerankCandidate, RerankInput};
use crate::retrieve::{best_keys, Candidate, Evidence};
use crate::{Fusion, Retriever, SearchError, SearchRequest};

/// A linear map of scores onto 0..=1, fixed from one set of values.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    low: f32,
    high: f32,
    /// What every value maps to when the range is empty.
    flat: f32,
}

impl Scale {
    /// `x / max`; everything 0 when every value is 0.
    pub(crate) fn by_max(values: impl Iterator<Item = f32>) -> Self {
        Self {
            low: 0.0,
            high: values.fold(0.0f32, f32::max),
            flat: 0.0,
        }
    }

    /// `(x - min) / (max - min)`; everything 1 when all values are equal.
    pub(crate) fn min_max(values: impl Iterator<Item = f32>) -> Self {
        let (low, high) = values.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
        Self {
            low,
            high,
            flat: 1.0,
        }
    }

    pub(crate) fn apply(self, x: f32) -> f32 {
        if self.high > self.low {
            (x - self.low) / (self.high - self.low)
        } else {
            self.flat
        }
    }
}

impl Retriever<'_> {
    /// Sets every candidate's semantic signal from the vector index: its cosine with the query
    /// vector, blended with its cosine with the feedback vector when `thinking` made one. A
    /// candidate without a vector scores 0.
    pub(crate) async fn measure(
        &self,
        request: &SearchRequest,
        evidence: &mut Evidence,
    ) -> Result<(), SearchError> {
        let keys: Vec<ChunkKey> = evidence.candidates.keys().copied().collect();
        let mut cosines = Vec::with_capacity(evidence.query_vectors.len());
        for vector in &evidence.query_vectors {
            cosines.push(
                self.indexes
                    .similarities(&request.scope, vector, &keys)
                    .await?,
            );
        }
        let w = self.tuning.feedback_vector_weight;
        for (key, c) in evidence.candidates.iter_mut() {
            let own = cosines.first().and_then(|m| m.get(key).copied());
            c.semantic = match (own, cosines.get(1)) {
                (None, _) => 0.0,
                (Some(own), None) => own,
                (Some(own), Some(feedback)) => {
                    (own + w * feedback.get(key).copied().unwrap_or(0.0)) / (1.0 + w)
                }
            };
        }
        Ok(())
    }

    /// Sets every candidate's keyword signals (BM25 from the keyword pools) and fuses them
    /// with its semantic one (see [`Self::measure`]) under `alpha`.
    pub(crate) fn score(
        &self,
        request: &SearchRequest,
        lexical: &LexicalQuery,
        evidence: &mut Evidence,
    ) {
        let Evidence {
            candidates,
            keyword,
            expanded,
            expansion,
            ..
        } = evidence;
        for (key, c) in candidates.iter_mut() {
            c.keyword = keyword.get(key).copied().unwrap_or(0.0);
            c.expansion_keyword = expanded.get(key).copied().unwrap_or(0.0);
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
            let mut by_semantic: Vec<ChunkKey> = candidates.keys().copied().collect();
            by_semantic.sort_by(|a, b| {
                candidates[b]
                    .semantic
                    .total_cmp(&candidates[a].semantic)
                    .then(a.cmp(b))
            });
            let mut by_keyword: Vec<ChunkKey> = candidates
                .iter()
                .filter(|(_, c)| keyword_of(c) > 0.0)
                .map(|(k, _)| *k)
                .collect();
            by_keyword.sort_by(|a, b| {
                keyword_of(&candidates[b])
                    .total_cmp(&keyword_of(&candidates[a]))
                    .then(a.cmp(b))
            });
            let mut fused: HashMap<ChunkKey, f32> = HashMap::new();
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
        for (key, c) in candidates.iter_mut() {
            c.scores = StageScores {
                keyword: keyword.get(key).copied(),
                vector: Some(c.semantic),
                fused: Some(c.fused),
                rerank: None,
            };
        }
    }

    /// Second stage: the reranker scores the best fused candidates (their rows read first, see
    /// [`Self::read_best`]); its scaled score takes `rerank_weight` of theirs. Candidates below
    /// the depth keep their place below.
    pub(crate) fn rerank(
        &self,
        request: &SearchRequest,
        evidence: &mut Evidence,
    ) -> Result<(), SearchError> {
        let Evidence {
            candidates,
            query_vectors,
            ..
        } = evidence;
        // Ties broken by key: the same candidates always get the same depth.
        let order: Vec<ChunkKey> = best_keys(candidates, self.tuning.rerank_depth)
            .into_iter()
            .filter(|k| candidates[k].hit.is_some())
            .collect();
        let inputs: Vec<RerankCandidate<'_>> = order
            .iter()
            .filter_map(|k| candidates[k].hit.as_ref())
            .map(|hit| RerankCandidate {
                title: &hit.item.fields.title,
                content: &hit.content,
                embedding: &hit.embedding,
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
            c.scores.rerank = Some(scale.apply(score));
            c.fused = (1.0 - w) * c.fused + w * scale.apply(score);
        }
        // Keep unreranked candidates below every reranked one.
        let reranked: HashSet<ChunkKey> = order.into_iter().collect();
        for (key, c) in candidates.iter_mut() {
            if !reranked.contains(key) {
                c.fused = c.fused.min(floor) * (1.0 - w);
            }
        }
        Ok(())
    }
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
}
