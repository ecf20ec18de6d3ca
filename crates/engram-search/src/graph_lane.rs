//! The graph lane: two signals from the graph of entities and the chunks that mention them,
//! added to the first stage's scores for questions.
//! - **Bridges** (multi-hop by the first hop): an entity named in one of the first stage's best
//!   chunks but not by the question, and specific (named by a few chunks), is the likely link
//!   to the next hop; every other chunk naming it gains a share of that best chunk's score.
//!   "The waterfall in the country where the Bubye River is" finds the Bubye River chunk
//!   first; it names Zimbabwe, and so does the Victoria Falls chunk. A next hop is held just
//!   below the hop that leads to it, so the lane reorders a chain without pushing its first
//!   link out of the first places.
//! - **The walk** (HippoRAG 2): a personalized PageRank seeded by the entities the question
//!   names (weighted by how specific they are) and, lightly, by the first stage's best chunks;
//!   each chunk's walk score, scaled to the lane's best, is its boost.
//!
//! The constants were chosen on MuSiQue-100 and HotpotQA-100 (`engram eval multihop --graph`;
//! `scripts/hotpotqa_eval_set.py`): see README.

use std::collections::{HashMap, HashSet};

use engram_graph::{personalized_pagerank, query_keys, COMMON_ENTITY_MENTIONS};
use engram_store::ChunkKey;
use engram_types::ItemKind;

use crate::answer::StageScores;
use crate::retrieve::{sort, Ranked, Retriever, SearchError, SearchRequest};

/// First-stage chunks that seed the walk.
const SEED_CHUNKS: usize = 20;
/// Weight of all seed chunks together beside the query's entities (HippoRAG 2: 0.05).
const CHUNK_SEED_WEIGHT: f64 = 0.05;
/// An entity mentioned by more chunks than this is too common to walk through.
const MAX_MENTIONS: u64 = COMMON_ENTITY_MENTIONS;
/// Most mentions read per hop (with common entities never read, 20 chunks' entities of at
/// most 40 mentions each fit).
const MENTIONS_READ: u32 = 20_000;
/// Restart probability is `1 - DAMPING` (HippoRAG: 0.5; 0.7 walks further, which MuSiQue's
/// two- to four-hop questions favour).
const DAMPING: f64 = 0.7;
const ITERATIONS: usize = 30;
/// Chunks the walk contributes to the merge.
const LANE_DEPTH: usize = 30;
/// What the walk's best chunk adds to its first-stage score (scores are in 0..=1); the others
/// add their share of its walk score. An additive boost keeps the first stage's evidence: a
/// reciprocal-rank merge at weight 2 gained MuSiQue-100 7 points of R@5 but cost LoCoMo 17.6
/// (the lane's 30 chunks took every place); at 0.5 it still cost SciFact 4.6 points of nDCG@10.
/// With the bridges held below their hops, 0.3 measured best on MuSiQue-100 and HotpotQA-100
/// alike (0.5 cost HotpotQA 6 points of R@2, 0.15 to 0.2 a point or two of both sets' R@5).
const LANE_WEIGHT: f32 = 0.3;
/// The query's entities that seed the walk are named by at most this many chunks: a name that
/// specific points at what the question is about (seeds named by up to 40 chunks cost LoCoMo
/// 2 points of R@5 for the same MuSiQue gain).
const SEED_MENTIONS: u64 = 3;
/// The first stage's best chunks whose entities may bridge to the next hop (2 and 3 measured
/// alike on MuSiQue-100 and HotpotQA-100; 4 and 5 a point to two of R@5 less, 8 let weaker
/// first hops in).
const BRIDGE_CHUNKS: usize = 3;
/// A bridge is named by at least 2 chunks (one besides the first hop) and at most this many
/// (10 and 20 measured within a point; 40 half a point under 20).
const BRIDGE_MENTIONS: usize = 10;
/// A chunk naming a bridge gains this share of the best first-hop chunk naming it, up to just
/// below that chunk (0.4 to 0.6 measured within two points of R@5 on MuSiQue-100 and
/// HotpotQA-100; 0.8 cost HotpotQA 5 points). Without that limit, 0.5 pushed the first hops
/// themselves out of the first two places.
const BRIDGE_WEIGHT: f32 = 0.5;
/// How far below its hop a bridged chunk is held (scores are in 0..=1.3 there): it keeps the
/// order of the chunks held below one hop.
const BELOW_HOP: f32 = 0.001;
/// Chunks outside the first stage's pool that a bridge reaches, read in (best boost first).
const BRIDGE_FETCH: usize = 10;

