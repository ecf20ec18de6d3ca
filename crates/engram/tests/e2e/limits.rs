//! Every input has a limit checked before any work is spent: over it, a clear 4xx naming the
//! limit, never a 500, and nothing stored.

use reqwest::multipart::Form;
use serde_json::{json, Map, Value};

use crate::common::{app, send_form, Server};

const ORG: &str = "org-limits";

fn assert_message(reply: &crate::common::Reply, status: u16, code: &str, needle: &str) {
    reply.assert_current_error(status, code);
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(needle), "{needle:?} not in {reply:#?}");
}

fn many_keys(count: usize) -> Map<String, Value> {
    (0..count).map(|i| (format!("k{i}"), json!("v"))).collect()
}

#[tokio::test]
async fn every_input_over_its_limit_answers_4xx_naming_it_and_stores_nothing() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "lim").await;

    // Filters: 989 keys once exceeded SQLite's expression depth (500); now 400 past 256.
    let filters = json!({"additional_metadata": many_keys(989)});
    let reply = server
        .post(
            "/query",
            &key,
            json!({"database": "lim", "query": "x", "metadata_filters": filters}),
        )
        .await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "256 filter keys");
    let reply = server
        .post(
            "/context/list",
            &key,
            json!({"database": "lim", "filters": {"additional_metadata": many_keys(991)}}),
        )
        .await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "256 filter keys");
    let values = vec![json!("v"); 5000];
    let reply = server
        .post(
            "/query",
            &key,
            json!({"database": "lim", "query": "x", "metadata_filters": {"additional_metadata": {"k": values}}}),
        )
        .await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "1024 values");
    // Within the limits, the same request is answered.
    let filters = json!({"additional_metadata": many_keys(256)});
    server
        .post(
            "/query",
            &key,
            json!({"database": "lim", "query": "x", "metadata_filters": filters}),
        )
        .await
        .current_ok(200);

    // Ingest: ids with `,` (they could never be polled), titles, metadata, item counts.
    let ingest = |items: Vec<Value>| {
        Form::new()
            .text("type", "knowledge")
            .text("database", "lim")
            .text("app_knowledge", Value::from(items).to_string())
    };
    let reply = send_form(
        &server,
        "/context/ingest",
        &key,
        ingest(vec![app("x,y", "t", "text")]),
    )
    .await;
    assert_message(&reply, 422, "VALIDATION_ERROR", "`,`");
    let reply = send_form(
        &server,
        "/context/ingest",
        &key,
        ingest(vec![app("long-title", &"t".repeat(1025), "text")]),
    )
    .await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "1024 characters");
    let mut heavy = app("heavy", "t", "text");
    heavy["additional_metadata"] = Value::Object(many_keys(257));
    let reply = send_form(&server, "/context/ingest", &key, ingest(vec![heavy])).await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "at most 256");
    let items: Vec<Value> = (0..1001).map(|i| app(&format!("i{i}"), "t", "x")).collect();
    let reply = send_form(&server, "/context/ingest", &key, ingest(items)).await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "at most 1000");

    // Repeated single-value fields are refused; repeated app_knowledge parts are all ingested.
    let form = ingest(vec![app("a", "t", "alpha")]).text("database", "lim");
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    assert_message(
        &reply,
        400,
        "INVALID_PARAMETERS",
        "`database` was sent 2 times",
    );
    let form = ingest(vec![app("first", "t", "alpha")]).text(
        "app_knowledge",
        Value::from(vec![app("second", "t", "beta")]).to_string(),
    );
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    let data = reply.current_ok(202);
    assert_eq!(data["success_count"], 2, "{reply:#?}");
    let ids: Vec<&str> = data["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["source_id"].as_str().or(r["id"].as_str()).unwrap())
        .collect();
    assert_eq!(ids, ["first", "second"], "{reply:#?}");

    // Webhook URLs.
    let url = format!("https://example.com/{}", "a".repeat(2100));
    let reply = server
        .post("/webhooks/indexing", &key, json!({"url": url}))
        .await;
    assert_message(&reply, 400, "INVALID_PARAMETERS", "2048 characters");

    // Only the two items of the merged request were stored.
    let listed = server
        .post("/context/list", &key, json!({"database": "lim"}))
        .await;
    assert_eq!(listed.current_ok(200)["total"], 2, "{listed:#?}");
}
