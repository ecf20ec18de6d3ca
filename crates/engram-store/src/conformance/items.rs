//! Conformance cases for items, chunks and the work queue.

use std::time::Duration;

use super::{moment, new_db};
use crate::{
    ChunkKey, ChunkScan, ClaimRequest, DatabaseScope, EnqueueOutcome, FilterValue, ItemFailure,
    ItemFields, ItemOrigin, ItemQuery, NewChunk, NewItem, SourceField, Store, StoreError,
};
use engram_types::{CollectionName, IndexingStatus, ItemKind, OrgId, UnixMs};
use serde_json::json;

pub(super) async fn run_all<S: Store>(store: &S) {
    enqueue_claim_complete_and_upsert(store).await;
    leases_expire_and_stale_claims_cannot_write(store).await;
    failures_retry_then_error(store).await;
    deletion_and_isolation(store).await;
    listing_filters_and_pages(store).await;
    expired_items_vanish_and_are_purged(store).await;
    the_chunk_feed_logs_every_change(store).await;
    a_memory_continuing_a_conversation_gets_the_one_before(store).await;
    chunks_are_read_by_item_and_by_id_within_their_database(store).await;
    a_collection_is_deleted_with_everything_in_it(store).await;
    the_queue_takes_turns_and_holds_each_organization_to_its_share(store).await;
    claims_and_deletes_racing_both_succeed(store).await;
}

/// Indexing claims and deletes of the same items, run side by side, all succeed: their locks
/// are taken in one order (on PostgreSQL, a claim that locked the item before the database's
/// row deadlocked with a delete holding the row while it waited for the item, and the delete
/// answered 500).
async fn claims_and_deletes_racing_both_succeed<S: Store>(store: &S) {
    let scope = setup(store, "db_race", "conf-race").await;
    let now = moment(9_000_000);
    // Other cases' runnable items are leased first, so every claim below takes one of ours.
    claim_ours(store, &scope, "drain", now).await;
    let ids: Vec<String> = (0..40).map(|n| format!("r{n}")).collect();
    let items: Vec<NewItem> = ids.iter().map(|id| item("c", id, "text")).collect();
    store
        .enqueue_items(&scope, &items, true, now)
        .await
        .unwrap();
    let deletes = async {
        for id in &ids {
            let deleted = store
                .delete_items(
                    &scope,
                    &collection("c"),
                    None,
                    std::slice::from_ref(id),
                    now,
                )
                .await
                .unwrap();
            assert!(deleted[0].deleted, "{id}");
        }
    };
    tokio::join!(claim_one_by_one(store, ids.len(), now), deletes);
    let left = store
        .item_statuses(&scope, &collection("c"), &ids, now)
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");

    // Replacing items while they are claimed: every replacement is taken, none fails.
    store
        .enqueue_items(&scope, &items, true, now)
        .await
        .unwrap();
    let replaces = async {
        for id in &ids {
            let replaced = store
                .enqueue_items(&scope, &[item("c", id, "new text")], true, now)
                .await
                .unwrap();
            assert_eq!(replaced.len(), 1, "{id}");
        }
    };
    tokio::join!(claim_one_by_one(store, ids.len(), now), replaces);
    let statuses = store
        .item_statuses(&scope, &collection("c"), &ids, now)
        .await
        .unwrap();
    assert_eq!(statuses.len(), ids.len(), "{statuses:?}");
}

/// Claims `count` items one at a time, each claim its own transaction.
async fn claim_one_by_one<S: Store>(store: &S, count: usize, now: UnixMs) {
    for _ in 0..count {
        let request = ClaimRequest::new("racer", now, Duration::from_millis(60_000), 1);
        store.claim_items(&request).await.unwrap();
    }
}

/// Deleting a collection removes its items, chunks and payloads and (when asked) the collection
/// itself; other collections and other databases are untouched.
async fn a_collection_is_deleted_with_everything_in_it<S: Store>(store: &S) {
    let scope = setup(store, "db_coll_del", "conf-coll-del").await;
    let other = setup(store, "db_coll_keep", "conf-coll-keep").await;
    for (scope, coll, id) in [
        (&scope, "gone", "g1"),
        (&scope, "gone", "g2"),
        (&scope, "kept", "k1"),
        (&other, "gone", "o1"),
    ] {
        store
            .enqueue_items(scope, &[item(coll, id, "text")], true, moment(70))
            .await
            .unwrap();
    }
    let claimed = store
        .claim_items(&ClaimRequest::new(
            "w",
            moment(71),
            Duration::from_millis(60_000),
            1000,
        ))
        .await
        .unwrap();
    for claimed in claimed
        .iter()
        .filter(|c| c.database_id == scope.id || c.database_id == other.id)
    {
        let chunk = chunk(&format!("{}-c", claimed.id), 0, "text");
        assert!(store
            .complete_item(claimed, &[chunk], crate::AfterChunks::Completed, moment(72))
            .await
            .unwrap());
    }
    assert_eq!(
        store
            .delete_collection(&scope, &collection("gone"), true)
            .await
            .unwrap(),
        Some(2)
    );
    let names = store.list_collections(&scope).await.unwrap();
    assert!(!names.contains(&collection("gone")), "{names:?}");
    assert!(names.contains(&collection("kept")));
    assert_eq!(
        store
            .counts(&scope, moment(73))
            .await
            .unwrap()
            .knowledge_chunks,
        1
    );
    assert_eq!(
        store
            .counts(&other, moment(73))
            .await
            .unwrap()
            .knowledge_chunks,
        1,
        "the same name in another database is untouched"
    );
    // One chunk of four bytes of text and a vector of four f32s: at least those bytes.
    let held = store.counts(&scope, moment(73)).await.unwrap().stored_bytes;
    assert!((4 + 16..200).contains(&held), "{held}");
    assert_eq!(
        store
            .delete_collection(&scope, &collection("never"), true)
            .await
            .unwrap(),
        None
    );
    // Kept in the list when not forgotten (the default collection), emptied all the same.
    assert_eq!(
        store
            .delete_collection(&scope, &collection("kept"), false)
            .await
            .unwrap(),
        Some(1)
    );
    assert!(store
        .list_collections(&scope)
        .await
        .unwrap()
        .contains(&collection("kept")));
    let emptied = store.counts(&scope, moment(73)).await.unwrap();
    assert_eq!((emptied.knowledge_chunks, emptied.stored_bytes), (0, 0));
    assert_eq!(
        store.counts(&other, moment(73)).await.unwrap().stored_bytes,
        held,
        "another database's bytes are its own"
    );
}