impl Retriever<'_> {
    /// The entities the query names, with how many chunks mention each (up to one past
    /// [`MAX_MENTIONS`]): what the lane starts from. `None` for a statement, which the lane
    /// leaves alone: statements (a claim to check, a description) are single-hop, and on
    /// SciFact's claims the lane cost 4.4 points of nDCG@10 even with specific seeds.
    /// Questions compose hops. Read beside the first stage, which it does not depend on.
    pub(crate) async fn lane_entities(
        &self,
        request: &SearchRequest,
    ) -> Result<Option<Vec<(i64, u64)>>, SearchError> {
        if !crate::analysis::profile(&request.query).question {
            return Ok(None);
        }
        let kinds = if request.filter.kinds.is_empty() {
            vec![ItemKind::Knowledge, ItemKind::Memory]
        } else {
            request.filter.kinds.clone()
        };
        Ok(Some(
            self.graph
                .entities_named(
                    &request.scope,
                    &kinds,
                    &query_keys(&request.query),
                    MAX_MENTIONS + 1,
                )
                .await?,
        ))
    }

    /// Adds the lane's boosts to `ranked` (the first stage, scores in 0..=1) from the entities
    /// the query names (`named`, from [`Self::lane_entities`]) and sorts it again; chunks only
    /// the lane found are read in through the request's filter. Leaves it as it is where the
    /// graph holds nothing to follow.
    pub(crate) async fn graph_lane(
        &self,
        request: &SearchRequest,
        ranked: &mut Vec<Ranked>,
        named: &[(i64, u64)],
    ) -> Result<(), SearchError> {
        if ranked.is_empty() {
            return Ok(());
        }
        let seeds: HashMap<i64, u64> = named
            .iter()
            .copied()
            .filter(|&(_, df)| (1..=SEED_MENTIONS).contains(&df))
            .collect();
        // The first stage's order (its candidates come unsorted).
        sort(ranked);
        let seed_chunks: Vec<(ChunkKey, f32)> = ranked
            .iter()
            .take(SEED_CHUNKS)
            .map(|r| (r.key, r.score))
            .collect();
        // One read around the seeds: the mentions in the best chunks and of the seed
        // entities, then every mention of the entities reached that are specific enough to
        // walk through (for the walk's second step, and as each bridge's count of chunks).
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
        let around = self
            .graph
            .specific_mentions(&request.scope, &reached, MAX_MENTIONS, MENTIONS_READ)
            .await?;
        // An entity reached but too common to be read is left out of the walk and the
        // bridges: its few mentions in the best chunks would make it look specific.
        let specific: HashSet<i64> = around.iter().map(|m| m.0).collect();
        mentions.retain(|m| seeds.contains_key(&m.0) || specific.contains(&m.0));
        mentions.extend(around);
        let mentions: Vec<(i64, ChunkKey)> = mentions
            .into_iter()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let named: HashSet<i64> = named.iter().map(|n| n.0).collect();
        let bridged = bridges(
            &mentions,
            &named,
            &seed_chunks[..BRIDGE_CHUNKS.min(seed_chunks.len())],
        );
        let walked = if seeds.is_empty() {
            Vec::new()
        } else {
            Walk::new(&mentions, &seeds).rank(&seeds, &seed_chunks)
        };
        if bridged.is_empty() && walked.is_empty() {
            return Ok(());
        }
        merge(ranked, &bridged, &walked);
        Ok(())
    }
}

