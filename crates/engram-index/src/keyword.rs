//! The keyword index: BM25 over chunk text with block-max WAND (tantivy), one index per
//! database, fed by the store's chunk change feed. Per-database indexes keep BM25 statistics
//! per tenant and let a search skip every posting that cannot reach the top, which SQLite FTS5
//! could not (it scored every posting: tens of milliseconds per query at 100k chunks).
//!
//! The service keeps the indexes on disk ([`TantivyKeywordIndex::on_disk`], memory-mapped) with
//! the feed position they cover, so a restart follows the feed from there instead of indexing
//! every chunk again (at 1M chunks that was most of a minute). What is saved is trusted only
//! by the feed it followed, in this schema and analysis, and only while the feed still holds
//! every change after its position; otherwise it is deleted and built again.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use async_trait::async_trait;
use engram_store::{ChunkChanges, ChunkKey, IndexedChunk};
use engram_types::DatabaseId;
use tantivy::collector::{FilterCollector, TopDocs};
use tantivy::indexer::IndexWriterOptions;
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, Occur, PhraseQuery, Query, TermQuery, TermSetQuery,
};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions, STRING,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

use crate::analyzer::{analyzer, LexicalQuery, TermOperator};
use crate::{blocking, IndexError, IndexFilter, IndexResult, Keys};

/// Ranks chunks of one database by their words.
#[async_trait]
pub trait KeywordIndex: Send + Sync {
    /// Applies one page of the change feed (see [`ChunkChanges`]); idempotent.
    async fn apply(&self, changes: Arc<ChunkChanges>) -> IndexResult<()>;
    /// Forgets every database (before a rebuild).
    async fn clear(&self) -> IndexResult<()>;
    /// Told when the rebuild that followed a clear has applied every live chunk: what it held
    /// back until then is made searchable.
    async fn rebuilt(&self) -> IndexResult<()> {
        Ok(())
    }
    /// Opens what was saved following `feed` and returns the position it covers (every change
    /// through it is applied), or `None` when nothing usable was saved: then the caller
    /// clears and rebuilds it.
    async fn restore(&self, feed: &str) -> IndexResult<Option<i64>> {
        let _ = feed;
        Ok(None)
    }
    /// Told that the index holds every change of `feed` through `through`: a saved index
    /// writes it down, for [`KeywordIndex::restore`].
    async fn covers(&self, feed: &str, through: i64) -> IndexResult<()> {
        let _ = (feed, through);
        Ok(())
    }
    /// The best `limit` chunk keys of a database by BM25 (higher is better) among chunks
    /// passing `filter` and, when `only` is given, whose key it holds. The caller checks what
    /// the store still holds.
    async fn search(
        &self,
        database: &DatabaseId,
        query: &LexicalQuery,
        filter: &IndexFilter,
        limit: usize,
        only: Option<Arc<Keys>>,
    ) -> IndexResult<Vec<(ChunkKey, f32)>>;
}

const ANALYZER: &str = "engram";
const KEY: &str = "key";
/// What a word of the title adds, beside counting as a word of every chunk of its source: the
/// title field's BM25 at this weight. So a title match ranks above the same words in the body
/// alone. Chosen on SciFact (titles in `title`, `engram eval beir`): nDCG@10 of BM25 alone
/// 0.684 at 0 (title in the text only), 0.688 at 0.1, 0.682 at 0.2, 0.661 at 0.6; as a field
/// alone (not in the text) 0.668 at 0.3 and 0.608 at 2.
const TITLE_BOOST: f32 = 0.1;
/// A search restricted to a set of chunks holding at least 1 in this many of the database's
/// ranks as without it and keeps the ranked chunks the set holds; a smaller set is applied
/// while every match is scored.
const BROAD: usize = 32;
/// The smallest per-thread indexing budget tantivy accepts, with a margin.
const WRITER_BUDGET: usize = 20_000_000;
/// During a rebuild: one writer per database is kept open from page to page with this budget,
/// so a database's chunks make a few large segments instead of a small one per page, each
/// committed and merged before the next page. With the store's scan beside it, a restart
/// answers its first query in 8.9 s instead of 14.9 over 200k chunks, in 57 s instead of 92
/// over 1M (`engram bench query --data`, run again on its data).
const REBUILD_BUDGET: usize = 96_000_000;
/// During a rebuild: writers kept open at once (the least recently fed is committed first).
const REBUILD_WRITERS: usize = 4;

/// The file beside the saved databases' indexes naming the feed and position they cover.
const POSITION_FILE: &str = "position.json";
/// Left beside them by `engram check --repair`: the saved indexes are not used at the next
/// start but built again from the store (a running instance rewrites the position, never this).
const REBUILD_FILE: &str = "rebuild";
/// Raised when what is saved changes meaning in a way the schema and the analysis of
/// [`fingerprint`] do not show.
const FORMAT: u32 = 1;

