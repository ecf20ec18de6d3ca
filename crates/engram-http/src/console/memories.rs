//! A database's memories by collection (each user's sub-tenant): each memory with what
//! inference made of it, and the facts it stored about each user with what superseded what.

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::{Extension, Router};
use engram_app::{App, ListRequest};
use engram_types::ItemKind;
use maud::html;
use serde::Deserialize;

use super::pages::{
    database_href, database_name, item_href, layout, pager, status_badge, tabs, time, urlencoding,
    Tab,
};
use super::session::Session;
use super::{html as page_response, Page};

/// Memories per page.
const PER_PAGE: i64 = 25;

/// The memories routes (signed in: merged under the session's guard).
pub(super) fn routes() -> Router<App> {
    Router::new().route("/console/databases/{database}/memories", get(page))
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct MemoriesQuery {
    #[serde(default)]
    collection: String,
    #[serde(default)]
    page: Option<i64>,
}

async fn page(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(database): Path<String>,
    Query(query): Query<MemoriesQuery>,
) -> Page {
    let name = database_name(&database)?;
    let collections = app.list_collections(&session.who, &name).await?;
    let page = query.page.unwrap_or(1);
    let listing = app
        .list_items(
            &session.who,
            &name,
            ListRequest {
                collection: Some(query.collection.clone()).filter(|c| !c.is_empty()),
                kind: Some(ItemKind::Memory),
                page: Some(page),
                page_size: Some(PER_PAGE),
                ..ListRequest::default()
            },
        )
        .await?;
    let db = &listing.database;
    let asked = Some(query.collection.as_str()).filter(|c| !c.is_empty());
    let collection = asked.unwrap_or(db.default_collection.as_str()).to_owned();
    // The users these memories speak for, each once (a memory without a user name is the
    // collection's own).
    let mut users: Vec<String> = listing
        .page
        .items
        .iter()
        .filter(|m| m.fields.infer)
        .map(|m| m.fields.user_name.clone())
        .collect();
    users.sort();
    users.dedup();
    let mut facts = Vec::new();
    for user in users {
        let (_, _, found) = app.user_facts(&session.who, &name, asked, &user).await?;
        facts.push((user, found));
    }
    let pages = listing.total_pages().max(1);
    let href = format!("{}/memories", database_href(&db.name));
    let query_of = |page: i64| {
        format!(
            "{href}?collection={}&page={page}",
            urlencoding(&query.collection)
        )
    };
    Ok(page_response(layout(
        &format!("Memories of {}", db.name.as_str()),
        Some(&session),
        html! {
            (tabs(&db.name, Tab::Memories))
            form method="get" action=(href) class="filters" {
                label for="m-collection" { "Collection (user)" }
                select id="m-collection" name="collection" {
                    option value="" { "default" }
                    @for c in &collections {
                        option value=(c.as_str()) selected[query.collection == c.as_str()] { (c.as_str()) }
                    }
                }
                button type="submit" { "Show" }
            }
            p class="hint" { (listing.page.total) " memories in " code { (collection) } }
            @if !listing.page.items.is_empty() {
                table {
                    caption class="visually-hidden" { "Memories" }
                    thead { tr { th scope="col" { "Memory" } th scope="col" { "User" } th scope="col" { "Inferred" } th scope="col" { "Status" } th scope="col" { "Expires" } th scope="col" { "Updated" } } }
                    tbody {
                        @for m in &listing.page.items {
                            tr {
                                td { a href=(item_href(&db.name, m)) { (m.label()) } }
                                td { (m.fields.user_name) }
                                td {
                                    @if !m.fields.infer { span class="hint" { "inference off" } }
                                    @else if m.fields.inferred_content.is_empty() { span class="hint" { "nothing new" } }
                                    @else { div class="text" { (m.fields.inferred_content) } }
                                }
                                td { (status_badge(m.status)) }
                                td { @if let Some(at) = m.fields.expires_at { (time(at)) } @else { "never" } }
                                td { (time(m.updated_at)) }
                            }
                        }
                    }
                }
            }
            (pager(page, pages, query_of))
            @for (user, found) in &facts {
                h2 { "What inference holds about " @if user.is_empty() { "the user" } @else { (user) } }
                @if found.len() >= engram_app::USER_FACTS_SHOWN as usize {
                    p class="hint" { "The newest " (engram_app::USER_FACTS_SHOWN) " facts." }
                }
                @if found.is_empty() {
                    p class="hint" { "No fact yet." }
                } @else {
                    table {
                        caption class="visually-hidden" { "Facts" }
                        thead { tr { th scope="col" { "Statement" } th scope="col" { "Slot" } th scope="col" { "Since" } th scope="col" { "Superseded" } } }
                        tbody {
                            @for f in found {
                                tr class=[f.fact.valid_until.map(|_| "superseded")] {
                                    td { (f.fact.statement) }
                                    td { code { (f.fact.slot) } " = " (f.fact.value) }
                                    td { (time(f.fact.valid_from)) }
                                    td {
                                        @if let Some(until) = f.fact.valid_until {
                                            (time(until))
                                            @if let Some(by) = &f.superseded_by { " by “" (by) "”" }
                                        } @else { span class="hint" { "holds" } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    )))
}
