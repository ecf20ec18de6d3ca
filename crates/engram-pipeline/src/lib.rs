//! The indexing pipeline. Each worker claims one queued item at a time with a lease, in turns
//! across organizations and databases (an organization may hold only its share of the workers),
//! parses it (files), chunks it by the model's tokens, embeds its chunks in bounded batches,
//! then writes chunks and the terminal state in one transaction. A heartbeat renews the lease
//! while the work runs and stops the work as soon as the item was deleted or replaced.
//! Transient failures (`E6001`) go back to the queue with exponential backoff; an item that
//! keeps failing, or that has no text (`E2002`), ends `errored`. A crash loses nothing: the short
//! lease expires and another worker (or the restarted one) claims the item again, and the store
//! refuses a result from a lease that is no longer current, so nothing is indexed twice.

mod chunk;
mod prepare;
mod worker;

pub use chunk::{Chunk, Chunker, ChunkerOptions};
pub use prepare::{prepare, Prepared};
pub use worker::{embedding_text, Pipeline, PipelineOptions};
