//! The graph on both backends (design in SQLite's migration 12, PostgreSQL's migration 4).
//! Writing an item's graph takes the chunk feed's lock first (PostgreSQL), like every
//! transaction that removes chunks and with them, by cascade, mentions and entities: entities
//! are shared by the items of a collection, so without one lock order a graph being written and
//! an item being deleted could deadlock on two entities.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use engram_graph::{Entity, Fact, ItemGraph};
use engram_types::{CollectionName, IndexingStatus, ItemKind, UnixMs};

use crate::backend::{Backend, Param, Sql, SqlStore};
use crate::graph::{GraphWrite, ENTITY_ROWS, MENTION_ROWS, RELATION_ROWS};
use crate::rows::{Columns as _, RELATION_FIELDS};
use crate::{
    ChunkKey, ClaimedItem, DatabaseScope, EntityRecord, FactRecord, GraphSize, GraphStore,
    ItemLink, LinkedItem, RelationQuery, RelationRecord, StoreResult,
};

/// ` AND {column} = ` the scope's database ` AND d.org_id = ` its organization: where every
/// graph read is confined (`d`, the databases, joined).
fn push_scope(select: &mut Sql, column: &str, scope: &DatabaseScope) {
    select
        .push(format!(" AND {column} = "))
        .push_bind(scope.id.as_str())
        .push(" AND d.org_id = ")
        .push_bind(scope.org.as_str());
}

/// ` AND {column} IN (…)` of `values` (which the callers never leave empty).
fn push_list<T: Into<Param>>(select: &mut Sql, column: &str, values: impl IntoIterator<Item = T>) {
    select
        .push(format!(" AND {column} IN ("))
        .push_list(values)
        .push(")");
}

/// [`GraphStore::specific_mentions`]' read: every mention of those of `entities` (of the scope's
/// database) that at most `most_mentions` chunks mention. The entities are checked first (their
/// mentions counted up to one past the bound), so a common entity's mentions are never walked;
/// each entity is found by its key: the scope's database is checked on the entity's row
/// (`database_id || ''`), since an equality SQLite could carry over from `d.id` let it walk
/// every entity of the database by its `database_id` instead (6 ms a question at 2,000 chunks,
/// growing with the database).
pub(crate) fn specific_mentions_select(
    scope: &DatabaseScope,
    entities: &[i64],
    most_mentions: u64,
    limit: u32,
) -> Sql {
    let mut select = Sql::new(
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
        .push_bind(limit);
    select
}

/// Stores `graph`, the graph of `item` whose chunks' keys by position are `chunks`: its
/// entities (merged with the collection's), mentions, relations and, for a memory inferred from,
/// its facts. A few statements per item, each writing many rows: a statement is a round trip to
/// the database (on SQLite, to its connection's thread), and the graph written row by row
/// halved the pipeline's throughput where nothing else costs.
pub(crate) async fn store_graph<B: Backend>(
    conn: &mut B::Connection,
    item: &ClaimedItem,
    graph: &ItemGraph,
    chunks: &HashMap<u32, i64>,
    now: UnixMs,
) -> StoreResult<()> {
    let write = GraphWrite::plan(graph, chunks);
    let mut entity_keys: HashMap<String, i64> = HashMap::with_capacity(write.entities.len());
    let mut named = HashSet::with_capacity(write.entities.len());
    let unique: Vec<&Entity> = write
        .entities
        .iter()
        .map(|&at| &graph.entities[at])
        .filter(|e| named.insert(e.key.as_str()))
        .collect();
    for part in unique.chunks(ENTITY_ROWS) {
        let mut insert = Sql::new(
            "INSERT INTO graph_entities (database_id, collection, kind, key, name, type, namespace, identifier) VALUES ",
        );
        push_rows(&mut insert, part, |e| {
            vec![
                item.database_id.as_str().into(),
                item.collection.as_str().into(),
                item.kind.as_str().into(),
                e.key.as_str().into(),
                e.name.as_str().into(),
                e.kind.as_str().into(),
                e.namespace.as_str().into(),
                e.identifier.as_deref().into(),
            ]
        });
        insert.push(
            " ON CONFLICT (database_id, collection, kind, key) DO UPDATE SET
                 type = CASE WHEN graph_entities.type = 'ENTITY' THEN excluded.type ELSE graph_entities.type END,
                 identifier = COALESCE(graph_entities.identifier, excluded.identifier)
             RETURNING key, entity_key",
        );
        for row in B::fetch_all(conn, insert).await? {
            entity_keys.insert(row.text("key")?, row.int("entity_key")?);
        }
    }
    let key_of = |at: usize| entity_keys.get(graph.entities[at].key.as_str()).copied();
    for part in write.mentions.chunks(MENTION_ROWS) {
        let mut insert = Sql::new("INSERT INTO graph_mentions (entity_key, chunk_key) VALUES ");
        push_rows(&mut insert, part, |&(entity, chunk)| {
            vec![key_of(entity).into(), chunk.into()]
        });
        insert.push(" ON CONFLICT DO NOTHING");
        B::execute(conn, insert).await?;
    }
    for part in write.relations.chunks(RELATION_ROWS) {
        let mut insert = Sql::new(
            "INSERT INTO graph_relations (chunk_key, item_key, source_key, target_key, raw_predicate,
                 canonical_predicate, context, confidence, temporal_details, origin, created_at) VALUES ",
        );
        push_rows(&mut insert, part, |&(r, chunk)| {
            vec![
                chunk.into(),
                item.item_key.into(),
                key_of(r.source).into(),
                key_of(r.target).into(),
                r.raw_predicate.as_str().into(),
                r.canonical_predicate.as_str().into(),
                r.context.as_str().into(),
                r.confidence.into(),
                r.temporal_details.as_deref().into(),
                graph.origin.as_str().into(),
                now.into(),
            ]
        });
        B::execute(conn, insert).await?;
    }
    if item.infer && item.kind == ItemKind::Memory {
        write_facts::<B>(conn, item, &graph.facts, now).await?;
    }
    Ok(())
}