/// A direct read of chunks (`GET /context/chunks`): by item, in position order, or by chunk id;
/// never another database's chunks, never a deleted item's.
async fn chunks_are_read_by_item_and_by_id_within_their_database<S: Store>(store: &S) {
    use crate::{ChunkFilter, ChunkSelection};
    let ours = setup(store, "db_chunks_a", "conf-chunks-a").await;
    let theirs = setup(store, "db_chunks_b", "conf-chunks-b").await;
    for (scope, prefix) in [(&ours, "a"), (&theirs, "b")] {
        store
            .enqueue_items(scope, &[item("c", "doc", "text")], true, moment(50))
            .await
            .unwrap();
        let claimed = claim_ours(store, scope, "w", moment(51)).await;
        // Written out of order: positions, not insertion, give the order.
        let chunks = [
            chunk(&format!("{prefix}-2"), 2, "third"),
            chunk(&format!("{prefix}-0"), 0, "first"),
            crate::NewChunk {
                layout: page_layout(),
                ..chunk(&format!("{prefix}-1"), 1, "second")
            },
        ];
        assert!(store
            .complete_item(
                &claimed[0],
                &chunks,
                crate::AfterChunks::Completed,
                moment(52)
            )
            .await
            .unwrap());
    }
    let all = ChunkFilter::default();
    let (ours_ref, all_ref) = (&ours, &all);
    let read = |which| async move {
        let (ours, all) = (ours_ref, all_ref);
        let keys = store
            .selected_chunk_keys(ours, all, which, 100, moment(60))
            .await
            .unwrap();
        let hits = store
            .fetch_chunks(ours, all, &keys, moment(60))
            .await
            .unwrap();
        keys.iter()
            .map(|k| {
                hits.iter()
                    .find(|h| h.chunk_key == *k)
                    .map(|h| h.content.clone())
                    .unwrap()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        read(ChunkSelection::Item("doc")).await,
        ["first", "second", "third"]
    );
    // A chunk's layout (page, sheet, heading path) reads back as it was written.
    let keys = store
        .selected_chunk_keys(&ours, &all, ChunkSelection::Item("doc"), 100, moment(60))
        .await
        .unwrap();
    let hits = store
        .fetch_chunks(&ours, &all, &keys, moment(60))
        .await
        .unwrap();
    let layouts: Vec<&serde_json::Value> = hits.iter().map(|h| &h.layout).collect();
    assert!(layouts.contains(&&page_layout()), "{layouts:?}");
    let ids = ["a-2".to_owned(), "b-0".to_owned(), "a-0".to_owned()];
    assert_eq!(
        read(ChunkSelection::Ids(&ids)).await,
        ["first", "third"],
        "another database's chunk id is not found"
    );
    let first_only = store
        .selected_chunk_keys(&ours, &all, ChunkSelection::Item("doc"), 1, moment(60))
        .await
        .unwrap();
    assert_eq!(first_only.len(), 1);
    store
        .delete_items(
            &ours,
            &collection("c"),
            None,
            &["doc".to_owned()],
            moment(61),
        )
        .await
        .unwrap();
    assert!(read(ChunkSelection::Item("doc")).await.is_empty());
    assert!(read(ChunkSelection::Ids(&ids)).await.is_empty());
}

/// A layout as parsing gives it: page, sheet, heading path and rows.
fn page_layout() -> serde_json::Value {
    serde_json::json!({
        "page": 3,
        "sheet": "Q3 — résumé",
        "heading_path": ["Intro", "Scope", "数据"],
        "rows": [4, 9]
    })
}

/// Work is handed out in turns (organization served longest ago, then its database served
/// longest ago, then that database's oldest item), and an organization at its share of the
/// workers gets nothing more until one of its items ends. Runs last: it first takes every
/// runnable item the earlier cases left.
async fn the_queue_takes_turns_and_holds_each_organization_to_its_share<S: Store>(store: &S) {
    let now = 10_000_000;
    store
        .claim_items(&ClaimRequest::new(
            "drain",
            moment(now),
            Duration::from_millis(1_000_000_000),
            100_000,
        ))
        .await
        .unwrap();
    let a1 = setup(store, "db_fair_a1", "conf-fair-a").await;
    let a2 = setup(store, "db_fair_a2", "conf-fair-a").await;
    let b1 = setup(store, "db_fair_b1", "conf-fair-b").await;
    // Org A floods first (five items in a1, two in a2); org B sends one item after.
    for (scope, ids) in [
        (&a1, &["a1-1", "a1-2", "a1-3", "a1-4", "a1-5"][..]),
        (&a2, &["a2-1", "a2-2"]),
        (&b1, &["b1-1"]),
    ] {
        let items: Vec<_> = ids.iter().map(|id| item("c", id, "text")).collect();
        store
            .enqueue_items(scope, &items, true, moment(now))
            .await
            .unwrap();
    }
    let mut order = Vec::new();
    loop {
        let claimed = store
            .claim_items(&ClaimRequest::new(
                "w",
                moment(now),
                Duration::from_millis(60_000),
                1,
            ))
            .await
            .unwrap();
        let Some(one) = claimed.first() else { break };
        order.push(one.id.clone());
    }
    assert_eq!(
        order,
        ["a1-1", "b1-1", "a2-1", "a1-2", "a2-2", "a1-3", "a1-4", "a1-5"],
        "B's one item comes second, A's databases alternate"
    );

    // A share of 2: a flooding organization occupies two workers, the third is the others'.
    let c = setup(store, "db_fair_c", "conf-fair-c").await;
    let d = setup(store, "db_fair_d", "conf-fair-d").await;
    let flood: Vec<_> = (0..6)
        .map(|i| item("c", &format!("c-{i}"), "text"))
        .collect();
    store
        .enqueue_items(&c, &flood, true, moment(now))
        .await
        .unwrap();
    let share = |owner, at| ClaimRequest {
        org_share: 2,
        ..ClaimRequest::new(owner, at, Duration::from_millis(60_000), 1)
    };
    let w1 = store.claim_items(&share("w1", moment(now))).await.unwrap();
    let w2 = store.claim_items(&share("w2", moment(now))).await.unwrap();
    assert_eq!((w1.len(), w2.len()), (1, 1));
    assert!(
        store
            .claim_items(&share("w3", moment(now)))
            .await
            .unwrap()
            .is_empty(),
        "C already occupies two workers"
    );
    let more = store
        .claim_items(&ClaimRequest {
            limit: 2,
            ..share("w1", moment(now))
        })
        .await
        .unwrap();
    assert_eq!(more.len(), 2, "a worker of C may take more of C: {more:?}");
    store
        .enqueue_items(&d, &[item("c", "d-1", "text")], true, moment(now))
        .await
        .unwrap();
    let other = store.claim_items(&share("w3", moment(now))).await.unwrap();
    assert_eq!(other.len(), 1);
    assert_eq!(
        other[0].id, "d-1",
        "the other organization is not held back"
    );
    // C's items in w2's hands end: a third worker may take C's next one.
    assert!(store
        .complete_item(
            &w2[0],
            &[chunk("c-done", 0, "text")],
            crate::AfterChunks::Completed,
            moment(now)
        )
        .await
        .unwrap());
    let next = store.claim_items(&share("w3", moment(now))).await.unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].id, "c-4");
    // Leases that expired no longer count against the share (every earlier claim of this case
    // expires too, and is runnable again).
    let later = store
        .claim_items(&ClaimRequest {
            limit: 10,
            ..share("w4", moment(now + 60_001))
        })
        .await
        .unwrap();
    let of_c = later.iter().filter(|i| i.database_id == c.id).count();
    assert!(of_c >= 4, "{later:?}");

    // Light batches: items after the first join only while all are light.
    let now = now + 1_000_000;
    store
        .claim_items(&ClaimRequest::new(
            "drain",
            moment(now),
            Duration::from_millis(1_000_000_000),
            100_000,
        ))
        .await
        .unwrap();
    let e = setup(store, "db_fair_e", "conf-fair-e").await;
    let long = "x".repeat(100);
    let queue = [
        item("c", "heavy", &long),
        item("c", "l1", "tiny"),
        item("c", "l2", "tiny"),
        item("c", "heavy-2", &long),
        item("c", "l3", "tiny"),
    ];
    store
        .enqueue_items(&e, &queue, true, moment(now))
        .await
        .unwrap();
    let light = || ClaimRequest {
        light_bytes: Some(50),
        ..ClaimRequest::new("w", moment(now), Duration::from_millis(60_000), 10)
    };
    let ids = |claimed: Vec<crate::ClaimedItem>| -> Vec<String> {
        claimed.into_iter().map(|c| c.id).collect()
    };
    assert_eq!(ids(store.claim_items(&light()).await.unwrap()), ["heavy"]);
    assert_eq!(
        ids(store.claim_items(&light()).await.unwrap()),
        ["l1", "l2", "l3"]
    );
    assert_eq!(ids(store.claim_items(&light()).await.unwrap()), ["heavy-2"]);
}

