//! A stateful fake of the part of Notion's public REST API (`Notion-Version: 2022-06-28`) the
//! notion connector reads, on loopback: pages (nested, archived), databases and their rows with
//! properties, blocks with children, `POST /v1/search`, `GET /v1/pages/{id}`,
//! `GET /v1/blocks/{id}/children`, `GET /v1/databases/{id}` and `POST
//! /v1/databases/{id}/query` (a `last_edited_time` filter, sorts), cursors with small pages,
//! edits that move `last_edited_time` on (to the minute, as Notion keeps it), bearer tokens
//! (`401` in Notion's error shape) and rate limiting (`429` with `Retry-After`) on demand.
//!
//! It is a test double of Notion, so it is held to Notion's own description of its API. Notion
//! publishes no OpenAPI document; its official client (`@notionhq/client`, which `make
//! setup-test` installs with the TypeScript compiler) describes every endpoint (method, path,
//! query and body parameters, in `api-endpoints.js`) and types every request and answer (in
//! `api-endpoints.d.ts`). [`assert_conforms`] checks each exchange the fake logged against the
//! endpoint table, then writes the requests and answers as TypeScript values of the published
//! types (`SearchResponse`, `ListBlockChildrenResponse`, `PageObjectResponse`, …) and has
//! `tsc --strict` check them: a shape the types do not allow fails.
#![allow(clippy::unwrap_used)] // test code

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use serde_json::{json, Map, Value};

use crate::serve::{
    assert_no_problems, json_reply, query_pairs, read_answer, route_params, with_retry_after,
    Loopback, RateLimit, Serving,
};
use crate::typescript::{node_json, Checks};

const USER: &str = "6a1f0c7e-2d4b-4c8a-9e3f-0b5d7a9c1e20";

/// One request and its answer, as the fake saw them.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub method: String,
    /// The route template (`/v1/pages/{page_id}`); `UNROUTED <path>` for a request no route
    /// took.
    pub route: String,
    /// The path parameters, by name.
    pub params: Vec<(String, String)>,
    pub query: Vec<(String, String)>,
    pub request: Option<Value>,
    pub status: u16,
    pub body: Option<Value>,
    /// The `Notion-Version` header sent.
    pub version: String,
}

/// Where a page, block or database sits.
#[derive(Debug, Clone, PartialEq)]
pub enum Parent {
    Workspace,
    Page(String),
    Database(String),
    Block(String),
}

struct PageRec {
    parent: Parent,
    title: String,
    /// A row's properties (name, Notion's value of its type); a page's is its title.
    properties: Vec<(String, Value)>,
    created: String,
    edited: String,
    archived: bool,
    children: Vec<String>,
}

struct BlockRec {
    parent: Parent,
    kind: String,
    body: Value,
    created: String,
    edited: String,
    archived: bool,
    children: Vec<String>,
}

struct DatabaseRec {
    parent: Parent,
    title: String,
    /// (name, type) of each property.
    schema: Vec<(String, String)>,
    created: String,
    edited: String,
    archived: bool,
}

#[derive(Default)]
struct Shared {
    /// The authorization server whose active access tokens are accepted too.
    introspection: Option<crate::serve::Introspection>,
    token: String,
    pages: BTreeMap<String, PageRec>,
    blocks: BTreeMap<String, BlockRec>,
    databases: BTreeMap<String, DatabaseRec>,
    /// Creation order of pages and databases (search and queries list in it).
    order: Vec<String>,
    /// Minutes since 2026-03-01T00:00Z.
    clock: u64,
    next_id: u64,
    /// The largest page any listing answers (Notion's is 100; small ones force cursors).
    page_size_max: usize,
    /// Requests still to answer `429`, and the `Retry-After` they carry.
    limited: RateLimit,
    log: crate::serve::Log<Exchange>,
}

type SharedState = Arc<Mutex<Shared>>;

impl Shared {
    fn tick(&mut self) -> String {
        self.clock += 1;
        let (d, h, m) = (self.clock / 1440, self.clock / 60 % 24, self.clock % 60);
        assert!(d < 28, "the fake's clock covers four weeks");
        format!("2026-03-{:02}T{h:02}:{m:02}:00.000Z", d + 1)
    }

    fn id(&mut self) -> String {
        self.next_id += 1;
        format!(
            "{:08x}-0000-4000-8000-{:012x}",
            0x1a2b_0000 + self.next_id,
            self.next_id
        )
    }

    /// The page a block (or page) is in, and every block on the way: their edit time moves.
    fn touch(&mut self, mut id: String, at: &str) {
        loop {
            if let Some(page) = self.pages.get_mut(&id) {
                page.edited = at.to_owned();
                return;
            }
            let Some(block) = self.blocks.get_mut(&id) else {
                return;
            };
            block.edited = at.to_owned();
            id = match &block.parent {
                Parent::Page(p) | Parent::Block(p) => p.clone(),
                Parent::Workspace | Parent::Database(_) => return,
            };
        }
    }
}

/// Rich text of one plain run, as Notion answers it.
pub fn rich(text: &str) -> Value {
    json!([{
        "type": "text", "text": {"content": text, "link": null},
        "annotations": {"bold": false, "italic": false, "strikethrough": false, "underline": false,
                        "code": false, "color": "default"},
        "plain_text": text, "href": null
    }])
}

