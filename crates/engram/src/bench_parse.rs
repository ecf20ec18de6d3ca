//! `engram bench parse`: parsing throughput of `engram-parse` (detect + extract) on real files,
//! repeated until a minimum time has passed: pages per second for a PDF, rows per second for a
//! spreadsheet, beside megabytes per second for any file.
//!
//! With no `--file`, the PDF is the markitdown `test.pdf` (a 14-page paper with a text layer)
//! and the spreadsheet is a workbook of `--rows` rows that LibreOffice makes from a generated CSV
//! (skipped with a note when `soffice` is not installed).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use engram_parse::{detect, extract, Document, Limits};

#[derive(clap::Args)]
pub struct ParseBench {
    /// Files to parse; default: the markitdown test.pdf and a generated spreadsheet.
    #[arg(long = "file")]
    files: Vec<PathBuf>,
    /// Rows of the generated spreadsheet.
    #[arg(long, default_value_t = 20_000)]
    rows: usize,
    /// Least time spent on each file (seconds).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
}

/// Pages (highest page number) and spreadsheet rows (sum of table row ranges) of a document.
fn units(document: &Document) -> (u32, u64) {
    let pages = document
        .blocks
        .iter()
        .filter_map(|b| b.layout.page)
        .max()
        .unwrap_or(0);
    let rows = document
        .blocks
        .iter()
        .filter(|b| b.layout.sheet.is_some())
        .filter_map(|b| b.layout.row_range)
        .map(|(first, last)| u64::from(last.saturating_sub(first)) + 1)
        .sum();
    (pages, rows)
}

/// A workbook of `rows` rows, converted by LibreOffice from a generated CSV.
fn spreadsheet(dir: &Path, rows: usize) -> anyhow::Result<Option<PathBuf>> {
    if std::process::Command::new("soffice")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("(soffice not installed: no generated spreadsheet)");
        return Ok(None);
    }
    let csv = dir.join("rows.csv");
    let mut text = String::from("id,name,city,amount,date\n");
    for i in 0..rows {
        text.push_str(&format!(
            "{i},Customer {i},City {},{}.{:02},2024-{:02}-{:02}\n",
            i % 97,
            i * 7 % 10_000,
            i % 100,
            i % 12 + 1,
            i % 28 + 1
        ));
    }
    std::fs::write(&csv, text)?;
    let status = std::process::Command::new("soffice")
        .args(["--headless", "--convert-to", "xlsx", "--outdir"])
        .arg(dir)
        .arg(&csv)
        .env("HOME", dir)
        .output()
        .context("running soffice")?;
    let xlsx = dir.join("rows.xlsx");
    if !status.status.success() || !xlsx.exists() {
        bail!("soffice did not convert {}", csv.display());
    }
    Ok(Some(xlsx))
}

pub fn parse(args: ParseBench) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut files = args.files.clone();
    if files.is_empty() {
        files.push(PathBuf::from(
            "../shared/eval/parsing/markitdown/test_files/test.pdf",
        ));
        files.extend(spreadsheet(dir.path(), args.rows)?);
    }
    let limits = Limits::default();
    println!(
        "{:<28} {:>9} {:>6} {:>9} {:>10} {:>12} {:>10}",
        "file", "KiB", "runs", "ms/run", "MB/s", "pages/s", "rows/s"
    );
    for path in &files {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let started = Instant::now();
        let (mut runs, mut last) = (0u32, None);
        while runs == 0 || started.elapsed() < Duration::from_secs_f64(args.seconds) {
            let format = detect(&bytes, &name, None).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            last = Some(extract(&bytes, format, &limits).with_context(|| name.clone())?);
            runs += 1;
        }
        let per_run = started.elapsed().as_secs_f64() / f64::from(runs);
        let (pages, rows) = last.as_ref().map(units).unwrap_or_default();
        let rate = |n: f64| {
            if n > 0.0 {
                format!("{:.0}", n / per_run)
            } else {
                "-".into()
            }
        };
        println!(
            "{name:<28} {:>9.0} {runs:>6} {:>9.1} {:>10.2} {:>12} {:>10}",
            bytes.len() as f64 / 1024.0,
            per_run * 1000.0,
            bytes.len() as f64 / per_run / 1e6,
            rate(f64::from(pages)),
            rate(rows as f64),
        );
    }
    Ok(())
}
