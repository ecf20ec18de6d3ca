//! The knowledge graph's storage: each item's entities, relations and mentions, kept per
//! database, collection and kind, written when the item leaves `graph_creation`.

use async_trait::async_trait;
use engram_graph::{ItemGraph, Origin};
use engram_types::{CollectionName, ItemKind, UnixMs};

use crate::{ClaimedItem, DatabaseScope, StoreResult};

/// An entity as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityRecord {
    pub entity_key: i64,
    pub name: String,
    pub kind: String,
    pub namespace: String,
    pub identifier: Option<String>,
}

impl EntityRecord {
    /// The public id of the entity.
    pub fn entity_id(&self) -> String {
        format!("ent_{}", self.entity_key)
    }
}

/// A relation as stored, with both its entities and where its evidence is.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationRecord {
    pub relation_key: i64,
    pub source: EntityRecord,
    pub target: EntityRecord,
    pub raw_predicate: String,
    pub canonical_predicate: String,
    pub context: String,
    pub confidence: f32,
    pub temporal_details: Option<String>,
    pub origin: Origin,
    /// The chunk the evidence is in.
    pub chunk_id: String,
    pub created_at: UnixMs,
}

impl RelationRecord {
    /// The public id of the relation.
    pub fn relationship_id(&self) -> String {
        format!("rel_{}", self.relation_key)
    }
}

/// Which item's relations to list, a page at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct RelationQuery<'a> {
    pub collection: &'a CollectionName,
    pub kind: ItemKind,
    pub id: &'a str,
    /// Only relations after this key (the cursor).
    pub after: Option<i64>,
    pub limit: u32,
}

/// One end of a declared link: a live item of the database.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkedItem {
    pub item_key: i64,
    pub id: String,
    pub collection: CollectionName,
    pub title: String,
}

/// A link one item declared to another at ingestion (`relations.ids`), both live and of one kind.
#[derive(Debug, Clone, PartialEq)]
pub struct ItemLink {
    pub from: LinkedItem,
    pub to: LinkedItem,
}

/// The ids an item declares links to: the strings of `relations.ids`, each once, in order.
pub fn link_ids(relations: &serde_json::Value) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    relations
        .get("ids")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .filter(|id| !id.is_empty() && seen.insert(*id))
        .map(str::to_owned)
        .collect()
}

/// A fact memory inference stored about a user.
#[derive(Debug, Clone, PartialEq)]
pub struct FactRecord {
    /// The memory that stated it.
    pub item_key: i64,
    pub slot: String,
    pub value: String,
    pub statement: String,
    pub valid_from: UnixMs,
    /// When a later memory contradicted it; `None` while it holds.
    pub valid_until: Option<UnixMs>,
}

/// How big a database's graph is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GraphSize {
    pub entities: u64,
    pub relations: u64,
}

