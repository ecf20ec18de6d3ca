//! The `engram` binary: wires configuration, the application, its background workers and the
//! HTTP server, and offers the administrative commands.

// Adapters pass other layers' errors and JSON values through (`other => other.into()`): a
// wildcard over someone else's enum is the point there. Domain enums are matched exhaustively.
#![allow(clippy::wildcard_enum_match_arm)]

/// Prints a report line of a bench or eval command and keeps it for `--record`.
macro_rules! report {
    () => {
        $crate::record::line("")
    };
    ($($arg:tt)*) => {
        $crate::record::line(&format!($($arg)*))
    };
}

/// The system allocator, counting what the thread reading an item holds: its working memory
/// budget (`budgets.memory_bytes`).
#[global_allocator]
static ALLOCATOR: engram_alloc::Metered = engram_alloc::Metered;

mod backup;
mod bench;
mod check;
mod eval;
mod keys;
mod mcp;
mod progress;
mod record;
mod serve;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use engram_config::{Config, Overrides};

#[derive(Parser)]
#[command(
    name = "engram",
    version,
    about = "Self-hosted context retrieval: knowledge and memories, hybrid search"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the configuration comes from; shared by every command.
#[derive(clap::Args, Clone)]
struct ConfigArgs {
    /// A TOML configuration file (see engram.example.toml).
    #[arg(long, value_name = "FILE", global = true)]
    config: Option<PathBuf>,
    /// Data directory [env: ENGRAM_DATA_DIR] [default: ./data].
    #[arg(long, value_name = "DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// A PostgreSQL URL to keep the state in instead of SQLite under the data directory
    /// [env: ENGRAM_STORAGE__URL].
    #[arg(long, value_name = "URL", global = true)]
    storage_url: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP service.
    Serve {
        /// Address to listen on [env: ENGRAM_LISTEN] [default: 127.0.0.1:8080]; port 0 picks a free one.
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Manage API keys (works while the server runs on the same data directory).
    Keys {
        #[command(subcommand)]
        command: keys::KeysCommand,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// The MCP server over stdio, for agent hosts: relays to a running engram (`--url`) or
    /// opens the data directory itself.
    Mcp {
        #[command(flatten)]
        args: mcp::McpArgs,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Back the embedded store up into a new directory, consistently while the service runs
    /// (PostgreSQL: use its own tools).
    Backup {
        /// Directory to create the backup in.
        dest: PathBuf,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Restore a backup into an empty data directory; the indexes are built when the service
    /// starts.
    Restore {
        /// A directory made by `engram backup`.
        src: PathBuf,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Check the store's consistency (works while the service runs); exits 1 when anything
    /// fails.
    Check {
        /// Repair what fails, in one transaction, then check again: rows that belong to nothing
        /// are deleted (the indexes follow), stalled claims are queued again, missing webhook
        /// events are recorded (delivered at least once). Safe beside a running service.
        #[arg(long)]
        repair: bool,
        #[command(flatten)]
        config: ConfigArgs,
    },
    /// Print the OpenAPI 3.1 document of every route.
    Openapi,
    /// Retrieval quality on published benchmarks (run with a release build).
    Eval {
        #[command(subcommand)]
        command: eval::EvalCommand,
        #[command(flatten)]
        config: ConfigArgs,
        #[command(flatten)]
        record: record::RecordArgs,
    },
    /// Benchmarks (run with a release build).
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
        #[command(flatten)]
        config: ConfigArgs,
        #[command(flatten)]
        record: record::RecordArgs,
    },
}

#[derive(Subcommand)]
enum BenchCommand {
    /// End-to-end ingestion throughput and status latency while ingesting.
    Ingest(bench::ingest::IngestBench),
    /// One organization's small items beside another's flood of large files: time to
    /// `completed`, beside the same items on an idle service.
    Fairness(bench::fairness::FairnessBench),
    /// Query latency at scale: fast hybrid top 10 beside BM25 alone.
    Query(bench::query::QueryBench),
    /// Webhook deliveries per second and the delay from terminal state to delivery.
    Webhooks(bench::webhooks::WebhookBench),
    /// Parsing throughput: pages per second (PDF), rows per second (spreadsheet).
    Parse(bench::parse::ParseBench),
    /// A folder synced and indexed by the folder connector beside the same files uploaded; an
    /// unchanged re-sync; memory.
    Connectors(bench::connectors::ConnectorBench),
    /// The web console's pages at size (default 100,000 items) beside the API's listing.
    Console(bench::console::ConsoleBench),
}

impl BenchCommand {
    fn name(&self) -> &'static str {
        match self {
            Self::Ingest(_) => "ingest",
            Self::Fairness(_) => "fairness",
            Self::Query(_) => "query",
            Self::Webhooks(_) => "webhooks",
            Self::Parse(_) => "parse",
            Self::Connectors(_) => "connectors",
            Self::Console(_) => "console",
        }
    }
}

impl ConfigArgs {
    fn load(&self, listen: Option<std::net::SocketAddr>) -> anyhow::Result<Config> {
        let overrides = Overrides {
            listen,
            data_dir: self.data_dir.clone(),
            storage: self
                .storage_url
                .clone()
                .map(|url| engram_config::StorageOverrides { url }),
        };
        Ok(Config::load(self.config.as_deref(), &overrides)?)
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The server and the MCP bridge set up their own logging; the other commands (benchmarks,
    // evaluations, keys) log to stderr only when RUST_LOG asks.
    let own_logging = matches!(cli.command, Command::Serve { .. } | Command::Mcp { .. });
    if !own_logging && std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Serve { listen, config } => serve::run(config.load(listen)?).await,
            Command::Keys { command, config } => keys::run(command, config.load(None)?).await,
            Command::Backup { dest, config } => backup::backup(dest, config.load(None)?).await,
            Command::Check { repair, config } => {
                if check::run(config.load(None)?, repair).await? {
                    Ok(())
                } else {
                    std::process::exit(1)
                }
            }
            Command::Restore { src, config } => backup::restore(src, config.load(None)?).await,
            Command::Mcp { args, config } => mcp::run(args, config.load(None)?).await,
            Command::Bench {
                command,
                config,
                record,
            } => {
                let what = command.name();
                match command {
                    BenchCommand::Ingest(args) => {
                        bench::ingest::ingest(args, config.load(None)?).await
                    }
                    BenchCommand::Fairness(args) => {
                        bench::fairness::fairness(args, config.load(None)?).await
                    }
                    BenchCommand::Query(args) => {
                        bench::query::query(args, config.load(None)?).await
                    }
                    BenchCommand::Webhooks(args) => bench::webhooks::webhooks(args).await,
                    BenchCommand::Parse(args) => bench::parse::parse(args),
                    BenchCommand::Connectors(args) => {
                        bench::connectors::connectors(args, config.load(None)?).await
                    }
                    BenchCommand::Console(args) => {
                        bench::console::console(args, config.load(None)?).await
                    }
                }?;
                record.finish(&format!("bench {what}"))
            }
            Command::Eval {
                command,
                config,
                record,
            } => {
                let what = command.name();
                eval::run(command, config.load(None)?).await?;
                record.finish(&format!("eval {what}"))
            }
            Command::Openapi => {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&engram_http::openapi_document())?
                );
                Ok(())
            }
        }
    })
}
