//! The graph lane (HippoRAG 2): chunks ranked by a personalized PageRank over the graph of
//! entities and the chunks that mention them, seeded by the entities the query names (weighted
//! by how specific they are) and, lightly, by the first stage's best chunks; each chunk's walk
//! score, scaled to the lane's best, boosts its first-stage score. It runs only for questions
//! that name an entity of the graph few chunks mention.
//! The constants were chosen on MuSiQue-100 (`engram eval multihop --graph`): see README.

use std::collections::{HashMap, HashSet};

use engram_graph::{personalized_pagerank, query_keys, COMMON_ENTITY_MENTIONS};
use engram_store::ChunkKey;
use engram_types::ItemKind;

use crate::retrieve::{RankedChunk, Retriever, SearchError, SearchRequest};

/// First-stage chunks that seed the walk.
const SEED_CHUNKS: usize = 20;
/// Weight of all seed chunks together beside the query's entities (HippoRAG 2: 0.05).
const CHUNK_SEED_WEIGHT: f64 = 0.05;
/// An entity mentioned by more chunks than this is too common to walk through.
const MAX_MENTIONS: u64 = COMMON_ENTITY_MENTIONS;
/// Most mentions read per hop.
const MENTIONS_READ: u32 = 20_000;
/// Restart probability is `1 - DAMPING` (HippoRAG: 0.5; 0.7 walks further, which MuSiQue's
/// two- to four-hop questions favour).
const DAMPING: f64 = 0.7;
const ITERATIONS: usize = 30;
/// Chunks the lane contributes to the merge.
const LANE_DEPTH: usize = 30;
/// What the lane's best chunk adds to its first-stage score (scores are in 0..=1); the others
/// add their share of its walk score. An additive boost keeps the first stage's evidence: a
/// reciprocal-rank merge at weight 2 gained MuSiQue-100 7 points of R@5 but cost LoCoMo 17.6
/// (the lane's 30 chunks took every place); at 0.5 it still cost SciFact 4.6 points of nDCG@10.
const LANE_WEIGHT: f32 = 0.5;
/// The query's entities that seed the walk are named by at most this many chunks: a name that
/// specific points at what the question is about (seeds named by up to 40 chunks cost LoCoMo
/// 2 points of R@5 for the same MuSiQue gain).
const SEED_MENTIONS: u64 = 3;

impl Retriever<'_> {
    /// Merges the graph lane into `ranked` (the first stage, best first); leaves it as it is
    /// when the query names no entity of the graph.
    pub(crate) async fn graph_lane(
        &self,
        request: &SearchRequest,
        ranked: &mut Vec<RankedChunk>,
    ) -> Result<(), SearchError> {
        // Statements (a claim to check, a description) are single-hop: on SciFact's claims the
        // lane cost 4.4 points of nDCG@10 even with specific seeds. Questions compose hops.
        if !crate::analysis::profile(&request.query).question {
            return Ok(());
        }
        let kinds = if request.filter.kinds.is_empty() {
            vec![ItemKind::Knowledge, ItemKind::Memory]
        } else {
            request.filter.kinds.clone()
        };
        let named = self
            .graph
            .entities_named(
                &request.scope,
                &kinds,
                &query_keys(&request.query),
                MAX_MENTIONS + 1,
            )
            .await?;
        let seeds: HashMap<i64, u64> = named
            .into_iter()
            .filter(|&(_, df)| (1..=SEED_MENTIONS).contains(&df))
            .collect();
        if seeds.is_empty() {
            return Ok(());
        }
        // The first stage's order (its candidates come unsorted).
        ranked.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.hit.chunk_key.cmp(&b.hit.chunk_key))
        });
        let seed_chunks: Vec<(ChunkKey, f32)> = ranked
            .iter()
            .take(SEED_CHUNKS)
            .map(|r| (r.hit.chunk_key, r.score))
            .collect();
        let entities: Vec<i64> = seeds.keys().copied().collect();
        let chunks: Vec<ChunkKey> = seed_chunks.iter().map(|c| c.0).collect();
        let mut mentions = self
            .graph
            .mentions_touching(&request.scope, &entities, &chunks, MENTIONS_READ)
            .await?;
        let reached: Vec<i64> = mentions
            .iter()
            .map(|m| m.0)
            .filter(|e| !seeds.contains_key(e))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        mentions.extend(
            self.graph
                .mentions_touching(&request.scope, &reached, &[], MENTIONS_READ)
                .await?,
        );
        let walk = Walk::new(&mentions, &seeds);
        let lane = walk.rank(&seeds, &seed_chunks);
        if lane.is_empty() {
            return Ok(());
        }
        self.merge(request, ranked, &lane).await
    }

    /// Merges the lane into the first stage by an additive boost; chunks only the lane found
    /// are read through the request's filter (so they pass its scope and conditions).
    async fn merge(
        &self,
        request: &SearchRequest,
        ranked: &mut Vec<RankedChunk>,
        lane: &[(ChunkKey, f64)],
    ) -> Result<(), SearchError> {
        // Each chunk keeps its first-stage score and gains the lane's share of its walk score
        // (the lane's best chunk gains LANE_WEIGHT).
        let top = lane.first().map_or(1.0, |l| l.1).max(f64::MIN_POSITIVE);
        let mut fused: HashMap<ChunkKey, f32> = HashMap::new();
        for r in ranked.iter() {
            *fused.entry(r.hit.chunk_key).or_default() += r.score;
        }
        for (key, score) in lane {
            *fused.entry(*key).or_default() += LANE_WEIGHT * (*score / top) as f32;
        }
        let lane: Vec<ChunkKey> = lane.iter().map(|l| l.0).collect();
        let lane = lane.as_slice();
        let known: HashSet<ChunkKey> = ranked.iter().map(|r| r.hit.chunk_key).collect();
        let new: Vec<ChunkKey> = lane
            .iter()
            .copied()
            .filter(|k| !known.contains(k))
            .collect();
        if !new.is_empty() {
            let hits = self
                .store
                .fetch_chunks(&request.scope, &request.filter, &new, request.now)
                .await?;
            ranked.extend(hits.into_iter().map(|hit| RankedChunk { hit, score: 0.0 }));
        }
        let best = fused.values().copied().fold(f32::MIN_POSITIVE, f32::max);
        for r in ranked.iter_mut() {
            r.score = fused.get(&r.hit.chunk_key).copied().unwrap_or(0.0) / best;
        }
        ranked.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.hit.chunk_key.cmp(&b.hit.chunk_key))
        });
        Ok(())
    }
}

