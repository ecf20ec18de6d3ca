//! The console's connectors pages: the catalog of providers and the organization's connectors
//! with their health; a create form generated from the provider's `credential_schema`;
//! a connector's settings (never its secrets), health, latest runs and resources, discovery and
//! the choice of what to sync, pause and resume, sync now, settings and credential updates,
//! deletion. Every read and action is the [`App`] call the connector routes make
//! (`current/connectors.rs`), as the session's key: the admin scope, the key's databases and
//! the organization's walls hold as they do for the API.

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Extension, Router};
use engram_app::{
    App, ConnectorStatus, ConnectorView, CreateConnector, DiscoveredResource, ProviderInfo,
    ResourceMapping, ResourceRecord, RunRecord, SyncStatus, UnixMs, UpdateConnector,
};
use engram_types::Scope;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::pages::{error_fragment, layout, urlencoding};
use super::session::{to, Session};
use super::{html as page_response, Page, UrlForm};
use crate::error::ApiError;

/// Where the connectors pages live.
const BASE: &str = "/console/connectors";
/// The prefix of a credential field's form name (`cred.token`), apart from the settings.
const CRED: &str = "cred.";

/// The connectors routes (signed in: merged under the session's guard).
pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/console/connectors", get(list).post(create))
        .route("/console/connectors/new", get(new))
        .route("/console/connectors/preview", post(preview))
        .route("/console/connectors/{id}", get(connector))
        .route("/console/connectors/{id}/status", get(live_fragment))
        .route("/console/connectors/{id}/discover", get(discover))
        .route("/console/connectors/{id}/configure", post(configure))
        .route(
            "/console/connectors/{id}/resources/remove",
            post(remove_resource),
        )
        .route("/console/connectors/{id}/pause", post(act::<PAUSE>))
        .route("/console/connectors/{id}/resume", post(act::<RESUME>))
        .route("/console/connectors/{id}/sync", post(act::<SYNC>))
        .route("/console/connectors/{id}/update", post(update))
        .route("/console/connectors/{id}/oauth", post(oauth))
        .route("/console/connectors/{id}/delete", post(delete))
}

fn connector_href(id: &str) -> String {
    format!("{BASE}/{}", urlencoding(id))
}

fn database_href(name: &str) -> String {
    format!("/console/databases/{}", urlencoding(name))
}

/// A connector's name, or its provider when it has none.
fn label(view: &ConnectorView) -> &str {
    if view.record.name.is_empty() {
        &view.record.provider
    } else {
        &view.record.name
    }
}

fn when(ms: UnixMs) -> Markup {
    let text = ms.rfc3339();
    html! { time datetime=(text) { (text.get(..19).unwrap_or(&text).replace('T', " ")) } }
}

fn maybe_when(ms: Option<UnixMs>, none: &str) -> Markup {
    match ms {
        Some(ms) => when(ms),
        None => html! { span class="hint" { (none) } },
    }
}

/// Seconds in words: `15 min`, `1 h`, `7 d`.
fn every(seconds: u32) -> String {
    match seconds {
        0 => "0 s".to_owned(),
        s if s % 86_400 == 0 => format!("{} d", s / 86_400),
        s if s % 3_600 == 0 => format!("{} h", s / 3_600),
        s if s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// A state as a badge, coloured by what it means (the console's item-state colours).
fn badge(state: &str) -> Markup {
    let tone = match state {
        "healthy" | "active" | "ok" | "succeeded" | "idle" => "completed",
        "failed" | "degraded" | "capped" | "reconnect" | "abandoned" => "errored",
        "checking" | "syncing" | "ingesting" | "queued" | "running" | "pending_setup" => {
            "processing"
        }
        _ => "",
    };
    html! { span class={ "badge " (tone) } data-state=(state) { (state.replace('_', " ")) } }
}

/// A form's fields in order, repeated names kept (the chosen resources).
struct Fields(Vec<(String, String)>);

impl Fields {
    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn text(&self, name: &str) -> &str {
        self.get(name).unwrap_or_default()
    }

    /// A field trimmed; `None` when blank.
    fn given(&self, name: &str) -> Option<String> {
        Some(self.text(name).trim())
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    }

    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `sync_interval_seconds` as the API takes it: blank for the provider's default.
fn interval(text: &str) -> Result<Option<i64>, ApiError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<i64>()
        .map(Some)
        .map_err(|_| ApiError::invalid("`sync_interval_seconds` must be a whole number of seconds"))
}

// ---------------------------------------------------------------------------------------------
// Credential fields, generated from the provider's JSON Schema

/// How a credential property is entered.
#[derive(Debug, Clone, PartialEq)]
enum Input {
    Text,
    /// A password field: never shown again once stored.
    Secret,
    Integer,
    Number,
    Boolean,
    /// One of the schema's `enum` values.
    Choice(Vec<Value>),
    /// A list of strings, one per line.
    List,
    /// Anything else, as JSON.
    Json,
}

/// A property of the credential schema.
struct Property<'a> {
    name: &'a str,
    schema: &'a Value,
    required: bool,
    input: Input,
}

/// The schema's `type` (the first that is not `null` where it lists several).
fn json_type(schema: &Value) -> Option<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => Some(t),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null"),
        _ => None,
    }
}

/// Whether a string property holds a secret: marked so (`writeOnly`, format `password`), named
/// like one, or a connection URL other than HTTP(S), which carries its password.
fn secret(name: &str, schema: &Value) -> bool {
    const WORDS: &[&str] = &[
        "password",
        "passphrase",
        "secret",
        "token",
        "private_key",
        "api_key",
        "apikey",
    ];
    let name = name.to_ascii_lowercase();
    let pattern = schema
        .get("pattern")
        .and_then(Value::as_str)
        .unwrap_or_default();
    schema.get("writeOnly").and_then(Value::as_bool) == Some(true)
        || schema.get("format").and_then(Value::as_str) == Some("password")
        || WORDS.iter().any(|w| name.contains(w))
        || ((name.contains("url") || name.contains("dsn"))
            && pattern.contains("://")
            && !pattern.contains("http"))
}

