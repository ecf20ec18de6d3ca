//! `engram backup DEST` and `engram restore SRC`, for the embedded store: a consistent copy
//! taken while the service runs (SQLite's online backup API), with what a data directory holds
//! that the store does not (the key sealing connector credentials); the derived indexes are not
//! copied, and are built again when a service starts on a restored directory. A PostgreSQL store
//! is backed up with PostgreSQL's own tools (README, "Backups").

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use engram_config::Config;
use engram_store::sqlite::backup;

/// What a backup directory says of itself.
const MANIFEST: &str = "engram-backup.json";

fn embedded_only(config: &Config, what: &str) -> anyhow::Result<()> {
    if !config.storage.url.is_empty() {
        bail!(
            "the store is PostgreSQL (storage.url): {what} it with PostgreSQL's tools \
             (pg_dump / pg_restore, or point-in-time recovery); see README, \"Backups\""
        );
    }
    Ok(())
}

/// Copies the connector credentials key of `from` to `to`, owner-only, when there is one.
fn copy_key(from: &Path, to: &Path) -> anyhow::Result<bool> {
    let source = from.join(engram_connectors::KEY_FILE);
    if !source.is_file() {
        return Ok(false);
    }
    let target = to.join(engram_connectors::KEY_FILE);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&target)
        .with_context(|| format!("writing {}", target.display()))?;
    std::io::Write::write_all(&mut file, &std::fs::read(&source)?)?;
    file.sync_all()?;
    Ok(true)
}

pub(crate) async fn backup(dest: PathBuf, config: Config) -> anyhow::Result<()> {
    embedded_only(&config, "back up")?;
    let data_dir = config.data_dir.clone();
    let (from, to) = (data_dir.clone(), dest.clone());
    let bytes = tokio::task::spawn_blocking(move || backup::backup(&from, &to)).await??;
    let key = copy_key(&data_dir, &dest)?;
    let manifest = serde_json::json!({
        "engram": env!("CARGO_PKG_VERSION"),
        "created_at": time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)?,
        "store_bytes": bytes,
        "connector_credentials_key": key,
    });
    std::fs::write(dest.join(MANIFEST), serde_json::to_vec_pretty(&manifest)?)?;
    println!(
        "backed up {} into {}: the store ({bytes} bytes){}; the indexes are built again on restore",
        data_dir.display(),
        dest.display(),
        if key {
            " and the connector credentials key"
        } else {
            ""
        },
    );
    Ok(())
}

pub(crate) async fn restore(src: PathBuf, config: Config) -> anyhow::Result<()> {
    embedded_only(&config, "restore")?;
    let data_dir = config.data_dir.clone();
    if std::fs::read_dir(&data_dir).is_ok_and(|mut entries| entries.next().is_some()) {
        bail!(
            "{} is not empty: restore into an empty data directory",
            data_dir.display()
        );
    }
    let (from, to) = (src.clone(), data_dir.clone());
    let bytes = tokio::task::spawn_blocking(move || backup::restore(&from, &to)).await??;
    let key = copy_key(&src, &data_dir)?;
    // Opening applies the migrations a newer engram has.
    let store = engram_store::sqlite::SqliteStore::open(&data_dir).await?;
    engram_store::Store::close(&store).await;
    println!(
        "restored {} into {}: the store ({bytes} bytes){}; the indexes are built when the service \
         starts",
        src.display(),
        data_dir.display(),
        if key {
            " and the connector credentials key"
        } else {
            ""
        },
    );
    Ok(())
}
