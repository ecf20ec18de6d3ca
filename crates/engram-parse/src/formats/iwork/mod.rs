//! Apple iWork: Pages documents, Numbers spreadsheets and Keynote presentations.
//!
//! - iWork 2013 and later keep their objects in IWA archives (`iwa`): protobuf messages in Snappy
//!   chunks, either as `Index/*.iwa` entries of the document's ZIP or inside an `Index.zip` entry
//!   (older bundles, possibly under a top folder such as `Presentation.key/`). The few archives
//!   engram needs are read field by field (`proto`): text storages with their paragraph styles
//!   (`text`), tables and their cell tiles (`tables`), and each application's document tree
//!   (`pages`, `numbers`, `keynote`). Which application wrote a file is read from its objects,
//!   not from its name.
//! - iWork '09 files are one XML document (`index.xml` for Pages and Numbers, `index.apxl` for
//!   Keynote, possibly gzip-compressed), read by `xml09`.
//!
//! Password-protected documents fail with a clear `Corrupt` reason.

mod drawables;
mod iwa;
mod keynote;
mod numbers;
mod pages;
mod proto;
mod tables;
mod text;
mod xml09;

use std::io::Read;

use crate::formats::zipped::Container;
use crate::{Document, Format, Limits, ParseError};
use iwa::{Budget, Objects};

/// Type of `TP.DocumentArchive`, the root of a Pages document.
const PAGES_DOCUMENT: u32 = 10000;
/// Type of the root of a Keynote (`KN.DocumentArchive`) or Numbers (`TN.DocumentArchive`)
/// document: the registries of the two applications overlap.
const DOCUMENT: u32 = 1;
/// `KN.ShowArchive` and `TN.SheetArchive` share a type too.
const SHOW_OR_SHEET: u32 = 2;

fn password_protected() -> ParseError {
    ParseError::Corrupt("the document is password-protected".into())
}

/// Entries that only a password-protected iWork bundle has (the password verifier and hint).
fn is_password_marker(name: &str) -> bool {
    let file = name.rsplit('/').next().unwrap_or(name);
    [".iwpv2", ".iwpv", ".iwph"].contains(&file)
}

/// Where a document's content is.
enum Index {
    /// `Index/*.iwa` entries under this prefix (empty, or a top folder with its `/`).
    Iwa(String),
    /// An `Index.zip` entry holding them.
    Nested(String),
    /// iWork '09: the XML document, gzip-compressed when the name ends with `.gz`.
    Xml(String),
}

fn locate(names: &[String]) -> Option<Index> {
    let iwa = names
        .iter()
        .filter(|n| n.ends_with(".iwa"))
        .find_map(|n| n.find("Index/").map(|i| n[..i].to_owned()))
        .filter(|prefix| prefix.is_empty() || prefix.ends_with('/'));
    if let Some(prefix) = iwa {
        return Some(Index::Iwa(prefix));
    }
    let file = |n: &String| n.rsplit('/').next().unwrap_or(n).to_owned();
    if let Some(name) = names.iter().find(|n| file(n) == "Index.zip") {
        return Some(Index::Nested(name.clone()));
    }
    const XML: &[&str] = &["index.xml", "index.apxl", "index.xml.gz", "index.apxl.gz"];
    let mut xml: Vec<&String> = names
        .iter()
        .filter(|n| XML.contains(&file(n).as_str()))
        .collect();
    xml.sort_by_key(|n| n.len());
    xml.first().map(|n| Index::Xml((*n).clone()))
}

