//! The conformance suite: behaviour every storage backend must show, run against each backend
//! by that backend's own test. Each case uses its own organization names, so the cases can share
//! one store.

#![allow(clippy::unwrap_used)] // test code, compiled into the library only for backends' tests

mod connectors;
mod edits;
mod graph;
mod items;
mod webhooks;

pub use items::{chunk, claim_ours, collection, item, setup};

use engram_types::schema::{FieldType, MetadataSchema, SchemaField};
use engram_types::{ApiKeyPrefix, CollectionName, DatabaseId, DatabaseName, OrgId, UnixMs};

use crate::{
    ApiKeyRecord, DatabaseScope, DatabaseState, InfraFlags, NewDatabase, Store, StoreError,
};

/// Runs every case.
pub async fn run_all<S: Store>(store: &S) {
    keys_round_trip_and_revoke(store).await;
    request_budgets_are_per_key_and_refill(store).await;
    databases_are_unique_per_organization(store).await;
    reads_and_writes_are_confined_to_their_organization(store).await;
    deletion_frees_the_name_and_purge_removes_everything(store).await;
    schema_additions_are_atomic(store).await;
    provisioning_turns_ready_when_every_flag_is_set(store).await;
    items::run_all(store).await;
    edits::run_all(store).await;
    webhooks::run_all(store).await;
    graph::run_all(store).await;
    connectors::run_all(store).await;
    the_consistency_check_runs_every_check(store).await;
    a_shared_store_reads_its_own_clock(store).await;
}

/// A store instances on several machines share reads its own clock (near this machine's, in
/// a test); one a single process serves has none.
async fn a_shared_store_reads_its_own_clock<S: Store>(store: &S) {
    let ours = engram_types::Clock::now(&engram_types::SystemClock);
    // SQLite has none: the machine's clock is the only one.
    if let Some(theirs) = store.clock().await.unwrap() {
        assert!(
            (theirs.as_millis() - ours.as_millis()).abs() < 60_000,
            "{theirs:?} against {ours:?}"
        );
    }
}

/// Every check's query runs on the backend; a claim whose lease ran out counts as stalled
/// (the store is shared by every case, so the count is compared before and after).
async fn the_consistency_check_runs_every_check<S: Store>(store: &S) {
    let (claimed_at, later) = (moment(50_000_000), moment(50_000_000 + 61_000));
    let stalled = |findings: &[crate::Finding]| {
        findings
            .iter()
            .find(|f| f.check == "stalled_claims")
            .map(|f| f.count)
            .unwrap()
    };
    let before = store.check(later, moment(0)).await.unwrap();
    let names: Vec<&str> = before.iter().map(|f| f.check).collect();
    assert!(names.contains(&"undelivered_events"), "{names:?}");
    assert!(before.iter().all(|f| f.count >= 0), "{before:?}");
    let scope = items::setup(store, "db_check", "conf-check").await;
    store
        .enqueue_items(
            &scope,
            &[items::item("c", "stuck", "text")],
            true,
            claimed_at,
        )
        .await
        .unwrap();
    let ours = items::claim_ours(store, &scope, "gone-worker", claimed_at).await;
    assert_eq!(ours.len(), 1);
    let after = store.check(later, moment(0)).await.unwrap();
    assert!(stalled(&after) > stalled(&before), "{before:?} {after:?}");
    // While the lease lives, nothing is stalled by it.
    let live = store.check(claimed_at, moment(0)).await.unwrap();
    assert!(stalled(&live) <= stalled(&before), "{live:?}");
    // Repaired: the stalled claim is queued again, and every check passes after.
    let repaired = store.repair(later, moment(0)).await.unwrap();
    let stalled_rows = repaired
        .iter()
        .find(|r| r.check == "stalled_claims")
        .map(|r| r.rows)
        .unwrap();
    assert!(stalled_rows >= 1, "{repaired:?}");
    let after = store.check(later, moment(0)).await.unwrap();
    assert!(after.iter().all(|f| f.count == 0), "{after:?}");
    let again = items::claim_ours(store, &scope, "next-worker", later).await;
    assert_eq!(again.len(), 1, "the repaired item is claimed again");
}

pub fn sample_key(prefix: &str, org: &str) -> ApiKeyRecord {
    ApiKeyRecord {
        prefix: ApiKeyPrefix::from_trusted(prefix),
        secret_hash: vec![7; 32],
        org: OrgId::from_trusted(org),
        name: format!("key {prefix}"),
        databases: vec![DatabaseName::from_trusted("only")],
        scopes: engram_types::Scopes::all(),
        created_at: moment(1_000),
        expires_at: Some(moment(9_000)),
        revoked_at: None,
    }
}

fn name(value: &str) -> DatabaseName {
    DatabaseName::from_trusted(value)
}