/// A block's body of `kind` holding `text` (a table row: cells split at `|`).
pub fn body(kind: &str, text: &str) -> Value {
    match kind {
        "heading_1" | "heading_2" | "heading_3" => {
            json!({"rich_text": rich(text), "color": "default", "is_toggleable": false})
        }
        "to_do" => json!({"rich_text": rich(text), "color": "default", "checked": false}),
        "code" => json!({"rich_text": rich(text), "caption": [], "language": "shell"}),
        "callout" => json!({"rich_text": rich(text), "color": "gray_background",
                            "icon": {"type": "emoji", "emoji": "💡"}}),
        "table" => json!({"has_column_header": true, "has_row_header": false,
                          "table_width": text.parse::<u64>().unwrap_or(2)}),
        "table_row" => {
            json!({"cells": text.split('|').map(|c| rich(c.trim())).collect::<Vec<_>>()})
        }
        _ => json!({"rich_text": rich(text), "color": "default"}),
    }
}

fn user() -> Value {
    json!({"object": "user", "id": USER})
}

fn parent_json(parent: &Parent) -> Value {
    match parent {
        Parent::Workspace => json!({"type": "workspace", "workspace": true}),
        Parent::Page(id) => json!({"type": "page_id", "page_id": id}),
        Parent::Database(id) => json!({"type": "database_id", "database_id": id}),
        Parent::Block(id) => json!({"type": "block_id", "block_id": id}),
    }
}

fn url_of(title: &str, id: &str) -> String {
    let slug: String = title
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { '-' })
        .collect();
    format!("https://www.notion.so/{slug}-{}", id.replace('-', ""))
}

/// A property's id, as Notion makes them (short and stable).
fn property_id(name: &str) -> String {
    if name.is_empty() {
        return "title".into();
    }
    format!("p{:x}", name.bytes().map(u32::from).sum::<u32>())
}

fn parent_db(parent: &Parent) -> &str {
    match parent {
        Parent::Database(db) => db,
        Parent::Workspace | Parent::Page(_) | Parent::Block(_) => "",
    }
}

fn page_json(s: &Shared, id: &str) -> Value {
    let page = &s.pages[id];
    let schema: HashMap<&str, &str> = match &page.parent {
        Parent::Database(db) => s.databases[db]
            .schema
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect(),
        Parent::Workspace | Parent::Page(_) | Parent::Block(_) => HashMap::new(),
    };
    let mut properties = Map::new();
    if schema.is_empty() {
        properties.insert(
            "title".into(),
            json!({"id": "title", "type": "title", "title": rich(&page.title)}),
        );
    } else {
        // Every property of the database, empty where the row has no value.
        for (name, kind) in &s.databases[parent_db(&page.parent)].schema {
            let kind = kind.as_str();
            let value =
                page.properties
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| match kind {
                        "title" | "rich_text" | "multi_select" | "people" | "relation"
                        | "files" => json!([]),
                        "checkbox" => json!(false),
                        _ => Value::Null,
                    });
            let mut property = json!({"id": property_id(name), "type": kind});
            property[kind] = value;
            if kind == "title" {
                property["id"] = json!("title");
            }
            properties.insert(name.clone(), property);
        }
    }
    json!({
        "object": "page", "id": id, "created_time": page.created, "last_edited_time": page.edited,
        "created_by": user(), "last_edited_by": user(), "cover": null, "icon": null,
        "parent": parent_json(&page.parent), "archived": page.archived, "in_trash": page.archived,
        "properties": properties, "url": url_of(&page.title, id), "public_url": null
    })
}

fn database_json(s: &Shared, id: &str) -> Value {
    let db = &s.databases[id];
    let mut properties = Map::new();
    for (name, kind) in &db.schema {
        let config = match kind.as_str() {
            "select" | "multi_select" => json!({"options": []}),
            "status" => json!({"options": [], "groups": []}),
            "number" => json!({"format": "number"}),
            _ => json!({}),
        };
        let mut property = json!({"id": if kind == "title" { "title".to_owned() } else { property_id(name) },
                                  "name": name, "type": kind, "description": null});
        property[kind.as_str()] = config;
        properties.insert(name.clone(), property);
    }
    json!({
        "object": "database", "id": id, "cover": null, "icon": null,
        "created_time": db.created, "last_edited_time": db.edited,
        "created_by": user(), "last_edited_by": user(),
        "title": rich(&db.title), "description": [], "is_inline": false,
        "properties": properties, "parent": parent_json(&db.parent),
        "url": url_of(&db.title, id), "public_url": null,
        "archived": db.archived, "in_trash": db.archived
    })
}

fn block_json(s: &Shared, id: &str) -> Value {
    let block = &s.blocks[id];
    let has_children = block.children.iter().any(|c| live(s, c))
        || (block.kind == "child_page" && !s.pages[id].children.is_empty());
    let mut value = json!({
        "object": "block", "id": id, "parent": parent_json(&block.parent),
        "created_time": block.created, "last_edited_time": block.edited,
        "created_by": user(), "last_edited_by": user(), "has_children": has_children,
        "archived": block.archived, "in_trash": block.archived, "type": block.kind
    });
    value[block.kind.as_str()] = block.body.clone();
    value
}

