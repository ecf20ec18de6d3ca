//! Links between whole sources, declared at ingestion (`relations.ids`): the connected
//! subgraph of one source (a query's linked sources are `engram_search`'s). Links stay within one database, kind and (for what a reader sees)
//! the collections it reads.

use std::collections::HashSet;

use engram_store::{EntityRecord, ItemLink, LinkedItem};
use engram_types::{CollectionName, DatabaseName, ItemKind};

use crate::ingest::parse_collection;
use crate::{App, AppError, AppResult, DatabaseRecord, Principal};
use engram_types::Scope;

/// Subgraph bounds: hops from the seed (default 2), members (default 50), links read per hop,
/// and entity presences around the members.
pub(crate) const SUBGRAPH_DEPTH_DEFAULT: u32 = 2;
pub(crate) const SUBGRAPH_DEPTH_MAX: u32 = 5;
pub(crate) const SUBGRAPH_SOURCES_DEFAULT: u32 = 50;
pub(crate) const SUBGRAPH_SOURCES_MAX: u32 = 500;
const SUBGRAPH_LINKS_PER_HOP: u32 = 5_000;
const SUBGRAPH_ENTITIES_MAX: u32 = 1_000;

/// Which source's subgraph, how far and how big.
#[derive(Debug, Clone)]
pub struct SubgraphRequest<'a> {
    pub collection: Option<&'a str>,
    pub id: &'a str,
    pub kind: ItemKind,
    pub depth: Option<i64>,
    pub max_sources: Option<i64>,
}

/// A member of a subgraph: how far from the seed, and which member it was reached from.
#[derive(Debug, Clone)]
pub struct SubgraphMember {
    pub item: LinkedItem,
    pub depth: u32,
    /// The id of the member it was first reached from; `None` for the seed.
    pub via: Option<String>,
}

/// The sources connected to one source by declared links, breadth first.
#[derive(Debug, Clone)]
pub struct Subgraph {
    pub database: DatabaseRecord,
    pub collection: CollectionName,
    pub seed: String,
    /// Seed first, then in discovery order; empty when the seed is unknown.
    pub members: Vec<SubgraphMember>,
    /// The links between members.
    pub links: Vec<ItemLink>,
    /// The entities mentioned in each member's chunks, as `(member item key, entity)`.
    pub entities: Vec<(i64, EntityRecord)>,
    pub max_depth_reached: u32,
    /// The member or depth bound left connected sources out.
    pub is_truncated: bool,
    /// The entity bound left presences out.
    pub entities_truncated: bool,
}

/// A count parameter `name`: `default` when absent, else 1 to `max` (400 otherwise).
pub(crate) fn bounded(value: Option<i64>, default: u32, max: u32, name: &str) -> AppResult<u32> {
    match value {
        None => Ok(default),
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                AppError::InvalidParameters(format!("`{name}` must be between 1 and {max}"))
            }),
    }
}

impl App {
    /// The sources reachable from `request.id` through declared links (either way), breadth
    /// first up to `depth` hops and `max_sources` members, within one collection (the
    /// database's default unless named), with the links among them and the entities their
    /// chunks mention. An unknown id gives an empty subgraph.
    pub async fn subgraph(
        &self,
        who: &Principal,
        database: &DatabaseName,
        request: SubgraphRequest<'_>,
    ) -> AppResult<Subgraph> {
        who.require(Scope::Read)?;
        if request.id.is_empty() {
            return Err(AppError::InvalidParameters(
                "missing required parameter `id`".into(),
            ));
        }
        let depth = bounded(
            request.depth,
            SUBGRAPH_DEPTH_DEFAULT,
            SUBGRAPH_DEPTH_MAX,
            "depth",
        )?;
        let max_sources = bounded(
            request.max_sources,
            SUBGRAPH_SOURCES_DEFAULT,
            SUBGRAPH_SOURCES_MAX,
            "max_sources",
        )? as usize;
        let db = self.authorize_database(who, database, Scope::Read).await?;
        let collection = parse_collection(&db, request.collection, "collection")?;
        let scope = db.scope();
        let now = self.now();
        let store = self.store();
        let seed = store
            .items_named(&scope, request.kind, &[request.id.to_owned()], now)
            .await?
            .into_iter()
            .find(|i| i.collection == collection);
        let mut graph = Subgraph {
            database: db,
            collection: collection.clone(),
            seed: request.id.to_owned(),
            members: Vec::new(),
            links: Vec::new(),
            entities: Vec::new(),
            max_depth_reached: 0,
            is_truncated: false,
            entities_truncated: false,
        };
        let Some(seed) = seed else {
            return Ok(graph);
        };
        let mut admitted: HashSet<i64> = HashSet::from([seed.item_key]);
        let mut frontier = vec![seed.clone()];
        graph.members.push(SubgraphMember {
            item: seed,
            depth: 0,
            via: None,
        });
        let mut links: Vec<ItemLink> = Vec::new();
        let mut hop = 0;
        while !frontier.is_empty() {
            let ids: Vec<String> = frontier.iter().map(|i| i.id.clone()).collect();
            let found = store
                .item_links(&scope, request.kind, &ids, SUBGRAPH_LINKS_PER_HOP, now)
                .await?;
            if found.len() >= SUBGRAPH_LINKS_PER_HOP as usize {
                graph.is_truncated = true;
            }
            let keys: HashSet<i64> = frontier.iter().map(|i| i.item_key).collect();
            let mut next = Vec::new();
            for link in found {
                if link.from.collection != collection || link.to.collection != collection {
                    continue;
                }
                let ends = [(&link.from, &link.to), (&link.to, &link.from)];
                for (near, far) in ends {
                    if !keys.contains(&near.item_key) || admitted.contains(&far.item_key) {
                        continue;
                    }
                    if hop == depth || graph.members.len() >= max_sources {
                        graph.is_truncated = true;
                        continue;
                    }
                    admitted.insert(far.item_key);
                    graph.members.push(SubgraphMember {
                        item: far.clone(),
                        depth: hop + 1,
                        via: Some(near.id.clone()),
                    });
                    graph.max_depth_reached = hop + 1;
                    next.push(far.clone());
                }
                links.push(link);
            }
            if hop == depth {
                break;
            }
            frontier = next;
            hop += 1;
        }
        let mut seen = HashSet::new();
        graph.links = links
            .into_iter()
            .filter(|l| admitted.contains(&l.from.item_key) && admitted.contains(&l.to.item_key))
            .filter(|l| seen.insert((l.from.item_key, l.to.item_key)))
            .collect();
        let keys: Vec<i64> = graph.members.iter().map(|m| m.item.item_key).collect();
        graph.entities = store
            .entities_in_items(&scope, &keys, SUBGRAPH_ENTITIES_MAX)
            .await?;
        graph.entities_truncated = graph.entities.len() >= SUBGRAPH_ENTITIES_MAX as usize;
        Ok(graph)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_default_and_refuse_out_of_range() {
        assert_eq!(bounded(None, 2, 5, "depth").unwrap(), 2);
        assert_eq!(bounded(Some(5), 2, 5, "depth").unwrap(), 5);
        for bad in [0, 6, -1, i64::MAX] {
            let err = bounded(Some(bad), 2, 5, "depth").unwrap_err();
            assert!(
                err.to_string().contains("`depth` must be between 1 and 5"),
                "{err}"
            );
        }
    }
}
