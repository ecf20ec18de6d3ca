//! Edits after creation: renaming a database, its instructions, one item's metadata, reading an
//! item's source back, feedback and the service's own secrets. Each stays inside its
//! organization.

use engram_types::{DatabaseName, OrgId};
use serde_json::{json, Map, Value};

use super::items::{chunk, claim_ours, collection, item, setup};
use super::{moment, name, sample_key};
use crate::{
    FeedbackRecord, InstructionsUpdate, MetadataEdit, MetadataEditOutcome, RawSelection, RawVector,
    Store, StoreError,
};

pub(super) async fn run_all<S: Store>(store: &S) {
    a_rename_moves_the_name_and_the_keys_restricted_to_it(store).await;
    instructions_merge_per_collection(store).await;
    metadata_edits_merge_are_checked_and_stay_in_scope(store).await;
    an_item_source_comes_back_with_its_bytes(store).await;
    feedback_is_kept_per_organization(store).await;
    a_service_secret_is_made_once(store).await;
    raw_vectors_are_stored_scanned_selected_and_deleted(store).await;
}

async fn a_rename_moves_the_name_and_the_keys_restricted_to_it<S: Store>(store: &S) {
    let org = OrgId::from_trusted("conf-rename-1");
    let scope = setup(store, "db_rn_1", "conf-rename-1").await;
    setup(store, "db_rn_2", "conf-rename-1").await;
    let elsewhere = setup(store, "db_rn_3", "conf-rename-2").await;
    let mut key = sample_key("k_conf_rn", "conf-rename-1");
    key.databases = vec![name("db_rn_1"), name("db_rn_9")];
    store.insert_key(&key).await.unwrap();

    let taken = store
        .rename_database(&scope, &name("db_rn_2"), moment(10))
        .await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");
    let renamed = store
        .rename_database(&scope, &name("renamed"), moment(10))
        .await
        .unwrap();
    assert_eq!(renamed.id, scope.id);
    assert_eq!(renamed.name, name("renamed"));
    assert_eq!(
        renamed.default_collection,
        collection("db_rn_1"),
        "the default collection keeps its name"
    );
    assert!(store
        .find_database(&org, &name("db_rn_1"))
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        store
            .find_database(&org, &name("renamed"))
            .await
            .unwrap()
            .unwrap()
            .id,
        scope.id
    );
    let key = store.find_key(&key.prefix).await.unwrap().unwrap();
    assert_eq!(key.databases, vec![name("renamed"), name("db_rn_9")]);

    // Another organization may use the same names, and cannot rename ours.
    store
        .rename_database(&elsewhere, &name("renamed"), moment(11))
        .await
        .unwrap();
    let mut foreign = scope.clone();
    foreign.org = OrgId::from_trusted("conf-rename-2");
    let refused = store
        .rename_database(&foreign, &name("stolen"), moment(12))
        .await;
    assert!(
        matches!(refused, Err(StoreError::NotFound(_))),
        "{refused:?}"
    );
    assert!(store.schedule_deletion(&scope, moment(13)).await.unwrap());
    let gone = store
        .rename_database(&scope, &name("late"), moment(14))
        .await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
}

