//! No request makes a 5xx or a panic: randomized and mutated requests to every route of the
//! OpenAPI document (both generations), through the real router over a real SQLite store, with
//! valid and invalid keys, every body shape (JSON, mutated templates, multipart, raw bytes) and
//! hostile query strings. A panic in a handler would surface as a 500 (the router catches it),
//! so "no 5xx" covers both. The seed count stays small for CI; raise `ENGRAM_FUZZ_CASES` by
//! hand for a longer run.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request};
use engram_app::{App, KeySpec, Models};
use engram_config::Config;
use engram_testkit::{HashEmbedder, TempStore};
use engram_types::SystemClock;
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use serde_json::{json, Value};
use tower::ServiceExt;

const DATABASE: &str = "fuzzed";

/// Every documented route with its method, path parameters filled with `DATABASE`.
fn routes() -> Vec<(Method, String)> {
    let doc = engram_http::openapi_document();
    let mut routes = Vec::new();
    for (path, item) in &doc.paths.paths {
        let path = path
            .replace("{database}", DATABASE)
            .replace("{id}", "doc-1");
        for (method, present) in [
            (Method::GET, item.get.is_some()),
            (Method::POST, item.post.is_some()),
            (Method::PUT, item.put.is_some()),
            (Method::PATCH, item.patch.is_some()),
            (Method::DELETE, item.delete.is_some()),
        ] {
            if present {
                routes.push((method, path.clone()));
            }
        }
    }
    assert!(routes.len() > 20, "the OpenAPI document lists the routes");
    routes
}

/// Strings a hostile client sends: empty, huge, unicode, separators, numbers out of range.
fn nasty_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just(DATABASE.to_owned()),
        Just("x,y".to_owned()),
        Just("-1".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("NaN".to_owned()),
        Just("true".to_owned()),
        Just("\u{0}\u{7f}\u{202e}".to_owned()),
        Just("a".repeat(5000)),
        Just("%zz%".to_owned()),
        "[a-z0-9_,.\\-]{0,12}",
        any::<String>(),
    ]
}

/// Arbitrary JSON, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        nasty_string().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(field_name(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Field names the routes read, and others.
fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "database",
            "tenant_id",
            "collection",
            "sub_tenant_id",
            "query",
            "ids",
            "id",
            "type",
            "page",
            "page_size",
            "alpha",
            "mode",
            "max_results",
            "metadata_filters",
            "additional_metadata",
            "document_metadata",
            "tenant_metadata",
            "filters",
            "collections",
            "recency_bias",
            "memories",
            "app_knowledge",
            "text",
            "url",
            "event_types",
            "signing_secret",
            "generate_signing_secret",
            "add_fields",
            "embeddings_dimension",
            "schema",
            "source_fields",
            "upsert",
            "limit",
            "cursor",
            "status",
            "user_assistant_pairs",
            "expiry_time",
            "graph_context",
            "search_mode",
            "operator",
            "file_ids",
            "memory_id",
            "source_ids",
        ])
        .prop_map(str::to_owned),
        "[a-z_]{1,10}",
    ]
}

/// A valid body of the kind the routes take, then mutated: fields dropped, replaced or added.
fn mutated_template() -> impl Strategy<Value = Value> {
    let template = prop::sample::select(vec![
        json!({"database": DATABASE, "query": "harbour", "max_results": 5}),
        json!({"database": DATABASE, "tenant_id": DATABASE, "query": "x", "alpha": "auto",
               "metadata_filters": {"additional_metadata": {"k": ["a", "b"]}}}),
        json!({"database": DATABASE, "type": "knowledge", "page": 1, "page_size": 10,
               "filters": {"additional_metadata": {"k": "v"}}}),
        json!({"database": DATABASE, "ids": ["doc-1"]}),
        json!({"url": "https://example.com/hook", "event_types": ["indexing.status_changed"]}),
        json!({"database": "new-db", "embeddings_dimension": 64}),
        json!({"tenant_id": DATABASE, "memories": [{"text": "hi", "expiry_time": 5}]}),
        json!({"add_fields": [{"name": "f", "type": "VARCHAR"}]}),
    ]);
    (
        template,
        prop::collection::vec((field_name(), prop::option::of(json_value())), 0..4),
    )
        .prop_map(|(mut body, edits)| {
            if let Value::Object(map) = &mut body {
                for (field, value) in edits {
                    match value {
                        Some(v) => {
                            map.insert(field, v);
                        }
                        None => {
                            map.remove(&field);
                        }
                    }
                }
            }
            body
        })
}

