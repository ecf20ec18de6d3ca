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
}

/// What writing an item's graph comes to, the same for every backend: the entities that are
/// mentioned in a chunk the item has, each mention once (a relation's ends are mentioned in its
/// chunk), and the relations whose chunk exists, with both ends written.
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
