//! `engram eval`: retrieval quality on published benchmarks, through the application's own
//! ingestion, indexing pipeline and query path (in process, no HTTP).
//!
//! - `eval beir <dir>`: a BEIR dataset (SciFact): every corpus document ingested as app
//!   knowledge (title and text), every test query run; nDCG@10 and Recall@100 over documents.
//! - `eval multihop <dir>`: MuSiQue-100 (HippoRAG's release): the 1,890 passages ingested as
//!   app knowledge (title and text), the 100 questions run; recall of the supporting passages
//!   at 2, 5 and 10.
//! - `eval locomo <dir>`: every LoCoMo conversation ingested as one user's memories (one memory
//!   per turn, its session date in the memory's metadata); recall of the evidence turns at 5,
//!   10 and 25.
//!
//! `--index-dir` keeps the indexed data between runs, so tuning reruns only the queries.

mod multihop;
mod parsing;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use engram_app::{
    Alpha, App, AppSource, CreateDatabase, KeySpec, KnowledgeRequest, MemoryInput, MemoryRequest,
    Method, Principal, QueryKind, QueryRequest, RequestedMode, TemporalRequest,
};
use engram_config::Config;
use engram_types::DatabaseName;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use crate::bench::percentile;

#[derive(clap::Args, Clone)]
pub(crate) struct EvalArgs {
    /// The dataset directory.
    dir: PathBuf,
    /// Keep the indexed data in this data directory (reused when it already holds the
    /// dataset); default: a new temporary directory.
    #[arg(long)]
    index_dir: Option<PathBuf>,
    /// Modes to evaluate, comma-separated: fast, thinking, text (BM25 alone), auto.
    #[arg(long, default_value = "text,fast,thinking")]
    modes: String,
    /// `alpha` for hybrid modes: a number, `auto`, or `omit` (what a request without `alpha`
    /// gets).
    #[arg(long, default_value = "auto")]
    alpha: String,
    /// Evaluate only the first N queries (0: all).
    #[arg(long, default_value_t = 0)]
    queries: usize,
    /// LoCoMo: also run every mode with temporal reasoning on, beside the same mode without.
    #[arg(long)]
    temporal: bool,
    /// LoCoMo: only questions of this category (2: temporal).
    #[arg(long)]
    category: Option<u64>,
    /// Also run every mode with the graph lane on, beside the same mode with it off.
    #[arg(long)]
    graph: bool,
    /// BEIR: where a document's title goes: `field` (its own `title`), `body` (before the
    /// text, as the peers' benchmark sends it) or `both`.
    #[arg(long, default_value = "field")]
    title: String,
}

#[derive(clap::Subcommand)]
pub(crate) enum EvalCommand {
    /// nDCG@10 and Recall@100 on a BEIR dataset (corpus.jsonl, queries.jsonl, qrels/test.tsv).
    Beir(EvalArgs),
    /// Recall of evidence turns at 5, 10 and 25 on LoCoMo (locomo10_turns.jsonl, locomo10_qa.jsonl).
    Locomo(EvalArgs),
    /// Passage recall at 2, 5 and 10 on MuSiQue-100 multi-hop questions (musique_train.json,
    /// musique_train_corpus.json), with the graph lane off and on (`--graph`).
    Multihop(EvalArgs),
    /// Share of the expected strings the parser extracts from the markitdown test files.
    Parsing(parsing::ParsingArgs),
}

pub(crate) fn read_jsonl(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("a line of {}", path.display())))
        .collect()
}

