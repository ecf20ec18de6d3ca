//! Throughput of the local embedder: 256 texts of about 110 tokens (a typical chunk) at batch
//! sizes 1, 2, 4 and 8, on one session of 1 or 2 intra-op threads and on two single-threaded
//! sessions (the default: batch 1 on two sessions). Not a timed test: it prints texts/second.
//!
//!     cargo bench -p engram-embed --bench embed
//!
//! `EMBED_BENCH_ROUNDS` (default 2) timed rounds per setting; the best is reported.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use engram_embed::Embedder;

const TEXTS: usize = 256;
const VOCABULARY: &str =
    "the index stores every document as chunks of text with metadata and a vector so that \
    search can find passages by meaning when keywords differ between query answer while \
    lexical ranking keeps exact names numbers like invoice 2024 customer support ticket was \
    resolved after three days because engineer found configuration error in deployment \
    pipeline server restarted quietly overnight backup completed successfully report shows \
    growth revenue quarter team meeting notes mention roadmap";

/// Deterministic texts of about 110 tokens each, all different.
fn texts() -> Vec<String> {
    let vocabulary: Vec<&str> = VOCABULARY.split_whitespace().collect();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    (0..TEXTS)
        .map(|i| {
            let mut words = vec![format!("Note {i}:")];
            for n in 0..88 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let word = vocabulary[(state % vocabulary.len() as u64) as usize];
                words.push(if n % 14 == 13 {
                    format!("{word}.")
                } else {
                    word.to_owned()
                });
            }
            words.join(" ")
        })
        .collect()
}

fn main() {
    let owned = texts();
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
    // `cargo bench` passes `--bench`; `cargo test --all-targets` runs this binary without it,
    // and then one small batch checks that it works without spending a minute measuring.
    if !std::env::args().any(|a| a == "--bench") {
        let vectors = common::embedder(1, 2, 1)
            .embed(&texts[..8])
            .expect("embeds");
        assert_eq!(vectors.len(), 8);
        println!("embed bench: smoke run only; `cargo bench -p engram-embed` measures");
        return;
    }
    let rounds: usize = std::env::var("EMBED_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
        .max(1);
    {
        let embedder = common::embedder(1, 1, 32);
        let tokens: usize = texts
            .iter()
            .map(|t| embedder.token_ids(t).expect("tokenizes").len())
            .sum();
        println!(
            "{TEXTS} texts, {:.0} tokens each on average ([CLS] and [SEP] included); best of {rounds}",
            tokens as f64 / TEXTS as f64
        );
    }
    println!("sessions  threads  batch  texts/s  ms/text");
    for (sessions, threads) in [(1, 1), (1, 2), (2, 1)] {
        for batch in [1, 2, 4, 8] {
            let embedder = common::embedder(threads, sessions, batch);
            embedder.embed(&texts[..batch]).expect("warm-up");
            let mut best = Duration::MAX;
            for _ in 0..rounds {
                let start = Instant::now();
                let vectors = embedder.embed(&texts).expect("embeds");
                best = best.min(start.elapsed());
                assert_eq!(vectors.len(), TEXTS);
            }
            let secs = best.as_secs_f64();
            println!(
                "{sessions:>8}  {threads:>7}  {batch:>5}  {:>7.1}  {:>7.2}",
                TEXTS as f64 / secs,
                secs * 1000.0 / TEXTS as f64
            );
        }
    }
}