fn keyword_error(err: impl std::fmt::Display) -> IndexError {
    let text = err.to_string();
    // Tantivy's errors wrap the file system's; a full disk reads "(os error 28)".
    if text.contains("os error 28") || text.contains("No space left on device") {
        IndexError::DiskFull(text)
    } else {
        IndexError::Keyword(text)
    }
}

#[derive(Clone, Copy)]
struct Fields {
    key: Field,
    text: Field,
    title: Field,
    collection: Field,
    kind: Field,
    /// The item conditions' terms (`facets::terms`): a selective filter is a clause over them.
    item_terms: Field,
}

fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let key = builder.add_i64_field(KEY, NumericOptions::default().set_indexed().set_fast());
    let words = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let text = builder.add_text_field("text", words.clone());
    let title = builder.add_text_field("title", words);
    let collection = builder.add_text_field("collection", STRING);
    let kind = builder.add_text_field("kind", STRING);
    let item_terms = builder.add_u64_field("item_terms", NumericOptions::default().set_indexed());
    (
        builder.build(),
        Fields {
            key,
            text,
            title,
            collection,
            kind,
            item_terms,
        },
    )
}

struct DatabaseIndex {
    index: Index,
    reader: IndexReader,
}

/// What to change in one database's index: every key in `remove` goes, then `add` comes in.
#[derive(Default)]
struct Changes<'a> {
    remove: Vec<i64>,
    add: Vec<&'a IndexedChunk>,
}

/// Every database's keyword index (tantivy), in memory or on disk.
#[derive(Clone)]
pub struct TantivyKeywordIndex {
    inner: Arc<Inner>,
}

struct Inner {
    schema: Schema,
    fields: Fields,
    databases: RwLock<HashMap<DatabaseId, Arc<DatabaseIndex>>>,
    /// Between a clear and `rebuilt`: the writers kept open, least recently fed first.
    rebuilding: std::sync::Mutex<Option<Vec<Open>>>,
    /// Where each database's index is kept (a folder named by the database) with the
    /// [`POSITION_FILE`]; `None`: in memory.
    directory: Option<PathBuf>,
    /// What this version writes, see [`fingerprint`].
    fingerprint: String,
}

/// A database's writer kept open through a rebuild.
struct Open {
    database: DatabaseId,
    target: Arc<DatabaseIndex>,
    writer: IndexWriter<TantivyDocument>,
}

impl Open {
    /// Commits what the writer holds, waits for its merges and shows it to searches.
    fn close(self) -> IndexResult<()> {
        let Self {
            mut writer, target, ..
        } = self;
        writer.commit().map_err(keyword_error)?;
        writer.wait_merging_threads().map_err(keyword_error)?;
        target.reader.reload().map_err(keyword_error)
    }
}

impl Default for TantivyKeywordIndex {
    fn default() -> Self {
        Self::with_directory(None)
    }
}

impl TantivyKeywordIndex {
    /// Indexes in memory, built from the store at every start.
    pub fn new() -> Self {
        Self::default()
    }

    /// Indexes kept under `directory` (created when first needed), memory-mapped, with the
    /// feed position they cover: see [`KeywordIndex::restore`].
    pub fn on_disk(directory: PathBuf) -> Self {
        Self::with_directory(Some(directory))
    }

    fn with_directory(directory: Option<PathBuf>) -> Self {
        let (schema, fields) = schema();
        Self {
            inner: Arc::new(Inner {
                fingerprint: fingerprint(&schema),
                schema,
                fields,
                databases: RwLock::new(HashMap::new()),
                rebuilding: std::sync::Mutex::new(None),
                directory,
            }),
        }
    }
}

/// What a saved index must have been written with to be read: the format, the schema and the
/// analysis of a sample (a changed tokenizer or stemmer gives other terms).
fn fingerprint(schema: &Schema) -> String {
    const SAMPLE: &str = "Running runs ran the Quick-Brown fox's e-mail: user@example.com, \
                          v2.3.1 ERR_042 naïve Straße café 東京都\n大阪 ไม่มี हिन्दी كَتَبَ данные 2024-01-05";
    let mut analyzer = analyzer();
    let mut stream = analyzer.token_stream(SAMPLE);
    let mut tokens = Vec::new();
    while stream.advance() {
        tokens.push(stream.token().text.clone());
    }
    let schema = serde_json::to_string(schema).unwrap_or_default();
    format!("{FORMAT} {schema} {}", tokens.join(" "))
}

/// Writes `bytes` to `path` whole or not at all (a temporary file, synced, then renamed).
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

#[async_trait]
impl KeywordIndex for TantivyKeywordIndex {
    async fn apply(&self, changes: Arc<ChunkChanges>) -> IndexResult<()> {
        let inner = self.inner.clone();
        blocking(move || inner.apply(&changes)).await
    }

