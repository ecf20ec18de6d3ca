//! What an answer carries beside its ranked chunks: each hit's neighbours in its source
//! (`num_related_chunks`), the chunks of the sources linked to or from a result's source
//! (forceful relations, thinking mode), and the graph context (relations evidenced in the
//! results and paths from the entities the query names). Links stay within one database, kind
//! and (for what a reader sees) the collections it reads.

use std::collections::{HashMap, HashSet};

use engram_store::{
    ChunkFilter, ChunkHit, ChunkKey, ChunkSelection, DatabaseScope, LinkedItem, RelationRecord,
};
use engram_types::{CollectionName, ItemKind, UnixMs};

use crate::{RankedChunk, Retriever, SearchError, SearchRequest};

/// Most neighbouring chunks on each side of a hit (`num_related_chunks`), and how many of the
/// first hits get them.
pub const RELATED_CHUNKS_MAX: i64 = 10;
pub const RELATED_HITS_MAX: usize = 100;

/// Most linked sources whose chunks one query returns, in the order of the results linking
/// them; chunks taken from each (first positions first); links read per query.
pub const FORCEFUL_SOURCES_MAX: usize = 20;
pub const FORCEFUL_CHUNKS_PER_SOURCE: u32 = 3;
const FORCEFUL_LINKS_MAX: u32 = 500;
/// How many of the first results bring their linked sources.
const FORCEFUL_HITS_MAX: usize = 100;

/// A source by kind, collection and id.
type Source = (ItemKind, String, String);
/// A link as one of its ends sees it: `(other end, from id, to id)`.
type Via = (Source, String, String);

/// A chunk of a source linked to or from a result's source, with the link.
#[derive(Debug, Clone)]
pub struct LinkedChunk {
    pub hit: ChunkHit,
    /// The id of the source that declared the link.
    pub from: String,
    /// The id of the source it links to.
    pub to: String,
}

/// Relations read for one query's graph context, per side.
const CONTEXT_RELATIONS_READ: u32 = 500;
/// Most query paths returned.
const QUERY_PATHS_MAX: usize = 20;
/// Most relations shown for one returned chunk.
const RELATIONS_PER_CHUNK: usize = 10;

/// Relations that explain a query's results, and the chunks they stand on.
#[derive(Debug, Clone)]
pub struct ScoredPath {
    pub triplets: Vec<RelationRecord>,
    pub score: f32,
    /// The text of the path's evidence.
    pub combined_context: String,
    pub group_id: String,
    /// Ids of the returned chunks the path leads to.
    pub source_chunk_ids: Vec<String>,
}

/// What the graph adds to a query's chunks (`graph_context`).
#[derive(Debug, Clone, Default)]
pub struct GraphContext {
    /// From the entities the query names to the returned chunks, best first.
    pub query_paths: Vec<ScoredPath>,
    /// The relations evidenced in each returned chunk, in rank order.
    pub chunk_relations: Vec<ScoredPath>,
    /// For each returned chunk with a path, `(chunk id, group ids)`, in rank order.
    pub chunk_groups: Vec<(String, Vec<String>)>,
}

