//! `engram eval parsing DIR`: how much of each test file's expected text engram's parser
//! extracts, over the markitdown test files (`DIR/test_files`, `DIR/expected.json`).
//!
//! A directory without `expected.json` (a corpus such as `.cache/corpus`, which `make
//! setup-test` fetches) is measured against the plain reading instead: per format, how many
//! files were read by their own reader, errored, or fell back to the plain reading, and the
//! share of the plain reading's words the extracted text holds (the floor: 1.000). Where a
//! document's expected text sits beside it (`NAME.EXT.expected`: shipped with the document by
//! the project it comes from, or else written by an independent reader of the format,
//! `scripts/corpus_read.py`), the share of its words found, beside the plain reading's share
//! (the naive baseline; for a PDF, `pdftotext`'s text).
//!
//! Per file: the fraction of `must_contain_text` found in the extracted text (backslashes
//! removed, as markitdown's own check does); any `must_not_contain` hit scores 0. A file with
//! nothing to find scores 1 when it is handled as expected: refused as unsupported when it is
//! random bytes, extracted without error (or refused for having no text) otherwise. Beside it,
//! a baseline: the same check on the file's bytes read as text (what plain text extraction
//! finds), so a format's parser shows what it adds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use engram_parse::{detect, extract, Limits, ParseError};
use serde_json::Value;

#[derive(clap::Args)]
pub(crate) struct ParsingArgs {
    /// The markitdown directory (expected.json and test_files/).
    pub dir: PathBuf,
    /// Print the extracted text of files below this score.
    #[arg(long)]
    pub show_below: Option<f64>,
}

fn strings(vector: &Value, field: &str) -> Vec<String> {
    vector[field]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Found of `wanted` in `text`, and whether a forbidden string appears.
fn check(text: &str, wanted: &[String], forbidden: &[String]) -> (usize, bool) {
    let text = text.replace('\\', "");
    let found = wanted.iter().filter(|s| text.contains(s.as_str())).count();
    let hit = forbidden.iter().any(|s| text.contains(s.as_str()));
    (found, hit)
}

/// What the parser made of one file.
enum Outcome {
    Text(String),
    Unsupported(String),
    Failed(ParseError),
}

fn parse(path: &Path, name: &str) -> anyhow::Result<Outcome> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let format = match detect(&bytes, name, None) {
        Ok(format) => format,
        Err(unsupported) => return Ok(Outcome::Unsupported(unsupported.to_string())),
    };
    Ok(match extract(&bytes, format, &Limits::default()) {
        Ok(document) => Outcome::Text(document.text()),
        Err(err) => Outcome::Failed(err),
    })
}

/// Lowercase words of a text.
fn words(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

fn corpus_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        let expected = path.extension().is_some_and(|e| e == "expected");
        if path.is_dir() {
            corpus_files(&path, out);
        } else if !hidden && !expected {
            out.push(path);
        }
    }
}

