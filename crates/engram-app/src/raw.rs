//! Raw-embedding databases (`is_embeddings_tenant`): clients bring their own vectors, of the
//! dimension the database declared, and search them by cosine similarity (an exact scan in
//! pages, so memory stays flat however many vectors a collection holds).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use engram_store::{DatabaseRecord, RawSelection, RawVector};
use engram_types::limits::{FILTER_VALUES_MAX, ITEMS_PER_REQUEST_MAX, ITEM_ID_MAX_CHARS};
use engram_types::{CollectionName, DatabaseName};
use serde_json::{Map, Value};

use crate::ingest::parse_collection;
use crate::{App, AppError, AppResult, Principal};
use engram_types::Scope;

/// Most vectors one insert may carry, and most results one read may ask for.
pub(crate) const RAW_VECTORS_PER_REQUEST_MAX: usize = 10_000;
pub(crate) const RAW_RESULTS_MAX: u32 = 1_000;
const RAW_RESULTS_DEFAULT: u32 = 10;
/// Rows read per page of a scan.
const SCAN_PAGE: u32 = 2_000;
/// Most metadata one insert may store, counted once per vector that carries it (a document's
/// metadata is kept with each of its vectors).
const RAW_METADATA_STORED_MAX: usize = 16 * 1024 * 1024;

/// One source's vectors as a client sends them.
#[derive(Debug, Clone, Default)]
pub struct RawDocument {
    pub source_id: String,
    pub metadata: Map<String, Value>,
    /// `(chunk_id, vector)` pairs.
    pub embeddings: Vec<(String, Vec<f32>)>,
}

/// A search hit: the vector's row and its cosine similarity to the query.
#[derive(Debug, Clone)]
pub struct RawHit {
    pub vector: RawVector,
    pub score: f32,
}

/// Conditions of a search beyond similarity: only these sources and/or chunk ids.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawFilter {
    pub source_ids: Vec<String>,
    pub chunk_ids: Vec<String>,
}

impl RawFilter {
    fn accepts(&self, vector: &RawVector) -> bool {
        (self.source_ids.is_empty() || self.source_ids.contains(&vector.source_id))
            && (self.chunk_ids.is_empty() || self.chunk_ids.contains(&vector.chunk_id))
    }

    /// Parses the filter expressions raw-embedding clients send (Milvus syntax), in the subset
    /// engram evaluates: clauses `field == "value"` or `field in ["a", "b"]` on `source_id` or
    /// `chunk_id`, joined by `and`. Anything else is refused with the reason, never ignored.
    pub fn parse(expr: &str) -> AppResult<Self> {
        let mut filter = Self::default();
        let unsupported = |why: &str| {
            AppError::InvalidParameters(format!(
                "`filter_expr` {why}; supported: `source_id == \"x\"`, `chunk_id in [\"a\", \"b\"]`, joined by `and`"
            ))
        };
        let mut named = 0usize;
        for clause in split_and(expr) {
            let clause = clause.trim();
            if clause.is_empty() {
                return Err(unsupported("has an empty clause"));
            }
            let end = clause
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(clause.len());
            let (field, rest) = clause.split_at(end);
            let target = match field {
                "source_id" => &mut filter.source_ids,
                "chunk_id" => &mut filter.chunk_ids,
                other => return Err(unsupported(&format!("filters on `{other}`"))),
            };
            let rest = rest.trim();
            let values: Vec<String> = if let Some(value) = rest.strip_prefix("==") {
                vec![string_literal(value.trim())
                    .ok_or_else(|| unsupported("needs a quoted value"))?]
            } else if let Some(list) = rest.strip_prefix("in").map(str::trim) {
                let inner = list
                    .strip_prefix('[')
                    .and_then(|l| l.strip_suffix(']'))
                    .ok_or_else(|| unsupported("needs `[…]` after `in`"))?;
                inner
                    .split(',')
                    .map(|v| {
                        string_literal(v.trim()).ok_or_else(|| unsupported("needs quoted values"))
                    })
                    .collect::<AppResult<_>>()?
            } else {
                return Err(unsupported(&format!("cannot read `{clause}`")));
            };
            named += values.len();
            if named > FILTER_VALUES_MAX {
                return Err(unsupported(&format!(
                    "names more than {FILTER_VALUES_MAX} values"
                )));
            }
            if !target.is_empty() {
                // Two clauses on one field are ANDed: keep what both allow.
                target.retain(|v| values.contains(v));
                if target.is_empty() {
                    target.push(String::new());
                }
            } else {
                *target = values;
            }
        }
        Ok(filter)
    }
}

