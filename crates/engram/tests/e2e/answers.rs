//! Answers (`POST /recall/qna`): retrieval, then the configured model answering from the
//! retrieved chunks, whole or streamed as server-sent events; a real local model
//! (SmolLM2-135M through llama.cpp) and a scripted endpoint for the model's failures and
//! citations.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::common::{app, wait_completed, Reply, Server};

const NO_ANSWER: &str = "I cannot answer that from the provided context.";

async fn ingest(server: &Server, key: &str, database: &str, items: &[Value]) {
    crate::webhooks::ingest(server, key, database, items).await;
    let ids: Vec<&str> = items.iter().map(|i| i["id"].as_str().unwrap()).collect();
    wait_completed(server, key, database, None, &ids).await;
}

fn notes() -> Vec<Value> {
    vec![
        app(
            "reactor",
            "Reactor note",
            "The gamma reactor is cooled by helium gas and inspected every spring.",
        ),
        app(
            "pumps",
            "Pump schedule",
            "The coolant pumps in hall B are replaced every autumn by the night shift.",
        ),
        app(
            "menu",
            "Cafeteria",
            "The cafeteria serves lentil soup on Tuesdays and fish on Fridays.",
        ),
    ]
}

async fn ask(server: &Server, key: &str, body: Value) -> Reply {
    server.post("/recall/qna", key, body).await
}

