//! Webhook registration, the outbox written with terminal states, claims and leases of
//! deliveries, manual retries and the history's pages, with organizations kept apart.

use std::time::Duration;

use engram_types::{DeliveryStatus, IndexingStatus, OrgId, UnixMs};

use super::items::{chunk, claim_ours, item, setup};
use super::moment;
use crate::{
    ClaimedDelivery, DeliveryOutcome, DeliveryQuery, ItemFailure, Requeue, SecretChange, Store,
    INDEXING_STATUS_CHANGED,
};

pub(super) async fn run_all<S: Store>(store: &S) {
    registration_keeps_or_replaces_the_secret(store).await;
    terminal_states_write_outbox_rows_only_with_a_webhook(store).await;
    claims_lease_and_recover_deliveries(store).await;
    history_pages_are_stable_and_scoped(store).await;
}

fn events() -> Vec<String> {
    vec![INDEXING_STATUS_CHANGED.to_owned()]
}

fn all(limit: u32) -> DeliveryQuery {
    DeliveryQuery {
        status: None,
        before: None,
        limit,
    }
}

/// Claims every due delivery of `org` (the queue is shared by every case).
async fn claim_org<S: Store>(
    store: &S,
    org: &OrgId,
    owner: &str,
    now: UnixMs,
) -> Vec<ClaimedDelivery> {
    store
        .claim_deliveries(owner, now, Duration::from_millis(10_000), 1_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| &c.record.org == org)
        .collect()
}

async fn registration_keeps_or_replaces_the_secret<S: Store>(store: &S) {
    let org = OrgId::from_trusted("conf-hooks-1");
    let other = OrgId::from_trusted("conf-hooks-1b");
    assert_eq!(store.webhook(&org).await.unwrap(), None);
    assert!(!store
        .set_signing_secret(&org, Some("x"), moment(1))
        .await
        .unwrap());
    let first = store
        .put_webhook(
            &org,
            "https://a.example/hook",
            &events(),
            SecretChange::Keep,
            moment(10),
        )
        .await
        .unwrap();
    assert_eq!(first.signing_secret, None);
    assert_eq!(first.event_types, events());
    let with_secret = store
        .put_webhook(
            &org,
            "https://a.example/hook",
            &events(),
            SecretChange::Set("0123456789abcdef".into()),
            moment(20),
        )
        .await
        .unwrap();
    assert_eq!(
        with_secret.signing_secret.as_deref(),
        Some("0123456789abcdef")
    );
    assert_eq!(
        with_secret.created_at,
        moment(10),
        "a replacement keeps the creation time"
    );
    let moved = store
        .put_webhook(
            &org,
            "https://b.example/hook",
            &events(),
            SecretChange::Keep,
            moment(30),
        )
        .await
        .unwrap();
    assert_eq!(moved.url, "https://b.example/hook");
    assert_eq!(
        moved.signing_secret.as_deref(),
        Some("0123456789abcdef"),
        "editing the URL never changes signing"
    );
    assert_eq!(store.webhook(&other).await.unwrap(), None);
    assert!(store
        .set_signing_secret(&org, None, moment(40))
        .await
        .unwrap());
    assert_eq!(
        store.webhook(&org).await.unwrap().unwrap().signing_secret,
        None
    );
    assert!(!store.delete_webhook(&other).await.unwrap());
    assert!(store.delete_webhook(&org).await.unwrap());
    assert_eq!(store.webhook(&org).await.unwrap(), None);
    assert!(!store.delete_webhook(&org).await.unwrap());
}