fn input(name: &str, schema: &Value) -> Input {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return Input::Choice(values.clone());
    }
    match json_type(schema) {
        Some("boolean") => Input::Boolean,
        Some("integer") => Input::Integer,
        Some("number") => Input::Number,
        Some("array")
            if schema
                .get("items")
                .and_then(json_type)
                .is_none_or(|t| t == "string") =>
        {
            Input::List
        }
        Some("array" | "object") => Input::Json,
        _ if secret(name, schema) => Input::Secret,
        _ => Input::Text,
    }
}

/// The credential schema's properties, in its order.
fn properties(schema: &Value) -> Vec<Property<'_>> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|list| list.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, schema)| Property {
                    name,
                    schema,
                    required: required.contains(&name.as_str()),
                    input: input(name, schema),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A JSON value as a form shows it.
fn shown(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

/// A property's label: its `title`, else its name in words.
fn property_label(p: &Property<'_>) -> String {
    if let Some(title) = p.schema.get("title").and_then(Value::as_str) {
        return title.to_owned();
    }
    let words: Vec<String> = p
        .name
        .split(['_', '-'])
        .filter(|w| !w.is_empty())
        .map(|w| match w {
            "id" | "url" | "dsn" | "tls" | "api" | "uri" | "ssl" => w.to_ascii_uppercase(),
            _ => w.to_owned(),
        })
        .collect();
    let text = words.join(" ");
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => p.name.to_owned(),
    }
}

/// A number bound of the schema, for `min`/`max`/`minlength`/`maxlength`.
fn bound(schema: &Value, key: &str) -> Option<String> {
    schema
        .get(key)
        .filter(|v| v.is_number())
        .map(Value::to_string)
}

/// One credential property's labelled input. `update`: nothing is required and a blank field
/// keeps the stored value.
fn credential_input(p: &Property<'_>, index: usize, update: bool) -> Markup {
    let id = format!("cred-{index}");
    let name = format!("{CRED}{}", p.name);
    let hint_id = format!("{id}-hint");
    let required = p.required && !update;
    let mut hints = Vec::new();
    if let Some(description) = p.schema.get("description").and_then(Value::as_str) {
        hints.push(description.to_owned());
    }
    match &p.input {
        Input::List => hints.push("One per line.".to_owned()),
        Input::Json => hints.push("JSON.".to_owned()),
        Input::Secret if !update => {
            hints.push("Stored sealed; never shown again.".to_owned());
        }
        _ => {}
    }
    let described = (!hints.is_empty()).then_some(hint_id.as_str());
    let placeholder = p.schema.get("default").map(shown);
    let text = property_label(p);
    html! {
        @if p.input == Input::Boolean && !update {
            div {
                input id=(id) name=(name) type="checkbox" value="true"
                    checked[p.schema.get("default") == Some(&Value::Bool(true))]
                    aria-describedby=[described];
                " "
                label for=(id) { (text) }
            }
        } @else {
            label for=(id) {
                (text)
                @if required { " " span class="hint" { "(required)" } }
            }
            @match &p.input {
                Input::Secret => {
                    input id=(id) name=(name) type="password" autocomplete="new-password"
                        required[required] minlength=[bound(p.schema, "minLength")]
                        maxlength=[bound(p.schema, "maxLength")] aria-describedby=[described];
                }
                Input::Integer | Input::Number => {
                    input id=(id) name=(name) type="number"
                        step=(if p.input == Input::Integer { "1" } else { "any" })
                        min=[bound(p.schema, "minimum")] max=[bound(p.schema, "maximum")]
                        placeholder=[placeholder] required[required] aria-describedby=[described];
                }
                Input::Boolean => {
                    select id=(id) name=(name) aria-describedby=[described] {
                        option value="" { "unchanged" }
                        option value="true" { "yes" }
                        option value="false" { "no" }
                    }
                }
                Input::Choice(values) => {
                    select id=(id) name=(name) required[required] aria-describedby=[described] {
                        option value="" {
                            @if update { "unchanged" } @else if required { "choose…" } @else { "default" }
                        }
                        @for value in values {
                            option value=(shown(value)) { (shown(value)) }
                        }
                    }
                }
                Input::List | Input::Json => {
                    textarea id=(id) name=(name) rows="3" required[required]
                        placeholder=[placeholder] aria-describedby=[described] {}
                }
                Input::Text => {
                    input id=(id) name=(name) type="text" autocomplete="off"
                        required[required] minlength=[bound(p.schema, "minLength")]
                        maxlength=[bound(p.schema, "maxLength")] placeholder=[placeholder]
                        aria-describedby=[described];
                }
            }
        }
        @if let Some(hint) = described {
            p id=(hint) class="hint" { (hints.join(" ")) }
        }
    }
}

/// The credential fields of a provider, in a fieldset.
fn credential_fields(info: &ProviderInfo, update: bool) -> Markup {
    let props = properties(&info.credential_schema);
    html! {
        fieldset class="card" {
            legend { "Credentials" }
            @if props.is_empty() {
                p class="hint" { "This provider takes no credentials." }
            } @else if update {
                p class="hint" { "Only the fields you fill are changed; a blank field keeps its stored value. Stored values are never shown." }
            }
            @for (i, p) in props.iter().enumerate() {
                (credential_input(p, i, update))
            }
        }
    }
}