/// The clauses of `expr` split at ` and ` outside quotes.
fn split_and(expr: &str) -> Vec<&str> {
    let (mut parts, mut start, mut quote) = (Vec::new(), 0, None::<char>);
    let lower = expr.to_ascii_lowercase();
    let bytes = lower.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if bytes[i..].starts_with(b" and ") => {
                parts.push(&expr[start..i]);
                start = i + 5;
                i += 4;
            }
            None => {}
        }
        i += 1;
    }
    parts.push(&expr[start..]);
    parts
}

/// `"text"` or `'text'` without its quotes.
fn string_literal(text: &str) -> Option<String> {
    let quote = text.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    text[1..].strip_suffix(quote).map(str::to_owned)
}

/// Cosine similarity, summed in f64 (large finite components would overflow f32); 0 when it
/// is not a finite number (a zero vector).
fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    let cosine = dot / (na.sqrt() * nb.sqrt());
    if cosine.is_finite() {
        cosine as f32
    } else {
        0.0
    }
}

/// A hit ordered by score, lowest first at the top of the heap (the one to drop).
struct Ranked(RawHit);

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .0
            .score
            .total_cmp(&self.0.score)
            .then_with(|| self.0.vector.chunk_id.cmp(&other.0.vector.chunk_id))
    }
}

fn limit_of(limit: Option<i64>) -> AppResult<u32> {
    match limit {
        None => Ok(RAW_RESULTS_DEFAULT),
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| (1..=RAW_RESULTS_MAX).contains(n))
            .ok_or_else(|| {
                AppError::InvalidParameters(format!(
                    "`limit` must be between 1 and {RAW_RESULTS_MAX}"
                ))
            }),
    }
}

impl App {
    /// The embeddings database and the collection a raw-embedding call addresses.
    async fn raw_scope(
        &self,
        who: &Principal,
        database: &DatabaseName,
        collection: Option<&str>,
        scope: Scope,
    ) -> AppResult<(DatabaseRecord, CollectionName)> {
        let db = self.authorize_database(who, database, scope).await?;
        if !db.is_embeddings_tenant {
            return Err(AppError::InvalidParameters(format!(
                "database `{}` does not hold raw embeddings; create one with `is_embeddings_tenant: true`",
                db.name
            )));
        }
        let collection = parse_collection(&db, collection, "sub_tenant_id")?;
        Ok((db, collection))
    }

    fn check_vector(db: &DatabaseRecord, what: &str, vector: &[f32]) -> AppResult<()> {
        if vector.len() != db.embeddings_dimension as usize {
            return Err(AppError::Validation(format!(
                "{what} has {} dimensions; database `{}` holds vectors of {}",
                vector.len(),
                db.name,
                db.embeddings_dimension
            )));
        }
        if vector.iter().any(|x| !x.is_finite()) {
            return Err(AppError::Validation(format!(
                "{what} holds a value that is not a finite number"
            )));
        }
        Ok(())
    }