#[async_trait]
pub trait GraphStore: Send + Sync {
    /// The stored chunks of an item a worker holds (in `graph_creation`), as
    /// `(position, content)` in position order: what its graph is extracted from.
    async fn item_passages(&self, item: &ClaimedItem) -> StoreResult<Vec<(u32, String)>>;
    /// Writes the item's graph (its earlier graph replaced), marks it `completed` and records
    /// its event, in one transaction, if the claim is still current; false (nothing written)
    /// otherwise. Passages the graph names that the item does not have are skipped.
    async fn complete_graph(
        &self,
        item: &ClaimedItem,
        graph: &ItemGraph,
        now: UnixMs,
    ) -> StoreResult<bool>;
    /// The relations evidenced by one live item of `kind` in the scope, in key order after the
    /// cursor, at most `limit`; `None` when there is no such item.
    async fn item_relations(
        &self,
        scope: &DatabaseScope,
        query: &RelationQuery<'_>,
        now: UnixMs,
    ) -> StoreResult<Option<Vec<RelationRecord>>>;
    /// How many entities and relations the database's graphs hold (zero for a database that is
    /// not the scope's organization's).
    async fn graph_size(&self, scope: &DatabaseScope) -> StoreResult<GraphSize>;
    /// The entities of the database's graphs of `kinds` whose key is one of `keys`, with how
    /// many chunks mention each, counted up to `count_to` (a common entity costs no more).
    async fn entities_named(
        &self,
        scope: &DatabaseScope,
        kinds: &[ItemKind],
        keys: &[String],
        count_to: u64,
    ) -> StoreResult<Vec<(i64, u64)>>;
    /// The database's mentions `(entity, chunk)` of any of `entities` or in any of `chunks`,
    /// at most `limit`.
    async fn mentions_touching(
        &self,
        scope: &DatabaseScope,
        entities: &[i64],
        chunks: &[crate::ChunkKey],
        limit: u32,
    ) -> StoreResult<Vec<(i64, crate::ChunkKey)>>;
    /// The database's mentions `(entity, chunk)` of those of `entities` that at most
    /// `most_mentions` chunks mention (a common entity's mentions are never read), at most
    /// `limit`.
    async fn specific_mentions(
        &self,
        scope: &DatabaseScope,
        entities: &[i64],
        most_mentions: u64,
        limit: u32,
    ) -> StoreResult<Vec<(i64, crate::ChunkKey)>>;
    /// The facts inference stored about `user` from live memories of one collection of the
    /// database, oldest first; with `current_only`, those that still hold.
    async fn user_facts(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        user: &str,
        current_only: bool,
        now: UnixMs,
    ) -> StoreResult<Vec<FactRecord>>;
    /// The live items of `kind` in the database (any collection) with one of `ids`.
    async fn items_named(
        &self,
        scope: &DatabaseScope,
        kind: ItemKind,
        ids: &[String],
        now: UnixMs,
    ) -> StoreResult<Vec<LinkedItem>>;
    /// The declared links from or to the live items of `kind` with one of `ids`, between live
    /// items of the database; at most `limit` each way.
    async fn item_links(
        &self,
        scope: &DatabaseScope,
        kind: ItemKind,
        ids: &[String],
        limit: u32,
        now: UnixMs,
    ) -> StoreResult<Vec<ItemLink>>;
    /// The entities mentioned in the chunks of the given items of the database, as
    /// `(item key, entity)`, at most `limit`.
    async fn entities_in_items(
        &self,
        scope: &DatabaseScope,
        items: &[i64],
        limit: u32,
    ) -> StoreResult<Vec<(i64, EntityRecord)>>;
    /// The database's relations with an end among `entities` or evidence in one of `chunks`,
    /// each with the key of its chunk; at most `limit` per side.
    async fn relations_touching(
        &self,
        scope: &DatabaseScope,
        entities: &[i64],
        chunks: &[crate::ChunkKey],
        limit: u32,
    ) -> StoreResult<Vec<(crate::ChunkKey, RelationRecord)>>;
}

/// What writing an item's graph comes to, the same for every backend: the entities that are
/// mentioned in a chunk the item has, each mention once (a relation's ends are mentioned in its
/// chunk), and the relations whose chunk exists, with both ends written.
/// Rows per statement writing an item's graph (within both backends' bind-parameter limits:
/// 32,766 on SQLite, 65,535 on PostgreSQL).
pub(crate) const ENTITY_ROWS: usize = 1_000;
pub(crate) const MENTION_ROWS: usize = 5_000;
pub(crate) const RELATION_ROWS: usize = 1_000;

pub(crate) struct GraphWrite<'g> {
    /// Indexes into the graph's entities, in order.
    pub entities: Vec<usize>,
    /// `(entity index, chunk key)`.
    pub mentions: Vec<(usize, i64)>,
    /// `(relation, chunk key)`.
    pub relations: Vec<(&'g engram_graph::Relation, i64)>,
}

impl<'g> GraphWrite<'g> {
    /// `chunks` maps the item's chunk positions to their keys.
    pub(crate) fn plan(graph: &'g ItemGraph, chunks: &std::collections::HashMap<u32, i64>) -> Self {
        let mut mentions = std::collections::BTreeSet::new();
        for m in &graph.mentions {
            if let (Some(&chunk), true) = (chunks.get(&m.passage), m.entity < graph.entities.len())
            {
                mentions.insert((m.entity, chunk));
            }
        }
        let mut relations = Vec::new();
        for r in &graph.relations {
            let ends = r.source < graph.entities.len() && r.target < graph.entities.len();
            if let (Some(&chunk), true) = (chunks.get(&r.passage), ends) {
                mentions.insert((r.source, chunk));
                mentions.insert((r.target, chunk));
                relations.push((r, chunk));
            }
        }
        let entities: std::collections::BTreeSet<usize> = mentions.iter().map(|m| m.0).collect();
        Self {
            entities: entities.into_iter().collect(),
            mentions: mentions.into_iter().collect(),
            relations,
        }
    }
}

/// ` AND {column} = ` the scope's database ` AND d.org_id = ` its organization: where every
/// graph read is confined (`d`, the databases, joined), on either backend.
pub(crate) fn push_scope<'a, DB: sqlx::Database>(
    select: &mut sqlx::QueryBuilder<'a, DB>,
    column: &str,
    scope: &DatabaseScope,
) where
    String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    select
        .push(format!(" AND {column} = "))
        .push_bind(scope.id.as_str().to_owned())
        .push(" AND d.org_id = ")
        .push_bind(scope.org.as_str().to_owned());
}

