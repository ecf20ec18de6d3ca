//! The console's pages: sign-in, databases, a database's items and uploads, an item. Every
//! value shown is escaped by maud; every read and action is an [`App`] call as the session's key.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::Extension;
use engram_app::{
    App, ChunksRequest, CreateDatabase, DatabaseRecord, ItemRecord, ListRequest, RelationsRequest,
};
use engram_types::{DatabaseName, IndexingStatus, ItemKind};
use maud::{html, Markup, DOCTYPE};
use serde::Deserialize;
use serde_json::Value;

use super::session::{to, Session};
use super::{html as page_response, Page};
use crate::error::ApiError;
use crate::form::Form;

/// Items per page of the items list.
const ITEMS_PER_PAGE: i64 = 25;
/// Relations shown on an item's page.
const ITEM_RELATIONS: i64 = 200;

/// htmx's settings: no inline styles, `eval` or script tags (the CSP allows none), requests to
/// this origin only, and refusals (4xx, 5xx) swapped into the page like answers, so a form
/// shows why it was refused.
const HTMX_CONFIG: &str = r#"{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,"selfRequestsOnly":true,"responseHandling":[{"code":"204","swap":false},{"code":"[23]..","swap":true},{"code":"[45]..","swap":true,"error":true}]}"#;

/// The frame of every page. `session` is `None` on the sign-in page.
pub(super) fn layout(title: &str, session: Option<&Session>, body: Markup) -> Markup {
    let headers = session.map(|s| serde_json::json!({ "X-CSRF-Token": s.csrf }).to_string());
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="htmx-config" content=(HTMX_CONFIG);
                title { (title) " · engram console" }
                link rel="stylesheet" href="/console/assets/console.css";
                link rel="stylesheet" href="/console/assets/uPlot.min.css";
                script src="/console/assets/htmx.min.js" defer {}
                script src="/console/assets/cytoscape.min.js" defer {}
                script src="/console/assets/uPlot.iife.min.js" defer {}
                script src="/console/assets/console.js" defer {}
            }
            body hx-headers=[headers] {
                a class="skip" href="#main" { "Skip to content" }
                header class="top" {
                    a class="brand" href="/console/databases" { "engram" }
                    @if let Some(s) = session {
                        nav aria-label="Console" {
                            a href="/console/databases" { "Databases" }
                            a href="/console/connectors" { "Connectors" }
                            a href="/console/webhooks" { "Webhooks" }
                            a href="/console/operations" { "Operations" }
                        }
                        span class="who" { "Key " code { (s.who.key.to_string()) } " · organization " code { (s.who.org.to_string()) } }
                        form id="sign-out" method="post" action="/console/sign-out" hx-post="/console/sign-out" {
                            button type="submit" class="link" { "Sign out" }
                        }
                    }
                }
                main id="main" tabindex="-1" {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// The sign-in page, with why the last try failed.
pub(super) fn sign_in(error: Option<&str>) -> Markup {
    layout(
        "Sign in",
        None,
        html! {
            p { "Sign in with an API key. Make one with " code { "engram keys create --org <organization>" } "." }
            form id="sign-in" method="post" action="/console/sign-in" class="card narrow" {
                label for="key" { "API key" }
                input id="key" name="key" type="password" autocomplete="off" required autofocus;
                @if let Some(error) = error {
                    p class="error" role="alert" { (error) }
                }
                button type="submit" { "Sign in" }
            }
            p class="hint" { "The key stays on the server, sealed in a cookie. The session ends when this tab closes (a tab opened from it shares it) or after a while without use." }
        },
    )
}

/// An error shown in place of a form's result, or as a page's body.
pub(super) fn error_fragment(code: &str, message: &str) -> Markup {
    html! {
        div class="error" role="alert" {
            strong { (code) } ": " (message)
        }
    }
}

/// An error as a whole page, for a page the browser asked for itself.
pub(super) fn error_page(code: &str, message: &str, session: Option<&Session>) -> Markup {
    layout(
        "Not possible",
        session,
        html! {
            (error_fragment(code, message))
            p { a href="/console/databases" { "Back to the databases" } " · " a href="/console" { "Sign in" } }
        },
    )
}

pub(super) fn database_name(raw: &str) -> Result<DatabaseName, ApiError> {
    engram_app::parse_database_name("database", raw).map_err(ApiError::from)
}

/// The sections of a database's pages.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Tab {
    Items,
    Search,
    Memories,
    Graph,
}

/// The tabs of a database's pages, `current` marked.
pub(super) fn tabs(db: &DatabaseName, current: Tab) -> Markup {
    let href = database_href(db);
    let tabs = [
        (Tab::Items, "Items", href.clone()),
        (Tab::Search, "Search", format!("{href}/search")),
        (Tab::Memories, "Memories", format!("{href}/memories")),
        (Tab::Graph, "Graph", format!("{href}/graph")),
    ];
    html! {
        nav class="tabs" aria-label="Database" {
            @for (tab, label, link) in tabs {
                a href=(link) aria-current=[(tab == current).then_some("page")] { (label) }
            }
        }
    }
}

pub(super) fn database_href(db: &DatabaseName) -> String {
    format!("/console/databases/{}", urlencoding(db.as_str()))
}

pub(super) fn item_href(db: &DatabaseName, item: &ItemRecord) -> String {
    item_path(db, item.collection.as_str(), &item.id, "")
}

/// The address of an item's page (`action` empty), or of one of its actions (`/status`,
/// `/delete`). The id goes in the query string: an id like `..` in a path would be resolved
/// away by the browser.
pub(super) fn item_path(db: &DatabaseName, collection: &str, id: &str, action: &str) -> String {
    format!(
        "{}/item{action}?id={}&collection={}",
        database_href(db),
        urlencoding(id),
        urlencoding(collection)
    )
}

/// Percent-encodes a path segment or query value.
pub(super) fn urlencoding(text: &str) -> String {
    url_escape(text)
}

fn url_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(super) fn status_badge(status: IndexingStatus) -> Markup {
    html! { span class={ "badge " (status.as_str()) } { (status.as_str()) } }
}

pub(super) fn time(ms: engram_app::UnixMs) -> Markup {
    let text = ms.rfc3339();
    html! { time datetime=(text) { (text.get(..19).unwrap_or(&text).replace('T', " ")) } }
}

/// A byte count as people read it (`512 B`, `1.5 KiB`, `20.3 MiB`), the exact count in its title.
pub(super) fn bytes(n: u64) -> Markup {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let (mut value, mut unit) = (n as f64, 0);
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let shown = if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    };
    html! { span title={ (n) " bytes" } { (shown) } }
}

