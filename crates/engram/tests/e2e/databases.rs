//! Databases (current generation, `/databases*`) and tenants (legacy, `/tenants/*`) end to end:
//! lifecycle on both generations, cross-generation visibility, every error with its exact status,
//! code and error shape, deprecated aliases, the metadata schema, persistence across restarts
//! and crashes, and the OpenAPI document.

use crate::common;

use std::time::Duration;

use common::{non_empty_str, Reply, Server};
use reqwest::Method;
use serde_json::{json, Value};

const ORG: &str = "acme";
const WAIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A request with full control over headers and the raw body (malformed JSON, other versions).
async fn send(
    server: &Server,
    method: Method,
    path: &str,
    key: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let mut request = server.client.request(method, server.url(path));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    if let Some(key) = key {
        request = request.header("Authorization", format!("Bearer {key}"));
    }
    if let Some(body) = body {
        request = request
            .header("Content-Type", "application/json")
            .body(body.to_owned());
    }
    common::read(request.send().await.expect("request")).await
}

async fn patch(server: &Server, path: &str, key: &str, body: Value) -> Reply {
    server
        .call(Method::PATCH, path, Some(key), Some(body))
        .await
}

/// A legacy success: a plain object (no envelope) with a request id header.
fn legacy_ok(reply: &Reply, status: u16) -> &Value {
    assert_eq!(reply.status.as_u16(), status, "{reply:#?}");
    assert!(reply.body.is_object(), "{reply:#?}");
    for envelope_key in ["success", "data", "error", "meta"] {
        assert!(
            reply.body.get(envelope_key).is_none(),
            "legacy body carries `{envelope_key}`: {reply:#?}"
        );
    }
    assert!(reply.header("x-request-id").is_some(), "{reply:#?}");
    &reply.body
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect()
}

/// `GET /databases`: `databases` and its deprecated copy `tenant_ids`, which must agree.
async fn current_names(server: &Server, key: &str) -> Vec<String> {
    let reply = server.get("/databases", key).await;
    let data = reply.current_ok(200);
    let names = strings(&data["databases"]);
    assert_eq!(strings(&data["tenant_ids"]), names, "{reply:#?}");
    assert!(non_empty_str(&data["message"]), "{reply:#?}");
    reply.assert_deprecations(&[]);
    names
}

/// `GET /tenants/tenant_ids`.
async fn legacy_names(server: &Server, key: &str) -> Vec<String> {
    let reply = server.get("/tenants/tenant_ids", key).await;
    let body = legacy_ok(&reply, 200);
    assert!(non_empty_str(&body["message"]), "{reply:#?}");
    strings(&body["tenant_ids"])
}

/// Polls `GET /databases/status` until ready, checking on every observation that the shape is
/// complete and that `ready_for_ingestion` is exactly the conjunction of the four flags.
async fn poll_current_ready(server: &Server, key: &str, name: &str) -> Value {
    common::eventually(WAIT, &format!("{name} ready (current status)"), || async {
        let reply = server
            .get(&format!("/databases/status?database={name}"), key)
            .await;
        let data = reply.current_ok(200).clone();
        assert_eq!(data["database"], name, "{reply:#?}");
        assert_eq!(data["tenant_id"], name, "{reply:#?}");
        assert_eq!(data["org_id"], ORG, "{reply:#?}");
        assert!(non_empty_str(&data["message"]), "{reply:#?}");
        assert_eq!(reply.body["meta"]["database"], name, "{reply:#?}");
        let infra = &data["infra"];
        let flags = [
            &infra["scheduler_status"],
            &infra["graph_status"],
            &infra["vectorstore_status"]["knowledge"],
            &infra["vectorstore_status"]["memories"],
        ];
        for flag in flags {
            assert!(flag.is_boolean(), "{reply:#?}");
        }
        let all = flags.iter().all(|f| **f == true);
        assert_eq!(infra["ready_for_ingestion"], all, "{reply:#?}");
        all.then_some(data)
    })
    .await
}

/// Polls `GET /tenants/infra/status` until every flag (both vector-store elements) is true.
async fn poll_legacy_ready(server: &Server, key: &str, name: &str) -> Value {
    common::eventually(WAIT, &format!("{name} ready (legacy status)"), || async {
        let reply = server
            .get(&format!("/tenants/infra/status?tenant_id={name}"), key)
            .await;
        let body = legacy_ok(&reply, 200).clone();
        assert_eq!(body["tenant_id"], name, "{reply:#?}");
        assert_eq!(body["org_id"], ORG, "{reply:#?}");
        assert!(non_empty_str(&body["message"]), "{reply:#?}");
        let infra = &body["infra"];
        let vectors = infra["vectorstore_status"]
            .as_array()
            .unwrap_or_else(|| panic!("vectorstore_status is not an array: {reply:#?}"));
        assert_eq!(vectors.len(), 2, "{reply:#?}");
        let mut flags = vec![&infra["scheduler_status"], &infra["graph_status"]];
        flags.extend(vectors.iter());
        for flag in &flags {
            assert!(flag.is_boolean(), "{reply:#?}");
        }
        flags.iter().all(|f| **f == true).then_some(body)
    })
    .await
}

/// The schema as `GET /databases/status` returns it.
/// A database's schema, read through both routes that show it (they must agree).
async fn schema_of(server: &Server, key: &str, name: &str) -> Value {
    let reply = server
        .get(&format!("/databases/status?database={name}"), key)
        .await;
    let schema = reply.current_ok(200)["database_metadata_schema"].clone();
    let own = server
        .get(&format!("/databases/{name}/metadata-schema"), key)
        .await;
    let data = own.current_ok(200);
    assert_eq!(data["fields"], schema, "{own:#?}");
    assert_eq!(data["database"], name, "{own:#?}");
    assert_eq!(data["tenant_id"], name, "{own:#?}");
    assert_eq!(own.body["meta"]["database"], name, "{own:#?}");
    schema
}

async fn collections_of(server: &Server, key: &str, name: &str) -> Vec<String> {
    let reply = server
        .get(&format!("/databases/collections?database={name}"), key)
        .await;
    let data = reply.current_ok(200);
    let collections = strings(&data["collections"]);
    assert_eq!(strings(&data["sub_tenant_ids"]), collections, "{reply:#?}");
    assert!(non_empty_str(&data["message"]), "{reply:#?}");
    collections
}

async fn legacy_sub_tenants(server: &Server, key: &str, name: &str) -> Vec<String> {
    let reply = server
        .get(&format!("/tenants/sub_tenant_ids?tenant_id={name}"), key)
        .await;
    let body = legacy_ok(&reply, 200);
    assert!(non_empty_str(&body["message"]), "{reply:#?}");
    strings(&body["sub_tenant_ids"])
}

/// Asserts `GET /databases/stats` reports empty knowledge and memory collections.
async fn assert_current_stats_empty(server: &Server, key: &str, name: &str) {
    let reply = server
        .get(&format!("/databases/stats?database={name}"), key)
        .await;
    let data = reply.current_ok(200);
    assert_eq!(data["database"], name, "{reply:#?}");
    assert_eq!(data["tenant_id"], name, "{reply:#?}");
    assert_eq!(data["knowledge_collection"]["row_count"], 0, "{reply:#?}");
    assert_eq!(data["memory_collection"]["row_count"], 0, "{reply:#?}");
    assert!(non_empty_str(&data["message"]), "{reply:#?}");
    assert_eq!(reply.body["meta"]["database"], name, "{reply:#?}");
}

