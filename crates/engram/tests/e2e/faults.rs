//! Faults of the system around the process, injected while two instances share one
//! PostgreSQL database: an instance frozen for longer than its leases, and every connection to
//! the database dropped. PostgreSQL pass only (SQLite serves one process per data directory).

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::receiver::{Answer, Receiver};
use crate::common::{app, eventually, wait_completed, Server};
use crate::scale_out::{short_leases, sql};
use crate::webhooks::{deliveries, ingest, received_events, register, WAIT};

fn items(prefix: &str, count: usize) -> (Vec<Value>, Vec<String>) {
    let items = (0..count)
        .map(|i| {
            app(
                &format!("{prefix}-{i}"),
                "Fault",
                &format!("Item {i} of {prefix} mentions the word quokka{i}."),
            )
        })
        .collect();
    let ids = (0..count).map(|i| format!("{prefix}-{i}")).collect();
    (items, ids)
}

/// Every item of `ids` indexed once (one chunk each), and one delivered event per item.
async fn each_once(server: &Server, key: &str, ids: &[String]) {
    let listed = ids
        .iter()
        .map(|id| format!("'{id}'"))
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        sql(
            server,
            &format!(
                "SELECT count(*), count(DISTINCT c.item_key) FROM chunks c JOIN items i \
                 ON i.item_key = c.item_key WHERE i.id IN ({listed})"
            )
        ),
        format!("{}|{}", ids.len(), ids.len()),
        "each item indexed once"
    );
    let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    let history = eventually(WAIT, "every event delivered", || async {
        let page = deliveries(server, key, "?limit=100").await;
        let events: Vec<Value> = page["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| wanted.contains(d["doc_id"].as_str().unwrap_or_default()))
            .cloned()
            .collect();
        (events.len() == ids.len() && events.iter().all(|d| d["status"] == "delivered"))
            .then_some(events)
    })
    .await;
    let mut per_item: BTreeMap<String, usize> = BTreeMap::new();
    for delivery in &history {
        *per_item
            .entry(delivery["doc_id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert!(per_item.values().all(|n| *n == 1), "{per_item:?}");
}

/// An instance frozen (SIGSTOP) with items and deliveries in hand for longer than its leases:
/// the other takes its work over; woken (SIGCONT), it writes nothing for work it no longer
/// holds (its claims are fenced by owner and version, deliveries by a per-claim lease), and
/// serves again. Nothing is lost, nothing done twice, and `engram check` finds nothing.
#[tokio::test]
async fn a_frozen_instance_wakes_to_find_its_work_done_and_writes_none_of_it() {
    let envs = short_leases();
    let a = Server::start_with(&envs);
    if a.storage_url.is_none() {
        return;
    }
    let b = Server::start_beside(&a, &envs);
    let key = a.key("org-frozen", &[]);
    a.ready_database(&key, "shared").await;
    b.wait_ready(&key, "shared").await;
    let receiver = Receiver::start().await;
    register(&a, &key, json!({"url": receiver.url})).await;
    receiver.answer_by_default(Answer::Stall(Duration::from_millis(500)));
    let (batch, ids) = items("frozen", 30);
    ingest(&a, &key, "shared", &batch).await;
    received_events(&receiver, 2).await;
    a.signal("STOP");
    receiver.answer_by_default(Answer::Status(200));
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    wait_completed(&b, &key, "shared", None, &refs).await;
    each_once(&b, &key, &ids).await;

    a.signal("CONT");
    // Awake: it answers again, and whatever it was doing when frozen changes nothing.
    eventually(WAIT, "the woken instance answers", || async {
        let reply = a.get("/databases", &key).await;
        (reply.status == 200).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    each_once(&b, &key, &ids).await;
    b.assert_consistent();
}

/// Every connection of both instances to PostgreSQL dropped (as a restart or a network blip
/// does) while they index: requests meanwhile are answered (503 with `Retry-After` at worst,
/// never another 5xx), both reconnect without a restart, and every item completes once.
#[tokio::test]
async fn dropped_database_connections_are_survived_without_a_restart() {
    let envs = short_leases();
    let a = Server::start_with(&envs);
    if a.storage_url.is_none() {
        return;
    }
    let b = Server::start_beside(&a, &envs);
    let key = a.key("org-dropped", &[]);
    a.ready_database(&key, "shared").await;
    b.wait_ready(&key, "shared").await;
    let receiver = Receiver::start().await;
    register(&a, &key, json!({"url": receiver.url})).await;
    receiver.answer_by_default(Answer::Status(200));
    let (batch, ids) = items("dropped", 30);
    ingest(&a, &key, "shared", &batch).await;
    let url = a.storage_url.clone().unwrap();
    let database = url.rsplit('/').next().unwrap().to_owned();
    let mut statuses = BTreeSet::new();
    for _ in 0..5 {
        sql(
            &a,
            &format!(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE datname = '{database}' AND pid <> pg_backend_pid()"
            ),
        );
        for server in [&a, &b] {
            let reply = server.get("/databases/status?database=shared", &key).await;
            statuses.insert(reply.status.as_u16());
            if reply.status.is_server_error() {
                assert_eq!(reply.status, 503, "{reply:#?}");
                assert!(reply.header("retry-after").is_some(), "{reply:#?}");
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    wait_completed(&b, &key, "shared", None, &refs).await;
    each_once(&a, &key, &ids).await;
    for server in [&a, &b] {
        server
            .get("/databases/status?database=shared", &key)
            .await
            .current_ok(200);
    }
    eprintln!("statuses while connections were dropped: {statuses:?}");
    a.assert_consistent();
}
