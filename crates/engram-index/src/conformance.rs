//! The index conformance suite: a store and its [`Indexes`] together rank, filter, scope and
//! follow every write (keyword and vector side). Run against each backend by its own test; each
//! case uses its own organization names, so the cases can share one store.

#![allow(clippy::unwrap_used)] // test code, compiled into the library only for backends' tests

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use engram_store::conformance::{chunk, claim_ours, collection, item, moment, setup};
use engram_store::{ChunkFilter, ChunkKey, DatabaseScope, FilterValue, ItemOrigin, NewItem, Store};
use engram_types::{CollectionName, ItemKind, UnixMs};
use serde_json::json;

use crate::{
    AnnOptions, IndexFilter, IndexResult, Indexes, KeywordIndex as _, LexicalQuery, TermOperator,
};

/// Runs every case against `store`, with the service's indexes over it (the keyword index
/// saved under `saved`, an empty directory of the test's).
pub async fn run_all(store: Arc<dyn Store>, saved: &Path) {
    let indexes = Indexes::saved(
        store.clone(),
        2,
        saved.join("keyword"),
        AnnOptions::default(),
    );
    let shared = &store;
    let store = store.as_ref();
    keyword_ranking_operators_and_scope(store, &indexes).await;
    filters_liveness_and_joined_chunks(store, &indexes).await;
    app_sources_are_app_knowledge_and_synced_items(store, &indexes).await;
    matches_beyond_other_databases_are_found(store, &indexes).await;
    titles_are_searched(store, &indexes).await;
    a_gone_memory_stops_being_context(store, &indexes).await;
    the_indexes_follow_every_write_path(shared, &indexes).await;
    // Last: it trims the feed past where the other owners stand.
    a_restart_follows_the_feed_from_its_saved_keyword_index(shared, saved).await;
}

fn terms(words: &[&str], operator: TermOperator) -> LexicalQuery {
    LexicalQuery {
        terms: words.iter().map(|w| (*w).to_owned()).collect(),
        operator,
    }
}

/// A keyword search that sees every write made so far.
async fn keyword(
    indexes: &Indexes,
    scope: &DatabaseScope,
    filter: &ChunkFilter,
    query: &LexicalQuery,
    limit: usize,
    now: UnixMs,
) -> IndexResult<Vec<(ChunkKey, f32)>> {
    indexes.catch_up().await?;
    indexes
        .keyword_search(scope, filter, query, limit, now)
        .await
}

/// Indexes each item as one chunk whose content is its text; returns chunk keys by item id.
async fn index<S: Store + ?Sized>(
    store: &S,
    scope: &DatabaseScope,
    items: Vec<NewItem>,
    now: UnixMs,
) -> Vec<(String, ChunkKey)> {
    store.enqueue_items(scope, &items, true, now).await.unwrap();
    for claimed in claim_ours(store, scope, "search", now).await {
        let text = claimed.text.clone().unwrap();
        let chunk = engram_store::NewChunk {
            embedding: vec![0.1, 0.2],
            ..chunk(&format!("{}-{}", scope.id, claimed.id), 0, &text)
        };
        assert!(store
            .complete_item(
                &claimed,
                &[chunk],
                engram_store::AfterChunks::Completed,
                now
            )
            .await
            .unwrap());
    }
    let ids: HashSet<&str> = items.iter().map(|i| i.id.as_str()).collect();
    let all = ChunkFilter::default();
    let every = store
        .filtered_chunk_keys(scope, &all, 1_000_000, now)
        .await
        .unwrap();
    let mut keys: Vec<(String, ChunkKey)> = store
        .fetch_chunks(scope, &all, &every, now)
        .await
        .unwrap()
        .into_iter()
        .filter(|hit| ids.contains(hit.item.id.as_str()))
        .map(|hit| (hit.item.id, hit.chunk_key))
        .collect();
    keys.sort();
    keys
}

fn key_of(keys: &[(String, ChunkKey)], id: &str) -> ChunkKey {
    keys.iter().find(|(i, _)| i == id).unwrap().1
}

