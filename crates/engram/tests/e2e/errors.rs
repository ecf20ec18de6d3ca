//! Every error code of the registry (the spec's error table and engram's own rows), each
//! answered through the API on its condition, in one place: the match over `ErrorCode` is
//! exhaustive, so a code added later cannot go without its case here.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use engram_types::ErrorCode;
use reqwest::multipart::{Form, Part};
use reqwest::Method;
use serde_json::json;

use crate::common::{self, app, send_form, wait_completed, Reply, Server};

/// A legacy route's answers are `{detail: …}`; a current route's the error envelope.
fn assert_code(reply: &Reply, code: ErrorCode, what: &str) {
    let status = reply.status.as_u16();
    assert_eq!(status, code.http_status(), "{what}: {reply:#?}");
    let sent = if reply.body["detail"].is_object() {
        &reply.body["detail"]["error_code"]
    } else {
        &reply.body["error"]["code"]
    };
    assert_eq!(sent, code.as_str(), "{what}: {reply:#?}");
}

/// A reply read off the wire: its status line and JSON body.
fn raw_reply(answer: &str) -> Reply {
    let status: u16 = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {answer:?}"));
    let body = answer
        .split_once("\r\n\r\n")
        .and_then(|(_, body)| serde_json::from_str(body).ok())
        .unwrap_or_else(|| panic!("no JSON body: {answer:?}"));
    Reply {
        status: reqwest::StatusCode::from_u16(status).unwrap(),
        headers: reqwest::header::HeaderMap::new(),
        body,
    }
}

fn file(name: &str, bytes: Vec<u8>, media_type: &str) -> Part {
    Part::bytes(bytes)
        .file_name(name.to_owned())
        .mime_str(media_type)
        .unwrap()
}

/// Sets a key's stored scopes to a name this version does not know: the store then holds a
/// record it cannot read, which nothing a client sends can cause.
fn corrupt_scopes(server: &Server, prefix: &str) {
    let update =
        format!("UPDATE api_keys SET scopes = '[\"superuser\"]' WHERE prefix = '{prefix}'");
    let ok = match &server.storage_url {
        Some(url) => std::process::Command::new("psql")
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", &update, url])
            .status()
            .unwrap()
            .success(),
        None => std::process::Command::new("python3")
            .arg("-c")
            .arg("import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nc.execute(sys.argv[2])\nc.commit()")
            .arg(server.data_dir.join("engram.sqlite3"))
            .arg(&update)
            .status()
            .unwrap()
            .success(),
    };
    assert!(ok, "the store was not changed");
}

