//! The item conditions of a filter (metadata, additional metadata, origin, app sources), held
//! inside the indexes so a filtered search restricts its ranking to the passing chunks instead
//! of ranking first and asking the store which pass.
//!
//! Every chunk row of the feed carries its item's filtered fields ([`ItemFacets`]); this index
//! turns them into terms (a value of a key, a key present, a list's element) and keeps, per
//! database, the chunks holding each term. A filter's conditions become set operations on those
//! chunk sets, computed exactly and fast (compressed bitmaps), so a search knows how many chunks
//! pass before it chooses how to search.
//!
//! What it answers is a superset of what the store's filter passes, never less: terms are
//! hashed (a collision only adds chunks), booleans count as the numbers 1 and 0 (SQLite compares
//! them so; PostgreSQL does not), numbers compare by value as 64-bit floats. Every chunk a
//! search keeps is read through the store with the request's filter, which drops the rare extra
//! one, so a result never holds a chunk the filter refuses. Item ids and titles are not held (a
//! filter naming them is the store's to evaluate: `None`).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use engram_store::{ChunkChanges, ChunkFilter, FilterValue, IndexedChunk, ItemOrigin};
use engram_types::DatabaseId;
use roaring::RoaringTreemap;
use serde_json::{Map, Value};

use crate::ChunkKey;

/// A set of chunk keys (compressed): what a filter passes, or what an `and` query matches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Keys(RoaringTreemap);

impl Keys {
    pub fn contains(&self, key: ChunkKey) -> bool {
        u64::try_from(key.0).is_ok_and(|k| self.0.contains(k))
    }

    pub fn len(&self) -> usize {
        usize::try_from(self.0.len()).unwrap_or(usize::MAX)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// In key order.
    pub fn iter(&self) -> impl Iterator<Item = ChunkKey> + '_ {
        self.0
            .iter()
            .filter_map(|k| i64::try_from(k).ok().map(ChunkKey))
    }

    /// The keys of both.
    pub fn intersection(&self, other: &Keys) -> Keys {
        Keys(&self.0 & &other.0)
    }
}

impl FromIterator<ChunkKey> for Keys {
    fn from_iter<I: IntoIterator<Item = ChunkKey>>(keys: I) -> Self {
        Keys(
            keys.into_iter()
                .filter_map(|k| u64::try_from(k.0).ok())
                .collect(),
        )
    }
}

/// A term's chunks: a few in a sorted list, more in a bitmap (most terms of a large database,
/// an id-like value of each item, hold one item's chunks).
#[derive(Debug, Clone)]
enum Posting {
    Few(Vec<u64>),
    Many(RoaringTreemap),
}

/// Past this many chunks a term's list becomes a bitmap.
const FEW: usize = 32;

impl Posting {
    fn insert(&mut self, key: u64) {
        match self {
            Self::Few(keys) => {
                if let Err(at) = keys.binary_search(&key) {
                    keys.insert(at, key);
                }
                if keys.len() > FEW {
                    *self = Self::Many(keys.iter().copied().collect());
                }
            }
            Self::Many(bitmap) => {
                bitmap.insert(key);
            }
        }
    }

    /// Takes `key` out; true when the posting is left empty.
    fn remove(&mut self, key: u64) -> bool {
        match self {
            Self::Few(keys) => {
                if let Ok(at) = keys.binary_search(&key) {
                    keys.remove(at);
                }
                keys.is_empty()
            }
            Self::Many(bitmap) => {
                bitmap.remove(key);
                bitmap.is_empty()
            }
        }
    }

    fn bitmap(&self) -> RoaringTreemap {
        match self {
            Self::Few(keys) => keys.iter().copied().collect(),
            Self::Many(bitmap) => bitmap.clone(),
        }
    }
}

#[derive(Default)]
struct DatabaseFacets {
    all: RoaringTreemap,
    /// Each chunk's terms, to take it out of their postings when it changes.
    terms_of: HashMap<u64, Box<[u64]>>,
    postings: HashMap<u64, Posting>,
}