/// Whether a block (or page) is there (not archived).
fn live(s: &Shared, id: &str) -> bool {
    s.blocks.get(id).is_some_and(|b| !b.archived) || s.pages.get(id).is_some_and(|p| !p.archived)
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    json_reply(
        status,
        &json!({"object": "error", "status": status.as_u16(), "code": code, "message": message,
                "request_id": "0b7c6e1d-4f2a-4a3b-9c8d-7e6f5a4b3c2d"}),
    )
}

fn not_found(kind: &str, id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "object_not_found",
        &format!(
            "Could not find {kind} with ID: {id}. Make sure the relevant pages and databases are shared with your integration."
        ),
    )
}

/// One page of `items` from `start_cursor` (an item's id, as Notion's cursors are), at most
/// `page_size` (capped by the fake), as a list answer of `kind`.
fn list(
    s: &Shared,
    items: Vec<Value>,
    start_cursor: Option<&str>,
    page_size: Option<u64>,
    kind: &str,
) -> Response {
    let start = match start_cursor {
        None => 0,
        Some(cursor) => match items.iter().position(|i| i["id"] == cursor) {
            Some(at) => at,
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "validation_error",
                    "body failed validation: start_cursor should be a valid cursor.",
                )
            }
        },
    };
    let size = usize::try_from(page_size.unwrap_or(100).clamp(1, 100))
        .unwrap()
        .min(s.page_size_max);
    let end = (start + size).min(items.len());
    let next = items
        .get(end)
        .map(|i| i["id"].clone())
        .unwrap_or(Value::Null);
    let mut answer = json!({
        "object": "list", "results": items[start..end].to_vec(), "next_cursor": next,
        "has_more": end < items.len(), "type": kind
    });
    answer[kind] = json!({});
    json_reply(StatusCode::OK, &answer)
}

async fn search(
    State(shared): State<SharedState>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let s = shared.lock().unwrap();
    let wanted = body.pointer("/filter/value").and_then(Value::as_str);
    let mut found: Vec<(String, Value)> = Vec::new();
    for id in &s.order {
        let (object, edited) = if let Some(page) = s.pages.get(id) {
            if page.archived {
                continue;
            }
            (page_json(&s, id), page.edited.clone())
        } else {
            let db = &s.databases[id];
            if db.archived {
                continue;
            }
            (database_json(&s, id), db.edited.clone())
        };
        if wanted.is_none_or(|w| object["object"] == w) {
            found.push((edited, object));
        }
    }
    // Most recently edited first, as Notion lists without a sort or asked to; oldest first
    // when asked.
    found.sort_by(|a, b| b.0.cmp(&a.0));
    if body.pointer("/sort/direction").and_then(Value::as_str) == Some("ascending") {
        found.reverse();
    }
    let items = found.into_iter().map(|(_, o)| o).collect();
    list(
        &s,
        items,
        body.get("start_cursor").and_then(Value::as_str),
        body.get("page_size").and_then(Value::as_u64),
        "page_or_database",
    )
}

async fn get_page(State(shared): State<SharedState>, Path(id): Path<String>) -> Response {
    let s = shared.lock().unwrap();
    if s.pages.contains_key(&id) {
        json_reply(StatusCode::OK, &page_json(&s, &id))
    } else {
        not_found("page", &id)
    }
}

async fn get_database(State(shared): State<SharedState>, Path(id): Path<String>) -> Response {
    let s = shared.lock().unwrap();
    if s.databases.contains_key(&id) {
        json_reply(StatusCode::OK, &database_json(&s, &id))
    } else {
        not_found("database", &id)
    }
}

async fn block_children(
    State(shared): State<SharedState>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let s = shared.lock().unwrap();
    let children = match (s.pages.get(&id), s.blocks.get(&id)) {
        (Some(page), _) => &page.children,
        (None, Some(block)) => &block.children,
        (None, None) => return not_found("block", &id),
    };
    let items = children
        .iter()
        .filter(|c| live(&s, c))
        .map(|c| block_json(&s, c))
        .collect();
    list(
        &s,
        items,
        query.get("start_cursor").map(String::as_str),
        query.get("page_size").and_then(|p| p.parse().ok()),
        "block",
    )
}

