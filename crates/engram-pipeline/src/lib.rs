//! The indexing pipeline. A worker claims a batch of queued items with a lease, and for each:
//! parses (files), chunks by the model's tokens, embeds every chunk of the batch together, then
//! writes chunks and the terminal state in one transaction. Transient failures (`E6001`) go back
//! to the queue with exponential backoff; an item that keeps failing, or that has no text
//! (`E2002`), ends `errored`. A crash loses nothing: the lease expires and another worker (or
//! the restarted one) claims the item again, and the store refuses a result from a lease that
//! is no longer current, so nothing is indexed twice.

mod prepare;
mod worker;

pub use prepare::{prepare, Prepared};
pub use worker::{Pipeline, PipelineOptions};
