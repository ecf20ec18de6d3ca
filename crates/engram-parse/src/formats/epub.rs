//! EPUB: the package document (found through `META-INF/container.xml`) gives the title, authors
//! and description, then the chapters in spine order, each read by the HTML extractor.

use std::collections::HashMap;

use quick_xml::events::Event;
use quick_xml::Reader;

use crate::document::{BlockKind, Builder, Layout};
use crate::formats::ooxml::{attr, local};
use crate::formats::zipped::Container;
use crate::{Document, Limits, ParseError};

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<Document, ParseError> {
    let mut zip = Container::open(bytes, limits)?;
    let corrupt = |what: &str| ParseError::Corrupt(format!("EPUB: {what}"));
    let container = zip
        .text("META-INF/container.xml")?
        .ok_or_else(|| corrupt("no container.xml"))?;
    let mut opf_path = None;
    let mut reader = Reader::from_str(&container);
    loop {
        match reader.read_event().map_err(|e| corrupt(&e.to_string()))? {
            Event::Start(e) | Event::Empty(e) if local(e.name().as_ref()) == b"rootfile" => {
                opf_path = attr(&e, b"full-path");
                break;
            }
            Event::Eof => break,
            _ => {}
        }
    }
    let opf_path = opf_path.ok_or_else(|| corrupt("no rootfile"))?;
    let opf = zip
        .text(&opf_path)?
        .ok_or_else(|| corrupt("no package document"))?;
    let base = opf_path.rsplit_once('/').map_or("", |(dir, _)| dir);

    let (mut metadata, mut manifest, mut spine) = (Vec::new(), HashMap::new(), Vec::new());
    let mut reader = Reader::from_str(&opf);
    let mut field: Option<&'static str> = None;
    loop {
        match reader.read_event().map_err(|e| corrupt(&e.to_string()))? {
            Event::Start(e) => {
                field = match local(e.name().as_ref()) {
                    b"title" => Some("Title"),
                    b"creator" => Some("Author"),
                    b"description" => Some("Description"),
                    b"publisher" => Some("Publisher"),
                    b"date" => Some("Date"),
                    _ => None,
                }
            }
            Event::Empty(e) => match local(e.name().as_ref()) {
                b"item" => {
                    if let (Some(id), Some(href)) = (attr(&e, b"id"), attr(&e, b"href")) {
                        manifest.insert(id, href);
                    }
                }
                b"itemref" => spine.extend(attr(&e, b"idref")),
                _ => {}
            },
            Event::Text(t) => {
                if let Some(label) = field {
                    let text = t.decode().map(|c| c.into_owned()).unwrap_or_default();
                    metadata.push((label, text.trim().to_owned()));
                }
            }
            Event::End(_) => field = None,
            Event::Eof => break,
            _ => {}
        }
    }
    let mut out = Builder::new(limits);
    let title = metadata
        .iter()
        .find(|(l, _)| *l == "Title")
        .map(|(_, t)| t.clone());
    let headings: Vec<String> = title.iter().cloned().collect();
    if let Some(title) = &title {
        out.push(
            BlockKind::Heading,
            &format!("# {title}"),
            Layout::under(&headings),
        )?;
    }
    let lines: Vec<String> = metadata
        .iter()
        .filter(|(l, _)| *l != "Title")
        .map(|(l, t)| format!("{l}: {t}"))
        .collect();
    out.push(
        BlockKind::Paragraph,
        &lines.join("\n"),
        Layout::under(&headings),
    )?;
    for id in spine {
        let Some(href) = manifest.get(&id) else {
            continue;
        };
        let path = if base.is_empty() {
            href.clone()
        } else {
            format!("{base}/{href}")
        };
        let Some(html) = zip.text(&path)? else {
            continue;
        };
        let Ok(chapter) = super::html::extract(&html, limits) else {
            continue;
        };
        for mut block in chapter.blocks {
            for (i, h) in headings.iter().enumerate() {
                block.layout.headings.insert(i, h.clone());
            }
            out.push(block.kind, &block.text, block.layout)?;
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn books_in_spine_order() {
        let bytes = std::fs::read(crate::tests::sample("test.epub")).unwrap();
        let text = extract(&bytes, &Limits::default()).unwrap().text();
        for s in [
            "Test Author",
            "A test EPUB document for MarkItDown testing",
            "Chapter 1: Test Content",
            "A bullet point",
            "Chapter 2: More Content",
            "This is a blockquote for testing",
        ] {
            assert!(text.contains(s), "{s} missing from {text}");
        }
        assert!(text.find("Chapter 1").unwrap() < text.find("Chapter 2").unwrap());
    }
}
