//! Finding the model for tests and the benchmark: `ENGRAM_MODEL_DIR` and `ENGRAM_ORT_LIB`, or
//! the layout `make setup` writes under `<workspace>/.cache`. Missing files fail loudly.

use std::path::Path;

use engram_embed::{LocalEmbedder, LocalEmbedderOptions};

/// Options for the model of this checkout, with the given threads, sessions and batch size.
pub(crate) fn options(threads: usize, sessions: usize, max_batch: usize) -> LocalEmbedderOptions {
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache");
    let mut options = LocalEmbedderOptions::from_cache_dir(&cache);
    if let Some(dir) = std::env::var_os("ENGRAM_MODEL_DIR") {
        options.model_dir = dir.into();
    }
    if let Some(lib) = std::env::var_os("ENGRAM_ORT_LIB") {
        options.runtime_lib = lib.into();
    }
    options.threads = threads;
    options.sessions = sessions;
    options.max_batch = max_batch;
    options
}

/// The local embedder; panics with the way to get the files when they are missing.
pub(crate) fn embedder(threads: usize, sessions: usize, max_batch: usize) -> LocalEmbedder {
    let options = options(threads, sessions, max_batch);
    LocalEmbedder::new(&options).unwrap_or_else(|e| {
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            message = format!("{message}: {cause}");
            source = cause.source();
        }
        panic!(
            "cannot load the local embedding model: {message}\n\
             run `make setup` (or set ENGRAM_MODEL_DIR and ENGRAM_ORT_LIB); options: {options:?}"
        )
    })
}