    async fn clear(&self) -> IndexResult<()> {
        // Writers of an unfinished rebuild go first (uncommitted: their work is dropped).
        *self
            .inner
            .rebuilding
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Vec::new());
        self.inner
            .databases
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        let inner = self.inner.clone();
        blocking(move || inner.forget_saved()).await
    }

    async fn rebuilt(&self) -> IndexResult<()> {
        let inner = self.inner.clone();
        blocking(move || {
            let open = inner
                .rebuilding
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            open.into_iter().flatten().try_for_each(Open::close)
        })
        .await
    }

    async fn restore(&self, feed: &str) -> IndexResult<Option<i64>> {
        let inner = self.inner.clone();
        let feed = feed.to_owned();
        blocking(move || {
            let Some(directory) = inner.directory.clone() else {
                return Ok(None);
            };
            match inner.open_saved(&directory, &feed) {
                Ok(Some((through, databases))) => {
                    tracing::info!(
                        databases = databases.len(),
                        through,
                        "keyword indexes opened from disk"
                    );
                    *inner
                        .databases
                        .write()
                        .unwrap_or_else(PoisonError::into_inner) = databases;
                    Ok(Some(through))
                }
                unusable => {
                    if let Err(why) = unusable {
                        tracing::warn!(%why, "the saved keyword indexes cannot be used: building them again");
                    }
                    inner.forget_saved()?;
                    Ok(None)
                }
            }
        })
        .await
    }

    async fn covers(&self, feed: &str, through: i64) -> IndexResult<()> {
        let Some(directory) = self.inner.directory.clone() else {
            return Ok(());
        };
        let position = serde_json::json!({
            "feed": feed,
            "through": through,
            "fingerprint": self.inner.fingerprint,
        });
        blocking(move || {
            std::fs::create_dir_all(&directory).map_err(keyword_error)?;
            write_atomically(
                &directory.join(POSITION_FILE),
                position.to_string().as_bytes(),
            )
            .map_err(keyword_error)
        })
        .await
    }

    async fn search(
        &self,
        database: &DatabaseId,
        query: &LexicalQuery,
        filter: &IndexFilter,
        limit: usize,
        only: Option<Arc<Keys>>,
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
        let inner = self.inner.clone();
        let (database, query, filter) = (database.clone(), query.clone(), filter.clone());
        blocking(move || inner.search(&database, &query, &filter, limit, only)).await
    }
}

/// The databases' indexes saved under a directory, by database.
type Opened = HashMap<DatabaseId, Arc<DatabaseIndex>>;

impl Inner {
    fn database(&self, id: &DatabaseId) -> Option<Arc<DatabaseIndex>> {
        self.databases
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    fn database_or_new(&self, id: &DatabaseId) -> IndexResult<Arc<DatabaseIndex>> {
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
        let index = match &self.directory {
            None => Index::create_in_ram(self.schema.clone()),
            Some(directory) => {
                // Anything left there is no index this one holds (a restore or clear would
                // have opened or deleted it).
                let path = directory.join(id.as_str());
                if path.exists() {
                    std::fs::remove_dir_all(&path).map_err(keyword_error)?;
                }
                std::fs::create_dir_all(&path).map_err(keyword_error)?;
                Index::create_in_dir(&path, self.schema.clone()).map_err(keyword_error)?
            }
        };
        let created = Arc::new(searchable(index)?);
        databases.insert(id.clone(), created.clone());
        Ok(created)
    }

    /// Opens the saved indexes when they follow `feed` in this schema and analysis: the
    /// position they cover and the databases; `None` when nothing was saved or it was saved
    /// for another feed or format.
    fn open_saved(&self, directory: &Path, feed: &str) -> Result<Option<(i64, Opened)>, String> {
        if directory.join(REBUILD_FILE).exists() {
            tracing::info!("a rebuild of the keyword indexes was asked for: building them again");
            return Ok(None);
        }
        let Some((position, indexes)) = read_saved(directory)? else {
            return Ok(None);
        };
        if position["feed"].as_str() != Some(feed) {
            tracing::info!("the saved keyword indexes followed another store: building them again");
            return Ok(None);
        }
        if position["fingerprint"].as_str() != Some(self.fingerprint.as_str()) {
            tracing::info!(
                "the saved keyword indexes were written by another version: building them again"
            );
            return Ok(None);
        }
        let through = position["through"]
            .as_i64()
            .ok_or("the position file names no position")?;
        let mut databases = HashMap::new();
        for (name, index) in indexes {
            if index.schema() != self.schema {
                return Err(format!("{name}: another schema"));
            }
            let opened = searchable(index).map_err(|e| format!("{name}: {e}"))?;
            databases.insert(DatabaseId::from_trusted(name), Arc::new(opened));
        }
        Ok(Some((through, databases)))
    }

    /// Deletes what is saved on disk, the position first (so nothing half deleted is ever
    /// trusted).
    fn forget_saved(&self) -> IndexResult<()> {
        let Some(directory) = &self.directory else {
            return Ok(());
        };
        let entries = match std::fs::read_dir(directory) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(keyword_error(e)),
        };
        match std::fs::remove_file(directory.join(POSITION_FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(keyword_error(e)),
            _ => {}
        }
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(entry.path()).map_err(keyword_error)?;
            }
        }
        // Last: a rebuild cut short is asked for again.
        match std::fs::remove_file(directory.join(REBUILD_FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(keyword_error(e)),
            _ => Ok(()),
        }
    }

