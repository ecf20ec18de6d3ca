//! Several engram instances on one PostgreSQL database, as behind a load balancer. Runs in
//! `make test`'s PostgreSQL pass; on SQLite (one serving process per data directory) there is
//! nothing to share, and the test says so and ends.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::receiver::{Answer, Received, Receiver};
use crate::common::{app, wait_completed, Server};
use crate::webhooks::{deliveries, ingest, received_events, register, FAST, WAIT};

/// Ids of the items the query for `text` finds, through `server`.
async fn found(server: &Server, key: &str, text: &str) -> BTreeSet<String> {
    let reply = server
        .post(
            "/query",
            key,
            json!({"database": "shared", "query": text, "max_results": 50}),
        )
        .await;
    reply.current_ok(200)["chunks"]
        .as_array()
        .expect("chunks")
        .iter()
        .map(|c| c["id"].as_str().expect("id").to_owned())
        .collect()
}

/// Runs SQL on the shared database; returns psql's unaligned rows.
pub(crate) fn sql(server: &Server, query: &str) -> String {
    let url = server.storage_url.as_deref().expect("a PostgreSQL server");
    let out = Command::new("psql")
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", query, url])
        .output()
        .expect("psql");
    assert!(out.status.success(), "{query}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Short leases, so a lost instance's claims (items and deliveries) run out soon; small
/// batches, so a fault lands while the instances have items in hand.
pub(crate) fn short_leases() -> Vec<(&'static str, &'static str)> {
    let mut envs: Vec<(&str, &str)> = FAST
        .iter()
        .copied()
        .filter(|(name, _)| *name != "ENGRAM_WEBHOOKS__MAX_ATTEMPTS")
        .collect();
    envs.extend([
        ("ENGRAM_PIPELINE__LEASE_MS", "1500"),
        ("ENGRAM_PIPELINE__HEARTBEAT_MS", "500"),
        ("ENGRAM_PIPELINE__BATCH_ITEMS", "2"),
    ]);
    envs
}

#[tokio::test]
async fn two_instances_share_one_store_and_one_finishes_what_a_killed_one_left() {
    let envs = short_leases();
    let mut a = Server::start_with(&envs);
    if a.storage_url.is_none() {
        eprintln!("scale-out: SQLite run, nothing shared; see the PostgreSQL pass");
        return;
    }
    let b = Server::start_beside(&a, &envs);
    // A key made on the shared store works on every instance; so does a database.
    let key = a.key("org-scale", &[]);
    a.ready_database(&key, "shared").await;
    b.wait_ready(&key, "shared").await;

    // Accepted through A, completed, then found through B by its very next query.
    ingest(
        &a,
        &key,
        "shared",
        &[app(
            "first",
            "Aardvark",
            "The aardvark digs burrows at night.",
        )],
    )
    .await;
    wait_completed(&a, &key, "shared", None, &["first"]).await;
    let asked = Instant::now();
    assert!(found(&b, &key, "aardvark burrows").await.contains("first"));
    assert!(
        asked.elapsed() < Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    // Deleted through B: gone from A's answers at once.
    let deleted = b
        .call(
            Method::DELETE,
            "/context",
            Some(&key),
            Some(json!({"database": "shared", "ids": ["first"], "type": "knowledge"})),
        )
        .await;
    deleted.current_ok(200);
    assert!(!found(&a, &key, "aardvark burrows").await.contains("first"));

    // Thirty items through A with slow webhook answers; A is killed with items and deliveries
    // in flight. B finishes everything.
    let receiver = Receiver::start().await;
    register(&a, &key, json!({"url": receiver.url})).await;
    receiver.answer_by_default(Answer::Stall(Duration::from_millis(700)));
    let items: Vec<Value> = (0..30)
        .map(|i| {
            app(
                &format!("item-{i}"),
                "Shared",
                &format!("Item number {i} mentions the word zebra{i}."),
            )
        })
        .collect();
    let ids: Vec<String> = (0..30).map(|i| format!("item-{i}")).collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    ingest(&a, &key, "shared", &items).await;
    received_events(&receiver, 3).await;
    a.kill();
    receiver.answer_by_default(Answer::Status(200));

    wait_completed(&b, &key, "shared", None, &ids).await;
    // Each item indexed once: one chunk each, no duplicate.
    assert_eq!(
        sql(&b, "SELECT count(*), count(DISTINCT item_key) FROM chunks"),
        "30|30"
    );
    for i in [0, 17, 29] {
        assert!(
            found(&b, &key, &format!("zebra{i}"))
                .await
                .contains(&format!("item-{i}")),
            "item-{i} found through B"
        );
    }
    // Every event delivered at least once, one delivery id per event.
    let history = crate::common::eventually(WAIT, "all 30 delivered", || async {
        let page = deliveries(&b, &key, "?limit=100").await;
        let events: Vec<Value> = page["deliveries"]
            .as_array()
            .expect("deliveries")
            .iter()
            .filter(|d| d["doc_id"] != "first")
            .cloned()
            .collect();
        (events.len() == 30 && events.iter().all(|d| d["status"] == "delivered")).then_some(events)
    })
    .await;
    let mut per_item: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for delivery in &history {
        per_item
            .entry(delivery["doc_id"].as_str().expect("doc_id").to_owned())
            .or_default()
            .insert(delivery["delivery_id"].as_str().expect("id").to_owned());
    }
    assert_eq!(per_item.len(), 30, "one event per item");
    assert!(per_item.values().all(|ids| ids.len() == 1), "{per_item:?}");
    let recorded: BTreeSet<String> = per_item.into_values().flatten().collect();
    let received: BTreeSet<String> = receiver
        .received()
        .iter()
        .filter(|r| r.json()["id"] != "first")
        .map(Received::delivery_id)
        .collect();
    assert_eq!(received, recorded, "every event reached the receiver");

    // A new instance joins and serves what is there.
    let c = Server::start_beside(&a, &envs);
    assert!(found(&c, &key, "zebra5").await.contains("item-5"));
}

/// A key's request budget holds across instances: requests spread over two instances are
/// counted together.
#[tokio::test]
async fn a_keys_rate_limit_holds_across_instances() {
    let envs = [
        ("ENGRAM_RATE_LIMIT__ENABLED", "true"),
        ("ENGRAM_RATE_LIMIT__REQUESTS_PER_SECOND", "1"),
        ("ENGRAM_RATE_LIMIT__BURST", "4"),
    ];
    let a = Server::start_with(&envs);
    if a.storage_url.is_none() {
        eprintln!("scale-out: SQLite run, nothing shared; see the PostgreSQL pass");
        return;
    }
    let b = Server::start_beside(&a, &envs);
    let key = a.key("org-scale-rate", &[]);
    let other = a.key("org-scale-rate", &[]);
    let mut statuses = Vec::new();
    for server in [&a, &b, &a, &b, &a, &b] {
        statuses.push(server.get("/databases", &key).await.status.as_u16());
    }
    assert_eq!(
        statuses,
        [200, 200, 200, 200, 429, 429],
        "four in all, not four each"
    );
    let limited = b.get("/databases", &key).await;
    assert!(limited.header("retry-after").is_some(), "{limited:#?}");
    assert_eq!(b.get("/databases", &other).await.status.as_u16(), 200);
}