async fn query_database(
    State(shared): State<SharedState>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<Value>,
) -> Response {
    let s = shared.lock().unwrap();
    if !s.databases.contains_key(&id) {
        return not_found("database", &id);
    }
    let since = match body.get("filter") {
        None => None,
        Some(filter) if filter["timestamp"] == "last_edited_time" => {
            match filter
                .pointer("/last_edited_time/on_or_after")
                .and_then(Value::as_str)
            {
                Some(since) => Some(since.to_owned()),
                None => {
                    return error(
                        StatusCode::BAD_REQUEST,
                        "validation_error",
                        "the fake filters on_or_after only",
                    )
                }
            }
        }
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "validation_error",
                "the fake filters on last_edited_time only",
            )
        }
    };
    let mut rows: Vec<(&String, &PageRec)> = s
        .order
        .iter()
        .filter_map(|r| s.pages.get(r).map(|p| (r, p)))
        .filter(|(_, p)| p.parent == Parent::Database(id.clone()) && !p.archived)
        .filter(|(_, p)| {
            since
                .as_deref()
                .is_none_or(|since| p.edited.as_str() >= since)
        })
        .collect();
    if let Some(sort) = body.pointer("/sorts/0") {
        if sort["timestamp"] != "last_edited_time" {
            return error(
                StatusCode::BAD_REQUEST,
                "validation_error",
                "the fake sorts by last_edited_time only",
            );
        }
        rows.sort_by(|a, b| a.1.edited.cmp(&b.1.edited));
        if sort["direction"] == "descending" {
            rows.reverse();
        }
    }
    let items = rows.iter().map(|(r, _)| page_json(&s, r)).collect();
    list(
        &s,
        items,
        body.get("start_cursor").and_then(Value::as_str),
        body.get("page_size").and_then(Value::as_u64),
        "page_or_database",
    )
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get("authorization")?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// Every request: the token checked and the rate limit applied, then the exchange logged.
async fn gate(
    State(shared): State<SharedState>,
    matched: MatchedPath,
    request: Request,
    next: Next,
) -> Response {
    let route = matched.as_str().to_owned();
    let params = route_params(&route, request.uri().path());
    let method = request.method().to_string();
    let query = query_pairs(request.uri());
    let version = request
        .headers()
        .get("notion-version")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let (mut parts, body) = request.into_parts();
    let (introspection, own) = {
        let s = shared.lock().unwrap();
        (s.introspection.clone(), s.token.clone())
    };
    crate::serve::vouch(&mut parts.headers, introspection, &own).await;
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let request_json: Option<Value> =
        (!bytes.is_empty()).then(|| serde_json::from_slice(&bytes).unwrap());
    let early = {
        let mut s = shared.lock().unwrap();
        if bearer(&parts.headers) != Some(s.token.as_str()) {
            Some(error(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "API token is invalid.",
            ))
        } else {
            s.limited.take().map(|wait| {
                with_retry_after(
                    error(
                        StatusCode::TOO_MANY_REQUESTS,
                        "rate_limited",
                        "You have been rate limited. Please try again in a few minutes.",
                    ),
                    wait,
                )
            })
        }
    };
    let response = match early {
        Some(response) => response,
        None => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
    };
    let (response, body) = read_answer(response).await;
    shared.lock().unwrap().log.push(Exchange {
        method,
        route,
        params,
        query,
        request: request_json,
        status: response.status().as_u16(),
        body,
        version,
    });
    response
}

/// A request no route takes: logged (a conformance failure) and answered like Notion.
async fn unrouted(State(shared): State<SharedState>, request: Request) -> Response {
    shared.lock().unwrap().log.push(Exchange {
        method: request.method().to_string(),
        route: format!("UNROUTED {}", request.uri().path()),
        params: Vec::new(),
        query: query_pairs(request.uri()),
        request: None,
        status: 400,
        body: None,
        version: String::new(),
    });
    error(
        StatusCode::BAD_REQUEST,
        "invalid_request_url",
        "Invalid request URL.",
    )
}

/// The routes the fake serves, each with the `@notionhq/client` endpoint it stands for and the
/// published types of its parameters and answer.
const ROUTES: &[(&str, &str, &str, &str, &str)] = &[
    (
        "POST",
        "/v1/search",
        "search",
        "SearchParameters",
        "SearchResponse",
    ),
    (
        "GET",
        "/v1/pages/{page_id}",
        "getPage",
        "GetPageParameters",
        "GetPageResponse",
    ),
    (
        "GET",
        "/v1/blocks/{block_id}/children",
        "listBlockChildren",
        "ListBlockChildrenParameters",
        "ListBlockChildrenResponse",
    ),
    (
        "GET",
        "/v1/databases/{database_id}",
        "getDatabase",
        "GetDatabaseParameters",
        "GetDatabaseResponse",
    ),
    (
        "POST",
        "/v1/databases/{database_id}/query",
        "queryDatabase",
        "QueryDatabaseParameters",
        "QueryDatabaseResponse",
    ),
];

fn handler(route: &str) -> MethodRouter<SharedState> {
    match route {
        "/v1/search" => post(search),
        "/v1/pages/{page_id}" => get(get_page),
        "/v1/blocks/{block_id}/children" => get(block_children),
        "/v1/databases/{database_id}" => get(get_database),
        "/v1/databases/{database_id}/query" => post(query_database),
        other => panic!("no handler for {other}"),
    }
}

/// The fake, serving until dropped.
pub struct NotionFake {
    shared: SharedState,
    serving: Serving,
}

