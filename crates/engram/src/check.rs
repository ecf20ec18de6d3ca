//! `engram check`: the store's consistency check (see `engram_store::Consistency`), printed
//! check by check; exits non-zero when anything fails. It only reads, so it runs beside the
//! service, on SQLite or PostgreSQL. `--repair` repairs what fails first (one transaction),
//! prints what it changed, and checks again.

use engram_config::Config;

pub(crate) async fn run(config: Config, repair: bool) -> anyhow::Result<bool> {
    let store = engram_app::open_store(&config).await?;
    let now = engram_types::Clock::now(&engram_types::SystemClock);
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
    store.close().await;
    let findings = findings?;
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