// ---------------------------------------------------------------------------------------------
// Databases

/// Databases on one page of the list (each row reads its counts).
const DATABASES_PER_PAGE: usize = 25;

#[derive(Deserialize)]
pub(super) struct PageQuery {
    #[serde(default)]
    page: Option<i64>,
}

pub(super) async fn databases(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Query(query): Query<PageQuery>,
) -> Page {
    let databases = app.list_databases(&session.who).await?;
    let page = query.page.unwrap_or(1);
    if page < 1 {
        return Err(ApiError::invalid("`page` must be 1 or more").into());
    }
    let pages = databases.len().div_ceil(DATABASES_PER_PAGE) as u64;
    let shown = databases
        .into_iter()
        .skip(
            usize::try_from(page - 1)
                .unwrap_or(usize::MAX)
                .saturating_mul(DATABASES_PER_PAGE),
        )
        .take(DATABASES_PER_PAGE);
    let mut rows = Vec::with_capacity(DATABASES_PER_PAGE);
    for db in shown {
        // A database being deleted may be gone by now: its counts are left blank.
        let counts = app.database_stats(&session.who, &db.name).await.ok();
        let states = item_counts(&app, &session, &db.name).await.ok();
        let graph = app.graph_size(&session.who, &db.name).await.ok();
        rows.push((db, counts, states, graph));
    }
    let admin = session.who.require(engram_types::Scope::Admin).is_ok();
    Ok(page_response(layout(
        "Databases",
        Some(&session),
        html! {
            @if rows.is_empty() {
                p { "No database yet." }
            } @else {
                table {
                    caption class="visually-hidden" { "Databases" }
                    thead { tr { th scope="col" { "Name" } th scope="col" { "State" } th scope="col" { "Items" } th scope="col" { "Collections" } th scope="col" { "Knowledge chunks" } th scope="col" { "Memory chunks" } th scope="col" { "Size" } th scope="col" { "Entities" } th scope="col" { "Schema fields" } th scope="col" { "Created" } } }
                    tbody {
                        @for (db, stats, states, graph) in &rows {
                            tr {
                                td { a href=(database_href(&db.name)) { (db.name.as_str()) } }
                                td { span class={ "badge " (db.state.as_str()) } { (db.state.as_str()) } }
                                td {
                                    @for (state, count) in states.iter().flatten() {
                                        @if *count > 0 { span class={ "badge " (state) } { (state) " " (count) } " " }
                                    }
                                }
                                @if let Some(stats) = stats {
                                    td class="num" { (stats.counts.collections) }
                                    td class="num" { (stats.counts.knowledge_chunks) }
                                    td class="num" { (stats.counts.memory_chunks) }
                                    td class="num" { (bytes(stats.counts.stored_bytes)) }
                                } @else {
                                    td {} td {} td {} td {}
                                }
                                td class="num" { @if let Some(graph) = graph { (graph.entities) } }
                                td class="num" { (db.schema.fields().len()) }
                                td { (time(db.created_at)) }
                            }
                        }
                    }
                }
            }
            (pager(page, pages, |p| format!("/console/databases?page={p}")))
            @if admin {
                h2 { "Create a database" }
                form method="post" action="/console/databases" hx-post="/console/databases" hx-target="#create-result" class="card" {
                    label for="name" { "Name" }
                    input id="name" name="name" required maxlength="64" pattern="[A-Za-z0-9_\\-]+" aria-describedby="name-hint";
                    p id="name-hint" class="hint" { "Letters, digits, '-' and '_'." }
                    label for="schema" { "Metadata schema (optional, JSON)" }
                    textarea id="schema" name="schema" rows="4" placeholder=r#"[{"name": "team", "data_type": "VARCHAR", "enable_match": true}]"# {}
                    button type="submit" { "Create" }
                    div id="create-result" aria-live="polite" {}
                }
            }
        },
    )))
}

