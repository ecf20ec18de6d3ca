//! The knowledge graph from outside: an ingested source passes through `graph_creation` to
//! `completed` and its relations are listed by both generations, a page at a time, within its
//! organization's database only.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use reqwest::multipart::Form;
use serde_json::Value;

use crate::common::{app, send_form, wait_completed, Server};

fn group<'a>(relations: &'a Value, source: &str, target: &str) -> &'a Value {
    relations
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["source"]["name"] == source && g["target"]["name"] == target)
        .unwrap_or_else(|| panic!("no {source} -> {target} in {relations:#}"))
}

#[tokio::test]
async fn a_sources_relations_are_listed_by_both_generations_within_its_organization() {
    let server = Server::start();
    let key = server.key("org_graph", &["kg"]);
    server.ready_database(&key, "kg").await;
    let text = "Ana Ruiz works for Acme Corp. The Payments Service is owned by Acme Corp.";
    let items = Value::from(vec![app("doc", "Payments", text)]);
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "kg")
        .text("app_knowledge", items.to_string());
    send_form(&server, "/context/ingest", &key, form)
        .await
        .current_ok(202);
    wait_completed(&server, &key, "kg", None, &["doc"]).await;

    let reply = server
        .get("/context/relations?database=kg&id=doc", &key)
        .await;
    let data = reply.current_ok(200);
    assert_eq!(data["is_truncated"], false, "{reply:#?}");
    assert!(data["next_cursor"].is_null());
    let works = group(&data["relations"], "ana ruiz", "acme corp");
    let evidence = &works["relations"][0];
    assert_eq!(evidence["canonical_predicate"], "WORKS_FOR");
    assert_eq!(evidence["raw_predicate"], "works for");
    assert_eq!(evidence["context"], "Ana Ruiz works for Acme Corp.");
    assert!(evidence["timestamp"].as_str().unwrap().ends_with('Z'));
    assert!(evidence["relationship_id"]
        .as_str()
        .unwrap()
        .starts_with("rel_"));
    assert_eq!(evidence["chunk_id"], works["chunk_id"]);
    assert_eq!(evidence["source_entity_id"], works["source"]["entity_id"]);
    assert!(works["source"]["identifier"].is_null());
    assert_eq!(works["target"]["type"], "ORGANIZATION");
    let owned = group(&data["relations"], "payments service", "acme corp");
    assert_eq!(owned["relations"][0]["canonical_predicate"], "OWNED_BY");
    assert_eq!(owned["target"]["entity_id"], works["target"]["entity_id"]);

    // A page at a time.
    let first = server
        .get("/context/relations?database=kg&id=doc&limit=1", &key)
        .await;
    let first = first.current_ok(200);
    assert_eq!(first["is_truncated"], true);
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    let second = server
        .get(
            &format!("/context/relations?database=kg&id=doc&limit=1&cursor={cursor}"),
            &key,
        )
        .await;
    let second = second.current_ok(200);
    assert_eq!(second["is_truncated"], false);
    assert_ne!(
        first["relations"][0]["relations"][0]["relationship_id"],
        second["relations"][0]["relations"][0]["relationship_id"]
    );

    // The legacy route: the same groups, epoch-second timestamps.
    let legacy = server
        .get(
            "/list/graph_relations_by_id?source_id=doc&tenant_id=kg",
            &key,
        )
        .await;
    assert_eq!(legacy.status, 200, "{legacy:#?}");
    assert_eq!(legacy.body["success"], true);
    let works = group(&legacy.body["relations"], "ana ruiz", "acme corp");
    assert!(works["relations"][0]["timestamp"].is_f64());

    // Bad requests and what is not there.
    for (path, status, code) in [
        ("/context/relations?database=kg", 400, "INVALID_PARAMETERS"),
        (
            "/context/relations?database=kg&id=doc&limit=0",
            400,
            "INVALID_PARAMETERS",
        ),
        (
            "/context/relations?database=kg&id=doc&limit=10001",
            400,
            "INVALID_PARAMETERS",
        ),
        (
            "/context/relations?database=kg&id=doc&cursor=x",
            400,
            "INVALID_PARAMETERS",
        ),
        (
            "/context/relations?database=kg&id=nope",
            404,
            "SOURCE_NOT_FOUND",
        ),
        (
            "/context/relations?database=kg&id=doc&type=memory",
            404,
            "SOURCE_NOT_FOUND",
        ),
    ] {
        server
            .get(path, &key)
            .await
            .assert_current_error(status, code);
    }
    for (path, status, code) in [
        (
            "/list/graph_relations_by_id?source_id=nope&tenant_id=kg",
            404,
            "SOURCE_NOT_FOUND",
        ),
        (
            "/list/graph_relations_by_id?tenant_id=kg",
            400,
            "INVALID_PARAMETERS",
        ),
        (
            "/list/graph_relations_by_id?source_id=doc",
            400,
            "INVALID_PARAMETERS",
        ),
        (
            "/list/graph_relations_by_id?source_id=doc&tenant_id=kg&limit=0",
            400,
            "INVALID_PARAMETERS",
        ),
    ] {
        server
            .get(path, &key)
            .await
            .assert_legacy_error(status, code);
    }

    // A query's graph context: the path from the entity it names to the chunk it returns,
    // and the relations evidenced in that chunk.
    let reply = server
        .post(
            "/query",
            &key,
            serde_json::json!({"database": "kg", "query": "Where does Ana Ruiz work?", "mode": "fast"}),
        )
        .await;
    let data = reply.current_ok(200);
    let chunk = data["chunks"][0]["chunk_uuid"].clone();
    let graph = &data["graph_context"];
    let path = graph["query_paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["triplets"][0]["relation"]["canonical_predicate"] == "WORKS_FOR")
        .unwrap_or_else(|| panic!("no WORKS_FOR path: {graph:#}"));
    let triplet = &path["triplets"][0];
    assert_eq!(triplet["source"]["name"], "ana ruiz");
    assert_eq!(triplet["target"]["name"], "acme corp");
    assert!(
        triplet["relation"]["timestamp"].is_f64(),
        "epoch seconds in /query"
    );
    assert_eq!(path["source_chunk_ids"], serde_json::json!([chunk]));
    assert!(path["relevancy_score"].as_f64().unwrap() > 0.0);
    let group = path["group_id"].as_str().unwrap();
    assert!(group.starts_with("p_"));
    let groups = graph["chunk_id_to_group_ids"][chunk.as_str().unwrap()]
        .as_array()
        .unwrap();
    assert!(groups.iter().any(|g| g == group));
    assert!(groups.iter().any(|g| g == "c_0"), "{graph:#}");
    let evidenced = &graph["chunk_relations"][0];
    assert_eq!(evidenced["group_id"], "c_0");
    assert_eq!(evidenced["triplets"].as_array().unwrap().len(), 2);
    let off = server
        .post(
            "/query",
            &key,
            serde_json::json!({"database": "kg", "query": "Ana Ruiz", "mode": "fast", "graph_context": false}),
        )
        .await;
    assert!(off.current_ok(200).get("graph_context").is_none());

    // Another organization, naming the same database, finds nothing.
    let stranger = server.key("org_graph_other", &["kg"]);
    server
        .get("/context/relations?database=kg&id=doc", &stranger)
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");
}