impl NotionFake {
    /// Starts the fake; `token` is the integration secret it accepts. Listings answer at most
    /// `page_size_max` objects a page.
    pub async fn start(token: &str, page_size_max: usize) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            token: token.to_owned(),
            page_size_max,
            ..Shared::default()
        }));
        let mut router = Router::new();
        for (_, route, ..) in ROUTES {
            router = router.route(route, handler(route));
        }
        let router = router
            .route_layer(axum::middleware::from_fn_with_state(shared.clone(), gate))
            .fallback(unrouted)
            .with_state(shared.clone());
        Self {
            shared,
            serving: Loopback::bind().await.serve(router),
        }
    }

    /// The `api_url` a connector is given.
    pub fn api_url(&self) -> String {
        self.serving.host.clone()
    }

    /// Adds a page; under a page it is also that page's `child_page` block (of the same id).
    pub fn add_page(&self, parent: Parent, title: &str) -> String {
        let mut s = self.shared.lock().unwrap();
        let (id, at) = (s.id(), s.tick());
        s.pages.insert(
            id.clone(),
            PageRec {
                parent: parent.clone(),
                title: title.to_owned(),
                properties: Vec::new(),
                created: at.clone(),
                edited: at.clone(),
                archived: false,
                children: Vec::new(),
            },
        );
        s.order.push(id.clone());
        if let Parent::Page(holder) = &parent {
            s.blocks.insert(
                id.clone(),
                BlockRec {
                    parent: parent.clone(),
                    kind: "child_page".into(),
                    body: json!({ "title": title }),
                    created: at.clone(),
                    edited: at.clone(),
                    archived: false,
                    children: Vec::new(),
                },
            );
            s.pages.get_mut(holder).unwrap().children.push(id.clone());
            s.touch(holder.clone(), &at);
        }
        id
    }

    /// Adds a database with its properties' (name, type); the first is its title.
    pub fn add_database(&self, parent: Parent, title: &str, schema: &[(&str, &str)]) -> String {
        let mut s = self.shared.lock().unwrap();
        let (id, at) = (s.id(), s.tick());
        s.databases.insert(
            id.clone(),
            DatabaseRec {
                parent,
                title: title.to_owned(),
                schema: schema
                    .iter()
                    .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
                    .collect(),
                created: at.clone(),
                edited: at,
                archived: false,
            },
        );
        s.order.push(id.clone());
        id
    }

    /// Adds a row: each property's value as Notion gives it for its type.
    pub fn add_row(&self, database: &str, properties: &[(&str, Value)]) -> String {
        let mut s = self.shared.lock().unwrap();
        let (id, at) = (s.id(), s.tick());
        let title_name = s.databases[database].schema[0].0.clone();
        let title = properties
            .iter()
            .find(|(n, _)| *n == title_name)
            .map(|(_, v)| {
                v.as_array()
                    .unwrap()
                    .iter()
                    .map(|r| r["plain_text"].as_str().unwrap())
                    .collect::<String>()
            })
            .unwrap_or_default();
        s.pages.insert(
            id.clone(),
            PageRec {
                parent: Parent::Database(database.to_owned()),
                title,
                properties: properties
                    .iter()
                    .map(|(n, v)| ((*n).to_owned(), v.clone()))
                    .collect(),
                created: at.clone(),
                edited: at,
                archived: false,
                children: Vec::new(),
            },
        );
        s.order.push(id.clone());
        id
    }

    /// Appends a block of `kind` under a page or block.
    pub fn append(&self, parent: &str, kind: &str, body: Value) -> String {
        let mut s = self.shared.lock().unwrap();
        let (id, at) = (s.id(), s.tick());
        let holder = if s.pages.contains_key(parent) {
            Parent::Page(parent.to_owned())
        } else {
            Parent::Block(parent.to_owned())
        };
        s.blocks.insert(
            id.clone(),
            BlockRec {
                parent: holder,
                kind: kind.to_owned(),
                body,
                created: at.clone(),
                edited: at.clone(),
                archived: false,
                children: Vec::new(),
            },
        );
        match s.blocks.get_mut(parent) {
            Some(block) if block.kind != "child_page" => block.children.push(id.clone()),
            Some(_) | None => s.pages.get_mut(parent).unwrap().children.push(id.clone()),
        }
        s.touch(parent.to_owned(), &at);
        id
    }

    /// Rewrites a block's text, which moves its page's `last_edited_time`.
    pub fn edit_block(&self, id: &str, text: &str) {
        let mut s = self.shared.lock().unwrap();
        let at = s.tick();
        let block = s.blocks.get_mut(id).unwrap();
        block.body = body(&block.kind.clone(), text);
        s.touch(id.to_owned(), &at);
    }

    /// Sets a row's property.
    pub fn edit_row(&self, row: &str, name: &str, value: Value) {
        let mut s = self.shared.lock().unwrap();
        let at = s.tick();
        let page = s.pages.get_mut(row).unwrap();
        page.properties.retain(|(n, _)| n != name);
        page.properties.push((name.to_owned(), value));
        page.edited = at;
    }

    /// Moves a page (or row) to the trash; its `child_page` block goes with it.
    pub fn archive_page(&self, id: &str) {
        let mut s = self.shared.lock().unwrap();
        let at = s.tick();
        let page = s.pages.get_mut(id).unwrap();
        page.archived = true;
        page.edited = at.clone();
        let parent = page.parent.clone();
        if let Some(block) = s.blocks.get_mut(id) {
            block.archived = true;
        }
        if let Parent::Page(holder) = parent {
            s.touch(holder, &at);
        }
    }

    /// The next `count` requests are answered `429` with `Retry-After: retry_after`.
    pub fn rate_limit(&self, count: usize, retry_after: u64) {
        self.shared.lock().unwrap().limited.set(count, retry_after);
    }

    /// Logs every exchange (the default) or none: a benchmark's fake turns its log off.
    /// Accepts, besides its own tokens, the access tokens the authorization server whose
    /// introspection endpoint is `endpoint` holds active (checked with `client_id`, `secret`).
    pub fn accept_introspected(&self, endpoint: &str, client_id: &str, secret: &str) {
        let introspection = crate::serve::Introspection::new(endpoint, client_id, secret);
        self.shared.lock().unwrap().introspection = Some(introspection);
    }

    pub fn set_logging(&self, on: bool) {
        self.shared.lock().unwrap().log.set_on(on);
    }

    /// Every exchange so far, in order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.shared.lock().unwrap().log.all()
    }
}

