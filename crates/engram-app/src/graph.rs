//! The knowledge graph read back: the relations one item evidences, a page at a time, and
//! the graph context of a query's results.

use std::collections::{HashMap, HashSet};

use engram_store::{ChunkKey, DatabaseScope, RelationQuery, RelationRecord};
use engram_types::{CollectionName, DatabaseName, ItemKind};

use crate::ingest::parse_collection;
use crate::{App, AppError, AppResult, DatabaseRecord, Principal};

/// Most relations one page may hold.
pub const RELATIONS_LIMIT_MAX: u32 = 10_000;

/// Which item's relations, and how many.
#[derive(Debug, Clone)]
pub struct RelationsRequest<'a> {
    pub collection: Option<&'a str>,
    pub id: &'a str,
    pub kind: ItemKind,
    /// 1 to [`RELATIONS_LIMIT_MAX`]; `None`: `default_limit`.
    pub limit: Option<i64>,
    /// The `next_cursor` of the page before.
    pub cursor: Option<&'a str>,
    pub default_limit: u32,
}

/// A page of an item's relations, in the order they were stored.
#[derive(Debug, Clone)]
pub struct RelationsPage {
    pub database: DatabaseRecord,
    pub collection: CollectionName,
    pub relations: Vec<RelationRecord>,
    /// Set when more relations follow.
    pub next_cursor: Option<String>,
}

impl App {
    /// The relations `request.id` evidences. `SOURCE_NOT_FOUND` when the database has no live
    /// item of that id and kind in the collection.
    pub async fn item_relations(
        &self,
        who: &Principal,
        database: &DatabaseName,
        request: RelationsRequest<'_>,
    ) -> AppResult<RelationsPage> {
        if request.id.is_empty() {
            return Err(AppError::InvalidParameters(
                "missing required parameter `id`".into(),
            ));
        }
        let limit = crate::links::bounded(
            request.limit,
            request.default_limit,
            RELATIONS_LIMIT_MAX,
            "limit",
        )?;
        let after = match request.cursor.filter(|c| !c.is_empty()) {
            None => None,
            Some(cursor) => Some(
                cursor
                    .strip_prefix("rel_")
                    .and_then(|n| n.parse::<i64>().ok())
                    .filter(|n| *n > 0)
                    .ok_or_else(|| {
                        AppError::InvalidParameters(
                            "`cursor` is not a `next_cursor` this route returned".into(),
                        )
                    })?,
            ),
        };
        let db = self.authorize_database(who, database).await?;
        let collection = parse_collection(&db, request.collection, "collection")?;
        let query = RelationQuery {
            collection: &collection,
            kind: request.kind,
            id: request.id,
            after,
            limit: limit.saturating_add(1),
        };
        let mut relations = self
            .store()
            .item_relations(&db.scope(), &query, self.now())
            .await?
            .ok_or_else(|| AppError::SourceNotFound(request.id.to_owned()))?;
        let truncated = relations.len() > limit as usize;
        relations.truncate(limit as usize);
        let next_cursor = truncated
            .then(|| relations.last().map(RelationRecord::relationship_id))
            .flatten();
        Ok(RelationsPage {
            database: db,
            collection,
            relations,
            next_cursor,
        })
    }
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

impl App {
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
        chunks: &[engram_search::RankedChunk],
    ) -> AppResult<GraphContext> {
        let mut context = GraphContext::default();
        if chunks.is_empty() {
            return Ok(context);
        }
        let keys: Vec<ChunkKey> = chunks.iter().map(|c| c.hit.chunk_key).collect();
        let rank: HashMap<ChunkKey, usize> =
            keys.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let store = self.store();
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
