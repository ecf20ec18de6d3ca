//! The graph: written as an item leaves `graph_creation` (searchable before), listed per item
//! and kind within one organization's database, merged across items of one collection and
//! kind, and gone with the chunks it hangs off (replacement, deletion).

use std::time::Duration;

use engram_graph::{Entity, ItemGraph, Mention, Origin, Relation};
use engram_types::{IndexingStatus, ItemKind, UnixMs};

use super::items::{chunk, claim_ours, collection, item, setup};
use super::moment;
use crate::{
    AfterChunks, ClaimRequest, ClaimedItem, Completion, DatabaseScope, GraphSize, RelationQuery,
    Stage, Store,
};

pub(super) async fn run_all<S: Store>(store: &S) {
    graph_creation_is_searchable_then_completed_with_its_graph(store).await;
    graphs_merge_by_key_and_stay_apart_by_collection_kind_and_organization(store).await;
    a_graph_goes_with_its_chunks(store).await;
    a_lost_claim_writes_no_graph_and_a_dead_one_is_claimed_for_its_graph(store).await;
    declared_links_and_graphs_stay_with_their_items(store).await;
    inferred_facts_supersede_and_stay_with_their_memory(store).await;
    a_batch_completes_at_once_with_its_graphs_and_skips_a_lost_claim(store).await;
}

fn relation(source: usize, target: usize, predicate: &str, passage: u32) -> Relation {
    Relation {
        source,
        target,
        raw_predicate: predicate.to_lowercase().replace('_', " "),
        canonical_predicate: predicate.into(),
        context: format!("evidence {predicate}"),
        confidence: 0.6,
        temporal_details: (passage == 0).then(|| "2021".to_owned()),
        passage,
    }
}

/// Entities named by `names`; relations `(source, target, predicate, passage)`; every relation
/// end is mentioned in its passage, plus `extra` mentions.
fn graph(
    names: &[&str],
    relations: &[(usize, usize, &str, u32)],
    extra: &[(usize, u32)],
) -> ItemGraph {
    ItemGraph {
        origin: Origin::Extracted,
        entities: names
            .iter()
            .map(|n| Entity::new(n, "ENTITY", None))
            .collect(),
        relations: relations
            .iter()
            .map(|&(s, t, p, at)| relation(s, t, p, at))
            .collect(),
        mentions: extra
            .iter()
            .map(|&(entity, passage)| Mention { entity, passage })
            .collect(),
        facts: Vec::new(),
    }
}

/// Enqueues `id` with two chunks and leaves it in `graph_creation`, held by `owner`.
async fn indexed<S: Store>(
    store: &S,
    scope: &DatabaseScope,
    coll: &str,
    id: &str,
    kind: ItemKind,
    owner: &str,
) -> ClaimedItem {
    let mut new = item(coll, id, "text");
    new.kind = kind;
    store
        .enqueue_items(scope, &[new], true, moment(100))
        .await
        .unwrap();
    let claimed = claim_ours(store, scope, owner, moment(110)).await;
    let claimed = claimed.into_iter().find(|c| c.id == id).unwrap();
    assert_eq!(claimed.stage, Stage::Index);
    let chunks = [
        chunk(&format!("{}-{coll}-{id}-0", scope.id), 0, "first passage"),
        chunk(&format!("{}-{coll}-{id}-1", scope.id), 1, "second passage"),
    ];
    assert!(store
        .complete_item(&claimed, &chunks, AfterChunks::Graph, moment(120))
        .await
        .unwrap());
    claimed
}

fn query<'a>(coll: &'a crate::CollectionName, id: &'a str, kind: ItemKind) -> RelationQuery<'a> {
    RelationQuery {
        collection: coll,
        kind,
        id,
        after: None,
        limit: 100,
    }
}