fn text(value: &Value, field: &str) -> String {
    match &value[field] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The application with its workers, over a data directory, and a principal to query with.
struct Harness {
    app: App,
    who: Principal,
    token: CancellationToken,
    workers: Option<engram_app::Workers>,
}

impl Harness {
    async fn open(mut config: Config, data_dir: Option<PathBuf>) -> anyhow::Result<Self> {
        config.data_dir = match data_dir {
            Some(dir) => dir,
            None => {
                let dir = std::env::temp_dir().join(format!("engram-eval-{}", std::process::id()));
                std::fs::create_dir_all(&dir)?;
                dir
            }
        };
        config.rate_limit.enabled = false;
        let app = App::open(config).await?;
        let (who, _) = principal(&app, "eval").await?;
        let token = CancellationToken::new();
        let workers = Some(app.start_workers(token.child_token()));
        Ok(Self {
            app,
            who,
            token,
            workers,
        })
    }

    /// Ingests `(id, title, text)` documents as app knowledge, 100 per request, and waits
    /// until every one is indexed.
    async fn ingest_articles(
        &self,
        db: &DatabaseName,
        docs: &[(String, String, String)],
    ) -> anyhow::Result<()> {
        let started = Instant::now();
        let mut ids = Vec::new();
        for batch in docs.chunks(100) {
            let sources: Vec<AppSource> = batch
                .iter()
                .map(|(id, title, text)| AppSource {
                    id: Some(id.clone()),
                    title: title.clone(),
                    source_type: "article".into(),
                    // A document that is only a title (some BEIR sets have them) is its title.
                    text: if text.trim().is_empty() {
                        title.clone()
                    } else {
                        text.clone()
                    },
                    attachments: json!([]),
                    relations: json!({}),
                    ..AppSource::default()
                })
                .collect();
            ids.extend(batch.iter().map(|d| (None, d.0.clone())));
            ingest_app(&self.app, &self.who, db, sources).await?;
        }
        self.wait_indexed(db, &ids).await?;
        eprintln!(
            "ingested {} documents in {:.0} s",
            docs.len(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    async fn database(&self, name: &str) -> anyhow::Result<(DatabaseName, bool)> {
        ready_database(&self.app, &self.who, name).await
    }

    /// Waits until every id of each collection is indexed; fails on an errored item.
    async fn wait_indexed(
        &self,
        db: &DatabaseName,
        ids: &[(Option<String>, String)],
    ) -> anyhow::Result<()> {
        let mut pending: Vec<(Option<String>, String)> = ids.to_vec();
        let total = pending.len();
        let mut progress = crate::progress::Progress::new("indexed", total as u64);
        while !pending.is_empty() {
            let mut still = Vec::new();
            let mut by_collection: HashMap<Option<String>, Vec<String>> = HashMap::new();
            for (c, id) in pending {
                by_collection.entry(c).or_default().push(id);
            }
            for (collection, ids) in by_collection {
                for batch in ids.chunks(engram_app::IDS_MAX) {
                    let (_, statuses) = self
                        .app
                        .item_statuses(&self.who, db, collection.as_deref(), batch)
                        .await?;
                    for (id, status) in statuses {
                        match status.map(|s| s.status) {
                            Some(engram_types::IndexingStatus::Completed)
                            | Some(engram_types::IndexingStatus::GraphCreation) => {}
                            Some(engram_types::IndexingStatus::Errored) => {
                                bail!("item {id} errored while indexing")
                            }
                            _ => still.push((collection.clone(), id)),
                        }
                    }
                }
            }
            pending = still;
            progress.set((total - pending.len()) as u64);
            if !pending.is_empty() {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        progress.finish();
        Ok(())
    }

    async fn close(mut self) {
        self.token.cancel();
        if let Some(workers) = self.workers.take() {
            workers.shutdown(Duration::from_secs(10)).await;
        }
        self.app.close().await;
    }
}

/// A key of a new organization `org`, authenticated: the caller benches and evals act as, and
/// its token.
pub(crate) async fn principal(app: &App, org: &str) -> anyhow::Result<(Principal, String)> {
    let key = app
        .create_key(KeySpec {
            org: org.into(),
            name: org.into(),
            ..KeySpec::default()
        })
        .await?;
    Ok((app.authenticate(&key.token).await?, key.token))
}

/// Ingests app content into the database's default collection (replacing items of the same
/// ids), as `POST /context/ingest` with `app_knowledge` does.
pub(crate) async fn ingest_app(
    app: &App,
    who: &Principal,
    db: &DatabaseName,
    sources: Vec<AppSource>,
) -> anyhow::Result<()> {
    app.ingest_knowledge(
        who,
        db,
        KnowledgeRequest {
            upsert: true,
            file_metadata_field: "document_metadata",
            app_knowledge: sources,
            ..KnowledgeRequest::default()
        },
    )
    .await?;
    Ok(())
}

/// The database, created and provisioned when missing; true when it already existed.
pub(crate) async fn ready_database(
    app: &App,
    who: &Principal,
    name: &str,
) -> anyhow::Result<(DatabaseName, bool)> {
    let db = DatabaseName::parse(name).map_err(|e| anyhow::anyhow!("{e}"))?;
    if app.database(who, &db).await.is_ok() {
        return Ok((db, true));
    }
    app.create_database(
        who,
        CreateDatabase {
            name: name.into(),
            schema: Vec::new(),
            embeddings_dimension: None,
            is_embeddings_tenant: false,
        },
    )
    .await?;
    let started = Instant::now();
    while app.database(who, &db).await?.state != engram_app::DatabaseState::Ready {
        if started.elapsed() > Duration::from_secs(60) {
            bail!("database {name} was not provisioned within a minute");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((db, false))
}

/// One mode to evaluate and the request fields it sets.
#[derive(Debug, Clone, Copy)]
struct ModeSpec {
    name: &'static str,
    method: Method,
    mode: RequestedMode,
}

/// Each mode with the graph lane as configured (`None`), or with `--graph` off then on.
fn with_lanes(specs: Vec<ModeSpec>, graph: bool) -> Vec<(ModeSpec, Option<bool>)> {
    let lanes: &[Option<bool>] = if graph {
        &[Some(false), Some(true)]
    } else {
        &[None]
    };
    specs
        .into_iter()
        .flat_map(|spec| lanes.iter().map(move |&lane| (spec, lane)))
        .collect()
}

/// A mode's name in a table, with the lane when it is set: `fast`, `fast + graph`.
fn lane_name(mode: &str, graph: Option<bool>) -> String {
    match graph {
        Some(true) => format!("{mode} + graph"),
        _ => mode.to_owned(),
    }
}

fn modes(list: &str) -> anyhow::Result<Vec<ModeSpec>> {
    list.split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(|m| {
            Ok(match m {
                "text" => ModeSpec {
                    name: "text (BM25)",
                    method: Method::Text,
                    mode: RequestedMode::Fast,
                },
                "fast" => ModeSpec {
                    name: "fast hybrid",
                    method: Method::Hybrid,
                    mode: RequestedMode::Fast,
                },
                "thinking" => ModeSpec {
                    name: "thinking",
                    method: Method::Hybrid,
                    mode: RequestedMode::Thinking,
                },
                "auto" => ModeSpec {
                    name: "auto",
                    method: Method::Hybrid,
                    mode: RequestedMode::Auto,
                },
                other => bail!("unknown mode `{other}` (fast, thinking, text, auto)"),
            })
        })
        .collect()
}

fn alpha(value: &str) -> anyhow::Result<Option<Alpha>> {
    match value {
        "auto" => Ok(Some(Alpha::Auto)),
        "omit" => Ok(None),
        number => Ok(Some(Alpha::Value(number.parse().context("--alpha")?))),
    }
}

/// Source ids in rank order, each once.
fn ranked_sources(outcome: &engram_app::QueryOutcome) -> Vec<String> {
    sources_of(&outcome.chunks)
}

/// The distinct sources of `chunks`, in rank order.
fn sources_of(chunks: &[engram_app::RankedChunk]) -> Vec<String> {
    let mut seen = HashSet::new();
    chunks
        .iter()
        .map(|c| c.hit.item.id.clone())
        .filter(|id| seen.insert(id.clone()))
        .collect()
}

fn ndcg_at(ranked: &[String], relevant: &HashMap<String, u32>, k: usize) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, id)| {
            let gain = f64::from(relevant.get(id).copied().unwrap_or(0));
            (2f64.powf(gain) - 1.0) / (i as f64 + 2.0).log2()
        })
        .sum();
    let mut ideal: Vec<u32> = relevant.values().copied().collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| (2f64.powf(f64::from(*g)) - 1.0) / (i as f64 + 2.0).log2())
        .sum();
    if idcg > 0.0 {
        dcg / idcg
    } else {
        0.0
    }
}

fn recall_at(ranked: &[String], relevant: &HashSet<String>, k: usize) -> f64 {
    if relevant.is_empty() {
        return 0.0;
    }
    let found = ranked
        .iter()
        .take(k)
        .filter(|id| relevant.contains(*id))
        .count();
    found as f64 / relevant.len() as f64
}

impl EvalCommand {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Beir(_) => "beir",
            Self::Locomo(_) => "locomo",
            Self::Multihop(_) => "multihop",
            Self::Parsing(_) => "parsing",
        }
    }
}

pub(crate) async fn run(command: EvalCommand, config: Config) -> anyhow::Result<()> {
    match command {
        EvalCommand::Beir(args) => beir(args, config).await,
        EvalCommand::Locomo(args) => locomo(args, config).await,
        EvalCommand::Multihop(args) => multihop::run(args, config).await,
        EvalCommand::Parsing(args) => parsing::run(args),
    }
}

async fn beir(args: EvalArgs, config: Config) -> anyhow::Result<()> {
    let corpus = read_jsonl(&args.dir.join("corpus.jsonl"))?;
    let queries: HashMap<String, String> = read_jsonl(&args.dir.join("queries.jsonl"))?
        .iter()
        .map(|q| (text(q, "_id"), text(q, "text")))
        .collect();
    let qrels_text = std::fs::read_to_string(args.dir.join("qrels/test.tsv"))
        .context("reading qrels/test.tsv")?;
    let mut qrels: Vec<(String, HashMap<String, u32>)> = Vec::new();
    for line in qrels_text.lines().skip(1) {
        let mut parts = line.split('\t');
        let (Some(q), Some(d), Some(s)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let score: u32 = s.trim().parse().unwrap_or(0);
        match qrels.iter_mut().find(|(id, _)| id == q) {
            Some((_, rel)) => {
                rel.insert(d.to_owned(), score);
            }
            None => qrels.push((q.to_owned(), HashMap::from([(d.to_owned(), score)]))),
        }
    }
    if args.queries > 0 {
        qrels.truncate(args.queries);
    }

    let harness = Harness::open(config, args.index_dir.clone()).await?;
    let (db, existed) = harness.database("beir").await?;
    if !existed {
        let docs: Vec<(String, String, String)> = corpus
            .iter()
            .map(|doc| {
                let (title, body) = (text(doc, "title"), text(doc, "text"));
                match args.title.as_str() {
                    "field" => Ok((text(doc, "_id"), title, body)),
                    "body" => Ok((text(doc, "_id"), String::new(), format!("{title} {body}"))),
                    "both" => Ok((text(doc, "_id"), title.clone(), format!("{title} {body}"))),
                    other => Err(anyhow::anyhow!(
                        "--title must be field, body or both, not {other}"
                    )),
                }
            })
            .collect::<anyhow::Result<_>>()?;
        harness.ingest_articles(&db, &docs).await?;
    }

    report!(
        "BEIR {}: {} queries, {} documents, alpha {}",
        args.dir.display(),
        qrels.len(),
        corpus.len(),
        args.alpha
    );
    report!(
        "{:<14} {:>9} {:>14} {:>11} {:>9} {:>9}",
        "mode",
        "nDCG@10",
        "nDCG@10 asked",
        "Recall@100",
        "p50 ms",
        "p99 ms"
    );
    for (spec, graph) in with_lanes(modes(&args.modes)?, args.graph) {
        let name = lane_name(spec.name, graph);
        let mut progress =
            crate::progress::Progress::new(&format!("{name} queries"), qrels.len() as u64);
        let (mut ndcg, mut asked, mut recall, mut latencies) = (0.0, 0.0, 0.0, Vec::new());
        for (qid, relevant) in &qrels {
            let Some(query) = queries.get(qid) else {
                continue;
            };
            let started = Instant::now();
            let outcome = harness
                .app
                .query(
                    &harness.who,
                    &db,
                    QueryRequest {
                        query: query.clone(),
                        kind: QueryKind::Knowledge,
                        method: Some(spec.method),
                        mode: spec.mode,
                        max_results: Some(300),
                        alpha: alpha(&args.alpha)?,
                        graph_rank: graph,
                        ..QueryRequest::default()
                    },
                )
                .await?;
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            progress.inc(1);
            let ranked = ranked_sources(&outcome);
            let relevant_set: HashSet<String> = relevant
                .iter()
                .filter(|(_, s)| **s > 0)
                .map(|(d, _)| d.clone())
                .collect();
            ndcg += ndcg_at(&ranked, relevant, 10);
            // What a client asking for 10 results gets (the ranking is stable under the
            // limit): the distinct sources of the first 10 chunks.
            let first_ten = sources_of(&outcome.chunks[..outcome.chunks.len().min(10)]);
            asked += ndcg_at(&first_ten, relevant, 10);
            recall += recall_at(&ranked, &relevant_set, 100);
        }
        progress.finish();
        latencies.sort_by(f64::total_cmp);
        let n = qrels.len().max(1) as f64;
        report!(
            "{:<14} {:>9.4} {:>14.4} {:>11.4} {:>9.1} {:>9.1}",
            name,
            ndcg / n,
            asked / n,
            recall / n,
            percentile(&latencies, 50.0),
            percentile(&latencies, 99.0)
        );
    }
    harness.close().await;
    Ok(())
}

/// A collection name for a conversation (`conv-26` is one already).
fn collection_of(sample: &str) -> String {
    sample
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

async fn locomo(args: EvalArgs, config: Config) -> anyhow::Result<()> {
    let turns = read_jsonl(&args.dir.join("locomo10_turns.jsonl"))?;
    let mut questions: Vec<Value> = read_jsonl(&args.dir.join("locomo10_qa.jsonl"))?
        .into_iter()
        .filter(|q| q["evidence"].as_array().is_some_and(|e| !e.is_empty()))
        .filter(|q| {
            args.category
                .is_none_or(|c| q["category"].as_u64() == Some(c))
        })
        .collect();
    if args.queries > 0 {
        questions.truncate(args.queries);
    }

    let harness = Harness::open(config, args.index_dir.clone()).await?;
    let (db, existed) = harness.database("locomo").await?;
    if !existed {
        let started = Instant::now();
        let mut by_sample: Vec<(String, Vec<&Value>)> = Vec::new();
        for turn in &turns {
            let sample = text(turn, "sample_id");
            match by_sample.iter_mut().find(|(s, _)| *s == sample) {
                Some((_, list)) => list.push(turn),
                None => by_sample.push((sample, vec![turn])),
            }
        }
        let mut ids = Vec::new();
        for (sample, list) in &by_sample {
            let collection = collection_of(sample);
            for batch in list.chunks(100) {
                let memories: Vec<MemoryInput> = batch
                    .iter()
                    .map(|turn| {
                        let mut additional = Map::new();
                        additional.insert("session".into(), turn["session"].clone());
                        additional.insert(
                            "session_date_time".into(),
                            turn["session_date_time"].clone(),
                        );
                        additional.insert("speaker".into(), turn["speaker"].clone());
                        MemoryInput {
                            id: Some(text(turn, "dia_id")),
                            title: format!(
                                "Session {} ({})",
                                text(turn, "session"),
                                text(turn, "session_date_time")
                            ),
                            text: Some(format!(
                                "{}: {}",
                                text(turn, "speaker"),
                                text(turn, "text")
                            )),
                            user_name: Some(sample.clone()),
                            timestamp: Some(text(turn, "session_date_time")),
                            additional_metadata: additional,
                            ..MemoryInput::default()
                        }
                    })
                    .collect();
                ids.extend(
                    batch
                        .iter()
                        .map(|t| (Some(collection.clone()), text(t, "dia_id"))),
                );
                harness
                    .app
                    .ingest_memories(
                        &harness.who,
                        &db,
                        MemoryRequest {
                            collection: Some(collection.clone()),
                            upsert: true,
                            memories,
                        },
                    )
                    .await?;
            }
        }
        harness.wait_indexed(&db, &ids).await?;
        eprintln!(
            "ingested {} turns of {} conversations in {:.0} s",
            turns.len(),
            by_sample.len(),
            started.elapsed().as_secs_f64()
        );
    }

    report!(
        "LoCoMo {}: {} questions with evidence, {} turns, alpha {}",
        args.dir.display(),
        questions.len(),
        turns.len(),
        args.alpha
    );
    report!(
        "{:<14} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "mode",
        "R@5",
        "R@10",
        "R@25",
        "p50 ms",
        "p99 ms"
    );
    let runs: Vec<(ModeSpec, bool, Option<bool>)> = with_lanes(modes(&args.modes)?, args.graph)
        .into_iter()
        .flat_map(|(spec, graph)| {
            let with = args.temporal.then_some((spec, true, graph));
            std::iter::once((spec, false, graph)).chain(with)
        })
        .collect();
    for (spec, temporal, graph) in runs {
        let name = lane_name(spec.name, graph);
        let name = if temporal {
            format!("{name}+temporal")
        } else {
            name
        };
        let mut progress =
            crate::progress::Progress::new(&format!("{name} queries"), questions.len() as u64);
        let mut recall = [0.0f64; 3];
        let mut latencies = Vec::new();
        for question in &questions {
            let evidence: HashSet<String> = question["evidence"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e.as_str().map(str::to_owned))
                .collect();
            let started = Instant::now();
            let outcome = harness
                .app
                .query(
                    &harness.who,
                    &db,
                    QueryRequest {
                        collection: Some(collection_of(&text(question, "sample_id"))),
                        query: text(question, "question"),
                        kind: QueryKind::Memory,
                        method: Some(spec.method),
                        mode: spec.mode,
                        max_results: Some(25),
                        alpha: alpha(&args.alpha)?,
                        temporal: temporal.then(TemporalRequest::default),
                        graph_rank: graph,
                        ..QueryRequest::default()
                    },
                )
                .await?;
            latencies.push(started.elapsed().as_secs_f64() * 1000.0);
            progress.inc(1);
            let ranked = ranked_sources(&outcome);
            for (slot, k) in [5, 10, 25].into_iter().enumerate() {
                recall[slot] += recall_at(&ranked, &evidence, k);
            }
        }
        progress.finish();
        latencies.sort_by(f64::total_cmp);
        let n = questions.len().max(1) as f64;
        report!(
            "{:<14} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            name,
            100.0 * recall[0] / n,
            100.0 * recall[1] / n,
            100.0 * recall[2] / n,
            percentile(&latencies, 50.0),
            percentile(&latencies, 99.0)
        );
    }
    harness.close().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_match_hand_computed_values() {
        let ranked: Vec<String> = ["a", "x", "b"].iter().map(|s| (*s).to_owned()).collect();
        let relevant = HashMap::from([("a".to_owned(), 1), ("b".to_owned(), 1)]);
        // DCG = 1 + 1/log2(4) = 1.5; IDCG = 1 + 1/log2(3).
        let expected = 1.5 / (1.0 + 1.0 / 3f64.log2());
        assert!((ndcg_at(&ranked, &relevant, 10) - expected).abs() < 1e-12);
        let set: HashSet<String> = relevant.keys().cloned().collect();
        assert_eq!(recall_at(&ranked, &set, 1), 0.5);
        assert_eq!(recall_at(&ranked, &set, 3), 1.0);
    }
}
