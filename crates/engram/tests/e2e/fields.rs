//! Every field of the write and admin routes' bodies in the OpenAPI document, JSON and
//! multipart, is either acted on or reported.
//!
//! A write changes state, so each call runs in a world of its own: a fresh organization with a
//! ready database and what the route needs (an item, a connector with a configured resource, a
//! vault entry, a raw-embeddings tenant). A field is acted on when the answer (status, body) or
//! the state read back afterwards differs from the same call without it; values that differ
//! between two worlds anyway (ids, times, secrets) are masked by running the plain call twice.
//! It is reported when the answer names it: `ignored_parameters` (plain or in `meta`), a
//! deprecation, or a legacy `Warning`. A field added to a body later is covered without touching
//! this test; a route added later needs its row in `cases` (the test fails without one). A field
//! no route knows is reported by every one of them.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::common::{self, send_form, Reply, Server};

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::StreamExt;
use reqwest::Method;
use serde_json::{json, Value};

/// What a world holds besides its ready database `kb`.
#[derive(Clone, Copy, PartialEq)]
enum Fixture {
    /// Nothing more.
    Database,
    /// Item `a` in `kb`, indexed.
    Item,
    /// A folder connector on `kb` (`{id}`), not configured.
    Connector,
    /// The same, with the resource `{resource}` configured.
    Configured,
    /// An RSS connector holding credentials (`{id}`, its vault entry).
    Vault,
    /// A raw-embeddings tenant `vecs` (dimension 2) with one source `s1`.
    Embeddings,
    /// Memory `m1` of user `u1`, indexed.
    Memory,
    /// A webhook registered (to a port nothing listens on).
    Webhook,
}

/// How the body travels.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Json,
    Form,
}