    /// Drops a database that is gone, and its folder.
    fn forget(&self, databases: &mut Opened, gone: &DatabaseId) -> IndexResult<()> {
        databases.remove(gone);
        match &self.directory {
            Some(directory) => match std::fs::remove_dir_all(directory.join(gone.as_str())) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(keyword_error(e)),
                _ => Ok(()),
            },
            None => Ok(()),
        }
    }

    /// Applies a page of the feed: per database, removals then additions; gone databases are
    /// dropped (blocking).
    fn apply(&self, changes: &ChunkChanges) -> IndexResult<()> {
        let mut by_database: HashMap<&DatabaseId, Changes<'_>> = HashMap::new();
        for (database, key) in &changes.removed {
            by_database.entry(database).or_default().remove.push(key.0);
        }
        for chunk in &changes.current {
            by_database
                .entry(&chunk.database_id)
                .or_default()
                .add
                .push(chunk);
        }
        {
            let mut databases = self
                .databases
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            for gone in &changes.gone {
                self.forget(&mut databases, gone)?;
            }
        }
        by_database
            .into_iter()
            .filter(|(database, _)| !changes.gone.contains(database))
            .try_for_each(|(database, changes)| self.apply_to(database, changes))
    }

    fn apply_to(&self, database: &DatabaseId, changes: Changes<'_>) -> IndexResult<()> {
        if changes.add.is_empty() && self.database(database).is_none() {
            // Nothing indexed there yet: nothing to remove either.
            return Ok(());
        }
        let target = self.database_or_new(database)?;
        let mut rebuilding = self
            .rebuilding
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(open) = rebuilding.as_mut() {
            // Rebuilding: fed to the database's open writer (the most recently fed goes last),
            // committed at the end.
            let mut fed = match open.iter().position(|o| &o.database == database) {
                Some(at) => open.remove(at),
                None => {
                    if open.len() == REBUILD_WRITERS {
                        open.remove(0).close()?;
                    }
                    Open {
                        database: database.clone(),
                        writer: writer(&target.index, REBUILD_BUDGET)?,
                        target: target.clone(),
                    }
                }
            };
            self.write(&mut fed.writer, changes)?;
            open.push(fed);
            return Ok(());
        }
        drop(rebuilding);
        let mut writer = writer(&target.index, WRITER_BUDGET)?;
        self.write(&mut writer, changes)?;
        writer.commit().map_err(keyword_error)?;
        writer.wait_merging_threads().map_err(keyword_error)?;
        target.reader.reload().map_err(keyword_error)
    }

    /// Gives a writer a database's removals and additions (uncommitted).
    fn write(
        &self,
        writer: &mut IndexWriter<TantivyDocument>,
        changes: Changes<'_>,
    ) -> IndexResult<()> {
        for key in &changes.remove {
            writer.delete_term(Term::from_field_i64(self.fields.key, *key));
        }
        for chunk in changes.add {
            let mut document = TantivyDocument::new();
            document.add_i64(self.fields.key, chunk.chunk_key.0);
            document.add_text(self.fields.text, &chunk.content);
            if !chunk.context.is_empty() {
                document.add_text(self.fields.text, &chunk.context);
            }
            if !chunk.title.is_empty() {
                // What the chunk is about: part of its words, and a field of its own.
                document.add_text(self.fields.text, &chunk.title);
                document.add_text(self.fields.title, &chunk.title);
            }
            document.add_text(self.fields.collection, chunk.collection.as_str());
            document.add_text(self.fields.kind, chunk.kind.as_str());
            let mut terms = crate::facets::terms(chunk);
            terms.sort_unstable();
            terms.dedup();
            for term in terms {
                document.add_u64(self.fields.item_terms, term);
            }
            writer.add_document(document).map_err(keyword_error)?;
        }
        Ok(())
    }

    fn search(
        &self,
        database: &DatabaseId,
        query: &LexicalQuery,
        filter: &IndexFilter,
        limit: usize,
        only: Option<Arc<Keys>>,
    ) -> IndexResult<Vec<(ChunkKey, f32)>> {
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
        let kinds = filter
            .kinds
            .iter()
            .map(|k| Term::from_field_text(self.fields.kind, k.as_str()));
        let collections = filter
            .collections
            .iter()
            .map(|c| Term::from_field_text(self.fields.collection, c));
        for terms in [kinds.collect::<Vec<_>>(), collections.collect()] {
            if let Some(only) = restriction(&searcher, terms)? {
                clauses.push((Occur::Must, only));
            }
        }
        let query: Box<dyn Query> = match clauses.pop() {
            Some((_, only)) if clauses.is_empty() => only,
            Some(last) => {
                clauses.push(last);
                Box::new(BooleanQuery::new(clauses))
            }
            None => return Ok(Vec::new()),
        };
        let best = |page: usize| -> IndexResult<Vec<(ChunkKey, f32)>> {
            let top = searcher
                .search(&query, &TopDocs::with_limit(page).order_by_score())
                .map_err(keyword_error)?;
            chunk_keys(&searcher, top)
        };
        let Some(only) = only else {
            return best(limit);
        };
        let documents = usize::try_from(searcher.num_docs()).unwrap_or(usize::MAX);
        if only.len().saturating_mul(BROAD) < documents && !filter.item_terms.is_empty() {
            // Selective, of plain values: the matches among the documents holding the
            // conditions' terms (their postings lead the intersection), scored as without them.
            let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Must, query.box_clone())];
            for any in &filter.item_terms {
                let terms = any
                    .iter()
                    .map(|t| Term::from_field_u64(self.fields.item_terms, *t));
                let held: Box<dyn Query> = Box::new(TermSetQuery::new(terms));
                clauses.push((Occur::Must, Box::new(ConstScoreQuery::new(held, 0.0))));
            }
            let top = searcher
                .search(
                    &BooleanQuery::new(clauses),
                    &TopDocs::with_limit(limit).order_by_score(),
                )
                .map_err(keyword_error)?;
            return chunk_keys(&searcher, top);
        }
        if only.len().saturating_mul(BROAD) < documents {
            // Selective: every match is scored, those outside `only` skipped by their key.
            let keys = only.clone();
            let collector = FilterCollector::new(
                KEY.to_owned(),
                move |key: i64| keys.contains(ChunkKey(key)),
                TopDocs::with_limit(limit).order_by_score(),
            );
            let top = searcher.search(&query, &collector).map_err(keyword_error)?;
            return chunk_keys(&searcher, top);
        }
        // Broad: the best matches are ranked as without it (block-max WAND), a page sized for
        // the share `only` holds (a quarter more, and a margin), and kept when it holds them; a
        // short page grows.
        let page = limit.saturating_mul(documents) / only.len().max(1);
        let mut page = page
            .saturating_add(page / 4)
            .saturating_add(32)
            .min(documents);
        loop {
            let ranked = best(page)?;
            let exhausted = ranked.len() < page || page == documents;
            let found: Vec<(ChunkKey, f32)> = ranked
                .into_iter()
                .filter(|(key, _)| only.contains(*key))
                .take(limit)
                .collect();
            if found.len() == limit || exhausted {
                return Ok(found);
            }
            page = page.saturating_mul(4).min(documents);
        }
    }

    /// The query matching `query`'s words as analyzed for the index, in the text (titles
    /// included) or the title field (weighed [`TITLE_BOOST`]): `or` any term (ranked by BM25 with
    /// block-max WAND), `and` every term, `phrase` the terms in order.
    fn text_query(
        &self,
        index: &Index,
        query: &LexicalQuery,
    ) -> IndexResult<Option<Box<dyn Query>>> {
        let mut analyzer = index
            .tokenizer_for_field(self.fields.text)
            .map_err(keyword_error)?;
        let mut tokens: Vec<String> = Vec::new();
        for term in &query.terms {
            let mut stream = analyzer.token_stream(term);
            while stream.advance() {
                tokens.push(stream.token().text.clone());
            }
        }
        if tokens.is_empty() {
            return Ok(None);
        }
        let (text, title) = (self.fields.text, self.fields.title);
        let in_title = |query: Box<dyn Query>| -> Box<dyn Query> {
            Box::new(BoostQuery::new(query, TITLE_BOOST))
        };
        let term_query = |field: Field, token: &str| -> Box<dyn Query> {
            Box::new(TermQuery::new(
                Term::from_field_text(field, token),
                IndexRecordOption::WithFreqs,
            ))
        };
        // Either field: the text's and the title's clauses (scores summed).
        let either = |token: &str| -> Vec<(Occur, Box<dyn Query>)> {
            vec![
                (Occur::Should, term_query(text, token)),
                (Occur::Should, in_title(term_query(title, token))),
            ]
        };
        Ok(Some(match query.operator {
            TermOperator::Phrase if tokens.len() > 1 => {
                let phrase = |field: Field| -> Box<dyn Query> {
                    Box::new(PhraseQuery::new(
                        tokens
                            .iter()
                            .map(|t| Term::from_field_text(field, t))
                            .collect(),
                    ))
                };
                Box::new(BooleanQuery::new(vec![
                    (Occur::Should, phrase(text)),
                    (Occur::Should, in_title(phrase(title))),
                ]))
            }
            TermOperator::Phrase => Box::new(BooleanQuery::new(either(&tokens[0]))),
            TermOperator::Or | TermOperator::And => {
                let mut seen = HashSet::new();
                tokens.retain(|t| seen.insert(t.clone()));
                if query.operator == TermOperator::Or {
                    // One flat disjunction of term queries: block-max WAND applies.
                    Box::new(BooleanQuery::new(
                        tokens.iter().flat_map(|t| either(t)).collect(),
                    ))
                } else {
                    Box::new(BooleanQuery::new(
                        tokens
                            .iter()
                            .map(|t| -> (Occur, Box<dyn Query>) {
                                (Occur::Must, Box::new(BooleanQuery::new(either(t))))
                            })
                            .collect(),
                    ))
                }
            }
        }))
    }
}

