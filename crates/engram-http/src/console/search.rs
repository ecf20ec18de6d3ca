//! The search playground: a form with the options of `POST /query`, sent as that route's body to
//! the same reading and the same query, and the answer shown: the ranked chunks with the query's
//! words marked, each chunk's scores, `meta`, and the graph context drawn.

use std::collections::{BTreeMap, HashSet};

use axum::extract::{Path, Query, State};
use axum::Extension;
use engram_app::{App, QueryOutcome, RelationRecord};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::pages::{layout, urlencoding};
use super::session::Session;
use super::{html as page_response, Page};
use crate::error::ApiError;

/// The playground's fields, as the query string carries them (a search changes nothing, so it
/// is a `GET` a browser can go back to).
#[derive(Debug, Default, Deserialize)]
pub(super) struct SearchForm {
    #[serde(default)]
    query: String,
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    mode: String,
    #[serde(default)]
    query_by: String,
    #[serde(default)]
    operator: String,
    #[serde(default)]
    alpha: String,
    #[serde(default)]
    max_results: String,
    #[serde(default)]
    recency_bias: String,
    #[serde(default)]
    num_related_chunks: String,
    #[serde(default)]
    collections: String,
    #[serde(default)]
    metadata_filters: String,
    #[serde(default)]
    graph_context: Option<String>,
    /// Set by the form so an unchecked `graph_context` box reads as false.
    #[serde(default)]
    sent: Option<String>,
}

impl SearchForm {
    /// The form as a `POST /query` body for `database`.
    fn body(&self, database: &str) -> Result<Value, ApiError> {
        let mut body = Map::new();
        body.insert("database".into(), json!(database));
        body.insert("query".into(), json!(self.query));
        for (name, value) in [
            ("type", &self.kind),
            ("mode", &self.mode),
            ("query_by", &self.query_by),
            ("operator", &self.operator),
        ] {
            if !value.is_empty() {
                body.insert(name.into(), json!(value));
            }
        }
        let alpha = self.alpha.trim();
        if alpha == "auto" {
            body.insert("alpha".into(), json!("auto"));
        } else if !alpha.is_empty() {
            body.insert("alpha".into(), json!(number("alpha", alpha)?));
        }
        for (name, value) in [
            ("max_results", &self.max_results),
            ("recency_bias", &self.recency_bias),
            ("num_related_chunks", &self.num_related_chunks),
        ] {
            let value = value.trim();
            if !value.is_empty() {
                let n = number(name, value)?;
                body.insert(name.into(), json!(n));
            }
        }
        if let Some(collections) = collections(&self.collections)? {
            body.insert("collections".into(), collections);
        }
        if !self.metadata_filters.trim().is_empty() {
            let filters: Value = serde_json::from_str(&self.metadata_filters)
                .map_err(|e| ApiError::invalid(format!("`metadata_filters` is not JSON: {e}")))?;
            body.insert("metadata_filters".into(), filters);
        }
        if self.sent.is_some() {
            body.insert("graph_context".into(), json!(self.graph_context.is_some()));
        }
        body.insert("response_format".into(), json!("structured"));
        Ok(Value::Object(body))
    }
}

/// A number field; integers stay integers (`max_results` takes no fraction).
fn number(name: &str, text: &str) -> Result<Value, ApiError> {
    if let Ok(n) = text.parse::<i64>() {
        return Ok(json!(n));
    }
    text.parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
        .map(|n| json!(n))
        .ok_or_else(|| ApiError::invalid(format!("`{name}` must be a number, not `{text}`")))
}

/// `a, b` is a list of collections; `a:2, b:0.5` weighs them.
fn collections(text: &str) -> Result<Option<Value>, ApiError> {
    let parts: Vec<&str> = text
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() {
        return Ok(None);
    }
    if parts.iter().any(|p| p.contains(':')) {
        let mut weights = Map::new();
        for part in parts {
            let (name, weight) = part.split_once(':').unwrap_or((part, "1"));
            weights.insert(
                name.trim().to_owned(),
                number("collections", weight.trim())?,
            );
        }
        Ok(Some(Value::Object(weights)))
    } else {
        Ok(Some(json!(parts)))
    }
}