async fn terminal_states_write_outbox_rows_only_with_a_webhook<S: Store>(store: &S) {
    let scope = setup(store, "db_hooks_2", "conf-hooks-2").await;
    let org = scope.org.clone();
    store
        .enqueue_items(&scope, &[item("c", "before", "text")], true, moment(100))
        .await
        .unwrap();
    let claimed = claim_ours(store, &scope, "w", moment(110)).await;
    assert!(store
        .complete_item(
            &claimed[0],
            &[chunk("hook-b0", 0, "text")],
            crate::AfterChunks::Completed,
            moment(120)
        )
        .await
        .unwrap());
    assert!(
        store
            .list_deliveries(&org, &all(100))
            .await
            .unwrap()
            .is_empty(),
        "no webhook, no event"
    );

    store
        .put_webhook(
            &org,
            "https://h.example/in",
            &events(),
            SecretChange::Keep,
            moment(130),
        )
        .await
        .unwrap();
    store
        .enqueue_items(
            &scope,
            &[
                item("c", "ok", "a"),
                item("c", "bad", "b"),
                item("c", "again", "c"),
            ],
            true,
            moment(140),
        )
        .await
        .unwrap();
    let claimed = claim_ours(store, &scope, "w", moment(150)).await;
    assert_eq!(claimed.len(), 3);
    let by_id = |id: &str| claimed.iter().find(|c| c.id == id).unwrap();
    assert!(store
        .complete_item(
            by_id("ok"),
            &[chunk("hook-ok0", 0, "a")],
            crate::AfterChunks::Completed,
            moment(160)
        )
        .await
        .unwrap());
    let terminal = ItemFailure {
        code: engram_types::ItemErrorCode::NoText,
        message: "no text".into(),
        retry_at: None,
    };
    assert!(store
        .fail_item(by_id("bad"), &terminal, moment(170))
        .await
        .unwrap());
    let transient = ItemFailure {
        code: engram_types::ItemErrorCode::Transient,
        message: "later".into(),
        retry_at: Some(moment(10_000)),
    };
    assert!(store
        .fail_item(by_id("again"), &transient, moment(180))
        .await
        .unwrap());
    // A stale claim writes neither the state nor an event.
    assert!(!store
        .fail_item(by_id("bad"), &terminal, moment(190))
        .await
        .unwrap());

    let listed = store.list_deliveries(&org, &all(100)).await.unwrap();
    assert_eq!(
        listed.len(),
        2,
        "only terminal states are events: {listed:?}"
    );
    let (bad, ok) = (&listed[0], &listed[1]);
    assert_eq!(ok.item_id, "ok");
    assert_eq!(ok.indexing_status, IndexingStatus::Completed);
    assert_eq!(ok.database_name, "db_hooks_2");
    assert_eq!(ok.database_id, scope.id);
    assert_eq!(ok.collection, "c");
    assert_eq!(ok.event_type, INDEXING_STATUS_CHANGED);
    assert_eq!(ok.status, DeliveryStatus::Pending);
    assert_eq!((ok.attempts, ok.created_at), (0, moment(160)));
    assert!(ok.delivery_id.starts_with("dlv_"));
    assert_eq!(bad.item_id, "bad");
    assert_eq!(bad.indexing_status, IndexingStatus::Errored);
    assert_eq!(
        (
            bad.item_error_code.as_str(),
            bad.item_error_message.as_str()
        ),
        ("E2002", "no text")
    );
    assert_ne!(ok.delivery_id, bad.delivery_id);

    let stranger = OrgId::from_trusted("conf-hooks-2b");
    assert!(store
        .list_deliveries(&stranger, &all(100))
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        store.delivery(&stranger, &ok.delivery_id).await.unwrap(),
        None
    );
    assert_eq!(
        store
            .delivery(&org, &ok.delivery_id)
            .await
            .unwrap()
            .as_ref(),
        Some(ok)
    );
    assert_eq!(
        store
            .requeue_delivery(&stranger, &ok.delivery_id, moment(200))
            .await
            .unwrap(),
        Requeue::NotFound
    );
    // Leave nothing due for the other cases' claims.
    for claimed in claim_org(store, &org, "cleanup", moment(1_000)).await {
        let outcome = DeliveryOutcome::Delivered {
            status_code: 200,
            url: "https://h.example/in".into(),
        };
        assert!(store
            .finish_delivery(&claimed, &outcome, moment(1_001))
            .await
            .unwrap());
    }
}

