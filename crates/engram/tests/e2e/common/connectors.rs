//! What the connector tests share: the connector routes driven from outside (plain answers, a
//! connector made, a run started and waited for, what a database lists, a filtered query, a
//! credential the source refuses). The fakes of the hosted providers are `engram-fakes`'.
#![allow(clippy::unwrap_used)] // test code

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use super::{eventually, Reply, Server};

/// How long a test waits for a connector's run to finish.
pub(crate) const SYNC_WAIT: Duration = Duration::from_secs(60);

/// A plain-object success: the status and the body.
pub(crate) fn plain(reply: &Reply, status: u16) -> &Value {
    assert_eq!(reply.status.as_u16(), status, "{reply:#?}");
    assert!(
        reply.body.get("success").is_none(),
        "plain, not the envelope: {reply:#?}"
    );
    &reply.body
}

/// Creates a connector (`POST /connectors`); its id.
pub(crate) async fn create(server: &Server, key: &str, body: Value) -> String {
    let reply = server.post("/connectors", key, body).await;
    plain(&reply, 201)["connector_id"]
        .as_str()
        .expect("connector_id")
        .to_owned()
}

/// The runs of a connector's status that have finished (succeeded or failed).
pub(crate) fn finished_runs(status: &Value) -> usize {
    status["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter(|r| r["state"] == "succeeded" || r["state"] == "failed")
        .count()
}

/// Waits until the connector has finished a run after `runs_before` runs, and returns its status.
pub(crate) async fn after_run(server: &Server, key: &str, id: &str, runs_before: usize) -> Value {
    let path = format!("/connectors/{id}/status");
    eventually(SYNC_WAIT, "a sync to finish", || {
        let path = path.clone();
        async move {
            let status = server.get(&path, key).await;
            let body = plain(&status, 200).clone();
            (finished_runs(&body) > runs_before && body["sync_status"] == "idle").then_some(body)
        }
    })
    .await
}

/// Starts a sync (`POST /connectors/{id}/sync`) and waits for it as [`after_run`] does.
pub(crate) async fn sync(server: &Server, key: &str, id: &str, runs_before: usize) -> Value {
    server
        .post(&format!("/connectors/{id}/sync"), key, json!({}))
        .await;
    after_run(server, key, id, runs_before).await
}

/// A server that reaches a fake on loopback and retries no failed run by itself: each run is
/// one the test starts.
pub(crate) fn server_for_fakes() -> Server {
    Server::start_with(FAKES_ENV)
}

/// What a server reading the fakes runs with: loopback sources allowed, and no automatic retry
/// during a test (each run is one the test starts).
pub(crate) const FAKES_ENV: &[(&str, &str)] = &[
    ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
    ("ENGRAM_CONNECTORS__RETRY_BASE_MS", "3600000"),
];

/// The connector's discovery (`GET /connectors/{id}/discover`): the answer and the resources it
/// offers.
pub(crate) async fn discover(server: &Server, key: &str, id: &str) -> (Reply, Vec<Value>) {
    let found = server.get(&format!("/connectors/{id}/discover"), key).await;
    let resources = plain(&found, 200)["resources"]
        .as_array()
        .expect("resources")
        .clone();
    (found, resources)
}

/// How many resources `POST /connector-discovery` offers for `provider` with `credentials`.
pub(crate) async fn previewed(
    server: &Server,
    key: &str,
    provider: &str,
    credentials: Value,
) -> usize {
    let preview = server
        .post(
            "/connector-discovery",
            key,
            json!({"provider": provider, "credentials": credentials}),
        )
        .await;
    plain(&preview, 200)["resources"]
        .as_array()
        .expect("resources")
        .len()
}

/// Configures the connector's `resources` (`POST /connectors/{id}/configure`), which starts its
/// first sync.
pub(crate) async fn configure(server: &Server, key: &str, id: &str, resources: Value) {
    server
        .post(
            &format!("/connectors/{id}/configure"),
            key,
            json!({ "resources": resources }),
        )
        .await;
}

/// The last run's (added, updated, deleted).
pub(crate) fn counts(status: &Value) -> (Value, Value, Value) {
    let run = &status["runs"][0];
    (
        run["added"].clone(),
        run["updated"].clone(),
        run["deleted"].clone(),
    )
}

/// A run that found nothing changed: healthy, nothing added, updated or deleted.
/// Asserts every resource of `status` says its permissions could not be read (`acl_warning`
/// holding `says`).
pub(crate) fn assert_readers_unknown(status: &Value, says: &str) {
    let resources = status["resources"].as_array().expect("resources");
    assert!(!resources.is_empty(), "{status:#?}");
    for resource in resources {
        assert!(
            resource["acl_warning"]
                .as_str()
                .is_some_and(|w| w.contains(says)),
            "{resource:#?}"
        );
    }
}

pub(crate) fn assert_nothing_changed(status: &Value) {
    assert_eq!(
        (status["status"].clone(), counts(status)),
        (json!("healthy"), (json!(0), json!(0), json!(0))),
        "{status:#?}"
    );
}

/// A run the source rate limited: the connector degraded but active, its error saying each of
/// `says`, every resource retryable.
pub(crate) fn assert_rate_limited(status: &Value, says: &[&str]) {
    assert_eq!(
        (status["status"].clone(), status["lifecycle"].clone()),
        (json!("degraded"), json!("active")),
        "{status:#?}"
    );
    let message = status["error"]["message"].as_str().unwrap_or_default();
    assert!(says.iter().all(|s| message.contains(s)), "{status:#?}");
    assert!(
        status["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .all(|r| r["retryable"] == true),
        "{status:#?}"
    );
}

/// The sources `database` lists (one page of up to 100).
pub(crate) async fn listed(server: &Server, key: &str, database: &str) -> Vec<Value> {
    let reply = server
        .post(
            "/context/list",
            key,
            json!({"database": database, "page_size": 100}),
        )
        .await;
    reply.current_ok(200)["sources"]
        .as_array()
        .expect("sources")
        .clone()
}

/// The titles of the sources `database` lists, sorted.
pub(crate) async fn source_titles(server: &Server, key: &str, database: &str) -> Vec<String> {
    let mut titles: Vec<String> = listed(server, key, database)
        .await
        .iter()
        .filter_map(|s| s["title"].as_str().map(str::to_owned))
        .collect();
    titles.sort();
    titles
}

/// Waits until every source `database` lists is indexed.
pub(crate) async fn indexed(server: &Server, key: &str, database: &str) {
    let sources = listed(server, key, database).await;
    let ids: Vec<&str> = sources.iter().filter_map(|s| s["id"].as_str()).collect();
    super::wait_completed(server, key, database, None, &ids).await;
}

/// A query's chunks in `database` under `filter` (`additional_metadata`), at least one, each
/// checked to carry it.
pub(crate) async fn filtered_query(
    server: &Server,
    key: &str,
    database: &str,
    query: &str,
    filter: Value,
) -> Vec<Value> {
    let reply = server
        .post(
            "/query",
            key,
            json!({"database": database, "query": query, "max_results": 3,
                   "metadata_filters": {"additional_metadata": filter.clone()}}),
        )
        .await;
    let chunks = reply.current_ok(200)["chunks"]
        .as_array()
        .expect("chunks")
        .clone();
    assert!(!chunks.is_empty(), "{query}: {reply:#?}");
    for chunk in &chunks {
        for (field, value) in filter.as_object().expect("a filter object") {
            assert_eq!(&chunk["additional_metadata"][field], value, "{chunk:#?}");
        }
    }
    chunks
}

/// Asserts the best chunk of a [`filtered_query`] holds `text`.
pub(crate) async fn assert_best_holds(
    server: &Server,
    key: &str,
    database: &str,
    query: &str,
    filter: Value,
    text: &str,
) {
    let chunks = filtered_query(server, key, database, query, filter).await;
    assert!(
        chunks[0]["chunk_content"].to_string().contains(text),
        "{query}: the best chunk lacks {text:?}: {chunks:#?}"
    );
}

/// Credentials the source refuses (set through `PATCH /connectors/{id}`) make the next sync
/// (the connector's `runs`+1st) a reconnect; the status after it.
pub(crate) async fn rejected_credentials_are_a_reconnect(
    server: &Server,
    key: &str,
    id: &str,
    credentials: Value,
    runs: usize,
) -> Value {
    let patched = server
        .call(
            Method::PATCH,
            &format!("/connectors/{id}"),
            Some(key),
            Some(json!({ "credentials": credentials })),
        )
        .await;
    assert!(patched.status.is_success(), "{patched:#?}");
    let status = sync(server, key, id, runs).await;
    assert_eq!(
        (status["lifecycle"].clone(), status["status"].clone()),
        (json!("reconnect"), json!("failed")),
        "{status:#?}"
    );
    status
}

/// None of `secrets` appears in the connector's `status` or in the connector itself.
pub(crate) async fn assert_secrets_hidden(
    server: &Server,
    key: &str,
    id: &str,
    status: &Value,
    secrets: &[&str],
) {
    let connector = server.get(&format!("/connectors/{id}"), key).await;
    for answer in [status.to_string(), connector.body.to_string()] {
        for secret in secrets {
            assert!(!answer.contains(secret), "{answer}");
        }
    }
}

/// A small Notion workspace on `notion`: a shared "Handbook" page with one paragraph and an
/// "On call" subpage with another. Their ids: (handbook, its paragraph block, on call).
pub(crate) fn notion_handbook(
    notion: &engram_fakes::notion::NotionFake,
) -> (String, String, String) {
    use engram_fakes::notion::{body, Parent};
    let handbook = notion.add_page(Parent::Workspace, "Handbook");
    let window = notion.append(
        &handbook,
        "paragraph",
        body("paragraph", "The deploy window is Tuesday at 10:00."),
    );
    let oncall = notion.add_page(Parent::Page(handbook.clone()), "On call");
    notion.append(
        &oncall,
        "paragraph",
        body("paragraph", "The pager hands over every Monday."),
    );
    (handbook, window, oncall)
}