/// The credentials a form gives, typed as the schema says. A value that does not read as its
/// type is passed as text, so the provider's schema check refuses it as the API does.
fn credentials(
    schema: &Value,
    form: &Fields,
    update: bool,
) -> Result<Map<String, Value>, ApiError> {
    let mut out = Map::new();
    for p in properties(schema) {
        let raw = form.get(&format!("{CRED}{}", p.name));
        let value = match (&p.input, raw) {
            (Input::Boolean, Some("true" | "on")) => Some(Value::Bool(true)),
            (Input::Boolean, Some("false")) => Some(Value::Bool(false)),
            (Input::Boolean, _) => (!update && p.required).then_some(Value::Bool(false)),
            (_, None) => None,
            (_, Some(v)) if v.trim().is_empty() => None,
            (Input::Secret, Some(v)) => Some(Value::String(v.to_owned())),
            (Input::Text, Some(v)) => Some(json!(v.trim())),
            (Input::Integer, Some(v)) => Some(
                v.trim()
                    .parse::<i64>()
                    .map_or_else(|_| json!(v.trim()), |n| json!(n)),
            ),
            (Input::Number, Some(v)) => Some(
                v.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|n| n.is_finite())
                    .map_or_else(|| json!(v.trim()), |n| json!(n)),
            ),
            (Input::Choice(values), Some(v)) => Some(
                values
                    .iter()
                    .find(|c| shown(c) == v)
                    .cloned()
                    .unwrap_or_else(|| json!(v)),
            ),
            (Input::List, Some(v)) => Some(Value::Array(
                v.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(|l| json!(l))
                    .collect(),
            )),
            (Input::Json, Some(v)) => Some(serde_json::from_str(v).map_err(|e| {
                ApiError::invalid(format!("credentials `{}` is not JSON: {e}", p.name))
            })?),
        };
        if let Some(value) = value {
            out.insert(p.name.to_owned(), value);
        }
    }
    Ok(out)
}

/// Where a provider's OAuth sign-in goes, for a provider that has it: on the create form, how
/// (the app's id and secret in the credentials; the button comes once the connector exists); on
/// a connector, a "Sign in with …" button starting the provider's flow, which comes back to the
/// connector's page. The credential fields stay, for keys and tokens.
fn oauth_sign_in(app: &App, info: &ProviderInfo, connector: Option<&str>) -> Option<Markup> {
    if !app.offers_oauth(info.provider) {
        return None;
    }
    Some(match connector {
        None => html! {
            p class="hint" {
                "Authorize with " (info.provider) "'s OAuth: give your OAuth app's "
                code { "client_id" } " and " code { "client_secret" } " as "
                code { "oauth" } " in the credentials (JSON), register "
                code { "/connectors/oauth/callback" } " on this server's address as its redirect "
                "URI, create the connector, then sign in from its page."
            }
        },
        Some(id) => {
            let action = format!("{}/oauth", connector_href(id));
            html! {
                form method="post" action=(action) hx-post=(action) hx-target="#oauth-result" class="card" {
                    p { "Authorize engram to read " (info.provider) " as you: you sign in at " (info.provider) " and come back here." }
                    button type="submit" { "Sign in with " (info.provider) }
                    div id="oauth-result" aria-live="polite" {}
                }
            }
        }
    })
}

/// Starts the connector's OAuth authorization and sends the browser to the provider; the
/// callback brings it back to the connector's page.
pub(super) async fn oauth(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Page {
    let host = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok());
    let back = connector_href(&id);
    let started = app
        .start_oauth(&session.who, &id, host, Some(&back))
        .await?;
    Ok(to(&started.authorization_url, &headers))
}

// ---------------------------------------------------------------------------------------------
// The catalog and the organization's connectors