#[derive(Deserialize)]
pub(super) struct CreateForm {
    name: String,
    #[serde(default)]
    schema: String,
}

pub(super) async fn create_database(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    headers: HeaderMap,
    super::UrlForm(form): super::UrlForm<CreateForm>,
) -> Page {
    let schema = if form.schema.trim().is_empty() {
        Vec::new()
    } else {
        serde_json::from_str::<Vec<crate::wire::FieldDto>>(&form.schema)
            .map_err(|e| {
                ApiError::invalid(format!("the metadata schema is not a list of fields: {e}"))
            })?
            .into_iter()
            .map(Into::into)
            .collect()
    };
    let db = app
        .create_database(
            &session.who,
            CreateDatabase {
                name: form.name.trim().to_owned(),
                schema,
                embeddings_dimension: None,
                is_embeddings_tenant: false,
            },
        )
        .await?;
    Ok(to(&database_href(&db.name), &headers))
}

#[derive(Deserialize)]
pub(super) struct DeleteForm {
    #[serde(default)]
    confirm: String,
}

pub(super) async fn delete_database(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(database): Path<String>,
    headers: HeaderMap,
    super::UrlForm(form): super::UrlForm<DeleteForm>,
) -> Page {
    let name = database_name(&database)?;
    if form.confirm != name.as_str() {
        return Err(ApiError::invalid(format!(
            "type the database's name `{}` to confirm its deletion",
            name.as_str()
        ))
        .into());
    }
    app.delete_database(&session.who, &name).await?;
    Ok(to("/console/databases", &headers))
}

// ---------------------------------------------------------------------------------------------
// A database: its items, uploads, deletion

/// The items list's filters (the query string of the page and of its fragment).
#[derive(Debug, Default, Deserialize)]
pub(super) struct ItemFilters {
    #[serde(default)]
    collection: String,
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    metadata: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    page: Option<i64>,
}

impl ItemFilters {
    fn query(&self, page: i64) -> String {
        format!(
            "collection={}&type={}&state={}&metadata={}&page={page}",
            urlencoding(&self.collection),
            urlencoding(&self.kind),
            urlencoding(&self.state),
            urlencoding(&self.metadata)
        )
    }