async fn keyword_ranking_operators_and_scope<S: Store + ?Sized>(store: &S, indexes: &Indexes) {
    let scope = setup(store, "db_search_1", "conf-search-1").await;
    let other = setup(store, "db_search_1b", "conf-search-1b").await;
    let keys = index(
        store,
        &scope,
        vec![
            item("c", "a", "the quick brown fox jumps over the lazy dog"),
            item("c", "b", "a brown dog sleeps; dogs sleep a lot"),
            item("c", "c", "quantum chromodynamics of quarks"),
            item("d", "e", "brown bears in another collection"),
        ],
        moment(10),
    )
    .await;
    // The same words in another organization's database never show up.
    index(
        store,
        &other,
        vec![item("c", "x", "brown fox brown fox")],
        moment(10),
    )
    .await;
    let all = ChunkFilter::default();

    let found = keyword(
        indexes,
        &scope,
        &all,
        &terms(&["brown", "fox"], TermOperator::Or),
        10,
        moment(20),
    )
    .await
    .unwrap();
    let found_keys: Vec<ChunkKey> = found.iter().map(|f| f.0).collect();
    assert_eq!(found_keys[0], key_of(&keys, "a"), "both terms rank first");
    assert_eq!(found.len(), 3, "every chunk with either term: {found:?}");
    assert!(found.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
    assert!(found.iter().all(|f| f.1 > 0.0), "higher is better");

    let and = keyword(
        indexes,
        &scope,
        &all,
        &terms(&["brown", "dog"], TermOperator::And),
        10,
        moment(20),
    )
    .await
    .unwrap();
    let mut and_keys: Vec<ChunkKey> = and.iter().map(|f| f.0).collect();
    and_keys.sort_unstable();
    assert_eq!(and_keys, [key_of(&keys, "a"), key_of(&keys, "b")]);

    let phrase = keyword(
        indexes,
        &scope,
        &all,
        &terms(&["brown", "dog"], TermOperator::Phrase),
        10,
        moment(20),
    )
    .await
    .unwrap();
    assert_eq!(
        phrase.iter().map(|f| f.0).collect::<Vec<_>>(),
        [key_of(&keys, "b")],
        "only the exact phrase"
    );

    let stemmed = keyword(
        indexes,
        &scope,
        &all,
        &terms(&["sleeping"], TermOperator::Or),
        10,
        moment(20),
    )
    .await
    .unwrap();
    assert_eq!(stemmed.len(), 1, "terms are stemmed like the index");

    let syntax = keyword(
        indexes,
        &scope,
        &all,
        &terms(&["NEAR(", "\"", "*", "AND"], TermOperator::Or),
        10,
        moment(20),
    )
    .await
    .unwrap();
    assert!(syntax.is_empty(), "user text is never query syntax");

    let only_c = ChunkFilter {
        collections: vec![collection("c")],
        ..ChunkFilter::default()
    };
    let scoped = keyword(
        indexes,
        &scope,
        &only_c,
        &terms(&["brown"], TermOperator::Or),
        10,
        moment(20),
    )
    .await
    .unwrap();
    assert_eq!(scoped.len(), 2, "collection d is outside the filter");

    let limited = keyword(
        indexes,
        &scope,
        &all,
        &terms(&["brown"], TermOperator::Or),
        1,
        moment(20),
    )
    .await
    .unwrap();
    assert_eq!(limited.len(), 1);

    // Another organization's keys are never fetched through this scope.
    let foreign = store
        .filtered_chunk_keys(&other, &all, 100, moment(20))
        .await
        .unwrap();
    assert_eq!(foreign.len(), 1);
    assert!(store
        .fetch_chunks(&scope, &all, &foreign, moment(20))
        .await
        .unwrap()
        .is_empty());
    assert!(
        store
            .passing_chunk_keys(&scope, &all, &foreign, moment(20))
            .await
            .unwrap()
            .is_empty(),
        "another database's chunks never pass"
    );
}

/// A source's title (or its file name when it has none) is searched with every chunk of it,
/// and a title match ranks above the same word in the body alone.
async fn titles_are_searched<S: Store + ?Sized>(store: &S, indexes: &Indexes) {
    let scope = setup(store, "db_search_titles", "conf-search-titles").await;
    let mut titled = item("c", "titled", "notes taken during the autumn inspection");
    titled.fields.title = "Lighthouse maintenance".into();
    let mut in_body = item(
        "c",
        "in-body",
        "notes taken during the autumn inspection of the lighthouse",
    );
    in_body.fields.title = String::new();
    let mut file = item("c", "file", "figures of the third quarter");
    file.fields.title = String::new();
    file.fields.filename = "harbour-report.pdf".into();
    let keys = index(store, &scope, vec![titled, in_body, file], moment(10)).await;
    let all = ChunkFilter::default();
    let search = |words: &'static [&'static str], operator| {
        let scope = scope.clone();
        let all = all.clone();
        async move {
            keyword(
                indexes,
                &scope,
                &all,
                &terms(words, operator),
                10,
                moment(20),
            )
            .await
            .unwrap()
            .into_iter()
            .map(|f| f.0)
            .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        search(&["lighthouse"], TermOperator::Or).await,
        [key_of(&keys, "titled"), key_of(&keys, "in-body")],
        "a title match ranks above the same word in the body"
    );
    assert_eq!(
        search(&["lighthouse", "autumn"], TermOperator::And)
            .await
            .len(),
        2,
        "`and` finds terms split between title and text"
    );
    assert_eq!(
        search(&["lighthouse", "maintenance"], TermOperator::Phrase).await,
        [key_of(&keys, "titled")],
        "phrases match within the title"
    );
    assert_eq!(
        search(&["harbour"], TermOperator::Or).await,
        [key_of(&keys, "file")],
        "a file without a title is found by its file name"
    );
}

/// `query_apps` draws from app sources: app knowledge and whatever a connector synced (files
/// included), never plain uploads or memories.
async fn app_sources_are_app_knowledge_and_synced_items<S: Store + ?Sized>(
    store: &S,
    indexes: &Indexes,
) {
    let scope = setup(store, "db_search_apps", "conf-search-apps").await;
    let app = item("c", "app", "pears from an app");
    let mut synced = item("c", "synced", "pears synced from a share");
    synced.origin = ItemOrigin::File;
    synced.fields.additional_metadata = json!({"connector_id": "con_1", "path": "a.txt"});
    let mut upload = item("c", "upload", "pears uploaded");
    upload.origin = ItemOrigin::File;
    upload.fields.additional_metadata = json!({"path": "b.txt"});
    let mut memory = item("c", "mem", "pears remembered");
    memory.kind = ItemKind::Memory;
    memory.origin = ItemOrigin::Memory;
    let keys = index(store, &scope, vec![app, synced, upload, memory], moment(10)).await;
    let apps = ChunkFilter {
        apps: true,
        ..ChunkFilter::default()
    };
    assert!(apps.has_item_conditions());
    let mut found: Vec<ChunkKey> = keyword(
        indexes,
        &scope,
        &apps,
        &terms(&["pears"], TermOperator::Or),
        10,
        moment(20),
    )
    .await
    .unwrap()
    .into_iter()
    .map(|f| f.0)
    .collect();
    found.sort_unstable();
    let mut expected = vec![key_of(&keys, "app"), key_of(&keys, "synced")];
    expected.sort_unstable();
    assert_eq!(found, expected);
    let mut keyed = store
        .filtered_chunk_keys(&scope, &apps, 10, moment(20))
        .await
        .unwrap();
    keyed.sort_unstable();
    assert_eq!(keyed, expected);
}

async fn filters_liveness_and_joined_chunks<S: Store + ?Sized>(store: &S, indexes: &Indexes) {
    let scope = setup(store, "db_search_2", "conf-search-2").await;
    let mut red = item("c", "red", "apples are red");
    red.fields.metadata = json!({"colour": "red", "n": 1});
    red.fields.additional_metadata = json!({"tag": "fruit"});
    let mut green = item("c", "green", "apples are green");
    green.fields.metadata = json!({"colour": "green", "n": 2});
    let mut memory = item("c", "mem", "apples remembered");
    memory.kind = ItemKind::Memory;
    memory.origin = ItemOrigin::Memory;
    memory.fields.expires_at = Some(moment(1_000));
    let keys = index(store, &scope, vec![red, green, memory], moment(10)).await;
    let every: Vec<ChunkKey> = keys.iter().map(|k| k.1).collect();
    let apples = terms(&["apples"], TermOperator::Or);

    let (scope_ref, apples_ref) = (&scope, &apples);
    let by = |filter: ChunkFilter| async move {
        let mut found: Vec<ChunkKey> =
            keyword(indexes, scope_ref, &filter, apples_ref, 10, moment(20))
                .await
                .unwrap()
                .into_iter()
                .map(|f| f.0)
                .collect();
        found.sort_unstable();
        let mut keyed = store
            .filtered_chunk_keys(scope_ref, &filter, 10, moment(20))
            .await
            .unwrap();
        keyed.sort_unstable();
        assert_eq!(found, keyed, "search and key selection agree on {filter:?}");
        found
    };
    assert_eq!(by(ChunkFilter::default()).await.len(), 3);
    assert_eq!(
        by(ChunkFilter {
            kinds: vec![ItemKind::Knowledge],
            ..ChunkFilter::default()
        })
        .await
        .len(),
        2
    );
    assert_eq!(
        by(ChunkFilter {
            metadata: vec![("colour".into(), FilterValue::Eq(json!("red")))],
            ..ChunkFilter::default()
        })
        .await,
        [key_of(&keys, "red")]
    );
    assert_eq!(
        by(ChunkFilter {
            metadata: vec![("n".into(), FilterValue::In(vec![json!(1), json!(2)]))],
            ..ChunkFilter::default()
        })
        .await
        .len(),
        2
    );
    assert_eq!(
        by(ChunkFilter {
            metadata: vec![("n".into(), FilterValue::Eq(json!("1")))],
            ..ChunkFilter::default()
        })
        .await
        .len(),
        0,
        "types must match exactly"
    );
    assert_eq!(
        by(ChunkFilter {
            additional_metadata: vec![("tag".into(), FilterValue::Eq(json!("fruit")))],
            ..ChunkFilter::default()
        })
        .await,
        [key_of(&keys, "red")]
    );
    assert_eq!(
        by(ChunkFilter {
            origin: Some(ItemOrigin::Memory),
            ..ChunkFilter::default()
        })
        .await,
        [key_of(&keys, "mem")]
    );

    // The indexes apply item conditions themselves: what they pass is what the store passes
    // (a superset by design, equal on these), and it follows a metadata edit.
    let held = |filter: ChunkFilter| async move {
        indexes.catch_up().await.unwrap();
        let mut stored = store
            .filtered_chunk_keys(scope_ref, &filter, 10, moment(20))
            .await
            .unwrap();
        stored.sort_unstable();
        let held: Vec<ChunkKey> = match indexes.passing(scope_ref, &filter) {
            crate::Passing::Only(keys) => keys.iter().collect(),
            other @ (crate::Passing::Any | crate::Passing::Store) => {
                panic!("the indexes do not hold {filter:?}: {other:?}")
            }
        };
        assert_eq!(
            held, stored,
            "the indexes and the store agree on {filter:?}"
        );
        held
    };
    let on = |key: &str, value: FilterValue| ChunkFilter {
        metadata: vec![(key.to_owned(), value)],
        ..ChunkFilter::default()
    };
    held(on("colour", FilterValue::Eq(json!("red")))).await;
    held(on("colour", FilterValue::Eq(serde_json::Value::Null))).await;
    held(on("n", FilterValue::In(vec![json!(1.0), json!(2)]))).await;
    held(on("n", FilterValue::Eq(json!("1")))).await;
    held(ChunkFilter {
        additional_metadata: vec![("tag".into(), FilterValue::Eq(json!("fruit")))],
        origin: Some(ItemOrigin::App),
        ..ChunkFilter::default()
    })
    .await;
    let edit = engram_store::MetadataEdit {
        metadata: json!({"shade": "dark"}).as_object().cloned().unwrap(),
        ..engram_store::MetadataEdit::default()
    };
    let accept = |_: &serde_json::Map<String, serde_json::Value>,
                  _: &serde_json::Map<String, serde_json::Value>| Ok(());
    assert!(held(on("shade", FilterValue::Eq(json!("dark"))))
        .await
        .is_empty());
    store
        .edit_item_metadata(
            &scope,
            &collection("c"),
            "green",
            &edit,
            &accept,
            moment(15),
        )
        .await
        .unwrap();
    assert_eq!(
        held(on("shade", FilterValue::Eq(json!("dark")))).await,
        [key_of(&keys, "green")],
        "an edit reaches the indexes"
    );

    let passing = |filter: ChunkFilter, now: UnixMs| {
        let (scope, every) = (scope.clone(), every.clone());
        async move {
            let mut keys = store
                .passing_chunk_keys(&scope, &filter, &every, now)
                .await
                .unwrap();
            keys.sort_unstable();
            keys
        }
    };
    let red_filter = ChunkFilter {
        metadata: vec![("colour".into(), FilterValue::Eq(json!("red")))],
        ..ChunkFilter::default()
    };
    assert_eq!(
        passing(red_filter, moment(20)).await,
        [key_of(&keys, "red")]
    );
    assert_eq!(passing(ChunkFilter::default(), moment(20)).await.len(), 3);
    assert_eq!(
        passing(ChunkFilter::default(), moment(1_000)).await.len(),
        2,
        "an expired memory does not pass"
    );

    let hits = store
        .fetch_chunks(&scope, &ChunkFilter::default(), &every, moment(20))
        .await
        .unwrap();
    assert_eq!(hits.len(), 3);
    let red_hit = hits.iter().find(|h| h.item.id == "red").unwrap();
    assert_eq!(red_hit.content, "apples are red");
    assert_eq!(red_hit.embedding, vec![0.1, 0.2]);
    assert_eq!(
        red_hit.item.fields.metadata,
        json!({"colour": "red", "n": 1})
    );
    assert_eq!(red_hit.item.fields.title, "title red");
    assert_eq!(red_hit.item.fields.text, None, "hits carry no full text");

    // The memory expires at 1000: gone from every retrieval read at once.
    let later = store
        .fetch_chunks(&scope, &ChunkFilter::default(), &every, moment(1_000))
        .await
        .unwrap();
    assert_eq!(later.len(), 2);
    assert_eq!(
        keyword(
            indexes,
            &scope,
            &ChunkFilter::default(),
            &apples,
            10,
            moment(1_000)
        )
        .await
        .unwrap()
        .len(),
        2
    );
    // A database scheduled for deletion has nothing to find.
    store.schedule_deletion(&scope, moment(30)).await.unwrap();
    assert!(store
        .fetch_chunks(&scope, &ChunkFilter::default(), &every, moment(40))
        .await
        .unwrap()
        .is_empty());
    assert!(keyword(
        indexes,
        &scope,
        &ChunkFilter::default(),
        &apples,
        10,
        moment(40)
    )
    .await
    .unwrap()
    .is_empty());
}

/// The lexical index may be shared by every database: a database whose matches rank below
/// hundreds of another's still gets them.
async fn matches_beyond_other_databases_are_found<S: Store + ?Sized>(store: &S, indexes: &Indexes) {
    let ours = setup(store, "db_search_3", "conf-search-3").await;
    let theirs = setup(store, "db_search_3b", "conf-search-3b").await;
    let crowd: Vec<NewItem> = (0..300)
        .map(|i| item("c", &format!("z{i}"), "zebra zebra zebra"))
        .collect();
    index(store, &theirs, crowd, moment(10)).await;
    let keys = index(
        store,
        &ours,
        vec![item(
            "c",
            "mine",
            "a long text that mentions a zebra only once among many other words here",
        )],
        moment(10),
    )
    .await;
    let found = keyword(
        indexes,
        &ours,
        &ChunkFilter::default(),
        &terms(&["zebra"], TermOperator::Or),
        5,
        moment(20),
    )
    .await
    .unwrap();
    assert_eq!(found.iter().map(|f| f.0).collect::<Vec<_>>(), [keys[0].1]);
}

/// A memory indexed with the one before it as context (see `preceding_memory`) loses that
/// context when the one before it is deleted, purged or replaced: its words leave the index.
async fn a_gone_memory_stops_being_context<S: Store + ?Sized>(store: &S, indexes: &Indexes) {
    let scope = setup(store, "db_search_4", "conf-search-4").await;
    let memory = |id: &str, title: &str, text: &str, expires_at: Option<UnixMs>| {
        let mut m = item("c", id, text);
        m.kind = ItemKind::Memory;
        m.origin = ItemOrigin::Memory;
        m.fields.user_name = "ann".into();
        m.fields.title = title.into();
        m.fields.expires_at = expires_at;
        m
    };
    let items = [
        memory("q1", "s1", "Have you met Klaus?", None),
        memory("a1", "s1", "Only once.", None),
        memory("q2", "s2", "Did you visit Lisbon?", None),
        memory("a2", "s2", "Twice, in spring.", None),
        memory("q3", "s3", "Is the gondola open?", Some(moment(1_000))),
        memory("a3", "s3", "Until October.", None),
    ];
    store
        .enqueue_items(&scope, &items, true, moment(10))
        .await
        .unwrap();
    for claimed in claim_ours(store, &scope, "context", moment(10)).await {
        let context = store
            .preceding_memory(&claimed, moment(10))
            .await
            .unwrap()
            .unwrap_or_default();
        let chunk = engram_store::NewChunk {
            context,
            ..chunk(
                &format!("ctx-{}", claimed.id),
                0,
                claimed.text.as_deref().unwrap(),
            )
        };
        assert!(store
            .complete_item(
                &claimed,
                &[chunk],
                engram_store::AfterChunks::Completed,
                moment(10)
            )
            .await
            .unwrap());
    }
    let found = |word: &'static str| {
        let query = terms(&[word], TermOperator::Or);
        let scope = scope.clone();
        async move {
            keyword(
                indexes,
                &scope,
                &ChunkFilter::default(),
                &query,
                10,
                moment(20),
            )
            .await
            .unwrap()
            .len()
        }
    };
    assert_eq!(
        found("klaus").await,
        2,
        "the answer is found through its question"
    );
    assert_eq!(found("lisbon").await, 2);
    assert_eq!(found("gondola").await, 2);

    store
        .delete_items(&scope, &collection("c"), None, &["q1".into()], moment(20))
        .await
        .unwrap();
    assert_eq!(
        found("klaus").await,
        0,
        "a deleted memory leaves its successor's context"
    );
    let replaced = memory("q2", "s2", "Did you visit Porto?", None);
    store
        .enqueue_items(&scope, &[replaced], true, moment(30))
        .await
        .unwrap();
    assert_eq!(
        found("lisbon").await,
        0,
        "a replaced memory leaves its successor's context"
    );
    store.purge_expired(moment(2_000), 100).await.unwrap();
    assert_eq!(
        found("gondola").await,
        0,
        "a purged memory leaves its successor's context"
    );
}