impl Retriever<'_> {
    /// The chunks at most `span` positions before and after each of the first hits, in their
    /// source's order, the hit itself left out. Empty lists when `span` is 0.
    pub(crate) async fn related_chunks(
        &self,
        scope: &DatabaseScope,
        chunks: &[RankedChunk],
        span: u32,
        now: UnixMs,
    ) -> Result<Vec<Vec<ChunkHit>>, SearchError> {
        let mut related = vec![Vec::new(); chunks.len()];
        if span == 0 {
            return Ok(related);
        }
        for (ranked, neighbours) in chunks.iter().zip(&mut related).take(RELATED_HITS_MAX) {
            let hit = &ranked.hit;
            let filter = ChunkFilter {
                kinds: vec![hit.item.kind],
                collections: vec![hit.item.collection.clone()],
                ..ChunkFilter::default()
            };
            let which = ChunkSelection::Span {
                id: &hit.item.id,
                from: hit.position.saturating_sub(span),
                to: hit.position.saturating_add(span),
            };
            let keys = self
                .store
                .selected_chunk_keys(scope, &filter, which, span * 2 + 1, now)
                .await?;
            let keys: Vec<_> = keys.into_iter().filter(|k| *k != hit.chunk_key).collect();
            let mut found = self.store.fetch_chunks(scope, &filter, &keys, now).await?;
            found.sort_by_key(|h| h.position);
            *neighbours = found;
        }
        Ok(related)
    }

    /// Forceful relations: for each of the first results (same order), the first chunks of the
    /// sources linked to or from its source that are not results themselves, read with the
    /// search's filter (its kinds, collections and metadata), each with its link.
    pub(crate) async fn forceful_context(
        &self,
        search: &SearchRequest,
        chunks: &[RankedChunk],
    ) -> Result<Vec<Vec<LinkedChunk>>, SearchError> {
        let mut linked = vec![Vec::new(); chunks.len()];
        let hits = &chunks[..chunks.len().min(FORCEFUL_HITS_MAX)];
        let source = |c: &RankedChunk| -> Source {
            (
                c.hit.item.kind,
                c.hit.item.collection.to_string(),
                c.hit.item.id.clone(),
            )
        };
        let returned: HashSet<Source> = chunks.iter().map(source).collect();
        let mut by_kind: HashMap<ItemKind, Vec<String>> = HashMap::new();
        for c in hits {
            let ids = by_kind.entry(c.hit.item.kind).or_default();
            if !ids.contains(&c.hit.item.id) {
                ids.push(c.hit.item.id.clone());
            }
        }
        let readable = |collection: &CollectionName| {
            search.filter.collections.is_empty() || search.filter.collections.contains(collection)
        };
        // Each result's links (its own: same collection and id), as (other end, from, to).
        let mut links_of: HashMap<Source, Vec<Via>> = HashMap::new();
        for (kind, ids) in &by_kind {
            let links = self
                .graph
                .item_links(&search.scope, *kind, ids, FORCEFUL_LINKS_MAX, search.now)
                .await?;
            for link in links {
                let end = |item: &LinkedItem| -> Source {
                    (*kind, item.collection.to_string(), item.id.clone())
                };
                for (mine, other) in [(&link.from, &link.to), (&link.to, &link.from)] {
                    let (mine_key, other_key) = (end(mine), end(other));
                    if returned.contains(&mine_key)
                        && !returned.contains(&other_key)
                        && readable(&other.collection)
                    {
                        links_of.entry(mine_key).or_default().push((
                            other_key,
                            link.from.id.clone(),
                            link.to.id.clone(),
                        ));
                    }
                }
            }
        }
        let mut wanted: Vec<Source> = Vec::new();
        for c in hits {
            for (other, _, _) in links_of.get(&source(c)).into_iter().flatten() {
                if !wanted.contains(other) && wanted.len() < FORCEFUL_SOURCES_MAX {
                    wanted.push(other.clone());
                }
            }
        }
        let mut chunks_of: HashMap<Source, Vec<ChunkHit>> = HashMap::new();
        for (kind, collection, id) in wanted {
            let mut filter = search.filter.clone();
            filter.kinds = vec![kind];
            filter.collections = vec![CollectionName::from_trusted(collection.clone())];
            filter.ids.clear();
            filter.titles.clear();
            let keys = self
                .store
                .selected_chunk_keys(
                    &search.scope,
                    &filter,
                    ChunkSelection::Item(&id),
                    FORCEFUL_CHUNKS_PER_SOURCE,
                    search.now,
                )
                .await?;
            let mut found = self
                .store
                .fetch_chunks(&search.scope, &filter, &keys, search.now)
                .await?;
            found.sort_by_key(|h| h.position);
            chunks_of.insert((kind, collection, id), found);
        }
        for (c, out) in hits.iter().zip(&mut linked) {
            for (other, from, to) in links_of.get(&source(c)).into_iter().flatten() {
                for hit in chunks_of.get(other).into_iter().flatten() {
                    out.push(LinkedChunk {
                        hit: hit.clone(),
                        from: from.clone(),
                        to: to.clone(),
                    });
                }
            }
        }
        Ok(linked)
    }

    /// The graph context of `chunks`, a query's results: one `chunk_relations` group per chunk
    /// with relations evidenced in it (`c_<rank>`), and one `query_paths` group (`p_<n>`) per
    /// relation of an entity the query names (one no more common than
    /// [`engram_graph::COMMON_ENTITY_MENTIONS`]) that leads to a returned chunk (its evidence is
    /// in one, or its other end is mentioned by one), scored by its confidence times the best
    /// such chunk's score.
    pub(crate) async fn graph_context(
        &self,
        scope: &DatabaseScope,
        kinds: &[ItemKind],
        query: &str,
        chunks: &[RankedChunk],
    ) -> Result<GraphContext, SearchError> {
        let mut context = GraphContext::default();
        if chunks.is_empty() {
            return Ok(context);
        }
        let keys: Vec<ChunkKey> = chunks.iter().map(|c| c.hit.chunk_key).collect();
        let rank: HashMap<ChunkKey, usize> =
            keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let store = self.graph;
        let evidenced = store
            .relations_touching(scope, &[], &keys, CONTEXT_RELATIONS_READ)
            .await?;
        for (i, chunk) in chunks.iter().enumerate() {
            let mut triplets: Vec<RelationRecord> = evidenced
                .iter()
                .filter(|(k, _)| *k == chunk.hit.chunk_key)
                .map(|(_, r)| r.clone())
                .collect();
            if triplets.is_empty() {
                continue;
            }
            triplets.sort_by(|a, b| b.confidence.total_cmp(&a.confidence));
            triplets.truncate(RELATIONS_PER_CHUNK);
            context.chunk_relations.push(ScoredPath {
                triplets,
                score: chunk.score,
                combined_context: chunk.hit.content.clone(),
                group_id: format!("c_{i}"),
                source_chunk_ids: vec![chunk.hit.chunk_id.clone()],
            });
        }
        let kinds = if kinds.is_empty() {
            &[ItemKind::Knowledge, ItemKind::Memory][..]
        } else {
            kinds
        };
        let common = engram_graph::COMMON_ENTITY_MENTIONS;
        let named: HashSet<i64> = store
            .entities_named(scope, kinds, &engram_graph::query_keys(query), common + 1)
            .await?
            .into_iter()
            .filter(|&(_, mentions)| mentions <= common)
            .map(|(entity, _)| entity)
            .collect();
        if !named.is_empty() {
            let named_list: Vec<i64> = named.iter().copied().collect();
            let mut near = store
                .relations_touching(scope, &named_list, &[], CONTEXT_RELATIONS_READ)
                .await?;
            // Which returned chunks mention each entity.
            let mut mentioned: HashMap<i64, Vec<usize>> = HashMap::new();
            for (entity, chunk) in store
                .mentions_touching(scope, &[], &keys, CONTEXT_RELATIONS_READ * 10)
                .await?
            {
                if let Some(&at) = rank.get(&chunk) {
                    mentioned.entry(entity).or_default().push(at);
                }
            }
            near.extend(evidenced.iter().cloned());
            let mut seen = HashSet::new();
            let mut paths: Vec<ScoredPath> = Vec::new();
            for (chunk, relation) in near {
                let (source, target) = (relation.source.entity_key, relation.target.entity_key);
                if !(named.contains(&source) || named.contains(&target))
                    || !seen.insert(relation.relation_key)
                {
                    continue;
                }
                let other = if named.contains(&source) {
                    target
                } else {
                    source
                };
                let mut reached: Vec<usize> = mentioned.get(&other).cloned().unwrap_or_default();
                reached.extend(rank.get(&chunk));
                reached.sort_unstable();
                reached.dedup();
                let Some(best) = reached
                    .iter()
                    .map(|&at| chunks[at].score)
                    .max_by(f32::total_cmp)
                else {
                    continue;
                };
                paths.push(ScoredPath {
                    score: relation.confidence * best,
                    combined_context: relation.context.clone(),
                    group_id: String::new(),
                    source_chunk_ids: reached
                        .iter()
                        .map(|&at| chunks[at].hit.chunk_id.clone())
                        .collect(),
                    triplets: vec![relation],
                });
            }
            paths.sort_by(|a, b| {
                b.score
                    .total_cmp(&a.score)
                    .then(a.triplets[0].relation_key.cmp(&b.triplets[0].relation_key))
            });
            paths.truncate(QUERY_PATHS_MAX);
            for (n, path) in paths.iter_mut().enumerate() {
                path.group_id = format!("p_{n}");
            }
            context.query_paths = paths;
        }
        for chunk in chunks {
            let id = &chunk.hit.chunk_id;
            let groups: Vec<String> = context
                .query_paths
                .iter()
                .chain(&context.chunk_relations)
                .filter(|p| p.source_chunk_ids.contains(id))
                .map(|p| p.group_id.clone())
                .collect();
            if !groups.is_empty() {
                context.chunk_groups.push((id.clone(), groups));
            }
        }
        Ok(context)
    }
}