    /// The states asked for: `pending` is every state before the end.
    fn statuses(&self) -> Result<Vec<IndexingStatus>, ApiError> {
        Ok(match self.state.as_str() {
            "" => Vec::new(),
            "pending" => vec![
                IndexingStatus::Queued,
                IndexingStatus::Processing,
                IndexingStatus::GraphCreation,
            ],
            "completed" => vec![IndexingStatus::Completed],
            "errored" => vec![IndexingStatus::Errored],
            other => return Err(ApiError::invalid(format!("unknown state `{other}`"))),
        })
    }
}

pub(super) async fn database(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(database): Path<String>,
    Query(filters): Query<ItemFilters>,
) -> Page {
    let name = database_name(&database)?;
    let stats = app.database_stats(&session.who, &name).await?;
    let collections = app.list_collections(&session.who, &name).await?;
    let states = item_counts(&app, &session, &name).await?;
    let graph = app.graph_size(&session.who, &name).await?;
    let items = items_table(&app, &session, &stats.database, &filters).await?;
    let db = &stats.database;
    let writes = session.who.require(engram_types::Scope::Write).is_ok();
    let admin = session.who.require(engram_types::Scope::Admin).is_ok();
    let href = database_href(&db.name);
    Ok(page_response(layout(
        db.name.as_str(),
        Some(&session),
        html! {
            (tabs(&db.name, Tab::Items))
            dl class="facts" {
                dt { "State" } dd { span class={ "badge " (db.state.as_str()) } { (db.state.as_str()) } }
                dt { "Items" } dd {
                    @for (state, count) in &states { span class={ "badge " (state) } { (state) " " (count) } " " }
                }
                dt { "Entities" } dd { (graph.entities) " (" (graph.relations) " relations)" }
                dt { "Collections" } dd { (stats.counts.collections) }
                dt { "Knowledge chunks" } dd { (stats.counts.knowledge_chunks) }
                dt { "Memory chunks" } dd { (stats.counts.memory_chunks) }
                dt { "Size" } dd { (bytes(stats.counts.stored_bytes)) }
                dt { "Default collection" } dd { code { (db.default_collection.as_str()) } }
                dt { "Schema" } dd {
                    @if db.schema.fields().is_empty() { "none" }
                    @for field in db.schema.fields() {
                        code { (field.name) } " "
                    }
                }
            }
            h2 { "Items" }
            form method="get" action=(href) class="filters" hx-get={ (href) "/items" } hx-target="#items" hx-push-url="false" {
                label for="f-collection" { "Collection" }
                select id="f-collection" name="collection" {
                    option value="" { "default" }
                    option value="*" selected[filters.collection == "*"] { "all collections" }
                    @for c in &collections {
                        option value=(c.as_str()) selected[filters.collection == c.as_str()] { (c.as_str()) }
                    }
                }
                label for="f-type" { "Type" }
                select id="f-type" name="type" {
                    option value="knowledge" selected[filters.kind.is_empty() || filters.kind == "knowledge"] { "knowledge" }
                    option value="any" selected[filters.kind == "any"] { "any" }
                    option value="memory" selected[filters.kind == "memory"] { "memory" }
                }
                label for="f-state" { "State" }
                select id="f-state" name="state" {
                    @for (value, label) in [("", "any"), ("pending", "indexing"), ("completed", "completed"), ("errored", "errored")] {
                        option value=(value) selected[filters.state == value] { (label) }
                    }
                }
                label for="f-metadata" { "Metadata (JSON)" }
                input id="f-metadata" name="metadata" value=(filters.metadata) placeholder=r#"{"team": "docs"}"#;
                button type="submit" { "Filter" }
            }
            div id="items" { (items) }
            @if writes {
                h2 { "Upload" }
                form id="upload" method="post" action={ (href) "/upload" } hx-post={ (href) "/upload" } hx-encoding="multipart/form-data" hx-target="#upload-result" class="card" {
                    label for="u-collection" { "Collection (optional)" }
                    input id="u-collection" name="collection" list="collections";
                    datalist id="collections" { @for c in &collections { option value=(c.as_str()) {} } }
                    label for="u-files" { "Files (PDF, Office, iWork, spreadsheets, images, CSV, Markdown, text)" }
                    input id="u-files" name="documents" type="file" multiple;
                    label for="u-app" { "App content (optional, JSON list as in app_knowledge)" }
                    textarea id="u-app" name="app_knowledge" rows="3" placeholder=r#"[{"id": "doc-1", "title": "A note", "content": {"text": "..."}}]"# {}
                    progress id="upload-progress" value="0" max="100" aria-label="Upload progress" {}
                    button type="submit" { "Upload" }
                    div id="upload-result" aria-live="polite" {}
                }
            }
            @if admin {
                h2 { "Delete this database" }
                form method="post" action={ (href) "/delete" } hx-post={ (href) "/delete" } hx-target="#delete-result" class="card danger" {
                    label for="confirm" { "Type " code { (db.name.as_str()) } " to delete it and everything in it" }
                    input id="confirm" name="confirm" autocomplete="off" required;
                    button type="submit" class="danger" { "Delete database" }
                    div id="delete-result" aria-live="polite" {}
                }
            }
        },
    )))
}

