//! The models the application runs: the embedder and its tokenizer's counter.

use std::sync::Arc;

use engram_config::EmbeddingConfig;
use engram_embed::{Embedder, LocalEmbedder, LocalEmbedderOptions, TokenCounter};

use crate::{AppError, AppResult};

/// The embedding model and a token counter that agrees with it.
#[derive(Clone)]
pub struct Models {
    /// Embeds chunks for the indexing pipeline.
    pub embedder: Arc<dyn Embedder>,
    /// Embeds queries: a session of its own, so a query never waits behind an indexing batch.
    pub query_embedder: Arc<dyn Embedder>,
    pub tokens: Arc<dyn TokenCounter>,
}

impl Models {
    /// Loads the local model from the cache `make setup` fills (off the async runtime).
    pub async fn load(config: &EmbeddingConfig) -> AppResult<Self> {
        let mut options = LocalEmbedderOptions::from_cache_dir(&config.cache_dir);
        options.threads = config.threads;
        options.sessions = config.sessions;
        options.max_batch = config.max_batch;
        // Queries are short and one at a time per call: one session of `threads` threads.
        let query_options = LocalEmbedderOptions {
            sessions: 1,
            ..options.clone()
        };
        let (local, query) = tokio::task::spawn_blocking(move || {
            Ok::<_, engram_embed::EmbedError>((
                LocalEmbedder::new(&options)?,
                LocalEmbedder::new(&query_options)?,
            ))
        })
        .await
        .map_err(|e| AppError::Startup(format!("loading the embedding model: {e}")))?
        .map_err(|e| AppError::Startup(format!("loading the embedding model: {e}")))?;
        let local = Arc::new(local);
        Ok(Self {
            embedder: local.clone(),
            query_embedder: Arc::new(query),
            tokens: local,
        })
    }
}