/// An index with the analyzer and a reader reloaded on demand.
fn searchable(index: Index) -> IndexResult<DatabaseIndex> {
    index.tokenizers().register(ANALYZER, analyzer());
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(keyword_error)?;
    Ok(DatabaseIndex { index, reader })
}

/// A writer of one indexing thread with `budget` bytes.
fn writer(index: &Index, budget: usize) -> IndexResult<IndexWriter<TantivyDocument>> {
    let options = IndexWriterOptions::builder()
        .num_worker_threads(1)
        .num_merge_threads(1)
        .memory_budget_per_thread(budget)
        .build();
    index.writer_with_options(options).map_err(keyword_error)
}

/// A clause keeping the documents holding one of `terms` (each document holds exactly one term
/// of the field: its kind, or its collection), or `None` when no filter is asked or every
/// document, deleted ones included, passes anyway. Leaving the clause out when it excludes
/// nothing keeps the query a flat disjunction of term queries, which tantivy ranks by
/// block-max WAND instead of scoring every match (100k chunks: 7 ms to about 1 ms).
/// The chunk keys of ranked documents, in their order.
fn chunk_keys(
    searcher: &Searcher,
    top: Vec<(f32, tantivy::DocAddress)>,
) -> IndexResult<Vec<(ChunkKey, f32)>> {
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
                    .map_err(keyword_error)?,
            ),
        };
        if let Some(key) = column.first(address.doc_id) {
            found.push((ChunkKey(key), score));
        }
    }
    Ok(found)
}