async fn claims_lease_and_recover_deliveries<S: Store>(store: &S) {
    let scope = setup(store, "db_hooks_3", "conf-hooks-3").await;
    let org = scope.org.clone();
    store
        .put_webhook(
            &org,
            "https://h.example/3",
            &events(),
            SecretChange::Keep,
            moment(100),
        )
        .await
        .unwrap();
    store
        .enqueue_items(&scope, &[item("c", "x", "text")], true, moment(100))
        .await
        .unwrap();
    let claimed = claim_ours(store, &scope, "w", moment(110)).await;
    assert!(store
        .complete_item(
            &claimed[0],
            &[chunk("hook-x0", 0, "text")],
            crate::AfterChunks::Completed,
            moment(120)
        )
        .await
        .unwrap());

    let first = claim_org(store, &org, "d1", moment(130)).await;
    assert_eq!(first.len(), 1);
    assert_eq!(
        first[0].record.status,
        DeliveryStatus::Pending,
        "the first send"
    );
    assert!(
        claim_org(store, &org, "d2", moment(131)).await.is_empty(),
        "leased"
    );
    let failed = DeliveryOutcome::Failed {
        code: "RECEIVER_ERROR".into(),
        message: "receiver answered 500".into(),
        status_code: Some(500),
        url: "https://h.example/3".into(),
        retry_at: Some(moment(5_000)),
    };
    assert!(store
        .finish_delivery(&first[0], &failed, moment(140))
        .await
        .unwrap());
    assert!(
        !store
            .finish_delivery(&first[0], &failed, moment(141))
            .await
            .unwrap(),
        "a claim records one attempt"
    );
    let id = first[0].record.delivery_id.clone();
    let record = store.delivery(&org, &id).await.unwrap().unwrap();
    assert_eq!(record.status, DeliveryStatus::Failed);
    assert_eq!(record.attempts, 1);
    assert_eq!(record.last_status_code, Some(500));
    assert_eq!(record.error_code.as_deref(), Some("RECEIVER_ERROR"));
    assert!(
        claim_org(store, &org, "d1", moment(4_999)).await.is_empty(),
        "not due yet"
    );

    // Due: the sweep claims it; the claimant crashes; after the lease it is claimed again and
    // the first claim can no longer write.
    let swept = claim_org(store, &org, "d1", moment(5_000)).await;
    assert_eq!(swept.len(), 1);
    assert_eq!(swept[0].record.status, DeliveryStatus::Sweeping);
    assert!(claim_org(store, &org, "d2", moment(14_999))
        .await
        .is_empty());
    let recovered = claim_org(store, &org, "d2", moment(15_000)).await;
    assert_eq!(recovered.len(), 1, "an expired lease is recovered");
    assert_eq!(recovered[0].record.status, DeliveryStatus::Sweeping);
    let delivered = DeliveryOutcome::Delivered {
        status_code: 204,
        url: "https://h.example/3".into(),
    };
    assert!(!store
        .finish_delivery(&swept[0], &delivered, moment(15_001))
        .await
        .unwrap());
    assert!(store
        .finish_delivery(&recovered[0], &delivered, moment(15_002))
        .await
        .unwrap());
    let record = store.delivery(&org, &id).await.unwrap().unwrap();
    assert_eq!(record.status, DeliveryStatus::Delivered);
    assert_eq!((record.attempts, record.error_code), (2, None));
    assert_eq!(
        store
            .requeue_delivery(&org, &id, moment(16_000))
            .await
            .unwrap(),
        Requeue::NotRetryable(DeliveryStatus::Delivered)
    );
    assert_eq!(
        store
            .requeue_delivery(&org, "dlv_none", moment(16_000))
            .await
            .unwrap(),
        Requeue::NotFound
    );

    // Permanently failed, then retried by hand: pending again and due at once.
    store
        .enqueue_items(&scope, &[item("c", "y", "text")], true, moment(20_000))
        .await
        .unwrap();
    let claimed = claim_ours(store, &scope, "w", moment(20_010)).await;
    assert!(store
        .complete_item(
            &claimed[0],
            &[chunk("hook-y0", 0, "text")],
            crate::AfterChunks::Completed,
            moment(20_020)
        )
        .await
        .unwrap());
    let attempt = claim_org(store, &org, "d1", moment(20_030)).await;
    let last = DeliveryOutcome::Failed {
        code: "TIMEOUT".into(),
        message: "slow".into(),
        status_code: None,
        url: "https://h.example/3".into(),
        retry_at: None,
    };
    assert!(store
        .finish_delivery(&attempt[0], &last, moment(20_040))
        .await
        .unwrap());
    let id = attempt[0].record.delivery_id.clone();
    let record = store.delivery(&org, &id).await.unwrap().unwrap();
    assert_eq!(record.status, DeliveryStatus::PermanentlyFailed);
    assert!(
        claim_org(store, &org, "d1", moment(99_000))
            .await
            .is_empty(),
        "no automatic retry"
    );
    assert_eq!(
        store
            .requeue_delivery(&org, &id, moment(30_000))
            .await
            .unwrap(),
        Requeue::Queued
    );
    let record = store.delivery(&org, &id).await.unwrap().unwrap();
    assert_eq!(record.status, DeliveryStatus::Pending);
    let again = claim_org(store, &org, "d1", moment(30_000)).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].record.attempts, 1);
    assert!(store
        .finish_delivery(&again[0], &delivered, moment(30_001))
        .await
        .unwrap());
}

