//! `engram check`: the store's consistency check (see `engram_store::Consistency`), printed
//! check by check; exits non-zero when anything fails. It only reads, so it runs beside the
//! service, on SQLite or PostgreSQL. `--repair` repairs what fails first (one transaction),
//! prints what it changed, and checks again.

use engram_config::Config;

pub(crate) async fn run(config: Config, repair: bool) -> anyhow::Result<bool> {
    let store = engram_app::open_store(&config).await?;
    // The service's time base: PostgreSQL's clock where instances share it.
    let now = engram_app::store_now(store.as_ref()).await?;
    let retention = u64::from(config.webhooks.retention_days) * 24 * 3600;
    let kept_since = now.before(std::time::Duration::from_secs(retention));
    if repair {
        match store.repair(now, kept_since).await {
            Ok(repairs) => {
                for repair in repairs {
                    println!("repaired {:<19} {:>8} rows", repair.check, repair.rows);
                }
            }
            Err(err) => {
                store.close().await;
                return Err(err.into());
            }
        }
    }
    let findings = store.check(now, kept_since).await;
    let keyword = match &findings {
        Ok(_) => keyword_agreement(store.as_ref(), &config.data_dir.join("keyword"), repair).await,
        Err(_) => Ok(Vec::new()),
    };
    store.close().await;
    let mut findings = findings?;
    findings.extend(keyword?);
    let mut consistent = true;
    for finding in &findings {
        let verdict = if finding.count == 0 { "ok" } else { "FAILED" };
        println!("{:<28} {:>8}  {verdict}", finding.check, finding.count);
        if finding.count > 0 {
            consistent = false;
            println!("    {}", finding.meaning);
        }
    }
    println!(
        "{}",
        if consistent {
            "consistent"
        } else {
            "inconsistent: see the checks above"
        }
    );
    Ok(consistent)
}

/// How many times the keyword index is read again when it or the store moved while it was read.
const ATTEMPTS: usize = 5;

/// Whether this data directory's keyword index holds exactly the store's chunks, chunk for
/// chunk: compared when the index says it covers the store's whole feed (an instance that is
/// catching up is waited for a few seconds, then left uncompared with a note). With `repair`,
/// a disagreeing index loses its position, so its instance builds it again from the store at
/// its next start.
async fn keyword_agreement(
    store: &dyn engram_store::Store,
    directory: &std::path::Path,
    repair: bool,
) -> anyhow::Result<Vec<engram_store::Finding>> {
    let mut unread = None;
    for attempt in 1..=ATTEMPTS {
        let head = store.committed_feed_head().await?;
        // A running instance may be writing it (a new database, a merge): read again.
        let saved = match engram_index::SavedKeywordIndex::read(directory) {
            Ok(saved) => saved,
            Err(why) => {
                unread = Some(why);
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        let Some(saved) = saved else {
            println!(
                "(no keyword index saved under {}: not compared)",
                directory.display()
            );
            return Ok(Vec::new());
        };
        if saved.feed != store.chunk_feed_id().await? {
            println!("(the keyword index under {} follows another store: it is built again at start; not compared)", directory.display());
            return Ok(Vec::new());
        }
        if saved.through < head {
            if attempt < ATTEMPTS {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
            println!(
                "(the keyword index under {} covers the feed to {} of {}: an instance is catching up; not compared)",
                directory.display(),
                saved.through,
                head
            );
            return Ok(Vec::new());
        }
        let mut stored: std::collections::HashMap<engram_types::DatabaseId, Vec<i64>> =
            std::collections::HashMap::new();
        // Databases being deleted are left out: an index holds their chunks or not until
        // the purge.
        let mut deleting = std::collections::HashSet::new();
        let mut after = engram_store::ChunkKey(0);
        loop {
            let page = store.indexed_keys(after, 10_000).await?;
            let Some((last, ..)) = page.last() else {
                break;
            };
            after = *last;
            for (key, database, live) in page {
                if live {
                    stored.entry(database).or_default().push(key.0);
                } else {
                    deleting.insert(database);
                }
            }
        }
        if store.committed_feed_head().await? != head {
            continue; // written meanwhile: read both again
        }
        let (mut missing, mut extra) = (0_i64, 0_i64);
        let databases: std::collections::HashSet<&engram_types::DatabaseId> = stored
            .keys()
            .chain(saved.keys.keys())
            .filter(|d| !deleting.contains(*d))
            .collect();
        for database in databases {
            let ours: std::collections::HashSet<i64> = stored
                .get(database)
                .map(|k| k.iter().copied().collect())
                .unwrap_or_default();
            let theirs: std::collections::HashSet<i64> = saved
                .keys
                .get(database)
                .map(|k| k.iter().copied().collect())
                .unwrap_or_default();
            missing += i64::try_from(ours.difference(&theirs).count()).unwrap_or(i64::MAX);
            extra += i64::try_from(theirs.difference(&ours).count()).unwrap_or(i64::MAX);
        }
        if repair && missing + extra > 0 {
            engram_index::SavedKeywordIndex::request_rebuild(directory)?;
            println!(
                "repaired keyword_index: built again from the store at the service's next start"
            );
        }
        return Ok(vec![
            engram_store::Finding {
                check: "keyword_index_missing",
                meaning: "chunks of the store that this data directory's keyword index lacks",
                count: missing,
            },
            engram_store::Finding {
                check: "keyword_index_extra",
                meaning: "keyword index entries of chunks the store no longer holds",
                count: extra,
            },
        ]);
    }
    match unread {
        Some(why) => println!(
            "(the keyword index under {} could not be read: {why}; not compared)",
            directory.display()
        ),
        None => println!("(the store changed while the keyword index was read: not compared)"),
    }
    Ok(Vec::new())
}
