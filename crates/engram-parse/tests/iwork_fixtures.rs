//! Apple iWork files made by real tools. Numbers spreadsheets are written at test time by
//! numbers-parser (PyPI), which `make setup-test` installs under the cache directory
//! (`.cache/python/numbers-parser` at the workspace root, or under `ENGRAM_CACHE_DIR`). Only
//! Apple's applications write Pages and Keynote files, and none are checked in: those checks read
//! Apple-made samples from the directory `ENGRAM_IWORK_SAMPLES` names, and skip when it is unset.

#![allow(clippy::unwrap_used)]

use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use engram_parse::{detect, extract, BlockKind, Document, Format, Limits, ParseError};

/// Two sheets, a header row, text, number, date and boolean cells.
const SPREADSHEET: &str = r#"
import sys
from datetime import datetime
from numbers_parser import Document

doc = Document()
doc.sheets[0].name = "Inventory"
table = doc.sheets[0].tables[0]
table.name = "Stock"
rows = [
    ["Item", "Count", "Received", "In stock"],
    ["Widget", 12, datetime(2024, 3, 15), True],
    ["Gadget", 3.5, datetime(2023, 12, 1, 14, 30), False],
]
for r, row in enumerate(rows):
    for c, value in enumerate(row):
        table.write(r, c, value)
doc.add_sheet("Notes", "Plan", num_rows=3, num_cols=2)
plan = doc.sheets[1].tables[0]
plan.write(0, 0, "Step")
plan.write(0, 1, "Owner")
plan.write(1, 0, "Design")
plan.write(1, 1, "Ana")
doc.save(sys.argv[1])
"#;

fn numbers_parser() -> Option<PathBuf> {
    let cache = std::env::var_os("ENGRAM_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache"));
    let dir = cache.join("python/numbers-parser");
    dir.join("numbers_parser").is_dir().then_some(dir)
}

/// A spreadsheet written by numbers-parser, or `None` (with a message) when it is not set up.
fn spreadsheet(dir: &Path) -> Option<Vec<u8>> {
    let Some(pylib) = numbers_parser() else {
        eprintln!("numbers-parser is not installed (make setup-test installs it): skipped");
        return None;
    };
    let path = dir.join("inventory.numbers");
    let output = Command::new("python3")
        .args(["-c", SPREADSHEET])
        .arg(&path)
        .env("PYTHONPATH", pylib)
        .output();
    match output {
        Ok(out) if out.status.success() => Some(std::fs::read(&path).unwrap()),
        Ok(out) => panic!(
            "numbers-parser failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => {
            eprintln!("python3 is not installed: skipped");
            None
        }
    }
}

fn block<'d>(doc: &'d Document, text: &str) -> &'d engram_parse::Block {
    doc.blocks
        .iter()
        .find(|b| b.text.contains(text))
        .unwrap_or_else(|| panic!("{text:?} missing from\n{}", doc.text()))
}

/// The ZIP with entry `name` cut to half its length (the rest copied as is).
fn with_truncated_entry(bytes: &[u8], name: &str) -> Vec<u8> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes)).unwrap();
    let mut out = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).unwrap();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        if entry.name() == name {
            data.truncate(data.len() / 2);
        }
        out.start_file(entry.name(), zip::write::SimpleFileOptions::default())
            .unwrap();
        out.write_all(&data).unwrap();
    }
    out.finish().unwrap().into_inner()
}

#[test]
fn numbers_parser_spreadsheets_by_sheet_with_header_rows() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bytes) = spreadsheet(dir.path()) else {
        return;
    };
    assert_eq!(
        detect(&bytes, "inventory.numbers", None),
        Ok(Format::Numbers)
    );
    // Without a telling name, the content says which application wrote it.
    assert_eq!(detect(&bytes, "upload", None), Ok(Format::Numbers));
    let doc = extract(&bytes, Format::Numbers, &Limits::default()).unwrap();

    let sheet = block(&doc, "## Inventory");
    assert_eq!(sheet.kind, BlockKind::Heading);
    assert_eq!(sheet.layout.sheet.as_deref(), Some("Inventory"));
    let stock = block(&doc, "| Widget |");
    assert_eq!(stock.kind, BlockKind::Table);
    assert_eq!(
        stock.text,
        "| Item | Count | Received | In stock |\n\
         | --- | --- | --- | --- |\n\
         | Widget | 12 | 2024-03-15 | TRUE |\n\
         | Gadget | 3.5 | 2023-12-01 14:30:00 | FALSE |"
    );
    assert_eq!(stock.layout.sheet.as_deref(), Some("Inventory"));
    assert_eq!(stock.layout.headings, ["Inventory", "Stock"]);
    assert_eq!(stock.layout.row_range, Some((2, 3)));

    let plan = block(&doc, "| Design |");
    assert_eq!(
        plan.text,
        "| Step | Owner |\n| --- | --- |\n| Design | Ana |"
    );
    assert_eq!(plan.layout.sheet.as_deref(), Some("Notes"));
    assert_eq!(plan.layout.row_range, Some((2, 2)));
    let sheets: Vec<&str> = doc
        .blocks
        .iter()
        .filter(|b| b.kind == BlockKind::Heading && b.text.starts_with("## "))
        .map(|b| b.text.as_str())
        .collect();
    assert_eq!(sheets, ["## Inventory", "## Notes"]);

    // A truncated file, and one whose main archive is cut short, fail cleanly.
    let half = &bytes[..bytes.len() / 2];
    assert!(matches!(
        extract(half, Format::Numbers, &Limits::default()),
        Err(ParseError::Corrupt(_))
    ));
    let cut = with_truncated_entry(&bytes, "Index/Document.iwa");
    assert!(matches!(
        extract(&cut, Format::Numbers, &Limits::default()),
        Err(ParseError::Corrupt(_))
    ));
    // Limits hold: what the archives decompress to is bounded by the document's budget.
    let small = Limits {
        max_bytes: bytes.len(),
        max_text_bytes: 1024,
        ..Limits::default()
    };
    assert!(matches!(
        extract(&bytes, Format::Numbers, &small),
        Err(ParseError::TooLarge {
            what: "decompressed iWork archive bytes",
            ..
        })
    ));
}