/// Asserts `GET /tenants/monitor` reports empty collections of the given dimension.
async fn assert_monitor_empty(server: &Server, key: &str, name: &str, dimensions: u64) {
    let reply = server
        .get(&format!("/tenants/monitor?tenant_id={name}"), key)
        .await;
    let body = legacy_ok(&reply, 200);
    assert_eq!(body["tenant_id"], name, "{reply:#?}");
    for collection in ["normal_collection", "memory_collection"] {
        assert_eq!(body[collection]["row_count"], 0, "{collection}: {reply:#?}");
        assert_eq!(
            body[collection]["dimensions"], dimensions,
            "{collection}: {reply:#?}"
        );
    }
    assert!(non_empty_str(&body["message"]), "{reply:#?}");
}

/// A schema field as returned: every attribute present, defaults filled.
fn field(
    name: &str,
    data_type: &str,
    max_length: u64,
    enable_match: bool,
    nullable: bool,
) -> Value {
    json!({
        "name": name,
        "data_type": data_type,
        "max_length": max_length,
        "enable_match": enable_match,
        "enable_dense_embedding": false,
        "enable_sparse_embedding": false,
        "nullable": nullable,
    })
}

/// A field sent with only its name and type; the rest must come back as defaults.
fn default_field(name: &str, data_type: &str) -> Value {
    field(name, data_type, 1024, false, true)
}

async fn create_current(server: &Server, key: &str, body: Value) -> Reply {
    let reply = server.post("/databases", key, body).await;
    let data = reply.current_ok(202);
    assert_eq!(data["status"], "accepted", "{reply:#?}");
    assert!(non_empty_str(&data["message"]), "{reply:#?}");
    assert_eq!(data["database"], data["tenant_id"], "{reply:#?}");
    reply
}

async fn create_legacy(server: &Server, key: &str, body: Value) -> Reply {
    let reply = server.post("/tenants/create", key, body).await;
    let created = legacy_ok(&reply, 202);
    assert_eq!(created["status"], "accepted", "{reply:#?}");
    assert!(non_empty_str(&created["message"]), "{reply:#?}");
    reply
}

/// Every route addressing `name`, answering 404 `DATABASE_NOT_FOUND` in each generation's shape.
async fn assert_not_found_everywhere(server: &Server, key: &str, name: &str) {
    for path in [
        format!("/databases/status?database={name}"),
        format!("/databases/collections?database={name}"),
        format!("/databases/stats?database={name}"),
    ] {
        server
            .get(&path, key)
            .await
            .assert_current_error(404, "DATABASE_NOT_FOUND");
    }
    server
        .delete(&format!("/databases?database={name}"), key)
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
    server
        .get(&format!("/databases/{name}/metadata-schema"), key)
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
    patch(
        server,
        &format!("/databases/{name}/metadata-schema"),
        key,
        json!({"add_fields": [{"name": "extra"}]}),
    )
    .await
    .assert_current_error(404, "DATABASE_NOT_FOUND");
    for path in [
        format!("/tenants/infra/status?tenant_id={name}"),
        format!("/tenants/monitor?tenant_id={name}"),
        format!("/tenants/sub_tenant_ids?tenant_id={name}"),
    ] {
        server
            .get(&path, key)
            .await
            .assert_legacy_error(404, "DATABASE_NOT_FOUND");
    }
    server
        .delete(&format!("/tenants/delete?tenant_id={name}"), key)
        .await
        .assert_legacy_error(404, "DATABASE_NOT_FOUND");
}

/// A current-generation error whose message names `field`.
fn assert_current_error_naming(reply: &Reply, status: u16, code: &str, field: &str) {
    reply.assert_current_error(status, code);
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(field),
        "message {message:?} does not name `{field}`: {reply:#?}"
    );
}

fn assert_legacy_error_naming(reply: &Reply, status: u16, code: &str, field: &str) {
    reply.assert_legacy_error(status, code);
    let message = reply.body["detail"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(field),
        "message {message:?} does not name `{field}`: {reply:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Lifecycle
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn current_generation_lifecycle_from_create_to_recreate() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    assert!(current_names(&server, &key).await.is_empty());

    let created = create_current(
        &server,
        &key,
        json!({
            "database": "docs",
            "embeddings_dimension": 768,
            "database_metadata_schema": [{"name": "team"}],
        }),
    )
    .await;
    assert_eq!(created.body["data"]["database"], "docs");
    assert_eq!(created.body["data"]["tenant_id"], "docs");
    assert_eq!(created.body["meta"]["database"], "docs");
    assert_eq!(created.body["meta"]["api_version"], "2");
    created.assert_deprecations(&[]);
    // A knowledge database's vectors have the embedding model's dimension: the one sent is
    // reported as not read (it is for raw-embeddings databases).
    assert_eq!(
        created.body["meta"]["ignored_parameters"][0]["parameter"], "embeddings_dimension",
        "{created:#?}"
    );

    let status = poll_current_ready(&server, &key, "docs").await;
    assert_eq!(status["infra"]["ready_for_ingestion"], true);
    assert_eq!(current_names(&server, &key).await, ["docs"]);
    assert_eq!(collections_of(&server, &key, "docs").await, ["docs"]);
    assert_current_stats_empty(&server, &key, "docs").await;
    assert_monitor_empty(&server, &key, "docs", 384).await;
    assert_eq!(
        schema_of(&server, &key, "docs").await,
        json!([default_field("team", "VARCHAR")])
    );

    let deleted = server.delete("/databases?database=docs", &key).await;
    let data = deleted.current_ok(200);
    assert_eq!(data["database"], "docs", "{deleted:#?}");
    assert_eq!(data["tenant_id"], "docs", "{deleted:#?}");
    assert_eq!(data["status"], "deletion_scheduled", "{deleted:#?}");
    assert!(non_empty_str(&data["message"]), "{deleted:#?}");
    deleted.assert_deprecations(&[]);

    common::eventually(WAIT, "docs gone from the listing", || async {
        current_names(&server, &key).await.is_empty().then_some(())
    })
    .await;
    assert_not_found_everywhere(&server, &key, "docs").await;

    // The name is free again, and the new database shares nothing with the old one.
    create_current(&server, &key, json!({"database": "docs"})).await;
    poll_current_ready(&server, &key, "docs").await;
    assert_eq!(current_names(&server, &key).await, ["docs"]);
    assert_eq!(schema_of(&server, &key, "docs").await, json!([]));
    assert_eq!(collections_of(&server, &key, "docs").await, ["docs"]);
    assert_current_stats_empty(&server, &key, "docs").await;
    assert_monitor_empty(&server, &key, "docs", 384).await;
    // The old field is really gone: it can be declared again.
    let added = patch(
        &server,
        "/databases/docs/metadata-schema",
        &key,
        json!({"add_fields": [{"name": "team", "data_type": "INT64"}]}),
    )
    .await;
    assert_eq!(
        added.current_ok(200)["database_metadata_schema"],
        json!([default_field("team", "INT64")])
    );
}

#[tokio::test]
async fn legacy_generation_lifecycle_from_create_to_recreate() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    assert!(legacy_names(&server, &key).await.is_empty());

    let created = create_legacy(
        &server,
        &key,
        json!({
            "tenant_id": "legacy1",
            "embeddings_dimension": 1536,
            "tenant_metadata_schema": [{"name": "team", "data_type": "VARCHAR"}],
        }),
    )
    .await;
    assert_eq!(created.body["tenant_id"], "legacy1");
    assert!(
        created
            .header("warning")
            .is_some_and(|w| w.contains("embeddings_dimension")),
        "{created:#?}"
    );

    poll_legacy_ready(&server, &key, "legacy1").await;
    assert_eq!(legacy_names(&server, &key).await, ["legacy1"]);
    assert_eq!(
        legacy_sub_tenants(&server, &key, "legacy1").await,
        ["legacy1"]
    );
    assert_monitor_empty(&server, &key, "legacy1", 384).await;

    let deleted = server
        .delete("/tenants/delete?tenant_id=legacy1", &key)
        .await;
    let body = legacy_ok(&deleted, 200);
    assert_eq!(body["tenant_id"], "legacy1", "{deleted:#?}");
    assert_eq!(body["status"], "deletion_scheduled", "{deleted:#?}");
    assert!(non_empty_str(&body["message"]), "{deleted:#?}");

    common::eventually(WAIT, "legacy1 gone from the listing", || async {
        legacy_names(&server, &key).await.is_empty().then_some(())
    })
    .await;
    assert_not_found_everywhere(&server, &key, "legacy1").await;

    create_legacy(&server, &key, json!({"tenant_id": "legacy1"})).await;
    poll_legacy_ready(&server, &key, "legacy1").await;
    assert_eq!(legacy_names(&server, &key).await, ["legacy1"]);
    assert_eq!(
        legacy_sub_tenants(&server, &key, "legacy1").await,
        ["legacy1"]
    );
    assert_monitor_empty(&server, &key, "legacy1", 384).await;
    assert_eq!(schema_of(&server, &key, "legacy1").await, json!([]));
}