async fn a_memory_continuing_a_conversation_gets_the_one_before<S: Store>(store: &S) {
    let scope = setup(store, "db_items_8", "conf-items-8").await;
    let memory = |coll: &str, id: &str, user: &str, title: &str, text: &str| {
        let mut m = item(coll, id, text);
        m.kind = ItemKind::Memory;
        m.origin = ItemOrigin::Memory;
        m.fields.user_name = user.into();
        m.fields.title = title.into();
        m
    };
    let mut expired = memory("c", "m0", "ann", "Session 1", "gone by now");
    expired.fields.expires_at = Some(moment(5));
    let items = [
        expired,
        memory("c", "m1", "ann", "Session 1", "Did you go to Paris?"),
        memory("c", "m2", "ann", "Session 1", "Yes, in June."),
        memory("c", "m3", "bob", "Session 1", "another user"),
        memory("c", "m4", "ann", "Session 2", "a new session"),
        memory("d", "m5", "ann", "Session 1", "another collection"),
        memory("c", "m6", "ann", "", "untitled"),
        memory("c", "m7", "ann", "", "untitled too"),
        item("c", "k1", "knowledge is never continued"),
    ];
    store
        .enqueue_items(&scope, &items, true, moment(0))
        .await
        .unwrap();
    let claimed = claim_ours(store, &scope, "w", moment(10)).await;
    let mut found = std::collections::HashMap::new();
    for c in &claimed {
        found.insert(
            c.id.clone(),
            store.preceding_memory(c, moment(10)).await.unwrap(),
        );
    }
    let before = |id: &str| found.get(id).cloned().flatten();
    assert_eq!(before("m1"), None, "the memory before m1 has expired");
    assert_eq!(before("m2").as_deref(), Some("Did you go to Paris?"));
    assert_eq!(before("m3"), None, "another user's conversation");
    assert_eq!(before("m4"), None, "another title is another conversation");
    assert_eq!(before("m5"), None, "another collection");
    assert_eq!(
        before("m7"),
        None,
        "untitled memories are not a conversation"
    );
    assert_eq!(before("k1"), None, "knowledge");
}

