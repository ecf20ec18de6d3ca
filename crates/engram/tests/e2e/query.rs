//! Retrieval end to end, on both API generations, against the real binary and the real
//! embedding model: validation with exact statuses and codes, the response shapes of
//! api-shapes.md, ranking sanity (modes, `query_by`, `alpha`, operators), metadata filters
//! applied before ranking, isolation between organizations, databases and collections
//! (weighted too), and deletion, upserts and expiry as queries see them.
//!
//! Every server loads the model, so each test starts one and groups the checks of a theme.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{
    app, eventually, holds_for, ingest_memories, non_empty_str, send_form, wait_completed, Reply,
    Server,
};
use reqwest::multipart::Form;
use reqwest::Method;
use serde_json::{json, Value};

const ORG: &str = "acme";
/// Indexing runs the real embedding model on a small machine, next to other tests.
const WAIT: Duration = Duration::from_secs(180);

// ---------------------------------------------------------------------------------------------
// Content
// ---------------------------------------------------------------------------------------------

const VOLCANO: &str = "Volcanic eruptions eject lava, ash and sulfur dioxide high into the \
    atmosphere. Pressure from magma chambers builds for years before an eruption.";
const BAKING: &str = "To bake sourdough bread, feed the starter with flour and water the night \
    before, then knead the dough, let it rise and bake it in a hot oven.";
const MANUAL: &str = "Replacement part QX7731 fits the circulation pump of the model nine \
    dishwasher. Order it from the service portal.";
const TEA_A: &str = "Every morning I drink green tea with honey.";
const TEA_B: &str = "The tea leaves turned green after steaming, and the tea tasted bitter.";
const TEA_C: &str = "Green apples and black coffee for breakfast.";

