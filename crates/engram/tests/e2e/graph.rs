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

#[tokio::test]
async fn a_knowledge_question_reaches_its_second_hop_through_the_entity_its_first_hop_names() {
    // The question names the Bubye River; its answer is in a chunk that names the country the
    // river's chunk names (Zimbabwe), not the river. Other waterfalls match the question's
    // words better.
    let mut server = Server::start();
    let key = server.key("org_hops", &["hops"]);
    server.ready_database(&key, "hops").await;
    let items = Value::from(vec![
        app(
            "bubye",
            "Bubye River",
            "The Bubye River is a tributary of the Limpopo River. It rises in the south of \
             Zimbabwe and flows through Beitbridge District.",
        ),
        app(
            "victoria",
            "Victoria Falls",
            "Victoria Falls is a waterfall on the Zambezi River, on the border between Zambia \
             and Zimbabwe.",
        ),
        app(
            "angel",
            "Angel Falls",
            "Angel Falls is the highest waterfall found in the country of Venezuela, on a river \
             of the Canaima park.",
        ),
        app(
            "tugela",
            "Tugela Falls",
            "Tugela Falls is a waterfall found in the country of South Africa, where the Tugela \
             river falls from the Drakensberg.",
        ),
        app(
            "kaieteur",
            "Kaieteur Falls",
            "Kaieteur Falls is a waterfall found on the Potaro River in the country of Guyana.",
        ),
        app(
            "gullfoss",
            "Gullfoss",
            "Gullfoss is a waterfall found in the canyon of the Hvita river in the country of \
             Iceland.",
        ),
        app(
            "niagara",
            "Niagara Falls",
            "Niagara Falls is a group of three waterfalls found on the Niagara River in the \
             country of Canada and in the United States.",
        ),
    ]);
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "hops")
        .text("app_knowledge", items.to_string());
    send_form(&server, "/context/ingest", &key, form)
        .await
        .current_ok(202);
    let ids = [
        "bubye", "victoria", "angel", "tugela", "kaieteur", "gullfoss", "niagara",
    ];
    wait_completed(&server, &key, "hops", None, &ids).await;

    // Knowledge questions are ranked with the graph lane by default.
    let with_lane = second_hop_ranking(&server, &key).await;
    assert_eq!(
        &with_lane[..2],
        ["bubye", "victoria"],
        "the bridge lifts the second hop above the other waterfalls: {with_lane:?}"
    );
    // Without it, waterfalls that match the words better rank first.
    server.restart_with(&[("ENGRAM_GRAPH__RANK", "false")]);
    let without = second_hop_ranking(&server, &key).await;
    let position = |name: &str| without.iter().position(|s| s == name).unwrap_or(usize::MAX);
    assert!(
        ["angel", "tugela", "kaieteur", "gullfoss", "niagara"]
            .iter()
            .any(|other| position(other) < position("victoria")),
        "{without:?}"
    );
}

/// The sources of the first five chunks for the two-hop question, best first.
async fn second_hop_ranking(server: &Server, key: &str) -> Vec<String> {
    let question =
        "What is the name of the waterfall in the country where the Bubye River is found?";
    let body = serde_json::json!({"database": "hops", "query": question, "mode": "fast",
                                  "max_results": 5, "graph_context": false});
    let reply = server.post("/query", key, body).await;
    reply.current_ok(200)["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn listed(server: &Server, key: &str) -> Value {
    server
        .get("/context/relations?database=byog&id=rep", key)
        .await
        .current_ok(200)["relations"]
        .clone()
}

fn ingest_form(items: &Value, graph: Option<&Value>) -> Form {
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "byog")
        .text("app_knowledge", items.to_string());
    match graph {
        Some(graph) => form.text("graph_payload", graph.to_string()),
        None => form,
    }
}