    /// Stores client-computed vectors (all checked first: dimension, ids, counts). With
    /// `upsert`, a chunk id that exists is replaced; without it, kept. Returns the database,
    /// the collection and the chunk ids written.
    pub async fn insert_raw(
        &self,
        who: &Principal,
        database: &DatabaseName,
        collection: Option<&str>,
        documents: Vec<RawDocument>,
        upsert: bool,
    ) -> AppResult<(DatabaseRecord, CollectionName, Vec<String>)> {
        who.require(Scope::Write)?;
        if documents.is_empty() {
            return Err(AppError::InvalidParameters(
                "`embeddings` must hold at least one document".into(),
            ));
        }
        if documents.len() > ITEMS_PER_REQUEST_MAX {
            return Err(AppError::InvalidParameters(format!(
                "{} documents in one request; at most {ITEMS_PER_REQUEST_MAX}",
                documents.len()
            )));
        }
        let count: usize = documents.iter().map(|d| d.embeddings.len()).sum();
        if count > RAW_VECTORS_PER_REQUEST_MAX {
            return Err(AppError::InvalidParameters(format!(
                "{count} vectors in one request; at most {RAW_VECTORS_PER_REQUEST_MAX}"
            )));
        }
        let stored: usize = documents
            .iter()
            .map(|d| {
                serde_json::to_vec(&d.metadata)
                    .map_or(usize::MAX, |b| b.len())
                    .saturating_mul(d.embeddings.len())
            })
            .fold(0, usize::saturating_add);
        if stored > RAW_METADATA_STORED_MAX {
            return Err(AppError::InvalidParameters(format!(
                "the documents' metadata, kept with each of their vectors, would take {stored} bytes; at most {RAW_METADATA_STORED_MAX} per request"
            )));
        }
        let (db, collection) = self
            .raw_scope(who, database, collection, Scope::Write)
            .await?;
        let mut vectors = Vec::with_capacity(count);
        for (i, doc) in documents.into_iter().enumerate() {
            let ok_id = |id: &str| {
                !id.is_empty()
                    && id.chars().count() <= ITEM_ID_MAX_CHARS
                    && !id.chars().any(char::is_control)
            };
            if !ok_id(&doc.source_id) {
                return Err(AppError::Validation(format!(
                    "embeddings[{i}].source_id must be 1-{ITEM_ID_MAX_CHARS} characters without control characters"
                )));
            }
            if doc.embeddings.is_empty() {
                return Err(AppError::Validation(format!(
                    "embeddings[{i}] has no vectors"
                )));
            }
            crate::ingest::check_item_limits(
                &format!("embeddings[{i}]"),
                "",
                &doc.metadata,
                &Map::new(),
            )?;
            for (j, (chunk_id, vector)) in doc.embeddings.into_iter().enumerate() {
                let what = format!("embeddings[{i}].embeddings[{j}]");
                if !ok_id(&chunk_id) {
                    return Err(AppError::Validation(format!(
                        "{what}.chunk_id must be 1-{ITEM_ID_MAX_CHARS} characters without control characters"
                    )));
                }
                Self::check_vector(&db, &what, &vector)?;
                vectors.push(RawVector {
                    source_id: doc.source_id.clone(),
                    chunk_id,
                    embedding: vector,
                    metadata: Value::Object(doc.metadata.clone()),
                });
            }
        }
        let written = self
            .store()
            .put_raw(&db.scope(), &collection, &vectors, upsert, self.now())
            .await?;
        Ok((db, collection, written))
    }

