//! `engram eval multihop`: MuSiQue-100 multi-hop questions over their 1,890 passages, passage
//! recall at 2, 5 and 10, each mode with the graph lane off and (`--graph`) on.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use anyhow::Context;
use engram_app::{QueryKind, QueryRequest};
use engram_config::Config;
use serde_json::Value;

use super::{alpha, lane_name, modes, ranked_sources, recall_at, with_lanes, EvalArgs, Harness};
use crate::bench::percentile;

/// One question: its text and the ids of its supporting passages.
struct Question {
    text: String,
    supporting: HashSet<String>,
}

pub(super) async fn run(args: EvalArgs, config: Config) -> anyhow::Result<()> {
    let read = |name: &str| -> anyhow::Result<Value> {
        let path = args.dir.join(name);
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path:?}"))?;
        Ok(serde_json::from_str(&text)?)
    };
    let corpus = read("musique_train_corpus.json")?;
    let corpus = corpus.as_array().context("the corpus is a list")?;
    let field = |v: &Value, name: &str| v[name].as_str().unwrap_or_default().to_owned();
    let docs: Vec<(String, String, String)> = corpus
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("p{i}"), field(p, "title"), field(p, "text")))
        .collect();
    let by_passage: HashMap<(&str, &str), &str> = docs
        .iter()
        .map(|(id, title, text)| ((title.as_str(), text.as_str()), id.as_str()))
        .collect();
    let mut questions = Vec::new();
    for q in read("musique_train.json")?
        .as_array()
        .context("the questions are a list")?
    {
        let mut supporting = HashSet::new();
        for p in q["paragraphs"].as_array().into_iter().flatten() {
            if p["is_supporting"].as_bool() == Some(true) {
                let key = (
                    p["title"].as_str().unwrap_or_default(),
                    p["paragraph_text"].as_str().unwrap_or_default(),
                );
                let id = by_passage.get(&key).with_context(|| {
                    format!("a supporting passage not in the corpus: {}", key.0)
                })?;
                supporting.insert((*id).to_owned());
            }
        }
        questions.push(Question {
            text: field(q, "question"),
            supporting,
        });
    }
    if args.queries > 0 {
        questions.truncate(args.queries);
    }

    let harness = Harness::open(config, args.index_dir.clone()).await?;
    let (db, existed) = harness.database("musique").await?;
    if !existed {
        harness.ingest_articles(&db, &docs).await?;
    }
    report!(
        "MuSiQue {}: {} questions, {} passages, alpha {}",
        args.dir.display(),
        questions.len(),
        docs.len(),
        args.alpha
    );
    report!(
        "{:<22} {:>6} {:>6} {:>6} {:>8} {:>8}",
        "mode",
        "R@2",
        "R@5",
        "R@10",
        "p50 ms",
        "p99 ms"
    );
    for (spec, graph) in with_lanes(modes(&args.modes)?, args.graph) {
        let name = lane_name(spec.name, graph);
        let mut progress =
            crate::progress::Progress::new(&format!("{name} queries"), questions.len() as u64);
        let (mut recall, mut latencies) = ([0.0; 3], Vec::new());
        for q in &questions {
            let started = Instant::now();
            let outcome = harness
                .app
                .query(
                    &harness.who,
                    &db,
                    QueryRequest {
                        query: q.text.clone(),
                        kind: QueryKind::Knowledge,
                        method: Some(spec.method),
                        mode: spec.mode,
                        max_results: Some(10),
                        alpha: alpha(&args.alpha)?,
                        graph_rank: graph,
                        ..QueryRequest::default()
                    },
                )
                .await?;
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            progress.inc(1);
            let ranked = ranked_sources(&outcome);
            for (sum, k) in recall.iter_mut().zip([2, 5, 10]) {
                *sum += recall_at(&ranked, &q.supporting, k);
            }
        }
        progress.finish();
        latencies.sort_by(f64::total_cmp);
        let n = questions.len().max(1) as f64;
        report!(
            "{:<22} {:>6.3} {:>6.3} {:>6.3} {:>8.1} {:>8.1}",
            name,
            recall[0] / n,
            recall[1] / n,
            recall[2] / n,
            percentile(&latencies, 50.0),
            percentile(&latencies, 99.0)
        );
    }
    harness.close().await;
    Ok(())
}
