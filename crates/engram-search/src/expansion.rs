//! Query expansion of `thinking`: pseudo-relevance feedback from the best first-stage chunks.
//! Their centroid joins the query vector and their shared distinctive terms form a second
//! keyword query; both bring more candidates.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use engram_index::analyzer::content_terms;
use engram_index::{Keys, LexicalQuery};
use engram_store::{ChunkHit, ChunkKey};

use crate::retrieve::{add_candidates, best_keys, Evidence};
use crate::{Retriever, SearchError, SearchRequest};

impl Retriever<'_> {
    /// Expansion from the best first-stage chunks: their centroid joins the query vectors and
    /// their shared distinctive terms become the expansion query; what either finds joins the
    /// candidates (within the request's restriction).
    pub(crate) async fn expand(
        &self,
        request: &SearchRequest,
        lexical: &LexicalQuery,
        pool: usize,
        restriction: Option<&Arc<Keys>>,
        all_passing: &mut Option<Arc<Keys>>,
        evidence: &mut Evidence,
    ) -> Result<(), SearchError> {
        let feedback_chunks = self.tuning.feedback_chunks;
        self.read_best(request, &mut evidence.candidates, feedback_chunks)
            .await?;
        let best: Vec<&ChunkHit> = best_keys(&evidence.candidates, feedback_chunks)
            .iter()
            .filter_map(|k| evidence.candidates[k].hit.as_ref())
            .collect();
        let feedback = feedback_vector(
            &evidence.query_vectors[0],
            best.iter().map(|hit| hit.embedding.as_slice()),
            self.tuning.feedback_vector_weight,
        );
        evidence.expansion.terms = expansion_terms(
            lexical,
            best.iter().map(|hit| hit.content.as_str()),
            self.tuning.expansion_terms,
        );
        let mut more = Vec::new();
        if let Some(vector) = feedback {
            more.extend(
                self.nearest_passing(request, &vector, pool, restriction, all_passing)
                    .await?,
            );
            evidence.query_vectors.push(vector);
        }
        if !evidence.expansion.is_empty() {
            let found: Vec<(ChunkKey, f32)> = self
                .keyword_pool(request, &request.filter, &evidence.expansion, pool)
                .await?
                .into_iter()
                .filter(|(k, _)| restriction.is_none_or(|r| r.contains(*k)))
                .collect();
            more.extend(found.iter().map(|f| f.0));
            evidence.expanded.extend(found);
        }
        add_candidates(&mut evidence.candidates, more);
        Ok(())
    }
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
    use engram_index::analyzer::keyword_query;
    use engram_index::TermOperator;

    use super::*;

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

    #[test]
    fn feedback_vector_is_unit_length() {
        let v = feedback_vector(&[1.0, 0.0], [[0.0f32, 1.0].as_slice()].into_iter(), 1.0).unwrap();
        assert!((v[0] - v[1]).abs() < 1e-6);
        assert!((v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        assert!(feedback_vector(&[1.0], std::iter::empty(), 1.0).is_none());
    }
}
