//! Connectors: isolation, the lease a sync runs under, progress per page and how a run ends.

use engram_types::{DatabaseId, OrgId};

use super::{moment, new_db};
use crate::{
    ConnectorUpdate, KnownObject, NewConnector, NewResource, ResourceState, ResourceUpdate, Store,
    StoreError, SyncLease, SyncOutcome, SyncPage, SyncRequest, SyncedObject,
};

pub(super) async fn run_all<S: Store>(store: &S) {
    connectors_are_confined_to_their_organization(store).await;
    a_sync_runs_under_one_lease_and_resumes_where_it_stopped(store).await;
    access_rules_filter_what_a_principal_may_read(store).await;
    credentials_are_replaced_only_under_the_lease(store).await;
}

fn connector(id: &str, org: &str, db: &str, scope: &str) -> NewConnector {
    NewConnector {
        id: id.to_owned(),
        org: OrgId::from_trusted(org),
        provider: "folder".to_owned(),
        name: format!("connector {id}"),
        auth_type: String::new(),
        database_id: DatabaseId::from_trusted(db),
        collection: "docs".to_owned(),
        account_scope: scope.to_owned(),
        custom_instructions: String::new(),
        sync_interval_s: 3600,
        credentials: Some(vec![1, 2, 3]),
        at: moment(10_000),
    }
}

fn resource(id: &str) -> NewResource {
    NewResource {
        resource_id: id.to_owned(),
        resource_type: "folder".to_owned(),
        display_name: id.to_owned(),
        metadata: serde_json::json!({"team": "a"}),
        sync_mode: crate::SyncMode::Rescan,
        ..NewResource::default()
    }
}

fn object(native: &str, version: &str) -> SyncedObject {
    SyncedObject {
        native_id: native.to_owned(),
        item_id: format!("item-{native}"),
        database_id: DatabaseId::from_trusted("db_conn_1"),
        collection: "docs".to_owned(),
        version: version.to_owned(),
        state: format!("state of {native}"),
    }
}