impl DatabaseFacets {
    fn remove(&mut self, key: u64) {
        self.all.remove(key);
        let Some(terms) = self.terms_of.remove(&key) else {
            return;
        };
        for term in terms.iter() {
            if let Some(posting) = self.postings.get_mut(term) {
                if posting.remove(key) {
                    self.postings.remove(term);
                }
            }
        }
    }

    fn put(&mut self, chunk: &IndexedChunk) {
        let Ok(key) = u64::try_from(chunk.chunk_key.0) else {
            return;
        };
        self.remove(key);
        let mut terms = terms(chunk);
        terms.sort_unstable();
        terms.dedup();
        for term in &terms {
            self.postings
                .entry(*term)
                .or_insert_with(|| Posting::Few(Vec::new()))
                .insert(key);
        }
        self.all.insert(key);
        self.terms_of.insert(key, terms.into_boxed_slice());
    }

    fn term(&self, term: u64) -> RoaringTreemap {
        self.postings
            .get(&term)
            .map(Posting::bitmap)
            .unwrap_or_default()
    }

    /// The chunks whose `field.key` passes `value`.
    fn condition(&self, field: Field, key: &str, value: &FilterValue) -> RoaringTreemap {
        match value {
            FilterValue::Eq(v) => self.equal(field, key, v),
            FilterValue::In(values) => {
                let mut passing = RoaringTreemap::new();
                for v in values {
                    passing |= self.equal(field, key, v);
                }
                passing
            }
            FilterValue::Readable(principals) => {
                // No rule (the value is not a list holding something), or a principal listed.
                let mut passing = &self.all - &self.term(hash(&(field, key, Part::NonEmptyList)));
                for principal in principals {
                    passing |= self.term(hash(&(field, key, Part::Element(principal))));
                }
                passing
            }
        }
    }

    fn equal(&self, field: Field, key: &str, value: &Value) -> RoaringTreemap {
        match canonical(value) {
            // A filter on null passes a null or absent value.
            None => &self.all - &self.term(hash(&(field, key, Part::Present))),
            Some(value) => self.term(hash(&(field, key, Part::Value(&value)))),
        }
    }
}

/// Which of the item's maps a term is about.
#[derive(Debug, Clone, Copy, Hash)]
enum Field {
    Metadata,
    Additional,
}

#[derive(Hash)]
enum Part<'a> {
    /// The key holds a value other than null.
    Present,
    /// The key holds this value (canonical form).
    Value(&'a str),
    /// The key holds a list with at least one element.
    NonEmptyList,
    /// The key holds a list with this string among its elements.
    Element(&'a str),
}

#[derive(Hash)]
enum Item<'a> {
    Origin(&'a str),
    /// App knowledge or a connector's item (`ChunkFilter::apps`).
    App,
}

fn hash(term: &impl Hash) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    term.hash(&mut hasher);
    hasher.finish()
}

/// A value's term: equal values (numbers by value, booleans as 1 and 0, objects whatever
/// their keys' order) give equal text; `None` for null.
fn canonical(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => return None,
        Value::Bool(b) => format!("n:{}", u8::from(*b)),
        Value::Number(n) => format!("n:{}", n.as_f64().unwrap_or(f64::NAN)),
        Value::String(s) => format!("s:{s}"),
        Value::Array(_) | Value::Object(_) => format!("j:{}", sorted(value)),
    })
}

/// JSON text with every object's keys in order.
fn sorted(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{}:{}", Value::String(k.clone()), sorted(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(sorted).collect();
            format!("[{}]", inner.join(","))
        }
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => value.to_string(),
    }
}

fn field_terms(field: Field, map: &Map<String, Value>, out: &mut Vec<u64>) {
    for (key, value) in map {
        let Some(text) = canonical(value) else {
            continue;
        };
        out.push(hash(&(field, key.as_str(), Part::Present)));
        out.push(hash(&(field, key.as_str(), Part::Value(&text))));
        if let Value::Array(items) = value {
            if !items.is_empty() {
                out.push(hash(&(field, key.as_str(), Part::NonEmptyList)));
            }
            for item in items {
                if let Value::String(s) = item {
                    out.push(hash(&(field, key.as_str(), Part::Element(s))));
                }
            }
        }
    }
}

