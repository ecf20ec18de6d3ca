//! `engram bench`: throughput and latency of the real service, each beside a baseline run side
//! by side (ingestion, queries at scale, webhook deliveries, parsing).

pub(crate) mod ingest;
pub(crate) mod parse;
pub(crate) mod query;
pub(crate) mod webhooks;

/// The `p`-th percentile of sorted samples (nearest rank).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