#[tokio::test]
async fn a_database_made_on_one_generation_is_seen_on_the_other() {
    let server = Server::start();
    let key = server.key(ORG, &[]);

    create_current(
        &server,
        &key,
        json!({"database": "made-current", "embeddings_dimension": 512}),
    )
    .await;
    create_legacy(
        &server,
        &key,
        json!({"tenant_id": "made-legacy", "tenant_metadata_schema": [{"name": "lang"}]}),
    )
    .await;

    // Readiness is the same fact whichever generation reads it.
    poll_legacy_ready(&server, &key, "made-current").await;
    poll_current_ready(&server, &key, "made-legacy").await;
    poll_current_ready(&server, &key, "made-current").await;
    poll_legacy_ready(&server, &key, "made-legacy").await;

    assert_eq!(
        current_names(&server, &key).await,
        ["made-current", "made-legacy"]
    );
    assert_eq!(
        legacy_names(&server, &key).await,
        ["made-current", "made-legacy"]
    );
    assert_eq!(
        legacy_sub_tenants(&server, &key, "made-current").await,
        ["made-current"]
    );
    assert_eq!(
        collections_of(&server, &key, "made-legacy").await,
        ["made-legacy"]
    );
    assert_monitor_empty(&server, &key, "made-current", 384).await;
    assert_monitor_empty(&server, &key, "made-legacy", 384).await;
    assert_current_stats_empty(&server, &key, "made-legacy").await;
    assert_eq!(
        schema_of(&server, &key, "made-legacy").await,
        json!([default_field("lang", "VARCHAR")])
    );

    // Names are shared too: a duplicate is refused with each generation's own code.
    server
        .post(
            "/tenants/create",
            &key,
            json!({"tenant_id": "made-current"}),
        )
        .await
        .assert_legacy_error(409, "INVALID_INPUT");
    server
        .post("/databases", &key, json!({"database": "made-legacy"}))
        .await
        .assert_current_error(409, "DATABASE_ALREADY_EXISTS");

    // Deleting on one generation removes it from the other.
    legacy_ok(
        &server
            .delete("/tenants/delete?tenant_id=made-current", &key)
            .await,
        200,
    );
    server
        .delete("/databases?database=made-legacy", &key)
        .await
        .current_ok(200);
    common::eventually(WAIT, "both gone from both listings", || async {
        (current_names(&server, &key).await.is_empty()
            && legacy_names(&server, &key).await.is_empty())
        .then_some(())
    })
    .await;
    assert_not_found_everywhere(&server, &key, "made-current").await;
    assert_not_found_everywhere(&server, &key, "made-legacy").await;
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_duplicate_name_is_409_with_the_generations_code_and_changes_nothing() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    create_current(
        &server,
        &key,
        json!({"database": "dup", "database_metadata_schema": [{"name": "a"}]}),
    )
    .await;
    // While still provisioning (or just ready) and after it is ready.
    for _ in 0..2 {
        server
            .post(
                "/databases",
                &key,
                json!({"database": "dup", "database_metadata_schema": [{"name": "b"}]}),
            )
            .await
            .assert_current_error(409, "DATABASE_ALREADY_EXISTS");
        server
            .post(
                "/databases",
                &key,
                json!({"tenant_id": "dup", "embeddings_dimension": 99}),
            )
            .await
            .assert_current_error(409, "DATABASE_ALREADY_EXISTS");
        server
            .post(
                "/tenants/create",
                &key,
                json!({"tenant_id": "dup", "tenant_metadata_schema": [{"name": "c"}]}),
            )
            .await
            .assert_legacy_error(409, "INVALID_INPUT");
        poll_current_ready(&server, &key, "dup").await;
    }
    assert_eq!(current_names(&server, &key).await, ["dup"]);
    assert_eq!(
        schema_of(&server, &key, "dup").await,
        json!([default_field("a", "VARCHAR")])
    );
    assert_monitor_empty(&server, &key, "dup", 384).await;
}

const BAD_NAMES: [(&str, &str); 4] = [
    ("", ""),
    ("abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"), // 26 characters
    ("has space", "has%20space"),
    ("_lead", "_lead"),
];

#[tokio::test]
async fn malformed_names_are_400_invalid_parameters_or_invalid_tenant_id() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    for (name, encoded) in BAD_NAMES {
        server
            .post("/databases", &key, json!({"database": name}))
            .await
            .assert_current_error(400, "INVALID_PARAMETERS");
        server
            .post("/databases", &key, json!({"tenant_id": name}))
            .await
            .assert_current_error(400, "INVALID_PARAMETERS");
        server
            .post("/tenants/create", &key, json!({"tenant_id": name}))
            .await
            .assert_legacy_error(400, "INVALID_TENANT_ID");
        for path in [
            "/databases/status",
            "/databases/collections",
            "/databases/stats",
        ] {
            server
                .get(&format!("{path}?database={encoded}"), &key)
                .await
                .assert_current_error(400, "INVALID_PARAMETERS");
        }
        server
            .delete(&format!("/databases?database={encoded}"), &key)
            .await
            .assert_current_error(400, "INVALID_PARAMETERS");
        if !name.is_empty() {
            // (An empty query value is covered by its own test below.)
            assert_legacy_query_routes_refuse(&server, &key, encoded).await;
            patch(
                &server,
                &format!("/databases/{encoded}/metadata-schema"),
                &key,
                json!({"add_fields": [{"name": "x"}]}),
            )
            .await
            .assert_current_error(400, "INVALID_PARAMETERS");
        }
    }
    assert!(current_names(&server, &key).await.is_empty());

    // The boundary: 25 characters, letters, digits, '-' and '_' are fine on both generations.
    let longest = "abcdefghijklmnopqrstuvwxy";
    create_current(&server, &key, json!({"database": longest})).await;
    create_legacy(&server, &key, json!({"tenant_id": "a-b_9"})).await;
    assert_eq!(current_names(&server, &key).await, ["a-b_9", longest]);
}