/// Where `make setup-test` puts Notion's client and the TypeScript compiler.
fn cache() -> std::path::PathBuf {
    let dir = crate::cache_dir().join("notion-api");
    assert!(
        dir.join("client/build/src/api-endpoints.d.ts").is_file()
            && crate::typescript::tsc().is_file(),
        "Notion's API types (@notionhq/client) and the TypeScript compiler are not in {}: run \
         `make setup-test`",
        dir.display()
    );
    dir
}

/// `@notionhq/client`'s endpoint table: by name, its method, path template and parameters.
fn endpoints() -> &'static Value {
    static ENDPOINTS: OnceLock<Value> = OnceLock::new();
    ENDPOINTS.get_or_init(|| {
        let module = cache().join("client/build/src/api-endpoints.js");
        let script = "const e = require(process.argv[1]); const out = {};\
            for (const [name, d] of Object.entries(e)) { if (!d || typeof d.path !== 'function') continue;\
              const p = Object.fromEntries(d.pathParams.map(k => [k, '{' + k + '}']));\
              out[name] = {method: d.method, path: '/v1/' + d.path(p), pathParams: d.pathParams,\
                           queryParams: d.queryParams, bodyParams: d.bodyParams}; }\
            process.stdout.write(JSON.stringify(out));";
        node_json(script, &[module], "Notion")
    })
}

/// The error answer's type: the fields `@notionhq/client` reads of an error (`object`,
/// `status`, `code`, `message`, and Notion's `request_id`), `code` one of its published
/// `APIErrorCode`s.
fn error_type() -> String {
    let errors = std::fs::read_to_string(cache().join("client/build/src/errors.d.ts")).unwrap();
    let start = errors.find("enum APIErrorCode {").expect("APIErrorCode");
    let end = start + errors[start..].find('}').unwrap();
    let codes: Vec<&str> = errors[start..end].split('"').skip(1).step_by(2).collect();
    assert!(codes.contains(&"rate_limited"), "{codes:?}");
    format!(
        "type NotionError = {{ object: \"error\"; status: number; code: {}; message: string; request_id?: string }};\n",
        codes.iter().map(|c| format!("\"{c}\"")).collect::<Vec<_>>().join(" | ")
    )
}

/// The published type each object of an answer must be in full.
fn object_type(object: &Value) -> Option<&'static str> {
    match object.get("object").and_then(Value::as_str) {
        Some("page") => Some("N.PageObjectResponse"),
        Some("database") => Some("N.DatabaseObjectResponse"),
        Some("block") => Some("N.BlockObjectResponse"),
        Some(_) | None => None,
    }
}

/// A query value as its parameter's type wants it (a number for `page_size`).
fn query_value(value: &str) -> Value {
    value
        .parse::<u64>()
        .map(Value::from)
        .unwrap_or_else(|_| Value::from(value))
}