/// Every write to chunks reaches the feed, pages follow the sequence, rows come back exactly,
/// and a trimmed sequence number is never handed out again.
async fn the_chunk_feed_logs_every_change<S: Store>(store: &S) {
    let scope = setup(store, "db_items_7", "conf-items-7").await;
    let head = store.chunk_feed_head().await.unwrap();
    let mut short = item("v", "short", "x");
    short.kind = ItemKind::Memory;
    short.origin = ItemOrigin::Memory;
    store
        .enqueue_items(&scope, &[item("v", "long", "y"), short], true, moment(0))
        .await
        .unwrap();
    for c in claim_ours(store, &scope, "w", moment(10)).await {
        let vector = NewChunk {
            embedding: vec![0.25, -1.5, 3.0],
            context: format!("before {}", c.id),
            ..chunk(&format!("{}-v", c.id), 0, &format!("text of {}", c.id))
        };
        assert!(store
            .complete_item(&c, &[vector], crate::AfterChunks::Completed, moment(20))
            .await
            .unwrap());
    }
    let page = store.chunk_changes(head, 10_000).await.unwrap();
    assert!(page.through > head);
    assert!(page.gone.is_empty());
    assert_eq!(page.removed.len(), 2, "{page:?}");
    assert!(page.removed.iter().all(|(db, _)| *db == scope.id));
    let mut current = page.current.clone();
    current.sort_by_key(|c| c.chunk_key);
    let keys: Vec<ChunkKey> = current.iter().map(|c| c.chunk_key).collect();
    assert_eq!(
        current[0].embedding,
        vec![0.25, -1.5, 3.0],
        "vectors round-trip exactly"
    );
    assert_eq!(
        (current[0].content.as_str(), current[0].context.as_str()),
        ("text of long", "before long")
    );
    assert_eq!(
        (current[1].kind, current[1].collection.as_str()),
        (ItemKind::Memory, "v")
    );
    let first = store.chunk_changes(head, 1).await.unwrap();
    assert_eq!(first.removed.len(), 1, "pages hold at most `limit` changes");
    let rest = store.chunk_changes(first.through, 10_000).await.unwrap();
    assert_eq!(rest.through, page.through);
    assert_eq!(first.removed.len() + rest.removed.len(), 2);
    let empty = store.chunk_changes(page.through, 10).await.unwrap();
    assert!(empty.is_empty() && empty.through == page.through);

    let ours = |all: Vec<crate::IndexedChunk>| {
        all.into_iter()
            .filter(|c| c.database_id == scope.id)
            .map(|c| c.chunk_key)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ours(
            store
                .scan_chunks(ChunkKey(0), 100_000, ChunkScan::Full)
                .await
                .unwrap()
        ),
        keys
    );
    assert_eq!(
        ours(
            store
                .scan_chunks(keys[0], 100_000, ChunkScan::Full)
                .await
                .unwrap()
        ),
        [keys[1]]
    );

    // A scan of vectors reads the scope and vector alone.
    let vectors: Vec<crate::IndexedChunk> = store
        .scan_chunks(ChunkKey(0), 100_000, ChunkScan::Vectors)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.database_id == scope.id)
        .collect();
    assert_eq!(vectors.len(), 2);
    assert_eq!(
        (vectors[0].chunk_key, &vectors[0].embedding, vectors[0].kind),
        (current[0].chunk_key, &current[0].embedding, current[0].kind)
    );
    assert!(vectors
        .iter()
        .all(|c| c.content.is_empty() && c.context.is_empty() && c.title.is_empty()));

    // A delete and an upsert are changes without a current row.
    store
        .delete_items(&scope, &collection("v"), None, &["long".into()], moment(30))
        .await
        .unwrap();
    store
        .enqueue_items(&scope, &[item("v", "short", "again")], true, moment(31))
        .await
        .unwrap();
    let deletions = store.chunk_changes(page.through, 100).await.unwrap();
    let mut removed: Vec<ChunkKey> = deletions.removed.iter().map(|r| r.1).collect();
    removed.sort_unstable();
    assert_eq!(removed, keys);
    assert!(deletions.current.is_empty());

    // Trimmed changes are gone, and their numbers are never reused. A reader coming back
    // behind the trimmed part (an index saved before it) is told so; the feed keeps its name.
    let feed = store.chunk_feed_id().await.unwrap();
    assert!(!feed.is_empty());
    store.trim_chunk_changes(deletions.through).await.unwrap();
    let behind = store.feed_reader_at("conformance-saved", head).await;
    assert!(
        matches!(behind, Err(crate::StoreError::FeedBehind(_))),
        "{behind:?}"
    );
    assert!(store
        .feed_reader_at("conformance-saved", deletions.through)
        .await
        .is_ok());
    assert_eq!(store.chunk_feed_id().await.unwrap(), feed);
    assert!(store.chunk_changes(head, 100).await.unwrap().is_empty());
    assert_eq!(store.chunk_feed_head().await.unwrap(), deletions.through);
    let again = claim_ours(store, &scope, "w", moment(40)).await;
    assert!(store
        .complete_item(
            &again[0],
            &[chunk("short-2", 0, "again")],
            crate::AfterChunks::Completed,
            moment(41)
        )
        .await
        .unwrap());
    let after_trim = store.chunk_changes(deletions.through, 100).await.unwrap();
    assert_eq!(after_trim.current.len(), 1);
    assert!(after_trim.through > deletions.through);

    // A deleted database leaves the scan at once; once purged, the feed says it is gone.
    store.schedule_deletion(&scope, moment(50)).await.unwrap();
    assert!(ours(
        store
            .scan_chunks(ChunkKey(0), 100_000, ChunkScan::Full)
            .await
            .unwrap()
    )
    .is_empty());
    store.purge_database(&scope.id).await.unwrap();
    let purged = store.chunk_changes(after_trim.through, 100).await.unwrap();
    assert_eq!(purged.gone, std::slice::from_ref(&scope.id));
    assert!(purged.current.is_empty());
}