/// A chunk's terms, for an index that holds them itself (the keyword index).
pub(crate) fn terms(chunk: &IndexedChunk) -> Vec<u64> {
    let facets = &chunk.facets;
    let mut out = Vec::new();
    if let Some(origin) = facets.origin {
        out.push(hash(&Item::Origin(origin.as_str())));
        if origin == ItemOrigin::App || facets.additional_metadata.contains_key("connector_id") {
            out.push(hash(&Item::App));
        }
    }
    field_terms(Field::Metadata, &facets.metadata, &mut out);
    field_terms(Field::Additional, &facets.additional_metadata, &mut out);
    out
}

/// `filter`'s item conditions as terms an index holding [`terms`] can look up: every inner
/// list's terms are alternatives, and every list must be met. `None` when a condition is not a
/// plain value (null, an access rule) or names item ids or titles; then the caller applies the
/// chunk set of [`Facets::passing`] instead.
pub(crate) fn lookup(filter: &ChunkFilter) -> Option<Vec<Vec<u64>>> {
    if !filter.ids.is_empty() || !filter.titles.is_empty() {
        return None;
    }
    let mut all = Vec::new();
    if let Some(origin) = filter.origin {
        all.push(vec![hash(&Item::Origin(origin.as_str()))]);
    }
    if filter.apps {
        all.push(vec![hash(&Item::App)]);
    }
    let conditions = (filter.metadata.iter().map(|c| (Field::Metadata, c))).chain(
        filter
            .additional_metadata
            .iter()
            .map(|c| (Field::Additional, c)),
    );
    for (field, (key, value)) in conditions {
        let values: &[Value] = match value {
            FilterValue::Eq(v) => std::slice::from_ref(v),
            FilterValue::In(values) => values,
            FilterValue::Readable(_) => return None,
        };
        let mut any = Vec::with_capacity(values.len());
        for value in values {
            let text = canonical(value)?;
            any.push(hash(&(field, key.as_str(), Part::Value(&text))));
        }
        all.push(any);
    }
    Some(all)
}

/// Every database's item terms, following the feed beside the keyword and vector indexes.
#[derive(Default)]
pub struct Facets {
    map: std::sync::RwLock<HashMap<DatabaseId, DatabaseFacets>>,
}

impl Facets {
    /// Applies a page of the feed: removals, then the current rows, then gone databases.
    pub fn apply(&self, changes: &ChunkChanges) {
        let mut map = self
            .map
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (database, key) in &changes.removed {
            if let (Some(facets), Ok(key)) = (map.get_mut(database), u64::try_from(key.0)) {
                facets.remove(key);
            }
        }
        for chunk in &changes.current {
            map.entry(chunk.database_id.clone()).or_default().put(chunk);
        }
        for gone in &changes.gone {
            map.remove(gone);
        }
    }

    pub fn clear(&self) {
        self.map
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clear();
    }

    /// The chunks of `database` whose items pass `filter`'s item conditions, as the index holds
    /// them (a superset of the store's answer; see the module's text); `None` when the filter
    /// names item ids or titles, which only the store evaluates. Kinds, collections and
    /// liveness are not looked at.
    pub fn passing(&self, database: &DatabaseId, filter: &ChunkFilter) -> Option<Keys> {
        if !filter.ids.is_empty() || !filter.titles.is_empty() {
            return None;
        }
        let map = self
            .map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(facets) = map.get(database) else {
            return Some(Keys::default());
        };
        // Each condition's chunks, intersected (every chunk when there is none).
        let mut passing: Option<RoaringTreemap> = None;
        let mut and = |chunks: RoaringTreemap| match passing.as_mut() {
            Some(passing) => *passing &= chunks,
            None => passing = Some(chunks),
        };
        if let Some(origin) = filter.origin {
            and(facets.term(hash(&Item::Origin(origin.as_str()))));
        }
        if filter.apps {
            and(facets.term(hash(&Item::App)));
        }
        for (key, value) in &filter.metadata {
            and(facets.condition(Field::Metadata, key, value));
        }
        for (key, value) in &filter.additional_metadata {
            and(facets.condition(Field::Additional, key, value));
        }
        Some(Keys(passing.unwrap_or_else(|| facets.all.clone())))
    }

