//! Ingestion, indexing status, listing and deletion end to end, on both API generations:
//! knowledge files and app content (multipart), memories, validation with exact statuses and
//! codes, upserts, pagination and filters, deletion (also while indexing), crash safety of the
//! indexing queue, and isolation between databases and organizations.

#![allow(clippy::unwrap_used, clippy::type_complexity)] // test helpers outside #[test] functions

use crate::common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{
    app, eventually, holds_for, ingest_memories, send_form, wait_completed, Reply, Server,
};
use reqwest::multipart::{Form, Part};
use reqwest::Method;
use serde_json::{json, Value};

const ORG: &str = "acme";
/// Indexing runs the real embedding model on a small machine, next to other tests.
const WAIT: Duration = Duration::from_secs(180);

/// A real gzip stream (`printf 'hello\n' | gzip -n`): a format engram does not index.
const GZIP: &[u8] = &[
    0x1F, 0x8B, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xCB, 0x48, 0xCD, 0xC9, 0xC9, 0xE7,
    0x02, 0x00, 0x20, 0x30, 0x3A, 0x36, 0x06, 0x00, 0x00, 0x00,
];

const MARKDOWN: &str = "# Release checklist\n\nBefore every release the team runs the full \
    regression suite, updates the changelog and tags the commit.\n\n## Rollback\n\nIf error \
    rates rise after deployment, the on-call engineer rolls back within fifteen minutes.\n";
const CSV: &str = "name,role,city\nAda Lovelace,analyst,London\nGrace Hopper,admiral,New York\n\
    Katherine Johnson,mathematician,Hampton\n";
const JSON_DOC: &str = r#"{"service": "billing", "owner": "payments team", "oncall": ["maria", "tomas"],
    "runbook": "Restart the invoice worker, then replay the dead letter queue."}"#;
const HTML: &str = "<!DOCTYPE html><html><head><title>Office hours</title></head><body>\
    <h1>Office hours</h1><p>The support desk is open from nine to five on weekdays.</p>\
    <p>Urgent incidents are paged to the on-call rotation.</p></body></html>";
const TEXT: &str = "Meeting notes: the design review approved the new search layout and asked \
    for an accessibility audit before launch.\n";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn file(name: &str, bytes: &[u8], media_type: &str) -> Part {
    Part::bytes(bytes.to_vec())
        .file_name(name.to_owned())
        .mime_str(media_type)
        .expect("media type")
}

/// A `type=knowledge` form carrying only app content.
fn app_form(database: &str, items: &[Value]) -> Form {
    Form::new()
        .text("type", "knowledge")
        .text("database", database.to_owned())
        .text("app_knowledge", Value::from(items.to_vec()).to_string())
}

/// `POST /context/ingest` of app content; asserts 202 and every item queued.
async fn ingest_apps(server: &Server, key: &str, database: &str, items: &[Value]) -> Value {
    let reply = send_form(server, "/context/ingest", key, app_form(database, items)).await;
    let data = reply.current_ok(202).clone();
    assert_eq!(data["success_count"], items.len(), "{reply:#?}");
    assert_eq!(data["failed_count"], 0, "{reply:#?}");
    for result in data["results"].as_array().expect("results") {
        assert_eq!(result["status"], "queued", "{reply:#?}");
    }
    data
}