fn restriction(searcher: &Searcher, terms: Vec<Term>) -> IndexResult<Option<Box<dyn Query>>> {
    if terms.is_empty() {
        return Ok(None);
    }
    let mut holding = 0u64;
    for term in &terms {
        holding += searcher.doc_freq(term).map_err(keyword_error)?;
    }
    let documents: u64 = searcher
        .segment_readers()
        .iter()
        .map(|r| u64::from(r.max_doc()))
        .sum();
    if holding >= documents {
        return Ok(None);
    }
    Ok(Some(Box::new(TermSetQuery::new(terms))))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use engram_types::{CollectionName, ItemKind};

    use super::*;

    fn chunk(database: &str, key: i64, content: &str) -> IndexedChunk {
        IndexedChunk {
            chunk_key: ChunkKey(key),
            database_id: DatabaseId::from_trusted(database.to_owned()),
            collection: CollectionName::from_trusted("c"),
            kind: ItemKind::Knowledge,
            content: content.to_owned(),
            context: String::new(),
            title: String::new(),
            embedding: Vec::new(),
            facets: engram_store::ItemFacets::default(),
        }
    }

    async fn found(index: &TantivyKeywordIndex, database: &str, word: &str) -> Vec<i64> {
        let query = LexicalQuery {
            terms: vec![word.to_owned()],
            operator: TermOperator::Or,
        };
        let database = DatabaseId::from_trusted(database.to_owned());
        let mut keys: Vec<i64> = index
            .search(&database, &query, &IndexFilter::default(), 100, None)
            .await
            .unwrap()
            .into_iter()
            .map(|(key, _)| key.0)
            .collect();
        keys.sort_unstable();
        keys
    }

    fn page(removed: Vec<(&str, i64)>, current: Vec<IndexedChunk>) -> Arc<ChunkChanges> {
        Arc::new(ChunkChanges {
            removed: removed
                .into_iter()
                .map(|(d, k)| (DatabaseId::from_trusted(d.to_owned()), ChunkKey(k)))
                .collect(),
            current,
            ..ChunkChanges::default()
        })
    }

    #[tokio::test]
    async fn a_filter_is_applied_inside_the_index_whatever_its_share() {
        use engram_store::{ChunkFilter, FilterValue};
        use serde_json::json;
        let index = TantivyKeywordIndex::new();
        // 200 chunks about otters; 1 in 100 red, 1 in 2 blue.
        let chunks = (0..200i64)
            .map(|k| {
                let mut c = chunk("db", k, if k % 3 == 0 { "otter otter" } else { "otter" });
                let colour = if k % 100 == 7 {
                    "red"
                } else if k % 2 == 0 {
                    "blue"
                } else {
                    "grey"
                };
                c.facets.metadata = json!({ "colour": colour }).as_object().cloned().unwrap();
                c
            })
            .collect();
        index.apply(page(Vec::new(), chunks)).await.unwrap();
        let database = DatabaseId::from_trusted("db".to_owned());
        let otter = LexicalQuery {
            terms: vec!["otter".to_owned()],
            operator: TermOperator::Or,
        };
        let colour = |c: &str| ChunkFilter {
            metadata: vec![("colour".into(), FilterValue::Eq(json!(c)))],
            ..ChunkFilter::default()
        };
        let search = |filter: IndexFilter, only: Keys| {
            let (index, database, otter) = (&index, &database, &otter);
            async move {
                let found = index
                    .search(database, otter, &filter, 10, Some(Arc::new(only)))
                    .await
                    .unwrap();
                found.into_iter().map(|(k, _)| k.0).collect::<Vec<i64>>()
            }
        };
        let red: Keys = [ChunkKey(7), ChunkKey(107)].into_iter().collect();
        // Selective: through the terms the index holds, or by key when it holds none.
        let mut by_terms = search(IndexFilter::from(&colour("red")), red.clone()).await;
        by_terms.sort_unstable();
        assert_eq!(by_terms, [7, 107]);
        let mut by_key = search(IndexFilter::default(), red).await;
        by_key.sort_unstable();
        assert_eq!(by_key, [7, 107]);
        // Broad: ranked as without it, the passing kept; the best first.
        let blue: Keys = (0..200i64).step_by(2).map(ChunkKey).collect();
        let found = search(IndexFilter::from(&colour("blue")), blue.clone()).await;
        assert_eq!(found.len(), 10);
        assert!(found.iter().all(|k| k % 2 == 0));
        assert!(found[..5].iter().all(|k| k % 3 == 0), "{found:?}");
    }

    #[tokio::test]
    async fn a_rebuild_over_more_databases_than_open_writers_keeps_every_chunk() {
        let index = TantivyKeywordIndex::new();
        index.clear().await.unwrap();
        let databases = REBUILD_WRITERS + 3;
        // Pages interleave the databases, so writers are closed and opened again on the way.
        for round in 0..3i64 {
            let chunks = (0..databases)
                .map(|d| chunk(&format!("db{d}"), round * 100 + d as i64, "otter"))
                .collect();
            index.apply(page(Vec::new(), chunks)).await.unwrap();
        }
        // A chunk replaced during the rebuild: its first version leaves.
        let replaced = vec![chunk("db0", 0, "heron")];
        index.apply(page(vec![("db0", 0)], replaced)).await.unwrap();
        index.rebuilt().await.unwrap();
        for d in 0..databases {
            let mut expected: Vec<i64> = (0..3).map(|r| r * 100 + d as i64).collect();
            if d == 0 {
                expected.remove(0);
            }
            assert_eq!(found(&index, &format!("db{d}"), "otter").await, expected);
        }
        assert_eq!(found(&index, "db0", "heron").await, vec![0]);
        // After the rebuild, each page is committed as it comes.
        index
            .apply(page(Vec::new(), vec![chunk("db1", 999, "heron")]))
            .await
            .unwrap();
        assert_eq!(found(&index, "db1", "heron").await, vec![999]);
    }

    #[tokio::test]
    async fn a_saved_index_opens_at_its_position_for_its_feed_only() {
        let dir = tempfile::tempdir().unwrap();
        let saved = || TantivyKeywordIndex::on_disk(dir.path().join("keyword"));
        let first = saved();
        assert_eq!(first.restore("feed").await.unwrap(), None, "nothing saved");
        first
            .apply(page(
                Vec::new(),
                vec![chunk("db_a", 1, "otter"), chunk("db_b", 2, "otter")],
            ))
            .await
            .unwrap();
        first.covers("feed", 7).await.unwrap();
        // A page applied after the position was written: the restart applies it again.
        first
            .apply(page(vec![("db_a", 1)], vec![chunk("db_a", 3, "otter")]))
            .await
            .unwrap();
        drop(first);

        let second = saved();
        assert_eq!(second.restore("feed").await.unwrap(), Some(7));
        assert_eq!(found(&second, "db_a", "otter").await, vec![3]);
        assert_eq!(found(&second, "db_b", "otter").await, vec![2]);
        // A database gone leaves the disk too.
        second
            .apply(Arc::new(ChunkChanges {
                removed: vec![(DatabaseId::from_trusted("db_b"), ChunkKey(2))],
                gone: vec![DatabaseId::from_trusted("db_b")],
                ..ChunkChanges::default()
            }))
            .await
            .unwrap();
        assert!(!dir.path().join("keyword/db_b").exists());
        second.covers("feed", 9).await.unwrap();
        drop(second);

        // Saved for another store's feed: deleted, never read.
        let other = saved();
        assert_eq!(other.restore("another feed").await.unwrap(), None);
        assert!(found(&other, "db_a", "otter").await.is_empty());
        assert!(!dir.path().join("keyword/db_a").exists());
        assert_eq!(saved().restore("feed").await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_saved_index_of_another_format_or_cut_short_is_built_again() {
        let dir = tempfile::tempdir().unwrap();
        let directory = dir.path().join("keyword");
        let saved = || TantivyKeywordIndex::on_disk(directory.clone());
        let first = saved();
        first.clear().await.unwrap();
        first
            .apply(page(Vec::new(), vec![chunk("db_a", 1, "otter")]))
            .await
            .unwrap();
        first.rebuilt().await.unwrap();
        first.covers("feed", 3).await.unwrap();
        assert_eq!(
            saved().restore("feed").await.unwrap(),
            Some(3),
            "rebuilt and saved"
        );

        // Written by a version that analyzed text otherwise.
        let position = directory.join(POSITION_FILE);
        let written = std::fs::read_to_string(&position).unwrap();
        let changed = written.replace(&format!("\"{FORMAT} "), "\"0 ");
        assert_ne!(written, changed);
        std::fs::write(&position, changed).unwrap();
        assert_eq!(saved().restore("feed").await.unwrap(), None);

        // A rebuild cut short (its position is deleted first) is never trusted.
        let second = saved();
        second.covers("feed", 5).await.unwrap();
        second.clear().await.unwrap();
        second
            .apply(page(Vec::new(), vec![chunk("db_a", 1, "otter")]))
            .await
            .unwrap();
        drop(second);
        assert_eq!(saved().restore("feed").await.unwrap(), None);

        // A damaged index is built again, not a failed start.
        let third = saved();
        third
            .apply(page(Vec::new(), vec![chunk("db_a", 1, "otter")]))
            .await
            .unwrap();
        third.covers("feed", 6).await.unwrap();
        drop(third);
        std::fs::write(directory.join("db_a/meta.json"), "{").unwrap();
        let fourth = saved();
        assert_eq!(fourth.restore("feed").await.unwrap(), None);
        assert!(found(&fourth, "db_a", "otter").await.is_empty());
    }

    #[tokio::test]
    async fn a_rebuild_cut_short_leaves_nothing_of_itself() {
        let index = TantivyKeywordIndex::new();
        index.clear().await.unwrap();
        index
            .apply(page(Vec::new(), vec![chunk("db", 1, "otter")]))
            .await
            .unwrap();
        // The rebuild failed before its end; the next one starts with a clear.
        index.clear().await.unwrap();
        index
            .apply(page(Vec::new(), vec![chunk("db", 2, "otter")]))
            .await
            .unwrap();
        index.rebuilt().await.unwrap();
        assert_eq!(found(&index, "db", "otter").await, vec![2]);
    }
}

/// A saved position file and each database's index beside it, by name.
type Saved = (serde_json::Value, Vec<(String, Index)>);

/// The position file saved under `directory` and each database's index there (by name);
/// `None` when no position is saved.
fn read_saved(directory: &Path) -> Result<Option<Saved>, String> {
    let position = match std::fs::read(directory.join(POSITION_FILE)) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let position: serde_json::Value =
        serde_json::from_slice(&position).map_err(|e| e.to_string())?;
    let mut indexes = Vec::new();
    for entry in std::fs::read_dir(directory).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        if !entry.file_type().map_err(|e| e.to_string())?.is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let index = Index::open_in_dir(entry.path()).map_err(|e| format!("{name}: {e}"))?;
        indexes.push((name, index));
    }
    Ok(Some((position, indexes)))
}

/// What a saved keyword index holds, read from its directory beside a running instance
/// (readers take no lock): the feed and position it says it covers, and the chunk keys of each
/// database's index. For `engram check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedKeywordIndex {
    pub feed: String,
    pub through: i64,
    /// Per database, its chunk keys in ascending order.
    pub keys: HashMap<DatabaseId, Vec<i64>>,
}

