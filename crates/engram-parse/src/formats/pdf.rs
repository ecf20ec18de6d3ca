//! PDF: the text layer by Poppler's `pdftotext` (reading order), one page at a time (pages end
//! at form feeds), each page's paragraphs with `layout.page`. Pages without a text layer (scans)
//! are rendered by `pdftoppm` and read by Tesseract. Both run as subprocesses (`tools`): a
//! malformed or hostile PDF fails, or is killed at the time-out, without touching the worker.
//! Encrypted PDFs that need a password are `Corrupt` with that reason. Pages holding
//! right-to-left text (Arabic, Hebrew) are read a second way, from MuPDF's placed characters
//! grouped into glyphs (or, without `mutool`, Poppler's word boxes) put in logical order
//! (`bidi`), since Poppler's reading order scrambles lines that mix directions and ligatures. Pages
//! whose reading order looks like a table read as a stream of numbers are read a third way,
//! from Poppler's layout reading, where aligned columns become Markdown tables (`pdf_table`).

use std::collections::HashMap;
use std::path::Path;

use crate::document::{Builder, Layout};
use crate::formats::pdf_table::{self, Segment};
use crate::formats::table::{header_lines, row_line, TableBlocks};
use crate::formats::{bidi, plain, tools};
use crate::{Document, Limits, ParseError};

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<Document, ParseError> {
    let dir = tempfile::tempdir().map_err(|e| ParseError::Corrupt(format!("temp dir: {e}")))?;
    let input = dir.path().join("in.pdf");
    std::fs::write(&input, bytes).map_err(|e| ParseError::Corrupt(format!("temp file: {e}")))?;
    let run = tools::run(
        tools::PDFTOTEXT,
        &[
            "-enc".as_ref(),
            "UTF-8".as_ref(),
            input.as_os_str(),
            "-".as_ref(),
        ],
        dir.path(),
        limits.max_text_bytes,
        &limits.interrupt,
    )?;
    if !run.success {
        let reason = run.stderr.lines().last().unwrap_or("unreadable").trim();
        let reason = if reason.contains("password") || reason.contains("Incorrect password") {
            "the PDF is encrypted".to_owned()
        } else {
            format!("pdftotext: {reason}")
        };
        return Err(ParseError::Corrupt(reason));
    }
    // Embedding marks are invisible and only split words.
    let text: String = String::from_utf8_lossy(&run.stdout)
        .chars()
        .filter(|c| !bidi::is_bidi_control(*c))
        .collect();
    let text = bidi::base_letters(&text).into_owned();
    let mut pages: Vec<&str> = text.split('\u{c}').collect();
    // pdftotext ends the last page with a form feed too.
    if pages.last().is_some_and(|p| p.trim().is_empty()) && pages.len() > 1 {
        pages.pop();
    }
    // Scanned pages take seconds each: a file with more than the budget fails before any OCR
    // rather than losing pages.
    let scanned = pages.iter().filter(|p| p.trim().is_empty()).count();
    if scanned > limits.max_ocr_pages {
        return Err(ParseError::TooLarge {
            what: "pages without a text layer (OCR)",
            limit: limits.max_ocr_pages,
        });
    }
    let boxed = right_to_left_pages(&input, dir.path(), limits, &pages)?;
    let laid_out = if pages
        .iter()
        .any(|p| !p.chars().any(bidi::is_rtl) && pdf_table::looks_tabular(p))
    {
        layout_pages(&input, dir.path(), limits)?
    } else {
        Vec::new()
    };
    let mut out = Builder::new(limits);
    for (index, page_text) in pages.iter().enumerate() {
        let page = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let layout = Layout {
            page: Some(page),
            ..Layout::default()
        };
        if page_text.trim().is_empty() {
            let scanned = ocr_page(&input, page, dir.path(), limits)?;
            plain::paragraphs(&crate::decode::normalize(&scanned), &mut out, &layout)?;
        } else if let Some(paragraphs) = boxed.get(&index) {
            let text = paragraphs.join("\n\n");
            let text = bidi::base_letters(&text);
            plain::paragraphs(&crate::decode::normalize(&text), &mut out, &layout)?;
        } else if let Some(segments) = laid_out
            .get(index)
            .filter(|_| pdf_table::looks_tabular(page_text))
            .and_then(|page| pdf_table::segments(page))
        {
            for segment in segments {
                match segment {
                    Segment::Text(text) => {
                        plain::paragraphs(&crate::decode::normalize(&text), &mut out, &layout)?;
                    }
                    Segment::Table(rows) => {
                        let Some((header, rows)) = rows.split_first() else {
                            continue;
                        };
                        let mut blocks = TableBlocks::new(header_lines(header), layout.clone());
                        for row in rows {
                            blocks.push(&mut out, &row_line(row), None)?;
                        }
                        blocks.finish(&mut out)?;
                    }
                }
            }
        } else {
            plain::paragraphs(&crate::decode::normalize(page_text), &mut out, &layout)?;
        }
    }
    out.finish()
}