/// `pdftotext`'s text of a PDF (what a naive extraction gets), if Poppler reads it.
fn pdftotext(path: &Path) -> Option<String> {
    let out = std::process::Command::new("pdftotext")
        .args(["-enc", "UTF-8"])
        .arg(path)
        .arg("-")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Per format: files, read by their own reader, without text, errored, fell back, plain words,
/// words found.
#[derive(Default)]
struct Floor {
    files: usize,
    own: usize,
    empty: usize,
    errored: usize,
    fell_back: usize,
    plain: usize,
    found: usize,
    /// Files with an expected text (`NAME.EXT.expected`), its words, those engram's text
    /// holds, and those the plain reading holds.
    judged: usize,
    expected: usize,
    expected_found: usize,
    expected_plain: usize,
}

/// A corpus without expected strings, against the plain reading of each file.
fn floor(dir: &Path) -> anyhow::Result<()> {
    let mut files = Vec::new();
    corpus_files(dir, &mut files);
    files.sort();
    let limits = Limits::default();
    let mut by_format: BTreeMap<&'static str, Floor> = BTreeMap::new();
    for path in &files {
        let name = path.display().to_string();
        let bytes = std::fs::read(path).with_context(|| format!("reading {name}"))?;
        let Ok(format) = detect(&bytes, &name, None) else {
            continue;
        };
        let row = by_format.entry(format.name()).or_default();
        row.files += 1;
        let text = match extract(&bytes, format, &limits) {
            Ok(document) => {
                if document.blocks.iter().any(|b| b.layout.reader.is_some()) {
                    row.fell_back += 1;
                    if let Err(why) = engram_parse::own_reading(&bytes, format, &limits) {
                        println!("{name}: fell back to the plain reading: {why}");
                    }
                } else {
                    row.own += 1;
                }
                document.text()
            }
            Err(ParseError::NoText) => {
                row.empty += 1;
                String::new()
            }
            Err(err) => {
                row.errored += 1;
                println!("{name}: {err}");
                continue;
            }
        };
        let plain = match format {
            // The naive reading of a PDF is Poppler's plain text.
            engram_parse::Format::Pdf => pdftotext(path),
            _ => engram_parse::plain_reading(&bytes, format, &limits)
                .and_then(Result::ok)
                .map(|p| p.text()),
        };
        let mut truth = path.clone().into_os_string();
        truth.push(".expected");
        if let Ok(truth) = std::fs::read_to_string(&truth) {
            let wanted = words(&truth);
            let have = words(&text);
            let naive = words(plain.as_deref().unwrap_or(""));
            row.judged += 1;
            row.expected += wanted.len();
            row.expected_found += wanted.intersection(&have).count();
            row.expected_plain += wanted.intersection(&naive).count();
            let lost: Vec<&String> = wanted.difference(&have).take(8).collect();
            if !lost.is_empty() {
                println!("{name}: misses expected {lost:?}");
            }
        }
        if let Some(plain) = plain {
            let (have, naive) = (words(&text), words(&plain));
            row.plain += naive.len();
            row.found += naive.intersection(&have).count();
            let lost: Vec<&String> = naive.difference(&have).take(8).collect();
            if !lost.is_empty() {
                println!("{name}: misses {lost:?}");
            }
        }
    }
    report!(
        "\n{:<28} {:>6} {:>6} {:>6} {:>8} {:>10} {:>12} {:>7} {:>9} {:>9}",
        "format",
        "files",
        "own",
        "empty",
        "errored",
        "fell back",
        "plain floor",
        "judged",
        "expected",
        "baseline"
    );
    let share = |part: usize, whole: usize| {
        if whole == 0 {
            "-".to_owned()
        } else {
            format!("{:.3}", part as f64 / whole as f64)
        }
    };
    let (mut plain, mut found) = (0, 0);
    for (format, row) in &by_format {
        report!(
            "{format:<28} {:>6} {:>6} {:>6} {:>8} {:>10} {:>12} {:>7} {:>9} {:>9}",
            row.files,
            row.own,
            row.empty,
            row.errored,
            row.fell_back,
            share(row.found, row.plain),
            row.judged,
            share(row.expected_found, row.expected),
            share(row.expected_plain, row.expected),
        );
        plain += row.plain;
        found += row.found;
    }
    report!(
        "\noverall: {} files; {found} of the plain readings' {plain} words found ({:.4})",
        files.len(),
        found as f64 / plain.max(1) as f64
    );
    Ok(())
}

pub(super) fn run(args: ParsingArgs) -> anyhow::Result<()> {
    if !args.dir.join("expected.json").is_file() {
        return floor(&args.dir);
    }
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(args.dir.join("expected.json"))
            .context("reading expected.json")?,
    )?;
    let vectors = expected["vectors"]
        .as_array()
        .context("expected.json has no vectors")?;
    report!(
        "{:<48} {:>7} {:>7} {:>9} {:>8}  outcome",
        "file",
        "found",
        "score",
        "baseline",
        "ms"
    );
    let (mut found_all, mut wanted_all, mut score_sum) = (0, 0, 0.0);
    let mut by_extension: BTreeMap<String, (f64, f64, usize)> = BTreeMap::new();
    for vector in vectors {
        let name = vector["file"].as_str().context("a vector without file")?;
        let path = args.dir.join("test_files").join(name);
        let wanted = strings(vector, "must_contain_text");
        let forbidden = strings(vector, "must_not_contain");
        let negative = vector["notes"]
            .as_str()
            .is_some_and(|n| n.contains("unsupported-format error"));
        let started = Instant::now();
        let outcome = parse(&path, name)?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let (found, score, label, text) = match &outcome {
            Outcome::Text(text) => {
                let (found, hit) = check(text, &wanted, &forbidden);
                let score = if hit {
                    0.0
                } else if wanted.is_empty() {
                    if negative {
                        0.0
                    } else {
                        1.0
                    }
                } else {
                    found as f64 / wanted.len() as f64
                };
                let label = if hit {
                    "FORBIDDEN TEXT".to_owned()
                } else {
                    format!("{} chars", text.chars().count())
                };
                (found, score, label, text.as_str())
            }
            Outcome::Unsupported(why) => {
                let score = if negative { 1.0 } else { 0.0 };
                (0, score, format!("unsupported: {why}"), "")
            }
            Outcome::Failed(err) => {
                let ok = wanted.is_empty() && matches!(err, ParseError::NoText) && !negative;
                (0, if ok { 1.0 } else { 0.0 }, format!("error: {err}"), "")
            }
        };
        let raw = std::fs::read(&path).unwrap_or_default();
        let (base_found, base_hit) = check(&String::from_utf8_lossy(&raw), &wanted, &forbidden);
        let baseline = if wanted.is_empty() || base_hit {
            0.0
        } else {
            base_found as f64 / wanted.len() as f64
        };
        report!(
            "{name:<48} {:>7} {score:>7.2} {baseline:>9.2} {ms:>8.1}  {label}",
            format!("{found}/{}", wanted.len()),
        );
        if args.show_below.is_some_and(|below| score < below) {
            println!("---- {name} ----\n{text}\n---- end of {name} ----");
        }
        found_all += found;
        wanted_all += wanted.len();
        score_sum += score;
        let extension = name
            .rsplit('.')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let entry = by_extension.entry(extension).or_default();
        entry.0 += score;
        entry.1 += baseline;
        entry.2 += 1;
    }
    report!("\nby format (mean score, mean baseline of plain text reading):");
    for (extension, (score, baseline, files)) in &by_extension {
        let n = *files as f64;
        report!(
            "  {extension:<6} {:.2}  baseline {:.2}  ({files} files)",
            score / n,
            baseline / n
        );
    }
    report!(
        "\noverall: mean per-file score {:.3} over {} files; strings found {found_all}/{wanted_all} ({:.3})",
        score_sum / vectors.len().max(1) as f64,
        vectors.len(),
        found_all as f64 / wanted_all.max(1) as f64
    );
    Ok(())
}