pub(crate) fn new_db(id: &str, org: &str, db: &str) -> NewDatabase {
    NewDatabase {
        id: DatabaseId::from_trusted(id),
        org: OrgId::from_trusted(org),
        name: name(db),
        default_collection: CollectionName::from_trusted(db),
        schema: MetadataSchema::default(),
        embeddings_dimension: 384,
        is_embeddings_tenant: false,
        created_at: moment(5_000),
    }
}

async fn keys_round_trip_and_revoke<S: Store>(store: &S) {
    let a = sample_key("k_conf_a", "conf-keys-1");
    let mut b = sample_key("k_conf_b", "conf-keys-2");
    b.scopes = engram_types::Scopes::from_names(&["read"]).unwrap();
    store.insert_key(&a).await.unwrap();
    store.insert_key(&b).await.unwrap();
    assert!(matches!(
        store.insert_key(&a).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.find_key(&a.prefix).await.unwrap().as_ref(), Some(&a));
    assert_eq!(
        store
            .find_key(&ApiKeyPrefix::from_trusted("k_conf_none"))
            .await
            .unwrap(),
        None
    );
    let listed = store.list_keys(Some(&a.org)).await.unwrap();
    assert_eq!(listed, vec![a.clone()]);
    assert_eq!(
        store.find_key(&b.prefix).await.unwrap().as_ref(),
        Some(&b),
        "scopes round-trip"
    );
    assert!(store.revoke_key(&a.prefix, moment(2_000)).await.unwrap());
    assert!(
        !store.revoke_key(&a.prefix, moment(3_000)).await.unwrap(),
        "revoking twice reports nothing done"
    );
    assert_eq!(
        store.find_key(&a.prefix).await.unwrap().unwrap().revoked_at,
        Some(moment(2_000))
    );
}

async fn request_budgets_are_per_key_and_refill<S: Store>(store: &S) {
    let rule = crate::RateRule {
        per_second: 1,
        burst: 3,
    };
    let a = ApiKeyPrefix::from_trusted("k_conf_rate_a");
    let b = ApiKeyPrefix::from_trusted("k_conf_rate_b");
    let t0 = 1_000_000_000;
    for n in 0..3 {
        assert_eq!(
            store.take_request(&a, rule, t0 + n).await.unwrap(),
            None,
            "request {n} is within the burst"
        );
    }
    let wait = store.take_request(&a, rule, t0 + 3).await.unwrap();
    assert!(
        wait.is_some_and(|us| us > 990_000 && us <= 1_000_000),
        "past the burst, wait about a second: {wait:?}"
    );
    assert_eq!(
        store.take_request(&b, rule, t0 + 4).await.unwrap(),
        None,
        "each key has its own budget"
    );
    assert_eq!(
        store.take_request(&a, rule, t0 + 1_000_010).await.unwrap(),
        None,
        "a second later one more request is allowed"
    );
    assert!(store
        .take_request(&a, rule, t0 + 1_000_020)
        .await
        .unwrap()
        .is_some());
}

async fn databases_are_unique_per_organization<S: Store>(store: &S) {
    let created = store
        .create_database(&new_db("db_u1", "conf-u-1", "shared"))
        .await
        .unwrap();
    assert_eq!(created.state, DatabaseState::Provisioning);
    assert_eq!(created.infra, InfraFlags::default());
    let dup = store
        .create_database(&new_db("db_u2", "conf-u-1", "shared"))
        .await;
    assert!(matches!(dup, Err(StoreError::Conflict(_))), "{dup:?}");
    store
        .create_database(&new_db("db_u3", "conf-u-2", "shared"))
        .await
        .unwrap();
    let org1 = OrgId::from_trusted("conf-u-1");
    let org3 = OrgId::from_trusted("conf-u-3");
    assert!(
        store
            .find_database(&org3, &name("shared"))
            .await
            .unwrap()
            .is_none(),
        "another organization's name is not found"
    );
    let found = store
        .find_database(&org1, &name("shared"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.id.as_str(), "db_u1");
    let listed = store.list_databases(&org1).await.unwrap();
    assert_eq!(
        listed.iter().map(|d| d.id.as_str()).collect::<Vec<_>>(),
        ["db_u1"]
    );
    let collections = store.list_collections(&found.scope()).await.unwrap();
    assert_eq!(
        collections,
        vec![CollectionName::from_trusted("shared")],
        "the default collection exists"
    );
}

async fn reads_and_writes_are_confined_to_their_organization<S: Store>(store: &S) {
    let db = store
        .create_database(&new_db("db_iso", "conf-iso-1", "iso"))
        .await
        .unwrap();
    let foreign = DatabaseScope {
        org: OrgId::from_trusted("conf-iso-2"),
        id: db.id.clone(),
    };
    let extra = CollectionName::from_trusted("extra");
    store
        .ensure_collection(&foreign, &extra, moment(6_000))
        .await
        .unwrap();
    assert!(store.list_collections(&foreign).await.unwrap().is_empty());
    assert_eq!(
        store.list_collections(&db.scope()).await.unwrap().len(),
        1,
        "a foreign scope wrote nothing"
    );
    assert_eq!(
        store.counts(&foreign, moment(0)).await.unwrap().collections,
        0
    );
    assert!(!store
        .schedule_deletion(&foreign, moment(6_000))
        .await
        .unwrap());
    assert!(matches!(
        store
            .add_schema_fields(&foreign, &[field("x")], moment(1))
            .await,
        Err(StoreError::NotFound(_))
    ));
    assert!(store
        .find_database(&foreign.org, &name("iso"))
        .await
        .unwrap()
        .is_none());

    store
        .ensure_collection(&db.scope(), &extra, moment(6_000))
        .await
        .unwrap();
    store
        .ensure_collection(&db.scope(), &extra, moment(7_000))
        .await
        .unwrap();
    assert_eq!(
        store
            .counts(&db.scope(), moment(0))
            .await
            .unwrap()
            .collections,
        2
    );
}

async fn deletion_frees_the_name_and_purge_removes_everything<S: Store>(store: &S) {
    let org = OrgId::from_trusted("conf-del");
    let old = store
        .create_database(&new_db("db_del_1", "conf-del", "gone"))
        .await
        .unwrap();
    store
        .ensure_collection(&old.scope(), &CollectionName::from_trusted("c1"), moment(1))
        .await
        .unwrap();
    assert!(store
        .schedule_deletion(&old.scope(), moment(8_000))
        .await
        .unwrap());
    assert!(!store
        .schedule_deletion(&old.scope(), moment(8_001))
        .await
        .unwrap());
    assert!(store
        .find_database(&org, &name("gone"))
        .await
        .unwrap()
        .is_none());
    assert!(store.list_databases(&org).await.unwrap().is_empty());
    let pending = store.databases_needing_work().await.unwrap();
    assert!(pending
        .iter()
        .any(|d| d.id == old.id && d.state == DatabaseState::Deleting));

    let new = store
        .create_database(&new_db("db_del_2", "conf-del", "gone"))
        .await
        .unwrap();
    assert_ne!(new.id, old.id);
    assert_eq!(
        store.list_collections(&new.scope()).await.unwrap().len(),
        1,
        "the new database starts empty"
    );

    store.purge_database(&old.id).await.unwrap();
    assert!(store
        .list_collections(&old.scope())
        .await
        .unwrap()
        .is_empty());
    assert!(!store
        .databases_needing_work()
        .await
        .unwrap()
        .iter()
        .any(|d| d.id == old.id));
    // Purging only ever removes a database that is being deleted.
    store.purge_database(&new.id).await.unwrap();
    assert!(store
        .find_database(&org, &name("gone"))
        .await
        .unwrap()
        .is_some());
}

fn field(name: &str) -> SchemaField {
    SchemaField {
        name: name.into(),
        data_type: FieldType::Varchar,
        max_length: 16,
        enable_match: true,
        enable_dense_embedding: false,
        enable_sparse_embedding: false,
        nullable: true,
    }
}

async fn schema_additions_are_atomic<S: Store>(store: &S) {
    let db = store
        .create_database(&new_db("db_schema", "conf-schema", "schemas"))
        .await
        .unwrap();
    let added = store
        .add_schema_fields(&db.scope(), &[field("a")], moment(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(added.fields().len(), 1);
    let refused = store
        .add_schema_fields(&db.scope(), &[field("b"), field("a")], moment(2))
        .await
        .unwrap();
    assert!(refused.is_err(), "an existing field cannot be added again");
    let both = store
        .add_schema_fields(&db.scope(), &[field("b")], moment(3))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        both.fields()
            .iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
    let read = store
        .find_database(&db.org, &db.name)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.schema, both, "a refused batch added nothing");
}

async fn provisioning_turns_ready_when_every_flag_is_set<S: Store>(store: &S) {
    let db = store
        .create_database(&new_db("db_prov", "conf-prov", "prov"))
        .await
        .unwrap();
    let partial = InfraFlags {
        scheduler: true,
        ..InfraFlags::default()
    };
    store.set_infra(&db.id, partial, moment(10)).await.unwrap();
    let read = store
        .find_database(&db.org, &db.name)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (read.state, read.infra),
        (DatabaseState::Provisioning, partial)
    );
    store
        .set_infra(&db.id, InfraFlags::READY, moment(11))
        .await
        .unwrap();
    let read = store
        .find_database(&db.org, &db.name)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (read.state, read.infra),
        (DatabaseState::Ready, InfraFlags::READY)
    );
    assert!(!store
        .databases_needing_work()
        .await
        .unwrap()
        .iter()
        .any(|d| d.id == db.id));
}

/// The moment `ms` milliseconds after the epoch (the suites' times are small numbers).
pub fn moment(ms: i64) -> UnixMs {
    UnixMs::from_millis(ms)
}