#[tokio::test]
async fn a_clients_own_graph_replaces_extraction_and_survives_reingestion() {
    let server = Server::start();
    let key = server.key("org_byog", &["byog"]);
    server.ready_database(&key, "byog").await;
    let text = "Quarterly report.\n\nMira Okafor leads the Atlas Project since March 2024.";
    let items = Value::from(vec![app("rep", "Report", text)]);
    let graph = serde_json::json!({"rep": {
        "entities": {
            "mira": {"name": "Mira Okafor", "type": "person", "identifier": "mira@corp.example"},
            "atlas": {"name": "Atlas Project", "type": "PROJECT"},
            "lonely": {"name": "Nobody Uses Me"}
        },
        "relations": [
            {"source": "mira", "target": "atlas", "predicate": "leads",
             "context": "Mira Okafor leads the Atlas Project", "temporal_details": "since March 2024"},
            {"source": "mira", "target": "ghost", "predicate": "haunts"}
        ]
    }});
    let reply = send_form(
        &server,
        "/context/ingest",
        &key,
        ingest_form(&items, Some(&graph)),
    )
    .await;
    let result = &reply.current_ok(202)["results"][0];
    assert_eq!(result["relations_created"], 1, "{reply:#?}");
    let error = result["relations_error"].as_str().unwrap();
    assert!(error.contains("`ghost` names no entity"), "{error}");
    wait_completed(&server, &key, "byog", None, &["rep"]).await;

    let relations = listed(&server, &key).await;
    assert_eq!(relations.as_array().unwrap().len(), 1, "{relations:#}");
    let leads = group(&relations, "mira okafor", "atlas project");
    let evidence = &leads["relations"][0];
    assert_eq!(evidence["canonical_predicate"], "LEADS");
    assert_eq!(evidence["origin"], "byog");
    assert_eq!(evidence["temporal_details"], "since March 2024");
    assert_eq!(evidence["confidence"], 1.0);
    assert_eq!(leads["source"]["type"], "PERSON");
    assert_eq!(leads["source"]["identifier"], "mira@corp.example");

    // A re-ingestion without a payload keeps the client's graph; a new payload replaces it.
    send_form(&server, "/context/ingest", &key, ingest_form(&items, None))
        .await
        .current_ok(202);
    wait_completed(&server, &key, "byog", None, &["rep"]).await;
    let relations = listed(&server, &key).await;
    assert_eq!(relations.as_array().unwrap().len(), 1, "{relations:#}");
    assert_eq!(
        group(&relations, "mira okafor", "atlas project")["relations"][0]["origin"],
        "byog"
    );
    let replaced = serde_json::json!({"rep": {
        "entities": {"a": {"name": "Atlas Project"}, "q": {"name": "Quarterly report"}},
        "relations": [{"source": "a", "target": "q", "predicate": "is described in"}]
    }});
    send_form(
        &server,
        "/context/ingest",
        &key,
        ingest_form(&items, Some(&replaced)),
    )
    .await
    .current_ok(202);
    wait_completed(&server, &key, "byog", None, &["rep"]).await;
    let relations = listed(&server, &key).await;
    assert_eq!(relations.as_array().unwrap().len(), 1, "{relations:#}");
    let described = group(&relations, "atlas project", "quarterly report");
    assert_eq!(
        described["relations"][0]["canonical_predicate"],
        "DESCRIBED_IN"
    );

    // `null` drops the client's graph: the source is extracted again.
    let dropped = serde_json::json!({"rep": null});
    send_form(
        &server,
        "/context/ingest",
        &key,
        ingest_form(&items, Some(&dropped)),
    )
    .await
    .current_ok(202);
    wait_completed(&server, &key, "byog", None, &["rep"]).await;
    let relations = listed(&server, &key).await;
    assert!(
        relations
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["relations"][0].get("origin").is_none()),
        "extracted again: {relations:#}"
    );
    assert!(
        group(&relations, "mira okafor", "atlas project")["relations"][0]["canonical_predicate"]
            .as_str()
            .is_some()
    );

    // A payload naming no source of the request, or over a limit, refuses the request.
    let stray = serde_json::json!({"other": {"entities": {}, "relations": []}});
    send_form(
        &server,
        "/context/ingest",
        &key,
        ingest_form(&items, Some(&stray)),
    )
    .await
    .assert_current_error(400, "INVALID_PARAMETERS");
    let entities: serde_json::Map<String, Value> = (0..5001)
        .map(|i| {
            (
                format!("e{i}"),
                serde_json::json!({"name": format!("n{i}")}),
            )
        })
        .collect();
    let big = serde_json::json!({"rep": {"entities": entities, "relations": []}});
    send_form(
        &server,
        "/context/ingest",
        &key,
        ingest_form(&items, Some(&big)),
    )
    .await
    .assert_current_error(400, "INVALID_PARAMETERS");
    send_form(
        &server,
        "/context/ingest",
        &key,
        ingest_form(&items, Some(&Value::from("x"))),
    )
    .await
    .assert_current_error(400, "INVALID_PARAMETERS");
}