fn samples() -> Option<PathBuf> {
    match std::env::var_os("ENGRAM_IWORK_SAMPLES") {
        Some(dir) => Some(PathBuf::from(dir)),
        None => {
            eprintln!("ENGRAM_IWORK_SAMPLES is not set (a folder of Apple-made samples): skipped");
            None
        }
    }
}

fn read_sample(dir: &Path, name: &str, expected: Format) -> Document {
    let bytes = std::fs::read(dir.join(name)).unwrap();
    assert_eq!(detect(&bytes, name, None), Ok(expected), "{name}");
    assert_eq!(
        detect(&bytes, "upload", None),
        Ok(expected),
        "{name} by content"
    );
    extract(&bytes, expected, &Limits::default()).unwrap()
}

#[test]
fn apple_made_pages_and_keynote() {
    let Some(dir) = samples() else {
        return;
    };
    // Pages 2013+ (IWA): body text in order, the inline table where it is anchored, a text box.
    let pages = read_sample(&dir, "testPages2013.pages", Format::Pages);
    let text = pages.text();
    let order = [
        "Sample pages document",
        "Some plain text to parse.",
        "| Column one | Column two | Column three |\n| --- | --- | --- |\n| Cell one | Cell two | Cell three |",
        "| Cell seven | Cell eight | Cell nine |",
        "Both Pages 1.x and Keynote 2.x",
        "A second page....",
        "XML is at the heart of both iWork applications",
        "A text box with text.",
    ];
    let positions: Vec<usize> = order
        .iter()
        .map(|s| {
            text.find(s)
                .unwrap_or_else(|| panic!("{s:?} missing from\n{text}"))
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert_eq!(block(&pages, "| Cell one |").kind, BlockKind::Table);
    assert!(!text.contains('\u{FFFC}'));

    // Keynote 2013+ (IWA in a nested Index.zip): slides in order with their titles and text;
    // template slides ("Teks Judul") are left out.
    let deck = read_sample(&dir, "testKeynote2018.key", Format::Keynote);
    let headings: Vec<(&str, Option<u32>)> = deck
        .blocks
        .iter()
        .filter(|b| b.kind == BlockKind::Heading)
        .map(|b| (b.text.as_str(), b.layout.slide))
        .collect();
    assert_eq!(
        headings,
        [
            ("## Slide 1: Libreoffice 6.2", Some(1)),
            ("## Slide 2: Test running...", Some(2))
        ]
    );
    assert_eq!(block(&deck, "19 February 2019").layout.slide, Some(1));
    let body = block(&deck, "Windows 10 x86");
    assert_eq!(body.layout.slide, Some(2));
    assert_eq!(body.layout.headings, ["Slide 2: Test running..."]);
    assert!(!deck.text().contains("Teks Judul"));

    // iWork '09 (XML): a Numbers table with its header row, a table on a Keynote slide.
    let sheet = read_sample(&dir, "tableHeaders.numbers", Format::Numbers);
    let table = block(
        &sheet,
        "| header1 | header2 | header3 | header4 | header5 |",
    );
    assert_eq!(table.layout.sheet.as_deref(), Some("Sheet 1"));
    assert!(table.text.contains("| row3 |"), "{}", table.text);
    let slides = read_sample(&dir, "testTables.key", Format::Keynote);
    let table = block(&slides, "row 1");
    assert_eq!(
        (table.kind, table.layout.slide),
        (BlockKind::Table, Some(1))
    );
    assert!(table.text.contains("row 2") && table.text.contains("row 3"));

    // A password-protected Pages '09 document.
    let locked = std::fs::read(dir.join("testPagesPwdProtected.pages")).unwrap();
    assert_eq!(
        detect(&locked, "testPagesPwdProtected.pages", None),
        Ok(Format::Pages)
    );
    assert_eq!(
        extract(&locked, Format::Pages, &Limits::default()),
        Err(ParseError::Corrupt(
            "the document is password-protected".into()
        ))
    );
}