pub fn collection(name: &str) -> CollectionName {
    CollectionName::from_trusted(name)
}

pub fn item(coll: &str, id: &str, text: &str) -> NewItem {
    NewItem {
        collection: collection(coll),
        id: id.into(),
        kind: ItemKind::Knowledge,
        origin: ItemOrigin::App,
        fields: ItemFields {
            title: format!("title {id}"),
            text: Some(text.into()),
            metadata: json!({}),
            additional_metadata: json!({}),
            attachments: json!([]),
            relations: json!({}),
            ..ItemFields::default()
        },
        payload: None,
        graph_payload: None,
    }
}

pub fn chunk(id: &str, position: u32, text: &str) -> NewChunk {
    NewChunk {
        chunk_id: id.into(),
        position,
        content: text.into(),
        context: String::new(),
        layout: json!({}),
        embedding: vec![0.5; 4],
    }
}

pub async fn setup<S: Store + ?Sized>(store: &S, db: &str, org: &str) -> DatabaseScope {
    store
        .create_database(&new_db(db, org, db))
        .await
        .unwrap()
        .scope()
}

/// Claims every runnable item (the queue is shared by every case, so claim only ours).
pub async fn claim_ours<S: Store + ?Sized>(
    store: &S,
    scope: &DatabaseScope,
    owner: &str,
    now: UnixMs,
) -> Vec<crate::ClaimedItem> {
    let claimed = store
        .claim_items(&ClaimRequest::new(
            owner,
            now,
            Duration::from_millis(60_000),
            1000,
        ))
        .await
        .unwrap();
    claimed
        .into_iter()
        .filter(|c| c.database_id == scope.id)
        .collect()
}

async fn status_of<S: Store>(
    store: &S,
    scope: &DatabaseScope,
    coll: &str,
    id: &str,
    now: UnixMs,
) -> Option<IndexingStatus> {
    let statuses = store
        .item_statuses(scope, &collection(coll), &[id.to_owned()], now)
        .await
        .unwrap();
    statuses.first().map(|s| s.status)
}

async fn enqueue_claim_complete_and_upsert<S: Store>(store: &S) {
    let scope = setup(store, "db_items_1", "conf-items-1").await;
    let out = store
        .enqueue_items(
            &scope,
            &[item("c", "a", "alpha"), item("c", "b", "beta")],
            true,
            moment(100),
        )
        .await
        .unwrap();
    assert_eq!(out, [EnqueueOutcome::Queued, EnqueueOutcome::Queued]);
    assert_eq!(
        status_of(store, &scope, "c", "a", moment(100)).await,
        Some(IndexingStatus::Queued)
    );
    assert_eq!(
        status_of(store, &scope, "other", "a", moment(100)).await,
        None,
        "ids are per collection"
    );
    let collections = store.list_collections(&scope).await.unwrap();
    assert!(
        collections.contains(&collection("c")),
        "collections appear on first use"
    );

    let claimed = claim_ours(store, &scope, "w1", moment(200)).await;
    assert_eq!(claimed.len(), 2);
    assert_eq!(claimed[0].text.as_deref(), Some("alpha"));
    assert_eq!(claimed[0].attempts, 1);
    assert_eq!(claimed[0].org, scope.org);
    assert_eq!(
        status_of(store, &scope, "c", "a", moment(200)).await,
        Some(IndexingStatus::Processing)
    );
    assert!(
        claim_ours(store, &scope, "w2", moment(201))
            .await
            .is_empty(),
        "leased items are not claimed twice"
    );

    let a = &claimed[0];
    assert!(store
        .complete_item(
            a,
            &[chunk("a-0", 0, "alpha"), chunk("a-1", 1, "more")],
            crate::AfterChunks::Completed,
            moment(300)
        )
        .await
        .unwrap());
    assert!(
        !store
            .complete_item(
                a,
                &[chunk("a-9", 0, "again")],
                crate::AfterChunks::Completed,
                moment(301)
            )
            .await
            .unwrap(),
        "completing twice does nothing"
    );
    assert_eq!(
        status_of(store, &scope, "c", "a", moment(300)).await,
        Some(IndexingStatus::Completed)
    );
    assert_eq!(
        store
            .counts(&scope, moment(0))
            .await
            .unwrap()
            .knowledge_chunks,
        2
    );

    // Upsert replaces: old chunks go at once, the item is queued again, and the claim on the
    // old version of `b` can no longer write.
    let out = store
        .enqueue_items(
            &scope,
            &[item("c", "a", "alpha v2"), item("c", "b", "beta v2")],
            true,
            moment(400),
        )
        .await
        .unwrap();
    assert_eq!(out, [EnqueueOutcome::Queued, EnqueueOutcome::Queued]);
    assert_eq!(
        store
            .counts(&scope, moment(0))
            .await
            .unwrap()
            .knowledge_chunks,
        0
    );
    assert!(!store
        .complete_item(
            &claimed[1],
            &[chunk("b-0", 0, "stale")],
            crate::AfterChunks::Completed,
            moment(401)
        )
        .await
        .unwrap());
    assert_eq!(
        store
            .counts(&scope, moment(0))
            .await
            .unwrap()
            .knowledge_chunks,
        0,
        "a stale claim wrote nothing"
    );
    let out = store
        .enqueue_items(&scope, &[item("c", "a", "ignored")], false, moment(402))
        .await
        .unwrap();
    assert_eq!(out, [EnqueueOutcome::Exists]);
    let again = claim_ours(store, &scope, "w3", moment(500)).await;
    let texts: Vec<_> = again
        .iter()
        .map(|c| c.text.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        texts,
        ["alpha v2", "beta v2"],
        "the upserted content is what gets indexed"
    );
    for c in &again {
        assert!(store
            .complete_item(
                c,
                &[chunk(&format!("{}-v2", c.id), 0, "v2")],
                crate::AfterChunks::Completed,
                moment(600)
            )
            .await
            .unwrap());
    }
    assert_eq!(
        store
            .counts(&scope, moment(0))
            .await
            .unwrap()
            .knowledge_chunks,
        2
    );
}