#[derive(Debug, Clone)]
enum Payload {
    None,
    Json(Value),
    RawJson(Vec<u8>),
    Multipart(Vec<(String, String, Option<Vec<u8>>)>),
    Form(Vec<(String, String)>),
}

fn payload() -> impl Strategy<Value = Payload> {
    let part = (
        prop::sample::select(vec![
            "type",
            "database",
            "tenant_id",
            "app_knowledge",
            "memories",
            "documents",
            "files",
            "document_metadata",
            "file_metadata",
            "upsert",
            "collection",
            "sub_tenant_id",
        ])
        .prop_map(str::to_owned),
        prop_oneof![
            nasty_string(),
            json_value().prop_map(|v| v.to_string()),
            Just(r#"[{"id":"a","title":"t","content":{"text":"hello"}}]"#.to_owned()),
            Just("knowledge".to_owned()),
            Just("memory".to_owned()),
        ],
        prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
    );
    prop_oneof![
        Just(Payload::None),
        json_value().prop_map(Payload::Json),
        mutated_template().prop_map(Payload::Json),
        mutated_template().prop_map(Payload::Json),
        prop::collection::vec(any::<u8>(), 0..128).prop_map(Payload::RawJson),
        prop::collection::vec(part.clone(), 0..6).prop_map(Payload::Multipart),
        // A valid ingest form with parts added: reaches the ingest path and the queue.
        (
            prop::sample::select(vec!["knowledge", "memory"]),
            prop::collection::vec(part, 0..3),
        )
            .prop_map(|(kind, extra)| {
                let mut parts = vec![
                    ("type".to_owned(), kind.to_owned(), None),
                    ("database".to_owned(), DATABASE.to_owned(), None),
                    (
                        "app_knowledge".to_owned(),
                        r#"[{"id":"doc-1","title":"t","content":{"text":"harbour notes"}}]"#
                            .to_owned(),
                        None,
                    ),
                    (
                        "memories".to_owned(),
                        r#"[{"text":"I like tea","infer":true}]"#.to_owned(),
                        None,
                    ),
                ];
                parts.extend(extra);
                Payload::Multipart(parts)
            }),
        prop::collection::vec((field_name(), nasty_string()), 0..4).prop_map(Payload::Form),
    ]
}

fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn request(
    (method, path): &(Method, String),
    query: &[(String, String)],
    payload: Payload,
    auth: Option<&str>,
    version: Option<&str>,
) -> Request<Body> {
    let mut uri = path.clone();
    if !query.is_empty() {
        let pairs: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        uri.push('?');
        uri.push_str(&pairs.join("&"));
    }
    let mut builder = Request::builder().method(method.clone()).uri(uri);
    // Values no HTTP client could send (control characters) are left out.
    let header = |value: String| HeaderValue::from_str(&value).ok();
    if let Some(auth) = auth.and_then(|a| header(format!("Bearer {a}"))) {
        builder = builder.header("Authorization", auth);
    }
    if let Some(version) = version.and_then(|v| header(v.to_owned())) {
        builder = builder.header("API-Version", version);
    }
    let body = match payload {
        Payload::None => Body::empty(),
        Payload::Json(value) => {
            builder = builder.header("Content-Type", "application/json");
            Body::from(value.to_string())
        }
        Payload::RawJson(bytes) => {
            builder = builder.header("Content-Type", "application/json");
            Body::from(bytes)
        }
        Payload::Multipart(parts) => {
            const BOUNDARY: &str = "fuzz-boundary";
            builder = builder.header(
                "Content-Type",
                format!("multipart/form-data; boundary={BOUNDARY}"),
            );
            let mut body = Vec::new();
            for (name, text, file) in parts {
                body.extend(format!("--{BOUNDARY}\r\n").bytes());
                match file {
                    Some(bytes) => {
                        body.extend(
                            format!("Content-Disposition: form-data; name=\"{name}\"; filename=\"f.txt\"\r\nContent-Type: text/plain\r\n\r\n")
                                .bytes(),
                        );
                        body.extend(bytes);
                    }
                    None => {
                        body.extend(
                            format!(
                                "Content-Disposition: form-data; name=\"{name}\"\r\n\r\n{text}"
                            )
                            .bytes(),
                        );
                    }
                }
                body.extend(b"\r\n");
            }
            body.extend(format!("--{BOUNDARY}--\r\n").bytes());
            Body::from(body)
        }
        Payload::Form(fields) => {
            builder = builder.header("Content-Type", "application/x-www-form-urlencoded");
            let pairs: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
                .collect();
            Body::from(pairs.join("&"))
        }
    };
    builder.body(body).unwrap()
}

#[test]
fn no_request_to_any_route_answers_5xx() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let kit = runtime.block_on(TempStore::new());
    let data = tempfile::tempdir().unwrap();
    let mut config = Config {
        data_dir: data.path().to_owned(),
        ..Config::default()
    };
    // Every case is answered by the route itself, not by the rate limit.
    config.rate_limit.enabled = false;
    let models = Models {
        embedder: Arc::new(HashEmbedder),
        query_embedder: Arc::new(HashEmbedder),
        tokens: Arc::new(HashEmbedder),
    };
    let app = App::with_store(
        config,
        kit.store.clone(),
        Arc::new(SystemClock),
        Some(models),
    )
    .unwrap();
    let token = tokio_util::sync::CancellationToken::new();
    let workers = runtime.block_on(async { app.start_workers(token.child_token()) });
    let key = runtime
        .block_on(app.create_key(KeySpec {
            org: "org-fuzz".into(),
            ..KeySpec::default()
        }))
        .unwrap()
        .token;
    let router = engram_http::router(app.clone());
    // A ready database with content, so that requests reach the deep paths.
    runtime.block_on(async {
        let create = request(
            &(Method::POST, "/databases".into()),
            &[],
            Payload::Json(json!({"database": DATABASE})),
            Some(&key),
            Some("2"),
        );
        let created = router.clone().oneshot(create).await.unwrap();
        assert_eq!(created.status(), 202);
        for _ in 0..400 {
            let status = request(
                &(Method::GET, "/databases/status".into()),
                &[("database".into(), DATABASE.into())],
                Payload::None,
                Some(&key),
                Some("2"),
            );
            let reply = router.clone().oneshot(status).await.unwrap();
            let body = axum::body::to_bytes(reply.into_body(), 1 << 20)
                .await
                .unwrap();
            let body: Value = serde_json::from_slice(&body).unwrap_or_default();
            if body["data"]["infra"]["ready_for_ingestion"] == true {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    });

    let routes = routes();
    let cases = std::env::var("ENGRAM_FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(500);
    let mut runner = TestRunner::new_with_rng(
        RunnerConfig {
            cases,
            failure_persistence: None,
            ..RunnerConfig::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = (
        prop::sample::select(routes),
        prop::collection::vec((field_name(), nasty_string()), 0..4),
        payload(),
        prop_oneof![
            4 => Just(Some(key.clone())),
            1 => Just(None),
            1 => nasty_string().prop_map(Some),
        ],
        prop_oneof![
            Just(Some("2".to_owned())),
            Just(None),
            nasty_string().prop_map(Some)
        ],
    );
    let seen = std::sync::Mutex::new(std::collections::BTreeMap::<u16, usize>::new());
    runner
        .run(&strategy, |(route, query, payload, auth, version)| {
            let request = request(
                &route,
                &query,
                payload.clone(),
                auth.as_deref(),
                version.as_deref(),
            );
            let status = runtime.block_on(async {
                let reply = router.clone().oneshot(request).await.unwrap();
                let status = reply.status();
                let body = axum::body::to_bytes(reply.into_body(), 64 << 20)
                    .await
                    .unwrap_or_default();
                (status, String::from_utf8_lossy(&body).into_owned())
            });
            *seen.lock().unwrap().entry(status.0.as_u16()).or_default() += 1;
            prop_assert!(
                !status.0.is_server_error(),
                "{} {} {query:?} {payload:?} -> {}: {}",
                route.0,
                route.1,
                status.0,
                status.1
            );
            Ok(())
        })
        .unwrap();
    // Statuses answered, to see that the cases reach past authentication and validation.
    eprintln!("fuzz: statuses answered {:?}", seen.lock().unwrap());
    token.cancel();
    runtime.block_on(workers.shutdown(Duration::from_secs(5)));
}