/// How many items the database holds in each state (indexing, completed, errored).
async fn item_counts(
    app: &App,
    session: &Session,
    name: &DatabaseName,
) -> Result<Vec<(&'static str, u64)>, ApiError> {
    let counts = app.item_status_counts(&session.who, name, &[]).await?;
    let sum = |wanted: &[IndexingStatus]| -> u64 {
        counts
            .iter()
            .filter(|(state, _)| wanted.contains(state))
            .map(|(_, n)| n)
            .sum()
    };
    Ok(vec![
        (
            "indexing",
            sum(&[
                IndexingStatus::Queued,
                IndexingStatus::Processing,
                IndexingStatus::GraphCreation,
            ]),
        ),
        ("completed", sum(&[IndexingStatus::Completed])),
        ("errored", sum(&[IndexingStatus::Errored])),
    ])
}

/// The items list alone (filtering and live refresh).
pub(super) async fn items_fragment(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(database): Path<String>,
    Query(filters): Query<ItemFilters>,
) -> Page {
    let name = database_name(&database)?;
    let db = app.database(&session.who, &name).await?;
    Ok(page_response(
        items_table(&app, &session, &db, &filters).await?,
    ))
}

async fn items_table(
    app: &App,
    session: &Session,
    db: &DatabaseRecord,
    filters: &ItemFilters,
) -> Result<Markup, ApiError> {
    // Knowledge by default (memories have their own page): the listing's index then gives
    // the newest first without sorting the database's items.
    let kind = match filters.kind.as_str() {
        "any" => None,
        "" | "knowledge" => Some(ItemKind::Knowledge),
        "memory" => Some(ItemKind::Memory),
        other => return Err(ApiError::invalid(format!("unknown type `{other}`"))),
    };
    let metadata = if filters.metadata.trim().is_empty() {
        serde_json::Map::new()
    } else {
        match serde_json::from_str::<Value>(&filters.metadata) {
            Ok(Value::Object(map)) => map,
            _ => {
                return Err(ApiError::invalid(
                    "the metadata filter must be a JSON object such as {\"team\": \"docs\"}",
                ))
            }
        }
    };
    let page = filters.page.unwrap_or(1);
    let listing = app
        .list_items(
            &session.who,
            &db.name,
            ListRequest {
                collection: Some(filters.collection.clone()).filter(|c| !c.is_empty() && c != "*"),
                every_collection: filters.collection == "*",
                kind,
                page: Some(page),
                page_size: Some(ITEMS_PER_PAGE),
                metadata,
                statuses: filters.statuses()?,
                ..ListRequest::default()
            },
        )
        .await?;
    let pending = listing.page.items.iter().any(|i| !terminal(i.status));
    let pages = listing.total_pages().max(1);
    let fragment = format!("{}/items?{}", database_href(&db.name), filters.query(page));
    Ok(html! {
        div hx-get=[pending.then_some(&fragment)] hx-trigger=[pending.then_some("every 2s")] hx-headers=[pending.then_some(super::POLL)] hx-swap="outerHTML" hx-target="this" {
            p class="hint" { (listing.page.total) " items" @if pending { " · refreshing while some are indexing" } }
            @if !listing.page.items.is_empty() {
                table {
                    caption class="visually-hidden" { "Items" }
                    thead { tr { th scope="col" { "Title" } th scope="col" { "Id" } th scope="col" { "Type" } th scope="col" { "Collection" } th scope="col" { "Status" } th scope="col" { "Updated" } } }
                    tbody {
                        @for item in &listing.page.items {
                            tr {
                                td { a href=(item_href(&db.name, item)) { (item.label()) } }
                                td { code { (item.id) } }
                                td { (item.kind.as_str()) }
                                td { (item.collection.as_str()) }
                                td { (status_badge(item.status)) }
                                td { (time(item.updated_at)) }
                            }
                        }
                    }
                }
            }
            (pager(page, pages, |p| format!("{}?{}", database_href(&db.name), filters.query(p))))
        }
    })
}