async fn leases_expire_and_stale_claims_cannot_write<S: Store>(store: &S) {
    let scope = setup(store, "db_items_2", "conf-items-2").await;
    store
        .enqueue_items(&scope, &[item("c", "x", "text")], true, moment(0))
        .await
        .unwrap();
    let first = claim_ours(store, &scope, "crashed", moment(1_000)).await;
    assert_eq!(first.len(), 1);
    // The lease (60 s) runs out: another worker takes the item over.
    let second = claim_ours(store, &scope, "healthy", moment(62_000)).await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].attempts, 2);
    assert!(!store
        .complete_item(
            &first[0],
            &[chunk("x-old", 0, "old")],
            crate::AfterChunks::Completed,
            moment(62_001)
        )
        .await
        .unwrap());
    assert!(store
        .complete_item(
            &second[0],
            &[chunk("x-new", 0, "new")],
            crate::AfterChunks::Completed,
            moment(62_002)
        )
        .await
        .unwrap());
    assert_eq!(
        store
            .counts(&scope, moment(0))
            .await
            .unwrap()
            .knowledge_chunks,
        1,
        "indexed once"
    );

    // A heartbeat keeps a long item's lease; another owner's heartbeat extends nothing.
    store
        .enqueue_items(&scope, &[item("c", "slow", "text")], true, moment(100_000))
        .await
        .unwrap();
    let slow = claim_ours(store, &scope, "slow-worker", moment(100_000)).await;
    assert_eq!(slow.len(), 1);
    assert!(store.extend_lease(&slow[0], moment(400_000)).await.unwrap());
    assert!(
        claim_ours(store, &scope, "thief", moment(200_000))
            .await
            .is_empty(),
        "the extended lease still holds"
    );
    let mut foreign = slow[0].clone();
    foreign.lease_owner = "thief".into();
    assert!(!store.extend_lease(&foreign, moment(900_000)).await.unwrap());
    let taken = claim_ours(store, &scope, "thief", moment(400_001)).await;
    assert_eq!(taken.len(), 1, "only the holder extends its lease");
    assert!(
        !store.extend_lease(&slow[0], moment(900_000)).await.unwrap(),
        "the first holder learns it lost the item"
    );
    // Deleted or replaced: the holder's heartbeat says so.
    assert!(store
        .extend_lease(&taken[0], moment(900_000))
        .await
        .unwrap());
    store
        .enqueue_items(
            &scope,
            &[item("c", "slow", "new text")],
            true,
            moment(400_002),
        )
        .await
        .unwrap();
    assert!(!store
        .extend_lease(&taken[0], moment(900_000))
        .await
        .unwrap());
    let again = claim_ours(store, &scope, "w", moment(400_003)).await;
    assert_eq!(again.len(), 1);
    store
        .delete_items(
            &scope,
            &collection("c"),
            None,
            &["slow".to_owned()],
            moment(400_004),
        )
        .await
        .unwrap();
    assert!(!store
        .extend_lease(&again[0], moment(900_000))
        .await
        .unwrap());
    // Its database being deleted: the holder's heartbeat says so too.
    store
        .enqueue_items(&scope, &[item("c", "last", "text")], true, moment(400_005))
        .await
        .unwrap();
    let last = claim_ours(store, &scope, "w", moment(400_006)).await;
    assert_eq!(last.len(), 1);
    assert!(store.extend_lease(&last[0], moment(900_000)).await.unwrap());
    assert!(store
        .schedule_deletion(&scope, moment(400_007))
        .await
        .unwrap());
    assert!(!store.extend_lease(&last[0], moment(900_000)).await.unwrap());
}

async fn failures_retry_then_error<S: Store>(store: &S) {
    let scope = setup(store, "db_items_3", "conf-items-3").await;
    store
        .enqueue_items(&scope, &[item("c", "f", "text")], true, moment(0))
        .await
        .unwrap();
    let claimed = claim_ours(store, &scope, "w", moment(10)).await;
    let transient = ItemFailure {
        code: engram_types::ItemErrorCode::Transient,
        message: "disk full".into(),
        retry_at: Some(moment(5_000)),
    };
    assert!(store
        .fail_item(&claimed[0], &transient, moment(11))
        .await
        .unwrap());
    let statuses = store
        .item_statuses(&scope, &collection("c"), &["f".into()], moment(12))
        .await
        .unwrap();
    assert_eq!(
        (statuses[0].status, statuses[0].error_code.as_str()),
        (IndexingStatus::Queued, "E6001")
    );
    assert!(
        claim_ours(store, &scope, "w", moment(4_999))
            .await
            .is_empty(),
        "not before its retry time"
    );
    let claimed = claim_ours(store, &scope, "w", moment(5_000)).await;
    assert_eq!(claimed.len(), 1);
    let terminal = ItemFailure {
        code: engram_types::ItemErrorCode::NoText,
        message: "no text".into(),
        retry_at: None,
    };
    assert!(store
        .fail_item(&claimed[0], &terminal, moment(5_001))
        .await
        .unwrap());
    let statuses = store
        .item_statuses(&scope, &collection("c"), &["f".into()], moment(5_002))
        .await
        .unwrap();
    assert_eq!(statuses[0].status, IndexingStatus::Errored);
    assert_eq!(statuses[0].error_message, "no text");
    assert!(
        claim_ours(store, &scope, "w", moment(99_999))
            .await
            .is_empty(),
        "errored is terminal"
    );
    let history = store
        .item_history(&scope, &collection("c"), "f", moment(99_999))
        .await
        .unwrap();
    let steps: Vec<(IndexingStatus, &str)> = history
        .iter()
        .map(|h| (h.status, h.error_code.as_str()))
        .collect();
    assert_eq!(
        steps,
        [
            (IndexingStatus::Queued, ""),
            (IndexingStatus::Processing, ""),
            (IndexingStatus::Queued, "E6001"),
            (IndexingStatus::Processing, "E6001"),
            (IndexingStatus::Errored, history[4].error_code.as_str()),
        ],
        "every state the item entered, with the error it carried"
    );
    assert_eq!(history[4].error_message, "no text");
    assert_eq!((history[0].at, history[4].at), (moment(0), moment(5_001)));
    assert!(history.windows(2).all(|w| w[0].at <= w[1].at));
    assert!(store
        .item_history(&scope, &collection("c"), "nope", moment(99_999))
        .await
        .unwrap()
        .is_empty());
}

