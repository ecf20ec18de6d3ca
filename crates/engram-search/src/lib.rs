//! engram's retrieval core. Today: chunking — turning a parsed document's blocks into chunks that
//! fit the embedding model's token window, never crossing a page, sheet or slide, starting a new
//! chunk at a heading once the current one has substance, and recording each chunk's layout.
//! Lexical and vector search, fusion and reranking join this crate with the retrieval issue.

mod chunk;
mod vectors;

pub use chunk::{Chunk, Chunker, ChunkerOptions, TokenCounter};
pub use vectors::{VectorEntry, VectorIndex};