/// ` AND {column} IN (…)` of `values` (which the callers never leave empty), on either backend.
pub(crate) fn push_list<'a, DB: sqlx::Database, T>(
    select: &mut sqlx::QueryBuilder<'a, DB>,
    column: &str,
    values: impl IntoIterator<Item = T>,
) where
    T: 'a + sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    select.push(format!(" AND {column} IN ("));
    let mut list = select.separated(", ");
    for value in values {
        list.push_bind(value);
    }
    select.push(")");
}

/// [`GraphStore::specific_mentions`]' read: every mention of those of `entities` (of the scope's
/// database) that at most `most_mentions` chunks mention. The entities are checked first (their
/// mentions counted up to one past the bound), so a common entity's mentions are never walked;
/// each entity is found by its key: the scope's database is checked on the entity's row
/// (`database_id || ''`), since an equality SQLite could carry over from `d.id` let it walk
/// every entity of the database by its `database_id` instead (6 ms a question at 2,000 chunks,
/// growing with the database).
pub(crate) fn specific_mentions_select<'a, DB: sqlx::Database>(
    scope: &DatabaseScope,
    entities: &[i64],
    most_mentions: u64,
    limit: u32,
) -> sqlx::QueryBuilder<'a, DB>
where
    String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let mut select = sqlx::QueryBuilder::<DB>::new(
        "SELECT m.entity_key, m.chunk_key FROM graph_entities e
         CROSS JOIN databases d CROSS JOIN graph_mentions m
         WHERE d.id = e.database_id || '' AND m.entity_key = e.entity_key",
    );
    push_scope(&mut select, "d.id", scope);
    push_list(&mut select, "e.entity_key", entities.iter().copied());
    select
        .push(
            " AND (SELECT COUNT(*) FROM (SELECT 1 FROM graph_mentions c
                    WHERE c.entity_key = e.entity_key LIMIT ",
        )
        .push_bind(i64::try_from(most_mentions.saturating_add(1)).unwrap_or(i64::MAX))
        .push(") counted) <= ")
        .push_bind(i64::try_from(most_mentions).unwrap_or(i64::MAX))
        .push(" LIMIT ")
        .push_bind(i64::from(limit));
    select
}

