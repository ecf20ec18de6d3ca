//! `engram bench parse`: parsing throughput of `engram-parse` (detect + extract) on real files,
//! repeated until a minimum time has passed: pages per second for a PDF, rows per second for a
//! spreadsheet, beside megabytes per second for any file.
//!
//! With no `--file`, LibreOffice makes the inputs (skipped with a note when `soffice` is not
//! installed): a text PDF of about 60 pages from generated sections, and a workbook of `--rows`
//! rows from a generated CSV; the markitdown scan (3 pages without a text layer) measures OCR.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use engram_parse::{detect, extract, Document, Limits};

#[derive(clap::Args)]
pub(crate) struct ParseBench {
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

fn have_soffice() -> bool {
    let found = std::process::Command::new("soffice")
        .arg("--version")
        .output()
        .is_ok();
    if !found {
        report!("(soffice not installed: no generated inputs)");
    }
    found
}

/// Converts `input` in `dir` to `format` with LibreOffice.
fn soffice(dir: &Path, input: &Path, format: &str) -> anyhow::Result<PathBuf> {
    let status = std::process::Command::new("soffice")
        .args(["--headless", "--convert-to", format, "--outdir"])
        .arg(dir)
        .arg(input)
        .env("HOME", dir)
        .output()
        .context("running soffice")?;
    let out = input.with_extension(format.split(':').next().unwrap_or(format));
    if !status.status.success() || !out.exists() {
        bail!("soffice did not convert {}", input.display());
    }
    Ok(out)
}

/// A text PDF of about 60 pages (sections of generated prose), made by LibreOffice.
fn text_pdf(dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    if !have_soffice() {
        return Ok(None);
    }
    let words = "the engine computes values tables of numbers were printed by machines during \
        the century analysis of results shows growth in every region"
        .split_whitespace()
        .collect::<Vec<_>>();
    let mut html = String::from("<html><body>");
    for section in 0..60 {
        html.push_str(&format!("<h2>Section {section}</h2>"));
        for paragraph in 0..6 {
            let text: Vec<&str> = (0..90)
                .map(|i| words[(section * 31 + paragraph * 7 + i * 13) % words.len()])
                .collect();
            html.push_str(&format!("<p>{}.</p>", text.join(" ")));
        }
    }
    html.push_str("</body></html>");
    let input = dir.join("sections.html");
    std::fs::write(&input, html)?;
    soffice(dir, &input, "pdf").map(Some)
}

/// A workbook of `rows` rows, converted by LibreOffice from a generated CSV.
fn spreadsheet(dir: &Path, rows: usize) -> anyhow::Result<Option<PathBuf>> {
    if !have_soffice() {
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
    soffice(dir, &csv, "xlsx").map(Some)
}

pub(crate) fn parse(args: ParseBench) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut files = args.files.clone();
    if files.is_empty() {
        files.extend(text_pdf(dir.path())?);
        files.extend(spreadsheet(dir.path(), args.rows)?);
        files.push(PathBuf::from(
            "fixtures/markitdown/MEDRPT-2024-PAT-3847_medical_report_scan.pdf",
        ));
    }
    let limits = Limits::default();
    report!(
        "{:<28} {:>9} {:>6} {:>9} {:>10} {:>12} {:>10}",
        "file",
        "KiB",
        "runs",
        "ms/run",
        "MB/s",
        "pages/s",
        "rows/s"
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
                format!("{:.1}", n / per_run)
            } else {
                "-".into()
            }
        };
        report!(
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