/// Reads the `Index/*.iwa` entries under `prefix` (only `Index/Document.iwa` when `main_only`)
/// into one object table.
fn load(
    zip: &mut Container<'_>,
    prefix: &str,
    limits: &Limits,
    main_only: bool,
) -> Result<Objects, ParseError> {
    let mut names: Vec<String> = zip
        .names()
        .into_iter()
        .filter(|n| {
            n.strip_prefix(prefix).is_some_and(|n| {
                n.starts_with("Index/")
                    && (n == "Index/Document.iwa" || (!main_only && n.ends_with(".iwa")))
            })
        })
        .collect();
    // The main document first: its objects win over copies elsewhere.
    names.sort_by_key(|n| (!n.ends_with("/Document.iwa"), n.clone()));
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        if let Some(bytes) = zip.read(&name)? {
            files.push((name, bytes));
        }
    }
    let limit = limits.max_text_bytes.max(limits.max_bytes);
    let mut budget = Budget::within(zip.budget(), limit);
    let mut objects = Objects::default();
    for (name, bytes) in files {
        match objects.add_file(&name, &bytes, &mut budget) {
            Ok(()) => {}
            // Only the main archive is required: Numbers writes some others in other codecs
            // (LZFSE), and the text is rarely there.
            Err(ParseError::Corrupt(_)) if !name.ends_with("/Document.iwa") => {}
            Err(e) => return Err(e),
        }
    }
    if objects.is_empty() {
        return Err(ParseError::Corrupt(
            "an iWork document without objects".into(),
        ));
    }
    Ok(objects)
}

/// The application that wrote a document, from its objects.
fn app_of(objects: &Objects) -> Option<Format> {
    if !objects.ids_of(&[PAGES_DOCUMENT]).is_empty() {
        return Some(Format::Pages);
    }
    for id in objects.ids_of(&[DOCUMENT]) {
        let Some(document) = objects.typed(id, &[DOCUMENT]) else {
            continue;
        };
        // KN.DocumentArchive {2: show}; TN.DocumentArchive {1: repeated sheets}.
        let show = document
            .reference(2)
            .and_then(|s| objects.typed(s, &[SHOW_OR_SHEET]));
        if show.is_some_and(|show| show.message(3).is_some()) {
            return Some(Format::Keynote);
        }
        if document.references(1).next().is_some() {
            return Some(Format::Numbers);
        }
    }
    None
}

/// What an iWork file holds.
enum Content {
    /// The objects of an iWork 2013+ document.
    Iwa(Objects),
    /// The XML of an iWork '09 one (the entry's name, its bytes).
    Xml(String, Vec<u8>),
}

/// Opens an iWork file: its IWA objects (only the main archive's when `main_only`), or its XML.
fn open(bytes: &[u8], limits: &Limits, main_only: bool) -> Result<Content, ParseError> {
    let mut zip = Container::open(bytes, limits)?;
    let names = zip.names();
    // iWork 2013+ keeps a password verifier beside the encrypted archives; iWork '09 marks the
    // entries it encrypts with an `iwpv` extra field (and its own compression method).
    let marked = |zip: &mut Container<'_>, name: &String| {
        zip.extra_field(name)
            .is_some_and(|extra| memchr::memmem::find(&extra, b"iwpv").is_some())
    };
    if names.iter().any(|n| is_password_marker(n)) || names.iter().any(|n| marked(&mut zip, n)) {
        return Err(password_protected());
    }
    match locate(&names) {
        Some(Index::Iwa(prefix)) => Ok(Content::Iwa(load(&mut zip, &prefix, limits, main_only)?)),
        Some(Index::Nested(name)) => {
            let inner = zip
                .read(&name)?
                .ok_or_else(|| ParseError::Corrupt(format!("unreadable {name}")))?;
            let mut nested = zip.nested(&inner)?;
            let names = nested.names();
            if names.iter().any(|n| is_password_marker(n)) {
                return Err(password_protected());
            }
            match locate(&names) {
                Some(Index::Iwa(prefix)) => {
                    Ok(Content::Iwa(load(&mut nested, &prefix, limits, main_only)?))
                }
                _ => Err(ParseError::Corrupt(format!("{name} holds no IWA archives"))),
            }
        }
        Some(Index::Xml(name)) => {
            let data = zip
                .read(&name)?
                .ok_or_else(|| ParseError::Corrupt(format!("unreadable {name}")))?;
            let xml = if name.ends_with(".gz") {
                gunzip(&data, zip.budget())?
            } else {
                data
            };
            Ok(Content::Xml(name, xml))
        }
        None => Err(ParseError::Corrupt(
            "an iWork file without Index/*.iwa, Index.zip or index.xml".into(),
        )),
    }
}