async fn deletion_and_isolation<S: Store>(store: &S) {
    let scope = setup(store, "db_items_4", "conf-items-4").await;
    let foreign = DatabaseScope {
        org: OrgId::from_trusted("conf-items-4-other"),
        id: scope.id.clone(),
    };
    store
        .enqueue_items(
            &scope,
            &[item("c", "d1", "one"), item("c", "d2", "two")],
            true,
            moment(0),
        )
        .await
        .unwrap();
    assert!(matches!(
        store
            .enqueue_items(&foreign, &[item("c", "x", "intruder")], true, moment(0))
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert!(store
        .item_statuses(&foreign, &collection("c"), &["d1".into()], moment(0))
        .await
        .unwrap()
        .is_empty());
    let listed = store
        .list_items(
            &foreign,
            &ItemQuery {
                page: 1,
                page_size: 10,
                ..ItemQuery::default()
            },
            moment(0),
        )
        .await
        .unwrap();
    assert_eq!(listed.total, 0);
    assert!(matches!(
        store
            .delete_items(&foreign, &collection("c"), None, &["d1".into()], moment(0))
            .await,
        Err(StoreError::NotFound(_))
    ));

    let claimed = claim_ours(store, &scope, "w", moment(1)).await;
    let d1 = claimed.iter().find(|c| c.id == "d1").unwrap();
    assert!(store
        .complete_item(
            d1,
            &[chunk("d1-0", 0, "one")],
            crate::AfterChunks::Completed,
            moment(2)
        )
        .await
        .unwrap());
    let deleted = store
        .delete_items(
            &scope,
            &collection("c"),
            Some(ItemKind::Memory),
            &["d1".into()],
            moment(0),
        )
        .await
        .unwrap();
    assert!(!deleted[0].deleted, "the kind must match");
    let deleted = store
        .delete_items(
            &scope,
            &collection("c"),
            Some(ItemKind::Knowledge),
            &["d1".into(), "d2".into(), "nope".into()],
            moment(0),
        )
        .await
        .unwrap();
    assert_eq!(
        deleted.iter().map(|d| d.deleted).collect::<Vec<_>>(),
        [true, true, false]
    );
    assert_eq!(
        store
            .counts(&scope, moment(0))
            .await
            .unwrap()
            .knowledge_chunks,
        0
    );
    assert!(store
        .item_statuses(&scope, &collection("c"), &["d1".into()], moment(3))
        .await
        .unwrap()
        .is_empty());
    // The worker still holding d2 cannot bring it back.
    let d2 = claimed.iter().find(|c| c.id == "d2").unwrap();
    assert!(!store
        .complete_item(
            d2,
            &[chunk("d2-0", 0, "two")],
            crate::AfterChunks::Completed,
            moment(4)
        )
        .await
        .unwrap());
    assert_eq!(
        store
            .counts(&scope, moment(0))
            .await
            .unwrap()
            .knowledge_chunks,
        0
    );
}

async fn listing_filters_and_pages<S: Store>(store: &S) {
    let scope = setup(store, "db_items_5", "conf-items-5").await;
    let mut items = Vec::new();
    for i in 0..7 {
        let mut it = item(if i < 5 { "c" } else { "d" }, &format!("l{i}"), "text");
        it.fields.metadata = json!({"team": if i % 2 == 0 { "red" } else { "blue" }, "rank": i});
        it.fields.additional_metadata = json!({"lang": "en", "flag": i == 3});
        it.fields.source_type = if i == 4 { "email".into() } else { "doc".into() };
        items.push(it);
    }
    let mut memory = item("c", "m0", "remember");
    memory.kind = ItemKind::Memory;
    memory.origin = ItemOrigin::Memory;
    items.push(memory);
    for (n, it) in items.iter().enumerate() {
        store
            .enqueue_items(&scope, std::slice::from_ref(it), true, moment(n as i64))
            .await
            .unwrap();
    }
    let base = ItemQuery {
        kind: Some(ItemKind::Knowledge),
        page: 1,
        page_size: 3,
        ..ItemQuery::default()
    };
    let page1 = store.list_items(&scope, &base, moment(100)).await.unwrap();
    assert_eq!(page1.total, 7);
    assert_eq!(
        page1
            .items
            .iter()
            .map(|i| i.id.as_str())
            .collect::<Vec<_>>(),
        ["l6", "l5", "l4"],
        "newest first"
    );
    let page3 = store
        .list_items(
            &scope,
            &ItemQuery {
                page: 3,
                ..base.clone()
            },
            moment(100),
        )
        .await
        .unwrap();
    assert_eq!(page3.items.len(), 1);
    assert_eq!(
        store
            .item_status_counts(&scope, &[], moment(100))
            .await
            .unwrap(),
        vec![(IndexingStatus::Queued, 8)],
        "every collection and kind, by state"
    );
    assert_eq!(
        store
            .item_status_counts(&scope, &[IndexingStatus::Completed], moment(100))
            .await
            .unwrap(),
        vec![],
        "only the states asked about"
    );
    for (statuses, expected) in [
        (vec![IndexingStatus::Queued], 7),
        (vec![IndexingStatus::Completed, IndexingStatus::Errored], 0),
    ] {
        let by_state = ItemQuery {
            statuses,
            ..base.clone()
        };
        let listed = store
            .list_items(&scope, &by_state, moment(100))
            .await
            .unwrap();
        assert_eq!(listed.total, expected, "items by state");
    }
    let red = ItemQuery {
        metadata: vec![("team".into(), FilterValue::Eq(json!("red")))],
        ..base.clone()
    };
    assert_eq!(
        store
            .list_items(&scope, &red, moment(100))
            .await
            .unwrap()
            .total,
        4
    );
    let ranks = ItemQuery {
        metadata: vec![(
            "rank".into(),
            FilterValue::In(vec![json!(1), json!(2), json!(9)]),
        )],
        ..base.clone()
    };
    assert_eq!(
        store
            .list_items(&scope, &ranks, moment(100))
            .await
            .unwrap()
            .total,
        2
    );
    let flagged = ItemQuery {
        additional_metadata: vec![("flag".into(), FilterValue::Eq(json!(true)))],
        ..base.clone()
    };
    let flagged = store
        .list_items(&scope, &flagged, moment(100))
        .await
        .unwrap();
    assert_eq!(
        flagged
            .items
            .iter()
            .map(|i| i.id.as_str())
            .collect::<Vec<_>>(),
        ["l3"]
    );
    let email = ItemQuery {
        fields: vec![(SourceField::Type, "email".into())],
        ..base.clone()
    };
    assert_eq!(
        store
            .list_items(&scope, &email, moment(100))
            .await
            .unwrap()
            .items[0]
            .id,
        "l4"
    );
    let in_d = ItemQuery {
        collections: vec![collection("d")],
        ..base.clone()
    };
    assert_eq!(
        store
            .list_items(&scope, &in_d, moment(100))
            .await
            .unwrap()
            .total,
        2
    );
    let by_id = ItemQuery {
        ids: vec!["l1".into(), "m0".into()],
        ..base.clone()
    };
    assert_eq!(
        store
            .list_items(&scope, &by_id, moment(100))
            .await
            .unwrap()
            .total,
        1,
        "kind still applies"
    );
    let memories = ItemQuery {
        kind: Some(ItemKind::Memory),
        ..base.clone()
    };
    let memories = store
        .list_items(&scope, &memories, moment(100))
        .await
        .unwrap();
    assert_eq!(
        (memories.total, memories.items[0].fields.text.as_deref()),
        (1, Some("remember"))
    );
    let red_blue = ItemQuery {
        metadata: vec![
            ("team".into(), FilterValue::Eq(json!("red"))),
            ("team".into(), FilterValue::Eq(json!("blue"))),
        ],
        ..base
    };
    assert_eq!(
        store
            .list_items(&scope, &red_blue, moment(100))
            .await
            .unwrap()
            .total,
        0,
        "filters are ANDed"
    );
}

async fn expired_items_vanish_and_are_purged<S: Store>(store: &S) {
    let scope = setup(store, "db_items_6", "conf-items-6").await;
    let mut m = item("u", "mem", "short-lived");
    m.kind = ItemKind::Memory;
    m.origin = ItemOrigin::Memory;
    m.fields.expires_at = Some(moment(1_000));
    store
        .enqueue_items(&scope, &[m, item("u", "keep", "stays")], true, moment(0))
        .await
        .unwrap();
    let claimed = claim_ours(store, &scope, "w", moment(10)).await;
    for c in &claimed {
        assert!(store
            .complete_item(
                c,
                &[chunk(&format!("{}-0", c.id), 0, "x")],
                crate::AfterChunks::Completed,
                moment(20)
            )
            .await
            .unwrap());
    }
    let all = ItemQuery {
        page: 1,
        page_size: 10,
        ..ItemQuery::default()
    };
    assert_eq!(
        store
            .list_items(&scope, &all, moment(999))
            .await
            .unwrap()
            .total,
        2
    );
    assert_eq!(
        store
            .list_items(&scope, &all, moment(1_000))
            .await
            .unwrap()
            .total,
        1,
        "gone at its expiry time"
    );
    assert!(store
        .item_statuses(&scope, &collection("u"), &["mem".into()], moment(1_000))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store
            .counts(&scope, moment(999))
            .await
            .unwrap()
            .memory_chunks,
        1
    );
    assert_eq!(
        store
            .counts(&scope, moment(1_000))
            .await
            .unwrap()
            .memory_chunks,
        0,
        "not counted once expired"
    );
    let deleted = store
        .delete_items(
            &scope,
            &collection("u"),
            None,
            &["mem".into()],
            moment(1_000),
        )
        .await
        .unwrap();
    assert!(!deleted[0].deleted, "an expired item is already gone");
    let purged = store.purge_expired(moment(1_000), 100).await.unwrap();
    assert_eq!(purged, 1, "one chunk went");
    assert_eq!(
        store.counts(&scope, moment(0)).await.unwrap().memory_chunks,
        0
    );
    assert_eq!(
        store
            .counts(&scope, moment(0))
            .await
            .unwrap()
            .knowledge_chunks,
        1
    );
}
