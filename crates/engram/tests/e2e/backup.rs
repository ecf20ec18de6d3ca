//! `engram backup` and `engram restore` on the embedded store, taken while the service
//! ingests, restored into an empty data directory and served from there.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use serde_json::{json, Value};

use crate::common::{self, app, wait_completed, Server};

fn items(prefix: &str, count: usize) -> Vec<Value> {
    (0..count)
        .map(|i| {
            app(
                &format!("{prefix}-{i}"),
                &format!("Note {prefix} {i}"),
                &format!("Maintenance note {i} of {prefix}: valve {i} was inspected and oiled."),
            )
        })
        .collect()
}

/// `pg_dump` of the server's database (a consistent snapshot while it writes) restored into a
/// new database with `pg_restore`, as README says to.
fn pg_dump_and_restore(url: &str, dir: &std::path::Path) -> String {
    let dump = dir.join("engram.dump");
    let dumped = std::process::Command::new("pg_dump")
        .args(["--format=custom", "--no-owner", "--file"])
        .arg(&dump)
        .arg(url)
        .output()
        .unwrap();
    assert!(dumped.status.success(), "pg_dump: {dumped:?}");
    let target = common::new_postgres_database().unwrap();
    let restored = std::process::Command::new("pg_restore")
        .args(["--no-owner", "--exit-on-error", "--dbname", &target])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(restored.status.success(), "pg_restore: {restored:?}");
    target
}

