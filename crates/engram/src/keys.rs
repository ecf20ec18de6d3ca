//! `engram keys create|list|revoke`. Opens the store directly, so it works while a server runs
//! on the same data directory (SQLite WAL allows both).

use clap::Subcommand;
use engram_app::{App, KeySpec};
use engram_config::Config;

#[derive(Subcommand)]
pub(crate) enum KeysCommand {
    /// Create a key; its `prefix.secret` is printed once, as the last line of standard output.
    Create {
        /// Organization the key belongs to.
        #[arg(long)]
        org: String,
        /// A label for the key.
        #[arg(long, default_value = "")]
        name: String,
        /// Restrict the key to this database (repeatable); without it, every database of the org.
        #[arg(long = "database", value_name = "DB")]
        databases: Vec<String>,
        /// What the key may do: `read`, `write` (brings read) or `admin` (brings both);
        /// repeatable; without it, all three.
        #[arg(long = "scope", value_name = "SCOPE")]
        scopes: Vec<String>,
        /// Expire the key after this many seconds.
        #[arg(long, value_name = "SECONDS")]
        expires_in: Option<u64>,
    },
    /// List keys (prefixes only; secrets are never shown again).
    List {
        /// Only this organization's keys.
        #[arg(long)]
        org: Option<String>,
    },
    /// Revoke a key by its prefix; it stops working at once.
    Revoke { prefix: String },
}

fn time(at: Option<engram_app::UnixMs>) -> String {
    at.map_or_else(|| "-".to_owned(), engram_app::format_ms)
}

pub(crate) async fn run(command: KeysCommand, config: Config) -> anyhow::Result<()> {
    let app = App::open_admin(config).await?;
    let result = run_with(&app, command).await;
    app.close().await;
    result
}

async fn run_with(app: &App, command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Create {
            org,
            name,
            databases,
            scopes,
            expires_in,
        } => {
            let created = app
                .create_key(KeySpec {
                    org,
                    name,
                    databases,
                    scopes,
                    expires_in_secs: expires_in,
                })
                .await?;
            let record = &created.record;
            println!(
                "created key {} for organization {}",
                record.prefix, record.org
            );
            if !record.databases.is_empty() {
                let names: Vec<&str> = record.databases.iter().map(|d| d.as_str()).collect();
                println!("restricted to databases: {}", names.join(", "));
            }
            println!("scopes: {}", record.scopes);
            if let Some(at) = record.expires_at {
                println!("expires at {}", engram_app::format_ms(at));
            }
            println!("store it now; it is not shown again:");
            println!("{}", created.token);
        }
        KeysCommand::List { org } => {
            println!(
                "{:<21}  {:<16}  {:<16}  {:<20}  {:<16}  {:<24}  {:<24}  status",
                "prefix", "org", "name", "databases", "scopes", "created", "expires"
            );
            for key in app.list_keys(org.as_deref()).await? {
                let databases = if key.databases.is_empty() {
                    "*".to_owned()
                } else {
                    key.databases
                        .iter()
                        .map(|d| d.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                let status = key.status(app.now());
                println!(
                    "{:<21}  {:<16}  {:<16}  {:<20}  {:<16}  {:<24}  {:<24}  {status}",
                    key.prefix.as_str(),
                    key.org.as_str(),
                    key.name,
                    databases,
                    key.scopes.to_string(),
                    time(Some(key.created_at)),
                    time(key.expires_at)
                );
            }
        }
        KeysCommand::Revoke { prefix } => {
            app.revoke_key(&prefix).await?;
            println!("revoked {prefix}");
        }
    }
    Ok(())
}