pub(super) async fn page(
    State(app): State<App>,
    Extension(session): Extension<Session>,
    Path(database): Path<String>,
    Query(form): Query<SearchForm>,
) -> Page {
    let name = engram_app::parse_database_name("database", &database).map_err(ApiError::from)?;
    let db = app.database(&session.who, &name).await?;
    let href = format!("/console/databases/{}", urlencoding(db.name.as_str()));
    let answer = if form.query.trim().is_empty() {
        None
    } else {
        Some(
            match crate::current::run_query(&app, &session.who, form.body(db.name.as_str())?).await
            {
                Ok((outcome, ignored)) => results(&outcome, &ignored, &form.query, &db.name),
                Err(err) => super::pages::error_fragment(err.0.code.as_str(), &err.0.message),
            },
        )
    };
    let graph_on = form.sent.is_none() || form.graph_context.is_some();
    Ok(page_response(layout(
        &format!("Search {}", db.name.as_str()),
        Some(&session),
        html! {
            (super::pages::tabs(&db.name, super::pages::Tab::Search))
            form method="get" action={ (href) "/search" } class="card search" role="search" {
                input type="hidden" name="sent" value="1";
                label for="q" { "Query" }
                input id="q" name="query" type="search" value=(form.query) required autofocus;
                div class="options" {
                    (choice("type", "Type", &form.kind, &["", "knowledge", "memory", "all"]))
                    (choice("mode", "Mode", &form.mode, &["", "auto", "fast", "thinking"]))
                    (choice("query_by", "Ranking", &form.query_by, &["", "hybrid", "text"]))
                    (choice("operator", "Keyword operator", &form.operator, &["", "or", "and", "phrase"]))
                    (field("alpha", "Alpha (0 keyword … 1 semantic, or auto)", &form.alpha, "0.8"))
                    (field("max_results", "Max results", &form.max_results, "10"))
                    (field("recency_bias", "Recency bias (0–1)", &form.recency_bias, "0"))
                    (field("num_related_chunks", "Neighbouring chunks (0–10)", &form.num_related_chunks, "0"))
                    (field("collections", "Collections (a, b or a:2, b:0.5)", &form.collections, "default"))
                    div class="field check" {
                        input id="graph_context" name="graph_context" type="checkbox" checked[graph_on];
                        label for="graph_context" { "Graph context" }
                    }
                }
                label for="metadata_filters" { "Metadata filters (JSON)" }
                textarea id="metadata_filters" name="metadata_filters" rows="2" placeholder=r#"{"team": "docs"}"# { (form.metadata_filters) }
                button type="submit" { "Search" }
            }
            @if let Some(answer) = answer {
                section aria-label="Results" { (answer) }
            }
        },
    )))
}

fn choice(name: &str, label: &str, current: &str, options: &[&str]) -> Markup {
    let id = format!("s-{name}");
    html! {
        div class="field" {
            label for=(id) { (label) }
            select id=(id) name=(name) {
                @for option in options {
                    option value=(option) selected[*option == current] {
                        @if option.is_empty() { "default" } @else { (option) }
                    }
                }
            }
        }
    }
}

fn field(name: &str, label: &str, current: &str, placeholder: &str) -> Markup {
    let id = format!("s-{name}");
    html! {
        div class="field" {
            label for=(id) { (label) }
            input id=(id) name=(name) value=(current) placeholder=(placeholder);
        }
    }
}

fn score(value: Option<f32>) -> String {
    value.map_or_else(|| "–".to_owned(), |v| format!("{v:.3}"))
}

fn results(
    outcome: &QueryOutcome,
    ignored: &crate::wire::Ignored,
    query: &str,
    db: &engram_types::DatabaseName,
) -> Markup {
    let terms = terms(query);
    let graph = outcome.graph_context.as_ref().map(|g| {
        let triplets: Vec<&RelationRecord> = g
            .query_paths
            .iter()
            .chain(&g.chunk_relations)
            .flat_map(|p| &p.triplets)
            .collect();
        triplets
    });
    html! {
        h2 { (outcome.chunks.len()) " results" }
        dl class="facts meta" {
            dt { "Mode" } dd { (outcome.mode.as_str()) @if let Some(reason) = outcome.mode_reason { " (auto: " (reason) ")" } }
            dt { "Alpha" } dd { (format!("{:.2}", outcome.alpha)) }
            @if !outcome.ignored_filters.is_empty() {
                dt { "Ignored filter keys" } dd { (outcome.ignored_filters.join(", ")) }
            }
            @if let Some(summary) = ignored.summary() {
                dt { "Ignored parameters" } dd { (summary) }
            }
            dt { "Timings" } dd {
                @for t in &outcome.timings {
                    span class="timing" { (t.stage.as_str()) " " (format!("{:.2}", t.elapsed.as_secs_f64() * 1000.0)) " ms" } " "
                }
            }
        }
        ol class="results" {
            @for (rank, ranked) in outcome.chunks.iter().enumerate() {
                li class="result" {
                    p class="source" {
                        span class="rank" { "#" (rank + 1) } " "
                        a href={ (super::pages::item_href(db, &ranked.hit.item)) "#chunk-" (ranked.hit.chunk_id) } {
                            (ranked.hit.item.label())
                        }
                        " · " span class="hint" { (ranked.hit.item.collection.as_str()) " · part " (ranked.hit.position + 1) }
                    }
                    table class="scores" {
                        caption class="visually-hidden" { "Scores" }
                        tr {
                            th scope="row" { "score" } td { (format!("{:.3}", ranked.score)) }
                            th scope="row" { "keyword" } td { (score(ranked.scores.keyword)) }
                            th scope="row" { "vector" } td { (score(ranked.scores.vector)) }
                            th scope="row" { "fused" } td { (score(ranked.scores.fused)) }
                            th scope="row" { "rerank" } td { (score(ranked.scores.rerank)) }
                        }
                    }
                    div class="text" { (highlighted(&ranked.hit.content, &terms)) }
                }
            }
        }
        @if let Some(triplets) = graph {
            h2 { "Graph context" }
            @if triplets.is_empty() {
                p class="hint" { "No relation explains these results." }
            } @else {
                div id="graph" class="graph" role="img" aria-label="The graph context drawn: entities and the relations between them" data-graph=(graph_json(&triplets)) {}
                table {
                    caption class="visually-hidden" { "Graph context relations" }
                    thead { tr { th scope="col" { "Source" } th scope="col" { "Relation" } th scope="col" { "Target" } th scope="col" { "Evidence" } } }
                    tbody {
                        @for t in &triplets {
                            tr { td { (t.source.name) } td { (super::pages::predicate(t)) } td { (t.target.name) } td { (t.context) } }
                        }
                    }
                }
            }
        }
    }
}