/// A backup taken while the service ingests restores, into an empty data directory only,
/// everything answered `completed` before it (found by queries once the restored service has
/// built its indexes), the keys, and connector credentials sealed with the data directory's
/// key; what was still queued completes on the restored service. On PostgreSQL `engram backup`
/// refuses, naming PostgreSQL's tools, and an instance started on a database restored from
/// `pg_dump` serves the same.
#[tokio::test]
async fn a_backup_taken_while_ingesting_restores_everything_completed_before_it() {
    let mut server = Server::start();
    let dest = tempfile::tempdir().unwrap();
    let backup_dir = dest.path().join("backup");
    let backup_arg = backup_dir.display().to_string();
    let key = server.key("org-backup", &[]);
    server.ready_database(&key, "kb").await;
    let first = items("early", 20);
    crate::webhooks::ingest(&server, &key, "kb", &first).await;
    let first_ids: Vec<String> = first
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    let first_refs: Vec<&str> = first_ids.iter().map(String::as_str).collect();
    wait_completed(&server, &key, "kb", None, &first_refs).await;
    let connector = server
        .post(
            "/connectors",
            &key,
            json!({"provider": "rss", "database": "kb", "credentials": {"token": "sealed-token-1"}}),
        )
        .await;
    assert_eq!(connector.status, 201, "{connector:#?}");
    let connector_id = connector.body["connector_id"].as_str().unwrap().to_owned();

    // More arrives while the backup is taken.
    let later = items("late", 60);
    crate::webhooks::ingest(&server, &key, "kb", &later).await;
    let all: Vec<String> = first_ids
        .iter()
        .cloned()
        .chain(later.iter().map(|i| i["id"].as_str().unwrap().to_owned()))
        .collect();
    let status_path = format!("/context/status?database=kb&ids={}", all.join(","));
    let before = server.get(&status_path, &key).await;
    let completed_before: Vec<String> = before.current_ok(200)["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["indexing_status"] == "completed")
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    if let Some(url) = server.storage_url.clone() {
        let (ok, _, stderr) = server.cli(&["backup", &backup_arg]);
        assert!(!ok && stderr.contains("pg_dump"), "{stderr}");
        let restored = pg_dump_and_restore(&url, dest.path());
        server.terminate();
        server.storage_url = Some(restored);
        server.restart();
    } else {
        let (ok, stdout, stderr) = server.cli(&["backup", &backup_arg]);
        assert!(ok, "backup failed: {stdout} {stderr}");
        assert!(backup_dir.join("engram.sqlite3").is_file());
        assert!(backup_dir.join("engram-backup.json").is_file());
        // The same directory twice, or a restore over a store: refused.
        let (ok, _, _) = server.cli(&["backup", &backup_arg]);
        assert!(!ok, "a second backup into the same directory");
        let (ok, _, stderr) = server.cli(&["restore", &backup_arg]);
        assert!(!ok && stderr.contains("empty"), "{stderr}");

        // Restored into an empty directory, and served from there.
        let restored = dest.path().join("restored");
        let (ok, stdout, stderr) = common::cli(&restored, &["restore", &backup_arg]);
        assert!(ok, "restore failed: {stdout} {stderr}");
        server.terminate();
        server.data_dir = restored;
        server.restart();
    }

    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    wait_completed(&server, &key, "kb", None, &refs).await;
    for id in &completed_before {
        let n = id.rsplit('-').next().unwrap();
        let prefix = id.split('-').next().unwrap();
        let found = server
            .post(
                "/query",
                &key,
                json!({"database": "kb", "query": format!("note {n} of {prefix} valve {n}"),
                       "ids": [id], "max_results": 1}),
            )
            .await;
        assert_eq!(
            found.current_ok(200)["chunks"][0]["id"],
            id.as_str(),
            "{id} was completed before the backup: {found:#?}"
        );
    }
    assert!(completed_before.len() >= first_ids.len());
    let revealed = server
        .post(
            &format!("/credential-vault/{connector_id}/reveal"),
            &key,
            json!({"field": "token"}),
        )
        .await;
    assert_eq!(revealed.body["value"], "sealed-token-1", "{revealed:#?}");
    server.assert_consistent();
}

/// `engram check` says what is wrong and exits non-zero: a chunk whose item is gone (written
/// behind the service's back, with SQLite's foreign keys off) is found, beside the service.
/// The chunks a keyword query finds of the check test's notes.
async fn chunks_found(server: &Server, key: &str) -> crate::common::Reply {
    server
        .post(
            "/query",
            key,
            json!({"database": "kb", "query": "maintenance note valve inspected",
                   "max_results": 10, "query_by": "text"}),
        )
        .await
}

#[tokio::test]
async fn engram_check_finds_what_no_correct_run_leaves() {
    let mut server = Server::start();
    if server.storage_url.is_some() {
        return;
    }
    let key = server.key("org-check", &[]);
    server.ready_database(&key, "kb").await;
    crate::webhooks::ingest(&server, &key, "kb", &items("one", 2)).await;
    wait_completed(&server, &key, "kb", None, &["one-0", "one-1"]).await;
    server.assert_consistent();
    let broke = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nc.execute('PRAGMA foreign_keys = OFF')\n\
             c.execute('UPDATE chunks SET item_key = 987654321 WHERE chunk_key = (SELECT MIN(chunk_key) FROM chunks)')\n\
             c.commit()",
        )
        .arg(server.data_dir.join("engram.sqlite3"))
        .status()
        .unwrap();
    assert!(broke.success());
    let (ok, stdout, _) = server.cli(&["check"]);
    assert!(!ok, "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("orphan_chunks"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("FAILED") && line.contains(" 1 "), "{line}");
    assert!(stdout.contains("inconsistent"), "{stdout}");

    // Repaired beside the running service: the orphan leaves (the feed logs it for the
    // indexes), and the store checks consistent.
    let (ok, stdout, stderr) = server.cli(&["check", "--repair"]);
    assert!(ok, "{stdout} {stderr}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("repaired orphan_chunks") && l.contains(" 1 rows")),
        "{stdout}"
    );
    assert!(stdout.trim_end().ends_with("consistent"), "{stdout}");
    server.assert_consistent();
    let found = chunks_found(&server, &key).await;
    assert_eq!(
        found.current_ok(200)["chunks"].as_array().unwrap().len(),
        1,
        "the item that kept its chunk is found, and only it: {found:#?}"
    );

    // The keyword index agrees with the store chunk for chunk; one that lost a database's
    // entries is found out, and built again from the store at the next start after --repair.
    let (_, stdout, _) = server.cli(&["check"]);
    for check in ["keyword_index_missing", "keyword_index_extra"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(check))
            .unwrap_or_else(|| panic!("{check} compared: {stdout}"));
        assert!(line.ends_with("ok"), "{line}");
    }
    server.terminate();
    let keyword = server.data_dir.join("keyword");
    for entry in std::fs::read_dir(&keyword).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            std::fs::remove_dir_all(entry.path()).unwrap();
        }
    }
    let (ok, stdout, _) = server.cli(&["check"]);
    assert!(!ok, "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("keyword_index_missing") && l.contains("FAILED")),
        "{stdout}"
    );
    let (_, stdout, _) = server.cli(&["check", "--repair"]);
    assert!(stdout.contains("repaired keyword_index"), "{stdout}");
    server.restart();
    server.assert_consistent();
    let found = chunks_found(&server, &key).await;
    assert_eq!(
        found.current_ok(200)["chunks"].as_array().unwrap().len(),
        1,
        "found again through the rebuilt index: {found:#?}"
    );
}