struct Case {
    method: Method,
    template: &'static str,
    kind: Kind,
    fixture: Fixture,
    /// The plain call's body (for a form: its text fields; `files` becomes a file part).
    base: Value,
    /// Reads of the state after the call: method, path, body.
    observe: Vec<(Method, &'static str, Option<Value>)>,
    /// For a call that ingests: the collection whose items to wait for before reading
    /// (`""`: the default one), and how long to wait more (expiry takes a second).
    settle: Option<(&'static str, u64)>,
}

impl Case {
    /// Whether `path`, a path template of the OpenAPI document, is this case's route (the case
    /// writes `{resource}`, `{item}` and the database `kb` where the document has parameters).
    fn documents(&self, path: &str) -> bool {
        [
            self.template.to_owned(),
            self.template.replace("{resource}", "{resource_id}"),
            self.template.replace("{item}", "{id}"),
            self.template.replace("kb", "{database}"),
        ]
        .iter()
        .any(|t| t == path)
    }
}

/// The write and admin routes with a body, each with the plain call that succeeds and the
/// reads that show what it changed.
fn cases() -> Vec<Case> {
    use Fixture::{Configured, Connector, Database, Embeddings, Item, Memory, Vault, Webhook};
    use Kind::{Form, Json};
    let get = |path: &'static str| (Method::GET, path, None);
    let listed = || {
        (
            Method::POST,
            "/context/list",
            Some(json!({"database": "kb", "include_fields": ["metadata", "content"]})),
        )
    };
    let found = || {
        (
            Method::POST,
            "/query",
            Some(json!({"database": "kb", "query": "pumps valves replaced", "max_results": 5})),
        )
    };
    let memories = || {
        (
            Method::POST,
            "/query",
            Some(
                json!({"database": "kb", "type": "memory", "collection": "u1",
                        "query": "which tea", "graph_context": true}),
            ),
        )
    };
    let case = |method: Method,
                template: &'static str,
                kind: Kind,
                fixture: Fixture,
                base: Value,
                observe: Vec<(Method, &'static str, Option<Value>)>| Case {
        method,
        template,
        kind,
        fixture,
        base,
        observe,
        settle: None,
    };
    let settled = |case: Case, collection: &'static str, pause_ms: u64| Case {
        settle: Some((collection, pause_ms)),
        ..case
    };
    vec![
        case(
            Method::POST,
            "/connector-discovery",
            Json,
            Database,
            json!({"provider": "folder", "credentials": {}}),
            vec![],
        ),
        case(
            Method::POST,
            "/connectors",
            Json,
            Database,
            json!({"provider": "folder", "database": "kb"}),
            vec![get("/connectors"), get("/credential-vault")],
        ),
        case(
            Method::PATCH,
            "/connectors/{id}",
            Json,
            Connector,
            json!({"name": "renamed"}),
            vec![get("/connectors/{id}"), get("/credential-vault")],
        ),
        case(
            Method::POST,
            "/connectors/{id}/configure",
            Json,
            Connector,
            json!({"resources": [{"resource_id": "{resource}"}]}),
            vec![get("/connectors/{id}"), get("/connectors/{id}/resources")],
        ),
        case(
            Method::POST,
            "/connectors/{id}/resources",
            Json,
            Connector,
            json!({"resource_id": "{resource}"}),
            vec![get("/connectors/{id}"), get("/connectors/{id}/resources")],
        ),
        case(
            Method::PATCH,
            "/connectors/{id}/resources/{resource}",
            Json,
            Configured,
            json!({"acl": ["team-a"]}),
            vec![get("/connectors/{id}/resources")],
        ),
        case(
            Method::DELETE,
            "/context",
            Json,
            Item,
            json!({"database": "kb", "ids": ["a"]}),
            vec![listed()],
        ),
        case(
            Method::PATCH,
            "/context/{item}/metadata",
            Json,
            Item,
            json!({"database": "kb", "additional_metadata": {"team": "a"}}),
            vec![listed()],
        ),
        case(
            Method::PATCH,
            "/credential-vault/{id}",
            Json,
            Vault,
            json!({"credentials": {"token": "token-2"}}),
            vec![
                get("/credential-vault"),
                (
                    Method::POST,
                    "/credential-vault/{id}/reveal",
                    Some(json!({"field": "token"})),
                ),
            ],
        ),
        case(
            Method::POST,
            "/credential-vault/{id}/reveal",
            Json,
            Vault,
            json!({"field": "token"}),
            vec![],
        ),
        case(
            Method::POST,
            "/databases",
            Json,
            Database,
            json!({"database": "kb2"}),
            vec![
                get("/databases"),
                get("/databases/kb2/metadata-schema"),
                get("/databases/kb2/instructions"),
                get("/databases/status?database=kb2"),
            ],
        ),
        case(
            Method::PATCH,
            "/databases/kb",
            Json,
            Database,
            json!({"new_name": "kb3"}),
            vec![get("/databases")],
        ),
        case(
            Method::PATCH,
            "/databases/kb/instructions",
            Json,
            Database,
            json!({"custom_instructions": "Prefer recent sources."}),
            vec![get("/databases/kb/instructions")],
        ),
        case(
            Method::PATCH,
            "/databases/kb/metadata-schema",
            Json,
            Database,
            json!({"add_fields": [{"name": "f1"}]}),
            vec![get("/databases/kb/metadata-schema")],
        ),
        case(
            Method::POST,
            "/embeddings/insert_raw_embeddings",
            Json,
            Embeddings,
            json!({"tenant_id": "vecs", "embeddings": [
                {"source_id": "s1", "embeddings": [{"chunk_id": "c1", "embedding": [0.0, 1.0]},
                                                   {"chunk_id": "c2", "embedding": [0.6, 0.8]}]}]}),
            vec![(
                Method::POST,
                "/embeddings/filter_raw_embeddings",
                Some(json!({"tenant_id": "vecs", "chunk_ids": ["c1", "c2"],
                            "output_fields": ["chunk_id", "source_id", "metadata", "embedding"]})),
            )],
        ),
        case(
            Method::POST,
            "/feedback",
            Json,
            Database,
            json!({"request_id": "req-1", "feedback": "good"}),
            vec![get("/feedback?request_id=req-1")],
        ),
        case(
            Method::POST,
            "/keys",
            Json,
            Database,
            json!({"name": "second"}),
            vec![get("/keys")],
        ),
        case(
            Method::POST,
            "/knowledge/delete_knowledge",
            Json,
            Item,
            json!({"tenant_id": "kb", "ids": ["a"]}),
            vec![listed()],
        ),
        settled(
            case(
                Method::POST,
                "/memories/add_memory",
                Json,
                Memory,
                json!({"tenant_id": "kb", "sub_tenant_id": "u1",
                       "memories": [{"id": "m1", "text": "Prefers green tea in the morning."}]}),
                vec![memories()],
            ),
            "u1",
            1_500,
        ),
        case(
            Method::POST,
            "/tenants/create",
            Json,
            Database,
            json!({"tenant_id": "kb2"}),
            vec![get("/databases"), get("/databases/status?database=kb2")],
        ),
        case(
            Method::POST,
            "/webhooks/indexing",
            Json,
            Database,
            json!({"url": "http://127.0.0.1:9/engram"}),
            vec![get("/webhooks/indexing")],
        ),
        case(
            Method::POST,
            "/webhooks/indexing/signing-secret",
            Json,
            Webhook,
            json!({}),
            vec![get("/webhooks/indexing")],
        ),
        settled(
            case(
                Method::POST,
                "/context/ingest",
                Form,
                Item,
                json!({"type": "knowledge", "database": "kb",
                       "app_knowledge": [common::app("a", "Pumps", "The pumps are replaced yearly.")]}),
                vec![listed(), found()],
            ),
            "",
            0,
        ),
        settled(
            case(
                Method::POST,
                "/ingestion/upload_knowledge",
                Form,
                Item,
                json!({"tenant_id": "kb", "files": "The pumps are replaced yearly.",
                       "app_knowledge": [common::app("a", "Pumps", "The valves are replaced yearly.")]}),
                vec![listed(), found()],
            ),
            "",
            0,
        ),
    ]
}

/// One world: a fresh organization's key and the ids its fixture made.
struct World {
    key: String,
    connector: String,
    resource: String,
}

impl World {
    fn fill(&self, text: &str) -> String {
        text.replace("{id}", &self.connector)
            .replace("{resource}", &crate::connectors::urlencode(&self.resource))
            .replace("{item}", "a")
    }