/// Adds each chunk's share of the walk's best score (the walk's best chunk gains
/// [`LANE_WEIGHT`]), then each bridged chunk's boost, held just below the hop it came from, to
/// its first-stage score; what the lane reached outside the pool joins it unread (read, through
/// the request's filter, if it ranks among the results).
fn merge(ranked: &mut Vec<Ranked>, bridged: &[Bridge], walked: &[(ChunkKey, f64)]) {
    let top = walked.first().map_or(1.0, |l| l.1).max(f64::MIN_POSITIVE);
    let mut boost: HashMap<ChunkKey, f32> = HashMap::new();
    for (key, score) in walked {
        *boost.entry(*key).or_default() += LANE_WEIGHT * (*score / top) as f32;
    }
    // What the walk ranked, and the bridges' best, join the pool when they are not in it.
    let known: HashSet<ChunkKey> = ranked.iter().map(|r| r.key).collect();
    let new: Vec<ChunkKey> = walked
        .iter()
        .map(|w| w.0)
        .chain(
            bridged
                .iter()
                .filter(|b| !known.contains(&b.chunk))
                .take(BRIDGE_FETCH)
                .map(|b| b.chunk),
        )
        .filter(|k| !known.contains(k))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    ranked.extend(new.into_iter().map(|key| Ranked {
        key,
        score: 0.0,
        hit: None,
        scores: StageScores::default(),
    }));
    for r in ranked.iter_mut() {
        r.score += boost.get(&r.key).copied().unwrap_or(0.0);
    }
    // A next hop ranks after the hop that leads to it: a bridged chunk gains its boost up to
    // just below its hop (higher first-stage scores held higher), and nothing where it is
    // already above it.
    let walked_scores: HashMap<ChunkKey, f32> = ranked.iter().map(|r| (r.key, r.score)).collect();
    let bridged: HashMap<ChunkKey, &Bridge> = bridged.iter().map(|b| (b.chunk, b)).collect();
    for r in ranked.iter_mut() {
        let Some(bridge) = bridged.get(&r.key) else {
            continue;
        };
        let hop = walked_scores.get(&bridge.hop).copied().unwrap_or(0.0);
        let limit = hop - BELOW_HOP * (2.0 - r.score);
        if r.score < limit {
            r.score = (r.score + BRIDGE_WEIGHT * bridge.score).min(limit);
        }
    }
    let best = ranked
        .iter()
        .map(|r| r.score)
        .fold(f32::MIN_POSITIVE, f32::max);
    for r in ranked.iter_mut() {
        r.score /= best;
    }
    sort(ranked);
}

/// A chunk a bridge reaches: the first-stage hop it came from, and that hop's score.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bridge {
    chunk: ChunkKey,
    hop: ChunkKey,
    score: f32,
}