/// Every legacy route taking `tenant_id` in its query answers 400 `INVALID_TENANT_ID`.
async fn assert_legacy_query_routes_refuse(server: &Server, key: &str, encoded: &str) {
    for path in [
        "/tenants/infra/status",
        "/tenants/monitor",
        "/tenants/sub_tenant_ids",
    ] {
        server
            .get(&format!("{path}?tenant_id={encoded}"), key)
            .await
            .assert_legacy_error(400, "INVALID_TENANT_ID");
    }
    server
        .delete(&format!("/tenants/delete?tenant_id={encoded}"), key)
        .await
        .assert_legacy_error(400, "INVALID_TENANT_ID");
}

/// `?tenant_id=` gives a tenant id, an empty one: malformed (`INVALID_TENANT_ID`), exactly as
/// `POST /tenants/create {"tenant_id": ""}` is, not a missing parameter.
#[tokio::test]
async fn an_empty_tenant_id_in_a_legacy_query_is_invalid_tenant_id() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    server
        .post("/tenants/create", &key, json!({"tenant_id": ""}))
        .await
        .assert_legacy_error(400, "INVALID_TENANT_ID");
    assert_legacy_query_routes_refuse(&server, &key, "").await;
}

#[tokio::test]
async fn a_missing_name_is_400_invalid_parameters_on_both_generations() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    for body in [
        json!({}),
        json!({"embeddings_dimension": 384}),
        json!({"database": null}),
    ] {
        let reply = server.post("/databases", &key, body).await;
        assert_current_error_naming(&reply, 400, "INVALID_PARAMETERS", "database");
    }
    // No body at all.
    let reply = server
        .call(Method::POST, "/databases", Some(&key), None)
        .await;
    assert_current_error_naming(&reply, 400, "INVALID_PARAMETERS", "database");

    let reply = server.post("/tenants/create", &key, json!({})).await;
    assert_legacy_error_naming(&reply, 400, "INVALID_PARAMETERS", "tenant_id");

    for path in [
        "/databases/status",
        "/databases/collections",
        "/databases/stats",
    ] {
        let reply = server.get(path, &key).await;
        assert_current_error_naming(&reply, 400, "INVALID_PARAMETERS", "database");
    }
    let reply = server.delete("/databases", &key).await;
    assert_current_error_naming(&reply, 400, "INVALID_PARAMETERS", "database");
    for path in [
        "/tenants/infra/status",
        "/tenants/monitor",
        "/tenants/sub_tenant_ids",
    ] {
        let reply = server.get(path, &key).await;
        assert_legacy_error_naming(&reply, 400, "INVALID_PARAMETERS", "tenant_id");
    }
    let reply = server.delete("/tenants/delete", &key).await;
    assert_legacy_error_naming(&reply, 400, "INVALID_PARAMETERS", "tenant_id");
    assert!(current_names(&server, &key).await.is_empty());
}

#[tokio::test]
async fn malformed_and_mistyped_bodies_are_400_naming_the_field() {
    let server = Server::start();
    let key = server.key(ORG, &[]);

    for raw in [
        "{\"database\": ",
        "not json",
        "{\"database\": \"x\"} trailing",
    ] {
        send(
            &server,
            Method::POST,
            "/databases",
            Some(&key),
            &[("API-Version", "2")],
            Some(raw),
        )
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
        send(
            &server,
            Method::POST,
            "/tenants/create",
            Some(&key),
            &[],
            Some(raw),
        )
        .await
        .assert_legacy_error(400, "INVALID_PARAMETERS");
        send(
            &server,
            Method::PATCH,
            "/databases/x/metadata-schema",
            Some(&key),
            &[("API-Version", "2")],
            Some(raw),
        )
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    }

    let current_cases = [
        (json!({"database": 5}), "database"),
        (json!({"tenant_id": true}), "tenant_id"),
        (
            json!({"database": "ok1", "embeddings_dimension": "x"}),
            "embeddings_dimension",
        ),
        (
            json!({"database": "ok1", "embeddings_dimension": -1}),
            "embeddings_dimension",
        ),
        (
            json!({"database": "ok1", "embeddings_dimension": 1.5}),
            "embeddings_dimension",
        ),
        (
            json!({"database": "ok1", "embeddings_dimension": 0}),
            "embeddings_dimension",
        ),
        (
            json!({"database": "ok1", "embeddings_dimension": 100000}),
            "embeddings_dimension",
        ),
        (
            json!({"database": "ok1", "database_metadata_schema": "x"}),
            "database_metadata_schema",
        ),
        (
            json!({"database": "ok1", "database_metadata_schema": [{"name": 1}]}),
            "name",
        ),
        (
            json!({"database": "ok1", "is_embeddings_tenant": "yes"}),
            "is_embeddings_tenant",
        ),
    ];
    for (body, field) in current_cases {
        let reply = server.post("/databases", &key, body.clone()).await;
        assert_current_error_naming(&reply, 400, "INVALID_PARAMETERS", field);
    }
    let legacy_cases = [
        (json!({"tenant_id": 5}), "tenant_id"),
        (
            json!({"tenant_id": "ok2", "embeddings_dimension": "x"}),
            "embeddings_dimension",
        ),
        (
            json!({"tenant_id": "ok2", "embeddings_dimension": -1}),
            "embeddings_dimension",
        ),
        (
            json!({"tenant_id": "ok2", "embeddings_dimension": 0}),
            "embeddings_dimension",
        ),
        (
            json!({"tenant_id": "ok2", "embeddings_dimension": 100000}),
            "embeddings_dimension",
        ),
        (
            json!({"tenant_id": "ok2", "tenant_metadata_schema": {"name": "a"}}),
            "tenant_metadata_schema",
        ),
    ];
    for (body, field) in legacy_cases {
        let reply = server.post("/tenants/create", &key, body.clone()).await;
        assert_legacy_error_naming(&reply, 400, "INVALID_PARAMETERS", field);
    }
    // None of them created anything.
    assert!(current_names(&server, &key).await.is_empty());

    // The PATCH body is typed too.
    server.ready_database(&key, "typed").await;
    for (body, field) in [
        (json!({"add_fields": "x"}), "add_fields"),
        (
            json!({"add_fields": [{"name": "a", "nullable": "no"}]}),
            "nullable",
        ),
        (
            json!({"add_fields": [{"name": "a", "max_length": -3}]}),
            "max_length",
        ),
        (json!({}), "add_fields"),
    ] {
        let reply = patch(&server, "/databases/typed/metadata-schema", &key, body).await;
        assert_current_error_naming(&reply, 400, "INVALID_PARAMETERS", field);
    }
    assert_eq!(schema_of(&server, &key, "typed").await, json!([]));
}

