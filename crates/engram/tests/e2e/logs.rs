//! What the service writes to its log: one JSON object a line with `log.format = "json"`, the
//! request id on the lines of a request, no colour codes when not on a terminal, and never a
//! secret: not an API key (good or bad), a webhook signing secret, nor the metrics token, even
//! at `debug`.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::common::Server;

#[tokio::test]
async fn logs_are_json_lines_with_request_ids_and_no_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let log: PathBuf = dir.path().join("engram.log");
    let metrics_token = "metrics-token-never-logged-0001";
    let mut server = Server::start_logged(
        &[
            ("RUST_LOG", "debug"),
            ("ENGRAM_LOG__FORMAT", "json"),
            ("ENGRAM_METRICS__TOKEN", metrics_token),
            ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
        ],
        &log,
    );
    let key = server.key("org-logs", &[]);
    let (prefix, secret) = key.split_once('.').expect("prefix.secret");
    server.ready_database(&key, "logged").await;
    let own_secret = "webhook-secret-never-logged-0002";
    let registered = server
        .post(
            "/webhooks/indexing",
            &key,
            json!({"url": "http://127.0.0.1:9/hook", "signing_secret": own_secret}),
        )
        .await;
    assert_eq!(registered.status.as_u16(), 201, "{registered:#?}");
    let generated = server
        .post("/webhooks/indexing/signing-secret", &key, json!({}))
        .await;
    let generated = generated.body["signing_secret"]
        .as_str()
        .expect("a generated secret")
        .to_owned();
    // A key made over HTTP: its token is in that one answer and nowhere in the log, used or
    // revoked.
    let made = server
        .post("/keys", &key, json!({"name": "logged", "scopes": ["read"]}))
        .await;
    let made_token = made.body["data"]["token"]
        .as_str()
        .unwrap_or_else(|| panic!("a token: {made:#?}"))
        .to_owned();
    assert_eq!(
        server.get("/databases", &made_token).await.status.as_u16(),
        200
    );
    let made_prefix = made_token.split_once('.').expect("prefix.secret").0;
    let revoked = server.delete(&format!("/keys/{made_prefix}"), &key).await;
    assert_eq!(revoked.status.as_u16(), 200, "{revoked:#?}");
    let wrong = format!("{prefix}.wrong-secret-never-logged-0003");
    let refused = server.get("/databases", &wrong).await;
    assert_eq!(refused.status.as_u16(), 401);
    let query = server
        .post(
            "/query",
            &key,
            json!({"database": "logged", "query": "anything"}),
        )
        .await;
    assert_eq!(query.status.as_u16(), 200);
    let scraped = server
        .client
        .get(server.url("/metrics"))
        .bearer_auth(metrics_token)
        .send()
        .await
        .unwrap();
    assert_eq!(scraped.status().as_u16(), 200);
    // Work a request queued names it when it runs in the background: the item's indexing.
    let form = reqwest::multipart::Form::new()
        .text("type", "knowledge")
        .text("database", "logged")
        .text(
            "app_knowledge",
            json!([crate::common::app(
                "traced",
                "Traced",
                "Indexed in the background."
            )])
            .to_string(),
        );
    let ingested = crate::common::send_form(&server, "/context/ingest", &key, form).await;
    ingested.current_ok(202);
    crate::common::wait_completed(&server, &key, "logged", None, &["traced"]).await;
    server.terminate();

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.lines().count() > 10, "{text}");
    for secret in [
        secret,
        key.as_str(),
        own_secret,
        generated.as_str(),
        made_token.split_once('.').expect("prefix.secret").1,
        "wrong-secret-never-logged-0003",
        metrics_token,
    ] {
        assert!(!text.contains(secret), "a secret reached the log: {secret}");
    }
    assert!(!text.contains('\u{1b}'), "colour codes in a log file");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let request_id = query.header("x-request-id").unwrap();
    let of_query: Vec<&Value> = lines
        .iter()
        .filter(|l| l.to_string().contains(request_id))
        .collect();
    assert!(
        of_query.iter().any(|l| l["fields"]["message"] == "request"),
        "the query's own line carries its request id: {of_query:#?}"
    );

    let ingest_id = ingested.header("x-request-id").unwrap();
    let indexed = lines.iter().find(|l| {
        l["target"]
            .as_str()
            .is_some_and(|t| t.starts_with("engram_pipeline"))
            && l["fields"]["message"] == "indexed"
            && l["span"]["request_id"]
                .as_str()
                .is_some_and(|ids| ids.split(',').any(|id| id == ingest_id))
    });
    assert!(
        indexed.is_some(),
        "the indexing of the item names request {ingest_id}"
    );

    // Every line written while a request is handled carries its id: from its first line to its
    // own closing `request` line, every line but those of background work (indexing,
    // deliveries, the index follower, the lifecycle and connector workers, which run beside
    // it), down to the SQL it ran and what the app said (`webhook registered`, `api key
    // revoked`).
    let background = [
        "engram_pipeline",
        "engram_webhooks",
        "engram_index",
        "engram_app::lifecycle",
        "engram_app::sync",
        "engram_connectors",
        "engram_search",
    ];
    for (reply, said) in [
        (&registered, Some("webhook registered")),
        (&revoked, Some("api key revoked")),
        (&query, None),
    ] {
        let id = reply.header("x-request-id").unwrap();
        let carries = |l: &Value| l["span"]["request_id"] == id;
        let first = lines.iter().position(&carries).unwrap();
        let last = lines
            .iter()
            .rposition(|l| carries(l) && l["fields"]["message"] == "request")
            .unwrap();
        for line in &lines[first..=last] {
            let target = line["target"].as_str().unwrap_or_default();
            if background.iter().any(|b| target.starts_with(b)) {
                continue;
            }
            assert!(
                carries(line),
                "a line of request {id} without its id: {line}"
            );
        }
        if let Some(said) = said {
            assert!(
                lines[first..=last]
                    .iter()
                    .any(|l| carries(l) && l["fields"]["message"] == said),
                "`{said}` not logged with request {id}"
            );
        }
    }
}