/// Writes a memory's facts about its user in the transaction completing it: its earlier facts
/// replaced, a current fact of another live memory in the same slot with another value
/// superseded (kept, `valid_until` and `superseded_by` set); the statements the user's current
/// facts did not already hold become the item's `inferred_content`.
async fn write_facts<B: Backend>(
    conn: &mut B::Connection,
    item: &ClaimedItem,
    facts: &[Fact],
    now: UnixMs,
) -> StoreResult<()> {
    let clear = Sql::new("DELETE FROM memory_facts WHERE item_key = $1").bind(item.item_key);
    B::execute(conn, clear).await?;
    // The current facts of the user's other live memories.
    const CURRENT: &str = "database_id = $1 AND collection = $2 AND user_name = $3 AND slot = $4
        AND valid_until IS NULL AND item_key <> $5
        AND item_key IN (SELECT item_key FROM items WHERE expires_at IS NULL OR expires_at > $6)";
    let current = |text: String, fact: &Fact| {
        Sql::new(text)
            .bind(item.database_id.as_str())
            .bind(item.collection.as_str())
            .bind(&item.user_name)
            .bind(&fact.slot)
            .bind(item.item_key)
            .bind(now)
            .bind(&fact.value)
    };
    let mut new: Vec<&str> = Vec::new();
    for fact in facts {
        let held = current(
            format!("SELECT item_key FROM memory_facts WHERE {CURRENT} AND value = $7 LIMIT 1"),
            fact,
        );
        if B::fetch_optional(conn, held).await?.is_none() {
            new.push(&fact.statement);
        }
        let supersede = current(
            format!(
                "UPDATE memory_facts SET valid_until = $6, superseded_by = $5
                 WHERE {CURRENT} AND value <> $7"
            ),
            fact,
        );
        B::execute(conn, supersede).await?;
        let insert = Sql::new(
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
        .bind(now);
        B::execute(conn, insert).await?;
    }
    let inferred = Sql::new("UPDATE items SET inferred_content = $1 WHERE item_key = $2")
        .bind(new.join(" "))
        .bind(item.item_key);
    B::execute(conn, inferred).await?;
    Ok(())
}

/// `(a, b), (c, d), …`: one parenthesized group of parameters per row.
fn push_rows<T>(insert: &mut Sql, rows: &[T], row: impl Fn(&T) -> Vec<Param>) {
    for (n, values) in rows.iter().enumerate() {
        insert
            .push(if n == 0 { "(" } else { ", (" })
            .push_list(row(values))
            .push(")");
    }
}

fn linked(row: &impl crate::rows::Columns, end: &str) -> StoreResult<LinkedItem> {
    Ok(LinkedItem {
        item_key: row.int(&format!("{end}_key"))?,
        id: row.text(&format!("{end}_id"))?,
        collection: CollectionName::from_trusted(row.text(&format!("{end}_collection"))?),
        title: row.text(&format!("{end}_title"))?,
    })
}

fn count(row: &impl crate::rows::Columns, column: &str) -> StoreResult<u64> {
    Ok(u64::try_from(row.int(column)?).unwrap_or(0))
}

#[async_trait]
impl<B: Backend> GraphStore for SqlStore<B> {
    async fn item_passages(&self, item: &ClaimedItem) -> StoreResult<Vec<(u32, String)>> {
        let rows = self
            .all(
                Sql::new(
                    "SELECT position, content FROM chunks WHERE item_key = $1 ORDER BY position",
                )
                .bind(item.item_key),
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok((
                    u32::try_from(r.int("position")?).unwrap_or(u32::MAX),
                    r.text("content")?,
                ))
            })
            .collect()
    }

    async fn complete_graph(
        &self,
        item: &ClaimedItem,
        graph: &ItemGraph,
        now: UnixMs,
    ) -> StoreResult<bool> {
        let mut tx = B::begin_write(&self.pool).await?;
        B::lock_feed(&mut tx).await?;
        let complete = Sql::new(
            "UPDATE items SET status = 'completed', lease_owner = NULL, lease_until = NULL,
                 updated_at = $1
             WHERE item_key = $2 AND version = $3 AND status = 'graph_creation' AND lease_owner = $4",
        )
        .bind(now)
        .bind(item.item_key)
        .bind(item.version)
        .bind(&item.lease_owner);
        if B::execute(&mut tx, complete).await? != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        // The item's earlier graph (a retried graph stage), found by its chunks.
        for table in ["graph_relations", "graph_mentions"] {
            let clear = Sql::new(format!(
                "DELETE FROM {table}
                 WHERE chunk_key IN (SELECT chunk_key FROM chunks WHERE item_key = $1)"
            ))
            .bind(item.item_key);
            B::execute(&mut tx, clear).await?;
        }
        let positions = Sql::new("SELECT position, chunk_key FROM chunks WHERE item_key = $1")
            .bind(item.item_key);
        let mut chunks: HashMap<u32, i64> = HashMap::new();
        for row in B::fetch_all(&mut tx, positions).await? {
            let position = u32::try_from(row.int("position")?).unwrap_or(u32::MAX);
            chunks.insert(position, row.int("chunk_key")?);
        }
        store_graph::<B>(&mut tx, item, graph, &chunks, now).await?;
        crate::webhooks::record_event::<B>(&mut tx, item, IndexingStatus::Completed, "", "", now)
            .await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn item_relations(
        &self,
        scope: &DatabaseScope,
        query: &RelationQuery<'_>,
        now: UnixMs,
    ) -> StoreResult<Option<Vec<RelationRecord>>> {
        let mut tx = self.pool.begin().await?;
        let item = crate::item_store::select_live_item(scope, query.collection, query.id, now);
        let Some(row) = B::fetch_optional(&mut tx, item).await? else {
            return Ok(None);
        };
        if crate::rows::kind(&row)? != query.kind {
            return Ok(None);
        }
        let relations = Sql::new(format!(
            "SELECT {RELATION_FIELDS} FROM graph_relations r JOIN chunks c ON c.chunk_key = r.chunk_key
             JOIN graph_entities s ON s.entity_key = r.source_key
             JOIN graph_entities t ON t.entity_key = r.target_key
             WHERE r.item_key = $1 AND r.relation_key > $2 ORDER BY r.relation_key LIMIT $3"
        ))
        .bind(row.int("item_key")?)
        .bind(query.after.unwrap_or(0))
        .bind(query.limit);
        let rows = B::fetch_all(&mut tx, relations).await?;
        tx.commit().await?;
        rows.iter()
            .map(crate::rows::relation)
            .collect::<StoreResult<_>>()
            .map(Some)
    }

    async fn graph_size(&self, scope: &DatabaseScope) -> StoreResult<GraphSize> {
        let row = self
            .one(
                Sql::new(
                    "SELECT
                         (SELECT COUNT(*) FROM graph_entities e JOIN databases d ON d.id = e.database_id
                          WHERE d.id = $1 AND d.org_id = $2) AS entities,
                         (SELECT COUNT(*) FROM graph_relations r JOIN chunks c ON c.chunk_key = r.chunk_key
                          JOIN databases d ON d.id = c.database_id WHERE d.id = $1 AND d.org_id = $2) AS relations",
                )
                .bind(scope.id.as_str())
                .bind(scope.org.as_str()),
            )
            .await?;
        Ok(GraphSize {
            entities: count(&row, "entities")?,
            relations: count(&row, "relations")?,
        })
    }

    async fn entities_named(
        &self,
        scope: &DatabaseScope,
        kinds: &[ItemKind],
        keys: &[String],
        count_to: u64,
    ) -> StoreResult<Vec<(i64, u64)>> {
        if kinds.is_empty() || keys.is_empty() {
            return Ok(Vec::new());
        }
        let mut select = Sql::new(
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
        push_scope(&mut select, "d.id", scope);
        push_list(&mut select, "e.kind", kinds.iter().map(|k| k.as_str()));
        push_list(&mut select, "e.key", keys);
        self.all(select)
            .await?
            .iter()
            .map(|row| Ok((row.int("entity_key")?, count(row, "df")?)))
            .collect()
    }

    async fn mentions_touching(
        &self,
        scope: &DatabaseScope,
        entities: &[i64],
        chunks: &[ChunkKey],
        limit: u32,
    ) -> StoreResult<Vec<(i64, ChunkKey)>> {
        // Mentions lead (CROSS JOIN keeps that order on SQLite): each side of the lookup is
        // an index probe, not a walk through the database's entities.
        let mut found = Vec::new();
        let sides: [(&str, Vec<i64>); 2] = [
            ("m.entity_key", entities.to_vec()),
            ("m.chunk_key", chunks.iter().map(|c| c.0).collect()),
        ];
        for (column, keys) in sides {
            if keys.is_empty() {
                continue;
            }
            let mut select = Sql::new(
                "SELECT m.entity_key, m.chunk_key FROM graph_mentions m
                 CROSS JOIN graph_entities e CROSS JOIN databases d
                 WHERE e.entity_key = m.entity_key AND d.id = e.database_id",
            );
            push_scope(&mut select, "d.id", scope);
            push_list(&mut select, column, keys);
            select.push(" LIMIT ").push_bind(limit);
            for row in self.all(select).await? {
                found.push((row.int("entity_key")?, ChunkKey(row.int("chunk_key")?)));
            }
        }
        Ok(found)
    }

    async fn specific_mentions(
        &self,
        scope: &DatabaseScope,
        entities: &[i64],
        most_mentions: u64,
        limit: u32,
    ) -> StoreResult<Vec<(i64, ChunkKey)>> {
        if entities.is_empty() {
            return Ok(Vec::new());
        }
        let select = specific_mentions_select(scope, entities, most_mentions, limit);
        self.all(select)
            .await?
            .iter()
            .map(|row| Ok((row.int("entity_key")?, ChunkKey(row.int("chunk_key")?))))
            .collect()
    }

    async fn user_facts(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        user: &str,
        current_only: bool,
        newest: Option<u32>,
        now: UnixMs,
    ) -> StoreResult<Vec<FactRecord>> {
        let rows = self
            .all(
                Sql::new(format!(
                    "SELECT f.item_key, f.slot, f.value, f.statement, f.valid_from, f.valid_until
                     FROM memory_facts f CROSS JOIN items i CROSS JOIN databases d
                     WHERE i.item_key = f.item_key AND d.id = f.database_id
                       AND f.database_id = $1 AND d.org_id = $2 AND d.state <> 'deleting'
                       AND f.collection = $3 AND f.user_name = $4
                       AND (i.expires_at IS NULL OR i.expires_at > $5) {}
                     ORDER BY f.fact_key DESC {}",
                    if current_only {
                        "AND f.valid_until IS NULL"
                    } else {
                        ""
                    },
                    newest.map(|n| format!("LIMIT {n}")).unwrap_or_default()
                ))
                .bind(scope.id.as_str())
                .bind(scope.org.as_str())
                .bind(collection.as_str())
                .bind(user)
                .bind(now),
            )
            .await?;
        rows.iter()
            .rev()
            .map(|row| {
                Ok(FactRecord {
                    item_key: row.int("item_key")?,
                    slot: row.text("slot")?,
                    value: row.text("value")?,
                    statement: row.text("statement")?,
                    valid_from: row.time("valid_from")?,
                    valid_until: row.opt_time("valid_until")?,
                })
            })
            .collect()
    }

    async fn items_named(
        &self,
        scope: &DatabaseScope,
        kind: ItemKind,
        ids: &[String],
        now: UnixMs,
    ) -> StoreResult<Vec<LinkedItem>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut select = Sql::new(
            "SELECT i.item_key AS i_key, i.id AS i_id, i.collection AS i_collection,
                    i.title AS i_title
             FROM items i CROSS JOIN databases d WHERE d.id = i.database_id",
        );
        push_scope(&mut select, "i.database_id", scope);
        select
            .push(" AND d.state <> 'deleting' AND i.kind = ")
            .push_bind(kind.as_str())
            .push(" AND (i.expires_at IS NULL OR i.expires_at > ")
            .push_bind(now)
            .push(")");
        push_list(&mut select, "i.id", ids);
        select.push(" ORDER BY i.item_key");
        self.all(select)
            .await?
            .iter()
            .map(|row| linked(row, "i"))
            .collect()
    }

    async fn item_links(
        &self,
        scope: &DatabaseScope,
        kind: ItemKind,
        ids: &[String],
        limit: u32,
        now: UnixMs,
    ) -> StoreResult<Vec<ItemLink>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut links = Vec::new();
        let mut seen = HashSet::new();
        // Each way starts from an index probe (CROSS JOIN keeps that order on SQLite): the
        // linking items by id, or the links by their target's id.
        for (from, column) in [
            ("items f CROSS JOIN item_links l", "f.id"),
            ("item_links l CROSS JOIN items f", "l.target_id"),
        ] {
            let mut select = Sql::new(format!(
                "SELECT f.item_key AS f_key, f.id AS f_id, f.collection AS f_collection,
                        f.title AS f_title, t.item_key AS t_key, t.id AS t_id,
                        t.collection AS t_collection, t.title AS t_title
                 FROM {from} CROSS JOIN items t CROSS JOIN databases d
                 WHERE l.item_key = f.item_key AND t.database_id = l.database_id
                   AND t.id = l.target_id AND t.kind = l.kind AND t.item_key <> f.item_key
                   AND d.id = l.database_id AND d.state <> 'deleting'
                   AND f.database_id = l.database_id"
            ));
            push_scope(&mut select, "l.database_id", scope);
            select
                .push(" AND l.kind = ")
                .push_bind(kind.as_str())
                .push(" AND (f.expires_at IS NULL OR f.expires_at > ")
                .push_bind(now)
                .push(") AND (t.expires_at IS NULL OR t.expires_at > ")
                .push_bind(now)
                .push(")");
            push_list(&mut select, column, ids);
            select
                .push(" ORDER BY f.item_key, t.item_key LIMIT ")
                .push_bind(limit);
            for row in self.all(select).await? {
                let (from, to) = (linked(&row, "f")?, linked(&row, "t")?);
                if seen.insert((from.item_key, to.item_key)) {
                    links.push(ItemLink { from, to });
                }
            }
        }
        Ok(links)
    }

    async fn entities_in_items(
        &self,
        scope: &DatabaseScope,
        items: &[i64],
        limit: u32,
    ) -> StoreResult<Vec<(i64, EntityRecord)>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let mut select = Sql::new(
            "SELECT DISTINCT c.item_key, e.entity_key, e.name, e.type, e.namespace, e.identifier
             FROM chunks c CROSS JOIN graph_mentions m CROSS JOIN graph_entities e
             CROSS JOIN databases d
             WHERE m.chunk_key = c.chunk_key AND e.entity_key = m.entity_key
               AND d.id = c.database_id",
        );
        push_scope(&mut select, "c.database_id", scope);
        push_list(&mut select, "c.item_key", items.iter().copied());
        select
            .push(" ORDER BY c.item_key, e.entity_key LIMIT ")
            .push_bind(limit);
        self.all(select)
            .await?
            .iter()
            .map(|row| {
                Ok((
                    row.int("item_key")?,
                    EntityRecord {
                        entity_key: row.int("entity_key")?,
                        name: row.text("name")?,
                        kind: row.text("type")?,
                        namespace: row.text("namespace")?,
                        identifier: row.opt_text("identifier")?,
                    },
                ))
            })
            .collect()
    }

    async fn relations_touching(
        &self,
        scope: &DatabaseScope,
        entities: &[i64],
        chunks: &[ChunkKey],
        limit: u32,
    ) -> StoreResult<Vec<(ChunkKey, RelationRecord)>> {
        let chunk_keys: Vec<i64> = chunks.iter().map(|c| c.0).collect();
        let mut found = Vec::new();
        let mut seen = HashSet::new();
        for (column, keys) in [
            ("r.source_key", entities),
            ("r.target_key", entities),
            ("r.chunk_key", chunk_keys.as_slice()),
        ] {
            if keys.is_empty() {
                continue;
            }
            // The relation leads (CROSS JOIN keeps that order on SQLite).
            let mut select = Sql::new(format!(
                "SELECT {RELATION_FIELDS} FROM graph_relations r CROSS JOIN chunks c
                 CROSS JOIN graph_entities s CROSS JOIN graph_entities t
                 CROSS JOIN databases d
                 WHERE c.chunk_key = r.chunk_key AND s.entity_key = r.source_key
                   AND t.entity_key = r.target_key AND d.id = c.database_id"
            ));
            push_scope(&mut select, "d.id", scope);
            push_list(&mut select, column, keys.iter().copied());
            select.push(" LIMIT ").push_bind(limit);
            for row in self.all(select).await? {
                let relation = crate::rows::relation(&row)?;
                if seen.insert(relation.relation_key) {
                    found.push((ChunkKey(row.int("chunk_key")?), relation));
                }
            }
        }
        Ok(found)
    }
}
