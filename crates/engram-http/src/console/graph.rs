//! The graph explorer: an entity's neighbourhood in a database, drawn (Cytoscape.js, from the
//! `data-graph` the page carries), each relation with its evidence sentence and a link to the
//! chunk it stands on.

use axum::extract::{Path, Query, State};
use axum::routing::get;
use axum::{Extension, Router};
use engram_app::App;
use maud::html;
use serde::Deserialize;

use super::pages::{database_name, item_href, layout, predicate, tabs, Tab};
use super::session::Session;
use super::{html as page_response, Page};

/// Relations one neighbourhood shows.
const RELATIONS: u32 = 200;

/// The graph explorer's routes (signed in: merged under the session's guard).
pub(super) fn routes() -> Router<App> {
    Router::new().route("/console/databases/{database}/graph", get(page))
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct GraphQuery {
    #[serde(default)]
    entity: String,
}

async fn page(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(database): Path<String>,
    Query(query): Query<GraphQuery>,
) -> Page {
    let name = database_name(&database)?;
    let db = app.database(&session.who, &name).await?;
    let entity = query.entity.trim();
    let found = if entity.is_empty() {
        None
    } else {
        Some(
            app.entity_neighbourhood(&session.who, &name, entity, RELATIONS)
                .await?,
        )
    };
    let href = format!("{}/graph", super::pages::database_href(&db.name));
    Ok(page_response(layout(
        &format!("Graph of {}", db.name.as_str()),
        Some(&session),
        html! {
            (tabs(&db.name, Tab::Graph))
            form method="get" action=(href) class="filters" role="search" {
                label for="entity" { "Entity" }
                input id="entity" name="entity" value=(entity) placeholder="a person, a place, a product…" required;
                button type="submit" { "Explore" }
            }
            @if let Some(n) = &found {
                @if n.entities.is_empty() {
                    p { "No entity named " code { (n.key) } " in this database." }
                } @else {
                    p class="hint" {
                        code { (n.key) } ": mentioned in "
                        (n.entities.iter().map(|(_, m)| m).sum::<u64>()) " chunks, "
                        (n.relations.len()) " relations"
                        @if n.truncated { " (the first " (RELATIONS) ")" }
                    }
                    @if !n.relations.is_empty() {
                        @let triplets: Vec<&engram_app::RelationRecord> = n.relations.iter().map(|r| &r.relation).collect();
                        div id="graph" class="graph" role="img" aria-label={ "The neighbourhood of " (n.key) " drawn" } data-graph=(super::search::graph_json(&triplets)) {}
                        table {
                            caption class="visually-hidden" { "Relations" }
                            thead { tr { th scope="col" { "Source" } th scope="col" { "Relation" } th scope="col" { "Target" } th scope="col" { "Evidence" } } }
                            tbody {
                                @for r in &n.relations {
                                    tr {
                                        td { a href={ (href) "?entity=" (super::pages::urlencoding(&r.relation.source.name)) } { (r.relation.source.name) } }
                                        td { (predicate(&r.relation)) }
                                        td { a href={ (href) "?entity=" (super::pages::urlencoding(&r.relation.target.name)) } { (r.relation.target.name) } }
                                        td {
                                            @if let Some(item) = &r.item {
                                                a href={ (item_href(&db.name, item)) "#chunk-" (r.relation.chunk_id) } { (r.relation.context) }
                                            } @else { (r.relation.context) }
                                        }
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
