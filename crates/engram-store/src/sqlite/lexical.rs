//! The lexical index of the SQLite store: BM25 over chunk text with block-max WAND (tantivy),
//! one in-memory index per database, derived from `chunks`.
//!
//! Triggers log every change to a chunk in `lexical_log`, in the transaction that makes it
//! (cascaded deletes included). [`LexicalIndexes::catch_up`] applies the log before a keyword
//! search reads, and empties it; opening the store rebuilds every index from `chunks`. So the
//! index lags a write at most until the next search, never loses one, and after a crash it is
//! rebuilt from the truth. Per-database indexes keep BM25 statistics per tenant and let a search
//! skip every posting that cannot reach the top (block-max WAND), which SQLite FTS5 could not.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, PoisonError, RwLock};

use engram_types::ItemKind;
use sqlx::{QueryBuilder, Row, Sqlite, SqlitePool};
use tantivy::collector::TopDocs;
use tantivy::indexer::IndexWriterOptions;
use tantivy::query::{BooleanQuery, Occur, PhraseQuery, Query, TermQuery, TermSetQuery};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions, STRING,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    TextAnalyzer,
};
use tantivy::{Index, IndexReader, ReloadPolicy, TantivyDocument, Term};

use super::items::push_in;
use crate::{LexicalQuery, StoreError, StoreResult, TermOperator};

const ANALYZER: &str = "engram";
const KEY: &str = "key";
/// Rows of the log (or chunks, when rebuilding) applied at once.
const PAGE: i64 = 5_000;
/// The smallest per-thread indexing budget tantivy accepts, with a margin.
const WRITER_BUDGET: usize = 20_000_000;

fn lexical_error(err: impl std::fmt::Display) -> StoreError {
    StoreError::Lexical(err.to_string())
}

/// Words (runs of letters and digits), lowercased, folded to ASCII and stemmed (Porter): the
/// same analysis for chunks and queries.
fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(64))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(Stemmer::new(Language::English))
        .build()
}

#[derive(Clone, Copy)]
struct Fields {
    key: Field,
    text: Field,
    collection: Field,
    kind: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let key = builder.add_i64_field(KEY, NumericOptions::default().set_indexed().set_fast());
    let text = builder.add_text_field(
        "text",
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        ),
    );
    let collection = builder.add_text_field("collection", STRING);
    let kind = builder.add_text_field("kind", STRING);
    (
        builder.build(),
        Fields {
            key,
            text,
            collection,
            kind,
        },
    )
}

/// A chunk as the index holds it.
pub(super) struct LexicalDoc {
    pub chunk_key: i64,
    pub collection: String,
    pub kind: String,
    pub content: String,
    /// Indexed with the content (see `NewChunk::context`).
    pub context: String,
}

/// What to change in one database's index: every key in `remove` goes, then `add` comes in.
#[derive(Default)]
struct Changes {
    remove: Vec<i64>,
    add: Vec<LexicalDoc>,
}

pub(super) struct DatabaseIndex {
    index: Index,
    reader: IndexReader,
}

/// Every database's lexical index.
pub(super) struct LexicalIndexes {
    schema: Schema,
    fields: Fields,
    databases: RwLock<HashMap<String, Arc<DatabaseIndex>>>,
    /// One catch-up at a time; searches that arrive meanwhile wait for it.
    catching_up: tokio::sync::Mutex<()>,
}

impl LexicalIndexes {
    pub(super) fn new() -> Self {
        let (schema, fields) = schema();
        Self {
            schema,
            fields,
            databases: RwLock::new(HashMap::new()),
            catching_up: tokio::sync::Mutex::new(()),
        }
    }

