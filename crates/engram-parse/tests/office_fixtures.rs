//! Office and OpenDocument files made by a real office suite: LibreOffice (installed by the
//! project's set-up) converts a generated HTML document to ODT and DOCX, the markitdown
//! PowerPoint to ODP and the markitdown workbook to ODS; engram reads them all with structure.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use engram_parse::{detect, extract, BlockKind, Document, Format, Limits};

const REPORT: &str = "<html><body>
<h1>Quarterly Report</h1>
<p>Revenue grew in every region during the quarter.</p>
<h2>Regional results</h2>
<ul><li>North exceeded its target</li><li>South held steady</li></ul>
<table border=1><tr><th>Region</th><th>Revenue</th></tr>
<tr><td>North</td><td>1200</td></tr><tr><td>South</td><td>800</td></tr></table>
<h2>Outlook</h2><p>Hiring continues &amp; costs stay flat.</p>
</body></html>";

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/markitdown")
        .join(name)
}

/// Converts `input` to `format` (an extension, or `extension:filter`) with LibreOffice into
/// `dir`; `None` when soffice is missing.
fn convert(dir: &Path, input: &Path, format: &str) -> Option<Vec<u8>> {
    let profile = format!("-env:UserInstallation=file://{}/profile", dir.display());
    let status = Command::new("soffice")
        .args([&profile, "--headless", "--convert-to", format, "--outdir"])
        .arg(dir)
        .arg(input)
        .output();
    match status {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!("soffice failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(_) => {
            eprintln!("soffice is not installed (make setup installs it): skipped");
            return None;
        }
    }
    let stem = input.file_stem().unwrap().to_string_lossy().into_owned();
    let extension = format.split(':').next().unwrap();
    Some(std::fs::read(dir.join(format!("{stem}.{extension}"))).unwrap())
}

fn read(bytes: &[u8], name: &str, expected: Format) -> Document {
    let format = detect(bytes, name, None).unwrap();
    assert_eq!(format, expected, "{name}");
    extract(bytes, format, &Limits::default()).unwrap()
}

fn check_report(doc: &Document, name: &str) {
    let text = doc.text();
    for s in [
        "Quarterly Report",
        "Revenue grew in every region",
        "North exceeded its target",
        "Hiring continues & costs stay flat",
    ] {
        assert!(text.contains(s), "{name}: {s} missing from\n{text}");
    }
    let table = doc
        .blocks
        .iter()
        .find(|b| b.kind == BlockKind::Table)
        .unwrap_or_else(|| panic!("{name}: no table in {text}"));
    assert!(
        table.text.contains("| Region | Revenue |") && table.text.contains("| North | 1200 |"),
        "{name}: {}",
        table.text
    );
    let outlook = doc
        .blocks
        .iter()
        .find(|b| b.text.contains("Hiring continues"))
        .unwrap();
    assert_eq!(
        outlook.layout.headings,
        ["Quarterly Report", "Outlook"],
        "{name}"
    );
    assert!(
        doc.blocks.iter().any(|b| b.kind == BlockKind::ListItem),
        "{name}: no list items"
    );
}

#[test]
fn libreoffice_documents_keep_their_structure() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    std::fs::write(&html, REPORT).unwrap();
    let Some(odt) = convert(dir.path(), &html, "odt") else {
        return;
    };
    check_report(&read(&odt, "report.odt", Format::Odt), "odt");
    let docx = convert(dir.path(), &html, "docx:MS Word 2007 XML").unwrap();
    check_report(&read(&docx, "report.docx", Format::Docx), "docx");

    let doc = convert(dir.path(), &html, "doc:MS Word 97").unwrap();
    let old = read(&doc, "report.doc", Format::Doc);
    let text = old.text();
    for s in [
        "Quarterly Report",
        "Revenue grew in every region",
        "North exceeded its target",
        "Hiring continues & costs stay flat",
        "1200",
    ] {
        assert!(text.contains(s), "doc: {s} missing from\n{text}");
    }
    let ppt = convert(dir.path(), &sample("test.pptx"), "ppt").unwrap();
    let deck = read(&ppt, "test.ppt", Format::Ppt);
    let text = deck.text();
    assert!(
        text.contains("AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation"),
        "{text}"
    );
    let slides: Vec<u32> = deck.blocks.iter().filter_map(|b| b.layout.slide).collect();
    assert_eq!(slides.first(), Some(&1), "{text}");
    assert!(slides.iter().max().unwrap() >= &5, "{slides:?}");

    let odp = convert(dir.path(), &sample("test.pptx"), "odp").unwrap();
    let deck = read(&odp, "test.odp", Format::Odp);
    let text = deck.text();
    assert!(
        text.contains("AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation"),
        "{text}"
    );
    let slides: Vec<u32> = deck.blocks.iter().filter_map(|b| b.layout.slide).collect();
    assert_eq!(slides.first(), Some(&1));
    assert!(slides.iter().max().unwrap() >= &5, "{slides:?}");

    let ods = convert(dir.path(), &sample("test.xlsx"), "ods").unwrap();
    let book = read(&ods, "test.ods", Format::Ods);
    assert!(book.text().contains("6ff4173b-42a5-4784-9b19-f49caff4d93d"));
    let table = book
        .blocks
        .iter()
        .find(|b| b.kind == BlockKind::Table)
        .unwrap();
    assert!(table.layout.sheet.is_some() && table.layout.row_range.is_some());
}