#[tokio::test]
async fn bad_metadata_schemas_are_422_validation_error_and_create_nothing() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    let unknown_type = json!([{"name": "a", "data_type": "STRING"}]);
    let duplicate = json!([{"name": "a"}, {"name": "a", "data_type": "INT8"}]);
    for schema in [&unknown_type, &duplicate] {
        server
            .post(
                "/databases",
                &key,
                json!({"database": "bad", "database_metadata_schema": schema}),
            )
            .await
            .assert_current_error(422, "VALIDATION_ERROR");
        server
            .post(
                "/databases",
                &key,
                json!({"database": "bad", "tenant_metadata_schema": schema}),
            )
            .await
            .assert_current_error(422, "VALIDATION_ERROR");
        server
            .post(
                "/tenants/create",
                &key,
                json!({"tenant_id": "bad", "tenant_metadata_schema": schema}),
            )
            .await
            .assert_legacy_error(422, "VALIDATION_ERROR");
    }
    let reply = server
        .post(
            "/databases",
            &key,
            json!({"database": "bad", "database_metadata_schema": unknown_type}),
        )
        .await;
    assert_current_error_naming(&reply, 422, "VALIDATION_ERROR", "STRING");
    assert!(current_names(&server, &key).await.is_empty());
    assert_not_found_everywhere(&server, &key, "bad").await;
}

#[tokio::test]
async fn an_unknown_database_is_404_database_not_found_on_both_generations() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    assert_not_found_everywhere(&server, &key, "nowhere").await;
    // Also under the deprecated alias on current routes.
    server
        .get("/databases/status?tenant_id=nowhere", &key)
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
    // A database of another organization is not visible either.
    let other = server.key("other-org", &[]);
    server.ready_database(&other, "theirs").await;
    assert!(current_names(&server, &key).await.is_empty());
    assert!(legacy_names(&server, &key).await.is_empty());
}

/// Database names are per organization. A name used only by another organization answers
/// exactly as a name used nowhere (404 `DATABASE_NOT_FOUND` on every route: no key can learn
/// which names other tenants use), yet this organization may still create its own database of
/// that name, which is then the one its key sees; the other organization's database is untouched.
#[tokio::test]
async fn another_organizations_name_is_not_found_until_this_organization_creates_its_own() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    let other = server.key("other-org", &[]);
    server.ready_database(&other, "theirs").await;
    assert!(current_names(&server, &key).await.is_empty());
    assert!(legacy_names(&server, &key).await.is_empty());
    let reply = server.get("/databases/status?database=theirs", &key).await;
    let missing = server.get("/databases/status?database=nowhere", &key).await;
    assert_eq!(
        reply.body["error"],
        missing.body["error"]
            .to_string()
            .replace("nowhere", "theirs")
            .parse::<Value>()
            .unwrap(),
        "the same answer as a missing name"
    );
    assert!(
        !reply.body.to_string().contains("other-org"),
        "no data of theirs: {reply:#?}"
    );
    assert_not_found_everywhere(&server, &key, "theirs").await;
    create_current(
        &server,
        &key,
        json!({"database": "theirs", "is_embeddings_tenant": true, "embeddings_dimension": 64}),
    )
    .await;
    poll_current_ready(&server, &key, "theirs").await;
    assert_monitor_empty(&server, &key, "theirs", 64).await;
    assert_monitor_empty(&server, &other, "theirs", 384).await;
}

#[tokio::test]
async fn api_version_unknown_routes_and_wrong_methods_answer_in_the_generations_shape() {
    let server = Server::start();
    let key = server.key(ORG, &[]);

    // Only API-Version 2 is served on current routes; nothing is created with another.
    for version in ["3", "two"] {
        send(
            &server,
            Method::GET,
            "/databases",
            Some(&key),
            &[("API-Version", version)],
            None,
        )
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
        send(
            &server,
            Method::POST,
            "/databases",
            Some(&key),
            &[("API-Version", version)],
            Some(r#"{"database": "v3"}"#),
        )
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");
    }
    assert!(current_names(&server, &key).await.is_empty());

    // Unknown routes.
    for path in [
        "/databases/nope/extra",
        "/databases/status/extra",
        "/databasesx",
    ] {
        let reply = server.get(path, &key).await;
        assert_eq!(reply.status.as_u16(), 404, "{reply:#?}");
        if path == "/databasesx" {
            reply.assert_legacy_error(404, "NOT_FOUND");
        } else {
            reply.assert_current_error(404, "NOT_FOUND");
        }
    }
    server
        .get("/tenants/nope", &key)
        .await
        .assert_legacy_error(404, "NOT_FOUND");

    // Wrong methods on known routes.
    let current_wrong = [
        (Method::PUT, "/databases"),
        (Method::PATCH, "/databases"),
        (Method::POST, "/databases/status?database=x"),
        (Method::PUT, "/databases/collections?database=x"),
        (Method::POST, "/databases/stats?database=x"),
        (Method::PUT, "/databases/x/metadata-schema"),
        (Method::POST, "/databases/x/metadata-schema"),
    ];
    for (method, path) in current_wrong {
        server
            .call(method.clone(), path, Some(&key), None)
            .await
            .assert_current_error(405, "METHOD_NOT_ALLOWED");
    }
    let legacy_wrong = [
        (Method::GET, "/tenants/create"),
        (Method::POST, "/tenants/infra/status?tenant_id=x"),
        (Method::DELETE, "/tenants/monitor?tenant_id=x"),
        (Method::PUT, "/tenants/sub_tenant_ids?tenant_id=x"),
        (Method::POST, "/tenants/tenant_ids"),
        (Method::GET, "/tenants/delete?tenant_id=x"),
    ];
    for (method, path) in legacy_wrong {
        server
            .call(method.clone(), path, Some(&key), None)
            .await
            .assert_legacy_error(405, "METHOD_NOT_ALLOWED");
    }
}

#[tokio::test]
async fn current_responses_carry_the_request_id_of_the_header() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    // A client-chosen id is echoed in the header and in meta, on success and on error.
    let reply = send(
        &server,
        Method::GET,
        "/databases",
        Some(&key),
        &[("API-Version", "2"), ("X-Request-ID", "client-req-42")],
        None,
    )
    .await;
    reply.current_ok(200);
    assert_eq!(reply.body["meta"]["request_id"], "client-req-42");
    let reply = send(
        &server,
        Method::GET,
        "/databases/status?database=missing",
        Some(&key),
        &[("API-Version", "2"), ("X-Request-ID", "client-req-43")],
        None,
    )
    .await;
    reply.assert_current_error(404, "DATABASE_NOT_FOUND");
    assert_eq!(reply.body["meta"]["request_id"], "client-req-43");
    // Otherwise each response gets its own id.
    let a = server.get("/databases", &key).await;
    let b = server.get("/databases", &key).await;
    a.current_ok(200);
    b.current_ok(200);
    assert_ne!(a.body["meta"]["request_id"], b.body["meta"]["request_id"]);
    assert!(a.body["meta"]["latency_ms"].is_number());
    assert_eq!(a.body["meta"]["api_version"], "2");
}