/// The previous and next links of a paginated list, `href(n)` the address of page `n`; past the
/// last page (a list that shrank), a link back to the last.
pub(super) fn pager(page: i64, pages: u64, href: impl Fn(i64) -> String) -> Markup {
    let last = i64::try_from(pages.max(1)).unwrap_or(i64::MAX);
    html! {
        @if page > 1 || last > 1 {
            nav class="pager" aria-label="Pages" {
                @if page > last {
                    a href=(href(last)) rel="prev" { "← Last page" }
                } @else if page > 1 {
                    a href=(href(page - 1)) rel="prev" { "← Previous" }
                }
                span { "Page " (page) " of " (last) }
                @if page < last {
                    a href=(href(page + 1)) rel="next" { "Next →" }
                }
            }
        }
    }
}

fn terminal(status: IndexingStatus) -> bool {
    matches!(status, IndexingStatus::Completed | IndexingStatus::Errored)
}

/// Uploads files and app content: the same multipart form and the same ingestion as
/// `POST /context/ingest` (the database from the path).
pub(super) async fn upload(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(database): Path<String>,
    form: Form,
) -> Page {
    let name = database_name(&database)?;
    let mut deprecations = crate::wire::Deprecations::default();
    let mut ignored = crate::wire::Ignored::default();
    let form = form.console_upload(name.as_str());
    let (_, request) = crate::current::ingest_request(&form, &mut deprecations, &mut ignored)?;
    let crate::current::Ingest::Knowledge(request) = request else {
        return Err(ApiError::invalid("the console uploads knowledge").into());
    };
    if request.files.is_empty() && request.app_knowledge.is_empty() {
        return Err(ApiError::invalid("choose a file or give app content").into());
    }
    let outcome = app.ingest_knowledge(&session.who, &name, request).await?;
    Ok(page_response(html! {
        p { (outcome.success_count()) " accepted, " (outcome.failed_count()) " refused, into collection " code { (outcome.collection.as_str()) } "." }
        ul {
            @for result in &outcome.results {
                li {
                    @if result.status.is_some() {
                        a href=(item_path(&name, outcome.collection.as_str(), &result.id, "")) { (if result.title.is_empty() { &result.id } else { &result.title }) }
                        " queued"
                    } @else {
                        span class="error" { (result.filename) ": " (result.error) }
                    }
                }
            }
        }
    }))
}

// ---------------------------------------------------------------------------------------------
// An item

#[derive(Debug, Default, Deserialize)]
pub(super) struct ItemQuery {
    #[serde(default)]
    id: String,
    #[serde(default)]
    collection: String,
}

impl ItemQuery {
    fn collection(&self) -> Option<&str> {
        Some(self.collection.as_str()).filter(|c| !c.is_empty())
    }
}