async fn connectors_are_confined_to_their_organization<S: Store>(store: &S) {
    let (org, other) = (
        OrgId::from_trusted("conn-org-1"),
        OrgId::from_trusted("conn-org-2"),
    );
    store
        .create_database(&new_db("db_conn_1", "conn-org-1", "connected"))
        .await
        .unwrap();
    store
        .create_database(&new_db("db_conn_2", "conn-org-2", "connected"))
        .await
        .unwrap();
    let made = store
        .create_connector(&connector("con_a", "conn-org-1", "db_conn_1", "acct"), 3)
        .await
        .unwrap();
    assert_eq!(made.database_name, "connected");
    assert_eq!(made.credentials.as_deref(), Some(&[1, 2, 3][..]));
    assert_eq!(
        made.next_sync_at, None,
        "nothing syncs before resources are configured"
    );
    // One connector per provider and account scope.
    assert!(matches!(
        store
            .create_connector(&connector("con_b", "conn-org-1", "db_conn_1", "acct"), 3)
            .await,
        Err(StoreError::Conflict(_))
    ));
    // Another organization's database cannot receive a connector.
    assert!(matches!(
        store
            .create_connector(&connector("con_c", "conn-org-1", "db_conn_2", "x"), 3)
            .await,
        Err(StoreError::NotFound(_))
    ));
    store
        .create_connector(&connector("con_d", "conn-org-1", "db_conn_1", "second"), 3)
        .await
        .unwrap();
    // The organization's limit.
    assert!(matches!(
        store
            .create_connector(&connector("con_e", "conn-org-1", "db_conn_1", "third"), 2)
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.list_connectors(&org, None).await.unwrap().len(), 2);
    assert_eq!(
        store
            .list_connectors(&org, Some("git"))
            .await
            .unwrap()
            .len(),
        0
    );
    // The other organization sees, changes and deletes none of it.
    assert!(store
        .list_connectors(&other, None)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(store.get_connector(&other, "con_a").await.unwrap(), None);
    let update = ConnectorUpdate {
        name: Some("stolen".into()),
        ..ConnectorUpdate::default()
    };
    assert_eq!(
        store
            .update_connector(&other, "con_a", &update, moment(11_000))
            .await
            .unwrap(),
        None
    );
    assert!(!store.delete_connector(&other, "con_a").await.unwrap());
    assert_eq!(
        store
            .set_paused(&other, "con_a", true, moment(11_000))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .configure_resources(&other, "con_a", &[resource("r")], moment(11_000))
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.list_resources(&other, "con_a").await.unwrap(), None);
    assert_eq!(
        store
            .request_sync(&other, "con_a", "run_x", moment(11_000))
            .await
            .unwrap(),
        SyncRequest::NotFound
    );
    assert!(store
        .list_runs(&other, "con_a", 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.connector_snapshot(&other, "con_a", 10).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .get_connector(&org, "con_a")
            .await
            .unwrap()
            .unwrap()
            .name,
        "connector con_a"
    );
    // Without resources there is nothing to sync.
    assert_eq!(
        store
            .request_sync(&org, "con_a", "run_x", moment(11_000))
            .await
            .unwrap(),
        SyncRequest::NoResources
    );
    assert!(store.delete_connector(&org, "con_d").await.unwrap());
    assert_eq!(store.get_connector(&org, "con_d").await.unwrap(), None);
}

async fn a_sync_runs_under_one_lease_and_resumes_where_it_stopped<S: Store>(store: &S) {
    let org = OrgId::from_trusted("conn-org-1");
    assert_eq!(
        store
            .claim_sync("run_none", moment(20_000), moment(50_000))
            .await
            .unwrap(),
        None
    );
    let configured = store
        .configure_resources(
            &org,
            "con_a",
            &[resource("docs"), resource("notes")],
            moment(20_000),
        )
        .await
        .unwrap();
    assert_eq!(configured, Some(2));
    let resources = store.list_resources(&org, "con_a").await.unwrap().unwrap();
    assert_eq!(resources.len(), 2);
    assert_eq!(
        resources[0].resource.metadata,
        serde_json::json!({"team": "a"})
    );
    assert_eq!(resources[0].state.status, crate::ResourceStatus::Checking);
    let record = store.get_connector(&org, "con_a").await.unwrap().unwrap();
    assert_eq!(
        record.next_sync_at,
        Some(moment(20_000)),
        "configuring makes it due"
    );
    assert_eq!(
        (record.active_resources, record.resources_pending_first_sync),
        (2, 2)
    );

    // One claim holds it; a second finds nothing until the lease lapses.
    let claimed = store
        .claim_sync("run_1", moment(21_000), moment(31_000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (claimed.connector.id.as_str(), claimed.run_id.as_str()),
        ("con_a", "run_1")
    );
    assert!(!claimed.manual);
    assert_eq!(
        store
            .claim_sync("run_2", moment(22_000), moment(32_000))
            .await
            .unwrap(),
        None
    );
    let lease = SyncLease {
        connector_id: "con_a".into(),
        run_id: "run_1".into(),
    };
    assert!(store.renew_sync(&lease, moment(40_000)).await.unwrap());

    // A manual sync asked for during the run is kept for after it.
    assert_eq!(
        store
            .request_sync(&org, "con_a", "run_m", moment(23_000))
            .await
            .unwrap(),
        SyncRequest::Queued("run_m".into())
    );
    assert_eq!(
        store
            .request_sync(&org, "con_a", "run_m2", moment(23_500))
            .await
            .unwrap(),
        SyncRequest::Queued("run_m".into()),
        "one queued request at a time"
    );
    assert_eq!(
        store
            .claim_sync("run_3", moment(24_000), moment(34_000))
            .await
            .unwrap(),
        None
    );

    // A page: two objects dispatched; the pass goes on.
    let page = SyncPage {
        resource_id: "docs".into(),
        pass_id: "pass_1".into(),
        position: "b.txt".into(),
        finished_cursor: None,
        dispatched: vec![object("a.txt", "v1"), object("b.txt", "v1")],
        added: 2,
        ..SyncPage::default()
    };
    assert!(store
        .record_page(&lease, &page, moment(25_000), moment(40_000))
        .await
        .unwrap());
    let ids = vec!["a.txt".to_owned(), "b.txt".to_owned(), "c.txt".to_owned()];
    let versions = store.object_versions("con_a", "docs", &ids).await.unwrap();
    assert_eq!(versions.len(), 2);
    assert_eq!(
        versions["a.txt"],
        KnownObject {
            version: "v1".into(),
            state: "state of a.txt".into()
        }
    );

    // The instance dies; after the lease lapses another takes over where the pass had got to.
    let taken = store
        .claim_sync("run_4", moment(41_000), moment(51_000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        taken.run_id, "run_m",
        "the queued manual run is the one that runs"
    );
    assert!(taken.manual);
    let dead = store.list_runs(&org, "con_a", 10).await.unwrap();
    let run_1 = dead.iter().find(|r| r.run_id == "run_1").unwrap();
    assert_eq!((run_1.state.as_str(), run_1.added), ("abandoned", 2));
    // The dead run's lease writes nothing more.
    assert!(!store.renew_sync(&lease, moment(60_000)).await.unwrap());
    assert!(!store
        .record_page(&lease, &page, moment(41_500), moment(60_000))
        .await
        .unwrap());
    let resources = store.list_resources(&org, "con_a").await.unwrap().unwrap();
    let docs = resources
        .iter()
        .find(|r| r.resource.resource_id == "docs")
        .unwrap();
    assert_eq!(
        (docs.pass_id.as_str(), docs.pass_position.as_str()),
        ("pass_1", "b.txt")
    );

    // The new run ends the pass: c.txt is new, a.txt unchanged, b.txt gone at the source.
    let lease = SyncLease {
        connector_id: "con_a".into(),
        run_id: "run_m".into(),
    };
    let page = SyncPage {
        resource_id: "docs".into(),
        pass_id: "pass_1".into(),
        position: String::new(),
        finished_cursor: Some("done-1".into()),
        dispatched: vec![object("c.txt", "v1")],
        unchanged: vec!["a.txt".into()],
        added: 1,
        ..SyncPage::default()
    };
    assert!(store
        .record_page(&lease, &page, moment(42_000), moment(52_000))
        .await
        .unwrap());
    let unseen = store
        .unseen_objects("con_a", "docs", "pass_1", 10)
        .await
        .unwrap();
    assert!(unseen.is_empty(), "{unseen:?}");
    let next_pass = store
        .unseen_objects("con_a", "docs", "pass_2", 10)
        .await
        .unwrap();
    assert_eq!(next_pass.len(), 3);
    let gone = SyncPage {
        resource_id: "docs".into(),
        pass_id: "pass_1".into(),
        finished_cursor: Some("done-1".into()),
        removed: vec!["b.txt".into()],
        ..SyncPage::default()
    };
    assert!(store
        .record_page(&lease, &gone, moment(42_500), moment(52_000))
        .await
        .unwrap());
    let left = store
        .unseen_objects("con_a", "docs", "no-pass", 10)
        .await
        .unwrap();
    assert_eq!(
        left.iter()
            .map(|o| o.native_id.as_str())
            .collect::<Vec<_>>(),
        ["a.txt", "c.txt"]
    );
    let outcome = SyncOutcome {
        succeeded: true,
        next_sync_at: moment(3_643_000),
        resources: vec![ResourceState {
            resource_id: "docs".into(),
            status: crate::ResourceStatus::Ok,
            last_row_count: 2,
            retryable: true,
            acl_warning: "members could not be read".into(),
            page_acl_warning: "2 pages' restrictions could not be read".into(),
            ..ResourceState::default()
        }],
        ..SyncOutcome::default()
    };
    assert!(store
        .finish_sync(&lease, &outcome, moment(43_000))
        .await
        .unwrap());
    let record = store.get_connector(&org, "con_a").await.unwrap().unwrap();
    assert_eq!(record.run_id, None);
    assert_eq!(record.first_sync_at, Some(moment(43_000)));
    assert_eq!(record.next_sync_at, Some(moment(3_643_000)));
    assert_eq!(record.documents_dispatched, 3);
    assert_eq!(
        record.resources_pending_first_sync, 1,
        "notes has not finished a pass"
    );
    let runs = store.list_runs(&org, "con_a", 10).await.unwrap();
    let snapshot = store
        .connector_snapshot(&org, "con_a", 10)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(snapshot.connector, record);
    assert_eq!(snapshot.runs, runs);
    assert_eq!(
        snapshot.resources,
        store.list_resources(&org, "con_a").await.unwrap().unwrap()
    );
    let run_m = runs.iter().find(|r| r.run_id == "run_m").unwrap();
    assert_eq!(
        (run_m.state.as_str(), run_m.added, run_m.deleted),
        ("succeeded", 1, 1)
    );
    let docs = store
        .list_resources(&org, "con_a")
        .await
        .unwrap()
        .unwrap()
        .remove(0);
    assert_eq!(
        (docs.provider_cursor.as_str(), docs.state.status.as_str()),
        ("done-1", "ok")
    );
    assert_eq!(
        (
            docs.state.acl_warning.as_str(),
            docs.state.page_acl_warning.as_str()
        ),
        (
            "members could not be read",
            "2 pages' restrictions could not be read"
        )
    );
    assert_eq!(store.object_counts(&org, "con_a").await.unwrap(), (2, 2));

    // Rejected credentials hold it until new ones come; paused, nothing runs and renewals fail.
    store
        .request_sync(&org, "con_a", "run_5", moment(44_000))
        .await
        .unwrap();
    let claimed = store
        .claim_sync("run_6", moment(45_000), moment(55_000))
        .await
        .unwrap()
        .unwrap();
    let lease = SyncLease {
        connector_id: "con_a".into(),
        run_id: claimed.run_id,
    };
    let rejected = SyncOutcome {
        error: "the provider rejected the credentials".into(),
        action: "update the credentials".into(),
        needs_reauth: Some("401 from the provider".into()),
        next_sync_at: moment(46_000),
        ..SyncOutcome::default()
    };
    assert!(store
        .finish_sync(&lease, &rejected, moment(45_500))
        .await
        .unwrap());
    let record = store.get_connector(&org, "con_a").await.unwrap().unwrap();
    assert_eq!(record.needs_reauth_at, Some(moment(45_500)));
    assert_eq!(record.failures, 1);
    assert_eq!(
        store
            .claim_sync("run_7", moment(47_000), moment(57_000))
            .await
            .unwrap(),
        None
    );
    let fixed = ConnectorUpdate {
        credentials: Some(vec![9]),
        ..ConnectorUpdate::default()
    };
    let record = store
        .update_connector(&org, "con_a", &fixed, moment(48_000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (record.needs_reauth_at, record.needs_reauth_reason.as_str()),
        (None, "")
    );
    assert_eq!(record.credentials.as_deref(), Some(&[9][..]));
    assert_eq!(
        record.next_sync_at,
        Some(moment(48_000)),
        "due again at once"
    );
    store
        .set_paused(&org, "con_a", true, moment(48_500))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        store
            .request_sync(&org, "con_a", "run_8", moment(49_000))
            .await
            .unwrap(),
        SyncRequest::Paused
    );
    assert_eq!(
        store
            .claim_sync("run_9", moment(49_000), moment(59_000))
            .await
            .unwrap(),
        None
    );
    let resumed = store
        .set_paused(&org, "con_a", false, moment(50_000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (resumed.paused_at, resumed.next_sync_at),
        (None, Some(moment(50_000)))
    );
    let claimed = store
        .claim_sync("run_10", moment(50_500), moment(60_000))
        .await
        .unwrap()
        .unwrap();
    store
        .set_paused(&org, "con_a", true, moment(51_000))
        .await
        .unwrap();
    let lease = SyncLease {
        connector_id: "con_a".into(),
        run_id: claimed.run_id,
    };
    assert!(
        !store.renew_sync(&lease, moment(70_000)).await.unwrap(),
        "a pause stops the run"
    );

    // Resources: an access rule set and removed; a deleted resource takes its records.
    let acl = ResourceUpdate {
        acl: Some(Some(vec!["alice@example.com".into()])),
        ..ResourceUpdate::default()
    };
    let docs = store
        .update_resource(&org, "con_a", "docs", &acl, moment(52_000))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        docs.resource.acl,
        Some(vec!["alice@example.com".to_owned()])
    );
    let other = OrgId::from_trusted("conn-org-2");
    assert_eq!(
        store
            .update_resource(&other, "con_a", "docs", &acl, moment(52_000))
            .await
            .unwrap(),
        None
    );
    assert!(!store
        .delete_resource(&other, "con_a", "docs")
        .await
        .unwrap());
    assert!(store.delete_resource(&org, "con_a", "docs").await.unwrap());
    assert_eq!(store.object_counts(&org, "con_a").await.unwrap(), (0, 0));

    // A deleted database takes its connectors.
    let scope = crate::DatabaseScope {
        org: org.clone(),
        id: DatabaseId::from_trusted("db_conn_1"),
    };
    assert!(store
        .schedule_deletion(&scope, moment(53_000))
        .await
        .unwrap());
    store.purge_database(&scope.id).await.unwrap();
    assert!(store.list_connectors(&org, None).await.unwrap().is_empty());
}

/// An access rule filter reads `additional_metadata.acl`: no rule, an empty or non-list value,
/// or a list naming one of the principals passes; a list naming none of them does not.
async fn access_rules_filter_what_a_principal_may_read<S: Store>(store: &S) {
    use super::{item, setup};
    use crate::{FilterValue, ItemQuery};
    let scope = setup(store, "db_conn_acl", "conn-org-acl").await;
    let rules = [
        ("open", serde_json::json!({})),
        ("null", serde_json::json!({"acl": null})),
        ("alice", serde_json::json!({"acl": ["alice@example.com"]})),
        (
            "group",
            serde_json::json!({"acl": ["group:eng", "bob@example.com"]}),
        ),
        ("public", serde_json::json!({"acl": ["__public__"]})),
        ("private", serde_json::json!({"acl": ["__private__"]})),
    ];
    for (n, (id, extra)) in rules.iter().enumerate() {
        let mut it = item("c", id, "text");
        it.fields.additional_metadata = extra.clone();
        store
            .enqueue_items(&scope, std::slice::from_ref(&it), true, moment(n as i64))
            .await
            .unwrap();
    }
    let readable = |principals: &[&str]| ItemQuery {
        kind: Some(engram_types::ItemKind::Knowledge),
        page: 1,
        page_size: 50,
        additional_metadata: vec![(
            "acl".into(),
            FilterValue::Readable(principals.iter().map(|p| (*p).to_owned()).collect()),
        )],
        ..ItemQuery::default()
    };
    for (principals, expected) in [
        (
            vec!["alice@example.com", "__public__"],
            vec!["alice", "null", "open", "public"],
        ),
        (
            vec!["group:eng", "__public__"],
            vec!["group", "null", "open", "public"],
        ),
        (
            vec!["eve@example.com", "__public__"],
            vec!["null", "open", "public"],
        ),
    ] {
        let mut ids: Vec<String> = store
            .list_items(&scope, &readable(&principals), moment(100))
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|i| i.id)
            .collect();
        ids.sort();
        assert_eq!(ids, expected, "{principals:?}");
    }
}

/// A refreshed token is written only by the lease's holder, and a refresh outside a sync takes
/// the lease first, so two instances never refresh one connector at once.
async fn credentials_are_replaced_only_under_the_lease<S: Store>(store: &S) {
    let org = OrgId::from_trusted("conn-org-3");
    store
        .create_database(&new_db("db_conn_3", "conn-org-3", "refreshing"))
        .await
        .unwrap();
    let made = store
        .create_connector(&connector("con_r", "conn-org-3", "db_conn_3", "acct"), 10)
        .await
        .unwrap();
    let mine = SyncLease {
        connector_id: "con_r".into(),
        run_id: "refresh_1".into(),
    };
    let theirs = SyncLease {
        connector_id: "con_r".into(),
        run_id: "refresh_2".into(),
    };
    // Another organization cannot take it.
    assert!(!store
        .take_lease(
            &OrgId::from_trusted("conn-org-1"),
            "con_r",
            "x",
            moment(100_000),
            moment(110_000)
        )
        .await
        .unwrap());
    assert!(store
        .take_lease(
            &org,
            "con_r",
            &mine.run_id,
            moment(100_000),
            moment(110_000)
        )
        .await
        .unwrap());
    assert!(
        !store
            .take_lease(
                &org,
                "con_r",
                &theirs.run_id,
                moment(105_000),
                moment(115_000)
            )
            .await
            .unwrap(),
        "one holder at a time"
    );
    assert!(!store
        .replace_credentials(&theirs, &[7], moment(105_000))
        .await
        .unwrap());
    assert!(store
        .replace_credentials(&mine, &[9, 9], moment(106_000))
        .await
        .unwrap());
    let record = store.get_connector(&org, "con_r").await.unwrap().unwrap();
    assert_eq!(record.credentials.as_deref(), Some(&[9, 9][..]));
    assert_eq!(
        record.credentials_updated_at, made.credentials_updated_at,
        "a refresh is not the user's change"
    );
    store.release_lease(&mine).await.unwrap();
    assert!(store
        .take_lease(
            &org,
            "con_r",
            &theirs.run_id,
            moment(107_000),
            moment(117_000)
        )
        .await
        .unwrap());
    assert!(
        !store
            .replace_credentials(&mine, &[1], moment(108_000))
            .await
            .unwrap(),
        "a released lease writes nothing"
    );
    assert!(
        !store
            .replace_credentials(&theirs, &[2], moment(200_000))
            .await
            .unwrap(),
        "a lapsed lease writes nothing"
    );
    let record = store.get_connector(&org, "con_r").await.unwrap().unwrap();
    assert_eq!(record.credentials.as_deref(), Some(&[9, 9][..]));
    // A lapsed lease is taken over.
    assert!(store
        .take_lease(
            &org,
            "con_r",
            &mine.run_id,
            moment(200_000),
            moment(210_000)
        )
        .await
        .unwrap());
    store.release_lease(&mine).await.unwrap();

    // Push deliveries: found by id alone; a delivery id seen before is a replay.
    let pushed = store.connector_for_push("con_r").await.unwrap().unwrap();
    assert_eq!(pushed.org, org);
    assert!(store
        .connector_for_push("con_none")
        .await
        .unwrap()
        .is_none());
    assert!(store
        .note_delivery("con_r", "d-1", moment(300_000), moment(0))
        .await
        .unwrap());
    assert!(!store
        .note_delivery("con_r", "d-1", moment(301_000), moment(0))
        .await
        .unwrap());
    assert!(store
        .note_delivery("con_r", "d-2", moment(302_000), moment(0))
        .await
        .unwrap());
    // Forgotten once old enough.
    assert!(store
        .note_delivery("con_r", "d-1", moment(400_000), moment(301_500))
        .await
        .unwrap());
    assert!(!store
        .note_delivery("con_r", "d-2", moment(400_000), moment(301_500))
        .await
        .unwrap());
}