/// Each exchange's problems against `@notionhq/client`'s endpoints and types (one list per
/// exchange, empty when it conforms).
pub fn problems(exchanges: &[Exchange]) -> Vec<Vec<String>> {
    let root = cache();
    let endpoints = endpoints();
    let mut problems = vec![Vec::new(); exchanges.len()];
    let mut ts = Checks::new(format!(
        "import type * as N from {:?};\n{}",
        root.join("client/build/src/api-endpoints")
            .display()
            .to_string(),
        error_type()
    ));
    for (i, exchange) in exchanges.iter().enumerate() {
        let Some((_, _, name, params, answer)) = ROUTES
            .iter()
            .find(|(m, r, ..)| *m == exchange.method && *r == exchange.route)
        else {
            problems[i].push("Notion's client describes no such route and method".into());
            continue;
        };
        let endpoint = &endpoints[*name];
        if endpoint["path"] != *exchange.route
            || endpoint["method"] != exchange.method.to_lowercase()
        {
            problems[i].push(format!(
                "`{name}` is {} {}",
                endpoint["method"], endpoint["path"]
            ));
        }
        let listed =
            |key: &str, name: &str| endpoint[key].as_array().unwrap().iter().any(|p| p == name);
        let mut request = Map::new();
        for (key, value) in &exchange.params {
            request.insert(key.clone(), Value::from(value.clone()));
        }
        for (key, value) in &exchange.query {
            if !listed("queryParams", key) {
                problems[i].push(format!("query parameter `{key}` is not `{name}`'s"));
            }
            request.insert(key.clone(), query_value(value));
        }
        if let Some(body) = &exchange.request {
            for (key, value) in body.as_object().expect("a JSON object body") {
                if !listed("bodyParams", key) {
                    problems[i].push(format!("body parameter `{key}` is not `{name}`'s"));
                }
                request.insert(key.clone(), value.clone());
            }
        }
        let mut block = format!(
            "// {i}: {} {} -> {}\nexport const request_{i}: N.{params} = {};\n",
            exchange.method,
            exchange.route,
            exchange.status,
            Value::Object(request)
        );
        match (&exchange.body, exchange.status) {
            (None, _) => problems[i].push("no body".into()),
            (Some(body), 200) => {
                writeln!(block, "export const answer_{i}: N.{answer} = {body};").unwrap();
                let objects: Vec<&Value> = match body.get("results").and_then(Value::as_array) {
                    Some(results) => results.iter().collect(),
                    None => vec![body],
                };
                for (j, object) in objects.into_iter().enumerate() {
                    match object_type(object) {
                        Some(kind) => {
                            writeln!(block, "export const object_{i}_{j}: {kind} = {object};")
                                .unwrap()
                        }
                        None => problems[i].push(format!("an object of no known kind: {object}")),
                    }
                }
            }
            (Some(body), _) => {
                writeln!(block, "export const answer_{i}: NotionError = {body};").unwrap();
            }
        }
        ts.push(i, &block);
    }
    ts.compile("exchanges.ts", &[], &mut problems);
    problems
}

/// Checks each exchange against `@notionhq/client`'s endpoints and types, and that each sent
/// `Notion-Version: 2022-06-28`; panics with every problem found.
pub fn assert_conforms(exchanges: &[Exchange]) {
    let found = problems(exchanges);
    let mut report = Vec::new();
    for (exchange, problems) in exchanges.iter().zip(found) {
        let at = format!(
            "{} {} -> {}",
            exchange.method, exchange.route, exchange.status
        );
        if !exchange.route.starts_with("UNROUTED") && exchange.version != "2022-06-28" {
            report.push(format!("{at}: Notion-Version `{}`", exchange.version));
        }
        report.extend(problems.into_iter().map(|p| format!("{at}: {p}")));
    }
    assert_no_problems(
        &report,
        "the fake (or the connector) strays from Notion's published API",
    );
}