async fn graph_creation_is_searchable_then_completed_with_its_graph<S: Store>(store: &S) {
    let scope = setup(store, "db_graph1", "org_graph1").await;
    let claimed = indexed(store, &scope, "c", "doc", ItemKind::Knowledge, "g1").await;
    let coll = collection("c");
    let statuses = store
        .item_statuses(&scope, &coll, &["doc".into()], moment(121))
        .await
        .unwrap();
    assert_eq!(statuses[0].status, IndexingStatus::GraphCreation);
    let searchable = store
        .filtered_chunk_keys(&scope, &crate::ChunkFilter::default(), 10, moment(121))
        .await
        .unwrap();
    assert_eq!(searchable.len(), 2, "graph_creation items are searchable");
    assert!(
        claim_ours(store, &scope, "other", moment(130))
            .await
            .is_empty(),
        "a held graph_creation item is nobody else's"
    );
    let passages = store.item_passages(&claimed).await.unwrap();
    assert_eq!(
        passages,
        [
            (0, "first passage".to_owned()),
            (1, "second passage".to_owned())
        ]
    );

    // Ana works for Acme (passage 0); Acme is based in Lisbon (passage 1); a mention of a
    // passage the item does not have is skipped.
    let g = graph(
        &["Ana Ruiz", "Acme", "Lisbon", "Nowhere"],
        &[(0, 1, "WORKS_FOR", 0), (1, 2, "BASED_IN", 1)],
        &[(3, 9)],
    );
    assert!(store
        .complete_graph(&claimed, &g, moment(140))
        .await
        .unwrap());
    let statuses = store
        .item_statuses(&scope, &coll, &["doc".into()], moment(141))
        .await
        .unwrap();
    assert_eq!(statuses[0].status, IndexingStatus::Completed);
    assert_eq!(
        store.graph_size(&scope).await.unwrap(),
        GraphSize {
            entities: 3,
            relations: 2
        }
    );
    let listed = store
        .item_relations(
            &scope,
            &query(&coll, "doc", ItemKind::Knowledge),
            moment(141),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(listed.len(), 2);
    let first = &listed[0];
    assert_eq!(
        (
            first.source.name.as_str(),
            first.canonical_predicate.as_str(),
            first.target.name.as_str()
        ),
        ("ana ruiz", "WORKS_FOR", "acme")
    );
    assert_eq!(first.raw_predicate, "works for");
    assert_eq!(first.context, "evidence WORKS_FOR");
    assert_eq!(first.temporal_details.as_deref(), Some("2021"));
    assert_eq!(first.origin, Origin::Extracted);
    assert_eq!(first.chunk_id, format!("{}-c-doc-0", scope.id));
    assert_eq!(first.created_at, moment(140));
    assert!((first.confidence - 0.6).abs() < 1e-6);
    assert_eq!(listed[1].source.entity_key, first.target.entity_key);
    assert_eq!(listed[1].chunk_id, format!("{}-c-doc-1", scope.id));

    // Pages follow the cursor.
    let mut page = query(&coll, "doc", ItemKind::Knowledge);
    page.limit = 1;
    let one = store
        .item_relations(&scope, &page, moment(141))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(one, listed[..1]);
    page.after = Some(one[0].relation_key);
    let two = store
        .item_relations(&scope, &page, moment(141))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(two, listed[1..]);

    // Ranking reads: entities by key with how many chunks mention them, and the mentions
    // around entities or chunks, within the organization's database only.
    let named = store
        .entities_named(
            &scope,
            &[ItemKind::Knowledge],
            &["acme".into(), "ana ruiz".into(), "unknown".into()],
            100,
        )
        .await
        .unwrap();
    let mut dfs: Vec<(i64, u64)> = named.clone();
    dfs.sort();
    assert_eq!(dfs.len(), 2);
    let acme = first.target.entity_key;
    assert!(
        named.contains(&(acme, 2)),
        "acme is mentioned by both chunks: {named:?}"
    );
    assert!(store
        .entities_named(&scope, &[ItemKind::Memory], &["acme".into()], 100)
        .await
        .unwrap()
        .is_empty());
    let around = store
        .mentions_touching(&scope, &[acme], &[], 100)
        .await
        .unwrap();
    assert_eq!(around.len(), 2);
    let foreign = DatabaseScope {
        org: engram_types::OrgId::from_trusted("org_graph1_other"),
        id: scope.id.clone(),
    };
    assert!(store
        .mentions_touching(&foreign, &[acme], &[], 100)
        .await
        .unwrap()
        .is_empty());
    // Only the entities few enough chunks mention: acme (two chunks) is left out under a
    // bound of one, and the other organization reads nothing.
    let ana = named.iter().find(|n| n.0 != acme).unwrap();
    let mut specific = store
        .specific_mentions(&scope, &[acme, ana.0], 2, 100)
        .await
        .unwrap();
    specific.sort();
    assert_eq!(specific.len(), 2 + usize::try_from(ana.1).unwrap());
    let specific = store
        .specific_mentions(&scope, &[acme, ana.0], 1, 100)
        .await
        .unwrap();
    assert!(
        specific.iter().all(|m| m.0 == ana.0) && specific.len() == 1,
        "{specific:?}"
    );
    assert!(store
        .specific_mentions(&foreign, &[acme, ana.0], 2, 100)
        .await
        .unwrap()
        .is_empty());
    assert!(store
        .entities_named(&foreign, &[ItemKind::Knowledge], &["acme".into()], 100)
        .await
        .unwrap()
        .is_empty());

    let touching = store
        .relations_touching(&scope, &[acme], &[], 100)
        .await
        .unwrap();
    assert_eq!(
        touching.len(),
        2,
        "acme is the target of one and the source of the other"
    );
    let first_chunk = touching
        .iter()
        .find(|(_, r)| r.relation_key == first.relation_key)
        .unwrap()
        .0;
    let in_chunk = store
        .relations_touching(&scope, &[], &[first_chunk], 100)
        .await
        .unwrap();
    assert_eq!(in_chunk.len(), 1);
    assert_eq!(in_chunk[0].1, *first);
    assert!(store
        .relations_touching(&foreign, &[acme], &[first_chunk], 100)
        .await
        .unwrap()
        .is_empty());

    // Not found: another kind, another collection, an unknown id.
    for (coll, id, kind) in [
        ("c", "doc", ItemKind::Memory),
        ("other", "doc", ItemKind::Knowledge),
        ("c", "nope", ItemKind::Knowledge),
    ] {
        let coll = collection(coll);
        assert_eq!(
            store
                .item_relations(&scope, &query(&coll, id, kind), moment(141))
                .await
                .unwrap(),
            None
        );
    }
}

async fn graphs_merge_by_key_and_stay_apart_by_collection_kind_and_organization<S: Store>(
    store: &S,
) {
    let scope = setup(store, "db_graph2", "org_graph2").await;
    let a = indexed(store, &scope, "c", "a", ItemKind::Knowledge, "g2").await;
    let b = indexed(store, &scope, "c", "b", ItemKind::Knowledge, "g2").await;
    let d = indexed(store, &scope, "d", "a", ItemKind::Knowledge, "g2").await;
    let m = indexed(store, &scope, "c", "m", ItemKind::Memory, "g2").await;
    for (claimed, names) in [
        (&a, ["Acme", "Ana"]),
        (&b, ["The Acme", "Bo"]),
        (&d, ["Acme", "Cy"]),
        (&m, ["Acme", "Di"]),
    ] {
        let g = graph(&names, &[(1, 0, "WORKS_FOR", 0)], &[]);
        assert!(store
            .complete_graph(claimed, &g, moment(150))
            .await
            .unwrap());
    }
    let acme = |coll: &str, id: &str, kind: ItemKind| {
        let coll = collection(coll);
        let id = id.to_owned();
        let scope = scope.clone();
        async move {
            store
                .item_relations(&scope, &query(&coll, &id, kind), moment(151))
                .await
                .unwrap()
                .unwrap()[0]
                .target
                .clone()
        }
    };
    let (in_a, in_b) = (
        acme("c", "a", ItemKind::Knowledge).await,
        acme("c", "b", ItemKind::Knowledge).await,
    );
    assert_eq!(in_a.entity_key, in_b.entity_key, "one entity per key");
    assert_eq!(in_a.name, "acme");
    assert_ne!(
        in_a.entity_key,
        acme("d", "a", ItemKind::Knowledge).await.entity_key,
        "collections keep their own entities"
    );
    assert_ne!(
        in_a.entity_key,
        acme("c", "m", ItemKind::Memory).await.entity_key,
        "knowledge and memory graphs are separate"
    );
    assert_eq!(store.graph_size(&scope).await.unwrap().entities, 7);

    // Another organization sees none of it, even naming the database.
    let foreign = DatabaseScope {
        org: engram_types::OrgId::from_trusted("org_graph2_other"),
        id: scope.id.clone(),
    };
    let coll = collection("c");
    assert_eq!(
        store
            .item_relations(
                &foreign,
                &query(&coll, "a", ItemKind::Knowledge),
                moment(151)
            )
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store.graph_size(&foreign).await.unwrap(),
        GraphSize::default()
    );
}

async fn a_graph_goes_with_its_chunks<S: Store>(store: &S) {
    let scope = setup(store, "db_graph3", "org_graph3").await;
    let a = indexed(store, &scope, "c", "a", ItemKind::Knowledge, "g3").await;
    let b = indexed(store, &scope, "c", "b", ItemKind::Knowledge, "g3").await;
    let shared = graph(&["Acme", "Ana"], &[(1, 0, "WORKS_FOR", 0)], &[]);
    let own = graph(&["Acme", "Bo"], &[(1, 0, "WORKS_FOR", 1)], &[]);
    assert!(store
        .complete_graph(&a, &shared, moment(160))
        .await
        .unwrap());
    assert!(store.complete_graph(&b, &own, moment(160)).await.unwrap());
    assert_eq!(
        store.graph_size(&scope).await.unwrap(),
        GraphSize {
            entities: 3,
            relations: 2
        }
    );
    let coll = collection("c");
    let deleted = store
        .delete_items(&scope, &coll, None, &["a".into()], moment(170))
        .await
        .unwrap();
    assert!(deleted[0].deleted);
    assert_eq!(
        store.graph_size(&scope).await.unwrap(),
        GraphSize {
            entities: 2,
            relations: 1
        },
        "the deleted item's relation and its only-mentioned entity are gone; Acme stays"
    );
    // Replacing b (a new version is queued) removes its chunks and with them its graph.
    store
        .enqueue_items(&scope, &[item("c", "b", "new text")], true, moment(180))
        .await
        .unwrap();
    assert_eq!(
        store.graph_size(&scope).await.unwrap(),
        GraphSize::default()
    );
    let listed = store
        .item_relations(&scope, &query(&coll, "b", ItemKind::Knowledge), moment(181))
        .await
        .unwrap();
    assert_eq!(listed, Some(Vec::new()));
}

async fn a_lost_claim_writes_no_graph_and_a_dead_one_is_claimed_for_its_graph<S: Store>(store: &S) {
    let scope = setup(store, "db_graph4", "org_graph4").await;
    let claimed = indexed(store, &scope, "c", "doc", ItemKind::Knowledge, "g4").await;
    let g = graph(&["Acme", "Ana"], &[(1, 0, "WORKS_FOR", 0)], &[]);
    let mut stranger = claimed.clone();
    stranger.lease_owner = "someone else".into();
    assert!(!store
        .complete_graph(&stranger, &g, moment(130))
        .await
        .unwrap());
    assert_eq!(
        store.graph_size(&scope).await.unwrap(),
        GraphSize::default()
    );

    // The worker died: once its lease (60 s from the claim at 110) runs out, the item is
    // claimed again, for its graph alone.
    assert!(store
        .claim_items(&ClaimRequest::new(
            "g4b",
            moment(60_000),
            Duration::from_secs(60),
            10
        ))
        .await
        .unwrap()
        .iter()
        .all(|c| c.database_id != scope.id));
    let again = claim_ours(store, &scope, "g4b", moment(60_200)).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].stage, Stage::Graph);
    assert!(store
        .extend_lease(&again[0], moment(120_000))
        .await
        .unwrap());
    assert!(!store
        .complete_graph(&claimed, &g, moment(60_300))
        .await
        .unwrap());
    assert!(store
        .complete_graph(&again[0], &g, moment(60_300))
        .await
        .unwrap());
    assert_eq!(store.graph_size(&scope).await.unwrap().relations, 1);
}