async fn instructions_merge_per_collection<S: Store>(store: &S) {
    let scope = setup(store, "db_instr_1", "conf-instr-1").await;
    let org = OrgId::from_trusted("conf-instr-1");
    let first = InstructionsUpdate {
        custom_instructions: Some("Be terse.".into()),
        collections: [
            ("notes".to_owned(), Some("Dates matter.".to_owned())),
            ("logs".to_owned(), Some("Skip stack traces.".to_owned())),
        ]
        .into(),
    };
    store
        .update_instructions(&scope, &first, 10, moment(1))
        .await
        .unwrap();
    let second = InstructionsUpdate {
        custom_instructions: None,
        collections: [
            ("logs".to_owned(), None),
            ("mail".to_owned(), Some("Names matter.".to_owned())),
        ]
        .into(),
    };
    let now = store
        .update_instructions(&scope, &second, 10, moment(2))
        .await
        .unwrap();
    let crowded = store
        .update_instructions(&scope, &second, 1, moment(2))
        .await;
    assert!(
        matches!(crowded, Err(StoreError::Conflict(_))),
        "{crowded:?}"
    );
    assert_eq!(now.custom_instructions, "Be terse.");
    assert_eq!(
        now.collections
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        ["mail", "notes"],
        "absent collections are kept, cleared ones go"
    );
    let read = store
        .find_database(&org, &DatabaseName::from_trusted("db_instr_1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.instructions, now);
    assert_eq!(
        now.for_item("notes", "Own words."),
        "Be terse.\n\nDates matter.\n\nOwn words."
    );
    let mut foreign = scope.clone();
    foreign.org = OrgId::from_trusted("conf-instr-2");
    let refused = store
        .update_instructions(&foreign, &first, 10, moment(3))
        .await;
    assert!(
        matches!(refused, Err(StoreError::NotFound(_))),
        "{refused:?}"
    );
}

fn map(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap()
}

async fn metadata_edits_merge_are_checked_and_stay_in_scope<S: Store>(store: &S) {
    let scope = setup(store, "db_meta_1", "conf-meta-1").await;
    let mut new = item("c", "doc", "text");
    new.fields.metadata = json!({"team": "ops", "tier": 1});
    new.fields.additional_metadata = json!({"owner": "kim"});
    store
        .enqueue_items(&scope, &[new], true, moment(1))
        .await
        .unwrap();
    let claimed = claim_ours(store, &scope, "w", moment(2)).await;
    store
        .complete_item(
            &claimed[0],
            &[chunk("meta-0", 0, "text")],
            crate::AfterChunks::Completed,
            moment(3),
        )
        .await
        .unwrap();

    let accept = |_: &Map<String, Value>, _: &Map<String, Value>| Ok(());
    let edit = MetadataEdit {
        metadata: map(json!({"team": "sales", "tier": null})),
        additional_metadata: map(json!({"reviewed": true})),
    };
    let outcome = store
        .edit_item_metadata(&scope, &collection("c"), "doc", &edit, &accept, moment(4))
        .await
        .unwrap();
    assert_eq!(
        outcome,
        MetadataEditOutcome::Edited {
            metadata: map(json!({"team": "sales"})),
            additional_metadata: map(json!({"owner": "kim", "reviewed": true})),
            chunks: 1,
        }
    );
    // A filter sees the new value at once.
    let filter = crate::ChunkFilter {
        metadata: vec![("team".into(), crate::FilterValue::Eq(json!("sales")))],
        ..crate::ChunkFilter::default()
    };
    assert_eq!(
        store
            .filtered_chunk_keys(&scope, &filter, 10, moment(5))
            .await
            .unwrap()
            .len(),
        1
    );

    let refuse = |m: &Map<String, Value>, _: &Map<String, Value>| {
        if m.contains_key("secret") {
            Err("no secrets".to_owned())
        } else {
            Ok(())
        }
    };
    let bad = MetadataEdit {
        metadata: map(json!({"secret": 1})),
        ..MetadataEdit::default()
    };
    let outcome = store
        .edit_item_metadata(&scope, &collection("c"), "doc", &bad, &refuse, moment(6))
        .await
        .unwrap();
    assert_eq!(outcome, MetadataEditOutcome::Refused("no secrets".into()));
    for (coll, id) in [("c", "missing"), ("other", "doc")] {
        let outcome = store
            .edit_item_metadata(&scope, &collection(coll), id, &edit, &accept, moment(7))
            .await
            .unwrap();
        assert_eq!(outcome, MetadataEditOutcome::NotFound);
    }
    let mut foreign = scope.clone();
    foreign.org = OrgId::from_trusted("conf-meta-2");
    let outcome = store
        .edit_item_metadata(&foreign, &collection("c"), "doc", &edit, &accept, moment(8))
        .await
        .unwrap();
    assert_eq!(outcome, MetadataEditOutcome::NotFound);
    let source = store
        .item_source(&scope, &collection("c"), "doc", moment(9))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(source.item.fields.metadata, json!({"team": "sales"}));

    // Service-wide counts see the item and its chunk (and never a deleting database's).
    let counts = store.service_counts().await.unwrap();
    assert!(
        counts.chunks_by_database.contains(&(scope.id.clone(), 1)),
        "{counts:?}"
    );
    assert!(counts
        .items_by_state
        .iter()
        .any(|(state, n)| state == "completed" && *n >= 1));
    assert!(store.schedule_deletion(&scope, moment(10)).await.unwrap());
    let counts = store.service_counts().await.unwrap();
    assert!(!counts
        .chunks_by_database
        .iter()
        .any(|(id, _)| *id == scope.id));
}

async fn an_item_source_comes_back_with_its_bytes<S: Store>(store: &S) {
    let scope = setup(store, "db_src_1", "conf-src-1").await;
    let mut file = item("c", "file", "");
    file.origin = crate::ItemOrigin::File;
    file.fields.text = None;
    file.fields.filename = "a.txt".into();
    file.fields.instructions = "Be terse.".into();
    file.payload = Some(b"raw bytes".to_vec());
    store
        .enqueue_items(
            &scope,
            &[file, item("c", "app", "given text")],
            true,
            moment(1),
        )
        .await
        .unwrap();
    let source = store
        .item_source(&scope, &collection("c"), "file", moment(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(source.payload.as_deref(), Some(&b"raw bytes"[..]));
    assert_eq!(source.item.fields.filename, "a.txt");
    assert_eq!(source.item.fields.instructions, "Be terse.");
    let app = store
        .item_source(&scope, &collection("c"), "app", moment(2))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(app.payload, None);
    assert_eq!(app.item.fields.text.as_deref(), Some("given text"));
    let mut foreign = scope.clone();
    foreign.org = OrgId::from_trusted("conf-src-2");
    assert!(store
        .item_source(&foreign, &collection("c"), "file", moment(2))
        .await
        .unwrap()
        .is_none());
}

async fn feedback_is_kept_per_organization<S: Store>(store: &S) {
    let record = |id: &str, org: &str, at: i64| FeedbackRecord {
        feedback_id: id.into(),
        org: OrgId::from_trusted(org),
        request_id: "req_conf_1".into(),
        database: "db".into(),
        collection: String::new(),
        body: json!({"rating": "positive", "feedback": id}),
        created_at: moment(at),
    };
    store
        .insert_feedback(&record("fb_2", "conf-fb-1", 2))
        .await
        .unwrap();
    store
        .insert_feedback(&record("fb_1", "conf-fb-1", 1))
        .await
        .unwrap();
    store
        .insert_feedback(&record("fb_3", "conf-fb-2", 3))
        .await
        .unwrap();
    let ours = store
        .feedback_for(&OrgId::from_trusted("conf-fb-1"), "req_conf_1")
        .await
        .unwrap();
    assert_eq!(
        ours,
        vec![
            record("fb_1", "conf-fb-1", 1),
            record("fb_2", "conf-fb-1", 2)
        ]
    );
    assert!(store
        .feedback_for(&OrgId::from_trusted("conf-fb-1"), "req_other")
        .await
        .unwrap()
        .is_empty());
}

async fn a_service_secret_is_made_once<S: Store>(store: &S) {
    let first = store
        .service_secret("conf-secret", b"one", moment(1))
        .await
        .unwrap();
    let second = store
        .service_secret("conf-secret", b"two", moment(2))
        .await
        .unwrap();
    assert_eq!(first, b"one");
    assert_eq!(second, b"one", "the stored secret wins");
}

fn raw(source: &str, chunk: &str, x: f32) -> RawVector {
    RawVector {
        source_id: source.into(),
        chunk_id: chunk.into(),
        embedding: vec![x, 1.0 - x, 0.5],
        metadata: json!({"n": x}),
    }
}

async fn raw_vectors_are_stored_scanned_selected_and_deleted<S: Store>(store: &S) {
    let scope = setup(store, "db_raw_1", "conf-raw-1").await;
    let c = collection("vectors");
    let written = store
        .put_raw(
            &scope,
            &c,
            &[
                raw("s1", "a", 0.1),
                raw("s1", "b", 0.2),
                raw("s2", "c", 0.3),
            ],
            false,
            moment(1),
        )
        .await
        .unwrap();
    assert_eq!(written, ["a", "b", "c"]);
    let kept = store
        .put_raw(&scope, &c, &[raw("s1", "a", 0.9)], false, moment(2))
        .await
        .unwrap();
    assert!(kept.is_empty(), "without upsert an existing chunk id stays");
    let replaced = store
        .put_raw(&scope, &c, &[raw("s3", "a", 0.9)], true, moment(3))
        .await
        .unwrap();
    assert_eq!(replaced, ["a"]);
    assert!(store.list_collections(&scope).await.unwrap().contains(&c));

    // A scan in pages sees every vector once.
    let (mut after, mut seen) = (0, Vec::new());
    loop {
        let page = store.raw_page(&scope, &c, after, 2).await.unwrap();
        let Some(last) = page.last() else { break };
        after = last.0;
        seen.extend(page.into_iter().map(|(_, v)| v));
    }
    seen.sort_by(|a, b| a.chunk_id.cmp(&b.chunk_id));
    assert_eq!(
        seen,
        vec![
            raw("s3", "a", 0.9),
            raw("s1", "b", 0.2),
            raw("s2", "c", 0.3)
        ]
    );

    let by_source = RawSelection {
        source_id: Some("s1"),
        chunk_ids: &[],
    };
    assert_eq!(
        store.select_raw(&scope, &c, by_source, 10).await.unwrap(),
        vec![raw("s1", "b", 0.2)]
    );
    let ids = ["c".to_owned(), "zz".to_owned()];
    let by_ids = RawSelection {
        source_id: None,
        chunk_ids: &ids,
    };
    assert_eq!(
        store.select_raw(&scope, &c, by_ids, 10).await.unwrap(),
        vec![raw("s2", "c", 0.3)]
    );

    // Another organization reads and deletes nothing.
    let mut foreign = scope.clone();
    foreign.org = OrgId::from_trusted("conf-raw-2");
    assert!(store
        .raw_page(&foreign, &c, 0, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(store.delete_raw(&foreign, &c, by_ids).await.unwrap(), 0);
    let refused = store
        .put_raw(&foreign, &c, &[raw("x", "x", 0.0)], true, moment(4))
        .await;
    assert!(
        matches!(refused, Err(StoreError::NotFound(_))),
        "{refused:?}"
    );

    assert_eq!(store.delete_raw(&scope, &c, by_ids).await.unwrap(), 1);
    assert_eq!(
        store.delete_collection(&scope, &c, true).await.unwrap(),
        Some(0)
    );
    assert!(
        store.raw_page(&scope, &c, 0, 10).await.unwrap().is_empty(),
        "the collection took its vectors"
    );
}
