//! Test doubles for engram's own tests, so the pipeline, retrieval and delivery logic can be
//! tested without the model and without waiting on the wall clock: a deterministic embedder
//! behind the real [`Embedder`] trait, a clock the test moves, a store in a temporary
//! directory (the real SQLite backend), a throwaway PostgreSQL cluster with pgvector
//! ([`TempPostgres`]) for the PostgreSQL backend, and a real OAuth 2.0 authorization server
//! ([`OAuthServer`], npm's oidc-provider). Dev-dependency only; never linked into the
//! binary.

#![allow(clippy::unwrap_used)] // test support

mod oauth_server;
mod postgres;
pub use oauth_server::{OAuthServer, OAuthServerOptions};
pub use postgres::TempPostgres;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use engram_embed::{EmbedError, Embedder, TokenCounter};
use engram_store::sqlite::SqliteStore;
use engram_types::{Clock, UnixMs};

/// Dimension of [`HashEmbedder`] vectors (the real model's, so indexes accept them).
pub const DIMENSION: usize = engram_embed::MINILM_DIMENSION;

/// A deterministic embedder: every lowercased word adds ±1 to a bucket chosen by its hash,
/// then the vector is L2-normalised. Texts sharing words are near each other; the same text
/// always gives the same vector. It counts one token per word.
#[derive(Debug, Clone, Copy, Default)]
pub struct HashEmbedder;

impl HashEmbedder {
    pub fn vector(text: &str) -> Vec<f32> {
        let mut v = vec![0.0f32; DIMENSION];
        for word in words(text) {
            let mut hasher = DefaultHasher::new();
            word.hash(&mut hasher);
            let h = hasher.finish();
            let bucket = usize::try_from(h % DIMENSION as u64).unwrap_or(0);
            v[bucket] += if h & (1 << 63) == 0 { 1.0 } else { -1.0 };
        }
        engram_embed::l2_normalize(&mut v);
        v
    }
}

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

impl Embedder for HashEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| Self::vector(t)).collect())
    }

    fn dimension(&self) -> usize {
        DIMENSION
    }

    fn model_id(&self) -> &str {
        "testkit-hash"
    }
}

impl TokenCounter for HashEmbedder {
    fn count_tokens(&self, text: &str) -> usize {
        words(text).count()
    }
}

/// A clock that only moves when the test moves it (Unix milliseconds).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn at(ms: i64) -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(ms)))
    }

    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn set(&self, ms: i64) {
        self.0.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMs {
        UnixMs::from_millis(self.0.load(Ordering::SeqCst))
    }
}

/// The real SQLite store in a directory that is removed when this is dropped.
pub struct TempStore {
    pub store: Arc<SqliteStore>,
    _dir: tempfile::TempDir,
}

impl TempStore {
    /// The store's directory (a data directory of its own, deleted with it).
    pub fn path(&self) -> &std::path::Path {
        self._dir.path()
    }

    pub async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path()).await.unwrap());
        Self { store, _dir: dir }
    }
}