/// Links declared at ingestion (`relations.ids`) are found from either end between live items
/// of one kind and database, replaced with the item and gone with it; a client's graph rides
/// with the claim and survives a re-ingestion without one.
async fn declared_links_and_graphs_stay_with_their_items<S: Store>(store: &S) {
    let scope = setup(store, "db_links", "org_links").await;
    let other = setup(store, "db_links_other", "org_links_other").await;
    let linked = |coll: &str, id: &str, to: &[&str]| {
        let mut new = item(coll, id, "linked text");
        new.fields.relations = serde_json::json!({ "ids": to });
        new
    };
    let mut memory = linked("c", "mem", &["a"]);
    memory.kind = ItemKind::Memory;
    let mut with_graph = linked("c", "a", &["b", "b", "a", "missing"]);
    with_graph.graph_payload = Some(r#"{"relations":[]}"#.into());
    store
        .enqueue_items(
            &scope,
            &[
                with_graph,
                linked("d", "b", &["c"]),
                linked("c", "c", &[]),
                memory,
            ],
            true,
            moment(100),
        )
        .await
        .unwrap();
    store
        .enqueue_items(&other, &[linked("c", "x", &["a"])], true, moment(100))
        .await
        .unwrap();
    let ends = |links: &[crate::ItemLink]| {
        let mut ends: Vec<(String, String)> = links
            .iter()
            .map(|l| (l.from.id.clone(), l.to.id.clone()))
            .collect();
        ends.sort();
        ends
    };
    let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    let links = store
        .item_links(&scope, ItemKind::Knowledge, &["b".into()], 50, moment(101))
        .await
        .unwrap();
    assert_eq!(
        ends(&links),
        [pair("a", "b"), pair("b", "c")],
        "both ways, across collections, self and unknown ids left out"
    );
    assert_eq!(
        links
            .iter()
            .find(|l| l.from.id == "b")
            .unwrap()
            .to
            .collection
            .as_str(),
        "c"
    );
    assert_eq!(
        links.iter().find(|l| l.from.id == "a").unwrap().from.title,
        "title a"
    );
    let links = store
        .item_links(
            &scope,
            ItemKind::Memory,
            &["a".into(), "mem".into()],
            50,
            moment(101),
        )
        .await
        .unwrap();
    assert!(
        links.is_empty(),
        "a memory's link to knowledge leads nowhere: {links:?}"
    );
    assert!(store
        .item_links(
            &other,
            ItemKind::Knowledge,
            &["a".into(), "b".into()],
            50,
            moment(101)
        )
        .await
        .unwrap()
        .is_empty());
    let named = store
        .items_named(
            &scope,
            ItemKind::Knowledge,
            &["a".into(), "mem".into(), "x".into()],
            moment(101),
        )
        .await
        .unwrap();
    assert_eq!(
        named.iter().map(|n| n.id.as_str()).collect::<Vec<_>>(),
        ["a"]
    );

    // The claim carries the client's graph; a re-ingestion without one keeps it, and its new
    // links replace the old ones.
    let claimed = claim_ours(store, &scope, "links", moment(110)).await;
    let a = claimed.iter().find(|c| c.id == "a").unwrap();
    assert_eq!(a.graph_payload.as_deref(), Some(r#"{"relations":[]}"#));
    assert_eq!(
        claimed.iter().find(|c| c.id == "b").unwrap().graph_payload,
        None
    );
    store
        .enqueue_items(&scope, &[linked("c", "a", &["c"])], true, moment(200))
        .await
        .unwrap();
    let claimed = claim_ours(store, &scope, "links2", moment(210)).await;
    let a = claimed.iter().find(|c| c.id == "a").unwrap();
    assert_eq!(a.graph_payload.as_deref(), Some(r#"{"relations":[]}"#));
    let links = store
        .item_links(&scope, ItemKind::Knowledge, &["a".into()], 50, moment(211))
        .await
        .unwrap();
    assert_eq!(ends(&links), [pair("a", "c")]);

    // An expired item's graph is not inherited by the item that takes its id.
    let mut fleeting = linked("c", "fleeting", &[]);
    fleeting.graph_payload = Some(r#"{"relations":[]}"#.into());
    fleeting.fields.expires_at = Some(moment(215));
    store
        .enqueue_items(&scope, &[fleeting], true, moment(212))
        .await
        .unwrap();
    store
        .enqueue_items(&scope, &[linked("c", "fleeting", &[])], false, moment(216))
        .await
        .unwrap();
    let claimed = claim_ours(store, &scope, "links3", moment(217)).await;
    let fresh = claimed.iter().find(|c| c.id == "fleeting").unwrap();
    assert_eq!(fresh.graph_payload, None);

    // Deleting an item takes its links, and links to it lead nowhere.
    store
        .delete_items(&scope, &collection("c"), None, &["c".into()], moment(220))
        .await
        .unwrap();
    assert!(store
        .item_links(
            &scope,
            ItemKind::Knowledge,
            &["a".into(), "b".into()],
            50,
            moment(221)
        )
        .await
        .unwrap()
        .is_empty());

    // The entities mentioned in an item's chunks, by item.
    let held = indexed(store, &scope, "c", "e", ItemKind::Knowledge, "links3").await;
    let g = graph(&["Ana Ruiz", "Acme"], &[(0, 1, "WORKS_FOR", 0)], &[(1, 1)]);
    assert!(store.complete_graph(&held, &g, moment(300)).await.unwrap());
    let found = store
        .entities_in_items(&scope, &[held.item_key], 10)
        .await
        .unwrap();
    let mut names: Vec<&str> = found.iter().map(|(_, e)| e.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["acme", "ana ruiz"]);
    assert!(found.iter().all(|(key, _)| *key == held.item_key));
    assert!(store
        .entities_in_items(&other, &[held.item_key], 10)
        .await
        .unwrap()
        .is_empty());
}

/// Stores memory `id` of `user` (inferring) and completes it with `facts` at `at`.
async fn remembered<S: Store>(
    store: &S,
    scope: &DatabaseScope,
    id: &str,
    user: &str,
    facts: &[(&str, &str)],
    at: i64,
) {
    let mut new = item("c", id, "text");
    new.kind = ItemKind::Memory;
    new.fields.infer = true;
    new.fields.user_name = user.into();
    store
        .enqueue_items(scope, &[new], true, moment(at))
        .await
        .unwrap();
    let claimed = claim_ours(store, scope, "facts", moment(at + 1)).await;
    let claimed = claimed.into_iter().find(|c| c.id == id).unwrap();
    assert!(claimed.infer && claimed.user_name == user);
    let chunks = [chunk(&format!("{}-{id}", scope.id), 0, "memory text")];
    assert!(store
        .complete_item(&claimed, &chunks, AfterChunks::Graph, moment(at + 2))
        .await
        .unwrap());
    let mut graph = ItemGraph::empty(Origin::Extracted);
    graph.facts = facts
        .iter()
        .map(|(slot, value)| engram_graph::Fact {
            slot: (*slot).into(),
            value: (*value).into(),
            statement: format!("{user} {slot} {value}."),
        })
        .collect();
    assert!(store
        .complete_graph(&claimed, &graph, moment(at + 3))
        .await
        .unwrap());
}

/// Inference's facts: a fact the user's current facts hold is not written again, one in the
/// same slot with another value supersedes the old (kept, with when it stopped holding), the
/// statements written are the memory's `inferred_content`, and a fact goes with its memory.
async fn inferred_facts_supersede_and_stay_with_their_memory<S: Store>(store: &S) {
    let scope = setup(store, "db_facts", "org_facts").await;
    let other = setup(store, "db_facts_other", "org_facts_other").await;
    remembered(
        store,
        &scope,
        "m1",
        "ana",
        &[("lives_in", "lisbon"), ("taste:tea", "likes")],
        100,
    )
    .await;
    remembered(store, &scope, "b1", "bob", &[("lives_in", "oslo")], 110).await;
    remembered(
        store,
        &scope,
        "m2",
        "ana",
        &[("taste:tea", "likes"), ("lives_in", "porto")],
        200,
    )
    .await;
    let coll = collection("c");
    let all = store
        .user_facts(&scope, &coll, "ana", false, None, moment(300))
        .await
        .unwrap();
    let seen: Vec<(&str, &str, Option<UnixMs>)> = all
        .iter()
        .map(|f| (f.slot.as_str(), f.value.as_str(), f.valid_until))
        .collect();
    assert_eq!(
        seen,
        [
            ("lives_in", "lisbon", Some(moment(203))),
            ("taste:tea", "likes", None),
            ("taste:tea", "likes", None),
            ("lives_in", "porto", None),
        ],
        "a fact already held is stored again (it outlives the first memory), not superseded"
    );
    assert_eq!(all[0].valid_from, moment(103));
    let newest = store
        .user_facts(&scope, &coll, "ana", false, Some(2), moment(300))
        .await
        .unwrap();
    assert_eq!(newest, all[2..], "the newest two, still oldest first");
    let current = store
        .user_facts(&scope, &coll, "ana", true, None, moment(300))
        .await
        .unwrap();
    assert_eq!(current.len(), 3);
    let bob = store
        .user_facts(&scope, &coll, "bob", true, None, moment(300))
        .await
        .unwrap();
    assert_eq!(bob.len(), 1, "another user's facts are theirs");
    assert!(store
        .user_facts(&other, &coll, "ana", false, None, moment(300))
        .await
        .unwrap()
        .is_empty());

    let listed = store
        .list_items(
            &scope,
            &crate::ItemQuery {
                kind: Some(ItemKind::Memory),
                ids: vec!["m2".into()],
                page: 1,
                page_size: 10,
                ..crate::ItemQuery::default()
            },
            moment(300),
        )
        .await
        .unwrap();
    assert_eq!(
        listed.items[0].fields.inferred_content,
        "ana lives_in porto."
    );

    // A memory stored again starts over, and what it superseded holds again; deleting one
    // takes its facts.
    let mut again = item("c", "m2", "text");
    again.kind = ItemKind::Memory;
    again.fields.user_name = "ana".into();
    store
        .enqueue_items(&scope, &[again], true, moment(400))
        .await
        .unwrap();
    let current = store
        .user_facts(&scope, &coll, "ana", true, None, moment(300))
        .await
        .unwrap();
    let current: Vec<&str> = current.iter().map(|f| f.slot.as_str()).collect();
    assert_eq!(current, ["lives_in", "taste:tea"]);
    store
        .delete_items(&scope, &coll, None, &["m1".into()], moment(410))
        .await
        .unwrap();
    assert!(store
        .user_facts(&scope, &coll, "ana", false, None, moment(300))
        .await
        .unwrap()
        .is_empty());
}

/// A worker's batch in one `complete_items`: an item with a graph made at once is completed
/// with it (never seen in `graph_creation`), one without a graph is completed, one to wait for
/// is left in `graph_creation`; an item replaced meanwhile gets false and nothing of it is
/// written, while the others are.
async fn a_batch_completes_at_once_with_its_graphs_and_skips_a_lost_claim<S: Store>(store: &S) {
    let scope = setup(store, "db_graph7", "org_graph7").await;
    let ids = ["with", "plain", "later", "lost"];
    let items: Vec<_> = ids.iter().map(|id| item("c", id, "text")).collect();
    store
        .enqueue_items(&scope, &items, true, moment(100))
        .await
        .unwrap();
    let claimed = claim_ours(store, &scope, "g7", moment(110)).await;
    let held = |id: &str| claimed.iter().find(|c| c.id == id).unwrap();
    store
        .enqueue_items(&scope, &[item("c", "lost", "new text")], true, moment(115))
        .await
        .unwrap();
    let chunks: Vec<Vec<_>> = ids
        .iter()
        .map(|id| {
            vec![
                chunk(&format!("g7-{id}-0"), 0, "first passage"),
                chunk(&format!("g7-{id}-1"), 1, "second passage"),
            ]
        })
        .collect();
    let g = graph(
        &["Ana Ruiz", "Acme", "Lisbon"],
        &[(0, 1, "WORKS_FOR", 0), (1, 2, "BASED_IN", 1)],
        &[],
    );
    let thens = [
        AfterChunks::WithGraph(&g),
        AfterChunks::Completed,
        AfterChunks::Graph,
        AfterChunks::WithGraph(&g),
    ];
    let batch: Vec<Completion<'_>> = ids
        .iter()
        .zip(&chunks)
        .zip(thens)
        .map(|((id, chunks), then)| Completion {
            item: held(id),
            chunks,
            then,
        })
        .collect();
    let done = store.complete_items(&batch, moment(120)).await.unwrap();
    assert_eq!(done, [true, true, true, false]);

    let coll = collection("c");
    let ids: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
    let statuses = store
        .item_statuses(&scope, &coll, &ids, moment(121))
        .await
        .unwrap();
    let status = |id: &str| statuses.iter().find(|s| s.id == id).unwrap().status;
    assert_eq!(status("with"), IndexingStatus::Completed);
    assert_eq!(status("plain"), IndexingStatus::Completed);
    assert_eq!(status("later"), IndexingStatus::GraphCreation);
    assert_eq!(
        status("lost"),
        IndexingStatus::Queued,
        "the new version waits"
    );
    assert_eq!(
        store.graph_size(&scope).await.unwrap(),
        GraphSize {
            entities: 3,
            relations: 2
        },
        "only the current item's graph is written"
    );
    let listed = store
        .item_relations(
            &scope,
            &query(&coll, "with", ItemKind::Knowledge),
            moment(121),
        )
        .await
        .unwrap()
        .unwrap();
    let passages: Vec<&str> = listed.iter().map(|r| r.chunk_id.as_str()).collect();
    assert_eq!(
        passages,
        ["g7-with-0", "g7-with-1"],
        "each relation on its passage's chunk"
    );
    let searchable = store
        .filtered_chunk_keys(&scope, &crate::ChunkFilter::default(), 10, moment(121))
        .await
        .unwrap();
    assert_eq!(
        searchable.len(),
        6,
        "the lost item's chunks are not written"
    );
    assert!(store
        .complete_items(&[], moment(122))
        .await
        .unwrap()
        .is_empty());
}