    pub(super) fn database(&self, id: &str) -> Option<Arc<DatabaseIndex>> {
        self.databases
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    fn database_or_new(&self, id: &str) -> StoreResult<Arc<DatabaseIndex>> {
        if let Some(found) = self.database(id) {
            return Ok(found);
        }
        let mut databases = self
            .databases
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = databases.get(id) {
            return Ok(found.clone());
        }
        let index = Index::create_in_ram(self.schema.clone());
        index.tokenizers().register(ANALYZER, analyzer());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(lexical_error)?;
        let created = Arc::new(DatabaseIndex { index, reader });
        databases.insert(id.to_owned(), created.clone());
        Ok(created)
    }

    /// Applies changes to one database's index and makes them visible (blocking).
    fn apply(&self, database: &str, changes: Changes) -> StoreResult<()> {
        if changes.remove.is_empty() && changes.add.is_empty() {
            return Ok(());
        }
        let target = self.database_or_new(database)?;
        let options = IndexWriterOptions::builder()
            .num_worker_threads(1)
            .num_merge_threads(1)
            .memory_budget_per_thread(WRITER_BUDGET)
            .build();
        let mut writer = target
            .index
            .writer_with_options::<TantivyDocument>(options)
            .map_err(lexical_error)?;
        for key in &changes.remove {
            writer.delete_term(Term::from_field_i64(self.fields.key, *key));
        }
        for doc in changes.add {
            let mut document = TantivyDocument::new();
            document.add_i64(self.fields.key, doc.chunk_key);
            document.add_text(self.fields.text, &doc.content);
            if !doc.context.is_empty() {
                document.add_text(self.fields.text, &doc.context);
            }
            document.add_text(self.fields.collection, &doc.collection);
            document.add_text(self.fields.kind, &doc.kind);
            writer.add_document(document).map_err(lexical_error)?;
        }
        writer.commit().map_err(lexical_error)?;
        writer.wait_merging_threads().map_err(lexical_error)?;
        target.reader.reload().map_err(lexical_error)
    }

    /// Forgets the indexes of databases that no longer exist.
    fn forget(&self, gone: &[String]) {
        let mut databases = self
            .databases
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        for id in gone {
            databases.remove(id);
        }
    }

    /// Rebuilds every index from `chunks` and empties the log (on open, before any writer).
    pub(super) async fn rebuild(self: &Arc<Self>, pool: &SqlitePool) -> StoreResult<usize> {
        let _guard = self.catching_up.lock().await;
        sqlx::query("DELETE FROM lexical_log").execute(pool).await?;
        self.databases
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let (mut after, mut total) = (i64::MIN, 0);
        loop {
            let rows = sqlx::query(
                "SELECT chunk_key, database_id, collection, kind, content, context FROM chunks
                 WHERE chunk_key > ? ORDER BY chunk_key LIMIT ?",
            )
            .bind(after)
            .bind(PAGE)
            .fetch_all(pool)
            .await?;
            let Some(last) = rows.last() else { break };
            after = last.try_get("chunk_key")?;
            total += rows.len();
            let mut by_database: HashMap<String, Changes> = HashMap::new();
            for row in &rows {
                let database: String = row.try_get("database_id")?;
                by_database
                    .entry(database)
                    .or_default()
                    .add
                    .push(doc_from_row(row)?);
            }
            self.apply_all(by_database).await?;
        }
        Ok(total)
    }

    async fn apply_all(self: &Arc<Self>, by_database: HashMap<String, Changes>) -> StoreResult<()> {
        let indexes = self.clone();
        tokio::task::spawn_blocking(move || {
            by_database
                .into_iter()
                .try_for_each(|(database, changes)| indexes.apply(&database, changes))
        })
        .await
        .map_err(lexical_error)?
    }

    /// Applies the log: every logged chunk leaves the index of the database it was in, and
    /// comes back (with its current fields) if `chunks` still holds it. Idempotent, so a failure
    /// part-way leaves the log to be applied again.
    pub(super) async fn catch_up(self: &Arc<Self>, pool: &SqlitePool) -> StoreResult<()> {
        let _guard = self.catching_up.lock().await;
        loop {
            let logged: Vec<(i64, i64, String)> = sqlx::query_as(
                "SELECT seq, chunk_key, database_id FROM lexical_log ORDER BY seq LIMIT ?",
            )
            .bind(PAGE)
            .fetch_all(pool)
            .await?;
            let Some(&(last_seq, _, _)) = logged.last() else {
                return Ok(());
            };
            let mut by_database: HashMap<String, Changes> = HashMap::new();
            let mut keys = HashSet::new();
            for (_, key, database) in &logged {
                if keys.insert(*key) {
                    by_database
                        .entry(database.clone())
                        .or_default()
                        .remove
                        .push(*key);
                }
            }
            let keys: Vec<i64> = keys.into_iter().collect();
            let mut select = QueryBuilder::<Sqlite>::new(
                "SELECT chunk_key, database_id, collection, kind, content, context FROM chunks
                 WHERE 1 = 1",
            );
            push_in(&mut select, "chunk_key", keys.iter().copied());
            for row in select.build().fetch_all(pool).await? {
                let database: String = row.try_get("database_id")?;
                by_database
                    .entry(database)
                    .or_default()
                    .add
                    .push(doc_from_row(&row)?);
            }
            let mut gone = Vec::new();
            for database in by_database.keys() {
                let exists: Option<i64> =
                    sqlx::query_scalar("SELECT 1 FROM databases WHERE id = ?")
                        .bind(database)
                        .fetch_optional(pool)
                        .await?;
                if exists.is_none() {
                    gone.push(database.clone());
                }
            }
            by_database.retain(|database, _| !gone.contains(database));
            self.forget(&gone);
            self.apply_all(by_database).await?;
            sqlx::query("DELETE FROM lexical_log WHERE seq <= ?")
                .bind(last_seq)
                .execute(pool)
                .await?;
        }
    }

    /// The best `limit` chunk keys of a database by BM25 (higher is better), among chunks of
    /// the given kinds and collections (empty: any). Blocking; the caller checks liveness.
    pub(super) fn search(
        &self,
        database: &str,
        query: &LexicalQuery,
        kinds: &[ItemKind],
        collections: &[String],
        limit: usize,
    ) -> StoreResult<Vec<(i64, f32)>> {
        let Some(target) = self.database(database) else {
            return Ok(Vec::new());
        };
        let Some(matching) = self.text_query(&target.index, query)? else {
            return Ok(Vec::new());
        };
        let searcher = target.reader.searcher();
        let limit = limit.min(usize::try_from(searcher.num_docs()).unwrap_or(usize::MAX));
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Must, matching)];
        if !kinds.is_empty() {
            let terms = kinds
                .iter()
                .map(|k| Term::from_field_text(self.fields.kind, k.as_str()));
            clauses.push((Occur::Must, Box::new(TermSetQuery::new(terms))));
        }
        if !collections.is_empty() {
            let terms = collections
                .iter()
                .map(|c| Term::from_field_text(self.fields.collection, c));
            clauses.push((Occur::Must, Box::new(TermSetQuery::new(terms))));
        }
        let query: Box<dyn Query> = if clauses.len() == 1 {
            clauses.pop().map(|c| c.1).unwrap_or_else(|| unreachable!())
        } else {
            Box::new(BooleanQuery::new(clauses))
        };
        let top = searcher
            .search(&query, &TopDocs::with_limit(limit).order_by_score())
            .map_err(lexical_error)?;
        let mut keys_by_segment = HashMap::new();
        let mut found = Vec::with_capacity(top.len());
        for (score, address) in top {
            let column = match keys_by_segment.entry(address.segment_ord) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(
                    searcher
                        .segment_reader(address.segment_ord)
                        .fast_fields()
                        .i64(KEY)
                        .map_err(lexical_error)?,
                ),
            };
            if let Some(key) = column.first(address.doc_id) {
                found.push((key, score));
            }
        }
        Ok(found)
    }

    /// The query matching `query`'s terms as analyzed for the index: `or` any term (ranked by
    /// BM25 with block-max WAND), `and` every term, `phrase` the terms in order.
    fn text_query(
        &self,
        index: &Index,
        query: &LexicalQuery,
    ) -> StoreResult<Option<Box<dyn Query>>> {
        let mut analyzer = index
            .tokenizer_for_field(self.fields.text)
            .map_err(lexical_error)?;
        let mut tokens = Vec::new();
        for term in &query.terms {
            let mut stream = analyzer.token_stream(term);
            while stream.advance() {
                tokens.push(Term::from_field_text(
                    self.fields.text,
                    &stream.token().text,
                ));
            }
        }
        if tokens.is_empty() {
            return Ok(None);
        }
        let term_query = |term: Term| -> Box<dyn Query> {
            Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs))
        };
        Ok(Some(match query.operator {
            TermOperator::Phrase if tokens.len() > 1 => Box::new(PhraseQuery::new(tokens)),
            TermOperator::Phrase => term_query(tokens.remove(0)),
            TermOperator::Or | TermOperator::And => {
                let occur = if query.operator == TermOperator::Or {
                    Occur::Should
                } else {
                    Occur::Must
                };
                let mut seen = HashSet::new();
                tokens.retain(|t| seen.insert(t.clone()));
                Box::new(BooleanQuery::new(
                    tokens.into_iter().map(|t| (occur, term_query(t))).collect(),
                ))
            }
        }))
    }
}

fn doc_from_row(row: &sqlx::sqlite::SqliteRow) -> StoreResult<LexicalDoc> {
    Ok(LexicalDoc {
        chunk_key: row.try_get("chunk_key")?,
        collection: row.try_get("collection")?,
        kind: row.try_get("kind")?,
        content: row.try_get("content")?,
        context: row.try_get("context")?,
    })
}