pub(super) async fn item(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(database): Path<String>,
    Query(query): Query<ItemQuery>,
) -> Page {
    let name = database_name(&database)?;
    let (db, item) = find_item(&app, &session, &name, &query).await?;
    let status = status_fragment(&app, &session, &db.name, &item).await?;
    let chunks = if item.status == IndexingStatus::Completed {
        app.read_chunks(
            &session.who,
            &db.name,
            ChunksRequest {
                collection: Some(item.collection.as_str().to_owned()),
                id: Some(item.id.clone()),
                kind: Some(item.kind),
                limit: Some(i64::from(engram_app::CHUNKS_MAX)),
                ..ChunksRequest::default()
            },
        )
        .await?
        .chunks
    } else {
        Vec::new()
    };
    let relations = app
        .item_relations(
            &session.who,
            &db.name,
            RelationsRequest {
                collection: Some(item.collection.as_str()),
                id: &item.id,
                kind: item.kind,
                limit: Some(ITEM_RELATIONS),
                cursor: None,
                default_limit: 100,
            },
        )
        .await
        .map(|page| page.relations)
        .unwrap_or_default();
    let history = app
        .item_history(
            &session.who,
            &db.name,
            Some(item.collection.as_str()),
            &item.id,
        )
        .await?;
    let writes = session.who.require(engram_types::Scope::Write).is_ok();
    let fields = &item.fields;
    Ok(page_response(layout(
        item.label(),
        Some(&session),
        html! {
            p { a href=(database_href(&db.name)) { "← " (db.name.as_str()) } }
            dl class="facts" {
                dt { "Id" } dd { code { (item.id) } }
                dt { "Type" } dd { (item.kind.as_str()) }
                dt { "Collection" } dd { (item.collection.as_str()) }
                @if !fields.filename.is_empty() { dt { "File" } dd { (fields.filename) } }
                @if !fields.media_type.is_empty() { dt { "Media type" } dd { (fields.media_type) } }
                @if !fields.url.is_empty() { dt { "URL" } dd { (fields.url) } }
                @if !fields.timestamp.is_empty() { dt { "Timestamp" } dd { (fields.timestamp) } }
                dt { "Created" } dd { (time(item.created_at)) }
                dt { "Updated" } dd { (time(item.updated_at)) }
                dt { "Status" } dd { (status) }
            }
            @if !is_empty_json(&fields.metadata) || !is_empty_json(&fields.additional_metadata) {
                h2 { "Metadata" }
                pre class="json" { (pretty(&fields.metadata)) }
                @if !is_empty_json(&fields.additional_metadata) {
                    pre class="json" { (pretty(&fields.additional_metadata)) }
                }
            }
            h2 { "History" }
            @if history.is_empty() {
                p class="hint" { "No history was kept for this item (it was stored before engram kept one)." }
            } @else {
                table class="history" {
                    caption class="visually-hidden" { "Indexing history" }
                    thead { tr { th scope="col" { "When" } th scope="col" { "State" } th scope="col" { "Error" } } }
                    tbody {
                        @for entry in &history {
                            tr {
                                td { (time(entry.at)) }
                                td { (status_badge(entry.status)) }
                                td {
                                    @if !entry.error_code.is_empty() { code { (entry.error_code) } " " }
                                    span class="error" { (entry.error_message) }
                                }
                            }
                        }
                    }
                }
            }
            h2 { "Chunks (" (chunks.len()) ")" }
            @if chunks.is_empty() {
                p class="hint" { "Chunks show once the item is indexed." }
            }
            ol class="chunks" {
                @for chunk in &chunks {
                    li class="chunk" id={ "chunk-" (chunk.chunk_id) } {
                        p class="layout" {
                            code { (chunk.chunk_id) }
                            @for (key, value) in layout_parts(&chunk.layout) {
                                " · " (key) " " (value)
                            }
                        }
                        div class="text" { (chunk.content) }
                    }
                }
            }
            h2 { "Entities and relations (" (relations.len()) ")" }
            @if relations.is_empty() {
                p class="hint" { "None extracted." }
            } @else {
                table {
                    caption class="visually-hidden" { "Relations" }
                    thead { tr { th scope="col" { "Source" } th scope="col" { "Relation" } th scope="col" { "Target" } th scope="col" { "Evidence" } } }
                    tbody {
                        @for r in &relations {
                            tr {
                                td { a href={ (database_href(&db.name)) "/graph?entity=" (urlencoding(&r.source.name)) } { (r.source.name) } " " span class="hint" { (r.source.kind) } }
                                td { (predicate(r)) }
                                td { a href={ (database_href(&db.name)) "/graph?entity=" (urlencoding(&r.target.name)) } { (r.target.name) } " " span class="hint" { (r.target.kind) } }
                                td { a href={ "#chunk-" (r.chunk_id) } { (r.context) } }
                            }
                        }
                    }
                }
            }
            @if writes {
                h2 { "Delete" }
                form method="post" action=(item_action(&db.name, &item, "delete")) hx-post=(item_action(&db.name, &item, "delete")) hx-target="#delete-result" hx-confirm="Delete this item and its chunks?" class="card danger" {
                    button type="submit" class="danger" { "Delete item" }
                    div id="delete-result" aria-live="polite" {}
                }
            }
        },
    )))
}