/// The entity–chunk graph the walk runs on: entities too common to walk through left out.
struct Walk {
    /// Node index by entity key and by chunk key.
    entities: HashMap<i64, usize>,
    chunks: HashMap<ChunkKey, usize>,
    chunk_of: Vec<Option<ChunkKey>>,
    neighbours: Vec<Vec<(usize, f64)>>,
}

impl Walk {
    fn new(mentions: &[(i64, ChunkKey)], seeds: &HashMap<i64, u64>) -> Self {
        let pairs: HashSet<(i64, ChunkKey)> = mentions.iter().copied().collect();
        let mut degree: HashMap<i64, u64> = HashMap::new();
        for (entity, _) in &pairs {
            *degree.entry(*entity).or_default() += 1;
        }
        let mut walk = Self {
            entities: HashMap::new(),
            chunks: HashMap::new(),
            chunk_of: Vec::new(),
            neighbours: Vec::new(),
        };
        let mut pairs: Vec<(i64, ChunkKey)> = pairs.into_iter().collect();
        pairs.sort();
        for (entity, chunk) in pairs {
            let df = seeds.get(&entity).copied().unwrap_or(degree[&entity]);
            if df > MAX_MENTIONS {
                continue;
            }
            let e = walk.entity(entity);
            let c = walk.chunk(chunk);
            walk.neighbours[e].push((c, 1.0));
            walk.neighbours[c].push((e, 1.0));
        }
        walk
    }

    fn node(&mut self, chunk: Option<ChunkKey>) -> usize {
        self.neighbours.push(Vec::new());
        self.chunk_of.push(chunk);
        self.neighbours.len() - 1
    }

    fn entity(&mut self, key: i64) -> usize {
        if let Some(&n) = self.entities.get(&key) {
            return n;
        }
        let n = self.node(None);
        self.entities.insert(key, n);
        n
    }

    fn chunk(&mut self, key: ChunkKey) -> usize {
        if let Some(&n) = self.chunks.get(&key) {
            return n;
        }
        let n = self.node(Some(key));
        self.chunks.insert(key, n);
        n
    }

    /// Chunks by their walk score, best first, at most [`LANE_DEPTH`].
    fn rank(
        &self,
        seeds: &HashMap<i64, u64>,
        seed_chunks: &[(ChunkKey, f32)],
    ) -> Vec<(ChunkKey, f64)> {
        let mut restart: Vec<(usize, f64)> = seeds
            .iter()
            .filter_map(|(e, df)| Some((*self.entities.get(e)?, 1.0 / *df as f64)))
            .collect();
        let entity_total: f64 = restart.iter().map(|s| s.1).sum();
        let chunk_total: f64 = seed_chunks.iter().map(|c| f64::from(c.1.max(0.0))).sum();
        if entity_total <= 0.0 {
            return Vec::new();
        }
        if chunk_total > 0.0 {
            for (key, score) in seed_chunks {
                if let Some(&n) = self.chunks.get(key) {
                    let share = f64::from(score.max(0.0)) / chunk_total;
                    restart.push((n, entity_total * CHUNK_SEED_WEIGHT * share));
                }
            }
        }
        let score = personalized_pagerank(&self.neighbours, &restart, DAMPING, ITERATIONS);
        let mut found: Vec<(ChunkKey, f64)> = self
            .chunk_of
            .iter()
            .enumerate()
            .filter_map(|(n, c)| Some(((*c)?, score[n])))
            .filter(|(_, s)| *s > 0.0)
            .collect();
        found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        found.truncate(LANE_DEPTH);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_ranks_chunks_by_hops_from_the_query_and_skips_common_entities() {
        let c = ChunkKey;
        // The query names entity 1 (in chunk 10); chunk 10 also names entity 2, which chunk 20
        // names too (the second hop); entity 3 is in every chunk and in 100 more (too common).
        let mut mentions = vec![(1, c(10)), (2, c(10)), (2, c(20)), (4, c(30))];
        for chunk in [10, 20, 30] {
            mentions.push((3, c(chunk)));
        }
        for chunk in 100..200 {
            mentions.push((3, c(chunk)));
        }
        let seeds = HashMap::from([(1, 1)]);
        let walk = Walk::new(&mentions, &seeds);
        assert!(
            !walk.entities.contains_key(&3),
            "a common entity is left out"
        );
        let ranked: Vec<ChunkKey> = walk.rank(&seeds, &[]).into_iter().map(|r| r.0).collect();
        assert_eq!(
            ranked,
            [c(10), c(20)],
            "chunk 30 is not reachable without entity 3"
        );
        // A seed chunk pulls its own entities in.
        let ranked = walk.rank(&seeds, &[(c(30), 1.0)]);
        assert_eq!(ranked.len(), 3);
        assert!(walk.rank(&HashMap::new(), &[(c(30), 1.0)]).is_empty());
    }
}