    /// The body with `{resource}` put in, unencoded.
    fn fill_body(&self, body: &Value) -> Value {
        match body {
            Value::String(s) => Value::String(s.replace("{resource}", &self.resource)),
            Value::Array(all) => all.iter().map(|v| self.fill_body(v)).collect(),
            Value::Object(map) => map
                .iter()
                .map(|(k, v)| (k.clone(), self.fill_body(v)))
                .collect(),
            other @ (Value::Null | Value::Bool(_) | Value::Number(_)) => other.clone(),
        }
    }
}

static WORLDS: AtomicUsize = AtomicUsize::new(0);

async fn world(server: &Server, fixture: Fixture, folder: &Path) -> World {
    let org = format!("org-fields-{}", WORLDS.fetch_add(1, Ordering::Relaxed));
    let key = server.key(&org, &[]);
    server.ready_database(&key, "kb").await;
    let mut world = World {
        key,
        connector: String::new(),
        resource: folder.display().to_string(),
    };
    match fixture {
        Fixture::Database => {}
        Fixture::Item => {
            crate::webhooks::ingest(
                server,
                &world.key,
                "kb",
                &[common::app(
                    "a",
                    "Valves",
                    "The valves are checked monthly.",
                )],
            )
            .await;
            common::wait_completed(server, &world.key, "kb", None, &["a"]).await;
        }
        Fixture::Connector | Fixture::Configured | Fixture::Vault => {
            let body = if fixture == Fixture::Vault {
                json!({"provider": "rss", "database": "kb", "credentials": {"token": "token-1"}})
            } else {
                json!({"provider": "folder", "database": "kb"})
            };
            let created = server.post("/connectors", &world.key, body).await;
            assert_eq!(created.status.as_u16(), 201, "{created:#?}");
            world.connector = created.body["connector_id"].as_str().unwrap().to_owned();
            if fixture == Fixture::Configured {
                let configured = server
                    .post(
                        &format!("/connectors/{}/configure", world.connector),
                        &world.key,
                        json!({"resources": [{"resource_id": world.resource}]}),
                    )
                    .await;
                assert_eq!(configured.status.as_u16(), 200, "{configured:#?}");
            }
        }
        Fixture::Memory => {
            let added = server
                .post(
                    "/memories/add_memory",
                    &world.key,
                    json!({"tenant_id": "kb", "sub_tenant_id": "u1",
                           "memories": [{"id": "m1", "text": "Prefers black tea."}]}),
                )
                .await;
            assert_eq!(added.status.as_u16(), 202, "{added:#?}");
            common::wait_completed(server, &world.key, "kb", Some("u1"), &["m1"]).await;
        }
        Fixture::Webhook => {
            let registered = server
                .post(
                    "/webhooks/indexing",
                    &world.key,
                    json!({"url": "http://127.0.0.1:9/engram"}),
                )
                .await;
            assert_eq!(registered.status.as_u16(), 201, "{registered:#?}");
        }
        Fixture::Embeddings => {
            let created = server
                .post(
                    "/databases",
                    &world.key,
                    json!({"database": "vecs", "is_embeddings_tenant": true, "embeddings_dimension": 2}),
                )
                .await;
            created.current_ok(202);
            server.wait_ready(&world.key, "vecs").await;
            let inserted = server
                .post(
                    "/embeddings/insert_raw_embeddings",
                    &world.key,
                    json!({"tenant_id": "vecs", "embeddings": [
                        {"source_id": "s1", "embeddings": [{"chunk_id": "c1", "embedding": [1.0, 0.0]}]}]}),
                )
                .await;
            assert_eq!(inserted.status.as_u16(), 200, "{inserted:#?}");
        }
    }
    world
}

/// The answer and the state read back, as one JSON value (the `Warning` header included).
async fn outcome(server: &Server, case: &Case, body: &Value, folder: &Path) -> (Reply, Value) {
    let world = world(server, case.fixture, folder).await;
    let path = world.fill(case.template);
    let body = world.fill_body(body);
    let reply = match case.kind {
        Kind::Json => {
            server
                .call(case.method.clone(), &path, Some(&world.key), Some(body))
                .await
        }
        Kind::Form => send_form(server, &path, &world.key, form(&body)).await,
    };
    if let Some((collection, pause_ms)) = case.settle {
        settle(server, &world.key, collection, &reply).await;
        tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
    }
    let mut seen = vec![json!({
        "status": reply.status.as_u16(),
        "body": reply.body,
        "warning": reply.header("warning"),
    })];
    for (method, read, read_body) in &case.observe {
        let read_body = read_body.as_ref().map(|b| world.fill_body(b));
        let read = server
            .call(
                method.clone(),
                &world.fill(read),
                Some(&world.key),
                read_body,
            )
            .await;
        seen.push(json!({"status": read.status.as_u16(), "body": read.body}));
    }
    (reply, Value::Array(seen))
}

/// Waits until every item the ingest answer names has finished indexing (or failed).
async fn settle(server: &Server, key: &str, collection: &str, reply: &Reply) {
    let results = if reply.body["data"]["results"].is_array() {
        &reply.body["data"]["results"]
    } else {
        &reply.body["results"]
    };
    let ids: Vec<String> = results
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["status"] == "queued")
        .filter_map(|r| {
            r["id"]
                .as_str()
                .or(r["source_id"].as_str())
                .map(str::to_owned)
        })
        .collect();
    let scope = if collection.is_empty() {
        String::new()
    } else {
        format!("&collection={collection}")
    };
    for id in ids {
        common::eventually(
            std::time::Duration::from_secs(120),
            "the ingested item to finish",
            || async {
                let status = server
                    .get(&format!("/context/status?database=kb{scope}&id={id}"), key)
                    .await;
                // Finished, failed, or gone (an expiring memory may expire first).
                let state = &status.body["data"]["statuses"][0]["indexing_status"];
                (!["queued", "processing", "graph_creation"]
                    .contains(&state.as_str().unwrap_or("")))
                .then_some(())
            },
        )
        .await;
    }
}