pub(super) async fn list(State(app): State<App>, Extension(session): Extension<Session>) -> Page {
    let admin = session.who.require(Scope::Admin).is_ok();
    // Listing connectors takes the admin scope, as `GET /connectors` does.
    let connectors = if admin {
        Some(app.list_connectors(&session.who).await?)
    } else {
        None
    };
    let catalog = app.provider_catalog();
    let limit = app.config().connectors.max_per_org;
    Ok(page_response(layout(
        "Connectors",
        Some(&session),
        html! {
            @match &connectors {
                None => {
                    p class="hint" { "Connectors take a key with the admin scope: this key can see the catalog only." }
                }
                Some(views) if views.is_empty() => {
                    p { "No connector yet. Connect a source from the catalog below: its documents are synced into a database as items." }
                }
                Some(views) => {
                    p class="hint" { (views.len()) " of " (limit) " connectors (connectors.max_per_org)." }
                    table {
                        caption class="visually-hidden" { "Connectors" }
                        thead { tr {
                            th scope="col" { "Name" } th scope="col" { "Provider" } th scope="col" { "Database" }
                            th scope="col" { "Health" } th scope="col" { "Lifecycle" } th scope="col" { "Resources" }
                            th scope="col" { "Documents" } th scope="col" { "Last synced" } th scope="col" { "Next sync" }
                        } }
                        tbody {
                            @for view in views {
                                tr {
                                    td { a href=(connector_href(&view.record.id)) { (label(view)) } }
                                    td { code { (view.record.provider) } }
                                    td { a href=(database_href(&view.record.database_name)) { (view.record.database_name) } }
                                    td { (badge(view.health.status.as_str())) }
                                    td { (badge(view.health.lifecycle.as_str())) }
                                    td class="num" { (view.record.active_resources) }
                                    td class="num" { (view.record.documents_dispatched) }
                                    td { (maybe_when(view.record.last_successful_sync_at, "never")) }
                                    td { @if view.record.paused_at.is_some() { span class="hint" { "paused" } } @else { (maybe_when(view.record.next_sync_at, "–")) } }
                                }
                            }
                        }
                    }
                }
            }
            h2 { "Catalog" }
            table {
                caption class="visually-hidden" { "Providers" }
                thead { tr {
                    th scope="col" { "Provider" } th scope="col" { "Category" } th scope="col" { "Syncs" }
                    th scope="col" { "Default interval" }
                    @if admin { th scope="col" { span class="visually-hidden" { "Action" } } }
                } }
                tbody {
                    @for info in &catalog {
                        tr {
                            th scope="row" {
                                code { (info.provider) }
                                @if info.is_beta { " " span class="badge" { "beta" } }
                            }
                            td { (info.category) }
                            td { (info.indexed_object_types.join(", ")) }
                            td { (every(info.interval.default_s)) }
                            @if admin {
                                td { a href={ (BASE) "/new?provider=" (urlencoding(info.provider)) } { "Connect " (info.provider) } }
                            }
                        }
                    }
                }
            }
        },
    )))
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct NewQuery {
    #[serde(default)]
    provider: String,
    #[serde(default)]
    database: String,
}

/// The create form of a provider: its credential fields from `credential_schema`, and the
/// connector's settings `POST /connectors` takes.
pub(super) async fn new(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Query(query): Query<NewQuery>,
    headers: HeaderMap,
) -> Page {
    if query.provider.is_empty() {
        return Ok(to(BASE, &headers));
    }
    // The form is for keys that may create connectors (`POST /connectors` takes admin).
    session.who.require(Scope::Admin)?;
    let info = app.provider_info(&query.provider)?;
    let databases = app.list_databases(&session.who).await?;
    let bounds = info.interval;
    Ok(page_response(layout(
        &format!("Connect {}", info.provider),
        Some(&session),
        html! {
            p { a href=(BASE) { "← Connectors" } }
            p class="hint" { (info.category) " · syncs " (info.indexed_object_types.join(", ")) }
            p { (info.setup_guide) }
            @if let Some(sign_in) = oauth_sign_in(&app, info, None) {
                section aria-label="Sign in with the provider" { (sign_in) }
            }
            form method="post" action=(BASE) hx-post=(BASE) hx-target="#create-result" class="card" {
                input type="hidden" name="provider" value=(info.provider);
                label for="c-name" { "Name" }
                input id="c-name" name="name" maxlength="1024" autocomplete="off";
                label for="c-database" { "Database " span class="hint" { "(required)" } }
                select id="c-database" name="database" required {
                    @for db in &databases {
                        option value=(db.name.as_str()) selected[query.database == db.name.as_str()] {
                            (db.name.as_str()) @if db.state.as_str() != "ready" { " (" (db.state.as_str()) ")" }
                        }
                    }
                }
                @if databases.is_empty() {
                    p class="hint" { "No database yet: " a href="/console/databases" { "create one" } " first." }
                }
                label for="c-collection" { "Collection (optional)" }
                input id="c-collection" name="collection" aria-describedby="c-collection-hint";
                p id="c-collection-hint" class="hint" { "Where synced documents go; the database's default collection when blank." }
                label for="c-scope" { "Account scope (optional)" }
                input id="c-scope" name="provider_account_scope" maxlength="1024" aria-describedby="c-scope-hint";
                p id="c-scope-hint" class="hint" { "A distinct value per account when connecting several of one provider." }
                label for="c-interval" { "Sync interval (seconds)" }
                input id="c-interval" name="sync_interval_seconds" type="number" step="1"
                    min=(bounds.min_s) max=(bounds.max_s) placeholder=(bounds.default_s) aria-describedby="c-interval-hint";
                p id="c-interval-hint" class="hint" {
                    "From " (every(bounds.min_s)) " to " (every(bounds.max_s)) "; " (every(bounds.default_s)) " when blank."
                }
                label for="c-instructions" { "Custom instructions (optional)" }
                textarea id="c-instructions" name="custom_instructions" rows="2" maxlength="4000" {}
                (credential_fields(info, false))
                div {
                    button type="submit" { "Create connector" }
                    " "
                    button type="button" hx-post={ (BASE) "/preview" } hx-include="closest form" hx-target="#preview" { "Preview resources" }
                }
                div id="create-result" aria-live="polite" {}
                div id="preview" aria-live="polite" {}
            }
        },
    )))
}

/// The provider a create form names and the credentials typed into it, read by the provider's
/// `credential_schema`; none for an unknown provider (the call it goes to names it).
fn typed_credentials(app: &App, form: &Fields) -> Result<(String, Option<Value>), ApiError> {
    let provider = form.text("provider").trim().to_owned();
    let credentials = match app.provider_info(&provider) {
        Ok(info) => Some(Value::Object(credentials(
            &info.credential_schema,
            form,
            false,
        )?)),
        Err(_) => None,
    };
    Ok((provider, credentials))
}

/// Creates the connector as `POST /connectors` does, then shows it.
pub(super) async fn create(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    headers: HeaderMap,
    UrlForm(form): UrlForm<Vec<(String, String)>>,
) -> Page {
    let form = Fields(form);
    let (provider, credentials) = typed_credentials(&app, &form)?;
    let view = app
        .create_connector(
            &session.who,
            CreateConnector {
                provider,
                database: form.text("database").trim().to_owned(),
                collection: form.given("collection"),
                credentials,
                auth_type: String::new(),
                name: form.text("name").trim().to_owned(),
                account_scope: form.text("provider_account_scope").trim().to_owned(),
                custom_instructions: form.text("custom_instructions").to_owned(),
                sync_interval_seconds: interval(form.text("sync_interval_seconds"))?,
            },
        )
        .await?;
    Ok(to(&connector_href(&view.record.id), &headers))
}

/// What the account offers, from the credentials typed in the create form (nothing is stored),
/// as `POST /connector-discovery` reads it.
pub(super) async fn preview(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    UrlForm(form): UrlForm<Vec<(String, String)>>,
) -> Page {
    let form = Fields(form);
    let (provider, credentials) = typed_credentials(&app, &form)?;
    let found = app
        .discover_preview(&session.who, &provider, credentials)
        .await?;
    Ok(page_response(html! {
        h2 { "What the source offers" }
        @if found.is_empty() {
            p class="hint" { "Nothing to discover with these credentials; once the connector exists, resources can be given by id." }
        } @else {
            p class="hint" { "Choose which to sync once the connector is created." }
            table {
                caption class="visually-hidden" { "Resources the source offers" }
                thead { tr { th scope="col" { "Name" } th scope="col" { "Id" } th scope="col" { "Type" } } }
                tbody {
                    @for r in &found {
                        tr { td { (r.name) } td { code { (r.id) } } td { (r.resource_type) } }
                    }
                }
            }
        }
    }))
}

// ---------------------------------------------------------------------------------------------
// A connector

pub(super) async fn connector(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
) -> Page {
    let status = app.connector_status(&session.who, &id).await?;
    let view = &status.view;
    let record = &view.record;
    let info = app.provider_info(&record.provider).ok();
    let href = connector_href(&record.id);
    let paused = record.paused_at.is_some();
    let reconnect = record.needs_reauth_at.is_some();
    Ok(page_response(layout(
        label(view),
        Some(&session),
        html! {
            p { a href=(BASE) { "← Connectors" } }
            (live(&status))
            h2 { "Actions" }
            div class="card" {
                @if paused {
                    p { "Syncing is paused; nothing syncs until it is resumed." }
                    form method="post" action={ (href) "/resume" } hx-post={ (href) "/resume" } hx-target="#action-result" {
                        button type="submit" { "Resume" }
                    }
                } @else {
                    @if status.resources.is_empty() {
                        p class="hint" { "Sync now is offered once resources are chosen." }
                    } @else {
                        form method="post" action={ (href) "/sync" } hx-post={ (href) "/sync" } hx-target="#action-result" {
                            button type="submit" { "Sync now" }
                        }
                    }
                    form method="post" action={ (href) "/pause" } hx-post={ (href) "/pause" } hx-target="#action-result" {
                        button type="submit" { "Pause" }
                    }
                }
                div id="action-result" aria-live="polite" {}
            }
            @if let Some(sign_in) = info.and_then(|info| oauth_sign_in(&app, info, Some(&record.id))) {
                h2 { @if reconnect { "Reconnect" } @else { "Authorization" } }
                section aria-label="Sign in with the provider" { (sign_in) }
            }
            h2 { "Choose what to sync" }
            p class="hint" { "Discovery asks the source, with the stored credentials, what it offers." }
            button type="button" hx-get={ (href) "/discover" } hx-target="#discovered" { "Discover resources" }
            @if status.resources.is_empty() {
                div id="discovered" hx-get={ (href) "/discover" } hx-trigger="load" {
                    p class="hint" { "Asking the source…" }
                }
            } @else {
                div id="discovered" {}
            }
            h2 { "Settings" }
            dl class="facts" {
                dt { "Id" } dd { code { (record.id) } }
                dt { "Provider" } dd { code { (record.provider) } }
                dt { "Database" } dd { a href=(database_href(&record.database_name)) { (record.database_name) } }
                dt { "Collection" } dd { code { (record.collection) } }
                @if !record.account_scope.is_empty() {
                    dt { "Account scope" } dd { (record.account_scope) }
                }
                dt { "Sync interval" } dd { (every(record.sync_interval_s)) }
                dt { "Credentials" } dd {
                    @if record.credentials.is_some() {
                        "stored sealed, never shown"
                        @if let Some(at) = record.credentials_updated_at { " · updated " (when(at)) }
                    } @else {
                        "none"
                    }
                }
                @if !record.custom_instructions.is_empty() {
                    dt { "Custom instructions" } dd class="text" { (record.custom_instructions) }
                }
                dt { "Created" } dd { (when(record.created_at)) }
                dt { "Updated" } dd { (when(record.updated_at)) }
            }
            form method="post" action={ (href) "/update" } hx-post={ (href) "/update" } hx-target="#update-result" class="card" {
                label for="u-name" { "Name" }
                input id="u-name" name="name" value=(record.name) maxlength="1024" autocomplete="off";
                label for="u-interval" { "Sync interval (seconds)" }
                input id="u-interval" name="sync_interval_seconds" type="number" step="1"
                    min=(view.bounds.min_s) max=(view.bounds.max_s) value=(record.sync_interval_s) aria-describedby="u-interval-hint";
                p id="u-interval-hint" class="hint" {
                    "From " (every(view.bounds.min_s)) " to " (every(view.bounds.max_s)) "; 0 for the default, " (every(view.bounds.default_s)) "."
                }
                label for="u-instructions" { "Custom instructions" }
                textarea id="u-instructions" name="custom_instructions" rows="2" maxlength="4000" { (record.custom_instructions) }
                @if let Some(info) = info {
                    (credential_fields(info, true))
                }
                button type="submit" { "Save settings" }
                div id="update-result" aria-live="polite" {}
            }
            h2 { "Delete" }
            form method="post" action={ (href) "/delete" } hx-post={ (href) "/delete" } hx-target="#delete-result"
                hx-confirm="Delete this connector, its resources and its stored credentials? What it synced stays." class="card danger" {
                p class="hint" { "Syncing stops and the stored credentials are deleted; the items it synced stay in their database." }
                button type="submit" class="danger" { "Delete connector" }
                div id="delete-result" aria-live="polite" {}
            }
        },
    )))
}

/// Whether the connector's health is about to change: a sync runs or is asked for, or resources
/// wait for their first pass.
fn busy(status: &ConnectorStatus) -> bool {
    let record = &status.view.record;
    status.view.health.sync_status == SyncStatus::Syncing
        || record.requested_run_id.is_some()
        || status
            .runs
            .iter()
            .any(|r| r.state == "queued" || r.state == "running")
        || (record.paused_at.is_none()
            && status
                .resources
                .iter()
                .any(|r| r.state.status.as_str() == "checking"))
}

/// Health, resources and the latest runs; refreshed every two seconds while [`busy`].
fn live(status: &ConnectorStatus) -> Markup {
    let view = &status.view;
    let record = &view.record;
    let health = &view.health;
    let poll = busy(status).then(|| format!("{}/status", connector_href(&record.id)));
    let refreshing = poll.is_some();
    html! {
        div id="live" hx-get=[poll] hx-trigger=[refreshing.then_some("every 2s")] hx-headers=[refreshing.then_some(super::POLL)] hx-swap="outerHTML" {
            h2 { "Health" }
            dl class="facts" {
                dt { "Health" } dd { (badge(health.status.as_str())) @if refreshing { " " span class="hint" { "refreshing…" } } }
                dt { "Lifecycle" } dd { (badge(health.lifecycle.as_str())) }
                dt { "Sync" } dd { (badge(health.sync_status.as_str())) }
                @if !health.message.is_empty() {
                    dt { "Message" } dd { (health.message) }
                }
                @if let Some((message, action)) = &health.error {
                    dt { "Problem" } dd class="error" { (message) }
                    dt { "What to do" } dd { (action) }
                }
                @if let Some(cap) = &health.plan_cap {
                    dt { "Limit" } dd { (cap.message) }
                }
                dt { "Last successful sync" } dd { (maybe_when(record.last_successful_sync_at, "never")) }
                dt { "Last attempt" } dd { (maybe_when(record.last_attempted_sync_at, "never")) }
                dt { "Next sync" } dd {
                    @if record.paused_at.is_some() { span class="hint" { "paused" } } @else { (maybe_when(record.next_sync_at, "–")) }
                }
                @if let Some(at) = record.paused_at { dt { "Paused" } dd { (when(at)) } }
                dt { "Documents dispatched" } dd { (record.documents_dispatched) }
            }
            h2 { "Resources (" (status.resources.len()) ")" }
            @if status.resources.is_empty() {
                p class="hint" { "Nothing is synced yet: choose resources below." }
            } @else {
                (resources_table(&record.id, &status.resources))
            }
            h2 { "Latest runs" }
            @if status.runs.is_empty() {
                p class="hint" { "No run yet." }
            } @else {
                (runs_table(&status.runs))
            }
        }
    }
}

fn resources_table(id: &str, resources: &[ResourceRecord]) -> Markup {
    let action = format!("{}/resources/remove", connector_href(id));
    html! {
        table {
            caption class="visually-hidden" { "Resources" }
            thead { tr {
                th scope="col" { "Resource" } th scope="col" { "Status" } th scope="col" { "Objects" }
                th scope="col" { "Checked" } th scope="col" { "Details" }
                th scope="col" { span class="visually-hidden" { "Action" } }
            } }
            tbody {
                @for r in resources {
                    @let m = &r.resource;
                    tr {
                        th scope="row" {
                            (m.display_name)
                            @if m.display_name != m.resource_id { br; code class="hint" { (m.resource_id) } }
                        }
                        td { (badge(r.state.status.as_str())) }
                        td class="num" { (r.state.last_row_count) }
                        td { (maybe_when(r.state.checked_at, "not yet")) }
                        td {
                            @if !r.state.message.is_empty() { (r.state.message) }
                            @if !r.state.action.is_empty() { " " span class="hint" { (r.state.action) } }
                            @if !r.state.sync_blocked_reason.is_empty() { p class="error" { "Blocked: " (r.state.sync_blocked_reason) } }
                            @if !r.state.acl_warning.is_empty() { p class="hint" { (r.state.acl_warning) } }
                            @if !m.collection_override.is_empty() { span class="hint" { " into " code { (m.collection_override) } } }
                        }
                        td {
                            form method="post" action=(action) hx-post=(action) hx-target="#action-result" hx-swap="innerHTML"
                                hx-confirm="Stop syncing this resource? What it synced stays." {
                                input type="hidden" name="resource_id" value=(m.resource_id);
                                button type="submit" class="danger" { "Stop syncing" span class="visually-hidden" { " " (m.display_name) } }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn runs_table(runs: &[RunRecord]) -> Markup {
    html! {
        table {
            caption class="visually-hidden" { "Latest runs" }
            thead { tr {
                th scope="col" { "Run" } th scope="col" { "Trigger" } th scope="col" { "State" }
                th scope="col" { "Queued" } th scope="col" { "Finished" }
                th scope="col" { "Added" } th scope="col" { "Updated" } th scope="col" { "Deleted" } th scope="col" { "Failed" }
                th scope="col" { "Error" }
            } }
            tbody {
                @for run in runs {
                    tr {
                        td { code { (run.run_id) } }
                        td { (if run.manual { "manual" } else { "scheduled" }) }
                        td { (badge(&run.state)) }
                        td { (when(run.queued_at)) }
                        td { (maybe_when(run.finished_at, "–")) }
                        td class="num" { (run.added) }
                        td class="num" { (run.updated) }
                        td class="num" { (run.deleted) }
                        td class="num" { (run.failed) }
                        td { @if !run.error.is_empty() { span class="error" { (run.error) } } }
                    }
                }
            }
        }
    }
}

/// The health, resources and runs alone (the live refresh).
pub(super) async fn live_fragment(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
) -> Page {
    let status = app.connector_status(&session.who, &id).await?;
    Ok(page_response(live(&status)))
}

/// A resource as the selection form posts it: the API's `resources[]` fields.
#[derive(Debug, Deserialize)]
struct Picked {
    resource_id: String,
    #[serde(default)]
    resource_type: String,
    #[serde(default)]
    name: String,
}

/// What the account offers, read with the stored credentials (`GET /connectors/{id}/discover`),
/// as a form choosing which to sync. The provider's failure shows in place of the list.
pub(super) async fn discover(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
) -> Page {
    let configured = app.list_resources(&session.who, &id).await?;
    let found = app.discover(&session.who, &id).await;
    let action = format!("{}/configure", connector_href(&id));
    Ok(page_response(match found {
        Err(err) => {
            let err = ApiError::from(err);
            error_fragment(err.0.code.as_str(), &err.0.message)
        }
        Ok((_, found)) => selection(&action, &found, &configured),
    }))
}

fn selection(action: &str, found: &[DiscoveredResource], configured: &[ResourceRecord]) -> Markup {
    let synced = |id: &str| configured.iter().any(|r| r.resource.resource_id == id);
    html! {
        form method="post" action=(action) hx-post=(action) hx-target="#configure-result" class="card" {
            @if found.is_empty() {
                p class="hint" { "The source lists nothing to choose from; give a resource's id below." }
            } @else {
                table {
                    caption { "Resources the source offers" }
                    thead { tr { th scope="col" { "Sync" } th scope="col" { "Name" } th scope="col" { "Id" } th scope="col" { "Type" } } }
                    tbody {
                        @for (i, r) in found.iter().enumerate() {
                            @let picked = json!({"resource_id": r.id, "resource_type": r.resource_type, "name": r.name}).to_string();
                            tr {
                                td {
                                    @if synced(&r.id) {
                                        span class="badge completed" { "syncing" }
                                    } @else {
                                        input type="checkbox" id={ "pick-" (i) } name="resource" value=(picked);
                                    }
                                }
                                td {
                                    @if synced(&r.id) { (r.name) } @else { label for={ "pick-" (i) } { (r.name) } }
                                }
                                td { code { (r.id) } }
                                td { (r.resource_type) }
                            }
                        }
                    }
                }
            }
            label for="pick-id" { "Another resource id (optional)" }
            input id="pick-id" name="resource_id" autocomplete="off" aria-describedby="pick-id-hint";
            p id="pick-id-hint" class="hint" { "A resource the source does not list, by its id (a feed's URL, a folder's path, a table…)." }
            label for="pick-collection" { "Collection (optional)" }
            input id="pick-collection" name="collection" aria-describedby="pick-collection-hint";
            p id="pick-collection-hint" class="hint" { "Where these resources' documents go; the connector's collection when blank." }
            label for="pick-mode" { "Sync mode" }
            select id="pick-mode" name="sync_mode" {
                option value="rescan" { "rescan: every object whose version changed" }
                option value="new_only" { "new only: objects never synced before" }
            }
            button type="submit" { "Sync selected resources" }
            div id="configure-result" aria-live="polite" {}
        }
    }
}

/// Configures the chosen resources as `POST /connectors/{id}/configure` does; the first sync
/// starts at once.
pub(super) async fn configure(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    headers: HeaderMap,
    UrlForm(form): UrlForm<Vec<(String, String)>>,
) -> Page {
    let form = Fields(form);
    let mut picked = Vec::new();
    for value in form.all("resource") {
        picked.push(
            serde_json::from_str::<Picked>(value)
                .map_err(|e| ApiError::invalid(format!("a chosen resource is malformed: {e}")))?,
        );
    }
    if let Some(resource_id) = form.given("resource_id") {
        picked.push(Picked {
            resource_id,
            resource_type: String::new(),
            name: String::new(),
        });
    }
    let collection = form.given("collection").unwrap_or_default();
    let sync_mode = form.text("sync_mode").to_owned();
    let mappings = picked
        .into_iter()
        .map(|p| ResourceMapping {
            resource_id: p.resource_id,
            resource_type: p.resource_type,
            display_name: p.name,
            collection: collection.clone(),
            sync_mode: sync_mode.clone(),
            filters: Value::Null,
            provider_metadata: Value::Null,
            ..ResourceMapping::default()
        })
        .collect();
    app.configure_resources(&session.who, &id, mappings).await?;
    Ok(to(&connector_href(&id), &headers))
}

#[derive(Debug, Deserialize)]
pub(super) struct ResourceForm {
    #[serde(default)]
    resource_id: String,
}

/// Stops syncing one resource (`DELETE /connectors/{id}/resources/{resource_id}`).
pub(super) async fn remove_resource(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    headers: HeaderMap,
    UrlForm(form): UrlForm<ResourceForm>,
) -> Page {
    app.delete_resource(&session.who, &id, &form.resource_id)
        .await?;
    Ok(to(&connector_href(&id), &headers))
}

/// The connector actions of one button: pause, resume, sync now.
const PAUSE: u8 = 0;
const RESUME: u8 = 1;
const SYNC: u8 = 2;

/// Pauses, resumes, or syncs now (`POST /connectors/{id}/sync`), as the API's routes do; the page
/// then follows the connector.
pub(super) async fn act<const ACTION: u8>(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Page {
    match ACTION {
        PAUSE | RESUME => {
            app.pause_connector(&session.who, &id, ACTION == PAUSE)
                .await?;
        }
        _ => {
            app.request_sync(&session.who, &id).await?;
        }
    }
    Ok(to(&connector_href(&id), &headers))
}

/// Updates the settings and, where fields were filled, the credentials (merged into the stored
/// ones and checked against the schema), as `PATCH /connectors/{id}` does.
pub(super) async fn update(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    headers: HeaderMap,
    UrlForm(form): UrlForm<Vec<(String, String)>>,
) -> Page {
    let form = Fields(form);
    let view = app.connector(&session.who, &id).await?;
    let credentials = match app.provider_info(&view.record.provider) {
        Ok(info) => Some(credentials(&info.credential_schema, &form, true)?),
        Err(_) => None,
    }
    .filter(|c| !c.is_empty());
    app.update_connector(
        &session.who,
        &id,
        UpdateConnector {
            credentials,
            sync_interval_seconds: interval(form.text("sync_interval_seconds"))?,
            custom_instructions: form.get("custom_instructions").map(str::to_owned),
            name: form.get("name").map(|n| n.trim().to_owned()),
        },
    )
    .await?;
    Ok(to(&connector_href(&id), &headers))
}

/// Deletes the connector, its resources and credentials (`DELETE /connectors/{id}`).
pub(super) async fn delete(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Page {
    app.delete_connector(&session.who, &id).await?;
    Ok(to(BASE, &headers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        Fields(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    fn imap_like() -> Value {
        json!({
            "type": "object",
            "properties": {
                "host": {"type": "string", "minLength": 1},
                "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                "password": {"type": "string"},
                "security": {"enum": ["tls", "none"]},
                "verify": {"type": "boolean"},
                "feeds": {"type": "array", "items": {"type": "string"}},
                "url": {"type": "string", "pattern": "^postgres(ql)?://"},
                "endpoint": {"type": "string", "pattern": "^https?://"},
                "hidden": {"type": "string", "writeOnly": true},
                "extra": {"type": "object"}
            },
            "required": ["host", "password"]
        })
    }

    #[test]
    fn each_property_gets_the_input_its_schema_calls_for() {
        let schema = imap_like();
        let inputs: Vec<(&str, Input, bool)> = properties(&schema)
            .into_iter()
            .map(|p| (p.name, p.input, p.required))
            .collect();
        assert_eq!(
            inputs,
            vec![
                ("host", Input::Text, true),
                ("port", Input::Integer, false),
                ("password", Input::Secret, true),
                (
                    "security",
                    Input::Choice(vec![json!("tls"), json!("none")]),
                    false
                ),
                ("verify", Input::Boolean, false),
                ("feeds", Input::List, false),
                ("url", Input::Secret, false),
                ("endpoint", Input::Text, false),
                ("hidden", Input::Secret, false),
                ("extra", Input::Json, false),
            ]
        );
        let form = credential_fields(
            &ProviderInfo {
                provider: "x",
                category: "x",
                connector_type: "x",
                rank: None,
                rbac_support: false,
                webhook_support: false,
                is_beta: false,
                indexed_object_types: &[],
                fields: Vec::new(),
                credential_schema: schema.clone(),
                setup_guide: "",
                interval: engram_app::IntervalBounds {
                    min_s: 60,
                    max_s: 600,
                    default_s: 60,
                },
            },
            false,
        )
        .into_string();
        assert!(
            form.contains(r#"name="cred.password" type="password""#),
            "{form}"
        );
        assert!(
            form.contains(r#"name="cred.port" type="number" step="1" min="1" max="65535""#),
            "{form}"
        );
        assert!(
            form.contains(r#"name="cred.verify" type="checkbox""#),
            "{form}"
        );
        assert!(
            form.contains(r#"<label for="cred-0">Host <span class="hint">(required)</span>"#),
            "{form}"
        );
        assert!(
            form.contains(r#"<textarea id="cred-5" name="cred.feeds""#),
            "{form}"
        );
    }

    #[test]
    fn a_form_becomes_typed_credentials_and_blank_fields_are_left_out() {
        let schema = imap_like();
        let form = fields(&[
            ("cred.host", " mail.example.com "),
            ("cred.port", "993"),
            ("cred.password", " pass word "),
            ("cred.security", "tls"),
            ("cred.verify", "true"),
            (
                "cred.feeds",
                "https://a.example/feed\n\n https://b.example/feed \n",
            ),
            ("cred.url", ""),
            ("cred.extra", r#"{"a": 1}"#),
            ("name", "not a credential"),
        ]);
        let creds = credentials(&schema, &form, false).expect("credentials");
        assert_eq!(
            Value::Object(creds),
            json!({
                "host": "mail.example.com",
                "port": 993,
                "password": " pass word ",
                "security": "tls",
                "verify": true,
                "feeds": ["https://a.example/feed", "https://b.example/feed"],
                "extra": {"a": 1}
            })
        );
        // Not a number: passed as text for the schema check to refuse.
        let creds =
            credentials(&schema, &fields(&[("cred.port", "twelve")]), false).expect("credentials");
        assert_eq!(creds["port"], json!("twelve"));
        assert!(credentials(&schema, &fields(&[("cred.extra", "{")]), false).is_err());
        // An update sends only what was filled.
        let creds =
            credentials(&schema, &fields(&[("cred.password", "new")]), true).expect("credentials");
        assert_eq!(Value::Object(creds), json!({"password": "new"}));
    }

    #[test]
    fn a_form_body_keeps_every_field_in_order() {
        let pairs: Vec<(String, String)> =
            serde_html_form::from_bytes(b"resource=a&name=x&resource=b&cred.token=t%26k")
                .expect("form");
        let form = Fields(pairs);
        assert_eq!(form.all("resource").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(form.text("cred.token"), "t&k");
        assert_eq!(form.given("missing"), None);
    }

    #[test]
    fn user_text_in_the_form_is_escaped() {
        let schema = json!({"type": "object", "properties": {
            "<b>x</b>": {"type": "string", "description": "<script>alert(1)</script>"}
        }});
        let p = &properties(&schema)[0];
        let out = credential_input(p, 0, false).into_string();
        assert!(!out.contains("<script>") && !out.contains("<b>"), "{out}");
    }
}
