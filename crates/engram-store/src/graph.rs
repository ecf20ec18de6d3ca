//! The knowledge graph's storage: each item's entities, relations and mentions, kept per
//! database, collection and kind, written when the item leaves `graph_creation`.

use async_trait::async_trait;
use engram_graph::{ItemGraph, Origin};
use engram_types::{CollectionName, ItemKind, UnixMs};

use crate::backend::{Backend, Sql};
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
    /// database, oldest first; with `current_only`, those that still hold; with `newest`, only
    /// that many of the newest.
    async fn user_facts(
        &self,
        scope: &DatabaseScope,
        collection: &CollectionName,
        user: &str,
        current_only: bool,
        newest: Option<u32>,
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

/// Writes what a stored item declares for its graph, in the transaction storing it: its links
/// (`relations.ids`) and its own graph when it brings one. `replaced` says whether it replaces
/// an item (and whether that one had expired): a replaced item's links, facts and inferred
/// content go; its client graph stays for a re-ingestion without one, unless it had expired
/// (an unrelated item under a reused id inherits nothing). A new item has nothing to clear.
pub(crate) async fn write_declared<B: Backend>(
    conn: &mut B::Connection,
    scope: &DatabaseScope,
    item_key: i64,
    item: &crate::NewItem,
    replaced: Option<bool>,
) -> StoreResult<()> {
    let by_key = |text: &str| Sql::new(text).bind(item_key);
    if let Some(expired) = replaced {
        B::execute(conn, by_key("DELETE FROM item_links WHERE item_key = $1")).await?;
        if item.kind == engram_types::ItemKind::Memory {
            // A memory stored again is inferred again (or not at all).
            B::execute(conn, by_key("DELETE FROM memory_facts WHERE item_key = $1")).await?;
            let clear = by_key("UPDATE items SET inferred_content = '' WHERE item_key = $1");
            B::execute(conn, clear).await?;
        }
        if expired && item.graph_payload.is_none() {
            let clear = by_key("UPDATE items SET graph_payload = NULL WHERE item_key = $1");
            B::execute(conn, clear).await?;
        }
    }
    for target in link_ids(&item.fields.relations) {
        if target == item.id {
            continue;
        }
        let link = Sql::new(
            "INSERT INTO item_links (item_key, database_id, kind, target_id) VALUES ($1, $2, $3, $4)
             ON CONFLICT DO NOTHING",
        )
        .bind(item_key)
        .bind(scope.id.as_str())
        .bind(item.kind.as_str())
        .bind(target);
        B::execute(conn, link).await?;
    }
    if let Some(payload) = &item.graph_payload {
        // An empty payload drops the one before: the item is extracted again.
        let write = Sql::new("UPDATE items SET graph_payload = NULLIF($1, '') WHERE item_key = $2")
            .bind(payload)
            .bind(item_key);
        B::execute(conn, write).await?;
    }
    Ok(())
}