#[tokio::test]
async fn every_error_code_is_answered_on_its_condition() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("a.txt"), "A note.").unwrap();
    let roots = format!("[\"{}\"]", folder.path().display());
    let server = Server::start_with(&[
        ("ENGRAM_INGEST__MAX_UPLOAD_BYTES", "1048576"),
        ("ENGRAM_CONNECTORS__FOLDER_ROOTS", &roots),
        ("ENGRAM_CONNECTORS__MAX_PER_ORG", "2"),
        ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
        // A model nobody listens for: answers cannot be had.
        ("ENGRAM_LLM__BASE_URL", "http://127.0.0.1:9/v1"),
        ("ENGRAM_LLM__MODEL", "absent"),
        ("ENGRAM_LLM__ATTEMPTS", "1"),
        ("ENGRAM_LLM__GRAPH", "false"),
        ("ENGRAM_LLM__INFER", "false"),
        ("ENGRAM_RATE_LIMIT__ENABLED", "true"),
        ("ENGRAM_RATE_LIMIT__REQUESTS_PER_SECOND", "1"),
        ("ENGRAM_RATE_LIMIT__BURST", "1000"),
    ]);
    let org = "org-errors";
    let key = server.key(org, &[]);
    let reader = server.scoped_key(org, &[], &["read"]);
    server.ready_database(&key, "db1").await;
    crate::webhooks::ingest(
        &server,
        &key,
        "db1",
        &[app(
            "note",
            "Note",
            "The gamma reactor is cooled by helium gas.",
        )],
    )
    .await;
    wait_completed(&server, &key, "db1", None, &["note"]).await;

    for &code in ErrorCode::ALL {
        let what = code.as_str();
        let reply = match code {
            ErrorCode::InvalidParameters => {
                server
                    .post("/databases", &key, json!({"database": 5}))
                    .await
            }
            ErrorCode::InvalidTenantId => {
                server
                    .get("/tenants/infra/status?tenant_id=bad%20name", &key)
                    .await
            }
            ErrorCode::InvalidSearchParameters => {
                server
                    .post("/recall/full_recall", &key, json!({"tenant_id": "db1"}))
                    .await
            }
            ErrorCode::InvalidFileFormat => {
                let form = Form::new().text("tenant_id", "db1").part(
                    "files",
                    file(
                        "tool.exe",
                        b"MZ\x90\x00\x03\x00\x00\x00".to_vec(),
                        "application/octet-stream",
                    ),
                );
                send_form(&server, "/ingestion/upload_knowledge", &key, form).await
            }
            ErrorCode::FileTooLarge => {
                // 2 MiB past the 1 MiB upload limit (under the 16 MiB every JSON body gets).
                let boundary = "engram-boundary";
                let opening = format!(
                    "--{boundary}\r\nContent-Disposition: form-data; name=\"tenant_id\"\r\n\r\ndb1\r\n\
                     --{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.txt\"\r\n\
                     Content-Type: text/plain\r\n\r\n"
                );
                let answer = crate::limits::body_of_size(
                    &server,
                    "/ingestion/upload_knowledge",
                    &key,
                    &format!("multipart/form-data; boundary={boundary}"),
                    &opening,
                    2 * 1024 * 1024,
                )
                .await;
                raw_reply(&answer)
            }
            ErrorCode::Unauthorized => server.call(Method::GET, "/databases", None, None).await,
            ErrorCode::Forbidden => {
                server
                    .post("/databases", &reader, json!({"database": "db2"}))
                    .await
            }
            ErrorCode::NotFound => server.delete("/keys/egk_0000000000000000", &key).await,
            ErrorCode::TenantNotFound => {
                server
                    .post(
                        "/recall/full_recall",
                        &key,
                        json!({"tenant_id": "nope", "query": "x"}),
                    )
                    .await
            }
            ErrorCode::DatabaseNotFound => {
                server.get("/databases/status?database=nope", &key).await
            }
            ErrorCode::SourceNotFound => {
                server
                    .get("/context/inspect?database=db1&id=nope", &key)
                    .await
            }
            ErrorCode::MemoryNotFound => {
                server
                    .delete("/memories/delete_memory?tenant_id=db1&memory_id=nope", &key)
                    .await
            }
            ErrorCode::FileNotFound => {
                server
                    .post(
                        "/ingestion/verify_processing?file_ids=nope&tenant_id=db1",
                        &key,
                        json!({}),
                    )
                    .await
            }
            ErrorCode::WebhookNotFound => {
                server
                    .post("/webhooks/indexing/test", &key, json!({}))
                    .await
            }
            ErrorCode::DeliveryNotFound => {
                server.get("/webhooks/indexing/deliveries/nope", &key).await
            }
            ErrorCode::ConnectorNotFound => server.get("/connectors/con_nope", &key).await,
            ErrorCode::PlanLimitExceeded => {
                for scope in ["one", "two"] {
                    let made = server
                        .post(
                            "/connectors",
                            &key,
                            json!({"provider": "folder", "database": "db1",
                                   "provider_account_scope": scope}),
                        )
                        .await;
                    assert_eq!(made.status, 201, "{made:#?}");
                }
                server
                    .post(
                        "/connectors",
                        &key,
                        json!({"provider": "folder", "database": "db1",
                               "provider_account_scope": "three"}),
                    )
                    .await
            }
            ErrorCode::MethodNotAllowed => {
                server
                    .call(Method::PUT, "/databases", Some(&key), None)
                    .await
            }
            ErrorCode::TenantAlreadyExists => {
                // The spec's own rule: a duplicate legacy create is 409 `INVALID_INPUT`, so
                // this code is never sent; the row is checked as the spec words it.
                let reply = server
                    .post("/tenants/create", &key, json!({"tenant_id": "db1"}))
                    .await;
                assert_code(&reply, ErrorCode::InvalidInput, what);
                continue;
            }
            ErrorCode::DatabaseAlreadyExists => {
                server
                    .post("/databases", &key, json!({"database": "db1"}))
                    .await
            }
            ErrorCode::InvalidInput => {
                server
                    .post("/tenants/create", &key, json!({"tenant_id": "db1"}))
                    .await
            }
            ErrorCode::DeliveryNotRetryable => {
                let receiver = common::serve(
                    axum::Router::new().route("/hook", axum::routing::post(|| async { "ok" })),
                )
                .await;
                let registered = server
                    .post(
                        "/webhooks/indexing",
                        &key,
                        json!({"url": format!("{receiver}/hook")}),
                    )
                    .await;
                assert_eq!(registered.status, 201, "{registered:#?}");
                crate::webhooks::ingest(
                    &server,
                    &key,
                    "db1",
                    &[app("told", "Told", "A webhook hears of this one.")],
                )
                .await;
                let delivered = common::eventually(
                    std::time::Duration::from_secs(20),
                    "a delivered delivery",
                    || async {
                        let listed = server
                            .get("/webhooks/indexing/deliveries?status=delivered", &key)
                            .await;
                        listed.body["deliveries"][0]["delivery_id"]
                            .as_str()
                            .map(str::to_owned)
                    },
                )
                .await;
                server
                    .post(
                        &format!("/webhooks/indexing/deliveries/{delivered}/retry"),
                        &key,
                        json!({}),
                    )
                    .await
            }
            ErrorCode::ConnectorAlreadyExists => {
                // Below the limit again, so the duplicate is what is refused.
                let listed = server.get("/connectors", &key).await;
                let two = listed.body["connectors"]
                    .as_array()
                    .and_then(|all| {
                        all.iter()
                            .find(|c| c["provider_account_scope"] == "two")
                            .and_then(|c| c["connector_id"].as_str())
                    })
                    .unwrap_or_else(|| panic!("{listed:#?}"))
                    .to_owned();
                let deleted = server.delete(&format!("/connectors/{two}"), &key).await;
                assert!(deleted.status.is_success(), "{deleted:#?}");
                server
                    .post(
                        "/connectors",
                        &key,
                        json!({"provider": "folder", "database": "db1",
                               "provider_account_scope": "one"}),
                    )
                    .await
            }
            ErrorCode::ConnectorPaused => {
                let listed = server.get("/connectors", &key).await;
                let id = listed.body["connectors"][0]["connector_id"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{listed:#?}"))
                    .to_owned();
                let paused = server
                    .post(&format!("/connectors/{id}/pause"), &key, json!({}))
                    .await;
                assert_eq!(paused.status, 200, "{paused:#?}");
                server
                    .post(&format!("/connectors/{id}/sync"), &key, json!({}))
                    .await
            }
            ErrorCode::ValidationError => {
                server
                    .post(
                        "/webhooks/indexing",
                        &key,
                        json!({"url": "https://hooks.example.com/engram",
                               "signing_secret": "too-short"}),
                    )
                    .await
            }
            ErrorCode::InvalidMemoryFormat => {
                server
                    .post(
                        "/memories/add_memory",
                        &key,
                        json!({"tenant_id": "db1", "memories": "Likes hiking."}),
                    )
                    .await
            }
            ErrorCode::InvalidEmbeddingFormat => {
                server
                    .post(
                        "/embeddings/insert_raw_embeddings",
                        &key,
                        json!({"tenant_id": "db1", "embeddings": [{"source_id": "s",
                               "embeddings": [{"chunk_id": "c", "embedding": "0.1, 0.2"}]}]}),
                    )
                    .await
            }
            ErrorCode::RateLimited => {
                let limited = server.scoped_key(org, &[], &["read"]);
                let mut last = None;
                for _ in 0..1_200 {
                    let reply = server.get("/databases", &limited).await;
                    if reply.status == 429 {
                        last = Some(reply);
                        break;
                    }
                }
                last.expect("a 429 past the burst")
            }
            ErrorCode::InternalError => {
                let broken = server.key(org, &[]);
                corrupt_scopes(&server, broken.split_once('.').unwrap().0);
                let reply = server.get("/databases", &broken).await;
                assert!(
                    !reply.body.to_string().contains("superuser"),
                    "an internal error says nothing of its cause: {reply:#?}"
                );
                reply
            }
            ErrorCode::ProviderError => {
                server
                    .post(
                        "/connector-discovery",
                        &key,
                        json!({"provider": "rss",
                               "credentials": {"feeds": ["http://127.0.0.1:9/feed.xml"]}}),
                    )
                    .await
            }
            ErrorCode::ServiceUnavailable => {
                let reply = server
                    .post(
                        "/recall/qna",
                        &key,
                        json!({"tenant_id": "db1", "question": "How is the reactor cooled?"}),
                    )
                    .await;
                assert!(reply.header("retry-after").is_some(), "{reply:#?}");
                reply
            }
        };
        assert_code(&reply, code, what);
    }
}