/// Chunks matching `word` by keyword, and vectors held, for the scope's database.
async fn held(indexes: &Indexes, scope: &DatabaseScope, word: &str) -> (usize, usize) {
    let word = terms(&[word], TermOperator::Or);
    let all = ChunkFilter::default();
    let keyword = keyword(indexes, scope, &all, &word, 10, moment(0))
        .await
        .unwrap();
    let vectors = indexes.vector_count(&scope.id).await.unwrap();
    (keyword.len(), vectors)
}

async fn zebras(indexes: &Indexes, scope: &DatabaseScope) -> (usize, usize) {
    held(indexes, scope, "zebra").await
}

/// Both indexes follow every way a chunk changes (completion, delete, upsert, database purge),
/// and a new owner over the same store builds the same state from it.
async fn the_indexes_follow_every_write_path(shared: &Arc<dyn Store>, indexes: &Indexes) {
    let store = shared.as_ref();
    let scope = setup(store, "db_search_5", "conf-search-5").await;
    index(
        store,
        &scope,
        vec![
            item("c", "a", "striped zebras graze"),
            item("c", "b", "striped zebras graze"),
        ],
        moment(1),
    )
    .await;
    assert_eq!(
        zebras(indexes, &scope).await,
        (2, 2),
        "stemming matches zebras"
    );
    let nearest = indexes
        .nearest(
            &scope,
            Arc::from([0.1f32, 0.2]),
            10,
            &IndexFilter::default(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(nearest.len(), 2);
    store
        .delete_items(
            &scope,
            &CollectionName::from_trusted("c"),
            None,
            &["a".into()],
            moment(0),
        )
        .await
        .unwrap();
    assert_eq!(
        zebras(indexes, &scope).await,
        (1, 1),
        "a delete leaves both indexes"
    );
    store
        .enqueue_items(&scope, &[item("c", "b", "new")], true, moment(3))
        .await
        .unwrap();
    assert_eq!(
        zebras(indexes, &scope).await,
        (0, 0),
        "an upsert drops the old chunks"
    );
    // `b` is indexed again with its new text, beside `z`.
    index(
        store,
        &scope,
        vec![item("c", "z", "zebra again")],
        moment(4),
    )
    .await;
    assert_eq!(zebras(indexes, &scope).await, (1, 2));

    let rebuilt = Indexes::in_memory(shared.clone(), 2);
    assert_eq!(
        zebras(&rebuilt, &scope).await,
        (1, 2),
        "a new owner builds from the store"
    );
    store.schedule_deletion(&scope, moment(7)).await.unwrap();
    store.purge_database(&scope.id).await.unwrap();
    assert_eq!(
        zebras(indexes, &scope).await,
        (0, 0),
        "a purged database leaves the indexes"
    );
}

async fn okapis(indexes: &Indexes, scope: &DatabaseScope) -> (usize, usize) {
    held(indexes, scope, "okapi").await
}

/// An owner stops and starts again over its saved keyword index: it opens the index and
/// follows the feed from where it stopped (what changed while it was away included). When the
/// feed was trimmed past that position meanwhile, it builds the index from the store instead.
async fn a_restart_follows_the_feed_from_its_saved_keyword_index(
    shared: &Arc<dyn Store>,
    saved: &Path,
) {
    let store = shared.as_ref();
    let scope = setup(store, "db_search_6", "conf-search-6").await;
    let directory = saved.join("restarted");
    let start = || Indexes::saved(shared.clone(), 2, directory.clone(), AnnOptions::default());
    let first = start();
    index(
        store,
        &scope,
        vec![
            item("c", "a", "okapi forest"),
            item("c", "b", "okapi river"),
        ],
        moment(1),
    )
    .await;
    assert_eq!(okapis(&first, &scope).await, (2, 2));
    assert!(!first.restored(), "nothing was saved yet");
    drop(first);

    // While no owner runs: one deleted, one added.
    store
        .delete_items(
            &scope,
            &CollectionName::from_trusted("c"),
            None,
            &["a".into()],
            moment(2),
        )
        .await
        .unwrap();
    index(
        store,
        &scope,
        vec![item("c", "c", "okapi plain")],
        moment(3),
    )
    .await;
    let second = start();
    assert_eq!(okapis(&second, &scope).await, (2, 2));
    assert!(
        second.restored(),
        "the saved index is followed from its position"
    );
    let forest = terms(&["forest"], TermOperator::Or);
    let all = ChunkFilter::default();
    assert!(keyword(&second, &scope, &all, &forest, 10, moment(4))
        .await
        .unwrap()
        .is_empty());
    drop(second);

    // The feed is trimmed past the saved position (another instance, or a long absence).
    index(store, &scope, vec![item("c", "d", "okapi hill")], moment(5)).await;
    let head = store.chunk_feed_head().await.unwrap();
    store.trim_chunk_changes(head).await.unwrap();
    let third = start();
    assert_eq!(okapis(&third, &scope).await, (3, 3));
    assert!(
        !third.restored(),
        "built again: the feed lost changes it needed"
    );
    // What it built is saved in turn.
    drop(third);
    let fourth = start();
    assert_eq!(okapis(&fourth, &scope).await, (3, 3));
    assert!(fourth.restored());
    drop(fourth);

    // A saved position past the feed's head (the store was restored from a backup): the
    // index holds changes the store lacks, so it is built again.
    let feed = store.chunk_feed_id().await.unwrap();
    let head = store.chunk_feed_head().await.unwrap();
    crate::TantivyKeywordIndex::on_disk(directory.clone())
        .covers(&feed, head + 1_000)
        .await
        .unwrap();
    let fifth = start();
    assert_eq!(okapis(&fifth, &scope).await, (3, 3));
    assert!(
        !fifth.restored(),
        "a position ahead of the store is not trusted"
    );
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn sqlite_with_the_embedded_indexes_passes() {
        let dir = tempfile::tempdir().unwrap();
        let store = engram_store::sqlite::SqliteStore::open(dir.path())
            .await
            .unwrap();
        super::run_all(std::sync::Arc::new(store), dir.path()).await;
    }

    #[tokio::test]
    async fn postgres_with_the_embedded_indexes_passes() {
        let pg = engram_testkit::TempPostgres::start();
        let options = engram_store::postgres::PgOptions::new(pg.url());
        let store = engram_store::postgres::PgStore::open(&options)
            .await
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        super::run_all(std::sync::Arc::new(store), dir.path()).await;
    }
}