    /// Chunks held for a database.
    pub fn count(&self, database: &DatabaseId) -> usize {
        self.map
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(database)
            .map_or(0, |f| usize::try_from(f.all.len()).unwrap_or(usize::MAX))
    }
}

#[cfg(test)]
mod tests {
    use engram_store::ItemFacets;
    use engram_types::{CollectionName, ItemKind};
    use serde_json::json;

    use super::*;

    fn db() -> DatabaseId {
        DatabaseId::from_trusted("db".to_owned())
    }

    fn chunk(key: i64, origin: ItemOrigin, metadata: Value, additional: Value) -> IndexedChunk {
        let object = |v: Value| v.as_object().cloned().unwrap_or_default();
        IndexedChunk {
            chunk_key: ChunkKey(key),
            database_id: db(),
            collection: CollectionName::from_trusted("c"),
            kind: ItemKind::Knowledge,
            content: String::new(),
            context: String::new(),
            title: String::new(),
            embedding: Vec::new(),
            facets: ItemFacets {
                origin: Some(origin),
                metadata: object(metadata),
                additional_metadata: object(additional),
            },
        }
    }

    fn keys(passing: Option<Keys>) -> Vec<i64> {
        passing.unwrap().iter().map(|k| k.0).collect()
    }

    fn facets() -> Facets {
        let facets = Facets::default();
        facets.apply(&ChunkChanges {
            current: vec![
                chunk(
                    1,
                    ItemOrigin::File,
                    json!({"team": "red", "n": 1}),
                    json!({}),
                ),
                chunk(
                    2,
                    ItemOrigin::App,
                    json!({"team": "blue", "n": 2.0}),
                    json!({}),
                ),
                chunk(
                    3,
                    ItemOrigin::File,
                    json!({"team": null, "flag": true}),
                    json!({}),
                ),
                chunk(
                    4,
                    ItemOrigin::File,
                    json!({"tags": {"b": 1, "a": [1, "x"]}}),
                    json!({"connector_id": "k", "access": ["u1", "g2"]}),
                ),
                chunk(5, ItemOrigin::Memory, json!({}), json!({"access": []})),
            ],
            ..ChunkChanges::default()
        });
        facets
    }

    fn filter(metadata: Vec<(&str, FilterValue)>) -> ChunkFilter {
        ChunkFilter {
            metadata: metadata
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            ..ChunkFilter::default()
        }
    }