async fn history_pages_are_stable_and_scoped<S: Store>(store: &S) {
    let scope = setup(store, "db_hooks_4", "conf-hooks-4").await;
    let org = scope.org.clone();
    store
        .put_webhook(
            &org,
            "https://h.example/4",
            &events(),
            SecretChange::Keep,
            moment(100),
        )
        .await
        .unwrap();
    let mut now = 1_000;
    let mut index = |ids: Vec<String>| {
        now += 100;
        let at = now;
        let scope = scope.clone();
        async move {
            let items: Vec<_> = ids.iter().map(|id| item("c", id, "text")).collect();
            store
                .enqueue_items(&scope, &items, true, moment(at))
                .await
                .unwrap();
            for claimed in claim_ours(store, &scope, "w", moment(at + 1)).await {
                let chunk_id = format!("hook4-{}", claimed.id);
                assert!(store
                    .complete_item(
                        &claimed,
                        &[chunk(&chunk_id, 0, "text")],
                        crate::AfterChunks::Completed,
                        moment(at + 2)
                    )
                    .await
                    .unwrap());
            }
        }
    };
    index((0..5).map(|i| format!("p{i}")).collect()).await;
    let page1 = store.list_deliveries(&org, &all(2)).await.unwrap();
    assert_eq!(page1.len(), 2);
    // New deliveries arrive between pages: they sort before the cursor, so the walk neither
    // skips nor repeats.
    index((5..8).map(|i| format!("p{i}")).collect()).await;
    let mut seen: Vec<String> = page1.iter().map(|d| d.item_id.clone()).collect();
    let mut before = page1.last().map(|d| d.key);
    loop {
        let query = DeliveryQuery {
            status: None,
            before,
            limit: 2,
        };
        let page = store.list_deliveries(&org, &query).await.unwrap();
        let Some(last) = page.last() else { break };
        before = Some(last.key);
        seen.extend(page.iter().map(|d| d.item_id.clone()));
    }
    let mut expected: Vec<String> = (0..5).rev().map(|i| format!("p{i}")).collect();
    expected.sort();
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(
        sorted, expected,
        "pages of the first five, each once: {seen:?}"
    );

    let newest = store.list_deliveries(&org, &all(100)).await.unwrap();
    assert_eq!(newest.len(), 8);
    assert!(
        newest.windows(2).all(|w| w[0].key > w[1].key),
        "newest first"
    );
    let only_pending = DeliveryQuery {
        status: Some(DeliveryStatus::Pending),
        before: None,
        limit: 100,
    };
    assert_eq!(
        store
            .list_deliveries(&org, &only_pending)
            .await
            .unwrap()
            .len(),
        8
    );
    let only_failed = DeliveryQuery {
        status: Some(DeliveryStatus::Failed),
        ..only_pending
    };
    assert!(store
        .list_deliveries(&org, &only_failed)
        .await
        .unwrap()
        .is_empty());
    store
        .purge_deliveries(moment(i64::MAX), 10_000)
        .await
        .unwrap();
    assert_eq!(
        store.list_deliveries(&org, &all(100)).await.unwrap().len(),
        8,
        "retention never removes deliveries still to be made"
    );
    for claimed in claim_org(store, &org, "cleanup", moment(1_000_000)).await {
        let outcome = DeliveryOutcome::Delivered {
            status_code: 200,
            url: "https://h.example/4".into(),
        };
        assert!(store
            .finish_delivery(&claimed, &outcome, moment(1_000_001))
            .await
            .unwrap());
    }
    store
        .purge_deliveries(moment(1_000_001), 10_000)
        .await
        .unwrap();
    assert_eq!(
        store.list_deliveries(&org, &all(100)).await.unwrap().len(),
        8,
        "not old enough"
    );
    assert!(
        store
            .purge_deliveries(moment(1_000_002), 10_000)
            .await
            .unwrap()
            >= 8
    );
    assert!(store
        .list_deliveries(&org, &all(100))
        .await
        .unwrap()
        .is_empty());
}