/// The entities and relations as Cytoscape elements (read by `console.js`).
pub(super) fn graph_json(triplets: &[&RelationRecord]) -> String {
    let mut nodes = BTreeMap::new();
    let mut edges = Vec::new();
    let mut seen = HashSet::new();
    for t in triplets {
        for e in [&t.source, &t.target] {
            nodes.entry(e.entity_key).or_insert_with(|| {
                json!({"data": {"id": format!("e{}", e.entity_key), "label": e.name, "kind": e.kind}})
            });
        }
        if seen.insert(t.relation_key) {
            edges.push(json!({"data": {
                "id": format!("r{}", t.relation_key),
                "source": format!("e{}", t.source.entity_key),
                "target": format!("e{}", t.target.entity_key),
                "label": super::pages::predicate(t),
            }}));
        }
    }
    json!({"nodes": nodes.into_values().collect::<Vec<_>>(), "edges": edges}).to_string()
}

/// The query's words worth marking, lower-cased.
fn terms(query: &str) -> HashSet<String> {
    const STOP: &[&str] = &[
        "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "how", "in", "is", "it",
        "of", "on", "or", "that", "the", "to", "was", "what", "when", "where", "which", "who",
        "why", "with",
    ];
    words(query)
        .filter(|(_, w)| !STOP.contains(&w.as_str()))
        .map(|(_, w)| stem(&w).to_owned())
        .collect()
}

/// Each run of letters and digits with its byte range, lower-cased.
fn words(text: &str) -> impl Iterator<Item = (std::ops::Range<usize>, String)> + '_ {
    let mut start = None;
    let mut out = Vec::new();
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        match (c.is_alphanumeric(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s..i, text[s..i].to_lowercase()));
                start = None;
            }
            _ => {}
        }
    }
    out.into_iter()
}

/// A crude English stem, so `ranking` marks `ranked`: only for marking, never for ranking.
fn stem(word: &str) -> &str {
    let long = |base: &str| base.chars().count() >= 3;
    let mut word = match word.strip_suffix('s') {
        Some(base) if long(base) && !base.ends_with('s') => base,
        _ => word,
    };
    for suffix in ["ing", "ed"] {
        if let Some(base) = word.strip_suffix(suffix).filter(|b| long(b)) {
            word = base;
            break;
        }
    }
    match word.strip_suffix('e') {
        Some(base) if long(base) => base,
        _ => word,
    }
}

/// The text with the query's words in `<mark>`; every piece escaped.
fn highlighted(text: &str, terms: &HashSet<String>) -> Markup {
    let mut pieces: Vec<(&str, bool)> = Vec::new();
    let mut at = 0;
    for (range, word) in words(text) {
        if terms.contains(stem(&word)) {
            pieces.push((&text[at..range.start], false));
            pieces.push((&text[range.clone()], true));
            at = range.end;
        }
    }
    pieces.push((&text[at..], false));
    html! {
        @for (piece, marked) in pieces {
            @if marked { mark { (piece) } } @else { (piece) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_words_are_marked_and_everything_is_escaped() {
        let terms = terms("How are rankings fused?");
        let out = highlighted("<b>Ranked</b> lists fuse & rank", &terms).into_string();
        assert_eq!(
            out,
            "&lt;b&gt;<mark>Ranked</mark>&lt;/b&gt; lists <mark>fuse</mark> &amp; <mark>rank</mark>"
        );
    }

    #[test]
    fn collections_read_as_a_list_or_as_weights() {
        assert_eq!(
            collections(" a, b ").ok().flatten(),
            Some(json!(["a", "b"]))
        );
        assert_eq!(
            collections("a:2, b:0.5").ok().flatten(),
            Some(json!({"a": 2, "b": 0.5}))
        );
        assert_eq!(collections("").ok().flatten(), None);
        assert!(collections("a:x").is_err());
    }
}
