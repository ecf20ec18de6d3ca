//! Ranking with the graph: personalized PageRank (the HippoRAG walk) and the entity keys a
//! query may name.

use std::collections::BTreeSet;

use crate::model::entity_key;
use crate::rules::RuleExtractor;

/// An entity mentioned by more chunks than this is too common to rank or explain with: the
/// graph lane does not walk through it and query paths do not start at it.
pub const COMMON_ENTITY_MENTIONS: u64 = 40;

/// Longest word n-gram of a query looked up as an entity name.
const MAX_NGRAM: usize = 4;
/// Most keys one query looks up.
const MAX_QUERY_KEYS: usize = 256;

/// The entity keys a query may name: the entities the rule extractor finds in it, and every
/// run of one to four of its words (so lower-case names match too), except runs that are only
/// function words.
pub fn query_keys(query: &str) -> Vec<String> {
    let mut keys: BTreeSet<String> = RuleExtractor
        .entities(query)
        .into_iter()
        .map(|e| e.key)
        .collect();
    let words: Vec<&str> = query
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .filter(|w| !w.is_empty())
        .collect();
    for n in 1..=MAX_NGRAM {
        for run in words.windows(n) {
            if run.iter().all(|w| crate::rules::is_function_word(w)) {
                continue;
            }
            let key = entity_key(&run.join(" "));
            if key.chars().count() > 1 {
                keys.insert(key);
            }
        }
    }
    keys.into_iter().take(MAX_QUERY_KEYS).collect()
}

/// Personalized PageRank over an undirected weighted graph (`neighbours[n]`: `(node, weight)`),
/// restarting at `seeds` (`(node, weight)`, normalised here) with probability `1 - damping`
/// at each step; `iterations` rounds of the power method. Mass at a node without neighbours
/// returns to the seeds. Scores sum to about 1.
pub fn personalized_pagerank(
    neighbours: &[Vec<(usize, f64)>],
    seeds: &[(usize, f64)],
    damping: f64,
    iterations: usize,
) -> Vec<f64> {
    let n = neighbours.len();
    let total: f64 = seeds.iter().map(|s| s.1.max(0.0)).sum();
    let mut restart = vec![0.0; n];
    if total <= 0.0 {
        return restart;
    }
    for &(node, weight) in seeds {
        if node < n {
            restart[node] += weight.max(0.0) / total;
        }
    }
    let out: Vec<f64> = neighbours
        .iter()
        .map(|edges| edges.iter().map(|e| e.1).sum())
        .collect();
    let mut score = restart.clone();
    for _ in 0..iterations {
        let mut next: Vec<f64> = restart.iter().map(|r| r * (1.0 - damping)).collect();
        let mut dangling = 0.0;
        for (node, edges) in neighbours.iter().enumerate() {
            if out[node] <= 0.0 {
                dangling += score[node];
                continue;
            }
            let share = damping * score[node] / out[node];
            for &(to, weight) in edges {
                next[to] += share * weight;
            }
        }
        for (value, r) in next.iter_mut().zip(&restart) {
            *value += damping * dangling * r;
        }
        score = next;
    }
    score
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_reaches_the_second_hop_and_favours_the_seeds() {
        // query entity 0 - passage 1 - entity 2 - passage 3; passage 4 hangs off nothing.
        let mut g = vec![Vec::new(); 5];
        for (a, b) in [(0, 1), (1, 2), (2, 3)] {
            g[a].push((b, 1.0));
            g[b].push((a, 1.0));
        }
        let p = personalized_pagerank(&g, &[(0, 1.0)], 0.5, 50);
        assert!(p[1] > p[3] && p[3] > 0.0, "{p:?}");
        assert_eq!(p[4], 0.0);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-6);
        assert!(personalized_pagerank(&g, &[], 0.5, 10)
            .iter()
            .all(|s| *s == 0.0));
    }

    #[test]
    fn query_keys_cover_names_in_any_case_and_skip_function_words() {
        let keys = query_keys("Who founded the journal of Psychotherapy Integration?");
        assert!(keys.contains(&"psychotherapy integration".to_owned()));
        assert!(keys.contains(&"journal of psychotherapy integration".to_owned()));
        assert!(keys.contains(&"journal".to_owned()));
        assert!(!keys.contains(&"the".to_owned()));
        assert!(!keys.contains(&"who".to_owned()));
    }
}