/// The item of a page, with its database.
async fn find_item(
    app: &App,
    session: &Session,
    database: &DatabaseName,
    query: &ItemQuery,
) -> Result<(DatabaseRecord, ItemRecord), ApiError> {
    let id = query.id.clone();
    let listing = app
        .list_items(
            &session.who,
            database,
            ListRequest {
                collection: query.collection().map(str::to_owned),
                ids: vec![id.clone()],
                page_size: Some(1),
                ..ListRequest::default()
            },
        )
        .await?;
    match listing.page.items.into_iter().next() {
        Some(item) => Ok((listing.database, item)),
        None => Err(engram_app::AppError::SourceNotFound(id).into()),
    }
}

fn item_action(db: &DatabaseName, item: &ItemRecord, action: &str) -> String {
    item_path(
        db,
        item.collection.as_str(),
        &item.id,
        &format!("/{action}"),
    )
}

/// An item's status, polled while it is not terminal; its error code and message when it failed.
async fn status_fragment(
    app: &App,
    session: &Session,
    db: &DatabaseName,
    item: &ItemRecord,
) -> Result<Markup, ApiError> {
    let (_, statuses) = app
        .item_statuses(
            &session.who,
            db,
            Some(item.collection.as_str()),
            std::slice::from_ref(&item.id),
        )
        .await?;
    let status = statuses.into_iter().next().and_then(|(_, s)| s);
    let Some(status) = status else {
        return Ok(html! { span { "gone" } });
    };
    let poll = (!terminal(status.status)).then(|| item_action(db, item, "status"));
    let reload = poll.is_some();
    Ok(html! {
        span hx-get=[poll] hx-trigger=[reload.then_some("every 2s")] hx-headers=[reload.then_some(super::POLL)] hx-swap="outerHTML" data-status=(status.status.as_str()) {
            (status_badge(status.status))
            @if !status.error_code.is_empty() || !status.error_message.is_empty() {
                " " code { (status.error_code) } " " span class="error" { (status.error_message) }
            }
        }
    })
}

pub(super) async fn item_status(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(database): Path<String>,
    Query(query): Query<ItemQuery>,
    headers: HeaderMap,
) -> Page {
    let name = database_name(&database)?;
    let (_, item) = find_item(&app, &session, &name, &query).await?;
    if terminal(item.status) {
        // Indexed or failed: the whole page again, with its chunks.
        return Ok(to(&item_href(&name, &item), &headers));
    }
    Ok(page_response(
        status_fragment(&app, &session, &name, &item).await?,
    ))
}

pub(super) async fn delete_item(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(database): Path<String>,
    Query(query): Query<ItemQuery>,
    headers: HeaderMap,
) -> Page {
    let name = database_name(&database)?;
    app.delete_items(
        &session.who,
        &name,
        query.collection(),
        None,
        std::slice::from_ref(&query.id),
    )
    .await?;
    Ok(to(&database_href(&name), &headers))
}

pub(super) fn is_empty_json(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// A chunk's layout (page, sheet, heading path…) as label and value pairs.
fn layout_parts(layout: &Value) -> Vec<(String, String)> {
    let Some(map) = layout.as_object() else {
        return Vec::new();
    };
    map.iter()
        .map(|(key, value)| {
            let shown = match value {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(" › "),
                other => other.to_string(),
            };
            (key.replace('_', " "), shown)
        })
        .collect()
}

/// What a relation says: as the text put it, else its canonical form.
pub(super) fn predicate(relation: &engram_app::RelationRecord) -> &str {
    if relation.raw_predicate.is_empty() {
        &relation.canonical_predicate
    } else {
        &relation.raw_predicate
    }
}
