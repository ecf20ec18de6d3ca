//! The knowledge graph read back: the relations one item evidences, a page at a time (a
//! query's graph context is `engram_search`'s).

use engram_store::{RelationQuery, RelationRecord};
use engram_types::{CollectionName, DatabaseName, ItemKind};

use crate::ingest::parse_collection;
use crate::{App, AppError, AppResult, DatabaseRecord, Principal};
use engram_types::Scope;

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
        who.require(Scope::Read)?;
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
        let db = self.authorize_database(who, database, Scope::Read).await?;
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

/// Most relations one entity's neighbourhood shows.
pub const NEIGHBOURHOOD_RELATIONS_MAX: u32 = 500;

/// One relation of a neighbourhood, with where its evidence is.
#[derive(Debug, Clone)]
pub struct NeighbourRelation {
    pub relation: RelationRecord,
    /// The evidence chunk's item (`None` when the chunk is no longer live).
    pub item: Option<engram_store::ItemRecord>,
}

/// An entity's neighbourhood: the entities of that name and the relations touching them.
#[derive(Debug, Clone)]
pub struct Neighbourhood {
    pub database: DatabaseRecord,
    /// The name as entities are merged on.
    pub key: String,
    /// The entities of that name, with how many chunks mention each (counted up to 10,000).
    pub entities: Vec<(i64, u64)>,
    pub relations: Vec<NeighbourRelation>,
    /// The bound left relations out.
    pub truncated: bool,
}

/// A memory fact inference stored about a user, and the fact that superseded it.
#[derive(Debug, Clone)]
pub struct UserFact {
    pub fact: engram_store::FactRecord,
    /// The later statement in the same slot that replaced it; `None` while it holds.
    pub superseded_by: Option<String>,
}

impl App {
    /// The relations around the entity named `name` (either end) in the database, each with the
    /// item its evidence is in, at most `limit` (1 to [`NEIGHBOURHOOD_RELATIONS_MAX`]).
    pub async fn entity_neighbourhood(
        &self,
        who: &Principal,
        database: &DatabaseName,
        name: &str,
        limit: u32,
    ) -> AppResult<Neighbourhood> {
        who.require(Scope::Read)?;
        if !(1..=NEIGHBOURHOOD_RELATIONS_MAX).contains(&limit) {
            return Err(AppError::InvalidParameters(format!(
                "`limit` must be between 1 and {NEIGHBOURHOOD_RELATIONS_MAX}"
            )));
        }
        let key = engram_graph::entity_key(name);
        if key.is_empty() {
            return Err(AppError::InvalidParameters(
                "name an entity (letters or digits)".into(),
            ));
        }
        let db = self.authorize_database(who, database, Scope::Read).await?;
        let scope = db.scope();
        let kinds = [ItemKind::Knowledge, ItemKind::Memory];
        let entities = self
            .store()
            .entities_named(&scope, &kinds, std::slice::from_ref(&key), 10_000)
            .await?;
        let ids: Vec<i64> = entities.iter().map(|(id, _)| *id).collect();
        let mut touching = if ids.is_empty() {
            Vec::new()
        } else {
            self.store()
                .relations_touching(&scope, &ids, &[], limit + 1)
                .await?
        };
        touching.retain(|(_, r)| {
            ids.contains(&r.source.entity_key) || ids.contains(&r.target.entity_key)
        });
        let truncated = touching.len() > limit as usize;
        touching.truncate(limit as usize);
        let chunks: Vec<engram_store::ChunkKey> = touching.iter().map(|(c, _)| *c).collect();
        let hits = self
            .store()
            .fetch_chunks(
                &scope,
                &engram_store::ChunkFilter::default(),
                &chunks,
                self.now(),
            )
            .await?;
        let relations = touching
            .into_iter()
            .map(|(chunk, relation)| NeighbourRelation {
                item: hits
                    .iter()
                    .find(|h| h.chunk_key == chunk)
                    .map(|h| h.item.clone()),
                relation,
            })
            .collect();
        Ok(Neighbourhood {
            database: db,
            key,
            entities,
            relations,
            truncated,
        })
    }

    /// What inference stored about `user` from the memories of one collection, oldest first (the
    /// newest [`USER_FACTS_SHOWN`]), each with the statement that superseded it, if any.
    pub async fn user_facts(
        &self,
        who: &Principal,
        database: &DatabaseName,
        collection: Option<&str>,
        user: &str,
    ) -> AppResult<(DatabaseRecord, CollectionName, Vec<UserFact>)> {
        who.require(Scope::Read)?;
        let db = self.authorize_database(who, database, Scope::Read).await?;
        let collection = parse_collection(&db, collection, "collection")?;
        let facts = self
            .store()
            .user_facts(
                &db.scope(),
                &collection,
                user,
                false,
                Some(USER_FACTS_SHOWN),
                self.now(),
            )
            .await?;
        // Each slot's facts, by when they began: what superseded a fact is the latest other
        // value of its slot that began before it ended.
        let mut by_slot: std::collections::HashMap<&str, Vec<&engram_store::FactRecord>> =
            std::collections::HashMap::new();
        for fact in &facts {
            by_slot.entry(fact.slot.as_str()).or_default().push(fact);
        }
        for slot in by_slot.values_mut() {
            slot.sort_by_key(|f| f.valid_from);
        }
        let facts = facts
            .iter()
            .map(|fact| UserFact {
                superseded_by: fact.valid_until.and_then(|until| {
                    let slot = &by_slot[fact.slot.as_str()];
                    let began = slot.partition_point(|f| f.valid_from <= until);
                    slot[..began]
                        .iter()
                        .rev()
                        .take_while(|later| later.valid_from >= fact.valid_from)
                        .find(|later| later.value != fact.value)
                        .map(|later| later.statement.clone())
                }),
                fact: fact.clone(),
            })
            .collect();
        Ok((db, collection, facts))
    }
}

/// Most facts about one user [`App::user_facts`] answers: the newest.
pub const USER_FACTS_SHOWN: u32 = 200;

impl App {
    /// How big the database's graph is: its entities and relations.
    pub async fn graph_size(
        &self,
        who: &Principal,
        database: &DatabaseName,
    ) -> AppResult<engram_store::GraphSize> {
        who.require(Scope::Read)?;
        let db = self.authorize_database(who, database, Scope::Read).await?;
        Ok(self.store().graph_size(&db.scope()).await?)
    }
}