/// Every route the fake serves, each answer it can give (pages of results, errors, a rate
/// limit), checked against `@notionhq/client`'s published endpoints and types; and the check
/// has teeth.
#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_notion_fake_answers_only_what_notions_published_types_allow() {
        let token = "ntn_conformance";
        let fake = NotionFake::start(token, 2).await;
        let home = fake.add_page(Parent::Workspace, "Handbook");
        let child = fake.add_page(Parent::Page(home.clone()), "On call");
        for (kind, text) in [
            ("heading_1", "Rotation"),
            ("paragraph", "Weekly."),
            ("bulleted_list_item", "Ana"),
            ("numbered_list_item", "Bo"),
            ("to_do", "Swap shifts"),
            ("quote", "Calm."),
            ("callout", "Page twice."),
            ("code", "kubectl get pods"),
            ("toggle", "More"),
        ] {
            fake.append(&child, kind, body(kind, text));
        }
        let table = fake.append(&child, "table", body("table", "2"));
        fake.append(&table, "table_row", body("table_row", "Service | Owner"));
        let db = fake.add_database(
            Parent::Page(home.clone()),
            "Tasks",
            &[
                ("Name", "title"),
                ("Status", "status"),
                ("Tags", "multi_select"),
                ("Done", "checkbox"),
                ("Points", "number"),
                ("Due", "date"),
                ("Owner", "people"),
                ("Link", "url"),
                ("Mail", "email"),
                ("Notes", "rich_text"),
                ("Kind", "select"),
            ],
        );
        fake.add_row(
            &db,
            &[
                ("Name", rich("Fix login")),
                (
                    "Status",
                    json!({"id": "s1", "name": "Done", "color": "green"}),
                ),
                (
                    "Tags",
                    json!([{"id": "t1", "name": "auth", "color": "red"}]),
                ),
                ("Done", json!(true)),
                ("Points", json!(3)),
                (
                    "Due",
                    json!({"start": "2026-03-10", "end": null, "time_zone": null}),
                ),
                ("Owner", json!([{"object": "user", "id": USER}])),
                ("Link", json!("https://example.com")),
                ("Mail", json!("ana@example.com")),
                ("Notes", rich("Safari only")),
                ("Kind", json!(null)),
            ],
        );
        fake.add_row(&db, &[("Name", rich("Write docs"))]);
        let client = reqwest::Client::new();
        let api = fake.api_url();
        let call =
            |method: reqwest::Method, path: String, body: Option<Value>, token: &'static str| {
                let mut request = client
                    .request(method, format!("{api}{path}"))
                    .header("authorization", format!("Bearer {token}"))
                    .header("notion-version", "2022-06-28");
                if let Some(body) = body {
                    request = request.json(&body);
                }
                async move { request.send().await.unwrap() }
            };
        use reqwest::Method;
        let first: Value = call(
            Method::POST,
            "/v1/search".into(),
            Some(json!({"page_size": 100})),
            token,
        )
        .await
        .json()
        .await
        .unwrap();
        let cursor = first["next_cursor"].as_str().unwrap().to_owned();
        call(
            Method::POST,
            "/v1/search".into(),
            Some(json!({"page_size": 100, "start_cursor": cursor})),
            token,
        )
        .await;
        call(
            Method::POST,
            "/v1/search".into(),
            Some(
                json!({"filter": {"property": "object", "value": "database"},
                     "sort": {"timestamp": "last_edited_time", "direction": "descending"}}),
            ),
            token,
        )
        .await;
        call(Method::GET, format!("/v1/pages/{home}"), None, token).await;
        call(
            Method::GET,
            format!("/v1/blocks/{child}/children?page_size=100"),
            None,
            token,
        )
        .await;
        let blocks: Value = call(
            Method::GET,
            format!("/v1/blocks/{child}/children?page_size=100"),
            None,
            token,
        )
        .await
        .json()
        .await
        .unwrap();
        let cursor = blocks["next_cursor"].as_str().unwrap().to_owned();
        call(
            Method::GET,
            format!("/v1/blocks/{child}/children?page_size=100&start_cursor={cursor}"),
            None,
            token,
        )
        .await;
        call(
            Method::GET,
            format!("/v1/blocks/{table}/children"),
            None,
            token,
        )
        .await;
        call(Method::GET, format!("/v1/databases/{db}"), None, token).await;
        call(Method::POST, format!("/v1/databases/{db}/query"),
         Some(json!({"page_size": 100, "sorts": [{"timestamp": "last_edited_time", "direction": "ascending"}],
                     "filter": {"timestamp": "last_edited_time", "last_edited_time": {"on_or_after": "2026-03-01T00:00:00.000Z"}}})),
         token).await;
        fake.archive_page(&child);
        call(Method::GET, format!("/v1/pages/{child}"), None, token).await;
        call(
            Method::GET,
            "/v1/pages/00000000-0000-4000-8000-000000000000".into(),
            None,
            token,
        )
        .await;
        assert_eq!(
            call(Method::GET, format!("/v1/pages/{home}"), None, "ntn_wrong")
                .await
                .status(),
            401
        );
        fake.rate_limit(1, 2);
        let limited = call(Method::GET, format!("/v1/pages/{home}"), None, token).await;
        assert_eq!(limited.status(), 429);
        assert_eq!(limited.headers()["retry-after"], "2");

        let exchanges = fake.exchanges();
        for (method, route, ..) in ROUTES {
            assert!(
                exchanges
                    .iter()
                    .any(|e| e.method == *method && e.route == *route && e.status == 200),
                "{method} {route} was not exercised"
            );
        }
        let statuses: std::collections::BTreeSet<u16> =
            exchanges.iter().map(|e| e.status).collect();
        assert_eq!(statuses, [200, 401, 404, 429].into(), "{exchanges:#?}");

        // The check has teeth: a page without `in_trash`, a heading without `is_toggleable`, a
        // select option of no colour, an error code Notion lacks, an unknown query or body
        // parameter and a route Notion lacks are each caught.
        let answered = |route: &str| {
            exchanges
                .iter()
                .find(|e| e.route == route && e.status == 200)
                .unwrap()
                .clone()
        };
        let mut no_trash = answered("/v1/pages/{page_id}");
        no_trash
            .body
            .as_mut()
            .unwrap()
            .as_object_mut()
            .unwrap()
            .remove("in_trash");
        let mut heading = answered("/v1/blocks/{block_id}/children");
        let first_block = &mut heading.body.as_mut().unwrap()["results"][0];
        assert_eq!(first_block["type"], "heading_1");
        first_block["heading_1"]
            .as_object_mut()
            .unwrap()
            .remove("is_toggleable");
        let mut colourless = answered("/v1/databases/{database_id}/query");
        colourless.body.as_mut().unwrap()["results"][0]["properties"]["Status"]["status"]
            ["color"] = json!("teal");
        let mut code = exchanges.iter().find(|e| e.status == 404).unwrap().clone();
        code.body.as_mut().unwrap()["code"] = json!("page_missing");
        let mut query = answered("/v1/blocks/{block_id}/children");
        query.query.push(("cursor".into(), "x".into()));
        let mut search_body = answered("/v1/search");
        search_body.request.as_mut().unwrap()["limit"] = json!(5);
        let mut unrouted = answered("/v1/search");
        unrouted.route = "/v1/pages".into();
        let strays = [
            no_trash,
            heading,
            colourless,
            code,
            query,
            search_body,
            unrouted,
        ];
        let mut all = exchanges.clone();
        all.extend(strays.iter().cloned());
        let found = problems(&all);
        let (good, bad) = found.split_at(exchanges.len());
        assert!(good.iter().all(Vec::is_empty), "{good:#?}");
        for (stray, problems) in strays.iter().zip(bad) {
            assert!(!problems.is_empty(), "{stray:#?} passed");
        }
    }
}