/// One implementation of [`GraphStore`] for both backends: the graph's SQL is the same on
/// SQLite and PostgreSQL (`$N` parameters, `ON CONFLICT`), only how a writing transaction
/// begins differs (`begin()`, or SQLite's `begin_with(BEGIN_WRITE)`) and the lock it takes
/// first (`$lock`: PostgreSQL's chunk feed lock, nothing on SQLite). Expanded in each backend's
/// `graph` module, where `super::items` and `super::webhooks` are that backend's.
macro_rules! graph_store_impl {
    ($store:ty, $db:ty, $lock:path, $($begin:tt)+) => {
/// Writes what a stored item declares for its graph, in the transaction storing it: its links
/// (`relations.ids`) and its own graph when it brings one. `replaced` says whether it replaces
/// an item (and whether that one had expired): a replaced item's links, facts and inferred
/// content go; its client graph stays for a re-ingestion without one, unless it had expired
/// (an unrelated item under a reused id inherits nothing). A new item has nothing to clear.
pub(crate) async fn write_declared(
    conn: &mut <$db as sqlx::Database>::Connection,
    scope: &crate::DatabaseScope,
    item_key: i64,
    item: &crate::NewItem,
    replaced: Option<bool>,
) -> crate::StoreResult<()> {
    if let Some(expired) = replaced {
        sqlx::query("DELETE FROM item_links WHERE item_key = $1")
            .bind(item_key)
            .execute(&mut *conn)
            .await?;
        if item.kind == engram_types::ItemKind::Memory {
            // A memory stored again is inferred again (or not at all).
            sqlx::query("DELETE FROM memory_facts WHERE item_key = $1")
                .bind(item_key)
                .execute(&mut *conn)
                .await?;
            sqlx::query("UPDATE items SET inferred_content = '' WHERE item_key = $1")
                .bind(item_key)
                .execute(&mut *conn)
                .await?;
        }
        if expired && item.graph_payload.is_none() {
            sqlx::query("UPDATE items SET graph_payload = NULL WHERE item_key = $1")
                .bind(item_key)
                .execute(&mut *conn)
                .await?;
        }
    }
    for target in crate::graph::link_ids(&item.fields.relations) {
        if target == item.id {
            continue;
        }
        sqlx::query(
            "INSERT INTO item_links (item_key, database_id, kind, target_id) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING",
        )
        .bind(item_key)
        .bind(scope.id.as_str())
        .bind(item.kind.as_str())
        .bind(target)
        .execute(&mut *conn)
        .await?;
    }
    if let Some(payload) = &item.graph_payload {
        // An empty payload drops the one before: the item is extracted again.
        sqlx::query("UPDATE items SET graph_payload = NULLIF($1, '') WHERE item_key = $2")
            .bind(payload)
            .bind(item_key)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Writes a memory's facts about its user in the transaction completing it: its earlier facts
/// replaced, a current fact of another live memory in the same slot with another value
/// superseded (kept, `valid_until` and `superseded_by` set); the statements the user's current
/// facts did not already hold become the item's `inferred_content`.
async fn write_facts(
    conn: &mut <$db as sqlx::Database>::Connection,
    item: &crate::ClaimedItem,
    facts: &[engram_graph::Fact],
    now: engram_types::UnixMs,
) -> crate::StoreResult<()> {
    sqlx::query("DELETE FROM memory_facts WHERE item_key = $1")
        .bind(item.item_key)
        .execute(&mut *conn)
        .await?;
    // The current facts of the user's other live memories.
    const CURRENT: &str = "database_id = $1 AND collection = $2 AND user_name = $3 AND slot = $4
        AND valid_until IS NULL AND item_key <> $5
        AND item_key IN (SELECT item_key FROM items WHERE expires_at IS NULL OR expires_at > $6)";
    let mut new: Vec<&str> = Vec::new();
    for fact in facts {
        let held: i64 = sqlx::query_scalar(&format!(
            "SELECT COUNT(*) FROM memory_facts WHERE {CURRENT} AND value = $7"
        ))
        .bind(item.database_id.as_str())
        .bind(item.collection.as_str())
        .bind(&item.user_name)
        .bind(&fact.slot)
        .bind(item.item_key)
        .bind(now)
        .bind(&fact.value)
        .fetch_one(&mut *conn)
        .await?;
        if held == 0 {
            new.push(&fact.statement);
        }
        sqlx::query(&format!(
            "UPDATE memory_facts SET valid_until = $7, superseded_by = $5
             WHERE {CURRENT} AND value <> $8"
        ))
        .bind(item.database_id.as_str())
        .bind(item.collection.as_str())
        .bind(&item.user_name)
        .bind(&fact.slot)
        .bind(item.item_key)
        .bind(now)
        .bind(now)
        .bind(&fact.value)
        .execute(&mut *conn)
        .await?;
        sqlx::query(
            "INSERT INTO memory_facts (item_key, database_id, collection, user_name, slot, value,
                 statement, valid_from)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(item.item_key)
        .bind(item.database_id.as_str())
        .bind(item.collection.as_str())
        .bind(&item.user_name)
        .bind(&fact.slot)
        .bind(&fact.value)
        .bind(&fact.statement)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query("UPDATE items SET inferred_content = $1 WHERE item_key = $2")
        .bind(new.join(" "))
        .bind(item.item_key)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

#[async_trait::async_trait]
        impl crate::GraphStore for $store {
            async fn item_passages(&self, item: &crate::ClaimedItem) -> crate::StoreResult<Vec<(u32, String)>> {
                let rows = sqlx::query(
                    "SELECT position, content FROM chunks WHERE item_key = $1 ORDER BY position",
                )
                .bind(item.item_key)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        let position: i64 = sqlx::Row::try_get(r, "position")?;
                        Ok((
                            u32::try_from(position).unwrap_or(u32::MAX),
                            sqlx::Row::try_get(r, "content")?,
                        ))
                    })
                    .collect()
            }

            async fn complete_graph(
                &self,
                item: &crate::ClaimedItem,
                graph: &engram_graph::ItemGraph,
                now: engram_types::UnixMs,
            ) -> crate::StoreResult<bool> {
                let mut tx = self.pool.$($begin)+.await?;
                $lock(&mut tx).await?;
                let done = sqlx::query(
                    "UPDATE items SET status = 'completed', lease_owner = NULL, lease_until = NULL,
                         updated_at = $1
                     WHERE item_key = $2 AND version = $3 AND status = 'graph_creation' AND lease_owner = $4",
                )
                .bind(now)
                .bind(item.item_key)
                .bind(item.version)
                .bind(&item.lease_owner)
                .execute(&mut *tx)
                .await?;
                if done.rows_affected() != 1 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                // The item's earlier graph (a retried graph stage), found by its chunks.
                for table in ["graph_relations", "graph_mentions"] {
                    sqlx::query(&format!(
                        "DELETE FROM {table}
                         WHERE chunk_key IN (SELECT chunk_key FROM chunks WHERE item_key = $1)"
                    ))
                        .bind(item.item_key)
                        .execute(&mut *tx)
                        .await?;
                }
                let chunks: std::collections::HashMap<u32, i64> = sqlx::query_as::<_, (i64, i64)>(
                    "SELECT position, chunk_key FROM chunks WHERE item_key = $1",
                )
                .bind(item.item_key)
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(|(position, key)| (u32::try_from(position).unwrap_or(u32::MAX), key))
                .collect();
                let write = crate::graph::GraphWrite::plan(graph, &chunks);
                // A few statements per item, each writing many rows: a statement is a round
                // trip to the database (on SQLite, to its connection's thread), and the graph
                // written row by row halved the pipeline's throughput where nothing else costs.
                let mut entity_keys: std::collections::HashMap<String, i64> =
                    std::collections::HashMap::with_capacity(write.entities.len());
                let mut named = std::collections::HashSet::with_capacity(write.entities.len());
                let unique: Vec<&engram_graph::Entity> = write
                    .entities
                    .iter()
                    .map(|&at| &graph.entities[at])
                    .filter(|e| named.insert(e.key.as_str()))
                    .collect();
                for part in unique.chunks(crate::graph::ENTITY_ROWS) {
                    let mut insert = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO graph_entities (database_id, collection, kind, key, name, type, namespace, identifier) ",
                    );
                    insert.push_values(part, |mut row, e| {
                        row.push_bind(item.database_id.as_str())
                            .push_bind(item.collection.as_str())
                            .push_bind(item.kind.as_str())
                            .push_bind(e.key.as_str())
                            .push_bind(e.name.as_str())
                            .push_bind(e.kind.as_str())
                            .push_bind(e.namespace.as_str())
                            .push_bind(e.identifier.as_deref());
                    });
                    insert.push(
                        " ON CONFLICT (database_id, collection, kind, key) DO UPDATE SET
                             type = CASE WHEN graph_entities.type = 'ENTITY' THEN excluded.type ELSE graph_entities.type END,
                             identifier = COALESCE(graph_entities.identifier, excluded.identifier)
                         RETURNING key, entity_key",
                    );
                    let rows: Vec<(String, i64)> =
                        insert.build_query_as().fetch_all(&mut *tx).await?;
                    entity_keys.extend(rows);
                }
                let key_of = |at: usize| entity_keys.get(graph.entities[at].key.as_str()).copied();
                for part in write.mentions.chunks(crate::graph::MENTION_ROWS) {
                    let mut insert = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO graph_mentions (entity_key, chunk_key) ",
                    );
                    insert.push_values(part, |mut row, &(entity, chunk)| {
                        row.push_bind(key_of(entity)).push_bind(chunk);
                    });
                    insert.push(" ON CONFLICT DO NOTHING");
                    insert.build().execute(&mut *tx).await?;
                }
                for part in write.relations.chunks(crate::graph::RELATION_ROWS) {
                    let mut insert = sqlx::QueryBuilder::<$db>::new(
                        "INSERT INTO graph_relations (chunk_key, item_key, source_key, target_key, raw_predicate,
                             canonical_predicate, context, confidence, temporal_details, origin, created_at) ",
                    );
                    insert.push_values(part, |mut row, &(r, chunk)| {
                        row.push_bind(chunk)
                            .push_bind(item.item_key)
                            .push_bind(key_of(r.source))
                            .push_bind(key_of(r.target))
                            .push_bind(r.raw_predicate.as_str())
                            .push_bind(r.canonical_predicate.as_str())
                            .push_bind(r.context.as_str())
                            .push_bind(f64::from(r.confidence))
                            .push_bind(r.temporal_details.as_deref())
                            .push_bind(graph.origin.as_str())
                            .push_bind(now);
                    });
                    insert.build().execute(&mut *tx).await?;
                }
                if item.infer && item.kind == engram_types::ItemKind::Memory {
                    write_facts(&mut tx, item, &graph.facts, now).await?;
                }
                super::webhooks::record_event(&mut tx, item, engram_types::IndexingStatus::Completed, "", "", now)
                    .await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn item_relations(
                &self,
                scope: &crate::DatabaseScope,
                query: &crate::RelationQuery<'_>,
                now: engram_types::UnixMs,
            ) -> crate::StoreResult<Option<Vec<crate::RelationRecord>>> {
                let mut tx = self.pool.begin().await?;
                let Some(row) = super::items::select_live_item(scope, query.collection, query.id, now)
                    .build()
                    .fetch_optional(&mut *tx)
                    .await?
                else {
                    return Ok(None);
                };
                if crate::rows::kind(&row)? != query.kind {
                    return Ok(None);
                }
                let item_key: i64 = sqlx::Row::try_get(&row, "item_key")?;
                let rows = sqlx::query(&format!(
                    "SELECT {} FROM graph_relations r JOIN chunks c ON c.chunk_key = r.chunk_key
                     JOIN graph_entities s ON s.entity_key = r.source_key
                     JOIN graph_entities t ON t.entity_key = r.target_key
                     WHERE r.item_key = $1 AND r.relation_key > $2 ORDER BY r.relation_key LIMIT $3",
                    crate::rows::RELATION_FIELDS
                ))
                .bind(item_key)
                .bind(query.after.unwrap_or(0))
                .bind(i64::from(query.limit))
                .fetch_all(&mut *tx)
                .await?;
                tx.commit().await?;
                rows.iter()
                    .map(crate::rows::relation)
                    .collect::<crate::StoreResult<_>>()
                    .map(Some)
            }

            async fn graph_size(&self, scope: &crate::DatabaseScope) -> crate::StoreResult<crate::GraphSize> {
                let (entities, relations): (i64, i64) = sqlx::query_as(
                    "SELECT
                         (SELECT COUNT(*) FROM graph_entities e JOIN databases d ON d.id = e.database_id
                          WHERE d.id = $1 AND d.org_id = $2),
                         (SELECT COUNT(*) FROM graph_relations r JOIN chunks c ON c.chunk_key = r.chunk_key
                          JOIN databases d ON d.id = c.database_id WHERE d.id = $1 AND d.org_id = $2)",
                )
                .bind(scope.id.as_str())
                .bind(scope.org.as_str())
                .fetch_one(&self.pool)
                .await?;
                Ok(crate::GraphSize {
                    entities: u64::try_from(entities).unwrap_or(0),
                    relations: u64::try_from(relations).unwrap_or(0),
                })
            }

            async fn entities_named(
                &self,
                scope: &crate::DatabaseScope,
                kinds: &[engram_types::ItemKind],
                keys: &[String],
                count_to: u64,
            ) -> crate::StoreResult<Vec<(i64, u64)>> {
                if kinds.is_empty() || keys.is_empty() {
                    return Ok(Vec::new());
                }
                let mut select = sqlx::QueryBuilder::<$db>::new(
                    "SELECT e.entity_key,
                         (SELECT COUNT(*) FROM (SELECT 1 FROM graph_mentions m
                                                WHERE m.entity_key = e.entity_key LIMIT ",
                );
                select
                    .push_bind(i64::try_from(count_to).unwrap_or(i64::MAX))
                    .push(
                        ") counted) AS df
                         FROM graph_entities e JOIN databases d ON d.id = e.database_id
                         WHERE TRUE",
                    );
                crate::graph::push_scope(&mut select, "d.id", scope);
                crate::graph::push_list(&mut select, "e.kind", kinds.iter().map(|k| k.as_str()));
                crate::graph::push_list(&mut select, "e.key", keys.iter().cloned());
                let rows: Vec<(i64, i64)> = select.build_query_as().fetch_all(&self.pool).await?;
                Ok(rows
                    .into_iter()
                    .map(|(key, df)| (key, u64::try_from(df).unwrap_or(0)))
                    .collect())
            }

            async fn mentions_touching(
                &self,
                scope: &crate::DatabaseScope,
                entities: &[i64],
                chunks: &[crate::ChunkKey],
                limit: u32,
            ) -> crate::StoreResult<Vec<(i64, crate::ChunkKey)>> {
                // Mentions lead (CROSS JOIN keeps that order on SQLite): each side of the
                // lookup is an index probe, not a walk through the database's entities.
                let mut rows: Vec<(i64, i64)> = Vec::new();
                let sides: [(&str, Vec<i64>); 2] = [
                    ("m.entity_key", entities.to_vec()),
                    ("m.chunk_key", chunks.iter().map(|c| c.0).collect()),
                ];
                for (column, keys) in sides {
                    if keys.is_empty() {
                        continue;
                    }
                    let mut select = sqlx::QueryBuilder::<$db>::new(
                        "SELECT m.entity_key, m.chunk_key FROM graph_mentions m
                         CROSS JOIN graph_entities e CROSS JOIN databases d
                         WHERE e.entity_key = m.entity_key AND d.id = e.database_id",
                    );
                    crate::graph::push_scope(&mut select, "d.id", scope);
                    crate::graph::push_list(&mut select, column, keys);
                    select.push(" LIMIT ").push_bind(i64::from(limit));
                    rows.extend(
                        select
                            .build_query_as::<(i64, i64)>()
                            .fetch_all(&self.pool)
                            .await?,
                    );
                }
                Ok(rows
                    .into_iter()
                    .map(|(entity, chunk)| (entity, crate::ChunkKey(chunk)))
                    .collect())
            }

            async fn specific_mentions(
                &self,
                scope: &crate::DatabaseScope,
                entities: &[i64],
                most_mentions: u64,
                limit: u32,
            ) -> crate::StoreResult<Vec<(i64, crate::ChunkKey)>> {
                if entities.is_empty() {
                    return Ok(Vec::new());
                }
                let mut select =
                    crate::graph::specific_mentions_select::<$db>(scope, entities, most_mentions, limit);
                let rows: Vec<(i64, i64)> = select.build_query_as().fetch_all(&self.pool).await?;
                Ok(rows
                    .into_iter()
                    .map(|(entity, chunk)| (entity, crate::ChunkKey(chunk)))
                    .collect())
            }

            async fn user_facts(
                &self,
                scope: &crate::DatabaseScope,
                collection: &engram_types::CollectionName,
                user: &str,
                current_only: bool,
                now: engram_types::UnixMs,
            ) -> crate::StoreResult<Vec<crate::FactRecord>> {
                let rows: Vec<(i64, String, String, String, engram_types::UnixMs, Option<engram_types::UnixMs>)> =
                    sqlx::query_as(&format!(
                        "SELECT f.item_key, f.slot, f.value, f.statement, f.valid_from, f.valid_until
                         FROM memory_facts f CROSS JOIN items i CROSS JOIN databases d
                         WHERE i.item_key = f.item_key AND d.id = f.database_id
                           AND f.database_id = $1 AND d.org_id = $2 AND d.state <> 'deleting'
                           AND f.collection = $3 AND f.user_name = $4
                           AND (i.expires_at IS NULL OR i.expires_at > $5) {}
                         ORDER BY f.fact_key",
                        if current_only { "AND f.valid_until IS NULL" } else { "" }
                    ))
                    .bind(scope.id.as_str())
                    .bind(scope.org.as_str())
                    .bind(collection.as_str())
                    .bind(user)
                    .bind(now)
                    .fetch_all(&self.pool)
                    .await?;
                Ok(rows
                    .into_iter()
                    .map(|(item_key, slot, value, statement, valid_from, valid_until)| crate::FactRecord {
                        item_key,
                        slot,
                        value,
                        statement,
                        valid_from,
                        valid_until,
                    })
                    .collect())
            }

            async fn items_named(
                &self,
                scope: &crate::DatabaseScope,
                kind: engram_types::ItemKind,
                ids: &[String],
                now: engram_types::UnixMs,
            ) -> crate::StoreResult<Vec<crate::LinkedItem>> {
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                let mut select = sqlx::QueryBuilder::<$db>::new(
                    "SELECT i.item_key, i.id, i.collection, i.title FROM items i
                     CROSS JOIN databases d WHERE d.id = i.database_id",
                );
                crate::graph::push_scope(&mut select, "i.database_id", scope);
                select
                    .push(" AND d.state <> 'deleting' AND i.kind = ")
                    .push_bind(kind.as_str())
                    .push(" AND (i.expires_at IS NULL OR i.expires_at > ")
                    .push_bind(now)
                    .push(")");
                crate::graph::push_list(&mut select, "i.id", ids.iter().cloned());
                select.push(" ORDER BY i.item_key");
                let rows: Vec<(i64, String, String, String)> =
                    select.build_query_as().fetch_all(&self.pool).await?;
                Ok(rows
                    .into_iter()
                    .map(|(item_key, id, collection, title)| crate::LinkedItem {
                        item_key,
                        id,
                        collection: engram_types::CollectionName::from_trusted(collection),
                        title,
                    })
                    .collect())
            }

            async fn item_links(
                &self,
                scope: &crate::DatabaseScope,
                kind: engram_types::ItemKind,
                ids: &[String],
                limit: u32,
                now: engram_types::UnixMs,
            ) -> crate::StoreResult<Vec<crate::ItemLink>> {
                if ids.is_empty() {
                    return Ok(Vec::new());
                }
                let mut links = Vec::new();
                let mut seen = std::collections::HashSet::new();
                // Each way starts from an index probe (CROSS JOIN keeps that order on SQLite):
                // the linking items by id, or the links by their target's id.
                for (from, column) in [
                    ("items f CROSS JOIN item_links l", "f.id"),
                    ("item_links l CROSS JOIN items f", "l.target_id"),
                ] {
                    let mut select = sqlx::QueryBuilder::<$db>::new(format!(
                        "SELECT f.item_key, f.id, f.collection, f.title,
                                t.item_key, t.id, t.collection, t.title
                         FROM {from} CROSS JOIN items t CROSS JOIN databases d
                         WHERE l.item_key = f.item_key AND t.database_id = l.database_id
                           AND t.id = l.target_id AND t.kind = l.kind AND t.item_key <> f.item_key
                           AND d.id = l.database_id AND d.state <> 'deleting'
                           AND f.database_id = l.database_id"
                    ));
                    crate::graph::push_scope(&mut select, "l.database_id", scope);
                    select
                        .push(" AND l.kind = ")
                        .push_bind(kind.as_str())
                        .push(" AND (f.expires_at IS NULL OR f.expires_at > ")
                        .push_bind(now)
                        .push(") AND (t.expires_at IS NULL OR t.expires_at > ")
                        .push_bind(now)
                        .push(")");
                    crate::graph::push_list(&mut select, column, ids.iter().cloned());
                    select
                        .push(" ORDER BY f.item_key, t.item_key LIMIT ")
                        .push_bind(i64::from(limit));
                    let rows: Vec<(i64, String, String, String, i64, String, String, String)> =
                        select.build_query_as().fetch_all(&self.pool).await?;
                    for (fk, fid, fc, ft, tk, tid, tc, tt) in rows {
                        if seen.insert((fk, tk)) {
                            links.push(crate::ItemLink {
                                from: crate::LinkedItem {
                                    item_key: fk,
                                    id: fid,
                                    collection: engram_types::CollectionName::from_trusted(fc),
                                    title: ft,
                                },
                                to: crate::LinkedItem {
                                    item_key: tk,
                                    id: tid,
                                    collection: engram_types::CollectionName::from_trusted(tc),
                                    title: tt,
                                },
                            });
                        }
                    }
                }
                Ok(links)
            }

            async fn entities_in_items(
                &self,
                scope: &crate::DatabaseScope,
                items: &[i64],
                limit: u32,
            ) -> crate::StoreResult<Vec<(i64, crate::EntityRecord)>> {
                if items.is_empty() {
                    return Ok(Vec::new());
                }
                let mut select = sqlx::QueryBuilder::<$db>::new(
                    "SELECT DISTINCT c.item_key, e.entity_key, e.name, e.type, e.namespace, e.identifier
                     FROM chunks c CROSS JOIN graph_mentions m CROSS JOIN graph_entities e
                     CROSS JOIN databases d
                     WHERE m.chunk_key = c.chunk_key AND e.entity_key = m.entity_key
                       AND d.id = c.database_id",
                );
                crate::graph::push_scope(&mut select, "c.database_id", scope);
                crate::graph::push_list(&mut select, "c.item_key", items.iter().copied());
                select
                    .push(" ORDER BY c.item_key, e.entity_key LIMIT ")
                    .push_bind(i64::from(limit));
                let rows: Vec<(i64, i64, String, String, String, Option<String>)> =
                    select.build_query_as().fetch_all(&self.pool).await?;
                Ok(rows
                    .into_iter()
                    .map(|(item, entity_key, name, kind, namespace, identifier)| {
                        (
                            item,
                            crate::EntityRecord {
                                entity_key,
                                name,
                                kind,
                                namespace,
                                identifier,
                            },
                        )
                    })
                    .collect())
            }

            async fn relations_touching(
                &self,
                scope: &crate::DatabaseScope,
                entities: &[i64],
                chunks: &[crate::ChunkKey],
                limit: u32,
            ) -> crate::StoreResult<Vec<(crate::ChunkKey, crate::RelationRecord)>> {
                let chunk_keys: Vec<i64> = chunks.iter().map(|c| c.0).collect();
                let mut found: Vec<(crate::ChunkKey, crate::RelationRecord)> = Vec::new();
                let mut seen = std::collections::HashSet::new();
                for (column, keys) in [
                    ("r.source_key", entities),
                    ("r.target_key", entities),
                    ("r.chunk_key", chunk_keys.as_slice()),
                ] {
                    if keys.is_empty() {
                        continue;
                    }
                    // The relation leads (CROSS JOIN keeps that order on SQLite).
                    let mut select = sqlx::QueryBuilder::<$db>::new(format!(
                        "SELECT {} FROM graph_relations r CROSS JOIN chunks c
                         CROSS JOIN graph_entities s CROSS JOIN graph_entities t
                         CROSS JOIN databases d
                         WHERE c.chunk_key = r.chunk_key AND s.entity_key = r.source_key
                           AND t.entity_key = r.target_key AND d.id = c.database_id",
                        crate::rows::RELATION_FIELDS
                    ));
                    crate::graph::push_scope(&mut select, "d.id", scope);
                    crate::graph::push_list(&mut select, column, keys.iter().copied());
                    select.push(" LIMIT ").push_bind(i64::from(limit));
                    for row in select.build().fetch_all(&self.pool).await? {
                        let relation = crate::rows::relation(&row)?;
                        if seen.insert(relation.relation_key) {
                            let chunk: i64 = sqlx::Row::try_get(&row, "chunk_key")?;
                            found.push((crate::ChunkKey(chunk), relation));
                        }
                    }
                }
                Ok(found)
            }
        }
    };
}
pub(crate) use graph_store_impl;
