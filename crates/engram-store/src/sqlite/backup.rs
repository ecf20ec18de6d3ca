//! Backups of the embedded store. SQLite's online backup API copies the live database a few
//! hundred pages at a time, yielding between steps, and starts over when a writer changes a
//! page already copied: the service keeps serving and writing, and the copy is one consistent
//! snapshot (a file copy of a database in WAL mode is not). A restore copies a backup into an
//! empty data directory the same way, then checks it. Blocking: run on a blocking thread.

use std::path::Path;
use std::time::Duration;

use rusqlite::{backup::Backup, Connection, OpenFlags};

use super::DB_FILE;
use crate::{StoreError, StoreResult};

/// Pages copied per step, and the pause between steps that lets writers in.
const PAGES_PER_STEP: std::ffi::c_int = 256;
const PAUSE: Duration = Duration::from_millis(2);

fn failed(what: &str, err: rusqlite::Error) -> StoreError {
    StoreError::Io(std::io::Error::other(format!("{what}: {err}")))
}

/// Copies the database `from` into the new file `to` with the online backup API and checks
/// the copy (`PRAGMA integrity_check`); returns its size in bytes.
fn copy(from: &Path, to: &Path) -> StoreResult<u64> {
    let source = Connection::open_with_flags(
        from,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| failed("opening the store", e))?;
    source
        .busy_timeout(Duration::from_secs(30))
        .map_err(|e| failed("opening the store", e))?;
    let mut target = Connection::open(to).map_err(|e| failed("creating the copy", e))?;
    Backup::new(&source, &mut target)
        .and_then(|backup| backup.run_to_completion(PAGES_PER_STEP, PAUSE, None))
        .map_err(|e| failed("copying the store", e))?;
    let verdict: String = target
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .map_err(|e| failed("checking the copy", e))?;
    if verdict != "ok" {
        return Err(StoreError::Corrupt(format!(
            "the copy fails SQLite's integrity check: {verdict}"
        )));
    }
    drop(target);
    Ok(std::fs::metadata(to)?.len())
}

/// Copies the store in `from_dir` into `to_dir` (created), which must hold none yet.
fn copy_between(from_dir: &Path, to_dir: &Path, missing: &str, held: &str) -> StoreResult<u64> {
    let from = from_dir.join(DB_FILE);
    if !from.is_file() {
        return Err(StoreError::NotFound(format!(
            "{missing} at {}",
            from.display()
        )));
    }
    std::fs::create_dir_all(to_dir)?;
    let to = to_dir.join(DB_FILE);
    if to.exists() {
        return Err(StoreError::Conflict(format!("{} {held}", to.display())));
    }
    // Written beside, renamed once whole and checked: a failed copy leaves no store behind.
    let partial = to_dir.join(format!("{DB_FILE}.partial"));
    let _ = std::fs::remove_file(&partial);
    match copy(&from, &partial) {
        Ok(size) => {
            std::fs::rename(&partial, &to)?;
            Ok(size)
        }
        Err(err) => {
            let _ = std::fs::remove_file(&partial);
            Err(err)
        }
    }
}

/// Backs the store of `data_dir` up into `dest_dir` (created; it must not hold a store yet).
pub fn backup(data_dir: &Path, dest_dir: &Path) -> StoreResult<u64> {
    copy_between(
        data_dir,
        dest_dir,
        "no store to back up",
        "exists; back up into a new directory",
    )
}

/// Restores the store backed up in `src_dir` into `data_dir`, which must hold no store.
pub fn restore(src_dir: &Path, data_dir: &Path) -> StoreResult<u64> {
    copy_between(
        src_dir,
        data_dir,
        "no backup",
        "exists; restore into an empty data directory",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::SqliteStore;
    use crate::{ApiKeyRecord, KeyStore};

    /// A copy taken while another connection writes is a store that opens, holds what was
    /// written before the copy began, and passes the integrity check; a restore refuses a
    /// data directory that holds a store.
    #[tokio::test]
    async fn a_copy_taken_while_writing_is_consistent_and_restores_only_into_an_empty_dir() {
        let live = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(live.path()).await.unwrap();
        let key = |n: u32| ApiKeyRecord {
            prefix: engram_types::ApiKeyPrefix::from_trusted(format!("k{n:05}")),
            ..crate::conformance::sample_key("k", "org-backup")
        };
        for n in 0..200 {
            store.insert_key(&key(n)).await.unwrap();
        }
        let writer = {
            let store = store.clone();
            tokio::spawn(async move {
                for n in 200..1_200 {
                    store.insert_key(&key(n)).await.unwrap();
                }
            })
        };
        let dest = tempfile::tempdir().unwrap();
        let (from, to) = (live.path().to_owned(), dest.path().join("b"));
        let size = tokio::task::spawn_blocking(move || backup(&from, &to))
            .await
            .unwrap()
            .unwrap();
        assert!(size > 0);
        writer.await.unwrap();

        let restored = tempfile::tempdir().unwrap();
        restore(&dest.path().join("b"), restored.path()).unwrap();
        let copy = SqliteStore::open(restored.path()).await.unwrap();
        let held = copy
            .list_keys(Some(&engram_types::OrgId::from_trusted("org-backup")))
            .await
            .unwrap();
        assert!(held.len() >= 200, "{}", held.len());
        assert!(matches!(
            restore(&dest.path().join("b"), restored.path()),
            Err(StoreError::Conflict(_))
        ));
        assert!(matches!(
            backup(live.path(), &dest.path().join("b")),
            Err(StoreError::Conflict(_))
        ));
    }
}