impl SavedKeywordIndex {
    /// Reads the saved keyword index under `directory` (`<data dir>/keyword`); `None` when
    /// nothing is saved there.
    pub fn read(directory: &Path) -> Result<Option<Self>, String> {
        let Some((position, indexes)) = read_saved(directory)? else {
            return Ok(None);
        };
        let feed = position["feed"].as_str().unwrap_or_default().to_owned();
        let through = position["through"]
            .as_i64()
            .ok_or("the position file names no position")?;
        let mut keys = HashMap::new();
        for (name, index) in indexes {
            let reader: IndexReader = index
                .reader_builder()
                .reload_policy(ReloadPolicy::Manual)
                .try_into()
                .map_err(|e| format!("{name}: {e}"))?;
            let mut held = Vec::new();
            for segment in reader.searcher().segment_readers() {
                let column = segment
                    .fast_fields()
                    .i64(KEY)
                    .map_err(|e| format!("{name}: {e}"))?;
                let alive = segment.alive_bitset();
                for doc in 0..segment.max_doc() {
                    if alive.is_none_or(|a| a.is_alive(doc)) {
                        held.extend(column.first(doc));
                    }
                }
            }
            held.sort_unstable();
            keys.insert(DatabaseId::from_trusted(name), held);
        }
        Ok(Some(Self {
            feed,
            through,
            keys,
        }))
    }

    /// Makes the instance owning `directory` build its keyword index again from the store at
    /// its next start, whatever it writes meanwhile.
    pub fn request_rebuild(directory: &Path) -> std::io::Result<()> {
        std::fs::write(
            directory.join(REBUILD_FILE),
            b"asked by engram check --repair\n",
        )
    }
}