/// Every string in `value`.
fn strings(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::String(s) => {
            out.insert(s.clone());
        }
        Value::Array(all) => all.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => {
            for (k, v) in map {
                out.insert(k.clone());
                strings(v, out);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// A multipart form of `fields`: `files` as a file part, everything else as text (JSON text for
/// a value that is not a string).
fn form(fields: &Value) -> reqwest::multipart::Form {
    let mut form = reqwest::multipart::Form::new();
    for (name, value) in fields.as_object().unwrap() {
        let text = value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
        form = if name == "files" || name == "documents" {
            form.part(
                name.clone(),
                reqwest::multipart::Part::bytes(text.into_bytes())
                    .file_name("notes.txt")
                    .mime_str("text/plain")
                    .unwrap(),
            )
        } else {
            form.text(name.clone(), text)
        };
    }
    form
}

/// The JSON pointers where `a` and `b` differ (a whole array when the lengths differ).
pub(crate) fn differences(a: &Value, b: &Value, at: &str, out: &mut BTreeSet<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys()) {
                differences(
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                    &format!("{at}/{key}"),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                differences(x, y, &format!("{at}/{i}"), out);
            }
        }
        _ if a != b => {
            out.insert(at.to_owned());
        }
        _ => {}
    }
}

/// Whether `text` holds `word` as a whole word (letters, digits and `_` around it end words).
fn names_word(text: &str, word: &str) -> bool {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .any(|w| w == word)
}

/// Whether an error answer names the field `name` or a value sent in it (`sent`): its message
/// says what was wrong with it, so the field was read.
fn error_names(reply: &Reply, name: &str, sent: &BTreeSet<String>) -> bool {
    let top = name.split(['.', '[']).next().unwrap_or(name);
    let last = name.rsplit(['.', ']']).next().unwrap_or(name);
    let text = reply.body.to_string();
    names_word(&text, top) || names_word(&text, last) || sent.iter().any(|v| names_word(&text, v))
}

/// Whether the answer names `name` as not acted on.
fn reported(reply: &Reply, name: &str) -> bool {
    let top = name.split(['.', '[']).next().unwrap_or(name);
    let names = |list: &Value| -> Vec<String> {
        list.as_array()
            .into_iter()
            .flatten()
            .filter_map(|p| p["parameter"].as_str().map(str::to_owned))
            .collect()
    };
    let mut all = names(&reply.body["ignored_parameters"]);
    all.extend(names(&reply.body["meta"]["ignored_parameters"]));
    all.extend(names(&reply.body["data"]["ignored_parameters"]));
    let deprecated = [
        &reply.body["meta"]["deprecation"],
        &reply.body["deprecation"],
    ]
    .iter()
    .flat_map(|d| d.as_array().into_iter().flatten())
    .any(|d| d["deprecated_field"] == top || d["deprecated_field"] == name);
    deprecated
        || all.iter().any(|n| n == name || n == top)
        || reply
            .header("warning")
            .is_some_and(|w| w.contains(name) || names_word(w, top))
}

/// The fields of a body schema to try: every property, and the properties of the objects in
/// an array property the plain call sends one of (`resources[].acl`), each with its samples.
fn fields_to_try(doc: &Value, schema: &Value, base: &Value) -> Vec<(String, Vec<Value>)> {
    let mut fields = Vec::new();
    for (name, property) in crate::query::properties(doc, schema) {
        let samples = crate::query::samples(doc, &property);
        fields.push((name.clone(), samples));
        let items = &crate::query::resolved(doc, &property)["items"];
        if base[&name].as_array().is_some_and(|a| a.len() == 1) && !items.is_null() {
            for (inner, inner_schema) in crate::query::properties(doc, items) {
                fields.push((
                    format!("{name}[].{inner}"),
                    crate::query::samples(doc, &inner_schema),
                ));
            }
        }
    }
    fields
}

/// `base` with `field` (`name` or `name[].inner`) set to `value`.
fn with_field(base: &Value, field: &str, value: &Value) -> Value {
    let mut body = base.clone();
    match field.split_once("[].") {
        Some((outer, inner)) => body[outer][0][inner] = value.clone(),
        None => body[field] = value.clone(),
    }
    body
}

#[tokio::test]
async fn every_field_of_the_write_routes_is_acted_on_or_reported() {
    let folder = tempfile::tempdir().unwrap();
    let docs = folder.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("a.md"), "# A\nThe pumps are replaced yearly.").unwrap();
    let roots = format!("[\"{}\"]", folder.path().display());
    let server = Server::start_with(&[
        ("ENGRAM_CONNECTORS__FOLDER_ROOTS", roots.as_str()),
        ("ENGRAM_OUTBOUND_ALLOW_PRIVATE", "true"),
    ]);
    let doc = crate::query::openapi(&server).await;
    let cases = cases();

    // Every documented write or admin route with a body has its case.
    let mut missing = Vec::new();
    for (method, path, operation) in crate::auth::documented_operations(&server).await {
        let scope = operation["security"][0]["bearer"][0].as_str().unwrap_or("");
        // A provider's event is the provider's own payload, verified as signed and read by
        // the provider's cursor, not fields of engram's.
        if scope == "read"
            || operation["requestBody"].is_null()
            || path == "/connectors/{id}/events"
        {
            continue;
        }
        let known = cases
            .iter()
            .any(|c| c.method == method && c.documents(&path));
        if !known {
            missing.push(format!("{method} {path}"));
        }
    }
    assert!(missing.is_empty(), "routes without a case: {missing:?}");

    let mut silent = Vec::new();
    for case in &cases {
        let documented = cases_schema(&doc, case);
        let fields = fields_to_try(&doc, documented, &case.base);
        assert!(
            !fields.is_empty(),
            "{} {}: no fields",
            case.method,
            case.template
        );
        let (first, base) = outcome(&server, case, &case.base, &docs).await;
        if !first.status.is_success() {
            silent.push(format!(
                "{} {}: the plain call fails: {first:#?}",
                case.method, case.template
            ));
            continue;
        }
        // A field the route does not know is named, on either generation.
        let (unknown, _) = outcome(
            &server,
            case,
            &with_field(&case.base, "zz_unknown", &json!("x")),
            &docs,
        )
        .await;
        if !reported(&unknown, "zz_unknown") {
            silent.push(format!(
                "{} {}: an unknown field, unreported: {unknown:#?}",
                case.method, case.template
            ));
        }
        let (_, again) = outcome(&server, case, &case.base, &docs).await;
        let mut volatile = BTreeSet::new();
        differences(&base, &again, "", &mut volatile);
        // Each field is tried in worlds of its own, so several at once (the server's waits on
        // indexing and on the store overlap); one field's values in turn, until one acts.
        let tried = futures_util::stream::iter(fields)
            .map(|(name, values)| {
                let (server, docs, base, first, volatile) =
                    (&server, &docs, &base, &first, &volatile);
                async move {
                    for value in values {
                        let body = with_field(&case.base, &name, &value);
                        let (reply, seen) = outcome(server, case, &body, docs).await;
                        let mut changed = BTreeSet::new();
                        differences(base, &seen, "", &mut changed);
                        let changed = changed.iter().any(|c| {
                            !volatile
                                .iter()
                                .any(|v| c == v || c.starts_with(&format!("{v}/")))
                        });
                        // A value the answer or the state echoes back (an id, a name) was acted
                        // on, even where the plain call's value there differs from world to
                        // world.
                        let (mut sent, mut before, mut after) =
                            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
                        strings(&value, &mut sent);
                        strings(base, &mut before);
                        strings(&seen, &mut after);
                        let echoed = sent
                            .iter()
                            .any(|s| after.contains(s) && !before.contains(s));
                        // A refusal shows the field is read only when it names the field.
                        let changed = if reply.status.is_success() {
                            changed
                        } else {
                            reply.status != first.status && error_names(&reply, &name, &sent)
                        };
                        if changed || echoed || reported(&reply, &name) {
                            return None;
                        }
                    }
                    eprintln!("silent: {} {}: {name}", case.method, case.template);
                    Some(format!("{} {}: {name}", case.method, case.template))
                }
            })
            .buffer_unordered(4)
            .collect::<Vec<_>>()
            .await;
        silent.extend(tried.into_iter().flatten());
    }
    assert!(
        silent.is_empty(),
        "fields that changed nothing and were not reported:\n{}",
        silent.join("\n")
    );
}

/// The body schema of `case`'s route in the document.
fn cases_schema<'a>(doc: &'a Value, case: &Case) -> &'a Value {
    let method = case.method.as_str().to_lowercase();
    let paths = doc["paths"].as_object().unwrap();
    let (_, operations) = paths
        .iter()
        .find(|(path, operations)| !operations[&method].is_null() && case.documents(path))
        .unwrap_or_else(|| panic!("{} {} is not documented", case.method, case.template));
    let content = match case.kind {
        Kind::Json => "application/json",
        Kind::Form => "multipart/form-data",
    };
    &operations[&method]["requestBody"]["content"][content]["schema"]
}