/// Inflates a gzip-compressed entry, at most `budget` bytes.
fn gunzip(data: &[u8], budget: usize) -> Result<Vec<u8>, ParseError> {
    let mut out = Vec::new();
    let cap = u64::try_from(budget).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::GzDecoder::new(data)
        .take(cap)
        .read_to_end(&mut out)
        .map_err(|e| ParseError::Corrupt(format!("bad gzip stream: {e}")))?;
    if out.len() > budget {
        return Err(ParseError::TooLarge {
            what: "inflated zip bytes",
            limit: budget,
        });
    }
    Ok(out)
}

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<Document, ParseError> {
    match open(bytes, limits, false)? {
        Content::Iwa(objects) => match app_of(&objects) {
            Some(Format::Pages) => pages::extract(&objects, limits),
            Some(Format::Keynote) => keynote::extract(&objects, limits),
            Some(_) => numbers::extract(&objects, limits),
            None => Err(ParseError::Corrupt(
                "an iWork document without its document object".into(),
            )),
        },
        Content::Xml(name, xml) => xml09::extract(&name, &xml, limits),
    }
}

/// The application of an iWork file whose name did not say, read from its main archive or the
/// root of its XML (for `detect`); `None` when it cannot be told.
pub(crate) fn sniff(bytes: &[u8]) -> Option<Format> {
    match open(bytes, &Limits::default(), true).ok()? {
        Content::Iwa(objects) => app_of(&objects),
        Content::Xml(name, xml) => xml09::app_of(&name, &xml),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::iwa::tests::{iwa, object};
    use super::proto::tests::{put_bytes, put_uint};
    use super::*;
    use crate::BlockKind;

    /// A message from (field, value) pairs: numbers as varints, the rest as bytes.
    enum F<'a> {
        U(u32, u64),
        B(u32, &'a [u8]),
        R(u32, u64),
    }

    fn message(fields: &[F<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        for field in fields {
            match *field {
                F::U(n, v) => put_uint(&mut out, n, v),
                F::B(n, b) => put_bytes(&mut out, n, b),
                F::R(n, id) => put_bytes(&mut out, n, &message(&[F::U(1, id)])),
            }
        }
        out
    }

    /// An attribute table entry: (character index, object).
    fn entry(index: u64, object: Option<u64>) -> Vec<u8> {
        let mut fields = vec![F::U(1, index)];
        fields.extend(object.map(|o| F::R(2, o)));
        message(&fields)
    }

    fn table(entries: &[Vec<u8>]) -> Vec<u8> {
        let fields: Vec<F<'_>> = entries.iter().map(|e| F::B(1, e)).collect();
        message(&fields)
    }

    /// A document ZIP holding `Index/Document.iwa` with these objects, compressed by snap.
    fn document(objects: &[(u64, u32, Vec<u8>)]) -> Vec<u8> {
        let stream: Vec<u8> = objects
            .iter()
            .flat_map(|(id, kind, payload)| object(*id, *kind, payload))
            .collect();
        let mut buffer = std::io::Cursor::new(Vec::new());
        let mut zip = zip::ZipWriter::new(&mut buffer);
        zip.start_file(
            "Index/Document.iwa",
            zip::write::SimpleFileOptions::default(),
        )
        .unwrap();
        zip.write_all(&iwa(&stream, 1 << 16)).unwrap();
        zip.finish().unwrap();
        buffer.into_inner()
    }

    fn style(name: Option<&str>, parent: Option<u64>) -> Vec<u8> {
        let mut base = Vec::new();
        base.extend(name.map(|n| F::B(1, n.as_bytes())));
        base.extend(parent.map(|p| F::R(3, p)));
        message(&[F::B(1, &message(&base))])
    }

    #[test]
    fn pages_headings_from_styles_and_cycles_end() {
        let text = "Plan\nIntro text\u{FFFC}\nDetails\nLoop";
        let styles = table(&[
            entry(0, Some(20)),
            entry(5, None),
            entry(17, Some(21)),
            entry(25, Some(23)),
        ]);
        let attachments = table(&[entry(15, Some(30))]);
        let body = message(&[
            F::U(1, 0),
            F::B(3, text.as_bytes()),
            F::B(5, &styles),
            F::B(9, &attachments),
        ]);
        let bytes = document(&[
            (1, PAGES_DOCUMENT, message(&[F::R(4, 10)])),
            (10, 2001, body),
            (20, 2022, style(Some("Heading"), None)),
            (21, 2022, style(None, Some(22))),
            (22, 2022, style(Some("Heading 2"), None)),
            (23, 2022, style(None, Some(23))),
            (30, 2003, message(&[F::R(1, 40)])),
            (40, 3008, message(&[F::R(2, 40), F::R(2, 30), F::R(2, 50)])),
            (50, 2011, message(&[F::R(4, 60)])),
            (60, 2001, message(&[F::B(3, b"Boxed text")])),
        ]);
        assert_eq!(sniff(&bytes), Some(Format::Pages));
        let doc = extract(&bytes, &Limits::default()).unwrap();
        let blocks: Vec<(BlockKind, &str, Vec<String>)> = doc
            .blocks
            .iter()
            .map(|b| (b.kind, b.text.as_str(), b.layout.headings.clone()))
            .collect();
        let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            blocks,
            [
                (BlockKind::Heading, "# Plan", path(&["Plan"])),
                (BlockKind::Paragraph, "Intro text", path(&["Plan"])),
                (BlockKind::Paragraph, "Boxed text", path(&["Plan"])),
                (BlockKind::Heading, "## Details", path(&["Plan", "Details"])),
                (BlockKind::Paragraph, "Loop", path(&["Plan", "Details"])),
            ]
        );
    }

    #[test]
    fn keynote_slide_trees_with_cycles_end() {
        // An older slide tree: a root node whose children hold the slides, with cycles back.
        let tree = message(&[F::R(1, 3)]);
        let title = message(&[F::B(1, &message(&[F::R(4, 7)])), F::U(2, 2)]);
        let bytes = document(&[
            (1, DOCUMENT, message(&[F::R(2, 2)])),
            (2, SHOW_OR_SHEET, message(&[F::B(3, &tree)])),
            (3, 4, message(&[F::R(1, 4), F::R(1, 3)])),
            (4, 4, message(&[F::R(2, 5), F::R(1, 3)])),
            (5, 5, message(&[F::R(5, 6), F::R(27, 8)])),
            (6, 7, title),
            (7, 2001, message(&[F::B(3, b"Hello deck")])),
            (8, 15, message(&[F::R(1, 9)])),
            (9, 2001, message(&[F::B(3, b"Speak slowly")])),
        ]);
        assert_eq!(sniff(&bytes), Some(Format::Keynote));
        let doc = extract(&bytes, &Limits::default()).unwrap();
        let texts: Vec<(&str, Option<u32>)> = doc
            .blocks
            .iter()
            .map(|b| (b.text.as_str(), b.layout.slide))
            .collect();
        assert_eq!(
            texts,
            [
                ("## Slide 1: Hello deck", Some(1)),
                ("Notes: Speak slowly", Some(1))
            ]
        );
    }

    #[test]
    fn snappy_bombs_stop_at_the_budget() {
        let zeros = vec![0u8; 8 << 20];
        let bytes = document(&[(1, PAGES_DOCUMENT, zeros)]);
        assert!(bytes.len() < 1 << 20, "{} bytes", bytes.len());
        let limits = Limits {
            max_bytes: 1 << 20,
            max_text_bytes: 1 << 20,
            ..Limits::default()
        };
        assert!(matches!(
            extract(&bytes, &limits),
            Err(ParseError::TooLarge { .. })
        ));
        // Not an iWork file at all.
        let mut buffer = std::io::Cursor::new(Vec::new());
        let mut zip = zip::ZipWriter::new(&mut buffer);
        zip.start_file("notes.txt", zip::write::SimpleFileOptions::default())
            .unwrap();
        zip.write_all(b"hello").unwrap();
        zip.finish().unwrap();
        assert!(matches!(
            extract(&buffer.into_inner(), &Limits::default()),
            Err(ParseError::Corrupt(_))
        ));
    }
}