/// Poppler's second reading of the whole file in `mode` (`-layout`, `-bbox-layout`), its
/// output held to `expansion` times the text budget; `None` when Poppler fails on it.
fn second_reading(
    input: &Path,
    dir: &Path,
    limits: &Limits,
    mode: &str,
    expansion: usize,
) -> Result<Option<String>, ParseError> {
    let run = tools::run(
        tools::PDFTOTEXT,
        &[
            mode.as_ref(),
            "-enc".as_ref(),
            "UTF-8".as_ref(),
            input.as_os_str(),
            "-".as_ref(),
        ],
        dir,
        limits.max_text_bytes.saturating_mul(expansion),
        &limits.interrupt,
    )?;
    Ok(run
        .success
        .then(|| String::from_utf8_lossy(&run.stdout).into_owned()))
}

/// Each page of Poppler's layout reading (words at their horizontal place; alignment spaces
/// come on top of the text); none when it fails.
fn layout_pages(input: &Path, dir: &Path, limits: &Limits) -> Result<Vec<String>, ParseError> {
    Ok(second_reading(input, dir, limits, "-layout", 4)?
        .map(|text| {
            text.split('\u{c}')
                .map(|page| {
                    page.chars()
                        .filter(|c| !bidi::is_bidi_control(*c))
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default())
}

/// How many bytes of MuPDF's structured text one byte of a page's text may take (a character
/// element of about 150 bytes per letter of two).
const STEXT_EXPANSION: usize = 200;

/// The paragraphs, in logical order (`bidi`), of each page (by index) holding right-to-left
/// text: from MuPDF's placed characters where `mutool` reads them (glyphs kept whole), in runs
/// of pages whose markup fits the budget of the word boxes; otherwise from Poppler's word
/// boxes (markup several times the text).
fn right_to_left_pages(
    input: &Path,
    dir: &Path,
    limits: &Limits,
    pages: &[&str],
) -> Result<HashMap<usize, Vec<String>>, ParseError> {
    let wanted: Vec<usize> = (0..pages.len())
        .filter(|&i| pages[i].chars().any(bidi::is_rtl))
        .collect();
    let mut read = HashMap::new();
    if wanted.is_empty() {
        return Ok(read);
    }
    let budget = limits.max_text_bytes.saturating_mul(8);
    let mut batches: Vec<Vec<usize>> = Vec::new();
    let mut size = 0usize;
    for &i in &wanted {
        let bytes = pages[i].len().saturating_mul(STEXT_EXPANSION);
        match batches.last_mut() {
            Some(batch) if size.saturating_add(bytes) <= budget => {
                batch.push(i);
                size += bytes;
            }
            _ => {
                batches.push(vec![i]);
                size = bytes;
            }
        }
    }
    for batch in batches {
        let list = batch
            .iter()
            .map(|i| (i + 1).to_string())
            .collect::<Vec<_>>()
            .join(",");
        let run = tools::run(
            tools::MUTOOL,
            &[
                "draw".as_ref(),
                "-q".as_ref(),
                "-F".as_ref(),
                "stext".as_ref(),
                "-o".as_ref(),
                "-".as_ref(),
                input.as_os_str(),
                list.as_ref(),
            ],
            dir,
            budget,
            &limits.interrupt,
        );
        let glyphs = match run {
            Ok(run) if run.success => bidi::glyph_pages(&String::from_utf8_lossy(&run.stdout)),
            Err(stop @ (ParseError::Cancelled | ParseError::TimedOut { .. })) => return Err(stop),
            // Not installed: Poppler reads every page.
            Err(ParseError::ToolMissing { .. }) => break,
            // Too much markup, or failed on these pages: Poppler reads them.
            _ => Vec::new(),
        };
        limits.interrupt.check()?;
        if glyphs.len() != batch.len() {
            continue;
        }
        // A page MuPDF finds no text on is left to Poppler.
        read.extend(
            batch
                .into_iter()
                .zip(glyphs)
                .filter(|(_, paragraphs)| !paragraphs.is_empty()),
        );
    }
    if read.len() < wanted.len() {
        let boxes = second_reading(input, dir, limits, "-bbox-layout", 8)?
            .map(|text| bidi::pages(&text))
            .unwrap_or_default();
        for i in wanted {
            if let (false, Some(page)) = (read.contains_key(&i), boxes.get(i)) {
                read.insert(i, page.clone());
            }
        }
    }
    Ok(read)
}

/// The OCR text of one page, rendered at 300 dpi.
fn ocr_page(input: &Path, page: u32, dir: &Path, limits: &Limits) -> Result<String, ParseError> {
    let number = page.to_string();
    let prefix = dir.join(format!("page-{page}"));
    let run = tools::run(
        tools::PDFTOPPM,
        &[
            "-r".as_ref(),
            "300".as_ref(),
            "-f".as_ref(),
            number.as_ref(),
            "-l".as_ref(),
            number.as_ref(),
            "-png".as_ref(),
            "-singlefile".as_ref(),
            input.as_os_str(),
            prefix.as_os_str(),
        ],
        dir,
        1024,
        &limits.interrupt,
    )?;
    let image = prefix.with_extension("png");
    if !run.success || !image.exists() {
        return Ok(String::new());
    }
    let text = tools::ocr(&image, dir, limits.max_text_bytes, &limits.interrupt);
    let _ = std::fs::remove_file(&image);
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::sample;

    fn text_of(name: &str) -> Document {
        extract(&std::fs::read(sample(name)).unwrap(), &Limits::default()).unwrap()
    }

    #[test]
    fn pages_are_numbered() {
        let doc = text_of("REPAIR-2022-INV-001_multipage.pdf");
        let pages: Vec<u32> = doc.blocks.iter().filter_map(|b| b.layout.page).collect();
        assert_eq!(pages.first(), Some(&1));
        assert_eq!(pages.last(), Some(&3), "pdfinfo: 3 pages");
        assert!(pages.windows(2).all(|w| w[0] <= w[1]));
        assert!(doc.text().contains("Gabriel Diaz"));
    }

    /// The estimate's totals are a table in the layout (its reading order gives the labels,
    /// then the hours, the rates and the costs as separate streams).
    #[test]
    fn aligned_columns_are_read_as_a_table() {
        let doc = text_of("REPAIR-2022-INV-001_multipage.pdf");
        let text = doc.text();
        let tables: String = doc
            .blocks
            .iter()
            .filter(|b| b.kind == crate::BlockKind::Table && b.layout.page == Some(1))
            .map(|b| b.text.as_str())
            .collect();
        for row in [
            "| Insured name | Gabriel Diaz | Year | 2022 |",
            "| Body Labor |  | 2 | 150 | 300 |",
            "|  | Paint Supplies |  |  | 60 |",
            "| Sales Tax |  |  | 10.20% | 278.46 |",
            "| GRAND TOTAL |  |  |  | 5,738 |",
        ] {
            assert!(tables.contains(row), "{row} in {text}");
        }
        assert!(text.contains("preliminary estimate for the visible damage"));
    }

    #[test]
    fn scans_go_through_ocr() {
        let doc = text_of("MEDRPT-2024-PAT-3847_medical_report_scan.pdf");
        assert!(doc.text().split_whitespace().count() > 20, "{}", doc.text());
    }

    #[test]
    fn more_scanned_pages_than_the_budget_fail_before_any_ocr() {
        let bytes = std::fs::read(sample("MEDRPT-2024-PAT-3847_medical_report_scan.pdf")).unwrap();
        let limits = Limits {
            max_ocr_pages: 0,
            ..Limits::default()
        };
        let err = extract(&bytes, &limits).unwrap_err();
        assert!(
            matches!(err, ParseError::TooLarge { limit: 0, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("OCR"), "{err}");
    }

    #[test]
    fn broken_and_encrypted_pdfs_fail_cleanly() {
        let bytes = std::fs::read(sample("test.pdf")).unwrap();
        // A truncated file gives what is readable, or an error: never a panic or a hang.
        let _ = extract(&bytes[..bytes.len() / 3], &Limits::default());
        assert!(matches!(
            extract(b"%PDF-1.7\nnot really", &Limits::default()),
            Err(ParseError::Corrupt(_) | ParseError::NoText)
        ));
        let dir = tempfile::tempdir().unwrap();
        let (plain, locked) = (dir.path().join("p.pdf"), dir.path().join("l.pdf"));
        std::fs::write(&plain, &bytes).unwrap();
        let made = std::process::Command::new("qpdf")
            .args(["--encrypt", "user-pw", "owner-pw", "256", "--"])
            .arg(&plain)
            .arg(&locked)
            .status();
        match made {
            Ok(status) if status.success() => {
                let locked = std::fs::read(&locked).unwrap();
                assert_eq!(
                    extract(&locked, &Limits::default()),
                    Err(ParseError::Corrupt("the PDF is encrypted".into()))
                );
            }
            _ => eprintln!("qpdf not installed: encrypted PDF case skipped"),
        }
    }
}
