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