/// The events of a streamed answer: `(event, data)`.
async fn ask_streamed(
    server: &Server,
    key: &str,
    mut body: Value,
) -> (Reply, Vec<(String, Value)>) {
    body["stream"] = json!(true);
    let response = server
        .client
        .post(server.url("/recall/qna"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let mut events = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut event = String::new();
        let mut data = String::new();
        for line in block.lines() {
            if let Some(name) = line.strip_prefix("event:") {
                event = name.trim().to_owned();
            } else if let Some(value) = line.strip_prefix("data:") {
                data.push_str(value.trim_start());
            }
        }
        events.push((
            event,
            serde_json::from_str(&data).unwrap_or(Value::String(data)),
        ));
    }
    let reply = Reply {
        status,
        headers,
        body: Value::Null,
    };
    (reply, events)
}

/// Checks a streamed answer's events: `chunks`, deltas, then `done`; returns `done`'s data.
fn assert_stream_shape(events: &[(String, Value)]) -> Value {
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(names.first(), Some(&"chunks"), "{events:#?}");
    assert_eq!(names.last(), Some(&"done"), "{events:#?}");
    assert!(
        names[1..names.len() - 1].iter().all(|n| *n == "delta"),
        "{names:?}"
    );
    let written: String = events
        .iter()
        .filter(|(e, _)| e == "delta")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    let done = events.last().unwrap().1.clone();
    assert_eq!(done["answer"], written.trim(), "{events:#?}");
    done
}

/// A real model answers from what was retrieved, whole and streamed alike; nothing retrieved
/// is answered without asking it. On SQLite only (answers do not depend on the store).
#[tokio::test]
async fn a_real_local_model_answers_from_the_retrieved_chunks_whole_or_streamed() {
    let Some(model) = crate::common::LocalModel::start_on_sqlite() else {
        return;
    };
    let server = model.engram(&[
        ("ENGRAM_LLM__ANSWER_CONTEXT_CHARS", "2000"),
        ("ENGRAM_LLM__ANSWER_MAX_TOKENS", "64"),
        // The rules read the graphs: this test is about answers.
        ("ENGRAM_LLM__GRAPH", "false"),
    ]);
    let admin = server.key("org-qna", &[]);
    let reader = server.scoped_key("org-qna", &[], &["read"]);
    server.ready_database(&admin, "plant").await;
    server.ready_database(&admin, "empty").await;
    ingest(&server, &admin, "plant", &notes()).await;

    let question = json!({"tenant_id": "plant", "question": "How is the gamma reactor cooled?",
                          "max_chunks": 2});
    let reply = ask(&server, &reader, question.clone()).await;
    assert_eq!(reply.status, 200, "{reply:#?}");
    let answer = &reply.body;
    assert_eq!(answer["success"], true);
    assert_eq!(answer["model_used"], "smollm2-135m-instruct");
    let chunks = answer["chunks"].as_array().unwrap();
    assert!(!chunks.is_empty() && chunks.len() <= 2, "{answer:#}");
    assert_eq!(chunks[0]["source_id"], "reactor", "{answer:#}");
    let text = answer["answer"].as_str().unwrap().to_lowercase();
    assert!(
        ["helium", "reactor", "cool", "gas"]
            .iter()
            .any(|w| text.contains(w)),
        "an answer about the retrieved chunk: {answer:#}"
    );
    let given: Vec<&Value> = chunks.iter().map(|c| &c["chunk_uuid"]).collect();
    for cited in answer["citations"].as_array().unwrap() {
        assert!(given.contains(&cited), "{answer:#}");
    }
    for part in ["retrieval_ms", "answer_ms", "total_ms"] {
        assert!(answer["timing"][part].as_f64().is_some(), "{answer:#}");
    }
    assert!(reply.header("warning").is_none(), "{reply:#?}");

    // Streamed: the same chunks first, then the same answer piece by piece.
    let (streamed, events) = ask_streamed(&server, &reader, question).await;
    assert_eq!(streamed.status, 200);
    assert!(
        streamed
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream")),
        "{streamed:#?}"
    );
    let done = assert_stream_shape(&events);
    assert_eq!(events[0].1["chunks"], answer["chunks"], "{events:#?}");
    assert_eq!(
        done["answer"], answer["answer"],
        "greedy decoding gives the same answer"
    );

    // Nothing retrieved: the answer says so, and the model is not asked.
    let stats = |base: String| async move {
        reqwest::get(format!("{base}/stats"))
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let before = stats(model.base.clone()).await;
    let reply = ask(
        &server,
        &reader,
        json!({"tenant_id": "empty", "question": "How is the gamma reactor cooled?"}),
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:#?}");
    assert_eq!(reply.body["answer"], NO_ANSWER);
    assert_eq!(reply.body["chunks"], json!([]));
    assert_eq!(
        stats(model.base.clone()).await["completions"],
        before["completions"]
    );

    // What is not acted on is named in a Warning, and the answer still comes.
    let reply = ask(
        &server,
        &reader,
        json!({"tenant_id": "plant", "question": "When are the pumps replaced?",
               "llm_provider": "openai", "model": "gpt-4o", "max_tokens": 100000, "colour": "red"}),
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:#?}");
    let warning = reply.header("warning").unwrap_or_default();
    for named in ["llm_provider", "model", "max_tokens", "colour"] {
        assert!(warning.contains(named), "{named} not in {warning:?}");
    }
}

/// What the scripted endpoint does with the next requests.
#[derive(Clone, Copy, PartialEq)]
enum Script {
    /// Streams "Helium cools it [1]." in two deltas.
    Answer,
    /// 500 every time.
    Busy,
    /// 400: a request the model refuses.
    Refuse,
}

type Seen = Arc<Mutex<(Script, Vec<Value>)>>;

async fn scripted_endpoint() -> (String, Seen) {
    use axum::extract::State;
    use axum::response::IntoResponse;
    async fn complete(
        State(seen): State<Seen>,
        body: axum::Json<Value>,
    ) -> axum::response::Response {
        let script = {
            let mut seen = seen.lock().unwrap();
            seen.1.push(body.0.clone());
            seen.0
        };
        match script {
            Script::Busy => (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "busy").into_response(),
            Script::Refuse => (
                axum::http::StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": {"message": "context too long"}})),
            )
                .into_response(),
            Script::Answer => {
                let chunk = |text: &str| {
                    json!({"choices": [{"index": 0, "delta": {"content": text}}]}).to_string()
                };
                let body = format!(
                    "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
                    chunk("Helium cools it "),
                    chunk("[1].")
                );
                ([("content-type", "text/event-stream")], body).into_response()
            }
        }
    }
    let seen: Seen = Arc::new(Mutex::new((Script::Answer, Vec::new())));
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(complete))
        .with_state(seen.clone());
    (format!("{}/v1", crate::common::serve(app).await), seen)
}

/// Citations name the chunks the answer marks; the request holds the passages and the bounds;
/// a busy model is 503, a refusing one 502, mid-stream too; bad input is 400; without a model
/// the route is refused naming the setting.
#[tokio::test]
async fn answers_cite_their_chunks_and_fail_clearly() {
    let unconfigured = Server::start();
    let key = unconfigured.key("org-qna-none", &[]);
    unconfigured.ready_database(&key, "plant").await;
    let reply = ask(
        &unconfigured,
        &key,
        json!({"tenant_id": "plant", "question": "Why?"}),
    )
    .await;
    reply.assert_legacy_error(403, "FORBIDDEN");
    let message = reply.body["detail"]["message"].as_str().unwrap();
    assert!(
        message.contains("[llm]") && message.contains("ENGRAM_LLM__BASE_URL"),
        "{message}"
    );
    drop(unconfigured);

    let (url, seen) = scripted_endpoint().await;
    let server = Server::start_with(&[
        ("ENGRAM_LLM__BASE_URL", url.as_str()),
        ("ENGRAM_LLM__MODEL", "scripted"),
        ("ENGRAM_LLM__ANSWER_MAX_TOKENS", "200"),
        ("ENGRAM_LLM__ATTEMPTS", "2"),
        ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
    ]);
    let key = server.key("org-qna-scripted", &[]);
    server.ready_database(&key, "plant").await;
    // The graph calls get an answer they cannot use, so the rules read the items.
    ingest(&server, &key, "plant", &notes()).await;
    seen.lock().unwrap().1.clear();

    let reply = ask(
        &server,
        &key,
        json!({"tenant_id": "plant", "question": "What cools the gamma reactor?",
               "max_chunks": 3, "temperature": 0.3, "max_tokens": 50,
               "extra_context": "The asker is a new operator."}),
    )
    .await;
    assert_eq!(reply.status, 200, "{reply:#?}");
    let answer = &reply.body;
    assert_eq!(answer["answer"], "Helium cools it [1].");
    assert_eq!(answer["model_used"], "scripted");
    let first = answer["chunks"][0]["chunk_uuid"].clone();
    assert_eq!(answer["citations"], json!([first]), "{answer:#}");
    {
        let seen = seen.lock().unwrap();
        let request = seen.1.last().unwrap();
        assert_eq!(request["model"], "scripted");
        assert_eq!(request["stream"], true);
        assert_eq!(request["max_completion_tokens"], 50);
        assert_eq!(request["temperature"], 0.3);
        let user = request["messages"][1]["content"].as_str().unwrap();
        assert!(
            user.contains("[1] (Reactor note) The gamma reactor is cooled"),
            "{user}"
        );
        assert!(
            user.contains("Question: What cools the gamma reactor?"),
            "{user}"
        );
        assert!(user.contains("The asker is a new operator."), "{user}");
    }

    // Bad input, before the model is asked.
    let asked = seen.lock().unwrap().1.len();
    for body in [
        json!({"tenant_id": "plant"}),
        json!({"tenant_id": "plant", "question": "  "}),
        json!({"tenant_id": "plant", "question": "x", "max_chunks": 0}),
        json!({"tenant_id": "plant", "question": "x", "max_chunks": 51}),
        json!({"tenant_id": "plant", "question": "x", "temperature": 2.5}),
        json!({"tenant_id": "plant", "question": "x", "max_tokens": 0}),
        json!({"tenant_id": "plant", "question": "x", "extra_context": "y".repeat(4001)}),
        json!({"tenant_id": "plant", "question": "x".repeat(10_001)}),
    ] {
        ask(&server, &key, body.clone())
            .await
            .assert_legacy_error(400, "INVALID_SEARCH_PARAMETERS");
    }
    ask(&server, &key, json!({"tenant_id": "nope", "question": "x"}))
        .await
        .assert_legacy_error(404, "TENANT_NOT_FOUND");
    assert_eq!(seen.lock().unwrap().1.len(), asked, "the model was asked");

    // The model busy after every try: 503 with Retry-After; refusing: 502.
    seen.lock().unwrap().0 = Script::Busy;
    let question = json!({"tenant_id": "plant", "question": "What cools the gamma reactor?"});
    let reply = ask(&server, &key, question.clone()).await;
    reply.assert_legacy_error(503, "SERVICE_UNAVAILABLE");
    assert!(reply.header("retry-after").is_some(), "{reply:#?}");
    let (streamed, _) = ask_streamed(&server, &key, question.clone()).await;
    assert_eq!(
        streamed.status, 503,
        "a stream that cannot start is an error answer"
    );
    seen.lock().unwrap().0 = Script::Refuse;
    ask(&server, &key, question.clone())
        .await
        .assert_legacy_error(502, "PROVIDER_ERROR");

    // Streamed with citations.
    seen.lock().unwrap().0 = Script::Answer;
    let (streamed, events) = ask_streamed(&server, &key, question).await;
    assert_eq!(streamed.status, 200);
    let done = assert_stream_shape(&events);
    let first = events[0].1["chunks"][0]["chunk_uuid"].clone();
    assert_eq!(done["citations"], json!([first]), "{events:#?}");
    assert_eq!(done["model_used"], "scripted");
}

/// Every field of `recall.qna`'s body in the OpenAPI document changes the answer, what the
/// model is asked, or is named in the `Warning` (the reading routes' test, with the model's
/// request as part of the outcome: a scripted model answers the same to every question).
#[tokio::test]
async fn every_field_of_qna_is_acted_on_or_reported() {
    let (url, seen) = scripted_endpoint().await;
    let server = Server::start_with(&[
        ("ENGRAM_LLM__BASE_URL", url.as_str()),
        ("ENGRAM_LLM__MODEL", "scripted"),
        ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
    ]);
    let key = server.key("org-qna-fields", &[]);
    server.ready_database(&key, "plant").await;
    ingest(&server, &key, "plant", &notes()).await;
    let doc = crate::query::openapi(&server).await;
    let schema = &doc["paths"]["/recall/qna"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"];
    let fields = crate::query::properties(&doc, schema);
    assert!(fields.len() >= 5, "{fields:?}");
    let base = json!({"tenant_id": "plant", "question": "What cools the gamma reactor?"});
    // The answer and what the model was asked, as one value.
    let outcome = |body: Value| {
        let (server, key, seen) = (&server, &key, &seen);
        async move {
            seen.lock().unwrap().1.clear();
            let reply = ask(server, key, body).await;
            let asked = seen.lock().unwrap().1.clone();
            let seen = json!({"status": reply.status.as_u16(), "body": reply.body, "asked": asked});
            (reply, seen)
        }
    };
    let (_, first) = outcome(base.clone()).await;
    let (_, again) = outcome(base.clone()).await;
    let mut volatile = std::collections::BTreeSet::new();
    crate::fields::differences(&first, &again, "", &mut volatile);
    let mut silent = Vec::new();
    for (name, schema) in fields {
        if name == "stream" {
            // Acted on when the answer comes as server-sent events instead of one object.
            let mut body = base.clone();
            body["stream"] = json!(true);
            let response = server
                .client
                .post(server.url("/recall/qna"))
                .header("Authorization", format!("Bearer {key}"))
                .json(&body)
                .send()
                .await
                .unwrap();
            let kind = response.headers()["content-type"]
                .to_str()
                .unwrap()
                .to_owned();
            assert!(kind.starts_with("text/event-stream"), "{kind}");
            continue;
        }
        let mut acted = false;
        for value in crate::query::samples(&doc, &schema) {
            let mut body = base.clone();
            body[&name] = value;
            let (reply, seen) = outcome(body).await;
            let mut changed = std::collections::BTreeSet::new();
            crate::fields::differences(&first, &seen, "", &mut changed);
            let changed = changed.iter().any(|c| {
                !volatile
                    .iter()
                    .any(|v| c == v || c.starts_with(&format!("{v}/")))
            });
            if changed || reply.header("warning").is_some_and(|w| w.contains(&name)) {
                acted = true;
                break;
            }
        }
        if !acted {
            silent.push(name);
        }
    }
    assert!(
        silent.is_empty(),
        "fields of recall.qna that changed nothing and were not reported: {silent:?}"
    );
}