/// Sources linked at ingestion (`relations.ids`): their chunks beside thinking-mode results
/// (both generations), and the subgraph of a source, within its database and collection.
#[tokio::test]
async fn linked_sources_come_with_thinking_results_and_make_a_subgraph() {
    let server = Server::start();
    let key = server.key("org_links", &["links"]);
    server.ready_database(&key, "links").await;
    let linked = |id: &str, text: &str, to: &[&str]| {
        let mut item = app(id, &format!("Title {id}"), text);
        item["relations"] = serde_json::json!({ "ids": to });
        item
    };
    let items = Value::from(vec![
        linked(
            "runbook",
            "The zebra failover runbook: drain traffic first.",
            &["postmortem"],
        ),
        linked(
            "postmortem",
            "Incident review of the outage in the billing cluster.",
            &["metrics"],
        ),
        linked("metrics", "Latency dashboards and alert thresholds.", &[]),
        linked("index", "Team handbook index page.", &["runbook"]),
        linked("stray", "Unrelated notes about gardening.", &["nowhere"]),
    ]);
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "links")
        .text("app_knowledge", items.to_string());
    send_form(&server, "/context/ingest", &key, form)
        .await
        .current_ok(202);
    let ids = ["runbook", "postmortem", "metrics", "index", "stray"];
    wait_completed(&server, &key, "links", None, &ids).await;
    // The same id in another collection, with links of its own: not the runbook's links.
    let twin = Value::from(vec![linked(
        "runbook",
        "Another team's runbook.",
        &["stray"],
    )]);
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "links")
        .text("collection", "elsewhere")
        .text("app_knowledge", twin.to_string());
    send_form(&server, "/context/ingest", &key, form)
        .await
        .current_ok(202);
    wait_completed(&server, &key, "links", Some("elsewhere"), &["runbook"]).await;

    let ask = |extra: Value| {
        let mut body = serde_json::json!({"database": "links", "query": "zebra failover runbook", "max_results": 1});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let reply = server
        .post("/query", &key, ask(serde_json::json!({"mode": "thinking"})))
        .await;
    let data = reply.current_ok(200);
    assert_eq!(data["chunks"][0]["id"], "runbook", "{data:#}");
    let extra = data["chunks"][0]["extra_context_ids"].as_array().unwrap();
    assert_eq!(
        extra.len(),
        2,
        "the linked postmortem and the index linking it: {data:#}"
    );
    let mut linked_ids: Vec<&str> = extra
        .iter()
        .map(|id| {
            data["additional_context"][id.as_str().unwrap()]["id"]
                .as_str()
                .unwrap()
        })
        .collect();
    linked_ids.sort_unstable();
    assert_eq!(linked_ids, ["index", "postmortem"]);
    let declared = data["forceful_relations"]["declared"].as_array().unwrap();
    let via = |id: &str| {
        &declared
            .iter()
            .find(|d| d["chunk"]["id"] == id)
            .unwrap_or_else(|| panic!("{id} not declared: {declared:#?}"))["via"]
    };
    assert_eq!(
        via("postmortem"),
        &serde_json::json!({"from": "runbook", "to": "postmortem"})
    );
    assert_eq!(
        via("index"),
        &serde_json::json!({"from": "index", "to": "runbook"})
    );
    assert_eq!(
        data["forceful_relations"]["inferred"],
        serde_json::json!([])
    );

    // Fast mode, or thinking with query_forceful_relations false, leaves them out.
    for extra in [
        serde_json::json!({"mode": "fast"}),
        serde_json::json!({"mode": "thinking", "query_forceful_relations": false}),
    ] {
        let reply = server.post("/query", &key, ask(extra)).await;
        let data = reply.current_ok(200);
        assert_eq!(
            data["chunks"][0]["extra_context_ids"],
            serde_json::json!([])
        );
        assert_eq!(
            data["forceful_relations"]["declared"],
            serde_json::json!([])
        );
        assert!(reply.body["meta"]["ignored_parameters"]
            .to_string()
            .find("query_forceful_relations")
            .is_none());
    }

    // graph_vector_prune: the graph-widened pool ranked by vector similarity alone, so the
    // order is the purely semantic one (alpha 1) over this small database.
    let ids_of = |data: &Value| -> Vec<String> {
        data["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let question = "which page shows latency alerts?";
    let pruned = server
        .post(
            "/query",
            &key,
            serde_json::json!({"database": "links", "query": question, "mode": "fast",
                               "max_results": 5, "graph_vector_prune": true}),
        )
        .await;
    let pruned_data = pruned.current_ok(200);
    assert!(
        !pruned.body["meta"]["ignored_parameters"]
            .to_string()
            .contains("graph_vector_prune"),
        "{pruned:#?}"
    );
    let semantic = server
        .post(
            "/query",
            &key,
            serde_json::json!({"database": "links", "query": question, "mode": "fast",
                               "max_results": 5, "alpha": 1.0}),
        )
        .await;
    assert_eq!(ids_of(pruned_data), ids_of(semantic.current_ok(200)));
    assert_eq!(ids_of(pruned_data)[0], "metrics");

    // The legacy route, thinking mode: the same chunks in additional_context.
    let legacy = server
        .post(
            "/recall/full_recall",
            &key,
            serde_json::json!({"tenant_id": "links", "query": "zebra failover runbook", "max_results": 1, "mode": "thinking"}),
        )
        .await;
    assert_eq!(legacy.status, 200, "{legacy:#?}");
    let extra = legacy.body["chunks"][0]["extra_context_ids"]
        .as_array()
        .unwrap();
    assert_eq!(extra.len(), 2, "{legacy:#?}");
    assert!(legacy.body["additional_context"][extra[0].as_str().unwrap()].is_object());

    // The subgraph of the runbook: one hop reaches the postmortem and the index (truncated:
    // the metrics page is two hops away); two hops reach it; the path form says the same.
    let one = server
        .get("/context/subgraph?database=links&id=runbook&depth=1", &key)
        .await;
    let one = one.current_ok(200);
    let members = |g: &Value| -> Vec<(String, u64)> {
        g["sources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["source_id"].as_str().unwrap().to_owned(),
                    s["depth"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let mut got = members(one);
    got.sort();
    assert_eq!(
        got,
        [
            ("index".into(), 1),
            ("postmortem".into(), 1),
            ("runbook".into(), 0)
        ]
    );
    assert_eq!(one["seed_source_id"], "runbook");
    assert_eq!(one["sources"][0]["source_id"], "runbook");
    assert_eq!(one["is_truncated"], true);
    assert_eq!(one["max_depth_reached"], 1);
    assert_eq!(one["relations"].as_array().unwrap().len(), 2, "{one:#}");
    let link = one["relations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["target"]["entity_id"] == "postmortem")
        .unwrap();
    assert_eq!(link["source"]["entity_id"], "runbook");
    assert_eq!(link["source"]["name"], "Title runbook");
    assert_eq!(link["relations"][0]["canonical_predicate"], "RELATES_TO");
    let postmortem = one["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["source_id"] == "postmortem")
        .unwrap();
    assert_eq!(postmortem["discovered_via"], "runbook");
    assert_eq!(postmortem["discovered_relation"], "relates_to");
    assert!(one["auxiliary_relations"].is_array());

    let two = server
        .get("/context/runbook/subgraph?database=links", &key)
        .await;
    let two = two.current_ok(200);
    assert_eq!(members(two).len(), 4, "{two:#}");
    assert_eq!(two["is_truncated"], false);
    assert_eq!(two["max_depth_reached"], 2);
    let capped = server
        .get(
            "/context/subgraph?database=links&id=runbook&max_sources=2",
            &key,
        )
        .await;
    let capped = capped.current_ok(200);
    assert_eq!(members(capped).len(), 2);
    assert_eq!(capped["is_truncated"], true);

    // An unknown id is an empty subgraph; bad bounds are refused; another organization sees
    // nothing.
    let empty = server
        .get("/context/subgraph?database=links&id=nope", &key)
        .await;
    let empty = empty.current_ok(200);
    assert_eq!(empty["sources"], serde_json::json!([]));
    for path in [
        "/context/subgraph?database=links",
        "/context/subgraph?database=links&id=runbook&depth=0",
        "/context/subgraph?database=links&id=runbook&depth=6",
        "/context/subgraph?database=links&id=runbook&max_sources=501",
    ] {
        server
            .get(path, &key)
            .await
            .assert_current_error(400, "INVALID_PARAMETERS");
    }
    let stranger = server.key("org_links_other", &["links"]);
    server
        .get("/context/subgraph?database=links&id=runbook", &stranger)
        .await
        .assert_current_error(404, "DATABASE_NOT_FOUND");

    // A malformed `relations` refuses the request.
    let bad = Value::from(vec![
        serde_json::json!({"id": "b", "content": {"text": "x"}, "relations": {"ids": "runbook"}}),
    ]);
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "links")
        .text("app_knowledge", bad.to_string());
    send_form(&server, "/context/ingest", &key, form)
        .await
        .assert_current_error(422, "VALIDATION_ERROR");
}

async fn ingest_memories(server: &Server, key: &str, memories: Value) {
    let form = Form::new()
        .text("type", "memory")
        .text("database", "minds")
        .text("collection", "ana")
        .text("memories", memories.to_string());
    send_form(server, "/context/ingest", key, form)
        .await
        .current_ok(202);
}

async fn inferred(server: &Server, key: &str, id: &str) -> String {
    let reply = server
        .get(
            &format!("/context/inspect?database=minds&collection=ana&id={id}&mode=content"),
            key,
        )
        .await;
    reply.current_ok(200)["inferred_content"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Memory inference: a memory with `infer: true` gets the facts its user states about
/// themselves (inspected, listed, searchable with it), of the kinds its `custom_instructions`
/// keep; a later memory repeats none of the user's current facts; `infer: false` stores the
/// text as given.
#[tokio::test]
async fn inferred_facts_are_listed_searchable_and_not_repeated() {
    let server = Server::start();
    let key = server.key("org_minds", &["minds"]);
    server.ready_database(&key, "minds").await;
    ingest_memories(
        &server,
        &key,
        serde_json::json!([
            {"id": "m1", "user_name": "Ana", "infer": true,
             "text": "I moved to Lisbon in March and I love green tea."},
            {"id": "plain", "user_name": "Ana", "text": "I love jazz."},
            {"id": "focused", "user_name": "Bo", "infer": true,
             "custom_instructions": "Only remember where the user lives.",
             "text": "I moved to Faro and I love black coffee."}
        ]),
    )
    .await;
    wait_completed(
        &server,
        &key,
        "minds",
        Some("ana"),
        &["m1", "plain", "focused"],
    )
    .await;
    assert_eq!(
        inferred(&server, &key, "m1").await,
        "Ana lives in Lisbon. Ana likes green tea."
    );
    assert_eq!(inferred(&server, &key, "plain").await, "");
    // Its custom_instructions keep where the user lives and leave out their tastes.
    assert_eq!(
        inferred(&server, &key, "focused").await,
        "Bo lives in Faro."
    );

    // A later conversation: the assistant's words are not the user's, a fact the user already
    // has is not repeated, a new one is.
    ingest_memories(
        &server,
        &key,
        serde_json::json!([{"id": "m2", "user_name": "Ana", "infer": true,
            "user_assistant_pairs": [
                {"user": "I love green tea. I live in Porto now.", "assistant": "I prefer coffee myself."}
            ]}]),
    )
    .await;
    wait_completed(&server, &key, "minds", Some("ana"), &["m2"]).await;
    assert_eq!(inferred(&server, &key, "m2").await, "Ana lives in Porto.");

    let listed = server
        .post(
            "/context/list",
            &key,
            serde_json::json!({"database": "minds", "collection": "ana", "type": "memory"}),
        )
        .await;
    let memories = listed.current_ok(200)["user_memories"]
        .as_array()
        .unwrap()
        .clone();
    let m2 = memories.iter().find(|m| m["memory_id"] == "m2").unwrap();
    assert_eq!(m2["inferred_content"], "Ana lives in Porto.");

    // The inferred statements are searchable with their memory.
    let reply = server
        .post(
            "/query",
            &key,
            serde_json::json!({"database": "minds", "collection": "ana", "type": "memory",
                               "query": "Ana lives in Porto", "mode": "fast", "max_results": 3}),
        )
        .await;
    let data = reply.current_ok(200);
    let hit = data["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["chunk_content"] == "Ana lives in Porto.")
        .unwrap_or_else(|| panic!("no inferred chunk: {data:#}"));
    assert_eq!(hit["id"], "m2");
}

/// What the scripted model reads in a memory: facts a rule could not (behaviour, another
/// language, the third person), and one it makes up (Paris), which the text does not hold.
fn facts_for(said: &str) -> Value {
    let facts = if said.contains("dark mode") {
        serde_json::json!([{"kind": "preference", "about": "dark mode", "value": "likes"},
                           {"kind": "lives_in", "about": "", "value": "Paris"}])
    } else if said.contains("wohnt") {
        serde_json::json!([{"kind": "lives_in", "about": "", "value": "Porto"}])
    } else if said.contains("moved to Lisbon") || said.contains("lives in Lisbon") {
        serde_json::json!([{"kind": "lives_in", "about": "", "value": "Lisbon"},
                           {"kind": "works_for", "about": "", "value": "Northwind Labs"}])
    } else if said.contains("thé vert") {
        serde_json::json!([{"kind": "preference", "about": "thé vert", "value": "likes"}])
    } else {
        serde_json::json!([])
    };
    serde_json::json!({ "facts": facts })
}

/// A scripted OpenAI-compatible endpoint: entities, then relations, memories' facts, and the
/// requests it saw.
async fn model_endpoint() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    use axum::extract::State;
    type Seen = std::sync::Arc<std::sync::Mutex<Vec<Value>>>;
    async fn complete(State(seen): State<Seen>, body: axum::Json<Value>) -> axum::Json<Value> {
        let body = body.0;
        seen.lock().unwrap().push(body.clone());
        let said = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        let content = match body["response_format"]["json_schema"]["name"].as_str() {
            Some("facts") => facts_for(&said),
            Some("entities") => serde_json::json!({"entities": [
                {"name": "Iris Okoye", "type": "PERSON", "identifier": null},
                {"name": "Teo Brandt", "type": "PERSON", "identifier": null}
            ]}),
            _ => serde_json::json!({"relations": [
                {"source": "Iris Okoye", "target": "Teo Brandt", "predicate": "mentors",
                 "context": "Iris Okoye has been guiding Teo Brandt", "temporal_details": null}
            ]}),
        };
        axum::Json(serde_json::json!({"choices": [{"message": {"content": content.to_string()}}]}))
    }
    let seen: Seen = Seen::default();
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(complete))
        .with_state(seen.clone());
    (format!("{}/v1", crate::common::serve(app).await), seen)
}

/// With `[llm]` set, the model reads each item for its graph: relations no rule would find.
#[tokio::test]
async fn a_configured_model_extracts_the_graph() {
    let (url, seen) = model_endpoint().await;
    let server = Server::start_with(&[
        ("ENGRAM_LLM__BASE_URL", url.as_str()),
        ("ENGRAM_LLM__MODEL", "tiny-graph"),
        ("ENGRAM_LLM__API_KEY", "sk-e2e-secret"),
        ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
    ]);
    let key = server.key("org_llm", &["llm"]);
    server.ready_database(&key, "llm").await;
    let items = Value::from(vec![app(
        "note",
        "Team note",
        "Iris Okoye has been guiding Teo Brandt through his first quarter.",
    )]);
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "llm")
        .text("app_knowledge", items.to_string());
    send_form(&server, "/context/ingest", &key, form)
        .await
        .current_ok(202);
    wait_completed(&server, &key, "llm", None, &["note"]).await;
    let reply = server
        .get("/context/relations?database=llm&id=note", &key)
        .await;
    let relations = reply.current_ok(200)["relations"].clone();
    let mentors = group(&relations, "iris okoye", "teo brandt");
    assert_eq!(mentors["relations"][0]["canonical_predicate"], "MENTORS");
    assert_eq!(mentors["source"]["type"], "PERSON");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert_eq!(seen[0]["model"], "tiny-graph");
}

/// The LLM extractor against a real model: engram's requests (a JSON schema, a worked example)
/// are served by llama.cpp, and what a 135M-parameter model answers is held to what the text
/// says: every relation listed joins two names the note writes and quotes a sentence of it.
/// Run on SQLite only (the extractor does not depend on the store).
#[tokio::test]
async fn a_real_local_model_extracts_a_graph_held_to_the_text() {
    let Some(model) = crate::common::LocalModel::start_on_sqlite() else {
        return;
    };
    let server = model.engram(&[]);
    let key = server.key("org_local_llm", &["local"]);
    server.ready_database(&key, "local").await;
    let text = "Iris Okoye has been guiding Teo Brandt through his first quarter at Northwind \
                Labs in Lisbon.";
    let items = Value::from(vec![app("note", "Team note", text)]);
    let form = Form::new()
        .text("type", "knowledge")
        .text("database", "local")
        .text("app_knowledge", items.to_string());
    send_form(&server, "/context/ingest", &key, form)
        .await
        .current_ok(202);
    wait_completed(&server, &key, "local", None, &["note"]).await;

    let stats: Value = reqwest::get(format!("{}/stats", model.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stats["failed"], 0, "{stats}");
    assert_eq!(
        stats["json_schema"], 2,
        "entities, then relations, each held to its schema: {stats}"
    );
    assert_eq!(stats["completions"], 2, "{stats}");

    let reply = server
        .get("/context/relations?database=local&id=note", &key)
        .await;
    let relations = reply.current_ok(200)["relations"].clone();
    eprintln!("the model's graph: {relations:#}");
    let groups = relations.as_array().unwrap();
    let lowered = text.to_lowercase();
    let mut from_model = 0;
    for group in groups {
        for end in ["source", "target"] {
            let name = group[end]["name"].as_str().unwrap();
            assert!(
                lowered.contains(name),
                "{name} is not in the note: {group:#}"
            );
        }
        for r in group["relations"].as_array().unwrap() {
            let context = r["context"].as_str().unwrap();
            assert!(text.contains(context.trim()), "{context:?}: {group:#}");
            if (r["confidence"].as_f64().unwrap() - 0.8).abs() < 1e-6 {
                from_model += 1;
            }
        }
    }
    assert!(from_model > 0, "no relation from the model: {relations:#}");
}

/// With `[llm]` set, the model reads memories given with `infer: true`: a preference shown by
/// behaviour, a fact in another language or the third person become statements like the
/// rules' own; what the text does not hold is dropped; a fact the user already has is not
/// repeated, a new one supersedes; the rules still read first-person English beside it.
#[tokio::test]
async fn a_configured_model_infers_what_rules_cannot_held_to_the_text() {
    let (url, seen) = model_endpoint().await;
    let server = Server::start_with(&[
        ("ENGRAM_LLM__BASE_URL", url.as_str()),
        ("ENGRAM_LLM__MODEL", "tiny-facts"),
        ("ENGRAM_LLM__GRAPH", "false"),
        ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
    ]);
    let key = server.key("org_minds_llm", &["minds"]);
    server.ready_database(&key, "minds").await;
    let memory = |id: &str, text: &str| {
        serde_json::json!({"id": id, "user_name": "Ana", "infer": true, "user_assistant_pairs": [
            {"user": text, "assistant": "Noted."}]})
    };
    let cases = [
        (
            "dark",
            "Switched the editor to dark mode again, third time today.",
            "Ana prefers dark mode.",
        ),
        (
            "porto",
            "Ana wohnt seit Mai in Porto.",
            "Ana lives in Porto.",
        ),
        (
            "lisbon",
            "Ana moved to Lisbon last week and started at Northwind Labs. I love green tea.",
            "Ana lives in Lisbon. Ana works for Northwind Labs. Ana likes green tea.",
        ),
        ("again", "As you know, Ana lives in Lisbon.", ""),
        (
            "tea",
            "J'adore le thé vert le matin.",
            "Ana prefers thé vert.",
        ),
    ];
    // One at a time: each reads the facts the ones before it left.
    for (id, text, expected) in cases {
        ingest_memories(&server, &key, serde_json::json!([memory(id, text)])).await;
        wait_completed(&server, &key, "minds", Some("ana"), &[id]).await;
        assert_eq!(inferred(&server, &key, id).await, expected, "{id}: {text}");
    }
    let asked = seen.lock().unwrap().clone();
    assert_eq!(asked.len(), cases.len(), "one call per memory");
    assert_eq!(asked[0]["model"], "tiny-facts");
    assert_eq!(asked[0]["response_format"]["json_schema"]["name"], "facts");
    let last = asked[0]["messages"].as_array().unwrap().last().unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        last.contains("Ana") && !last.contains("Noted."),
        "only the user's words: {last}"
    );
}

/// The same against a real local model: the model reads each memory (its requests, held to
/// the facts schema, served by llama.cpp), and whatever a 135M-parameter model answers (it
/// mostly repeats the worked example), what is kept is held to what the user wrote. What a
/// model reads right is checked with the scripted endpoint above.
#[tokio::test]
async fn a_real_local_model_infers_facts_held_to_the_text() {
    let Some(model) = crate::common::LocalModel::start_on_sqlite() else {
        return;
    };
    let server = model.engram(&[
        ("ENGRAM_LLM__GRAPH", "false"),
        ("ENGRAM_LLM__MAX_OUTPUT_TOKENS", "256"),
    ]);
    let key = server.key("org_minds_local", &["minds"]);
    server.ready_database(&key, "minds").await;
    let conversations = [
        ("porto", "Ana wohnt seit Mai in Porto."),
        (
            "dark",
            "I switched the editor to dark mode again, third time today.",
        ),
        ("tea", "J'adore le thé vert le matin."),
    ];
    let memories: Vec<Value> = conversations
        .iter()
        .map(|(id, text)| {
            serde_json::json!({"id": id, "user_name": "Ana", "infer": true, "text": text})
        })
        .collect();
    ingest_memories(&server, &key, Value::from(memories)).await;
    let ids: Vec<&str> = conversations.iter().map(|(id, _)| *id).collect();
    wait_completed(&server, &key, "minds", Some("ana"), &ids).await;
    let stats: Value = reqwest::get(format!("{}/stats", model.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        stats["json_schema"], 3,
        "one facts call per memory: {stats}"
    );
    assert_eq!(stats["failed"], 0, "{stats}");
    for (id, text) in conversations {
        let statements = inferred(&server, &key, id).await;
        // The worked example's city, the usual thing a small model copies, is never kept.
        assert!(!statements.contains("Hamburg"), "{id}: {statements}");
        for statement in statements.split_terminator(". ") {
            let last = statement
                .trim_end_matches('.')
                .rsplit(' ')
                .next()
                .unwrap_or_default();
            assert!(
                text.to_lowercase().contains(&last.to_lowercase()),
                "{id}: `{statement}` is not held to `{text}`"
            );
        }
    }
}