/// The chunks a bridge reaches, best boost first: for each entity named in one of `hops` (the
/// first stage's best, with their scores) but not by the question (`named`), and by 2 to
/// [`BRIDGE_MENTIONS`] chunks of `mentions`, every other chunk naming it is reached from the
/// best hop naming it (a chunk reached by several bridges keeps its best hop). Hops gain
/// nothing: letting a hop be the next hop of a better one measured 1.8 points of MuSiQue-100
/// R@2 less (fast mode).
fn bridges(
    mentions: &[(i64, ChunkKey)],
    named: &HashSet<i64>,
    hops: &[(ChunkKey, f32)],
) -> Vec<Bridge> {
    // The better of two hops: the higher score, then the first stage's order.
    fn better(a: (f32, ChunkKey), b: (f32, ChunkKey)) -> (f32, ChunkKey) {
        if b.0 > a.0 || (b.0 == a.0 && b.1 < a.1) {
            b
        } else {
            a
        }
    }
    let hop_score: HashMap<ChunkKey, f32> = hops.iter().copied().collect();
    let mut count: HashMap<i64, usize> = HashMap::new();
    let mut from_hop: HashMap<i64, (f32, ChunkKey)> = HashMap::new();
    for (entity, chunk) in mentions {
        *count.entry(*entity).or_default() += 1;
        if let Some(&score) = hop_score.get(chunk) {
            let hop = (score, *chunk);
            from_hop
                .entry(*entity)
                .and_modify(|best| *best = better(*best, hop))
                .or_insert(hop);
        }
    }
    let mut reached: HashMap<ChunkKey, (f32, ChunkKey)> = HashMap::new();
    for (entity, chunk) in mentions {
        if named.contains(entity) || hop_score.contains_key(chunk) {
            continue;
        }
        let Some(&hop) = from_hop.get(entity) else {
            continue;
        };
        if (2..=BRIDGE_MENTIONS).contains(&count[entity]) {
            reached
                .entry(*chunk)
                .and_modify(|best| *best = better(*best, hop))
                .or_insert(hop);
        }
    }
    let mut reached: Vec<Bridge> = reached
        .into_iter()
        .map(|(chunk, (score, hop))| Bridge { chunk, hop, score })
        .collect();
    reached.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.chunk.cmp(&b.chunk)));
    reached
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
    fn a_bridge_is_a_specific_entity_of_a_first_hop_the_question_does_not_name() {
        let c = ChunkKey;
        // Chunk 1 (the first hop, score 0.9) names entity 10 (the question's own), 11 (a
        // bridge: chunks 1, 2 and 3 name it) and 12 (too common: 13 chunks name it); chunk 2
        // (a weaker hop, 0.3) names 11 too; entity 13 is named by chunk 1 alone (no bridge);
        // chunk 5 names the question's entity only.
        let mut mentions = vec![
            (10, c(1)),
            (10, c(5)),
            (11, c(1)),
            (11, c(2)),
            (11, c(3)),
            (13, c(1)),
        ];
        mentions.extend((0..12).map(|n| (12, c(100 + n))));
        mentions.push((12, c(1)));
        let named = HashSet::from([10]);
        let hops = [(c(1), 0.9), (c(2), 0.3)];
        let bridge = |chunk, hop, score| Bridge { chunk, hop, score };
        let reached = bridges(&mentions, &named, &hops);
        assert_eq!(
            reached,
            [bridge(c(3), c(1), 0.9)],
            "chunk 3 is reached from its best hop; hops, the question's entity and a common \
             entity reach nothing"
        );
        // Without the stronger hop, the weaker one is where both are reached from.
        assert_eq!(
            bridges(&mentions, &named, &hops[1..]),
            [bridge(c(1), c(2), 0.3), bridge(c(3), c(2), 0.3)]
        );
    }

    #[test]
    fn a_bridged_chunk_is_held_below_the_hop_it_came_from() {
        let c = ChunkKey;
        let ranked = |scores: &[(i64, f32)]| -> Vec<Ranked> {
            scores
                .iter()
                .map(|&(key, score)| Ranked {
                    key: c(key),
                    score,
                    hit: None,
                    scores: StageScores::default(),
                })
                .collect()
        };
        // Hop 1 (0.6) leads to chunk 2 (0.5, which its boost of 0.3 would lift past the hop)
        // and to chunk 4, outside the pool; chunk 3 (0.55) is reached by no bridge; chunk 5
        // (0.9) is reached but already above its hop.
        let mut pool = ranked(&[(1, 0.6), (2, 0.5), (3, 0.55), (5, 0.9)]);
        let bridged = [
            Bridge {
                chunk: c(2),
                hop: c(1),
                score: 0.6,
            },
            Bridge {
                chunk: c(4),
                hop: c(1),
                score: 0.6,
            },
            Bridge {
                chunk: c(5),
                hop: c(1),
                score: 0.6,
            },
        ];
        merge(&mut pool, &bridged, &[]);
        let order: Vec<ChunkKey> = pool.iter().map(|r| r.key).collect();
        assert_eq!(
            order,
            [c(5), c(1), c(2), c(3), c(4)],
            "chunk 2 passes chunk 3 to follow its hop; chunk 4 gains half its hop's score"
        );
        let score: HashMap<ChunkKey, f32> = pool.iter().map(|r| (r.key, r.score)).collect();
        assert!(
            score[&c(1)] - score[&c(2)] < 0.01,
            "held just below its hop"
        );
        assert_eq!(score[&c(5)], 1.0, "a chunk above its hop gains nothing");
    }

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