    #[test]
    fn conditions_pass_what_the_store_passes() {
        let facets = facets();
        let eq = |k: &str, v: Value| filter(vec![(k, FilterValue::Eq(v))]);
        assert_eq!(keys(facets.passing(&db(), &eq("team", json!("red")))), [1]);
        // Numbers by value; null passes a null or absent value; booleans as 1.
        assert_eq!(keys(facets.passing(&db(), &eq("n", json!(2)))), [2]);
        assert_eq!(
            keys(facets.passing(&db(), &eq("team", Value::Null))),
            [3, 4, 5]
        );
        assert_eq!(keys(facets.passing(&db(), &eq("flag", json!(1)))), [3]);
        assert_eq!(
            keys(facets.passing(&db(), &eq("tags", json!({"a": [1, "x"], "b": 1})))),
            [4],
            "objects whatever their keys' order"
        );
        let within = filter(vec![(
            "team",
            FilterValue::In(vec![json!("red"), json!("blue"), json!("green")]),
        )]);
        assert_eq!(keys(facets.passing(&db(), &within)), [1, 2]);
        let both = filter(vec![
            ("team", FilterValue::Eq(json!("red"))),
            ("n", FilterValue::Eq(json!(2))),
        ]);
        assert!(keys(facets.passing(&db(), &both)).is_empty());
        let readable = ChunkFilter {
            additional_metadata: vec![("access".into(), FilterValue::Readable(vec!["g2".into()]))],
            ..ChunkFilter::default()
        };
        assert_eq!(keys(facets.passing(&db(), &readable)), [1, 2, 3, 4, 5]);
        let unreadable = ChunkFilter {
            additional_metadata: vec![("access".into(), FilterValue::Readable(vec!["u9".into()]))],
            ..ChunkFilter::default()
        };
        assert_eq!(keys(facets.passing(&db(), &unreadable)), [1, 2, 3, 5]);
        let apps = ChunkFilter {
            apps: true,
            ..ChunkFilter::default()
        };
        assert_eq!(keys(facets.passing(&db(), &apps)), [2, 4]);
        let memories = ChunkFilter {
            origin: Some(ItemOrigin::Memory),
            ..ChunkFilter::default()
        };
        assert_eq!(keys(facets.passing(&db(), &memories)), [5]);
        let ids = ChunkFilter {
            ids: vec!["x".into()],
            ..ChunkFilter::default()
        };
        assert_eq!(facets.passing(&db(), &ids), None, "ids are the store's");
        let other = DatabaseId::from_trusted("other".to_owned());
        assert!(keys(facets.passing(&other, &eq("team", json!("red")))).is_empty());
    }

    #[test]
    fn plain_values_become_terms_to_look_up() {
        let red = filter(vec![("team", FilterValue::Eq(json!("red")))]);
        let chunk1 = chunk(
            1,
            ItemOrigin::File,
            json!({"team": "red", "n": 1}),
            json!({}),
        );
        let held = terms(&chunk1);
        let wanted = lookup(&red).unwrap();
        assert_eq!(wanted.len(), 1);
        assert!(wanted[0].iter().all(|t| held.contains(t)));
        let within = filter(vec![("n", FilterValue::In(vec![json!(1.0), json!(3)]))]);
        assert!(lookup(&within).unwrap()[0].iter().any(|t| held.contains(t)));
        // Null and access rules are evaluated on the chunk sets, ids and titles by the store.
        assert_eq!(
            lookup(&filter(vec![("team", FilterValue::Eq(Value::Null))])),
            None
        );
        let readable = filter(vec![("team", FilterValue::Readable(vec!["u".into()]))]);
        assert_eq!(lookup(&readable), None);
    }

    #[test]
    fn changes_and_removals_follow_the_feed() {
        let facets = facets();
        let red = filter(vec![("team", FilterValue::Eq(json!("red")))]);
        // Chunk 2 turns red, chunk 1 is removed, many chunks make a bitmap.
        let mut current = vec![chunk(2, ItemOrigin::App, json!({"team": "red"}), json!({}))];
        current.extend(
            (100..200).map(|k| chunk(k, ItemOrigin::File, json!({"team": "red"}), json!({}))),
        );
        facets.apply(&ChunkChanges {
            removed: vec![(db(), ChunkKey(1)), (db(), ChunkKey(2))],
            current,
            ..ChunkChanges::default()
        });
        let found = keys(facets.passing(&db(), &red));
        assert_eq!(found.len(), 101);
        assert_eq!(found[0], 2);
        assert_eq!(facets.count(&db()), 104);
        facets.apply(&ChunkChanges {
            removed: (100..200).map(|k| (db(), ChunkKey(k))).collect(),
            ..ChunkChanges::default()
        });
        assert_eq!(keys(facets.passing(&db(), &red)), [2]);
        facets.apply(&ChunkChanges {
            gone: vec![db()],
            ..ChunkChanges::default()
        });
        assert_eq!(facets.count(&db()), 0);
    }
}