/// A guide long enough for several chunks, every paragraph about tomatoes.
fn tomato_guide() -> String {
    [
        "Tomato plants need at least six hours of direct sun every day. Choose a sheltered bed, \
         loosen the soil deeply, and work in plenty of compost before planting the tomato \
         seedlings. Space each tomato plant about sixty centimetres apart so that air moves \
         freely between the leaves, which keeps fungal diseases such as blight away from the \
         crop during humid summer weeks.",
        "Water tomato plants deeply and regularly at the base rather than over the leaves. \
         Irregular watering causes blossom end rot and split fruit. A thick layer of straw \
         mulch keeps the soil evenly moist, suppresses weeds and stops soil splashing onto the \
         lower tomato leaves when it rains heavily in the afternoon.",
        "Support every tomato plant with a stake or a cage before it grows tall. Pinch out the \
         side shoots of cordon tomato varieties each week so that the plant puts its energy \
         into fruit. Feed with a potassium rich tomato fertiliser once the first truss has set \
         and harvest the tomatoes as soon as they colour fully on the vine.",
        "Late in the season, remove the growing tip of each tomato plant so that the last \
         trusses ripen before the first frost. Unripe tomatoes that remain can ripen indoors in \
         a drawer next to a banana. Clear the tomato bed in autumn, burn any diseased leaves \
         and rotate the crop so that tomatoes do not grow in the same soil two years running.",
        "Saving tomato seed is simple: scoop the seeds of a ripe heirloom tomato into a jar \
         of water, let them ferment for three days, rinse them and dry them on a plate. Label \
         every packet with the tomato variety and the year, and store the packets somewhere \
         cool and dark until spring sowing begins again indoors on a sunny windowsill.",
    ]
    .join("\n\n")
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `POST /context/ingest` of app content into a collection (None: the default one); asserts
/// 202 and every item queued.
async fn ingest_apps(
    server: &Server,
    key: &str,
    database: &str,
    collection: Option<&str>,
    items: &[Value],
) {
    let mut form = Form::new()
        .text("type", "knowledge")
        .text("database", database.to_owned())
        .text("app_knowledge", Value::from(items.to_vec()).to_string());
    if let Some(collection) = collection {
        form = form.text("collection", collection.to_owned());
    }
    let reply = send_form(server, "/context/ingest", key, form).await;
    let data = reply.current_ok(202);
    assert_eq!(data["success_count"], items.len(), "{reply:#?}");
    for result in data["results"].as_array().expect("results") {
        assert_eq!(result["status"], "queued", "{reply:#?}");
    }
}

async fn query(server: &Server, key: &str, body: Value) -> Reply {
    server.post("/query", key, body).await
}

/// A successful `POST /query`: status, envelope and the shape of `data` checked; returns the
/// whole body (`data` and `meta`).
async fn query_ok(server: &Server, key: &str, body: Value) -> Value {
    let reply = query(server, key, body.clone()).await;
    let data = reply.current_ok(200);
    check_current(data, &format!("{body}: {reply:#?}"));
    assert!(
        reply.body["meta"]["ignored_filter_keys"].is_array(),
        "meta.ignored_filter_keys is always reported: {reply:#?}"
    );
    let mode = reply.body["meta"]["mode"].as_str().unwrap_or_default();
    assert!(mode == "fast" || mode == "thinking", "{reply:#?}");
    reply.body
}

async fn legacy(server: &Server, path: &str, key: &str, body: Value) -> Reply {
    server.call(Method::POST, path, Some(key), Some(body)).await
}

/// A POST to `path` whose JSON body does not parse (with the current generation's header, which
/// the legacy routes ignore).
async fn not_json(server: &Server, path: &str, key: &str) -> Reply {
    let raw = server
        .client
        .post(server.url(path))
        .header("API-Version", "2")
        .header("Authorization", format!("Bearer {key}"))
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    common::read(raw).await
}

/// A successful legacy recall: a plain object in the legacy shape; returns the body.
async fn legacy_ok(server: &Server, path: &str, key: &str, body: Value) -> Value {
    let reply = legacy(server, path, key, body.clone()).await;
    assert_eq!(reply.status.as_u16(), 200, "{body}: {reply:#?}");
    assert!(reply.body.get("detail").is_none(), "{reply:#?}");
    assert!(reply.body.get("data").is_none(), "{reply:#?}");
    check_legacy(&reply.body, &format!("{path} {body}: {reply:#?}"));
    reply.body
}

fn chunks(data: &Value) -> &Vec<Value> {
    data["chunks"].as_array().expect("chunks")
}

/// The item id of every chunk, in rank order (`id` current, `source_id` legacy).
fn chunk_items(data: &Value) -> Vec<String> {
    chunks(data)
        .iter()
        .map(|c| {
            c.get("id")
                .or_else(|| c.get("source_id"))
                .and_then(Value::as_str)
                .expect("chunk item id")
                .to_owned()
        })
        .collect()
}

fn item_set(data: &Value) -> BTreeSet<String> {
    chunk_items(data).into_iter().collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

fn first_item(data: &Value, what: &str) -> String {
    chunk_items(data)
        .first()
        .unwrap_or_else(|| panic!("{what}: no chunks: {data:#?}"))
        .clone()
}

/// `(chunk_uuid, relevancy_score)` in rank order.
fn ranking(data: &Value) -> Vec<(String, f64)> {
    chunks(data)
        .iter()
        .map(|c| {
            (
                c["chunk_uuid"].as_str().unwrap().to_owned(),
                c["relevancy_score"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// Score of the first chunk of `item`.
fn score_of(data: &Value, item: &str) -> Option<f64> {
    chunks(data)
        .iter()
        .find(|c| c.get("id").or_else(|| c.get("source_id")) == Some(&json!(item)))
        .map(|c| c["relevancy_score"].as_f64().unwrap())
}

/// Lowercased words of a text, as the lexical index splits them.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn has_phrase(text: &str, phrase: &[&str]) -> bool {
    words(text)
        .windows(phrase.len())
        .any(|w| w.iter().zip(phrase).all(|(a, b)| a == b))
}

/// Scores in 0..=1, non-increasing in chunk order.
fn check_scores(chunks: &[Value], context: &str) {
    let scores: Vec<f64> = chunks
        .iter()
        .map(|c| {
            c["relevancy_score"]
                .as_f64()
                .unwrap_or_else(|| panic!("relevancy_score: {context}"))
        })
        .collect();
    for s in &scores {
        assert!((0.0..=1.0).contains(s), "score {s} out of range: {context}");
    }
    for pair in scores.windows(2) {
        assert!(
            pair[0] >= pair[1],
            "scores not in rank order {scores:?}: {context}"
        );
    }
}

/// `sources` lists the chunks' items once each, in order of first appearance.
fn check_sources(chunk_items: &[String], sources: &[Value], context: &str) {
    let mut expected: Vec<&str> = Vec::new();
    for id in chunk_items {
        if !expected.contains(&id.as_str()) {
            expected.push(id);
        }
    }
    let listed: Vec<&str> = sources
        .iter()
        .map(|s| s["id"].as_str().expect("source id"))
        .collect();
    assert_eq!(
        listed, expected,
        "sources are the chunks' items, deduplicated: {context}"
    );
}

/// The current `data` shape of api-shapes.md.
fn check_current(data: &Value, context: &str) {
    let chunks = chunks(data);
    let mut uuids = BTreeSet::new();
    for c in chunks {
        for field in [
            "chunk_uuid",
            "id",
            "chunk_content",
            "source_type",
            "source_title",
            "source_upload_time",
            "source_last_updated_time",
            "collection",
            "sub_tenant_id",
        ] {
            assert!(c[field].is_string(), "chunk.{field}: {context}");
        }
        for field in ["chunk_uuid", "id", "chunk_content", "source_upload_time"] {
            assert!(non_empty_str(&c[field]), "chunk.{field} empty: {context}");
        }
        assert_layout_string(c, context);
        assert!(c["relevancy_score"].is_number(), "{context}");
        assert!(c["extra_context_ids"].is_array(), "{context}");
        assert!(c["metadata"].is_object(), "{context}");
        assert!(c["additional_metadata"].is_object(), "{context}");
        assert_eq!(c["collection"], c["sub_tenant_id"], "{context}");
        assert!(
            uuids.insert(c["chunk_uuid"].as_str().unwrap().to_owned()),
            "a chunk listed twice: {context}"
        );
    }
    check_scores(chunks, context);
    let sources = data["sources"].as_array().expect("sources");
    for s in sources {
        for field in [
            "id",
            "title",
            "type",
            "description",
            "url",
            "timestamp",
            "collection",
            "sub_tenant_id",
        ] {
            assert!(s[field].is_string(), "source.{field}: {context}");
        }
        assert!(s["metadata"].is_object(), "{context}");
        assert!(s["additional_metadata"].is_object(), "{context}");
        assert_eq!(s["collection"], s["sub_tenant_id"], "{context}");
    }
    // Items are identified by (collection, id); the tests never reuse an id across
    // collections of one query.
    check_sources(&chunk_items(data), sources, context);
    assert!(data["additional_context"].is_object(), "{context}");
}

/// The legacy recall shape of api-shapes.md.
fn check_legacy(body: &Value, context: &str) {
    let chunks = chunks(body);
    for c in chunks {
        for field in [
            "chunk_uuid",
            "source_id",
            "chunk_content",
            "source_type",
            "source_upload_time",
            "source_title",
            "source_last_updated_time",
        ] {
            assert!(c[field].is_string(), "chunk.{field}: {context}");
        }
        assert!(non_empty_str(&c["chunk_uuid"]), "{context}");
        assert!(non_empty_str(&c["chunk_content"]), "{context}");
        assert_layout_string(c, context);
        assert!(c["relevancy_score"].is_number(), "{context}");
        assert!(c["document_metadata"].is_object(), "{context}");
        assert!(c["tenant_metadata"].is_object(), "{context}");
        assert!(c["extra_context_ids"].is_array(), "{context}");
    }
    check_scores(chunks, context);
    let sources = body["sources"].as_array().expect("sources");
    for s in sources {
        for field in ["id", "title", "type", "description", "url", "timestamp"] {
            assert!(s[field].is_string(), "source.{field}: {context}");
        }
        assert!(s["tenant_metadata"].is_object(), "{context}");
        assert!(s["document_metadata"].is_object(), "{context}");
    }
    check_sources(&chunk_items(body), sources, context);
    assert!(body.get("graph_context").is_some(), "{context}");
    assert!(body.get("additional_context").is_some(), "{context}");
}

/// The empty graph context returned until the knowledge graph lands.
/// Asserts that `graph` has the graph context's shape: path lists whose groups are named by
/// `chunk_id_to_group_ids` for chunks that the answer returned.
fn assert_graph_context(graph: &Value, data: &Value) {
    let returned: Vec<&Value> = chunks(data).iter().map(|c| &c["chunk_uuid"]).collect();
    let groups = graph["chunk_id_to_group_ids"].as_object().expect("groups");
    for key in ["query_paths", "chunk_relations"] {
        for path in graph[key].as_array().expect("paths") {
            assert!(
                !path["triplets"].as_array().unwrap().is_empty(),
                "{graph:#}"
            );
            for chunk in path["source_chunk_ids"].as_array().unwrap() {
                assert!(returned.contains(&chunk), "{graph:#}");
                let named = &groups[chunk.as_str().unwrap()];
                assert!(
                    named.as_array().unwrap().contains(&path["group_id"]),
                    "{graph:#}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Validation, access and deprecated aliases
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn query_parameters_are_validated_and_access_is_checked() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "val").await;
    server.ready_database(&key, "val_other").await;
    ingest_apps(
        &server,
        &key,
        "val",
        None,
        &[app("v1", "Volcanoes", VOLCANO)],
    )
    .await;
    ingest_apps(
        &server,
        &key,
        "val",
        Some("c1"),
        &[app("v2", "Sourdough", BAKING)],
    )
    .await;
    wait_completed(&server, &key, "val", None, &["v1"]).await;
    wait_completed(&server, &key, "val", Some("c1"), &["v2"]).await;

    let base = json!({"database": "val", "query": "volcanic eruption"});
    let with = |extra: Value| {
        let mut body = base.clone();
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };

    // Valid requests, boundaries included.
    let hundred: Vec<String> = (0..100).map(|i| format!("c{i}")).collect();
    for ok in [
        with(json!({})),
        with(json!({"max_results": 1})),
        with(json!({"max_results": 1000})),
        with(json!({"alpha": "auto"})),
        with(json!({"alpha": 0})),
        with(json!({"alpha": 1})),
        with(json!({"alpha": 0.5})),
        with(json!({"recency_bias": 0})),
        with(json!({"recency_bias": 1})),
        with(json!({"collections": hundred})),
        with(json!({"collections": {"c1": 0.5, "val": 2}})),
        with(json!({"type": "knowledge"})),
        with(json!({"type": "memory"})),
        with(json!({"type": "all"})),
        with(json!({"query_by": "hybrid"})),
        with(json!({"query_by": "text"})),
        with(json!({"query_by": "text", "operator": "and"})),
        with(json!({"query_by": "text", "operator": "phrase"})),
        with(json!({"operator": "or"})),
        with(json!({"mode": "fast"})),
        with(json!({"mode": "thinking"})),
        with(json!({"mode": "auto"})),
        with(json!({"graph_context": false})),
        with(json!({"query_apps": true})),
        with(json!({"additional_context": "the user is a geologist"})),
        with(json!({"metadata_filters": {}})),
        with(json!({"metadata_filters": {"additional_metadata": {}}})),
    ] {
        query_ok(&server, &key, ok).await;
    }
    // max_results caps the chunks.
    let body = query_ok(&server, &key, with(json!({"max_results": 1}))).await;
    assert_eq!(chunks(&body["data"]).len(), 1, "{body:#?}");

    // Invalid requests: 400 INVALID_PARAMETERS each.
    let mut invalid = vec![
        ("missing query", json!({"database": "val"})),
        ("empty query", with(json!({"query": ""}))),
        ("blank query", with(json!({"query": "   "}))),
        ("query not a string", with(json!({"query": 5}))),
        ("missing database", json!({"query": "volcano"})),
        ("max_results 0", with(json!({"max_results": 0}))),
        ("max_results 1001", with(json!({"max_results": 1001}))),
        ("max_results negative", with(json!({"max_results": -3}))),
        ("max_results text", with(json!({"max_results": "ten"}))),
        ("alpha 1.5", with(json!({"alpha": 1.5}))),
        ("alpha -0.1", with(json!({"alpha": -0.1}))),
        ("alpha banana", with(json!({"alpha": "banana"}))),
        ("alpha bool", with(json!({"alpha": true}))),
        ("recency_bias 2", with(json!({"recency_bias": 2}))),
        ("recency_bias -0.5", with(json!({"recency_bias": -0.5}))),
        ("weight 0.25", with(json!({"collections": {"c1": 0.25}}))),
        (
            "weight 1.05",
            with(json!({"collections": {"c1": 1, "c2": 1.05}})),
        ),
        ("weight 0", with(json!({"collections": {"c1": 0}}))),
        ("weight negative", with(json!({"collections": {"c1": -1}}))),
        ("weight text", with(json!({"collections": {"c1": "high"}}))),
        ("weight null", with(json!({"collections": {"c1": null}}))),
        ("collections not a list", with(json!({"collections": "c1"}))),
        (
            "collection and collections",
            with(json!({"collection": "c1", "collections": ["c2"]})),
        ),
        (
            "collection and weighted collections",
            with(json!({"collection": "c1", "collections": {"c2": 1}})),
        ),
        ("type", with(json!({"type": "documents"}))),
        ("query_by", with(json!({"query_by": "vector"}))),
        ("operator", with(json!({"operator": "xor"}))),
        ("mode", with(json!({"mode": "slow"}))),
        ("graph_context", with(json!({"graph_context": "yes"}))),
        ("metadata_filters", with(json!({"metadata_filters": "x"}))),
        (
            "additional_metadata not an object",
            with(json!({"metadata_filters": {"additional_metadata": "eu"}})),
        ),
        (
            "document_metadata not an object",
            with(json!({"metadata_filters": {"document_metadata": ["eu"]}})),
        ),
        (
            "filter value an object",
            with(json!({"metadata_filters": {"additional_metadata": {"region": {"a": 1}}}})),
        ),
    ];
    let too_many: Vec<String> = (0..101).map(|i| format!("c{i}")).collect();
    invalid.push(("101 collections", with(json!({"collections": too_many}))));
    let too_many_weights: serde_json::Map<String, Value> =
        (0..101).map(|i| (format!("c{i}"), json!(1))).collect();
    invalid.push((
        "101 weighted collections",
        with(json!({ "collections": too_many_weights })),
    ));
    for (what, body) in invalid {
        let reply = query(&server, &key, body).await;
        assert_eq!(reply.status.as_u16(), 400, "{what}: {reply:#?}");
        reply.assert_current_error(400, "INVALID_PARAMETERS");
    }
    // A body that is not JSON at all.
    not_json(&server, "/query", &key)
        .await
        .assert_current_error(400, "INVALID_PARAMETERS");

    // Unknown database: 404 on the current route, TENANT_NOT_FOUND on the legacy ones. A search
    // the legacy routes cannot run is INVALID_SEARCH_PARAMETERS (malformed JSON too); a malformed
    // tenant id keeps INVALID_TENANT_ID.
    query(&server, &key, json!({"database": "nowhere", "query": "x"}))
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
    for path in [
        "/recall/full_recall",
        "/recall/recall_preferences",
        "/recall/boolean_recall",
    ] {
        legacy(
            &server,
            path,
            &key,
            json!({"tenant_id": "nowhere", "query": "x"}),
        )
        .await
        .assert_legacy_error(404, "TENANT_NOT_FOUND");
        legacy(&server, path, &key, json!({"query": "x"}))
            .await
            .assert_legacy_error(400, "INVALID_SEARCH_PARAMETERS");
        legacy(&server, path, &key, json!({"tenant_id": "val"}))
            .await
            .assert_legacy_error(400, "INVALID_SEARCH_PARAMETERS");
        legacy(
            &server,
            path,
            &key,
            json!({"tenant_id": "val", "query": "x", "max_results": 0}),
        )
        .await
        .assert_legacy_error(400, "INVALID_SEARCH_PARAMETERS");
        legacy(
            &server,
            path,
            &key,
            json!({"tenant_id": "bad name!", "query": "x"}),
        )
        .await
        .assert_legacy_error(400, "INVALID_TENANT_ID");
        not_json(&server, path, &key)
            .await
            .assert_legacy_error(400, "INVALID_SEARCH_PARAMETERS");
        server
            .call(
                Method::POST,
                path,
                None,
                Some(json!({"tenant_id": "val", "query": "x"})),
            )
            .await
            .assert_legacy_error(401, "UNAUTHORIZED");
    }
    for bad in [
        json!({"alpha": 2}),
        json!({"mode": "auto"}),
        json!({"recency_bias": 5}),
    ] {
        let mut body = json!({"tenant_id": "val", "query": "x"});
        for (k, v) in bad.as_object().unwrap() {
            body[k] = v.clone();
        }
        legacy(&server, "/recall/full_recall", &key, body)
            .await
            .assert_legacy_error(400, "INVALID_SEARCH_PARAMETERS");
    }
    for bad in [json!({"operator": "xor"}), json!({"search_mode": "all"})] {
        let mut body = json!({"tenant_id": "val", "query": "x"});
        for (k, v) in bad.as_object().unwrap() {
            body[k] = v.clone();
        }
        legacy(&server, "/recall/boolean_recall", &key, body)
            .await
            .assert_legacy_error(400, "INVALID_SEARCH_PARAMETERS");
    }

    // Credentials: none is 401; a key for another database is 403; another organization's key
    // gets the 404 of a missing database.
    server
        .call(Method::POST, "/query", None, Some(base.clone()))
        .await
        .assert_current_error(401, "UNAUTHORIZED");
    server
        .call(
            Method::POST,
            "/query",
            Some("nope.nope"),
            Some(base.clone()),
        )
        .await
        .assert_current_error(401, "UNAUTHORIZED");
    let restricted = server.key(ORG, &["val_other"]);
    query(&server, &restricted, base.clone())
        .await
        .assert_current_error(403, "FORBIDDEN");
    legacy(
        &server,
        "/recall/full_recall",
        &restricted,
        json!({"tenant_id": "val", "query": "volcano"}),
    )
    .await
    .assert_legacy_error(403, "FORBIDDEN");
    query_ok(
        &server,
        &restricted,
        json!({"database": "val_other", "query": "volcano"}),
    )
    .await;
    let stranger = server.key("globex", &[]);
    let reply = query(&server, &stranger, base.clone()).await;
    reply.assert_current_error(404, "DATABASE_NOT_FOUND");
    assert!(
        !reply.body.to_string().contains("Volcanic"),
        "an error leaked content: {reply:#?}"
    );

    // Current names: no deprecation. Deprecated aliases work and are reported.
    let body = base.clone();
    let reply = query(&server, &key, body).await;
    assert_eq!(item_set(reply.current_ok(200)), set(&["v1"]), "{reply:#?}");
    reply.assert_deprecations(&[]);

    let reply = query(
        &server,
        &key,
        json!({"tenant_id": "val", "query": "volcanic eruption"}),
    )
    .await;
    assert_eq!(item_set(reply.current_ok(200)), set(&["v1"]), "{reply:#?}");
    reply.assert_deprecations(&[("tenant_id", "database")]);

    let reply = query(
        &server,
        &key,
        json!({"database": "val", "sub_tenant_id": "c1", "query": "sourdough bread"}),
    )
    .await;
    assert_eq!(item_set(reply.current_ok(200)), set(&["v2"]), "{reply:#?}");
    reply.assert_deprecations(&[("sub_tenant_id", "collection")]);

    let reply = query(
        &server,
        &key,
        json!({"tenant_id": "val", "sub_tenant_ids": ["c1"], "query": "sourdough bread"}),
    )
    .await;
    assert_eq!(item_set(reply.current_ok(200)), set(&["v2"]), "{reply:#?}");
    reply.assert_deprecations(&[("tenant_id", "database"), ("sub_tenant_ids", "collections")]);

    // An alias with the same value as its current name is accepted; a different one is not.
    query_ok(
        &server,
        &key,
        json!({"database": "val", "tenant_id": "val", "query": "volcanic eruption"}),
    )
    .await;
    let reply = query(
        &server,
        &key,
        json!({"database": "val", "tenant_id": "val_other", "query": "x"}),
    )
    .await;
    reply.assert_current_error(400, "INVALID_PARAMETERS");
}

// ---------------------------------------------------------------------------------------------
// 2-3. Response shape and ranking
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn responses_have_the_documented_shape_and_rank_sensibly() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "rank").await;
    let guide = tomato_guide();
    ingest_apps(
        &server,
        &key,
        "rank",
        None,
        &[
            app("volcano", "Volcanoes", VOLCANO),
            app("baking", "Sourdough", BAKING),
            app("manual", "Pump manual", MANUAL),
            app("garden", "Tomato growing guide", &guide),
            app("tea-a", "Morning tea", TEA_A),
            app("tea-b", "Steaming", TEA_B),
            app("tea-c", "Breakfast", TEA_C),
        ],
    )
    .await;
    let all = [
        "volcano", "baking", "manual", "garden", "tea-a", "tea-b", "tea-c",
    ];
    wait_completed(&server, &key, "rank", None, &all).await;
    let q = |query: &str, extra: Value| {
        let mut body = json!({"database": "rank", "query": query, "max_results": 50});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };

    // Shape: every field, titles and types as ingested, two chunks of one source give one
    // source entry.
    let body = query_ok(
        &server,
        &key,
        q("tomato plants in the garden", json!({"mode": "fast"})),
    )
    .await;
    let data = &body["data"];
    let garden_chunks: Vec<&Value> = chunks(data)
        .iter()
        .filter(|c| c["id"] == "garden")
        .collect();
    assert!(
        garden_chunks.len() >= 2,
        "the guide is several chunks: {body:#?}"
    );
    assert_eq!(first_item(data, "tomato"), "garden", "{body:#?}");
    for c in &garden_chunks {
        assert_eq!(c["source_title"], "Tomato growing guide", "{body:#?}");
        assert_eq!(c["source_type"], "page", "{body:#?}");
        assert_eq!(c["collection"], "rank", "the default collection: {body:#?}");
        assert!(
            words(c["chunk_content"].as_str().unwrap()).contains(&"tomato".to_owned()),
            "{body:#?}"
        );
    }
    let sources = data["sources"].as_array().unwrap();
    assert_eq!(
        sources.iter().filter(|s| s["id"] == "garden").count(),
        1,
        "{body:#?}"
    );
    let garden = sources.iter().find(|s| s["id"] == "garden").unwrap();
    assert_eq!(garden["title"], "Tomato growing guide", "{body:#?}");
    assert_eq!(garden["type"], "page", "{body:#?}");
    // The whole small corpus is within reach of a hybrid query.
    assert_eq!(item_set(data), set(&all), "{body:#?}");
    assert!(chunks(data).len() > all.len(), "{body:#?}");
    // Graph context: present by default, absent when turned off.
    assert_graph_context(&data["graph_context"], data);
    assert_eq!(body["meta"]["mode"], "fast", "{body:#?}");
    assert_eq!(body["meta"]["database"], "rank", "{body:#?}");
    // Each stage that ran says how long it took; fast mode neither expands nor reranks.
    let timings = body["meta"]["timings_ms"].as_object().unwrap();
    for stage in [
        "embed",
        "keyword",
        "vector",
        "fuse",
        "read",
        "graph_context",
    ] {
        assert!(
            timings[stage].as_f64().unwrap() >= 0.0,
            "{stage}: {body:#?}"
        );
    }
    assert!(timings.get("rerank").is_none(), "{body:#?}");
    let body = query_ok(
        &server,
        &key,
        q(
            "tomato plants in the garden",
            json!({"mode": "fast", "graph_context": false}),
        ),
    )
    .await;
    assert!(body["data"].get("graph_context").is_none(), "{body:#?}");
    let body = query_ok(
        &server,
        &key,
        q("tomato plants in the garden", json!({"mode": "thinking"})),
    )
    .await;
    assert_eq!(body["meta"]["mode"], "thinking", "{body:#?}");
    assert_graph_context(&body["data"]["graph_context"], &body["data"]);
    let timings = body["meta"]["timings_ms"].as_object().unwrap();
    for stage in ["expand", "rerank"] {
        assert!(
            timings[stage].as_f64().unwrap() >= 0.0,
            "{stage}: {body:#?}"
        );
    }

    // Mode auto: the mode it resolved to and why; graph context follows the chosen mode.
    for text in [
        "QX7731",
        "tomato",
        "How do I feed a sourdough starter before baking bread?",
        "eruptions of volcanoes eject lava ash and sulfur dioxide into the atmosphere",
    ] {
        for body in [q(text, json!({})), q(text, json!({"mode": "auto"}))] {
            let body = query_ok(&server, &key, body).await;
            let meta = &body["meta"];
            assert_eq!(meta["mode_requested"], "auto", "{body:#?}");
            assert!(non_empty_str(&meta["mode_reason"]), "{body:#?}");
            let thinking = meta["mode"] == "thinking";
            assert_eq!(
                body["data"].get("graph_context").is_some(),
                thinking,
                "auto overrides graph_context to match its mode: {body:#?}"
            );
            if thinking {
                assert_graph_context(&body["data"]["graph_context"], &body["data"]);
            }
        }
    }

    // Zero results: empty arrays and 200.
    for body in [
        q("xylophone", json!({"query_by": "text"})),
        q(
            "sourdough",
            json!({"query_by": "text", "collection": "empty"}),
        ),
        q(
            "sourdough",
            json!({"collection": "empty", "mode": "thinking"}),
        ),
        q("sourdough", json!({"type": "memory"})),
    ] {
        let body = query_ok(&server, &key, body).await;
        assert_eq!(body["data"]["chunks"], json!([]), "{body:#?}");
        assert_eq!(body["data"]["sources"], json!([]), "{body:#?}");
    }

    // A query clearly about one document ranks it first, whatever the method and mode.
    let question = "How do I feed a sourdough starter before baking bread?";
    for extra in [
        json!({"mode": "fast"}),
        json!({"mode": "thinking"}),
        json!({"mode": "auto"}),
        json!({"query_by": "text"}),
        json!({"query_by": "text", "mode": "thinking"}),
        json!({"alpha": "auto"}),
    ] {
        let body = query_ok(&server, &key, q(question, extra.clone())).await;
        assert_eq!(
            first_item(&body["data"], question),
            "baking",
            "{extra}: {body:#?}"
        );
    }
    let body = query_ok(&server, &key, q("volcanic eruption magma", json!({}))).await;
    assert_eq!(first_item(&body["data"], "volcano"), "volcano", "{body:#?}");
    // Without `alpha` a query gets what `auto` chooses for it, reported in `meta.alpha`; a
    // number is used as given.
    for text in [question, "volcanic eruption magma", "ERR-4411"] {
        let omitted = query_ok(&server, &key, q(text, json!({}))).await;
        let auto = query_ok(&server, &key, q(text, json!({"alpha": "auto"}))).await;
        assert_eq!(
            omitted["meta"]["alpha"], auto["meta"]["alpha"],
            "{text}: {omitted:#?}"
        );
        assert_eq!(omitted["data"]["chunks"], auto["data"]["chunks"], "{text}");
    }
    let given = query_ok(&server, &key, q(question, json!({"alpha": 0.3}))).await;
    assert_eq!(given["meta"]["alpha"], json!(0.3), "{given:#?}");
    // max_results caps hybrid results.
    let body = query_ok(&server, &key, q(question, json!({"max_results": 2}))).await;
    assert_eq!(chunks(&body["data"]).len(), 2, "{body:#?}");

    // alpha 1 (pure semantic) finds a paraphrase that shares no word with the document;
    // alpha 0 (pure keyword) has nothing to score it by.
    let paraphrase = "molten rock bursting from a mountain";
    let corpus = [VOLCANO, BAKING, MANUAL, guide.as_str(), TEA_A, TEA_B, TEA_C];
    for term in ["molten", "rock", "bursting", "mountain"] {
        assert!(
            corpus
                .iter()
                .all(|text| !words(text).contains(&term.to_owned())),
            "the paraphrase must share no word with the corpus: {term}"
        );
    }
    let body = query_ok(
        &server,
        &key,
        q(paraphrase, json!({"alpha": 1, "mode": "fast"})),
    )
    .await;
    assert_eq!(
        first_item(&body["data"], paraphrase),
        "volcano",
        "{body:#?}"
    );
    assert!(
        score_of(&body["data"], "volcano").unwrap() > 0.0,
        "{body:#?}"
    );
    let body = query_ok(
        &server,
        &key,
        q(paraphrase, json!({"alpha": 0, "mode": "fast"})),
    )
    .await;
    for c in chunks(&body["data"]) {
        assert_eq!(
            c["relevancy_score"], 0.0,
            "no chunk shares a word with the query, so pure keyword scores nothing: {body:#?}"
        );
    }

    // alpha 0 finds an exact rare token first, and scores only chunks that contain it.
    for extra in [
        json!({"alpha": 0, "mode": "fast"}),
        json!({"alpha": 0, "mode": "thinking"}),
        json!({"query_by": "text"}),
    ] {
        let body = query_ok(&server, &key, q("QX7731", extra.clone())).await;
        let data = &body["data"];
        assert_eq!(first_item(data, "QX7731"), "manual", "{extra}: {body:#?}");
        assert!(score_of(data, "manual").unwrap() > 0.0, "{body:#?}");
        if extra["mode"] == "fast" {
            for c in chunks(data).iter().filter(|c| c["id"] != "manual") {
                assert!(
                    c["relevancy_score"].as_f64().unwrap() < 0.05,
                    "{extra}: pure keyword gives nothing to chunks without the token: {body:#?}"
                );
            }
        } else if extra["query_by"] == "text" {
            assert_eq!(item_set(data), set(&["manual"]), "{body:#?}");
        }
    }

    // query_by=text is deterministic: the same request twice gives the same order and
    // scores; and it only returns chunks that match a term.
    for text in ["tomato plants", "green tea", "the sun and the water"] {
        let body = q(text, json!({"query_by": "text"}));
        let first = query_ok(&server, &key, body.clone()).await;
        let second = query_ok(&server, &key, body.clone()).await;
        assert!(!chunks(&first["data"]).is_empty(), "{first:#?}");
        assert_eq!(
            ranking(&first["data"]),
            ranking(&second["data"]),
            "{body}: {first:#?} {second:#?}"
        );
        let terms: Vec<String> = words(text)
            .into_iter()
            .filter(|w| !["the", "and"].contains(&w.as_str()))
            .collect();
        for c in chunks(&first["data"]) {
            let content = words(c["chunk_content"].as_str().unwrap());
            assert!(
                terms.iter().any(|t| content.contains(t)),
                "{text}: a text match shares a term: {first:#?}"
            );
        }
    }

    // Operators with query_by=text: phrase needs the words in order, and needs all of them,
    // or needs any.
    let tea = |operator: &str| {
        q(
            "green tea",
            json!({"query_by": "text", "operator": operator}),
        )
    };
    let body = query_ok(&server, &key, tea("phrase")).await;
    assert_eq!(item_set(&body["data"]), set(&["tea-a"]), "{body:#?}");
    for c in chunks(&body["data"]) {
        assert!(
            has_phrase(c["chunk_content"].as_str().unwrap(), &["green", "tea"]),
            "{body:#?}"
        );
    }
    let body = query_ok(&server, &key, tea("and")).await;
    assert_eq!(
        item_set(&body["data"]),
        set(&["tea-a", "tea-b"]),
        "{body:#?}"
    );
    for c in chunks(&body["data"]) {
        let content = words(c["chunk_content"].as_str().unwrap());
        assert!(
            content.contains(&"green".to_owned()) && content.contains(&"tea".to_owned()),
            "{body:#?}"
        );
    }
    let body = query_ok(&server, &key, tea("or")).await;
    assert_eq!(
        item_set(&body["data"]),
        set(&["tea-a", "tea-b", "tea-c"]),
        "{body:#?}"
    );
    let body = query_ok(&server, &key, q("green tea", json!({"query_by": "text"}))).await;
    assert_eq!(
        item_set(&body["data"]),
        set(&["tea-a", "tea-b", "tea-c"]),
        "operator defaults to or: {body:#?}"
    );
    // A phrase in the wrong order matches nothing; hybrid honours the phrase as well.
    let body = query_ok(
        &server,
        &key,
        q(
            "tea green",
            json!({"query_by": "text", "operator": "phrase"}),
        ),
    )
    .await;
    assert_eq!(body["data"]["chunks"], json!([]), "{body:#?}");
    let body = query_ok(
        &server,
        &key,
        q("green tea", json!({"operator": "phrase", "mode": "fast"})),
    )
    .await;
    assert_eq!(item_set(&body["data"]), set(&["tea-a"]), "{body:#?}");
    let body = query_ok(
        &server,
        &key,
        q("green tea", json!({"operator": "and", "mode": "thinking"})),
    )
    .await;
    assert_eq!(
        item_set(&body["data"]),
        set(&["tea-a", "tea-b"]),
        "{body:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Metadata filters, before ranking
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn metadata_filters_apply_before_ranking_and_report_ignored_keys() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    server
        .ready_database_with_schema(
            &key,
            "filt",
            json!([
                {"name": "team", "enable_match": true},
                {"name": "priority", "data_type": "INT32", "enable_match": true},
                {"name": "lang"}
            ]),
        )
        .await;
    // f1 is by far the best match for the query; the others only share its topic loosely.
    let item = |id: &str, text: &str, team: &str, priority: i64, region: &str| {
        json!({
            "id": id, "title": id, "type": "page", "content": {"text": text},
            "metadata": {"team": team, "priority": priority, "lang": "en"},
            "additional_metadata": {"region": region, "tier": priority % 2},
        })
    };
    let items = [
        item(
            "f1",
            "Quarterly report on customer onboarding: onboarding time fell by half this quarter.",
            "alpha",
            1,
            "eu",
        ),
        item(
            "f2",
            "Quarterly report on customer onboarding for enterprise accounts.",
            "alpha",
            2,
            "us",
        ),
        item(
            "f3",
            "Notes from the onboarding workshop with the support team.",
            "beta",
            3,
            "eu",
        ),
        item(
            "f4",
            "The cafeteria menu changes every Monday; soup is served daily.",
            "gamma",
            4,
            "us",
        ),
    ];
    ingest_apps(&server, &key, "filt", None, &items).await;
    wait_completed(&server, &key, "filt", None, &["f1", "f2", "f3", "f4"]).await;
    let everything = set(&["f1", "f2", "f3", "f4"]);
    let question = "quarterly customer onboarding report";

    // (filters, expected items, ignored keys)
    let cases: Vec<(Value, BTreeSet<String>, Vec<&str>)> = vec![
        (json!({}), everything.clone(), vec![]),
        (json!({"team": "alpha"}), set(&["f1", "f2"]), vec![]),
        (
            json!({"team": ["beta", "gamma"]}),
            set(&["f3", "f4"]),
            vec![],
        ),
        (json!({"team": ["gamma"]}), set(&["f4"]), vec![]),
        (json!({"priority": 2}), set(&["f2"]), vec![]),
        (json!({"priority": [1, 3]}), set(&["f1", "f3"]), vec![]),
        (
            json!({"team": "alpha", "priority": 2}),
            set(&["f2"]),
            vec![],
        ),
        (json!({"team": "alpha", "priority": 3}), set(&[]), vec![]),
        (json!({"team": "nobody"}), set(&[]), vec![]),
        (
            json!({"additional_metadata": {"region": "eu"}}),
            set(&["f1", "f3"]),
            vec![],
        ),
        (
            json!({"document_metadata": {"region": "us"}}),
            set(&["f2", "f4"]),
            vec![],
        ),
        (
            json!({"additional_metadata": {"region": ["eu", "us"], "tier": 0}}),
            set(&["f2", "f4"]),
            vec![],
        ),
        (
            json!({"team": "alpha", "additional_metadata": {"region": "us"}}),
            set(&["f2"]),
            vec![],
        ),
        // Declared without enable_match, or not declared: ignored and reported.
        (json!({"lang": "fr"}), everything.clone(), vec!["lang"]),
        (json!({"region": "eu"}), everything.clone(), vec!["region"]),
        (
            json!({"team": "beta", "nope": 1, "lang": "fr"}),
            set(&["f3"]),
            vec!["lang", "nope"],
        ),
    ];
    for (filters, expected, ignored) in &cases {
        for extra in [
            json!({"mode": "fast"}),
            json!({"mode": "thinking"}),
            json!({"query_by": "text", "operator": "or"}),
        ] {
            let mut body = json!({"database": "filt", "query": question, "max_results": 20,
                                  "metadata_filters": filters});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            let reply = query_ok(&server, &key, body).await;
            let found = item_set(&reply["data"]);
            if extra["query_by"] == "text" {
                // Text matches need a shared term: f4 shares none.
                let expected: BTreeSet<String> =
                    expected.iter().filter(|i| *i != "f4").cloned().collect();
                assert_eq!(found, expected, "{filters} {extra}: {reply:#?}");
            } else {
                assert_eq!(&found, expected, "{filters} {extra}: {reply:#?}");
            }
            let mut reported: Vec<String> = reply["meta"]["ignored_filter_keys"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_str().unwrap().to_owned())
                .collect();
            reported.sort();
            assert_eq!(reported, *ignored, "{filters}: {reply:#?}");
        }
    }

    // The free-form filters' legacy name works on the current route and is reported.
    let body = |free: &str| {
        json!({"database": "filt", "query": question, "mode": "fast",
               "metadata_filters": {free: {"region": "us"}}})
    };
    query(&server, &key, body("document_metadata"))
        .await
        .assert_deprecations(&[(
            "metadata_filters.document_metadata",
            "metadata_filters.additional_metadata",
        )]);
    query(&server, &key, body("additional_metadata"))
        .await
        .assert_deprecations(&[]);

    // Filters narrow before ranking: with one result allowed, the filtered item is returned
    // even though unfiltered ones outrank it.
    for filters in [
        json!({"team": "gamma"}),
        json!({"additional_metadata": {"tier": 0, "region": "us"}, "priority": 4}),
    ] {
        let body = json!({"database": "filt", "query": question, "max_results": 1,
                          "mode": "fast", "metadata_filters": filters});
        let reply = query_ok(&server, &key, body).await;
        assert_eq!(chunk_items(&reply["data"]), ["f4"], "{filters}: {reply:#?}");
    }
    let unfiltered = query_ok(
        &server,
        &key,
        json!({"database": "filt", "query": question, "max_results": 1, "mode": "fast"}),
    )
    .await;
    assert_ne!(chunk_items(&unfiltered["data"]), ["f4"], "{unfiltered:#?}");

    // Chunks and sources carry the item's metadata.
    let reply = query_ok(
        &server,
        &key,
        json!({"database": "filt", "query": question, "metadata_filters": {"priority": 2}}),
    )
    .await;
    let chunk = &chunks(&reply["data"])[0];
    assert_eq!(chunk["metadata"]["team"], "alpha", "{reply:#?}");
    assert_eq!(chunk["metadata"]["priority"], 2, "{reply:#?}");
    assert_eq!(chunk["additional_metadata"]["region"], "us", "{reply:#?}");
    let source = &reply["data"]["sources"][0];
    assert_eq!(source["metadata"]["team"], "alpha", "{reply:#?}");
    assert_eq!(source["additional_metadata"]["region"], "us", "{reply:#?}");

    // Legacy full_recall: the same filters, ignored keys in the body, metadata renamed.
    let body = legacy_ok(
        &server,
        "/recall/full_recall",
        &key,
        json!({"tenant_id": "filt", "query": question, "max_results": 20,
               "metadata_filters": {"team": "alpha", "lang": "fr"}}),
    )
    .await;
    assert_eq!(item_set(&body), set(&["f1", "f2"]), "{body:#?}");
    assert_eq!(body["ignored_filter_keys"], json!(["lang"]), "{body:#?}");
    for c in chunks(&body) {
        assert_eq!(c["tenant_metadata"]["team"], "alpha", "{body:#?}");
        assert!(c["document_metadata"]["region"].is_string(), "{body:#?}");
    }
    let body = legacy_ok(
        &server,
        "/recall/full_recall",
        &key,
        json!({"tenant_id": "filt", "query": question, "max_results": 20,
               "metadata_filters": {"document_metadata": {"region": "eu"}}}),
    )
    .await;
    assert_eq!(item_set(&body), set(&["f1", "f3"]), "{body:#?}");
    assert_eq!(body["ignored_filter_keys"], json!([]), "{body:#?}");
}

// ---------------------------------------------------------------------------------------------
// 5. Isolation: organizations, databases, collections, kinds
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn queries_never_leave_their_organization_database_and_collections() {
    let server = Server::start();
    let acme = server.key(ORG, &[]);
    let globex = server.key("globex", &[]);
    for db in ["iso_a", "iso_b"] {
        server.ready_database(&acme, db).await;
    }
    server.ready_database(&globex, "iso_g").await;
    let note = "The office coffee machine is descaled every Friday by the facilities team.";
    let same = "Identical note: the staging cluster restarts at midnight for maintenance.";
    ingest_apps(&server, &acme, "iso_a", None, &[app("a-1", "Coffee", note)]).await;
    ingest_apps(&server, &acme, "iso_b", None, &[app("b-1", "Coffee", note)]).await;
    ingest_apps(
        &server,
        &globex,
        "iso_g",
        None,
        &[app("g-1", "Coffee", note)],
    )
    .await;
    ingest_apps(
        &server,
        &acme,
        "iso_a",
        Some("c1"),
        &[app("one", "Staging", same)],
    )
    .await;
    ingest_apps(
        &server,
        &acme,
        "iso_a",
        Some("c2"),
        &[app("two", "Staging", same)],
    )
    .await;
    ingest_apps(
        &server,
        &acme,
        "iso_a",
        Some("c3"),
        &[app("three", "Coffee", note)],
    )
    .await;
    // Memories of two users and knowledge in the first user's collection.
    ingest_memories(
        &server,
        &acme,
        "iso_a",
        "user_ann",
        json!([{"id": "m-ann", "text": "Ann prefers a window seat on long flights."}]),
    )
    .await
    .current_ok(202);
    ingest_memories(
        &server,
        &acme,
        "iso_a",
        "user_bob",
        json!([{"id": "m-bob", "text": "Bob prefers a window seat on long flights."}]),
    )
    .await
    .current_ok(202);
    ingest_apps(
        &server,
        &acme,
        "iso_a",
        Some("user_ann"),
        &[app(
            "k-ann",
            "Travel policy",
            "Travel policy: a window seat may be booked for flights longer than six hours.",
        )],
    )
    .await;
    wait_completed(&server, &acme, "iso_a", None, &["a-1"]).await;
    wait_completed(&server, &acme, "iso_b", None, &["b-1"]).await;
    wait_completed(&server, &globex, "iso_g", None, &["g-1"]).await;
    for (collection, id) in [
        ("c1", "one"),
        ("c2", "two"),
        ("c3", "three"),
        ("user_ann", "m-ann"),
        ("user_ann", "k-ann"),
        ("user_bob", "m-bob"),
    ] {
        wait_completed(&server, &acme, "iso_a", Some(collection), &[id]).await;
    }

    let coffee = "who descales the office coffee machine";
    let hybrid_and_text = [
        json!({"mode": "fast"}),
        json!({"mode": "thinking"}),
        json!({"query_by": "text"}),
    ];
    let with = |body: Value, extra: &Value| {
        let mut body = body;
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };

    // Organizations and databases.
    let mut uuids: Vec<BTreeSet<String>> = Vec::new();
    for (key, db, own) in [
        (&acme, "iso_a", "a-1"),
        (&acme, "iso_b", "b-1"),
        (&globex, "iso_g", "g-1"),
    ] {
        let mut seen = BTreeSet::new();
        for extra in &hybrid_and_text {
            for kind in ["knowledge", "all"] {
                let body = with(
                    json!({"database": db, "query": coffee, "type": kind, "max_results": 100}),
                    extra,
                );
                let reply = query_ok(&server, key, body).await;
                assert_eq!(item_set(&reply["data"]), set(&[own]), "{db}: {reply:#?}");
                assert_eq!(reply["meta"]["database"], db, "{reply:#?}");
                seen.extend(ranking(&reply["data"]).into_iter().map(|r| r.0));
            }
        }
        uuids.push(seen);
    }
    assert!(uuids[0].is_disjoint(&uuids[1]) && uuids[0].is_disjoint(&uuids[2]));
    assert!(uuids[1].is_disjoint(&uuids[2]));
    // The other organization's key cannot even find the database.
    query(
        &server,
        &globex,
        json!({"database": "iso_a", "query": coffee}),
    )
    .await
    .assert_current_error(404, "DATABASE_NOT_FOUND");
    legacy(
        &server,
        "/recall/full_recall",
        &globex,
        json!({"tenant_id": "iso_a", "query": coffee}),
    )
    .await
    .assert_legacy_error(404, "TENANT_NOT_FOUND");
    let body = legacy_ok(
        &server,
        "/recall/full_recall",
        &globex,
        json!({"tenant_id": "iso_g", "query": coffee}),
    )
    .await;
    assert_eq!(item_set(&body), set(&["g-1"]), "{body:#?}");

    // Collections: one named collection only; several; the default one when none is named.
    let staging = "when does the staging cluster restart";
    for extra in &hybrid_and_text {
        let q = |scope: Value| {
            with(
                with(
                    json!({"database": "iso_a", "query": staging, "max_results": 100}),
                    &scope,
                ),
                extra,
            )
        };
        let check = |reply: &Value, expected: &[&str], collections: &[&str]| {
            assert_eq!(
                item_set(&reply["data"]),
                set(expected),
                "{extra}: {reply:#?}"
            );
            for c in chunks(&reply["data"]) {
                assert!(
                    collections.contains(&c["collection"].as_str().unwrap()),
                    "{extra}: {reply:#?}"
                );
            }
        };
        let reply = query_ok(&server, &acme, q(json!({"collection": "c1"}))).await;
        check(&reply, &["one"], &["c1"]);
        let reply = query_ok(&server, &acme, q(json!({"collections": ["c2"]}))).await;
        check(&reply, &["two"], &["c2"]);
        let reply = query_ok(&server, &acme, q(json!({"collections": ["c1", "c2"]}))).await;
        check(&reply, &["one", "two"], &["c1", "c2"]);
        // Equal weights: identical text scores the same in both.
        let (one, two) = (
            score_of(&reply["data"], "one").unwrap(),
            score_of(&reply["data"], "two").unwrap(),
        );
        assert!((one - two).abs() < 1e-4, "{extra}: {reply:#?}");
        let reply = query_ok(
            &server,
            &acme,
            q(json!({"collections": {"c1": 2, "c2": 2}})),
        )
        .await;
        check(&reply, &["one", "two"], &["c1", "c2"]);
        // No collection: the default collection (named after the database) only.
        let reply = query_ok(&server, &acme, q(json!({}))).await;
        for c in chunks(&reply["data"]) {
            assert_eq!(c["collection"], "iso_a", "{extra}: {reply:#?}");
        }
        assert!(
            !item_set(&reply["data"]).contains("one") && !item_set(&reply["data"]).contains("two"),
            "{reply:#?}"
        );
        // A collection holding other text: its own items only.
        let reply = query_ok(&server, &acme, q(json!({"collections": ["c3"]}))).await;
        for c in chunks(&reply["data"]) {
            assert_eq!(c["id"], "three", "{extra}: {reply:#?}");
        }
        // Weighted: the lighter collection's identical chunk ranks below, at about a tenth.
        for (weights, heavy, light) in [
            (json!({"c1": 1, "c2": 0.1}), "one", "two"),
            (json!({"c1": 0.1, "c2": 1}), "two", "one"),
            (json!({"c1": 5, "c2": 0.5}), "one", "two"),
        ] {
            let reply = query_ok(&server, &acme, q(json!({ "collections": weights }))).await;
            check(&reply, &["one", "two"], &["c1", "c2"]);
            let data = &reply["data"];
            assert_eq!(chunk_items(data), [heavy, light], "{weights}: {reply:#?}");
            let ratio = score_of(data, light).unwrap() / score_of(data, heavy).unwrap();
            assert!(
                (0.08..=0.12).contains(&ratio),
                "{weights} {extra}: ratio {ratio}: {reply:#?}"
            );
        }
    }

    // Memories live in per-user collections and are returned for type memory or all only.
    let seat = "window seat on long flights";
    let q = |collection: &str, kind: &str, extra: &Value| {
        with(
            json!({"database": "iso_a", "collection": collection, "query": seat,
                   "type": kind, "max_results": 100}),
            extra,
        )
    };
    for extra in &hybrid_and_text {
        let reply = query_ok(&server, &acme, q("user_ann", "knowledge", extra)).await;
        assert_eq!(item_set(&reply["data"]), set(&["k-ann"]), "{reply:#?}");
        let reply = query_ok(&server, &acme, q("user_ann", "memory", extra)).await;
        assert_eq!(item_set(&reply["data"]), set(&["m-ann"]), "{reply:#?}");
        assert_eq!(reply["meta"]["source_type"], "memory", "{reply:#?}");
        let reply = query_ok(&server, &acme, q("user_ann", "all", extra)).await;
        assert_eq!(
            item_set(&reply["data"]),
            set(&["m-ann", "k-ann"]),
            "{reply:#?}"
        );
        let reply = query_ok(&server, &acme, q("user_bob", "all", extra)).await;
        assert_eq!(item_set(&reply["data"]), set(&["m-bob"]), "{reply:#?}");
        // Without the user's collection no memory is reachable.
        let body = with(
            json!({"database": "iso_a", "query": seat, "type": "memory"}),
            extra,
        );
        let reply = query_ok(&server, &acme, body).await;
        assert_eq!(reply["data"]["chunks"], json!([]), "{reply:#?}");
    }
    // Legacy: recall_preferences reads memories, full_recall knowledge.
    let body = legacy_ok(
        &server,
        "/recall/recall_preferences",
        &acme,
        json!({"tenant_id": "iso_a", "sub_tenant_id": "user_ann", "query": seat}),
    )
    .await;
    assert_eq!(item_set(&body), set(&["m-ann"]), "{body:#?}");
    let body = legacy_ok(
        &server,
        "/recall/full_recall",
        &acme,
        json!({"tenant_id": "iso_a", "sub_tenant_id": "user_ann", "query": seat}),
    )
    .await;
    assert_eq!(item_set(&body), set(&["k-ann"]), "{body:#?}");
    let body = legacy_ok(
        &server,
        "/recall/boolean_recall",
        &acme,
        json!({"tenant_id": "iso_a", "sub_tenant_id": "user_bob", "query": seat,
               "search_mode": "memories"}),
    )
    .await;
    assert_eq!(item_set(&body), set(&["m-bob"]), "{body:#?}");
}

// ---------------------------------------------------------------------------------------------
// 6. Deletion, upserts and expiry
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn deleted_replaced_and_expired_content_is_never_returned() {
    let server = Server::start_with(&[("ENGRAM_PIPELINE__EXPIRY_SWEEP_MS", "300")]);
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "life").await;
    let pump = "The aquarium pump hums loudly at night and keeps the fish tank water moving.";
    let filter = "The aquarium filter sponge is rinsed in tank water every second week.";
    let garage = "The parking garage closes at ten in the evening on weekdays.";
    ingest_apps(
        &server,
        &key,
        "life",
        None,
        &[
            app("pump", "Pump", pump),
            app("filter", "Filter", filter),
            app("garage", "Garage", garage),
        ],
    )
    .await;
    wait_completed(&server, &key, "life", None, &["pump", "filter", "garage"]).await;
    let aquarium = "aquarium pump tank water";
    let variants = [
        json!({"mode": "fast"}),
        json!({"mode": "thinking"}),
        json!({"query_by": "text"}),
    ];
    let q = |text: &str, extra: &Value| {
        let mut body = json!({"database": "life", "query": text, "max_results": 100});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    for extra in &variants {
        let reply = query_ok(&server, &key, q(aquarium, extra)).await;
        assert_eq!(first_item(&reply["data"], aquarium), "pump", "{reply:#?}");
    }

    // Deleted: gone from every query at once, and stays gone.
    let reply = server
        .call(
            Method::DELETE,
            "/context",
            Some(&key),
            Some(json!({"database": "life", "ids": ["pump"], "type": "knowledge"})),
        )
        .await;
    assert_eq!(reply.current_ok(200)["deleted_count"], 1, "{reply:#?}");
    let check_deleted = || async {
        for extra in &variants {
            let reply = query_ok(&server, &key, q(aquarium, extra)).await;
            let found = item_set(&reply["data"]);
            assert!(!found.contains("pump"), "{reply:#?}");
            assert!(found.contains("filter"), "{reply:#?}");
            for c in chunks(&reply["data"]) {
                assert!(!c["chunk_content"].as_str().unwrap().contains("hums"));
            }
        }
        let body = legacy_ok(
            &server,
            "/recall/boolean_recall",
            &key,
            json!({"tenant_id": "life", "query": "pump"}),
        )
        .await;
        assert_eq!(body["chunks"], json!([]), "{body:#?}");
    };
    check_deleted().await;
    holds_for(Duration::from_secs(1), check_deleted).await;

    // Upserted: the old text is never returned once the new version is indexed.
    let rooftop = "The rooftop garden opens at dawn and the beehives sit by the east wall.";
    ingest_apps(
        &server,
        &key,
        "life",
        None,
        &[app("garage", "Rooftop", rooftop)],
    )
    .await;
    wait_completed(&server, &key, "life", None, &["garage"]).await;
    let check_upserted = || async {
        for extra in &variants {
            let reply = query_ok(&server, &key, q("parking garage closes evening", extra)).await;
            for c in chunks(&reply["data"]) {
                let content = c["chunk_content"].as_str().unwrap();
                assert!(!content.contains("parking"), "stale chunk: {reply:#?}");
            }
            let reply = query_ok(&server, &key, q("rooftop garden beehives", extra)).await;
            let data = &reply["data"];
            assert_eq!(first_item(data, "rooftop"), "garage", "{reply:#?}");
            let garage_chunks: Vec<&Value> = chunks(data)
                .iter()
                .filter(|c| c["id"] == "garage")
                .collect();
            assert_eq!(garage_chunks.len(), 1, "one chunk, the new one: {reply:#?}");
            assert_eq!(garage_chunks[0]["chunk_content"], rooftop, "{reply:#?}");
            assert_eq!(garage_chunks[0]["source_title"], "Rooftop", "{reply:#?}");
        }
    };
    check_upserted().await;
    holds_for(Duration::from_secs(1), check_upserted).await;

    // Expired: a memory with a short time to live disappears from queries; its neighbour
    // (same request) stays.
    let ttl_secs = 8;
    ingest_memories(
        &server,
        &key,
        "life",
        "user_t",
        json!([
            {"id": "keep", "text": "The loading dock door code is changed every month."},
            {"id": "ttl", "text": "Temporary loading dock door code 7788 for the delivery.",
             "expiry_time": ttl_secs}
        ]),
    )
    .await
    .current_ok(202);
    let dock = |extra: &Value| {
        let mut body = q("loading dock door code", extra);
        body["type"] = json!("memory");
        body["collection"] = json!("user_t");
        body
    };
    // Found while it lives: checked with a clock the test moves, in engram-app's
    // `an_expiring_memory_is_found_while_it_lives_and_never_after` (here the wall clock races
    // indexing). From outside: once expired, it is gone from every query shape.
    wait_completed(&server, &key, "life", Some("user_t"), &["keep"]).await;
    eventually(WAIT, "the expired memory leaves query results", || {
        let server = &server;
        let key = &key;
        async move {
            let reply = query_ok(server, key, dock(&json!({"query_by": "text"}))).await;
            let found = item_set(&reply["data"]);
            assert!(found.contains("keep"), "{reply:#?}");
            (!found.contains("ttl")).then_some(())
        }
    })
    .await;
    holds_for(Duration::from_secs(1), || async {
        for extra in &variants {
            let reply = query_ok(&server, &key, dock(extra)).await;
            let found = item_set(&reply["data"]);
            assert!(!found.contains("ttl"), "{reply:#?}");
            assert!(found.contains("keep"), "{reply:#?}");
        }
        let mut all = dock(&json!({}));
        all["type"] = json!("all");
        let reply = query_ok(&server, &key, all).await;
        assert!(!item_set(&reply["data"]).contains("ttl"), "{reply:#?}");
        let body = legacy_ok(
            &server,
            "/recall/recall_preferences",
            &key,
            json!({"tenant_id": "life", "sub_tenant_id": "user_t", "query": "door code 7788"}),
        )
        .await;
        assert!(!item_set(&body).contains("ttl"), "{body:#?}");
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// 7. Legacy recall routes
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn legacy_recall_routes_answer_in_the_legacy_shape() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "leg").await;
    let guide = tomato_guide();
    let mut items = vec![
        app("volcano", "Volcanoes", VOLCANO),
        app("baking", "Sourdough", BAKING),
        app("garden", "Tomato growing guide", &guide),
        app("tea-a", "Morning tea", TEA_A),
        app("tea-b", "Steaming", TEA_B),
        app("tea-c", "Breakfast", TEA_C),
    ];
    items[1]["additional_metadata"] = json!({"kitchen": "home"});
    ingest_apps(&server, &key, "leg", None, &items).await;
    ingest_memories(
        &server,
        &key,
        "leg",
        "user_z",
        json!([
            {"id": "m-tea", "text": "Zoe drinks green tea every afternoon."},
            {"id": "m-bike", "text": "Zoe cycles to work when it is not raining."}
        ]),
    )
    .await
    .current_ok(202);
    wait_completed(
        &server,
        &key,
        "leg",
        None,
        &["volcano", "baking", "garden", "tea-a", "tea-b", "tea-c"],
    )
    .await;
    wait_completed(&server, &key, "leg", Some("user_z"), &["m-tea", "m-bike"]).await;

    // full_recall: knowledge, ranked, legacy names, graph context only when asked.
    let question = "How do I feed a sourdough starter before baking bread?";
    for mode in [json!(null), json!("fast"), json!("thinking")] {
        let mut body = json!({"tenant_id": "leg", "query": question});
        if !mode.is_null() {
            body["mode"] = mode.clone();
        }
        let reply = legacy_ok(&server, "/recall/full_recall", &key, body).await;
        assert_eq!(first_item(&reply, question), "baking", "{mode}: {reply:#?}");
        let first = &chunks(&reply)[0];
        assert_eq!(first["source_title"], "Sourdough", "{reply:#?}");
        assert_eq!(first["source_type"], "page", "{reply:#?}");
        assert_eq!(first["chunk_content"], BAKING, "{reply:#?}");
        assert_eq!(first["document_metadata"]["kitchen"], "home", "{reply:#?}");
        assert!(first.get("id").is_none(), "{reply:#?}");
        assert!(reply["graph_context"].is_null(), "{reply:#?}");
        assert_eq!(reply["sources"][0]["id"], "baking", "{reply:#?}");
        assert_eq!(reply["sources"][0]["title"], "Sourdough", "{reply:#?}");
        assert_eq!(
            reply["sources"][0]["document_metadata"]["kitchen"], "home",
            "{reply:#?}"
        );
        for id in item_set(&reply) {
            assert!(
                !id.starts_with("m-"),
                "memories are not knowledge: {reply:#?}"
            );
        }
    }
    let reply = legacy_ok(
        &server,
        "/recall/full_recall",
        &key,
        json!({"tenant_id": "leg", "query": question, "graph_context": true}),
    )
    .await;
    assert_graph_context(&reply["graph_context"], &reply);
    // Two chunks of one source: one source entry.
    let reply = legacy_ok(
        &server,
        "/recall/full_recall",
        &key,
        json!({"tenant_id": "leg", "query": "tomato plants", "max_results": 20}),
    )
    .await;
    assert!(
        chunk_items(&reply)
            .iter()
            .filter(|i| *i == "garden")
            .count()
            >= 2,
        "{reply:#?}"
    );
    assert_eq!(
        reply["sources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["id"] == "garden")
            .count(),
        1,
        "{reply:#?}"
    );
    let reply = legacy_ok(
        &server,
        "/recall/full_recall",
        &key,
        json!({"tenant_id": "leg", "query": "tomato plants", "max_results": 2}),
    )
    .await;
    assert_eq!(chunks(&reply).len(), 2, "{reply:#?}");
    // alpha and recency_bias are accepted.
    let reply = legacy_ok(
        &server,
        "/recall/full_recall",
        &key,
        json!({"tenant_id": "leg", "query": "QX7731 volcanic lava", "alpha": 0,
               "recency_bias": 0.5}),
    )
    .await;
    assert_eq!(first_item(&reply, "lava"), "volcano", "{reply:#?}");

    // recall_preferences: the user's memories only.
    let reply = legacy_ok(
        &server,
        "/recall/recall_preferences",
        &key,
        json!({"tenant_id": "leg", "sub_tenant_id": "user_z", "query": "what does Zoe drink"}),
    )
    .await;
    assert_eq!(item_set(&reply), set(&["m-tea", "m-bike"]), "{reply:#?}");
    assert_eq!(first_item(&reply, "drink"), "m-tea", "{reply:#?}");
    let reply = legacy_ok(
        &server,
        "/recall/recall_preferences",
        &key,
        json!({"tenant_id": "leg", "query": "what does Zoe drink"}),
    )
    .await;
    assert_eq!(
        reply["chunks"],
        json!([]),
        "no user collection, no memories: {reply:#?}"
    );

    // boolean_recall: deterministic BM25 with or / and / phrase over sources or memories.
    for (operator, expected) in [
        (None, vec!["tea-a", "tea-b", "tea-c"]),
        (Some("or"), vec!["tea-a", "tea-b", "tea-c"]),
        (Some("and"), vec!["tea-a", "tea-b"]),
        (Some("phrase"), vec!["tea-a"]),
    ] {
        for mode in [None, Some("sources")] {
            let mut body = json!({"tenant_id": "leg", "query": "green tea"});
            if let Some(operator) = operator {
                body["operator"] = json!(operator);
            }
            if let Some(mode) = mode {
                body["search_mode"] = json!(mode);
            }
            let first = legacy_ok(&server, "/recall/boolean_recall", &key, body.clone()).await;
            let second = legacy_ok(&server, "/recall/boolean_recall", &key, body.clone()).await;
            assert_eq!(item_set(&first), set(&expected), "{body}: {first:#?}");
            assert_eq!(ranking(&first), ranking(&second), "deterministic: {body}");
            if operator == Some("phrase") {
                for c in chunks(&first) {
                    assert!(has_phrase(
                        c["chunk_content"].as_str().unwrap(),
                        &["green", "tea"]
                    ));
                }
            }
        }
    }
    for operator in ["or", "and", "phrase"] {
        let body = json!({"tenant_id": "leg", "sub_tenant_id": "user_z", "query": "green tea",
                          "operator": operator, "search_mode": "memories"});
        let reply = legacy_ok(&server, "/recall/boolean_recall", &key, body.clone()).await;
        assert_eq!(item_set(&reply), set(&["m-tea"]), "{body}: {reply:#?}");
    }
    let reply = legacy_ok(
        &server,
        "/recall/boolean_recall",
        &key,
        json!({"tenant_id": "leg", "query": "tea green", "operator": "phrase"}),
    )
    .await;
    assert_eq!(reply["chunks"], json!([]), "{reply:#?}");
    let reply = legacy_ok(
        &server,
        "/recall/boolean_recall",
        &key,
        json!({"tenant_id": "leg", "query": "tomato", "max_results": 2}),
    )
    .await;
    assert_eq!(chunks(&reply).len(), 2, "{reply:#?}");
    assert_eq!(item_set(&reply), set(&["garden"]), "{reply:#?}");
}

/// A memory that continues a conversation (same user, collection and title) is indexed with
/// the memory before it, so an answer is found through its question; what is returned is the
/// memory's own text, and nothing links across users or titles.
#[tokio::test]
async fn a_conversation_turn_is_found_through_the_turn_before_it() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "chat").await;
    let question = "What is the name of your new puppy?";
    let answer = "Biscuit, she is a golden retriever.";
    let storm = "Thunderstorms are forecast for the whole weekend.";
    let colour = "My favourite colour is blue.";
    ingest_memories(
        &server,
        &key,
        "chat",
        "home",
        json!([
            {"id": "q", "title": "chat-1", "user_name": "dana", "text": question},
            {"id": "storm", "title": "chat-1", "user_name": "eve", "text": storm},
            {"id": "a", "title": "chat-1", "user_name": "dana", "text": answer},
            {"id": "colour", "title": "chat-2", "user_name": "dana", "text": colour},
        ]),
    )
    .await
    .current_ok(202);
    wait_completed(
        &server,
        &key,
        "chat",
        Some("home"),
        &["q", "storm", "a", "colour"],
    )
    .await;
    let q = |text: &str| {
        json!({"database": "chat", "collection": "home", "type": "memory",
               "query_by": "text", "query": text, "max_results": 10})
    };

    // The answer never says "puppy": its question does.
    let reply = query_ok(&server, &key, q("puppy name")).await;
    assert_eq!(item_set(&reply["data"]), set(&["q", "a"]), "{reply:#?}");
    for chunk in chunks(&reply["data"]) {
        let content = chunk["chunk_content"].as_str().unwrap_or_default();
        assert!(
            content == question || content == answer,
            "a chunk returns its memory's own text, never its context: {reply:#?}"
        );
    }
    // Semantic queries see it too.
    let reply = query_ok(
        &server,
        &key,
        json!({"database": "chat", "collection": "home", "type": "memory", "mode": "fast",
               "query": "what is the puppy called", "max_results": 2}),
    )
    .await;
    assert!(item_set(&reply["data"]).contains("a"), "{reply:#?}");

    // Another user's turn (eve's, between dana's two) and another title are no context.
    let reply = query_ok(&server, &key, q("thunderstorms weekend")).await;
    assert_eq!(item_set(&reply["data"]), set(&["storm"]), "{reply:#?}");
    let reply = query_ok(&server, &key, q("favourite colour")).await;
    assert_eq!(item_set(&reply["data"]), set(&["colour"]), "{reply:#?}");
}

/// Chinese, Japanese, Korean and Thai text is found by keyword through the words inside its
/// sentences (written without spaces), by any query, phrase or not, and across a line wrapped
/// inside a word (`数\n据`); before, a whole sentence was one term, found only by the same
/// sentence. Vocalized Arabic is found by its plain spelling.
#[tokio::test]
async fn unspaced_scripts_and_vocalized_arabic_are_found_by_their_words() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    server.ready_database(&key, "cjk").await;
    ingest_apps(
        &server,
        &key,
        "cjk",
        None,
        &[
            app(
                "zh",
                "机器学习",
                "机器学习是人工智能的一个分支，它使计算机能够从数\n据中学习而无需明确编程。",
            ),
            app(
                "ja",
                "天気",
                "東京都の明日の天気は晴れのち曇り、最高気温は十八度の予想です。",
            ),
            app(
                "ko",
                "회의",
                "다음 주 월요일 서울에서 프로젝트 회의가 열립니다.",
            ),
            app("th", "จัดส่ง", "ไม่มีปัญหาเรื่องการจัดส่งสินค้าในเดือนนี้"),
            app("ar", "درس", "كَتَبَ الوَلَدُ الدَّرْسَ فِي المَدْرَسَةِ"),
        ],
    )
    .await;
    wait_completed(&server, &key, "cjk", None, &["zh", "ja", "ko", "th", "ar"]).await;
    let keyword = |query: &str, operator: &str| {
        json!({"database": "cjk", "query": query, "query_by": "text",
               "operator": operator, "max_results": 5})
    };
    for (query, operator, expected) in [
        ("人工智能", "or", "zh"),
        ("计算机 数据", "and", "zh"),
        ("最高気温", "or", "ja"),
        ("東京", "or", "ja"),
        ("天気は晴れ", "phrase", "ja"),
        ("서울", "or", "ko"),
        ("프로젝트 회의", "phrase", "ko"),
        // Thai is written without spaces either; vocalized Arabic is found by the plain
        // spelling.
        ("ปัญหา", "or", "th"),
        ("จัดส่งสินค้า", "phrase", "th"),
        ("الدرس", "or", "ar"),
        ("كتب الولد", "phrase", "ar"),
    ] {
        let body = query_ok(&server, &key, keyword(query, operator)).await;
        assert_eq!(
            item_set(&body["data"]),
            set(&[expected]),
            "{query} ({operator}): {body:#?}"
        );
    }
    // Hybrid queries (the default), fast, thinking or routed by `auto`, rank the document
    // holding the words first, whatever the (English) embedding model makes of the script.
    for (query, expected) in [
        ("人工智能是什么？", "zh"),
        ("東京の天気", "ja"),
        ("서울 회의", "ko"),
        ("ปัญหาการจัดส่ง", "th"),
        ("الدرس في المدرسة", "ar"),
    ] {
        for mode in ["fast", "thinking", "auto"] {
            let body = query_ok(
                &server,
                &key,
                json!({"database": "cjk", "query": query, "mode": mode, "max_results": 5}),
            )
            .await;
            assert_eq!(
                first_item(&body["data"], query),
                expected,
                "{mode}: {body:#?}"
            );
        }
    }
    // A phrase is held to its order.
    let body = query_ok(&server, &key, keyword("学习机器", "phrase")).await;
    assert!(item_set(&body["data"]).is_empty(), "{body:#?}");
}

/// `layout` is a JSON-encoded string holding an object (the official clients parse it so).
fn assert_layout_string(chunk: &Value, context: &str) {
    let layout = chunk["layout"]
        .as_str()
        .unwrap_or_else(|| panic!("chunk.layout is not a string: {context}"));
    let parsed: Value = serde_json::from_str(layout)
        .unwrap_or_else(|e| panic!("chunk.layout {layout:?} is not JSON ({e}): {context}"));
    assert!(parsed.is_object(), "chunk.layout: {context}");
}

/// A raw embedding that is not a non-empty array of finite numbers is 422
/// `INVALID_EMBEDDING_FORMAT` on both raw-embedding routes, and stores nothing; one of the wrong
/// dimension stays `VALIDATION_ERROR`, as the spec's table says.
#[tokio::test]
async fn a_raw_embedding_of_the_wrong_shape_is_invalid_embedding_format() {
    let server = Server::start();
    let key = server.key(ORG, &[]);
    let created = server
        .post(
            "/databases",
            &key,
            json!({"database": "vecs", "is_embeddings_tenant": true, "embeddings_dimension": 3}),
        )
        .await;
    created.current_ok(202);
    server.wait_ready(&key, "vecs").await;
    let insert = |embedding: Value| {
        json!({"tenant_id": "vecs", "embeddings": [
            {"source_id": "s", "embeddings": [{"chunk_id": "c", "embedding": embedding}]}
        ]})
    };
    for bad in [
        json!([]),
        json!("0.1, 0.2, 0.3"),
        json!([0.1, "x", 0.3]),
        json!([[0.1], [0.2], [0.3]]),
        json!([0.1, 1e39, 0.3]),
        json!({"values": [0.1, 0.2, 0.3]}),
    ] {
        legacy(
            &server,
            "/embeddings/insert_raw_embeddings",
            &key,
            insert(bad.clone()),
        )
        .await
        .assert_legacy_error(422, "INVALID_EMBEDDING_FORMAT");
        legacy(
            &server,
            "/embeddings/search_raw_embeddings",
            &key,
            json!({"tenant_id": "vecs", "query_embedding": bad}),
        )
        .await
        .assert_legacy_error(422, "INVALID_EMBEDDING_FORMAT");
    }
    legacy(
        &server,
        "/embeddings/insert_raw_embeddings",
        &key,
        insert(json!([0.1, 0.2])),
    )
    .await
    .assert_legacy_error(422, "VALIDATION_ERROR");
    legacy(
        &server,
        "/embeddings/search_raw_embeddings",
        &key,
        json!({"tenant_id": "vecs"}),
    )
    .await
    .assert_legacy_error(400, "INVALID_PARAMETERS");
    let found = legacy(
        &server,
        "/embeddings/filter_raw_embeddings",
        &key,
        json!({"tenant_id": "vecs", "source_id": "s"}),
    )
    .await;
    assert_eq!(found.status.as_u16(), 200, "{found:#?}");
    assert_eq!(found.body, json!([]), "nothing was stored");
    // A well-formed vector is stored and found.
    let stored = legacy(
        &server,
        "/embeddings/insert_raw_embeddings",
        &key,
        insert(json!([0.1, 0.2, 0.3])),
    )
    .await;
    assert_eq!(stored.status.as_u16(), 200, "{stored:#?}");
    assert_eq!(stored.body["insert_count"], 1, "{stored:#?}");
}

/// A server with the database `kb` holding two short notes (`a`, `b`) and one only `team-a`
/// may read (`c`), and a key of `org`.
async fn two_notes(org: &str) -> (Server, String) {
    let server = Server::start();
    let key = server.key(org, &[]);
    server.ready_database(&key, "kb").await;
    let mut restricted = common::app("c", "Valves", "The valves are checked monthly.");
    restricted["acl"] = json!(["team-a"]);
    crate::webhooks::ingest(
        &server,
        &key,
        "kb",
        &[
            common::app("a", "Pumps", "The coolant pumps are replaced every autumn."),
            common::app("b", "Reactor", "The gamma reactor is cooled by helium gas."),
            restricted,
        ],
    )
    .await;
    common::wait_completed(&server, &key, "kb", None, &["a", "b", "c"]).await;
    (server, key)
}

/// The names in `meta.ignored_parameters`.
fn ignored_names(reply: &common::Reply) -> BTreeSet<String> {
    reply.body["meta"]["ignored_parameters"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|p| p["parameter"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// A parameter that does nothing in some combination says so there, and only there: on
/// `/query` (`meta.ignored_parameters`), on legacy recall (a `Warning`, with the `alpha` and
/// mode that ran in the body), on ingest (the other type's fields), on listings
/// (`include_fields` for memories) and on schemas (keys a field lacks, embedding flags).
#[tokio::test]
async fn inert_parameters_are_reported_in_the_combinations_that_leave_them_inert() {
    let (server, key) = two_notes("org-inert").await;

    let query = |extra: Value| {
        let mut body = json!({"database": "kb", "query": "how is the reactor cooled"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        server.post("/query", &key, body)
    };
    let text_only = json!({"query_by": "text", "alpha": 0.3, "query_apps": true,
                           "graph_vector_prune": true, "mode": "thinking"});
    let reply = query(text_only).await;
    reply.current_ok(200);
    let named = ignored_names(&reply);
    for inert in ["alpha", "query_apps", "graph_vector_prune", "mode"] {
        assert!(named.contains(inert), "{inert} not reported: {reply:#?}");
    }
    // The same fields with hybrid retrieval act, and are not reported.
    let reply = query(
        json!({"alpha": 0.3, "query_apps": true, "graph_vector_prune": true,
                             "mode": "thinking", "query_forceful_relations": false}),
    )
    .await;
    reply.current_ok(200);
    assert_eq!(ignored_names(&reply), BTreeSet::new(), "{reply:#?}");
    // Linked sources are a thinking-mode feature.
    let reply = query(json!({"mode": "fast", "query_forceful_relations": true})).await;
    assert_eq!(
        ignored_names(&reply),
        set(&["query_forceful_relations"]),
        "{reply:#?}"
    );
    // App pools are knowledge's.
    let reply = query(json!({"type": "memory", "query_apps": true})).await;
    assert!(ignored_names(&reply).contains("query_apps"), "{reply:#?}");

    // Legacy recall: a Warning names what was not acted on; the body says the alpha and mode
    // that ran.
    let reply = server
        .post(
            "/recall/boolean_recall",
            &key,
            json!({"tenant_id": "kb", "query": "reactor", "colour": "red"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{reply:#?}");
    assert!(
        reply
            .header("warning")
            .is_some_and(|w| w.contains("colour")),
        "{reply:#?}"
    );
    let reply = server
        .post(
            "/recall/full_recall",
            &key,
            json!({"tenant_id": "kb", "query": "reactor cooling", "alpha": 0.25, "mode": "fast"}),
        )
        .await;
    assert_eq!(reply.status, 200, "{reply:#?}");
    assert_eq!(reply.body["alpha"], 0.25);
    assert_eq!(reply.body["mode"], "fast");
    assert!(reply.header("warning").is_none(), "{reply:#?}");
    let auto = server
        .post(
            "/recall/full_recall",
            &key,
            json!({"tenant_id": "kb", "query": "reactor cooling"}),
        )
        .await;
    assert!(auto.body["alpha"].as_f64().is_some(), "{auto:#?}");

    // Ingest: the other type's fields are named, and what they would have made is not made.
    let form = Form::new()
        .text("type", "memory")
        .text("database", "kb")
        .text("collection", "u1")
        .text(
            "memories",
            json!([{"id": "m1", "text": "Prefers tea."}]).to_string(),
        )
        .text(
            "app_knowledge",
            json!([common::app("stray", "Stray", "Not ingested.")]).to_string(),
        );
    let reply = common::send_form(&server, "/context/ingest", &key, form).await;
    reply.current_ok(202);
    assert!(
        ignored_names(&reply).contains("app_knowledge"),
        "{reply:#?}"
    );
    assert_eq!(
        reply.body["data"]["success_count"], 1,
        "only the memory: {reply:#?}"
    );
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "kb")
        .text(
            "app_knowledge",
            json!([common::app("c", "C", "Valves are checked monthly.")]).to_string(),
        )
        .text(
            "memories",
            json!([{"id": "m2", "text": "Prefers coffee."}]).to_string(),
        );
    let reply = common::send_form(&server, "/context/ingest", &key, form).await;
    reply.current_ok(202);
    assert_eq!(ignored_names(&reply), set(&["memories"]), "{reply:#?}");

    // Listing memories: include_fields selects the fields of sources only.
    let reply = server
        .post(
            "/context/list",
            &key,
            json!({"database": "kb", "collection": "u1", "type": "memory",
                   "include_fields": ["title"]}),
        )
        .await;
    reply.current_ok(200);
    assert_eq!(
        ignored_names(&reply),
        set(&["include_fields"]),
        "{reply:#?}"
    );

    // Schemas: a key a field lacks, and the embedding flags, which are stored, not acted on.
    let reply = server
        .post(
            "/databases",
            &key,
            json!({"database": "typed", "database_metadata_schema": [
                {"name": "team", "data_type": "VARCHAR", "enable_match": true,
                 "enable_dense_embedding": true, "type": "VARCHAR"}]}),
        )
        .await;
    reply.current_ok(202);
    assert_eq!(
        ignored_names(&reply),
        set(&[
            "database_metadata_schema[0].enable_dense_embedding",
            "database_metadata_schema[0].type"
        ]),
        "{reply:#?}"
    );
}

/// `$ref`s resolved against the document.
pub(crate) fn resolved<'a>(doc: &'a Value, schema: &'a Value) -> &'a Value {
    match schema["$ref"].as_str() {
        Some(reference) => {
            let name = reference.rsplit('/').next().unwrap();
            resolved(doc, &doc["components"]["schemas"][name])
        }
        None => schema,
    }
}

/// The server's OpenAPI document.
pub(crate) async fn openapi(server: &Server) -> Value {
    server
        .client
        .get(server.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Every property of an object schema (through `allOf` and `$ref`), with its schema.
pub(crate) fn properties(doc: &Value, schema: &Value) -> Vec<(String, Value)> {
    let schema = resolved(doc, schema);
    let mut found: Vec<(String, Value)> = schema["allOf"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|part| properties(doc, part))
        .collect();
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        found.push((name.clone(), property.clone()));
    }
    found
}

/// Values a client could send for a property: each variant of an enum or of a `oneOf`, both
/// booleans, two numbers, a string, a one-string list, a one-key object.
pub(crate) fn samples(doc: &Value, schema: &Value) -> Vec<Value> {
    let schema = resolved(doc, schema);
    if let Some(values) = schema["enum"].as_array() {
        return values.clone();
    }
    if let Some(variants) = schema["oneOf"].as_array().or(schema["anyOf"].as_array()) {
        return variants.iter().flat_map(|v| samples(doc, v)).collect();
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(all) => all.iter().filter_map(Value::as_str).collect(),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::Object(_) => vec!["string"],
    };
    types
        .into_iter()
        .flat_map(|t| match t {
            "boolean" => vec![json!(true), json!(false)],
            "integer" => vec![json!(1), json!(3)],
            "number" => vec![json!(0.3), json!(1.0)],
            "string" => vec![json!("x")],
            "array" => vec![json!(["x"])],
            "object" => vec![json!({"x": "y"})],
            _ => vec![],
        })
        .collect()
}

/// Each field of `path`'s JSON body in the OpenAPI document that, sent with each of `bases`
/// (through each of its sample values), changes nothing by `acted`: `field with base`.
async fn silent_fields(
    server: &Server,
    key: &str,
    path: &str,
    bases: &[Value],
    acted: fn(&common::Reply, &common::Reply, &str) -> bool,
) -> Vec<String> {
    let doc = openapi(server).await;
    let body_schema =
        &doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"];
    let fields = properties(&doc, body_schema);
    assert!(fields.len() >= 5, "{path}: {fields:?}");
    let mut silent = Vec::new();
    for base_body in bases {
        let with = |name: &str, value: &Value| {
            let mut body = base_body.clone();
            body[name] = value.clone();
            body
        };
        let base = server.post(path, key, base_body.clone()).await;
        assert_eq!(base.status, 200, "{base:#?}");
        for (name, schema) in &fields {
            let mut any = false;
            for value in samples(&doc, schema) {
                let reply = server.post(path, key, with(name, &value)).await;
                if acted(&base, &reply, name) {
                    any = true;
                    break;
                }
            }
            if !any {
                silent.push(format!("{path}: {name} with {base_body}"));
            }
        }
    }
    silent
}

/// Every field of the JSON bodies of the reading routes in the OpenAPI document (`/query`
/// under several plans: hybrid with `auto` mode, `query_by=text`, `fast` mode; legacy recall;
/// both listings; fetched content; raw-embedding search and filter): sending it either changes
/// what runs (`plan`), the answer (status or data), or it is reported
/// (`meta.ignored_parameters`, the filter keys ignored, a deprecation; a legacy `Warning`). A
/// field added later is covered without touching this test.
#[tokio::test]
async fn every_field_of_the_reading_routes_is_acted_on_or_reported() {
    let (server, key) = two_notes("org-fields").await;
    let query = |extra: Value| {
        let mut body = json!({"database": "kb", "query": "how is the reactor cooled"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let current = |base: &common::Reply, reply: &common::Reply, name: &str| {
        let meta = &reply.body["meta"];
        reply.status != base.status
            || meta["plan"] != base.body["meta"]["plan"]
            || reply.body["data"] != base.body["data"]
            || ignored_names(reply).iter().any(|n| {
                n == name
                    || n.starts_with(&format!("{name}."))
                    || n.starts_with(&format!("{name}["))
            })
            || meta["ignored_filter_keys"]
                .as_array()
                .is_some_and(|k| !k.is_empty())
            || meta["deprecation"]
                .as_array()
                .is_some_and(|d| d.iter().any(|d| d["deprecated_field"] == name))
    };
    let mut silent = silent_fields(
        &server,
        &key,
        "/query",
        &[
            query(json!({})),
            query(json!({"query_by": "text"})),
            query(json!({"mode": "fast"})),
        ],
        current,
    )
    .await;
    let legacy = |base: &common::Reply, reply: &common::Reply, name: &str| {
        reply.status != base.status
            || reply.body != base.body
            || reply.header("warning").is_some_and(|w| w.contains(name))
    };
    let recall = |extra: Value| {
        let mut body = json!({"tenant_id": "kb", "query": "how is the reactor cooled"});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    for path in [
        "/recall/full_recall",
        "/recall/recall_preferences",
        "/recall/boolean_recall",
    ] {
        let bases = [recall(json!({})), recall(json!({"mode": "fast"}))];
        silent.extend(silent_fields(&server, &key, path, &bases, legacy).await);
    }
    // Listings, both generations.
    let bases = [json!({"database": "kb"})];
    silent.extend(silent_fields(&server, &key, "/context/list", &bases, current).await);
    let bases = [json!({"tenant_id": "kb"})];
    silent.extend(silent_fields(&server, &key, "/list/data", &bases, legacy).await);
    // Fetched content (as text: a link is new at every call) and raw embeddings.
    let bases = [json!({"tenant_id": "kb", "source_id": "a", "mode": "content"})];
    silent.extend(silent_fields(&server, &key, "/fetch/content", &bases, legacy).await);
    server
        .post(
            "/databases",
            &key,
            json!({"database": "vecs", "is_embeddings_tenant": true, "embeddings_dimension": 2}),
        )
        .await
        .current_ok(202);
    server.wait_ready(&key, "vecs").await;
    let inserted = server
        .post(
            "/embeddings/insert_raw_embeddings",
            &key,
            json!({"tenant_id": "vecs", "embeddings": [
                {"source_id": "s1", "embeddings": [{"chunk_id": "c1", "embedding": [1.0, 0.0]},
                                                   {"chunk_id": "c2", "embedding": [0.0, 1.0]}]},
                {"source_id": "s2", "embeddings": [{"chunk_id": "c3", "embedding": [0.7, 0.7]}]}]}),
        )
        .await;
    assert_eq!(inserted.status, 200, "{inserted:#?}");
    let bases = [json!({"tenant_id": "vecs", "query_embedding": [1.0, 0.0]})];
    silent.extend(
        silent_fields(
            &server,
            &key,
            "/embeddings/search_raw_embeddings",
            &bases,
            legacy,
        )
        .await,
    );
    let bases = [json!({"tenant_id": "vecs", "source_id": "s1"})];
    silent.extend(
        silent_fields(
            &server,
            &key,
            "/embeddings/filter_raw_embeddings",
            &bases,
            legacy,
        )
        .await,
    );
    assert!(
        silent.is_empty(),
        "fields that changed nothing and were not reported:\n{}",
        silent.join("\n")
    );
}