/// Several paragraphs about `seed`: long enough for more than one chunk.
fn paragraphs(seed: &str, count: usize) -> String {
    (0..count)
        .map(|i| {
            format!(
                "Paragraph {i} about {seed}. The {seed} team reviewed the quarterly roadmap, \
                 discussed customer feedback on onboarding, and agreed to ship the reporting \
                 dashboard before the conference in {seed} city. Engineers measured latency \
                 across three regions and found that caching reduced the median response time \
                 considerably for item {i}. Support staff summarised recurring tickets about \
                 billing exports, password resets and missing notifications, and product \
                 managers ranked them by impact. Finally the group scheduled a follow-up review \
                 of {seed} number {i} for next month and assigned owners to every action."
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

fn status_path(database: &str, collection: Option<&str>, ids: &[&str]) -> String {
    let mut path = format!("/context/status?database={database}&ids={}", ids.join(","));
    if let Some(collection) = collection {
        path.push_str(&format!("&collection={collection}"));
    }
    path
}

async fn status_of(
    server: &Server,
    key: &str,
    database: &str,
    collection: Option<&str>,
    ids: &[&str],
) -> Reply {
    server
        .get(&status_path(database, collection, ids), key)
        .await
}

/// `(knowledge row_count, memory row_count)` from `GET /databases/stats`.
async fn rows(server: &Server, key: &str, database: &str) -> (u64, u64) {
    let reply = server
        .get(&format!("/databases/stats?database={database}"), key)
        .await;
    let data = reply.current_ok(200);
    (
        data["knowledge_collection"]["row_count"]
            .as_u64()
            .unwrap_or_else(|| panic!("{reply:#?}")),
        data["memory_collection"]["row_count"]
            .as_u64()
            .unwrap_or_else(|| panic!("{reply:#?}")),
    )
}

async fn list(server: &Server, key: &str, body: Value) -> Reply {
    server.post("/context/list", key, body).await
}

async fn legacy_list(server: &Server, key: &str, body: Value) -> Reply {
    server
        .call(Method::POST, "/list/data", Some(key), Some(body))
        .await
}

/// Asserts a legacy success (plain object) and returns the body.
fn legacy_ok(reply: &Reply, status: u16) -> &Value {
    assert_eq!(reply.status.as_u16(), status, "{reply:#?}");
    assert!(reply.body.get("detail").is_none(), "{reply:#?}");
    assert!(reply.body.get("data").is_none(), "{reply:#?}");
    &reply.body
}

/// Ids of `sources` (or `user_memories`) in a list response body part.
fn source_ids(list: &Value) -> Vec<String> {
    list["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .map(|s| s["id"].as_str().expect("id").to_owned())
        .collect()
}

fn memory_ids(list: &Value) -> Vec<String> {
    list["user_memories"]
        .as_array()
        .expect("user_memories")
        .iter()
        .map(|m| m["memory_id"].as_str().expect("memory_id").to_owned())
        .collect()
}

fn sorted(ids: &[&str]) -> Vec<String> {
    let mut ids: Vec<String> = ids.iter().map(|s| (*s).to_owned()).collect();
    ids.sort();
    ids
}

fn sorted_owned(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

fn assert_pagination(p: &Value, page: u64, size: u64, total: u64, pages: u64) {
    assert_eq!(p["page"], page, "{p:#?}");
    assert_eq!(p["page_size"], size, "{p:#?}");
    assert_eq!(p["total"], total, "{p:#?}");
    assert_eq!(p["total_pages"], pages, "{p:#?}");
    assert_eq!(p["has_next"], page < pages, "{p:#?}");
    assert_eq!(p["has_previous"], page > 1, "{p:#?}");
}

async fn setup(databases: &[&str]) -> (Server, String) {
    setup_with(&[], databases).await
}

async fn setup_with(envs: &[(&str, &str)], databases: &[&str]) -> (Server, String) {
    let server = Server::start_with(envs);
    let key = server.key(ORG, &[]);
    for db in databases {
        server.ready_database(&key, db).await;
    }
    (server, key)
}

// ---------------------------------------------------------------------------------------------
// 1. Knowledge ingestion and status
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn knowledge_files_and_app_content_are_queued_and_indexed() {
    let (server, key) = setup(&["kb"]).await;
    assert_eq!(rows(&server, &key, "kb").await, (0, 0));

    let metadata = json!([
        {"id": "doc-md", "additional_metadata": {"format": "markdown"}},
        {"id": "doc-csv", "additional_metadata": {"format": "csv"}},
        {"id": "doc-json", "additional_metadata": {"format": "json"}},
        {"id": "doc-gz", "additional_metadata": {"format": "gzip"}},
        {"id": "doc-html", "additional_metadata": {"format": "html"}},
        {"id": "doc-txt", "additional_metadata": {"format": "text"}},
    ]);
    let apps = json!([{
        "id": "app-1", "title": "Standup notes", "type": "chat",
        "content": {"text": "Daily standup: the mobile team finished the offline mode."},
        "additional_metadata": {"channel": "standup"}
    }]);
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "kb")
        .part(
            "documents",
            file("notes.md", MARKDOWN.as_bytes(), "text/markdown"),
        )
        .part("documents", file("people.csv", CSV.as_bytes(), "text/csv"))
        .part(
            "documents",
            file("service.json", JSON_DOC.as_bytes(), "application/json"),
        )
        .part("documents", file("logo.gz", GZIP, "application/gzip"))
        .part(
            "documents",
            file("hours.html", HTML.as_bytes(), "text/html"),
        )
        .part(
            "documents",
            file("minutes.txt", TEXT.as_bytes(), "text/plain"),
        )
        .text("document_metadata", metadata.to_string())
        .text("app_knowledge", apps.to_string());
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    let data = reply.current_ok(202);
    assert_eq!(reply.body["meta"]["database"], "kb", "{reply:#?}");
    assert_eq!(reply.body["meta"]["source_type"], "knowledge", "{reply:#?}");
    assert_eq!(data["success_count"], 6, "{reply:#?}");
    assert_eq!(data["failed_count"], 1, "{reply:#?}");
    assert_eq!(data["success"], false, "one file was refused: {reply:#?}");
    assert!(data["message"].as_str().is_some_and(|m| !m.is_empty()));
    let results = data["results"].as_array().expect("results");
    assert_eq!(results.len(), 7, "{reply:#?}");
    let expected = [
        ("doc-md", "notes.md"),
        ("doc-csv", "people.csv"),
        ("doc-json", "service.json"),
        ("doc-gz", "logo.gz"),
        ("doc-html", "hours.html"),
        ("doc-txt", "minutes.txt"),
    ];
    for (result, (id, filename)) in results.iter().zip(expected) {
        assert_eq!(result["id"], id, "{reply:#?}");
        assert_eq!(result["filename"], filename, "{reply:#?}");
        assert_eq!(result["infer"], false, "{reply:#?}");
        assert_eq!(result["relations_created"], 0, "{reply:#?}");
        if id == "doc-gz" {
            assert_ne!(result["status"], "queued", "{reply:#?}");
            assert_eq!(result["error_code"], "E1002", "{reply:#?}");
            assert!(
                result["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("E1002")),
                "{reply:#?}"
            );
        } else {
            assert_eq!(result["status"], "queued", "{reply:#?}");
            assert_eq!(result["error"], "", "{reply:#?}");
            assert_eq!(result["error_code"], "", "{reply:#?}");
        }
    }
    let app_result = &results[6];
    assert_eq!(app_result["id"], "app-1", "{reply:#?}");
    assert_eq!(app_result["title"], "Standup notes", "{reply:#?}");
    assert_eq!(app_result["status"], "queued", "{reply:#?}");
    assert_eq!(app_result["error"], "", "{reply:#?}");

    // Comma-separated ids: one status per id, in the order asked.
    let first = status_of(&server, &key, "kb", None, &["doc-md", "app-1"]).await;
    let statuses = first.current_ok(200)["statuses"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(statuses.len(), 2, "{first:#?}");
    assert_eq!(statuses[0]["id"], "doc-md");
    assert_eq!(statuses[1]["id"], "app-1");
    for s in &statuses {
        let state = s["indexing_status"].as_str().unwrap();
        assert!(
            ["queued", "processing", "graph_creation", "completed"].contains(&state),
            "{first:#?}"
        );
    }

    // Repeated ids= until every accepted item is completed.
    let accepted = [
        "doc-md", "doc-csv", "doc-json", "doc-html", "doc-txt", "app-1",
    ];
    let repeated = format!(
        "/context/status?database=kb&{}",
        accepted
            .iter()
            .map(|id| format!("ids={id}"))
            .collect::<Vec<_>>()
            .join("&")
    );
    let done = eventually(WAIT, "every accepted item completed", || {
        let (server, key, repeated) = (&server, &key, &repeated);
        async move {
            let reply = server.get(repeated, key).await;
            let statuses = reply.current_ok(200)["statuses"]
                .as_array()
                .unwrap()
                .clone();
            assert_eq!(statuses.len(), accepted.len(), "{reply:#?}");
            for (s, id) in statuses.iter().zip(accepted) {
                assert_eq!(s["id"], id, "{reply:#?}");
                assert_ne!(s["indexing_status"], "errored", "{reply:#?}");
            }
            statuses
                .iter()
                .all(|s| s["indexing_status"] == "completed")
                .then_some(statuses)
        }
    })
    .await;
    for s in &done {
        assert_eq!(s["success"], true, "{s:#?}");
        assert_eq!(s["error_code"], "", "{s:#?}");
        assert_eq!(s["error_message"], "", "{s:#?}");
    }

    // The refused gzip file has no status record: alone it is 404, among known ids a not-found entry.
    status_of(&server, &key, "kb", None, &["doc-gz"])
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");
    status_of(&server, &key, "kb", None, &["nope-1", "nope-2"])
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");
    let mixed = status_of(&server, &key, "kb", None, &["doc-txt", "doc-gz"]).await;
    let statuses = mixed.current_ok(200)["statuses"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(statuses[0]["indexing_status"], "completed", "{mixed:#?}");
    assert_eq!(statuses[1]["id"], "doc-gz", "{mixed:#?}");
    assert_eq!(statuses[1]["error_code"], "FILE_NOT_FOUND", "{mixed:#?}");
    assert_eq!(statuses[1]["success"], false, "{mixed:#?}");
    assert_ne!(statuses[1]["indexing_status"], "completed", "{mixed:#?}");

    // Every accepted item has at least one chunk; the gzip file added nothing.
    let (knowledge, memories) = rows(&server, &key, "kb").await;
    assert!(knowledge >= 6, "{knowledge} knowledge rows");
    assert_eq!(memories, 0);
    let listed = list(&server, &key, json!({"database": "kb", "page_size": 100})).await;
    let listed_data = listed.current_ok(200);
    assert_eq!(listed_data["total"], 6, "{listed:#?}");
    assert_eq!(
        sorted_owned(source_ids(listed_data)),
        sorted(&accepted),
        "{listed:#?}"
    );
    // Extracted text of a file is listed as its content.
    let md = listed_data["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "doc-md")
        .unwrap();
    assert!(
        md["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("regression suite")),
        "{md:#?}"
    );
    assert_eq!(md["additional_metadata"], json!({"format": "markdown"}));
    // Every format is parsed into its text.
    let text_of = |id: &str| -> String {
        listed_data["sources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("{id} not listed"))["content"]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(text_of("doc-csv").contains("Grace Hopper"), "{listed:#?}");
    assert!(
        text_of("doc-json").contains("invoice worker"),
        "{listed:#?}"
    );
    let html = text_of("doc-html");
    assert!(html.contains("support desk is open"), "{html}");
    assert!(!html.contains("<p>"), "markup is not indexed: {html}");
    assert!(text_of("doc-txt").contains("design review"), "{listed:#?}");
    assert!(text_of("app-1").contains("offline mode"), "{listed:#?}");

    // Status needs at least one id.
    server
        .get("/context/status?database=kb", &key)
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    server
        .call(
            Method::POST,
            "/ingestion/verify_processing?tenant_id=kb",
            Some(&key),
            None,
        )
        .await
        .assert_legacy_error(400, "INVALID_PARAMETERS");

    // A second ingest grows the counts.
    ingest_apps(
        &server,
        &key,
        "kb",
        &[app("app-2", "More", &paragraphs("growth", 3))],
    )
    .await;
    wait_completed(&server, &key, "kb", None, &["app-2"]).await;
    let (grown, _) = rows(&server, &key, "kb").await;
    assert!(grown >= knowledge + 2, "{grown} after {knowledge}");
}

#[tokio::test]
async fn legacy_upload_knowledge_and_verify_processing() {
    let (server, key) = setup(&["legacykb"]).await;
    let file_metadata = json!([
        {"id": "leg-md", "document_metadata": {"source": "wiki"}},
        {"id": "leg-gz"},
        {"id": "leg-txt"},
    ]);
    let form = Form::new()
        .text("tenant_id", "legacykb")
        .text("sub_tenant_id", "team_a")
        .part(
            "files",
            file("notes.md", MARKDOWN.as_bytes(), "text/markdown"),
        )
        .part("files", file("logo.gz", GZIP, "application/gzip"))
        .part("files", file("minutes.txt", TEXT.as_bytes(), "text/plain"))
        .text("file_metadata", file_metadata.to_string())
        .text(
            "app_knowledge",
            json!([app(
                "leg-app",
                "Legacy app",
                "Legacy app content about invoices."
            )])
            .to_string(),
        );
    let reply = send_form(&server, "/ingestion/upload_knowledge", &key, form).await;
    let body = legacy_ok(&reply, 202);
    assert_eq!(body["success_count"], 3, "{reply:#?}");
    assert_eq!(body["failed_count"], 1, "{reply:#?}");
    let results = body["results"].as_array().expect("results");
    let ids: Vec<&str> = results
        .iter()
        .map(|r| r["source_id"].as_str().expect("source_id"))
        .collect();
    assert_eq!(
        ids,
        ["leg-md", "leg-gz", "leg-txt", "leg-app"],
        "{reply:#?}"
    );
    for r in results {
        assert!(
            r.get("id").is_none(),
            "legacy results use source_id: {reply:#?}"
        );
        if r["source_id"] == "leg-gz" {
            assert_ne!(r["status"], "queued", "{reply:#?}");
            assert!(
                r["error"].as_str().is_some_and(|e| e.contains("E1002")),
                "{reply:#?}"
            );
        } else {
            assert_eq!(r["status"], "queued", "{reply:#?}");
            assert_eq!(r["error"], "", "{reply:#?}");
        }
    }

    // Nothing but files of unsupported formats: 400 INVALID_FILE_FORMAT naming them, nothing
    // stored (beside accepted items, a refused file keeps its E1002 in its own result, above).
    let form = Form::new()
        .text("tenant_id", "legacykb")
        .text("sub_tenant_id", "team_a")
        .text(
            "file_metadata",
            json!([{"id": "only-gz"}, {"id": "only-gz2"}]).to_string(),
        )
        .part("files", file("logo.gz", GZIP, "application/gzip"))
        .part("files", file("again.gz", GZIP, "application/gzip"));
    let refused = send_form(&server, "/ingestion/upload_knowledge", &key, form).await;
    refused.assert_legacy_error(400, "INVALID_FILE_FORMAT");
    let message = refused.body["detail"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("logo.gz") && message.contains("again.gz") && message.contains("E1002"),
        "{refused:#?}"
    );
    // The current generation answers every upload with results, E1002 in the refused file's.
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "legacykb")
        .part("documents", file("logo.gz", GZIP, "application/gzip"));
    let current = send_form(&server, "/context/ingest", &key, form).await;
    let data = current.current_ok(202);
    assert_eq!(data["results"][0]["error_code"], "E1002", "{current:#?}");

    let accepted = ["leg-md", "leg-txt", "leg-app"];
    let verify = format!(
        "/ingestion/verify_processing?file_ids={}&tenant_id=legacykb&sub_tenant_id=team_a",
        accepted.join(",")
    );
    let statuses = eventually(WAIT, "legacy items completed", || {
        let (server, key, verify) = (&server, &key, &verify);
        async move {
            let reply = server.call(Method::POST, verify, Some(key), None).await;
            let statuses = legacy_ok(&reply, 200)["statuses"]
                .as_array()
                .unwrap()
                .clone();
            assert_eq!(statuses.len(), 3, "{reply:#?}");
            for (s, id) in statuses.iter().zip(accepted) {
                assert_eq!(s["file_id"], id, "{reply:#?}");
                assert!(s.get("id").is_none(), "{reply:#?}");
                assert_ne!(s["indexing_status"], "errored", "{reply:#?}");
            }
            statuses
                .iter()
                .all(|s| s["indexing_status"] == "completed")
                .then_some(statuses)
        }
    })
    .await;
    for s in &statuses {
        assert_eq!(s["success"], true, "{s:#?}");
        assert!(s["error_code"].is_null(), "{s:#?}");
    }
    // Repeated file_ids work too.
    let repeated = server
        .call(
            Method::POST,
            "/ingestion/verify_processing?file_ids=leg-md&file_ids=leg-app&tenant_id=legacykb&sub_tenant_id=team_a",
            Some(&key),
            None,
        )
        .await;
    let statuses = legacy_ok(&repeated, 200)["statuses"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(statuses.len(), 2, "{repeated:#?}");
    assert_eq!(statuses[1]["file_id"], "leg-app", "{repeated:#?}");

    // The refused file, unknown ids, and the right ids in the wrong sub-tenant: FILE_NOT_FOUND.
    for path in [
        "/ingestion/verify_processing?file_ids=leg-gz&tenant_id=legacykb&sub_tenant_id=team_a",
        "/ingestion/verify_processing?file_ids=zzz&tenant_id=legacykb&sub_tenant_id=team_a",
        "/ingestion/verify_processing?file_ids=leg-md&tenant_id=legacykb",
    ] {
        server
            .call(Method::POST, path, Some(&key), None)
            .await
            .assert_legacy_error(404, "FILE_NOT_FOUND");
    }
    server
        .call(
            Method::POST,
            "/ingestion/verify_processing?file_ids=leg-md&tenant_id=nosuchtenant",
            Some(&key),
            None,
        )
        .await
        .assert_legacy_error(404, "TENANT_NOT_FOUND");

    // The current status route sees the same items in that collection.
    wait_completed(&server, &key, "legacykb", Some("team_a"), &accepted).await;
    let (knowledge, _) = rows(&server, &key, "legacykb").await;
    assert!(knowledge >= 3, "{knowledge}");
    let listed = legacy_list(
        &server,
        &key,
        json!({"tenant_id": "legacykb", "sub_tenant_id": "team_a"}),
    )
    .await;
    let body = legacy_ok(&listed, 200);
    assert_eq!(body["total"], 3, "{listed:#?}");
    assert_eq!(sorted_owned(source_ids(body)), sorted(&accepted));
    let md = body["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "leg-md")
        .unwrap();
    assert_eq!(md["sub_tenant_id"], "team_a", "{md:#?}");
    assert_eq!(md["tenant_id"], "legacykb", "{md:#?}");
    assert_eq!(
        md["additional_metadata"],
        json!({"source": "wiki"}),
        "{md:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Validation
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn json_fields_sent_as_objects_are_validation_errors() {
    let (server, key) = setup(&["jsonform"]).await;
    let memories = json!([{"id": "j1", "text": "Prefers dark mode."}]);
    let cases = [
        json!({"type": "memory", "database": "jsonform", "memories": memories}),
        json!({"type": "memory", "database": "jsonform", "memories": {"text": "x"}}),
        json!({"type": "knowledge", "database": "jsonform",
               "app_knowledge": [app("j2", "t", "text")]}),
        json!({"type": "knowledge", "database": "jsonform",
               "app_knowledge": json!([app("j3", "t", "text")]).to_string(),
               "document_metadata": [{"id": "x"}]}),
    ];
    for body in cases {
        let reply = server.post("/context/ingest", &key, body.clone()).await;
        reply.assert_current_error(422, "VALIDATION_ERROR");
    }
    // The legacy upload reads the same form: `app_knowledge` as an array is 422 there too.
    let legacy = server
        .call(
            Method::POST,
            "/ingestion/upload_knowledge",
            Some(&key),
            Some(json!({"tenant_id": "jsonform", "app_knowledge": [app("j4", "t", "text")]})),
        )
        .await;
    legacy.assert_legacy_error(422, "VALIDATION_ERROR");
    // A JSON-encoded array that is not an array of the right shape is 422 too.
    let form = Form::new()
        .text("type", "memory")
        .text("database", "jsonform")
        .text("memories", "{\"text\": \"an object, not an array\"}");
    send_form(&server, "/context/ingest", &key, form)
        .await
        .assert_current_error(422, "VALIDATION_ERROR");
    let form = Form::new()
        .text("type", "memory")
        .text("database", "jsonform")
        .text("memories", "[{\"text\": ");
    send_form(&server, "/context/ingest", &key, form)
        .await
        .assert_current_error(422, "VALIDATION_ERROR");
    // Nothing was queued by any of them.
    for kind in ["knowledge", "memory"] {
        let listed = list(&server, &key, json!({"database": "jsonform", "type": kind})).await;
        assert_eq!(listed.current_ok(200)["total"], 0, "{listed:#?}");
    }
    status_of(&server, &key, "jsonform", None, &["j1", "j2", "j3", "j4"])
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");

    // The same JSON body with the field as a JSON string is accepted.
    let reply = server
        .post(
            "/context/ingest",
            &key,
            json!({"type": "memory", "database": "jsonform", "memories": memories.to_string()}),
        )
        .await;
    let data = reply.current_ok(202);
    assert_eq!(data["results"][0]["id"], "j1", "{reply:#?}");
    assert_eq!(data["results"][0]["status"], "queued", "{reply:#?}");
}

#[tokio::test]
async fn ingest_requests_are_validated_as_a_whole() {
    let (server, key) = setup(&["plain"]).await;
    server
        .ready_database_with_schema(
            &key,
            "typed",
            json!([{"name": "priority", "data_type": "INT32"}, {"name": "team"}]),
        )
        .await;

    // document_metadata / file_metadata length differing from the files: 422.
    let two_files =
        |field_files: &'static str, field_meta: &'static str, db_field: &'static str| {
            Form::new()
                .text("type", "knowledge")
                .text(db_field, "plain")
                .part(field_files, file("a.txt", b"alpha text", "text/plain"))
                .part(field_files, file("b.txt", b"beta text", "text/plain"))
                .text(field_meta, json!([{"id": "only-one"}]).to_string())
        };
    send_form(
        &server,
        "/context/ingest",
        &key,
        two_files("documents", "document_metadata", "database"),
    )
    .await
    .assert_current_error(422, "VALIDATION_ERROR");
    send_form(
        &server,
        "/ingestion/upload_knowledge",
        &key,
        two_files("files", "file_metadata", "tenant_id"),
    )
    .await
    .assert_legacy_error(422, "VALIDATION_ERROR");

    // A memory with neither text nor user_assistant_pairs: 422, and the valid one beside it
    // is not queued either.
    let bad_memories = json!([
        {"id": "fine", "text": "Likes hiking."},
        {"id": "empty", "title": "nothing in it"}
    ]);
    ingest_memories(&server, &key, "plain", "user_x", bad_memories.clone())
        .await
        .assert_current_error(422, "VALIDATION_ERROR");
    let add_memories = |memories: Value| {
        server.call(
            Method::POST,
            "/memories/add_memory",
            Some(&key),
            Some(json!({"tenant_id": "plain", "sub_tenant_id": "user_x", "memories": memories})),
        )
    };
    add_memories(bad_memories)
        .await
        .assert_legacy_error(422, "VALIDATION_ERROR");
    // A legacy memory that does not read as one (the wrong shape, a field of the wrong type):
    // 422 INVALID_MEMORY_FORMAT, and the valid one beside it is not queued either.
    for malformed in [
        json!({"id": "fine", "text": "Likes hiking."}),
        json!([{"id": "fine", "text": "Likes hiking."}, "Likes hiking."]),
        json!([{"id": "fine", "text": "Likes hiking."}, {"id": "n", "text": 42}]),
        json!([{"id": "fine", "text": "Likes hiking."},
               {"id": "p", "user_assistant_pairs": [{"user": "hi"}]}]),
        json!([{"id": "fine", "text": "Likes hiking."},
               {"id": "p", "user_assistant_pairs": "hi / hello"}]),
    ] {
        add_memories(malformed)
            .await
            .assert_legacy_error(422, "INVALID_MEMORY_FORMAT");
    }
    ingest_memories(
        &server,
        &key,
        "plain",
        "user_x",
        json!([{"text": "", "user_assistant_pairs": []}]),
    )
    .await
    .assert_current_error(422, "VALIDATION_ERROR");
    status_of(&server, &key, "plain", Some("user_x"), &["fine", "empty"])
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");

    // Tenant metadata not matching the schema: 422 and nothing queued, on every input kind.
    let mismatched_apps = json!([
        {"id": "ok-app", "title": "fine", "content": {"text": "fine"}, "metadata": {"priority": 2}},
        {"id": "bad-app", "title": "bad", "content": {"text": "bad"}, "metadata": {"priority": "high"}}
    ]);
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "typed")
        .text("app_knowledge", mismatched_apps.to_string());
    send_form(&server, "/context/ingest", &key, form)
        .await
        .assert_current_error(422, "VALIDATION_ERROR");
    let form = Form::new()
        .text("tenant_id", "typed")
        .text("app_knowledge", mismatched_apps.to_string());
    send_form(&server, "/ingestion/upload_knowledge", &key, form)
        .await
        .assert_legacy_error(422, "VALIDATION_ERROR");
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "typed")
        .part("documents", file("a.txt", b"alpha text", "text/plain"))
        .text(
            "document_metadata",
            json!([{"id": "bad-doc", "metadata": {"priority": "high"}}]).to_string(),
        );
    send_form(&server, "/context/ingest", &key, form)
        .await
        .assert_current_error(422, "VALIDATION_ERROR");
    ingest_memories(
        &server,
        &key,
        "typed",
        "user_x",
        json!([{"id": "bad-mem", "text": "x", "metadata": {"priority": 1.5}}]),
    )
    .await
    .assert_current_error(422, "VALIDATION_ERROR");
    server
        .call(
            Method::POST,
            "/memories/add_memory",
            Some(&key),
            Some(json!({"tenant_id": "typed", "memories":
                [{"id": "bad-mem2", "text": "x", "metadata": {"priority": "1"}}]})),
        )
        .await
        .assert_legacy_error(422, "VALIDATION_ERROR");
    for collection in [None, Some("user_x")] {
        status_of(
            &server,
            &key,
            "typed",
            collection,
            &["ok-app", "bad-app", "bad-doc", "bad-mem", "bad-mem2"],
        )
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");
    }
    for kind in ["knowledge", "memory"] {
        let listed = list(&server, &key, json!({"database": "typed", "type": kind})).await;
        assert_eq!(listed.current_ok(200)["total"], 0, "{listed:#?}");
    }
    assert_eq!(rows(&server, &key, "typed").await, (0, 0));

    // Matching values are accepted (the 422s above were about the values).
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "typed")
        .text(
            "app_knowledge",
            json!([{"id": "ok-app", "title": "fine", "content": {"text": "fine"},
                    "metadata": {"priority": 2, "team": "core"}}])
            .to_string(),
        );
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    assert_eq!(reply.current_ok(202)["results"][0]["status"], "queued");

    // Unknown database: 404 with each generation's code.
    let form = app_form("nosuchdb", &[app("x1", "x", "x")]);
    send_form(&server, "/context/ingest", &key, form)
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
    ingest_memories(&server, &key, "nosuchdb", "u", json!([{"text": "x"}]))
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
    let form = Form::new()
        .text("tenant_id", "nosuchdb")
        .text("app_knowledge", json!([app("x1", "x", "x")]).to_string());
    send_form(&server, "/ingestion/upload_knowledge", &key, form)
        .await
        .assert_legacy_error(404, "TENANT_NOT_FOUND");
    server
        .call(
            Method::POST,
            "/memories/add_memory",
            Some(&key),
            Some(json!({"tenant_id": "nosuchdb", "memories": [{"text": "x"}]})),
        )
        .await
        .assert_legacy_error(404, "TENANT_NOT_FOUND");
    status_of(&server, &key, "nosuchdb", None, &["x1"])
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");

    // Nothing to ingest, or type=memory without memories: 400.
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "plain");
    send_form(&server, "/context/ingest", &key, form)
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    let form = Form::new().text("type", "memory").text("database", "plain");
    send_form(&server, "/context/ingest", &key, form)
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");

    // An unknown type: 400.
    let form = Form::new()
        .text("type", "foo")
        .text("database", "plain")
        .text("app_knowledge", json!([app("x2", "x", "x")]).to_string());
    send_form(&server, "/context/ingest", &key, form)
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    status_of(&server, &key, "plain", None, &["x2"])
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");
}

// ---------------------------------------------------------------------------------------------
// 3. Memories
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn memories_are_ingested_listed_and_expire() {
    let (server, key) = setup_with(&[("ENGRAM_PIPELINE__EXPIRY_SWEEP_MS", "300")], &["mem"]).await;
    let reply = ingest_memories(
        &server,
        &key,
        "mem",
        "user_alice",
        json!([
            {"id": "m-text", "title": "Tea", "user_name": "Alice",
             "text": "Alice prefers green tea in the afternoon."},
            {"id": "m-pairs", "title": "Chat", "user_name": "Alice",
             "user_assistant_pairs": [
                {"user": "Book me a window seat.", "assistant": "Booked seat 12A by the window."},
                {"user": "And a vegetarian meal.", "assistant": "Vegetarian meal added."}
             ]},
            {"id": "m-infer", "title": "Inferred", "infer": true,
             "text": "Alice mentioned she moved to Lisbon and works in fintech."}
        ]),
    )
    .await;
    let data = reply.current_ok(202);
    assert_eq!(reply.body["meta"]["source_type"], "memory", "{reply:#?}");
    assert_eq!(reply.body["meta"]["collection"], "user_alice", "{reply:#?}");
    assert_eq!(data["success_count"], 3, "{reply:#?}");
    assert_eq!(data["success"], true, "{reply:#?}");
    let results = data["results"].as_array().unwrap();
    let expect = [
        ("m-text", "Tea", false),
        ("m-pairs", "Chat", false),
        ("m-infer", "Inferred", true),
    ];
    for (result, (id, title, infer)) in results.iter().zip(expect) {
        assert_eq!(result["id"], id, "{reply:#?}");
        assert_eq!(result["title"], title, "{reply:#?}");
        assert_eq!(result["infer"], infer, "{reply:#?}");
        assert_eq!(result["status"], "queued", "{reply:#?}");
        assert_eq!(result["error"], "", "{reply:#?}");
    }
    // Another user's memory lives in its own collection.
    ingest_memories(
        &server,
        &key,
        "mem",
        "user_bob",
        json!([{"id": "b-1", "text": "Bob drinks espresso."}]),
    )
    .await
    .current_ok(202);
    // Legacy add_memory, same per-user scope.
    let legacy = server
        .call(
            Method::POST,
            "/memories/add_memory",
            Some(&key),
            Some(json!({"tenant_id": "mem", "sub_tenant_id": "user_alice",
                        "memories": [{"id": "m-legacy", "text": "Alice runs on Sundays.", "infer": true}]})),
        )
        .await;
    let body = legacy_ok(&legacy, 202);
    assert_eq!(body["results"][0]["source_id"], "m-legacy", "{legacy:#?}");
    assert_eq!(body["results"][0]["status"], "queued", "{legacy:#?}");
    assert_eq!(body["results"][0]["infer"], true, "{legacy:#?}");
    assert_eq!(body["success_count"], 1, "{legacy:#?}");

    let alice = ["m-text", "m-pairs", "m-infer", "m-legacy"];
    wait_completed(&server, &key, "mem", Some("user_alice"), &alice).await;
    wait_completed(&server, &key, "mem", Some("user_bob"), &["b-1"]).await;
    // A memory is not visible in another user's collection.
    status_of(&server, &key, "mem", Some("user_bob"), &["m-text"])
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");
    let (knowledge, memory_rows) = rows(&server, &key, "mem").await;
    assert_eq!(knowledge, 0);
    assert!(memory_rows >= 5, "{memory_rows}");

    // Listing, current generation.
    let listed = list(
        &server,
        &key,
        json!({"database": "mem", "collection": "user_alice", "type": "memory"}),
    )
    .await;
    let data = listed.current_ok(200);
    assert!(data.get("sources").is_none(), "{listed:#?}");
    assert_eq!(data["total"], 4, "{listed:#?}");
    assert_pagination(&data["pagination"], 1, 50, 4, 1);
    for memory in data["user_memories"].as_array().unwrap() {
        assert_eq!(memory["database"], "mem", "{memory:#?}");
        assert_eq!(memory["collection"], "user_alice", "{memory:#?}");
        assert_eq!(memory["tenant_id"], "mem", "{memory:#?}");
        assert_eq!(memory["sub_tenant_id"], "user_alice", "{memory:#?}");
    }
    assert_eq!(
        sorted_owned(memory_ids(data)),
        sorted(&alice),
        "{listed:#?}"
    );
    let content = |data: &Value, id: &str| -> String {
        data["user_memories"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["memory_id"] == id)
            .unwrap_or_else(|| panic!("{id} missing"))["memory_content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(content(data, "m-text").contains("green tea"));
    let pairs = content(data, "m-pairs");
    for part in [
        "window seat",
        "Booked seat 12A",
        "vegetarian meal",
        "Vegetarian meal added",
    ] {
        assert!(pairs.contains(part), "{pairs}");
    }
    // Legacy listing, kind=memories.
    let legacy = legacy_list(
        &server,
        &key,
        json!({"tenant_id": "mem", "sub_tenant_id": "user_alice", "kind": "memories"}),
    )
    .await;
    let body = legacy_ok(&legacy, 200);
    assert_eq!(body["total"], 4, "{legacy:#?}");
    assert_eq!(body["success"], true, "{legacy:#?}");
    assert!(body.get("sources").is_none(), "{legacy:#?}");
    assert_eq!(
        sorted_owned(memory_ids(body)),
        sorted(&alice),
        "{legacy:#?}"
    );
    assert!(content(body, "m-text").contains("green tea"));
    assert_pagination(&body["pagination"], 1, 50, 4, 1);
    let bob = legacy_list(
        &server,
        &key,
        json!({"tenant_id": "mem", "sub_tenant_id": "user_bob", "kind": "memories"}),
    )
    .await;
    assert_eq!(memory_ids(legacy_ok(&bob, 200)), ["b-1"], "{bob:#?}");

    // A memory with expiry_time 1 disappears from listing and status.
    let before = Instant::now();
    ingest_memories(
        &server,
        &key,
        "mem",
        "user_alice",
        json!([{"id": "m-ttl", "text": "Temporary note: parking spot 42.", "expiry_time": 1}]),
    )
    .await
    .current_ok(202);
    let early = status_of(&server, &key, "mem", Some("user_alice"), &["m-ttl"]).await;
    if before.elapsed() < Duration::from_millis(800) {
        early.current_ok(200);
    }
    eventually(WAIT, "the expiring memory vanishes", || {
        let (server, key) = (&server, &key);
        async move {
            let listed = list(
                server,
                key,
                json!({"database": "mem", "collection": "user_alice", "type": "memory"}),
            )
            .await;
            let ids = memory_ids(listed.current_ok(200));
            let status = status_of(server, key, "mem", Some("user_alice"), &["m-ttl"]).await;
            (!ids.contains(&"m-ttl".to_owned()) && status.status == 404).then_some(())
        }
    })
    .await;
    status_of(&server, &key, "mem", Some("user_alice"), &["m-ttl"])
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");
    let remaining = alice;
    wait_completed(&server, &key, "mem", Some("user_alice"), &remaining).await;
    let listed = list(
        &server,
        &key,
        json!({"database": "mem", "collection": "user_alice", "type": "memory"}),
    )
    .await;
    assert_eq!(
        sorted_owned(memory_ids(listed.current_ok(200))),
        sorted(&remaining),
        "{listed:#?}"
    );
    // Its chunks are purged too: the memory row count returns to the live memories' count.
    let live_rows = {
        // Each live memory is short: one chunk each.
        remaining.len() as u64 + 1 // + Bob's
    };
    eventually(WAIT, "expired memory chunks purged", || {
        let (server, key) = (&server, &key);
        async move { (rows(server, key, "mem").await.1 == live_rows).then_some(()) }
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 4. Upsert
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn upsert_replaces_content_and_chunks() {
    let (server, key) = setup(&["ups"]).await;
    let long = paragraphs("upsert", 4);
    ingest_apps(&server, &key, "ups", &[app("u1", "Long", &long)]).await;
    wait_completed(&server, &key, "ups", None, &["u1"]).await;
    let (long_rows, _) = rows(&server, &key, "ups").await;
    assert!(
        long_rows >= 2,
        "four paragraphs make several chunks: {long_rows}"
    );

    // Same id, new short content (upsert defaults to true).
    let short = "Short replacement text about a single topic.";
    ingest_apps(&server, &key, "ups", &[app("u1", "Short", short)]).await;
    wait_completed(&server, &key, "ups", None, &["u1"]).await;
    assert_eq!(rows(&server, &key, "ups").await, (1, 0));
    let listed = list(&server, &key, json!({"database": "ups"})).await;
    let data = listed.current_ok(200);
    assert_eq!(data["total"], 1, "{listed:#?}");
    assert_eq!(data["sources"][0]["id"], "u1");
    assert_eq!(data["sources"][0]["title"], "Short");
    assert_eq!(data["sources"][0]["content"]["text"], short);

    // Back to the long content, explicitly upsert=true: the count is the long one again,
    // not cumulative.
    let form = app_form("ups", &[app("u1", "Long", &long)]).text("upsert", "true");
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    assert_eq!(reply.current_ok(202)["results"][0]["status"], "queued");
    wait_completed(&server, &key, "ups", None, &["u1"]).await;
    assert_eq!(rows(&server, &key, "ups").await, (long_rows, 0));

    // An upsert arriving while the previous version is being indexed: only the new content
    // is indexed.
    let other_long = paragraphs("racing", 5);
    ingest_apps(&server, &key, "ups", &[app("u1", "Racing", &other_long)]).await;
    eventually(WAIT, "indexing of the racing version under way", || {
        let (server, key) = (&server, &key);
        async move {
            let reply = status_of(server, key, "ups", None, &["u1"]).await;
            (reply.current_ok(200)["statuses"][0]["indexing_status"] != "queued").then_some(())
        }
    })
    .await;
    ingest_apps(&server, &key, "ups", &[app("u1", "Short", short)]).await;
    wait_completed(&server, &key, "ups", None, &["u1"]).await;
    assert_eq!(rows(&server, &key, "ups").await, (1, 0));
    ingest_apps(&server, &key, "ups", &[app("u1", "Long", &long)]).await;
    wait_completed(&server, &key, "ups", None, &["u1"]).await;
    assert_eq!(rows(&server, &key, "ups").await, (long_rows, 0));

    // upsert=false: a per-item error; content, chunks and status unchanged.
    let form = app_form("ups", &[app("u1", "Other", short)]).text("upsert", "false");
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    let data = reply.current_ok(202);
    assert_eq!(data["success"], false, "{reply:#?}");
    assert_eq!(data["success_count"], 0, "{reply:#?}");
    assert_eq!(data["failed_count"], 1, "{reply:#?}");
    assert_eq!(data["results"][0]["id"], "u1", "{reply:#?}");
    assert_ne!(data["results"][0]["status"], "queued", "{reply:#?}");
    assert!(
        data["results"][0]["error"]
            .as_str()
            .is_some_and(|e| !e.is_empty()),
        "{reply:#?}"
    );
    let status = status_of(&server, &key, "ups", None, &["u1"]).await;
    assert_eq!(
        status.current_ok(200)["statuses"][0]["indexing_status"],
        "completed"
    );
    let listed = list(&server, &key, json!({"database": "ups"})).await;
    let data = listed.current_ok(200);
    assert_eq!(data["total"], 1, "{listed:#?}");
    assert_eq!(data["sources"][0]["title"], "Long");
    assert_eq!(data["sources"][0]["content"]["text"], long.as_str());
    assert_eq!(rows(&server, &key, "ups").await, (long_rows, 0));

    // A new id with upsert=false is accepted; in the legacy route too.
    let form = app_form("ups", &[app("u2", "New", short)]).text("upsert", "false");
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    assert_eq!(reply.current_ok(202)["results"][0]["status"], "queued");
    let form = Form::new()
        .text("tenant_id", "ups")
        .text("upsert", "false")
        .text(
            "app_knowledge",
            json!([app("u2", "Again", "other")]).to_string(),
        );
    let reply = send_form(&server, "/ingestion/upload_knowledge", &key, form).await;
    let body = legacy_ok(&reply, 202);
    assert_eq!(body["failed_count"], 1, "{reply:#?}");
    assert_ne!(body["results"][0]["status"], "queued", "{reply:#?}");
    wait_completed(&server, &key, "ups", None, &["u1", "u2"]).await;
    assert_eq!(rows(&server, &key, "ups").await, (long_rows + 1, 0));

    // Files upsert by their document_metadata id as well.
    for body in [MARKDOWN, TEXT] {
        let form = Form::new()
            .text("type", "knowledge")
            .text("database", "ups")
            .part("documents", file("doc.txt", body.as_bytes(), "text/plain"))
            .text("document_metadata", json!([{"id": "f1"}]).to_string());
        let reply = send_form(&server, "/context/ingest", &key, form).await;
        assert_eq!(reply.current_ok(202)["results"][0]["status"], "queued");
        wait_completed(&server, &key, "ups", None, &["f1"]).await;
    }
    assert_eq!(rows(&server, &key, "ups").await, (long_rows + 2, 0));
    let listed = list(&server, &key, json!({"database": "ups", "ids": ["f1"]})).await;
    let data = listed.current_ok(200);
    assert_eq!(data["total"], 1, "{listed:#?}");
    assert!(
        data["sources"][0]["content"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("design review") && !t.contains("regression")),
        "{listed:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 5. Listing
// ---------------------------------------------------------------------------------------------

/// Seven sources `s1..s7`: odd ones `page`, even ones `chat`; `team` alpha for 1-4, beta for
/// 5-7; `priority` = n; region eu for 1-3, us for 4-7.
async fn seven_sources(server: &Server, key: &str, db: &str) {
    server
        .ready_database_with_schema(
            key,
            db,
            json!([{"name": "team", "enable_match": true},
               {"name": "priority", "data_type": "INT32", "enable_match": true}]),
        )
        .await;
    let items: Vec<Value> = (1..=7)
        .map(|n| {
            json!({
                "id": format!("s{n}"),
                "title": format!("Doc {n}"),
                "type": if n % 2 == 1 { "page" } else { "chat" },
                "description": format!("description {n}"),
                "url": format!("https://example.com/{n}"),
                "content": {"text": format!("Body of document number {n}.")},
                "metadata": {"team": if n <= 4 { "alpha" } else { "beta" }, "priority": n},
                "additional_metadata": {"region": if n <= 3 { "eu" } else { "us" }},
            })
        })
        .collect();
    ingest_apps(server, key, db, &items).await;
}

#[tokio::test]
async fn listing_paginates_and_validates_limits() {
    let (server, key) = setup(&[]).await;
    seven_sources(&server, &key, "pages").await;
    let all = ["s1", "s2", "s3", "s4", "s5", "s6", "s7"];

    // Current generation: 3 + 3 + 1.
    let mut seen = Vec::new();
    for page in 1..=3u64 {
        let reply = list(
            &server,
            &key,
            json!({"database": "pages", "page": page, "page_size": 3}),
        )
        .await;
        let data = reply.current_ok(200);
        assert_pagination(&data["pagination"], page, 3, 7, 3);
        assert_eq!(data["total"], 7, "{reply:#?}");
        let ids = source_ids(data);
        assert_eq!(ids.len(), if page < 3 { 3 } else { 1 }, "{reply:#?}");
        seen.extend(ids);
    }
    assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), 7, "{seen:?}");
    assert_eq!(sorted_owned(seen), sorted(&all));
    // Past the end: empty page, same totals.
    let reply = list(
        &server,
        &key,
        json!({"database": "pages", "page": 4, "page_size": 3}),
    )
    .await;
    let data = reply.current_ok(200);
    assert!(source_ids(data).is_empty(), "{reply:#?}");
    assert_pagination(&data["pagination"], 4, 3, 7, 3);
    // Defaults: page 1, page_size 50.
    let reply = list(&server, &key, json!({"database": "pages"})).await;
    assert_pagination(&reply.current_ok(200)["pagination"], 1, 50, 7, 1);

    // Legacy generation: the same pages.
    let mut seen = Vec::new();
    for page in 1..=3u64 {
        let reply = legacy_list(
            &server,
            &key,
            json!({"tenant_id": "pages", "page": page, "page_size": 3}),
        )
        .await;
        let body = legacy_ok(&reply, 200);
        assert_eq!(body["success"], true, "{reply:#?}");
        assert_eq!(body["total"], 7, "{reply:#?}");
        assert_pagination(&body["pagination"], page, 3, 7, 3);
        seen.extend(source_ids(body));
    }
    assert_eq!(sorted_owned(seen), sorted(&all));

    // Limits: page_size 1-100, page >= 1; bounds included.
    for (page, size) in [(1, 1), (1, 100)] {
        let reply = list(
            &server,
            &key,
            json!({"database": "pages", "page": page, "page_size": size}),
        )
        .await;
        assert_eq!(reply.current_ok(200)["pagination"]["page_size"], size);
    }
    for bad in [
        json!({"page_size": 0}),
        json!({"page_size": 101}),
        json!({"page": 0}),
        json!({"page": -1}),
    ] {
        let mut current = bad.clone();
        current["database"] = json!("pages");
        list(&server, &key, current)
            .await
            .assert_current_error(400, "INVALID_PARAMETERS");
        let mut legacy = bad.clone();
        legacy["tenant_id"] = json!("pages");
        legacy_list(&server, &key, legacy)
            .await
            .assert_legacy_error(400, "INVALID_PARAMETERS");
        let mut memories = bad;
        memories["tenant_id"] = json!("pages");
        memories["kind"] = json!("memories");
        legacy_list(&server, &key, memories)
            .await
            .assert_legacy_error(400, "INVALID_PARAMETERS");
    }

    // An unknown `type`: 400 naming the allowed values.
    let reply = list(
        &server,
        &key,
        json!({"database": "pages", "type": "videos"}),
    )
    .await;
    reply.assert_current_error(400, "INVALID_PARAMETERS");
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("knowledge") && message.contains("memory"),
        "{reply:#?}"
    );

    // Id lists: at most 100.
    let many: Vec<String> = (0..101).map(|i| format!("id{i}")).collect();
    let hundred: Vec<String> = std::iter::once("s2".to_owned())
        .chain((0..99).map(|i| format!("id{i}")))
        .collect();
    list(&server, &key, json!({"database": "pages", "ids": many}))
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    list(
        &server,
        &key,
        json!({"database": "pages", "source_ids": many}),
    )
    .await
    .assert_current_error(400, "INVALID_PARAMETERS");
    legacy_list(
        &server,
        &key,
        json!({"tenant_id": "pages", "source_ids": many}),
    )
    .await
    .assert_legacy_error(400, "INVALID_PARAMETERS");
    let reply = list(&server, &key, json!({"database": "pages", "ids": hundred})).await;
    assert_eq!(source_ids(reply.current_ok(200)), ["s2"], "{reply:#?}");
    let reply = legacy_list(
        &server,
        &key,
        json!({"tenant_id": "pages", "source_ids": ["s1", "s3", "zzz"]}),
    )
    .await;
    let body = legacy_ok(&reply, 200);
    assert_eq!(body["total"], 2, "{reply:#?}");
    assert_eq!(sorted_owned(source_ids(body)), ["s1", "s3"]);
    // Pagination still applies to an id list.
    let reply = list(
        &server,
        &key,
        json!({"database": "pages", "ids": ["s1", "s2", "s3"], "page_size": 2, "page": 2}),
    )
    .await;
    let data = reply.current_ok(200);
    assert_pagination(&data["pagination"], 2, 2, 3, 2);
    assert_eq!(source_ids(data).len(), 1);

    // Unknown database.
    list(&server, &key, json!({"database": "nosuchdb"}))
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
    legacy_list(&server, &key, json!({"tenant_id": "nosuchdb"}))
        .await
        .assert_legacy_error(404, "TENANT_NOT_FOUND");
    // Unknown type / kind.
    list(&server, &key, json!({"database": "pages", "type": "foo"}))
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    legacy_list(&server, &key, json!({"tenant_id": "pages", "kind": "foo"}))
        .await
        .assert_legacy_error(400, "INVALID_PARAMETERS");
}

/// `(filters, expected ids, deprecated aliases reported on the current route)`.
type FilterCase = (Value, Vec<&'static str>, Vec<(&'static str, &'static str)>);

#[tokio::test]
async fn listing_filters_and_projects_fields() {
    let (server, key) = setup(&[]).await;
    seven_sources(&server, &key, "filters").await;

    // (filters, expected ids, deprecated aliases used on the current route)
    let cases: Vec<FilterCase> = vec![
        (
            json!({"tenant_metadata": {"team": "alpha"}}),
            vec!["s1", "s2", "s3", "s4"],
            vec![],
        ),
        (
            json!({"metadata": {"team": "beta"}}),
            vec!["s5", "s6", "s7"],
            vec![("metadata", "tenant_metadata")],
        ),
        (
            json!({"tenant_metadata": {"priority": 5}}),
            vec!["s5"],
            vec![],
        ),
        (
            json!({"additional_metadata": {"region": "eu"}}),
            vec!["s1", "s2", "s3"],
            vec![],
        ),
        (
            json!({"document_metadata": {"region": "us"}}),
            vec!["s4", "s5", "s6", "s7"],
            vec![("document_metadata", "additional_metadata")],
        ),
        (
            json!({"source_fields": {"type": "chat"}}),
            vec!["s2", "s4", "s6"],
            vec![],
        ),
        (
            json!({"source_fields": {"title": "Doc 5"}}),
            vec!["s5"],
            vec![],
        ),
        (
            json!({"source_fields": {"description": "description 7", "url": "https://example.com/7"}}),
            vec!["s7"],
            vec![],
        ),
        (
            json!({"tenant_metadata": {"team": "alpha"}, "source_fields": {"type": "page"},
                "additional_metadata": {"region": "eu"}}),
            vec!["s1", "s3"],
            vec![],
        ),
        (
            json!({"tenant_metadata": {"team": "gamma"}}),
            vec![],
            vec![],
        ),
    ];
    for (filters, expected, deprecated) in &cases {
        let reply = list(
            &server,
            &key,
            json!({"database": "filters", "filters": filters}),
        )
        .await;
        let data = reply.current_ok(200);
        assert_eq!(
            sorted_owned(source_ids(data)),
            sorted(expected),
            "{filters}: {reply:#?}"
        );
        assert_eq!(data["total"], expected.len(), "{reply:#?}");
        assert_eq!(data["pagination"]["total"], expected.len(), "{reply:#?}");
        reply.assert_deprecations(deprecated);

        let reply = legacy_list(
            &server,
            &key,
            json!({"tenant_id": "filters", "filters": filters}),
        )
        .await;
        let body = legacy_ok(&reply, 200);
        assert_eq!(
            sorted_owned(source_ids(body)),
            sorted(expected),
            "{filters}: {reply:#?}"
        );
        assert_eq!(body["total"], expected.len(), "{reply:#?}");
    }

    // Disallowed source_fields keys and non-string values: 400.
    for filters in [
        json!({"source_fields": {"note": "x"}}),
        json!({"source_fields": {"content": "x"}}),
        json!({"source_fields": {"id": "s1"}}),
        json!({"source_fields": {"title": 5}}),
    ] {
        list(
            &server,
            &key,
            json!({"database": "filters", "filters": filters}),
        )
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
        legacy_list(
            &server,
            &key,
            json!({"tenant_id": "filters", "filters": filters}),
        )
        .await
        .assert_legacy_error(400, "INVALID_PARAMETERS");
    }

    // Every source in full without include_fields.
    let reply = list(&server, &key, json!({"database": "filters", "ids": ["s5"]})).await;
    let full = &reply.current_ok(200)["sources"][0];
    assert_eq!(full["id"], "s5");
    // The official client requires `database` and `collection`; the deprecated spellings
    // carry the same values.
    for (current, deprecated) in [("database", "tenant_id"), ("collection", "sub_tenant_id")] {
        assert_eq!(full[current], "filters", "{current}: {full:#?}");
        assert_eq!(full[deprecated], full[current], "{full:#?}");
    }
    assert_eq!(full["title"], "Doc 5");
    assert_eq!(full["type"], "page");
    assert_eq!(full["description"], "description 5");
    assert_eq!(full["url"], "https://example.com/5");
    assert_eq!(full["content"]["text"], "Body of document number 5.");
    assert_eq!(
        full["tenant_metadata"],
        json!({"team": "beta", "priority": 5})
    );
    assert_eq!(full["metadata"], json!({"team": "beta", "priority": 5}));
    assert_eq!(full["additional_metadata"], json!({"region": "us"}));

    // include_fields: only the listed fields (plus ids) are filled, on both routes.
    let reply = list(
        &server,
        &key,
        json!({"database": "filters", "ids": ["s5"], "include_fields": ["title"]}),
    )
    .await;
    let legacy = legacy_list(
        &server,
        &key,
        json!({"tenant_id": "filters", "source_ids": ["s5"], "include_fields": ["title"]}),
    )
    .await;
    for source in [
        reply.current_ok(200)["sources"][0].clone(),
        legacy_ok(&legacy, 200)["sources"][0].clone(),
    ] {
        assert_eq!(source["id"], "s5", "{source:#?}");
        assert_eq!(source["tenant_id"], "filters", "{source:#?}");
        assert_eq!(source["sub_tenant_id"], "filters", "{source:#?}");
        assert_eq!(source["title"], "Doc 5", "{source:#?}");
        assert_eq!(source["type"], "", "{source:#?}");
        assert_eq!(source["description"], "", "{source:#?}");
        assert_eq!(source["url"], "", "{source:#?}");
        assert!(
            source["content"].is_null() || source["content"]["text"] == "",
            "{source:#?}"
        );
        assert_eq!(source["metadata"], json!({}), "{source:#?}");
        assert_eq!(source["tenant_metadata"], json!({}), "{source:#?}");
        assert_eq!(source["additional_metadata"], json!({}), "{source:#?}");
    }
    let reply = list(
        &server,
        &key,
        json!({"database": "filters", "ids": ["s5"],
               "include_fields": ["content", "metadata", "document_metadata", "type"]}),
    )
    .await;
    let source = &reply.current_ok(200)["sources"][0];
    assert_eq!(source["title"], "", "{source:#?}");
    assert_eq!(source["type"], "page", "{source:#?}");
    assert_eq!(source["content"]["text"], "Body of document number 5.");
    assert_eq!(source["metadata"], json!({"team": "beta", "priority": 5}));
    assert_eq!(source["additional_metadata"], json!({"region": "us"}));
    assert_eq!(source["description"], "", "{source:#?}");

    for bad in [json!(["bogus"]), json!(["title", "secret"]), json!(["id"])] {
        list(
            &server,
            &key,
            json!({"database": "filters", "include_fields": bad}),
        )
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
        legacy_list(
            &server,
            &key,
            json!({"tenant_id": "filters", "include_fields": bad}),
        )
        .await
        .assert_legacy_error(400, "INVALID_PARAMETERS");
    }
}

// ---------------------------------------------------------------------------------------------
// 6. Deletion
// ---------------------------------------------------------------------------------------------

async fn delete_context(server: &Server, key: &str, body: Value) -> Reply {
    server
        .call(Method::DELETE, "/context", Some(key), Some(body))
        .await
}

#[tokio::test]
async fn deleted_items_are_gone_everywhere() {
    let (server, key) = setup(&["del"]).await;
    let short = |n: &str| app(n, n, &format!("Short knowledge item {n}."));
    ingest_apps(
        &server,
        &key,
        "del",
        &[short("d1"), short("d2"), short("d3")],
    )
    .await;
    ingest_memories(
        &server,
        &key,
        "del",
        "user_m",
        json!([{"id": "m1", "text": "Keeps a cat."}, {"id": "m2", "text": "Drives an EV."}]),
    )
    .await
    .current_ok(202);
    wait_completed(&server, &key, "del", None, &["d1", "d2", "d3"]).await;
    wait_completed(&server, &key, "del", Some("user_m"), &["m1", "m2"]).await;
    assert_eq!(rows(&server, &key, "del").await, (3, 2));

    // Current: per-item results.
    let reply = delete_context(
        &server,
        &key,
        json!({"database": "del", "ids": ["d1", "nope"], "type": "knowledge"}),
    )
    .await;
    let data = reply.current_ok(200);
    assert_eq!(data["deleted_count"], 1, "{reply:#?}");
    assert_eq!(data["success"], false, "{reply:#?}");
    assert_eq!(
        data["results"][0],
        json!({"id": "d1", "deleted": true, "error": ""})
    );
    assert_eq!(data["results"][1]["id"], "nope");
    assert_eq!(data["results"][1]["deleted"], false);
    assert!(data["results"][1]["error"]
        .as_str()
        .is_some_and(|e| !e.is_empty()));
    status_of(&server, &key, "del", None, &["d1"])
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");
    let listed = list(&server, &key, json!({"database": "del"})).await;
    assert_eq!(
        sorted_owned(source_ids(listed.current_ok(200))),
        ["d2", "d3"]
    );
    assert_eq!(rows(&server, &key, "del").await, (2, 2));
    // Deleting it again: deleted false.
    let reply = delete_context(&server, &key, json!({"database": "del", "ids": ["d1"]})).await;
    assert_eq!(reply.current_ok(200)["results"][0]["deleted"], false);
    // A knowledge id with type=memory is not deleted.
    let reply = delete_context(
        &server,
        &key,
        json!({"database": "del", "ids": ["d2"], "type": "memory"}),
    )
    .await;
    assert_eq!(
        reply.current_ok(200)["results"][0]["deleted"],
        false,
        "{reply:#?}"
    );
    wait_completed(&server, &key, "del", None, &["d2"]).await;

    // Legacy bulk delete.
    let reply = server
        .call(
            Method::POST,
            "/knowledge/delete_knowledge",
            Some(&key),
            Some(json!({"tenant_id": "del", "ids": ["d2", "ghost"]})),
        )
        .await;
    let body = legacy_ok(&reply, 200);
    assert_eq!(body["deleted_count"], 1, "{reply:#?}");
    assert_eq!(body["results"][0]["id"], "d2");
    assert_eq!(body["results"][0]["deleted"], true);
    assert_eq!(body["results"][1]["deleted"], false);
    server
        .call(
            Method::POST,
            "/ingestion/verify_processing?file_ids=d2&tenant_id=del",
            Some(&key),
            None,
        )
        .await
        .assert_legacy_error(404, "FILE_NOT_FOUND");
    let listed = legacy_list(&server, &key, json!({"tenant_id": "del"})).await;
    assert_eq!(source_ids(legacy_ok(&listed, 200)), ["d3"]);
    assert_eq!(rows(&server, &key, "del").await, (1, 2));
    server
        .call(
            Method::POST,
            "/knowledge/delete_knowledge",
            Some(&key),
            Some(json!({"tenant_id": "nosuchdb", "ids": ["d3"]})),
        )
        .await
        .assert_legacy_error(404, "TENANT_NOT_FOUND");
    delete_context(
        &server,
        &key,
        json!({"database": "nosuchdb", "ids": ["d3"]}),
    )
    .await
    .assert_current_error(404, "DATABASE_NOT_FOUND");

    // The id list: 1 to 100 ids.
    let many: Vec<String> = (0..101).map(|i| format!("x{i}")).collect();
    delete_context(&server, &key, json!({"database": "del", "ids": many}))
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    delete_context(&server, &key, json!({"database": "del", "ids": []}))
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    server
        .call(
            Method::POST,
            "/knowledge/delete_knowledge",
            Some(&key),
            Some(json!({"tenant_id": "del", "ids": many})),
        )
        .await
        .assert_legacy_error(400, "INVALID_PARAMETERS");
    server
        .delete("/memories/delete_memory?tenant_id=del", &key)
        .await
        .assert_legacy_error(400, "INVALID_PARAMETERS");
    assert_eq!(rows(&server, &key, "del").await, (1, 2));

    // Memories: current delete by type=memory in the user's collection.
    let reply = delete_context(
        &server,
        &key,
        json!({"database": "del", "collection": "user_m", "ids": ["m2"], "type": "memory"}),
    )
    .await;
    assert_eq!(
        reply.current_ok(200)["results"][0]["deleted"],
        true,
        "{reply:#?}"
    );
    // Legacy delete_memory.
    let reply = server
        .delete(
            "/memories/delete_memory?tenant_id=del&sub_tenant_id=user_m&memory_id=m1",
            &key,
        )
        .await;
    assert_eq!(
        *legacy_ok(&reply, 200),
        json!({"success": true, "user_memory_deleted": true}),
        "{reply:#?}"
    );
    for path in [
        "/memories/delete_memory?tenant_id=del&sub_tenant_id=user_m&memory_id=m1",
        "/memories/delete_memory?tenant_id=del&sub_tenant_id=user_m&memory_id=never",
        // A knowledge id is not a memory.
        "/memories/delete_memory?tenant_id=del&memory_id=d3",
    ] {
        server
            .delete(path, &key)
            .await
            .assert_legacy_error(404, "MEMORY_NOT_FOUND");
    }
    status_of(&server, &key, "del", Some("user_m"), &["m1", "m2"])
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");
    let listed = list(&server, &key, json!({"database": "del", "type": "memory"})).await;
    assert_eq!(listed.current_ok(200)["total"], 0, "{listed:#?}");
    assert_eq!(rows(&server, &key, "del").await, (1, 0));
    wait_completed(&server, &key, "del", None, &["d3"]).await;
}

#[tokio::test]
async fn an_item_deleted_while_indexing_never_comes_back() {
    let (server, key) = setup(&["racy", "sentinel"]).await;
    // Several long items so that some are in flight when their deletion arrives.
    let ids: Vec<String> = (0..6).map(|i| format!("gone{i}")).collect();
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let items: Vec<Value> = ids
        .iter()
        .map(|id| app(id, id, &paragraphs(id, 4)))
        .collect();
    for item in &items {
        ingest_apps(&server, &key, "racy", std::slice::from_ref(item)).await;
    }
    // Delete the first at once, the rest once indexing has started on them.
    let reply = delete_context(&server, &key, json!({"database": "racy", "ids": ["gone0"]})).await;
    assert_eq!(reply.current_ok(200)["deleted_count"], 1, "{reply:#?}");
    eventually(WAIT, "indexing under way", || {
        let (server, key) = (&server, &key);
        async move {
            let reply = status_of(
                server,
                key,
                "racy",
                None,
                &["gone1", "gone2", "gone3", "gone4", "gone5"],
            )
            .await;
            let statuses = reply.current_ok(200)["statuses"]
                .as_array()
                .unwrap()
                .clone();
            statuses
                .iter()
                .any(|s| s["indexing_status"] != "queued")
                .then_some(())
        }
    })
    .await;
    let reply = delete_context(
        &server,
        &key,
        json!({"database": "racy", "ids": ["gone1", "gone2", "gone3", "gone4", "gone5"], "type": "knowledge"}),
    )
    .await;
    let data = reply.current_ok(200);
    assert_eq!(data["deleted_count"], 5, "{reply:#?}");

    // An item queued after them in another database: once it is done, the worker has been
    // through every deleted one.
    ingest_apps(
        &server,
        &key,
        "sentinel",
        &[app("after", "after", "Sentinel item.")],
    )
    .await;
    wait_completed(&server, &key, "sentinel", None, &["after"]).await;
    holds_for(Duration::from_secs(3), || {
        let (server, key, id_refs) = (&server, &key, &id_refs);
        async move {
            status_of(server, key, "racy", None, id_refs)
                .await
                .assert_current_error(404, "FILE_NOT_FOUND");
            let listed = list(server, key, json!({"database": "racy"})).await;
            assert_eq!(listed.current_ok(200)["total"], 0, "{listed:#?}");
            assert_eq!(rows(server, key, "racy").await, (0, 0));
        }
    })
    .await;
    // The same ids can be ingested again from scratch.
    ingest_apps(
        &server,
        &key,
        "racy",
        &[app("gone0", "back", "Back again, short.")],
    )
    .await;
    wait_completed(&server, &key, "racy", None, &["gone0"]).await;
    assert_eq!(rows(&server, &key, "racy").await, (1, 0));
}

// ---------------------------------------------------------------------------------------------
// 7. Crash safety
// ---------------------------------------------------------------------------------------------

fn crash_items() -> Vec<Value> {
    (0..40)
        .map(|i| {
            let id = format!("c{i:02}");
            app(
                &id,
                &format!("Crash item {i}"),
                &paragraphs(&format!("topic{i}"), 3),
            )
        })
        .collect()
}

async fn completed_count(server: &Server, key: &str, db: &str, ids: &[&str]) -> usize {
    let reply = status_of(server, key, db, None, ids).await;
    let statuses = reply.current_ok(200)["statuses"]
        .as_array()
        .expect("statuses")
        .clone();
    for s in &statuses {
        assert_ne!(s["indexing_status"], "errored", "{reply:#?}");
    }
    statuses
        .iter()
        .filter(|s| s["indexing_status"] == "completed")
        .count()
}

#[tokio::test]
async fn a_crash_mid_indexing_loses_nothing_and_indexes_nothing_twice() {
    // Small batches, so that a kill lands while items are still to do (one batch of 16 light
    // items could finish the rest between two polls).
    let envs = [
        ("ENGRAM_PIPELINE__LEASE_MS", "1500"),
        ("ENGRAM_PIPELINE__HEARTBEAT_MS", "500"),
        ("ENGRAM_PIPELINE__BATCH_ITEMS", "2"),
    ];
    let items = crash_items();
    let ids: Vec<String> = items
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();

    let (mut server, key) = setup_with(&envs, &["crashy"]).await;
    ingest_apps(&server, &key, "crashy", &items).await;
    // A first crash right after the 202.
    server.kill();
    server.restart();
    // Then twice more, each time as soon as more (but not all) items are indexed: the worker
    // is in the middle of a batch.
    let mut done_before = 0;
    for _ in 0..2 {
        let done_at_kill = eventually(WAIT, "more items indexed", || {
            let (server, key, ids) = (&server, &key, &ids);
            async move {
                let done = completed_count(server, key, "crashy", ids).await;
                (done > done_before).then_some(done)
            }
        })
        .await;
        server.kill();
        eprintln!(
            "crash test: {done_at_kill} of {} completed at the kill",
            ids.len()
        );
        assert!(
            done_at_kill < ids.len(),
            "all {done_at_kill} done before the crash"
        );
        done_before = done_at_kill;
        server.restart();
    }
    wait_completed(&server, &key, "crashy", None, &ids).await;
    server.assert_consistent();
    let listed = list(
        &server,
        &key,
        json!({"database": "crashy", "page_size": 100}),
    )
    .await;
    assert_eq!(listed.current_ok(200)["total"], 40, "{listed:#?}");
    let (crashed_rows, _) = rows(&server, &key, "crashy").await;
    // Stays put once everything is done.
    holds_for(Duration::from_secs(2), || {
        let (server, key) = (&server, &key);
        async move { assert_eq!(rows(server, key, "crashy").await.0, crashed_rows) }
    })
    .await;
    // The keyword index (kept on disk, followed from its position) holds every item after the
    // crashes and one more: each is found by its own word, and only it.
    server.kill();
    server.restart();
    for (i, id) in ids.iter().enumerate() {
        let reply = server
            .post(
                "/query",
                &key,
                json!({"database": "crashy", "query": format!("topic{i}"), "max_results": 50, "query_by": "text"}),
            )
            .await;
        let found: BTreeSet<&str> = reply.current_ok(200)["chunks"]
            .as_array()
            .expect("chunks")
            .iter()
            .filter_map(|c| c["id"].as_str())
            .collect();
        assert_eq!(found, BTreeSet::from([*id]), "topic{i}: {reply:#?}");
    }
    drop(server);

    // A clean run of the same items.
    let (clean, clean_key) = setup_with(&envs, &["crashy"]).await;
    ingest_apps(&clean, &clean_key, "crashy", &items).await;
    wait_completed(&clean, &clean_key, "crashy", None, &ids).await;
    let (clean_rows, _) = rows(&clean, &clean_key, "crashy").await;
    assert!(
        clean_rows >= 80,
        "three paragraphs make two or more chunks: {clean_rows}"
    );
    assert_eq!(
        crashed_rows, clean_rows,
        "chunks after a crash and restart must equal a clean run"
    );
}

// ---------------------------------------------------------------------------------------------
// 8. Isolation
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn other_organizations_and_databases_see_nothing() {
    let (server, key) = setup(&["iso_x", "iso_y"]).await;
    ingest_apps(
        &server,
        &key,
        "iso_x",
        &[app("x-1", "X one", "Only in database X.")],
    )
    .await;
    ingest_apps(
        &server,
        &key,
        "iso_y",
        &[app("y-1", "Y one", "Only in database Y.")],
    )
    .await;
    ingest_memories(
        &server,
        &key,
        "iso_y",
        "u",
        json!([{"id": "y-m", "text": "Y memory."}]),
    )
    .await
    .current_ok(202);
    wait_completed(&server, &key, "iso_x", None, &["x-1"]).await;
    wait_completed(&server, &key, "iso_y", None, &["y-1"]).await;

    // Database X lists only its own items; Y's ids are unknown there.
    let listed = list(&server, &key, json!({"database": "iso_x"})).await;
    assert_eq!(source_ids(listed.current_ok(200)), ["x-1"], "{listed:#?}");
    let listed = list(
        &server,
        &key,
        json!({"database": "iso_x", "ids": ["y-1", "x-1"]}),
    )
    .await;
    assert_eq!(source_ids(listed.current_ok(200)), ["x-1"], "{listed:#?}");
    let listed = list(
        &server,
        &key,
        json!({"database": "iso_x", "type": "memory"}),
    )
    .await;
    assert_eq!(listed.current_ok(200)["total"], 0, "{listed:#?}");
    let legacy = legacy_list(&server, &key, json!({"tenant_id": "iso_x"})).await;
    assert_eq!(source_ids(legacy_ok(&legacy, 200)), ["x-1"]);
    status_of(&server, &key, "iso_x", None, &["y-1"])
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");
    let reply = delete_context(&server, &key, json!({"database": "iso_x", "ids": ["y-1"]})).await;
    assert_eq!(reply.current_ok(200)["results"][0]["deleted"], false);
    wait_completed(&server, &key, "iso_y", None, &["y-1"]).await;

    // A key of the same organization restricted to X cannot touch Y.
    let x_only = server.key(ORG, &["iso_x"]);
    let listed = list(&server, &x_only, json!({"database": "iso_x"})).await;
    assert_eq!(source_ids(listed.current_ok(200)), ["x-1"]);
    list(&server, &x_only, json!({"database": "iso_y"}))
        .await
        .assert_current_error(403, "FORBIDDEN");
    status_of(&server, &x_only, "iso_y", None, &["y-1"])
        .await
        .assert_current_error(403, "FORBIDDEN");

    // Another organization: every read and write answers as for a missing database.
    let other = server.key("globex", &[]);
    status_of(&server, &other, "iso_x", None, &["x-1"])
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
    for kind in ["knowledge", "memory"] {
        list(&server, &other, json!({"database": "iso_y", "type": kind}))
            .await
            .assert_current_error(404, "DATABASE_NOT_FOUND");
    }
    legacy_list(&server, &other, json!({"tenant_id": "iso_x"}))
        .await
        .assert_legacy_error(404, "TENANT_NOT_FOUND");
    server
        .call(
            Method::POST,
            "/ingestion/verify_processing?file_ids=x-1&tenant_id=iso_x",
            Some(&other),
            None,
        )
        .await
        .assert_legacy_error(404, "TENANT_NOT_FOUND");
    send_form(
        &server,
        "/context/ingest",
        &other,
        app_form("iso_x", &[app("intruder", "i", "intruder")]),
    )
    .await
    .assert_current_error(404, "DATABASE_NOT_FOUND");
    delete_context(
        &server,
        &other,
        json!({"database": "iso_x", "ids": ["x-1"]}),
    )
    .await
    .assert_current_error(404, "DATABASE_NOT_FOUND");
    // Nothing changed for the owner.
    let listed = list(&server, &key, json!({"database": "iso_x"})).await;
    assert_eq!(source_ids(listed.current_ok(200)), ["x-1"], "{listed:#?}");
    wait_completed(&server, &key, "iso_x", None, &["x-1"]).await;
}

// ---------------------------------------------------------------------------------------------
// Further contract points
// ---------------------------------------------------------------------------------------------

/// A file with no extractable text is accepted, then `errored` with `E2002`; the legacy poll
/// reports `PROCESSING_FAILED`.
#[tokio::test]
async fn a_file_without_text_errors_with_e2002() {
    let (server, key) = setup(&["blank"]).await;
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "blank")
        .part(
            "documents",
            file("blank.txt", b"   \n\n \t \n", "text/plain"),
        )
        .part("documents", file("fine.txt", TEXT.as_bytes(), "text/plain"))
        .text(
            "document_metadata",
            json!([{"id": "blank-1"}, {"id": "fine-1"}]).to_string(),
        );
    let reply = send_form(&server, "/context/ingest", &key, form).await;
    let data = reply.current_ok(202);
    assert_eq!(data["results"][0]["status"], "queued", "{reply:#?}");
    assert_eq!(data["results"][1]["status"], "queued", "{reply:#?}");
    let errored = eventually(WAIT, "the blank file errored", || {
        let (server, key) = (&server, &key);
        async move {
            let reply = status_of(server, key, "blank", None, &["blank-1", "fine-1"]).await;
            let statuses = reply.current_ok(200)["statuses"]
                .as_array()
                .unwrap()
                .clone();
            assert_ne!(statuses[0]["indexing_status"], "completed", "{reply:#?}");
            assert_ne!(statuses[1]["indexing_status"], "errored", "{reply:#?}");
            (statuses[0]["indexing_status"] == "errored"
                && statuses[1]["indexing_status"] == "completed")
                .then(|| statuses[0].clone())
        }
    })
    .await;
    assert_eq!(errored["error_code"], "E2002", "{errored:#?}");
    assert_eq!(errored["success"], false, "{errored:#?}");
    assert!(errored["error_message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
    let legacy = server
        .call(
            Method::POST,
            "/ingestion/verify_processing?file_ids=blank-1,fine-1&tenant_id=blank",
            Some(&key),
            None,
        )
        .await;
    let statuses = legacy_ok(&legacy, 200)["statuses"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(statuses[0]["indexing_status"], "errored", "{legacy:#?}");
    assert_eq!(
        statuses[0]["error_code"], "PROCESSING_FAILED",
        "{legacy:#?}"
    );
    assert_eq!(statuses[0]["success"], false, "{legacy:#?}");
    assert_eq!(statuses[1]["indexing_status"], "completed", "{legacy:#?}");
    assert_eq!(statuses[1]["success"], true, "{legacy:#?}");
    let (knowledge, _) = rows(&server, &key, "blank").await;
    assert_eq!(knowledge, 1, "only the file with text has a chunk");
}

/// Omitting the collection addresses the default collection (spec: "Every tenant has a default
/// sub-tenant, which is the target of calls that omit the sub-tenant id"; List data:
/// `sub_tenant_id` defaults to the default sub-tenant), for listing as for status and delete.
#[tokio::test]
async fn omitting_the_collection_means_the_default_collection() {
    let (server, key) = setup(&["scoped"]).await;
    ingest_apps(
        &server,
        &key,
        "scoped",
        &[app("in-default", "d", "Default collection item.")],
    )
    .await;
    let form = app_form("scoped", &[app("in-team", "t", "Team collection item.")])
        .text("collection", "team_b");
    send_form(&server, "/context/ingest", &key, form)
        .await
        .current_ok(202);
    wait_completed(&server, &key, "scoped", None, &["in-default"]).await;
    wait_completed(&server, &key, "scoped", Some("team_b"), &["in-team"]).await;
    // Status and delete without a collection do not see the other collection.
    status_of(&server, &key, "scoped", None, &["in-team"])
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");
    let reply = delete_context(
        &server,
        &key,
        json!({"database": "scoped", "ids": ["in-team"]}),
    )
    .await;
    assert_eq!(reply.current_ok(200)["results"][0]["deleted"], false);
    // Explicit collections list their own items.
    let reply = list(
        &server,
        &key,
        json!({"database": "scoped", "collection": "team_b"}),
    )
    .await;
    assert_eq!(source_ids(reply.current_ok(200)), ["in-team"]);
    let reply = list(
        &server,
        &key,
        json!({"database": "scoped", "collection": "scoped"}),
    )
    .await;
    assert_eq!(source_ids(reply.current_ok(200)), ["in-default"]);
    // Without one: the default collection only, on both generations (both are read before
    // either is asserted, so a failure names both).
    let current = list(&server, &key, json!({"database": "scoped"})).await;
    let legacy = legacy_list(&server, &key, json!({"tenant_id": "scoped"})).await;
    let current_ids = source_ids(current.current_ok(200));
    let legacy_ids = source_ids(legacy_ok(&legacy, 200));
    assert!(
        current_ids == ["in-default"] && legacy_ids == ["in-default"],
        "POST /context/list without collection listed {current_ids:?}; POST /list/data without \
         sub_tenant_id listed {legacy_ids:?}; want only [\"in-default\"] (the default collection)"
    );
    assert_eq!(current.current_ok(200)["total"], 1, "{current:#?}");
    assert_eq!(legacy.body["total"], 1, "{legacy:#?}");
}

/// Ingests into `ttl/user_t` a lasting memory and the given expiring ones (`expiry_time` 1),
/// waits until the expiring ones have left the listing and a later memory is indexed (the
/// worker has been through the expiring ones too, which were queued before they expired).
async fn expired_memories(server: &Server, key: &str, expiring: &[&str]) {
    let mut memories =
        vec![json!({"id": "keep", "text": "A lasting preference for window seats."})];
    for id in expiring {
        memories
            .push(json!({"id": id, "text": format!("A one-time code {id}."), "expiry_time": 1}));
    }
    ingest_memories(server, key, "ttl", "user_t", Value::from(memories))
        .await
        .current_ok(202);
    wait_completed(server, key, "ttl", Some("user_t"), &["keep"]).await;
    eventually(
        WAIT,
        "the expiring memories vanish from listing",
        || async move {
            let listed = list(
                server,
                key,
                json!({"database": "ttl", "collection": "user_t", "type": "memory"}),
            )
            .await;
            (memory_ids(listed.current_ok(200)) == ["keep"]).then_some(())
        },
    )
    .await;
    status_of(server, key, "ttl", Some("user_t"), expiring)
        .await
        .assert_current_error(404, "FILE_NOT_FOUND");
    ingest_memories(
        server,
        key,
        "ttl",
        "user_t",
        json!([{"id": "later", "text": "Later."}]),
    )
    .await
    .current_ok(202);
    wait_completed(server, key, "ttl", Some("user_t"), &["keep", "later"]).await;
}

/// Once a memory's time to live has passed it is deleted (spec, Memory input item), and
/// "expired memories vanish from every read at once" (ARCHITECTURE.md): the database stats no
/// longer count its chunks, even before the (default, 30 s) purge sweep runs.
#[tokio::test]
async fn an_expired_memory_is_not_counted() {
    let (server, key) = setup(&["ttl"]).await;
    expired_memories(&server, &key, &["brief"]).await;
    assert_eq!(
        rows(&server, &key, "ttl").await,
        (0, 2),
        "only the two live memories may be counted"
    );
}

/// An expired memory has been deleted: deleting it again finds nothing, on both generations.
#[tokio::test]
async fn deleting_an_expired_memory_finds_nothing() {
    let (server, key) = setup(&["ttl"]).await;
    expired_memories(&server, &key, &["brief1", "brief2"]).await;
    let reply = delete_context(
        &server,
        &key,
        json!({"database": "ttl", "collection": "user_t", "ids": ["brief1"], "type": "memory"}),
    )
    .await;
    let current = reply.current_ok(200)["results"][0]["deleted"].clone();
    let legacy = server
        .delete(
            "/memories/delete_memory?tenant_id=ttl&sub_tenant_id=user_t&memory_id=brief2",
            &key,
        )
        .await;
    // Both generations are checked before either is asserted, so a failure names both.
    let legacy_ok = legacy.status == 404
        && legacy.body["detail"]["error_code"] == "MEMORY_NOT_FOUND"
        && legacy.body["detail"]["success"] == false;
    assert!(
        current == false && legacy_ok,
        "DELETE /context results[0].deleted = {current} (want false); \
         DELETE /memories/delete_memory -> {} {} (want 404 MEMORY_NOT_FOUND)",
        legacy.status,
        legacy.body
    );
    legacy.assert_legacy_error(404, "MEMORY_NOT_FOUND");
}

/// `GET /context/chunks`: a source's chunks in order, or chosen chunks by id, with the same
/// chunk ids as query results; `limit` truncates (and says so); errors per the spec.
#[tokio::test]
async fn chunks_of_a_source_are_read_in_order_or_by_id() {
    let (server, key) = setup(&["chunky"]).await;
    let long = paragraphs("the lighthouse keeper's log", 12);
    ingest_apps(
        &server,
        &key,
        "chunky",
        &[
            app("log", "Lighthouse log", &long),
            app("short", "Note", TEXT),
        ],
    )
    .await;
    wait_completed(&server, &key, "chunky", None, &["log", "short"]).await;

    let read = server
        .get("/context/chunks?database=chunky&id=log", &key)
        .await;
    let data = read.current_ok(200);
    let chunks = data["chunks"].as_array().unwrap().clone();
    assert!(
        chunks.len() >= 2,
        "a long text makes several chunks: {read:#?}"
    );
    assert_eq!(data["is_truncated"], false);
    for (i, chunk) in chunks.iter().enumerate() {
        assert_eq!(chunk["position"], i, "in order: {read:#?}");
        assert_eq!(chunk["source_id"], "log");
        assert_eq!(chunk["source_title"], "Lighthouse log");
        assert!(chunk["layout"].is_string(), "{chunk:#?}");
        assert!(long.contains(
            chunk["chunk_content"]
                .as_str()
                .unwrap()
                .lines()
                .next()
                .unwrap()
        ));
    }
    assert_eq!(read.body["meta"]["database"], "chunky");

    // By chunk id (the ids queries return); unknown ids are reported, not an error.
    let query = server
        .post(
            "/query",
            &key,
            json!({"database": "chunky", "query": "lighthouse keeper"}),
        )
        .await;
    let uuid = query.current_ok(200)["chunks"][0]["chunk_uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let read = server
        .get(
            &format!("/context/chunks?database=chunky&chunk_ids={uuid}&chunk_ids=nope"),
            &key,
        )
        .await;
    let data = read.current_ok(200);
    assert_eq!(data["chunks"][0]["chunk_uuid"], uuid.as_str(), "{read:#?}");
    assert_eq!(data["missing_chunk_ids"], json!(["nope"]), "{read:#?}");
    let comma = server
        .get(
            &format!("/context/chunks?database=chunky&chunk_ids={uuid},nope"),
            &key,
        )
        .await;
    assert_eq!(comma.current_ok(200)["chunks"], data["chunks"]);

    // A limit truncates and says so.
    let read = server
        .get("/context/chunks?database=chunky&id=log&limit=1", &key)
        .await;
    let data = read.current_ok(200);
    assert_eq!(data["chunks"].as_array().unwrap().len(), 1);
    assert_eq!(data["is_truncated"], true);
    assert_eq!(
        data["chunks"][0]["chunk_content"],
        chunks[0]["chunk_content"]
    );

    // Errors.
    server
        .get("/context/chunks?database=chunky&id=absent", &key)
        .await
        .assert_current_error(404, "SOURCE_NOT_FOUND");
    for bad in [
        "/context/chunks?database=chunky",
        "/context/chunks?database=chunky&id=log&limit=0",
        "/context/chunks?database=chunky&id=log&limit=1001",
        "/context/chunks?database=chunky&id=log&type=everything",
    ] {
        server
            .get(bad, &key)
            .await
            .assert_current_error(400, "INVALID_PARAMETERS");
    }
    let other = server.key("other-org", &[]);
    server
        .get("/context/chunks?database=chunky&id=log", &other)
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
    // A memory is not read as knowledge.
    let read = server
        .get("/context/chunks?database=chunky&id=log&type=memory", &key)
        .await;
    assert_eq!(read.current_ok(200)["chunks"], json!([]), "{read:#?}");
}

/// `DELETE /databases/collections`: one collection and everything in it go; the others, the
/// database and another organization's data stay.
#[tokio::test]
async fn a_collection_is_deleted_with_everything_in_it() {
    let (server, key) = setup(&["teams"]).await;
    for (collection, id, text) in [
        ("team_a", "a-1", "Alpha team notes about the harbour crane."),
        ("team_b", "b-1", "Bravo team notes about the harbour crane."),
        (
            "",
            "d-1",
            "Default collection notes about the harbour crane.",
        ),
    ] {
        let form =
            app_form("teams", &[app(id, "t", text)]).text("collection", collection.to_owned());
        send_form(&server, "/context/ingest", &key, form)
            .await
            .current_ok(202);
    }
    wait_completed(&server, &key, "teams", Some("team_a"), &["a-1"]).await;
    wait_completed(&server, &key, "teams", Some("team_b"), &["b-1"]).await;
    wait_completed(&server, &key, "teams", None, &["d-1"]).await;

    let reply = server
        .delete(
            "/databases/collections?database=teams&collection=team_a",
            &key,
        )
        .await;
    let data = reply.current_ok(200);
    assert_eq!(data["status"], "deleted", "{reply:#?}");
    assert_eq!(data["collection"], "team_a");
    assert_eq!(data["sub_tenant_id"], "team_a");
    assert_eq!(data["database"], "teams");

    let collections = server
        .get("/databases/collections?database=teams", &key)
        .await;
    let names = collections.current_ok(200)["collections"].clone();
    assert!(!names.to_string().contains("team_a"), "{collections:#?}");
    assert!(names.to_string().contains("team_b"), "{collections:#?}");
    let listed = list(
        &server,
        &key,
        json!({"database": "teams", "collection": "team_a"}),
    )
    .await;
    assert_eq!(listed.current_ok(200)["total"], 0, "{listed:#?}");
    let found = server
        .post(
            "/query",
            &key,
            json!({"database": "teams", "query": "harbour crane notes",
                   "collections": ["team_a", "team_b"]}),
        )
        .await;
    let ids: Vec<String> = found.current_ok(200)["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["b-1"], "{found:#?}");

    // The default collection is emptied but stays.
    server
        .delete(
            "/databases/collections?database=teams&collection=teams",
            &key,
        )
        .await
        .current_ok(200);
    let names = server
        .get("/databases/collections?database=teams", &key)
        .await
        .current_ok(200)["collections"]
        .clone();
    assert!(names.to_string().contains("\"teams\""), "{names}");
    let listed = list(&server, &key, json!({"database": "teams"})).await;
    assert_eq!(listed.current_ok(200)["total"], 0, "{listed:#?}");

    // Errors: no collection; another organization's database.
    server
        .delete("/databases/collections?database=teams", &key)
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    let other = server.key("other-org", &[]);
    server
        .delete(
            "/databases/collections?database=teams&collection=team_b",
            &other,
        )
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
    wait_completed(&server, &key, "teams", Some("team_b"), &["b-1"]).await;
}