    /// The `limit` stored vectors most similar (cosine) to `query`, best first, passing
    /// `filter`.
    pub async fn search_raw(
        &self,
        who: &Principal,
        database: &DatabaseName,
        collection: Option<&str>,
        query: &[f32],
        limit: Option<i64>,
        filter: &RawFilter,
    ) -> AppResult<Vec<RawHit>> {
        who.require(Scope::Read)?;
        let limit = limit_of(limit)? as usize;
        let (db, collection) = self
            .raw_scope(who, database, collection, Scope::Read)
            .await?;
        Self::check_vector(&db, "`query_embedding`", query)?;
        let scope = db.scope();
        let mut best = BinaryHeap::with_capacity(limit + 1);
        let mut after = 0;
        loop {
            let page = self
                .store()
                .raw_page(&scope, &collection, after, SCAN_PAGE)
                .await?;
            let Some((last, _)) = page.last() else {
                break;
            };
            after = *last;
            for (_, vector) in page {
                if !filter.accepts(&vector) {
                    continue;
                }
                let score = cosine(query, &vector.embedding);
                best.push(Ranked(RawHit { vector, score }));
                if best.len() > limit {
                    best.pop();
                }
            }
        }
        let mut hits: Vec<RawHit> = best.into_iter().map(|r| r.0).collect();
        hits.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then_with(|| a.vector.chunk_id.cmp(&b.vector.chunk_id))
        });
        Ok(hits)
    }

    /// Stored vectors of one source and/or these chunk ids (at least one must be named).
    pub async fn filter_raw(
        &self,
        who: &Principal,
        database: &DatabaseName,
        collection: Option<&str>,
        source_id: Option<&str>,
        chunk_ids: &[String],
        limit: Option<i64>,
    ) -> AppResult<Vec<RawVector>> {
        who.require(Scope::Read)?;
        let limit = limit_of(limit.or(Some(i64::from(RAW_RESULTS_MAX))))?;
        let which = selection(source_id, chunk_ids)?;
        let (db, collection) = self
            .raw_scope(who, database, collection, Scope::Read)
            .await?;
        Ok(self
            .store()
            .select_raw(&db.scope(), &collection, which, limit)
            .await?)
    }

    /// Deletes the vectors of one source and/or these chunk ids; returns how many went.
    pub async fn delete_raw(
        &self,
        who: &Principal,
        database: &DatabaseName,
        collection: Option<&str>,
        source_id: Option<&str>,
        chunk_ids: &[String],
    ) -> AppResult<u64> {
        who.require(Scope::Write)?;
        let which = selection(source_id, chunk_ids)?;
        let (db, collection) = self
            .raw_scope(who, database, collection, Scope::Write)
            .await?;
        Ok(self
            .store()
            .delete_raw(&db.scope(), &collection, which)
            .await?)
    }
}

fn selection<'a>(
    source_id: Option<&'a str>,
    chunk_ids: &'a [String],
) -> AppResult<RawSelection<'a>> {
    let source_id = source_id.filter(|s| !s.is_empty());
    if source_id.is_none() && chunk_ids.is_empty() {
        return Err(AppError::InvalidParameters(
            "name a `source_id`, `chunk_ids` or both".into(),
        ));
    }
    if chunk_ids.len() > RAW_RESULTS_MAX as usize {
        return Err(AppError::InvalidParameters(format!(
            "`chunk_ids` may name at most {RAW_RESULTS_MAX} chunks"
        )));
    }
    Ok(RawSelection {
        source_id,
        chunk_ids,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_expressions_in_the_supported_subset_parse_and_others_are_refused() {
        assert_eq!(
            RawFilter::parse(r#"source_id == "doc 1""#).unwrap(),
            RawFilter {
                source_ids: vec!["doc 1".into()],
                chunk_ids: vec![],
            }
        );
        assert_eq!(
            RawFilter::parse(r#"chunk_id in ["a", 'b'] AND source_id=="s and t""#).unwrap(),
            RawFilter {
                source_ids: vec!["s and t".into()],
                chunk_ids: vec!["a".into(), "b".into()],
            }
        );
        for bad in [
            "age > 3",
            "source_id == x",
            "source_id in a",
            "",
            "metadata[\"k\"] == \"v\"",
        ] {
            assert!(RawFilter::parse(bad).is_err(), "{bad}");
        }
        let both = RawFilter::parse(r#"source_id in ["a", "b"] and source_id == "b""#).unwrap();
        assert_eq!(both.source_ids, ["b"]);
    }

    #[test]
    fn cosine_is_one_for_the_same_direction_and_zero_for_a_zero_vector() {
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-6);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert!(
            (cosine(&[1e20, 1e20], &[1e20, 1e20]) - 1.0).abs() < 1e-6,
            "no f32 overflow"
        );
        let many = (0..FILTER_VALUES_MAX + 1)
            .map(|i| format!("\"v{i}\""))
            .collect::<Vec<_>>()
            .join(", ");
        assert!(RawFilter::parse(&format!("source_id in [{many}]")).is_err());
    }
}