// ---------------------------------------------------------------------------------------------
// Deprecated aliases
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn deprecated_aliases_work_and_are_reported_in_meta_and_header() {
    let server = Server::start();
    let key = server.key(ORG, &[]);

    let created = create_current(
        &server,
        &key,
        json!({"tenant_id": "dep1", "tenant_metadata_schema": [{"name": "team"}]}),
    )
    .await;
    assert_eq!(created.body["data"]["database"], "dep1");
    assert_eq!(created.body["data"]["tenant_id"], "dep1");
    created.assert_deprecations(&[
        ("tenant_id", "database"),
        ("tenant_metadata_schema", "database_metadata_schema"),
    ]);
    let created = create_current(&server, &key, json!({"tenant_id": "dep2"})).await;
    created.assert_deprecations(&[("tenant_id", "database")]);
    // The preferred names report nothing.
    let created = create_current(&server, &key, json!({"database": "dep3"})).await;
    created.assert_deprecations(&[]);

    server.wait_ready(&key, "dep1").await;
    assert_eq!(
        schema_of(&server, &key, "dep1").await,
        json!([default_field("team", "VARCHAR")])
    );

    let status = server.get("/databases/status?tenant_id=dep1", &key).await;
    assert_eq!(status.current_ok(200)["database"], "dep1");
    status.assert_deprecations(&[("tenant_id", "database")]);
    let collections = server
        .get("/databases/collections?tenant_id=dep1", &key)
        .await;
    assert_eq!(collections.current_ok(200)["collections"], json!(["dep1"]));
    collections.assert_deprecations(&[("tenant_id", "database")]);
    let stats = server.get("/databases/stats?tenant_id=dep1", &key).await;
    assert_eq!(
        stats.current_ok(200)["knowledge_collection"]["row_count"],
        0
    );
    stats.assert_deprecations(&[("tenant_id", "database")]);

    for path in [
        "/databases/status?database=dep1",
        "/databases/collections?database=dep1",
        "/databases/stats?database=dep1",
    ] {
        let reply = server.get(path, &key).await;
        reply.current_ok(200);
        reply.assert_deprecations(&[]);
    }

    let deleted = server.delete("/databases?tenant_id=dep2", &key).await;
    assert_eq!(deleted.current_ok(200)["status"], "deletion_scheduled");
    deleted.assert_deprecations(&[("tenant_id", "database")]);
    common::eventually(WAIT, "dep2 deleted", || async {
        (current_names(&server, &key).await == ["dep1", "dep3"]).then_some(())
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Metadata schema
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_schema_round_trips_with_defaults_and_accepts_added_fields() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    create_current(
        &server,
        &key,
        json!({
            "database": "schemadb",
            "database_metadata_schema": [
                {"name": "team"},
                {"name": "priority", "data_type": "INT32", "enable_match": true,
                 "nullable": false, "max_length": 16},
                {"name": "tags", "data_type": "ARRAY"},
                {"name": "summary", "data_type": "VARCHAR", "enable_dense_embedding": true,
                 "enable_sparse_embedding": true, "max_length": 4096},
            ],
        }),
    )
    .await;
    poll_current_ready(&server, &key, "schemadb").await;
    let summary = json!({
        "name": "summary", "data_type": "VARCHAR", "max_length": 4096, "enable_match": false,
        "enable_dense_embedding": true, "enable_sparse_embedding": true, "nullable": true,
    });
    let mut expected = vec![
        default_field("team", "VARCHAR"),
        field("priority", "INT32", 16, true, false),
        default_field("tags", "ARRAY"),
        summary,
    ];
    assert_eq!(schema_of(&server, &key, "schemadb").await, json!(expected));

    // Adding fields.
    let added = patch(
        &server,
        "/databases/schemadb/metadata-schema",
        &key,
        json!({"add_fields": [
            {"name": "region", "enable_match": true},
            {"name": "score", "data_type": "DOUBLE"},
        ]}),
    )
    .await;
    let data = added.current_ok(200);
    assert_eq!(
        data["added_fields"],
        json!(["region", "score"]),
        "{added:#?}"
    );
    assert_eq!(data["database"], "schemadb", "{added:#?}");
    assert_eq!(data["tenant_id"], "schemadb", "{added:#?}");
    expected.push(field("region", "VARCHAR", 1024, true, true));
    expected.push(default_field("score", "DOUBLE"));
    assert_eq!(
        data["database_metadata_schema"],
        json!(expected),
        "{added:#?}"
    );
    assert_eq!(added.body["meta"]["database"], "schemadb");
    assert_eq!(schema_of(&server, &key, "schemadb").await, json!(expected));

    // Refused changes add nothing, not even the valid fields of the same batch.
    let refused = [
        json!({"add_fields": [{"name": "team", "data_type": "INT64"}]}),
        json!({"add_fields": [{"name": "team"}]}),
        json!({"add_fields": [{"name": "zone"}, {"name": "priority"}]}),
        json!({"add_fields": [{"name": "zone"}, {"name": "zone"}]}),
        json!({"add_fields": [{"name": "zone", "data_type": "TEXT"}]}),
    ];
    for body in refused {
        patch(&server, "/databases/schemadb/metadata-schema", &key, body)
            .await
            .assert_current_error(422, "VALIDATION_ERROR");
    }
    patch(
        &server,
        "/databases/schemadb/metadata-schema",
        &key,
        json!({"add_fields": []}),
    )
    .await
    .assert_current_error(400, "INVALID_PARAMETERS");
    assert_eq!(schema_of(&server, &key, "schemadb").await, json!(expected));

    // A schema sent through the legacy route reads back the same way.
    create_legacy(
        &server,
        &key,
        json!({"tenant_id": "legacyschema", "tenant_metadata_schema": [
            {"name": "flag", "data_type": "BOOL"},
            {"name": "doc", "data_type": "JSON", "nullable": false},
        ]}),
    )
    .await;
    assert_eq!(
        schema_of(&server, &key, "legacyschema").await,
        json!([
            default_field("flag", "BOOL"),
            field("doc", "JSON", 1024, false, false),
        ])
    );
}

// ---------------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------------

/// Sends the same kind of request many times at once; returns the replies in request order.
async fn concurrently(
    server: &Server,
    key: &str,
    requests: Vec<(Method, String, Value)>,
) -> Vec<Reply> {
    let mut tasks = Vec::new();
    for (method, path, body) in requests {
        let request = server
            .client
            .request(method, server.url(&path))
            .header("API-Version", "2")
            .header("Authorization", format!("Bearer {key}"))
            .json(&body);
        tasks.push(tokio::spawn(async move {
            common::read(request.send().await.expect("request")).await
        }));
    }
    let mut replies = Vec::new();
    for task in tasks {
        replies.push(task.await.expect("task"));
    }
    replies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_creates_of_one_name_admit_exactly_one() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    let requests = (0..16)
        .map(|i| {
            if i % 2 == 0 {
                (
                    Method::POST,
                    "/databases".to_owned(),
                    json!({"database": "race", "is_embeddings_tenant": true, "embeddings_dimension": 100 + i}),
                )
            } else {
                (
                    Method::POST,
                    "/tenants/create".to_owned(),
                    json!({"tenant_id": "race", "is_embeddings_tenant": true, "embeddings_dimension": 100 + i}),
                )
            }
        })
        .collect();
    let replies = concurrently(&server, &key, requests).await;
    let mut winner = None;
    for (i, reply) in replies.iter().enumerate() {
        if reply.status.as_u16() == 202 {
            assert!(
                winner.is_none(),
                "two creates of one name won: {replies:#?}"
            );
            winner = Some(100 + i as u64);
        } else if i % 2 == 0 {
            reply.assert_current_error(409, "DATABASE_ALREADY_EXISTS");
        } else {
            reply.assert_legacy_error(409, "INVALID_INPUT");
        }
    }
    let dimension = winner.expect("one create won");
    assert_eq!(current_names(&server, &key).await, ["race"]);
    poll_current_ready(&server, &key, "race").await;
    assert_monitor_empty(&server, &key, "race", dimension).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_schema_additions_all_land_or_are_refused_cleanly() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "busy").await;
    const FIELDS: usize = 32;

    // Distinct fields added at once: every addition lands.
    let requests = (0..FIELDS)
        .map(|i| {
            (
                Method::PATCH,
                "/databases/busy/metadata-schema".to_owned(),
                json!({"add_fields": [{"name": format!("f{i}")}]}),
            )
        })
        .collect();
    let replies = concurrently(&server, &key, requests).await;
    for (i, reply) in replies.iter().enumerate() {
        assert_eq!(
            reply.current_ok(200)["added_fields"],
            json!([format!("f{i}")]),
            "{reply:#?}"
        );
    }
    let schema = schema_of(&server, &key, "busy").await;
    let mut names: Vec<String> = schema
        .as_array()
        .expect("schema")
        .iter()
        .map(|f| f["name"].as_str().expect("name").to_owned())
        .collect();
    names.sort();
    let mut expected: Vec<String> = (0..FIELDS).map(|i| format!("f{i}")).collect();
    expected.sort();
    assert_eq!(names, expected);

    // The same new field added at once: exactly one addition wins, the rest are 422.
    let requests = (0..8)
        .map(|_| {
            (
                Method::PATCH,
                "/databases/busy/metadata-schema".to_owned(),
                json!({"add_fields": [{"name": "contested"}]}),
            )
        })
        .collect();
    let replies = concurrently(&server, &key, requests).await;
    let wins = replies.iter().filter(|r| r.status.as_u16() == 200).count();
    assert_eq!(wins, 1, "{replies:#?}");
    for reply in replies.iter().filter(|r| r.status.as_u16() != 200) {
        reply.assert_current_error(422, "VALIDATION_ERROR");
    }
    assert_eq!(
        schema_of(&server, &key, "busy")
            .await
            .as_array()
            .expect("schema")
            .len(),
        FIELDS + 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_while_provisioning_and_deleting_twice_at_once() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    // Deleted right after the create, most likely before provisioning has finished.
    create_current(
        &server,
        &key,
        json!({"database": "short", "database_metadata_schema": [{"name": "a"}]}),
    )
    .await;
    server
        .delete("/databases?database=short", &key)
        .await
        .current_ok(200);
    assert_not_found_everywhere(&server, &key, "short").await;
    create_current(&server, &key, json!({"database": "short"})).await;
    poll_current_ready(&server, &key, "short").await;
    assert_eq!(schema_of(&server, &key, "short").await, json!([]));
    assert_eq!(collections_of(&server, &key, "short").await, ["short"]);

    // Two deletions at once: one is scheduled, the other finds nothing.
    let replies = concurrently(
        &server,
        &key,
        vec![
            (
                Method::DELETE,
                "/databases?database=short".to_owned(),
                json!({}),
            ),
            (
                Method::DELETE,
                "/databases?database=short".to_owned(),
                json!({}),
            ),
        ],
    )
    .await;
    let scheduled = replies.iter().filter(|r| r.status.as_u16() == 200).count();
    assert_eq!(scheduled, 1, "{replies:#?}");
    for reply in &replies {
        if reply.status.as_u16() == 200 {
            assert_eq!(reply.current_ok(200)["status"], "deletion_scheduled");
        } else {
            reply.assert_current_error(404, "DATABASE_NOT_FOUND");
        }
    }
    common::eventually(WAIT, "short gone", || async {
        current_names(&server, &key).await.is_empty().then_some(())
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Persistence
// ---------------------------------------------------------------------------------------------

/// Sets up three databases: one with a schema and a PATCHed field, one legacy with its own
/// dimension, and one deleted. Returns the expected schema of the first.
async fn populate_for_restart(server: &Server, key: &str) -> Value {
    create_current(
        server,
        key,
        json!({
            "database": "kept",
            "is_embeddings_tenant": true,
            "embeddings_dimension": 256,
            "database_metadata_schema": [{"name": "team"}, {"name": "n", "data_type": "INT64"}],
        }),
    )
    .await;
    create_legacy(
        server,
        key,
        json!({"tenant_id": "kept-legacy", "is_embeddings_tenant": true, "embeddings_dimension": 1024}),
    )
    .await;
    create_current(server, key, json!({"database": "dropped"})).await;
    poll_current_ready(server, key, "kept").await;
    poll_legacy_ready(server, key, "kept-legacy").await;
    poll_current_ready(server, key, "dropped").await;
    patch(
        server,
        "/databases/kept/metadata-schema",
        key,
        json!({"add_fields": [{"name": "later", "data_type": "BOOL", "enable_match": true}]}),
    )
    .await
    .current_ok(200);
    server
        .delete("/databases?database=dropped", key)
        .await
        .current_ok(200);
    json!([
        default_field("team", "VARCHAR"),
        default_field("n", "INT64"),
        field("later", "BOOL", 1024, true, true),
    ])
}

async fn assert_populated_state(server: &Server, key: &str, schema: &Value) {
    assert_eq!(current_names(server, key).await, ["kept", "kept-legacy"]);
    assert_eq!(legacy_names(server, key).await, ["kept", "kept-legacy"]);
    poll_current_ready(server, key, "kept").await;
    poll_legacy_ready(server, key, "kept-legacy").await;
    assert_eq!(&schema_of(server, key, "kept").await, schema);
    assert_eq!(schema_of(server, key, "kept-legacy").await, json!([]));
    assert_eq!(collections_of(server, key, "kept").await, ["kept"]);
    assert_eq!(
        legacy_sub_tenants(server, key, "kept-legacy").await,
        ["kept-legacy"]
    );
    assert_monitor_empty(server, key, "kept", 256).await;
    assert_monitor_empty(server, key, "kept-legacy", 1024).await;
    assert_not_found_everywhere(server, key, "dropped").await;
    // Names stay taken after the restart; the deleted one is free.
    server
        .post("/databases", key, json!({"database": "kept"}))
        .await
        .assert_current_error(409, "DATABASE_ALREADY_EXISTS");
    server
        .post("/tenants/create", key, json!({"tenant_id": "kept-legacy"}))
        .await
        .assert_legacy_error(409, "INVALID_INPUT");
}

#[tokio::test]
async fn databases_and_schemas_survive_a_restart() {
    let mut server = Server::start();
    let key = server.key(ORG, &[]);
    let schema = populate_for_restart(&server, &key).await;
    server.restart();
    assert_populated_state(&server, &key, &schema).await;
    server.ready_database(&key, "dropped").await;
    assert_eq!(schema_of(&server, &key, "dropped").await, json!([]));
    // A second restart keeps the re-created one too.
    server.restart();
    assert_eq!(
        current_names(&server, &key).await,
        ["dropped", "kept", "kept-legacy"]
    );
    assert_eq!(&schema_of(&server, &key, "kept").await, &schema);
}

#[tokio::test]
async fn databases_and_schemas_survive_a_sigkill() {
    let mut server = Server::start();
    let key = server.key(ORG, &[]);
    let schema = populate_for_restart(&server, &key).await;
    server.kill();
    server.restart();
    assert_populated_state(&server, &key, &schema).await;
    server.ready_database(&key, "dropped").await;
    server.kill();
    server.restart();
    assert_eq!(
        current_names(&server, &key).await,
        ["dropped", "kept", "kept-legacy"]
    );
    poll_current_ready(&server, &key, "dropped").await;
}

#[tokio::test]
async fn provisioning_interrupted_by_sigkill_finishes_after_restart() {
    let mut server = Server::start();
    let key = server.key(ORG, &[]);
    // Several creates in a row, killed at once after the last is accepted, so some are very
    // likely still provisioning when the process dies.
    let names = ["crash-a", "crash-b", "crash-c", "crash-d", "crash-e"];
    for (i, name) in names.iter().enumerate() {
        if i % 2 == 0 {
            create_current(
                &server,
                &key,
                json!({"database": name, "database_metadata_schema": [{"name": "f"}]}),
            )
            .await;
        } else {
            create_legacy(&server, &key, json!({"tenant_id": name})).await;
        }
    }
    server.kill();
    server.restart();
    for (i, name) in names.iter().enumerate() {
        poll_current_ready(&server, &key, name).await;
        poll_legacy_ready(&server, &key, name).await;
        assert_eq!(collections_of(&server, &key, name).await, [*name]);
        let schema = if i % 2 == 0 {
            json!([default_field("f", "VARCHAR")])
        } else {
            json!([])
        };
        assert_eq!(schema_of(&server, &key, name).await, schema);
    }
    assert_eq!(current_names(&server, &key).await, names);

    // The same for a deletion: scheduled, then the process dies.
    server
        .delete("/databases?database=crash-a", &key)
        .await
        .current_ok(200);
    legacy_ok(
        &server
            .delete("/tenants/delete?tenant_id=crash-b", &key)
            .await,
        200,
    );
    server.kill();
    server.restart();
    assert_eq!(
        current_names(&server, &key).await,
        ["crash-c", "crash-d", "crash-e"]
    );
    assert_not_found_everywhere(&server, &key, "crash-a").await;
    assert_not_found_everywhere(&server, &key, "crash-b").await;
    create_current(&server, &key, json!({"database": "crash-a"})).await;
    poll_current_ready(&server, &key, "crash-a").await;
    assert_eq!(schema_of(&server, &key, "crash-a").await, json!([]));
    assert_eq!(collections_of(&server, &key, "crash-a").await, ["crash-a"]);
}

// ---------------------------------------------------------------------------------------------
// OpenAPI
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn the_openapi_document_is_3_1_and_lists_every_database_route() {
    let server = Server::start();
    let reply = send(&server, Method::GET, "/openapi.json", None, &[], None).await;
    assert_eq!(reply.status.as_u16(), 200, "{reply:#?}");
    let doc = &reply.body;
    let version = doc["openapi"].as_str().expect("openapi version");
    assert!(version.starts_with("3.1."), "openapi {version}");
    let expected: [(&str, &[&str]); 13] = [
        ("/databases", &["post", "get", "delete"]),
        ("/databases/status", &["get"]),
        ("/databases/collections", &["get"]),
        ("/databases/stats", &["get"]),
        ("/databases/{database}/metadata-schema", &["patch"]),
        ("/tenants/create", &["post"]),
        ("/tenants/infra/status", &["get"]),
        ("/tenants/monitor", &["get"]),
        ("/tenants/sub_tenant_ids", &["get"]),
        ("/tenants/tenant_ids", &["get"]),
        ("/tenants/delete", &["delete"]),
        ("/healthz", &["get"]),
        ("/openapi.json", &["get"]),
    ];
    for (path, methods) in expected {
        let item = doc["paths"]
            .get(path)
            .unwrap_or_else(|| panic!("{path} missing from the OpenAPI document"));
        for method in methods {
            assert!(
                item.get(*method).is_some(),
                "{method} {path} missing from the OpenAPI document"
            );
        }
    }
    // No method is documented that the server does not serve on these paths.
    let methods_of = |path: &str| -> Vec<String> {
        let mut m: Vec<String> = doc["paths"][path]
            .as_object()
            .expect("path item")
            .keys()
            .filter(|k| {
                [
                    "get", "put", "post", "delete", "patch", "head", "options", "trace",
                ]
                .contains(&k.as_str())
            })
            .cloned()
            .collect();
        m.sort();
        m
    };
    assert_eq!(methods_of("/databases"), ["delete", "get", "post"]);
    assert_eq!(
        methods_of("/databases/{database}/metadata-schema"),
        ["get", "patch"]
    );
    // The document is public: the same with a version header and with a key.
    let key = server.key(ORG, &[]);
    let again = server
        .call(Method::GET, "/openapi.json", Some(&key), None)
        .await;
    assert_eq!(again.status.as_u16(), 200);
    assert_eq!(&again.body, doc);
}

/// A rename never opens a database to keys restricted to its new name (a database not created
/// yet): refused with 422; the same rename without such keys works, and the restricted key of
/// the old name follows it.
#[tokio::test]
async fn a_rename_never_widens_a_restricted_key() {
    let server = Server::start();
    let key = server.key("org-rename", &[]);
    let _future = server.key("org-rename", &["future"]);
    let follows = server.key("org-rename", &["current"]);
    server.ready_database(&key, "current").await;
    let rename = |to: &str| {
        server.call(
            Method::PATCH,
            "/databases/current",
            Some(&key),
            Some(json!({ "new_name": to })),
        )
    };
    rename("future")
        .await
        .assert_current_error(422, "VALIDATION_ERROR");
    let renamed = rename("renamed").await;
    assert_eq!(renamed.status.as_u16(), 200, "{renamed:#?}");
    let seen = server
        .get("/databases/status?database=renamed", &follows)
        .await;
    assert_eq!(seen.status.as_u16(), 200, "{seen:#?}");
}

/// A store that stays busy past its wait (another process holds the SQLite file's write lock)
/// answers 503 `SERVICE_UNAVAILABLE` with `Retry-After`, on both generations, never a 500; the
/// same request succeeds once the lock is gone. (PostgreSQL's faults are tested apart.)
#[tokio::test]
async fn a_busy_store_answers_503_with_retry_after_then_recovers() {
    use std::io::BufRead;

    let server = Server::start();
    if server.storage_url.is_some() {
        return;
    }
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "warm").await;
    let file = server.data_dir.join("engram.sqlite3");
    let mut holder = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys, time\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             c.execute('BEGIN EXCLUSIVE')\n\
             print('locked', flush=True)\n\
             time.sleep(300)",
        )
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 holds the lock");
    let mut line = String::new();
    std::io::BufReader::new(holder.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the holder's line");
    assert_eq!(line.trim(), "locked");

    let busy = server
        .post("/databases", &key, json!({"database": "later"}))
        .await;
    busy.assert_current_error(503, "SERVICE_UNAVAILABLE");
    assert_eq!(busy.header("retry-after"), Some("1"), "{busy:#?}");
    let legacy = server
        .post("/tenants/create", &key, json!({"tenant_id": "later"}))
        .await;
    legacy.assert_legacy_error(503, "SERVICE_UNAVAILABLE");
    assert_eq!(legacy.header("retry-after"), Some("1"), "{legacy:#?}");

    holder.kill().expect("kill the holder");
    holder.wait().expect("the holder ends");
    server
        .post("/databases", &key, json!({"database": "later"}))
        .await
        .current_ok(202);
}
