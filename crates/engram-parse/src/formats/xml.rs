//! XML, read with quick-xml (a streaming reader: linear, no DTD and no entity expansion beyond
//! the five predefined ones, so "billion laughs" expands nothing).
//!
//! - RSS 2.0, RSS 1.0 (RDF) and Atom feeds: the feed's title as the top heading, each item or
//!   entry as a section (its title a heading, its date, link and HTML content as text), written
//!   as HTML and read by the HTML extractor so item bodies keep their structure.
//! - Any other XML: the text of each element, one line per element, in paragraphs under a
//!   heading naming the root element.

use std::fmt::Write;

use quick_xml::events::Event;
use quick_xml::Reader;

use crate::document::{BlockKind, Builder, Layout};
use crate::{Document, Limits, ParseError};

/// Deepest element nesting read; deeper input is `Corrupt` (the stack is only names, but a
/// bound keeps hostile input from growing it without limit).
const MAX_DEPTH: usize = 1_000;

pub(crate) fn extract(text: &str, limits: &Limits) -> Result<Document, ParseError> {
    let elements = elements(text)?;
    let root = elements
        .first()
        .map(|e| e.path[0].as_str())
        .unwrap_or_default();
    match root {
        "rss" | "feed" | "RDF" => super::html::extract(&feed_html(&elements), limits),
        _ => generic(&elements, root, limits),
    }
}

/// The text directly inside one element, with the names of the elements around it.
pub(crate) struct Element {
    /// Local names from the root down to this element.
    pub(crate) path: Vec<String>,
    pub(crate) text: String,
}

impl Element {
    pub(crate) fn name(&self) -> &str {
        self.path.last().map(String::as_str).unwrap_or_default()
    }

    pub(crate) fn parent(&self) -> &str {
        self.path
            .len()
            .checked_sub(2)
            .and_then(|i| self.path.get(i))
            .map(String::as_str)
            .unwrap_or_default()
    }
}

fn local(name: &[u8]) -> String {
    let name = String::from_utf8_lossy(name);
    name.rsplit(':').next().unwrap_or_default().to_owned()
}

/// Every element that holds text, in document order (an element's text pieces joined).
pub(crate) fn elements(text: &str) -> Result<Vec<Element>, ParseError> {
    let corrupt = |e: &dyn std::fmt::Display| ParseError::Corrupt(format!("invalid xml: {e}"));
    let mut reader = Reader::from_str(text);
    let mut path: Vec<String> = Vec::new();
    let mut out: Vec<Element> = Vec::new();
    // Whether the innermost open element already has an entry in `out`.
    let mut open_entry: Vec<Option<usize>> = Vec::new();
    loop {
        match reader.read_event().map_err(|e| corrupt(&e))? {
            Event::Start(start) => {
                if path.len() >= MAX_DEPTH {
                    return Err(ParseError::Corrupt(format!(
                        "xml nested deeper than {MAX_DEPTH} elements"
                    )));
                }
                path.push(local(start.local_name().as_ref()));
                open_entry.push(None);
            }
            Event::End(_) => {
                path.pop();
                open_entry.pop();
            }
            Event::Text(raw) => {
                let piece = raw.decode().map_err(|e| corrupt(&e))?;
                let piece = quick_xml::escape::unescape(&piece)
                    .map(|c| c.into_owned())
                    .unwrap_or_else(|_| piece.into_owned());
                push_text(&mut out, &path, &mut open_entry, &piece);
            }
            Event::CData(raw) => {
                let piece = String::from_utf8_lossy(&raw).into_owned();
                push_text(&mut out, &path, &mut open_entry, &piece);
            }
            Event::GeneralRef(reference) => {
                // Only the predefined and numeric references; anything a DTD defines is dropped.
                let name = String::from_utf8_lossy(&reference).into_owned();
                let resolved = quick_xml::escape::unescape(&format!("&{name};"))
                    .map(|c| c.into_owned())
                    .unwrap_or_default();
                push_text(&mut out, &path, &mut open_entry, &resolved);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

fn push_text(out: &mut Vec<Element>, path: &[String], open: &mut [Option<usize>], piece: &str) {
    if path.is_empty() {
        return;
    }
    match open.last_mut() {
        Some(Some(index)) => {
            if let Some(element) = out.get_mut(*index) {
                element.text.push_str(piece);
            }
        }
        // Whitespace between elements is not text.
        Some(slot) if !piece.trim().is_empty() => {
            *slot = Some(out.len());
            out.push(Element {
                path: path.to_vec(),
                text: piece.to_owned(),
            });
        }
        _ => {}
    }
}

fn escape(text: &str) -> String {
    quick_xml::escape::escape(text).into_owned()
}

/// A feed as an HTML page: the channel title as `h1`, each item as a section.
fn feed_html(elements: &[Element]) -> String {
    let is_item = |e: &Element| e.path.iter().any(|p| p == "item" || p == "entry");
    let mut html = String::from("<html><body>");
    if let Some(title) = elements.iter().find(|e| !is_item(e) && e.name() == "title") {
        let _ = write!(html, "<h1>{}</h1>", escape(title.text.trim()));
    }
    if let Some(about) = elements
        .iter()
        .find(|e| !is_item(e) && matches!(e.name(), "description" | "subtitle"))
    {
        let _ = write!(html, "<p>{}</p>", escape(about.text.trim()));
    }
    for element in elements.iter().filter(|e| is_item(e)) {
        let parent_is_item = matches!(element.parent(), "item" | "entry");
        match element.name() {
            "title" if parent_is_item => {
                let _ = write!(html, "<h2>{}</h2>", escape(element.text.trim()));
            }
            "pubDate" | "published" | "updated" | "date" if parent_is_item => {
                let _ = write!(html, "<p>Published: {}</p>", escape(element.text.trim()));
            }
            "creator" | "name" => {
                let _ = write!(html, "<p>By {}</p>", escape(element.text.trim()));
            }
            // Item bodies are HTML (escaped or in CDATA): kept as markup.
            "description" | "encoded" | "content" | "summary" => {
                let _ = write!(html, "<div>{}</div>", element.text);
            }
            _ => {}
        }
    }
    html.push_str("</body></html>");
    html
}

/// Any other XML: one line per element with text, in paragraphs of at most `block_bytes`.
fn generic(elements: &[Element], root: &str, limits: &Limits) -> Result<Document, ParseError> {
    let mut out = Builder::new(limits);
    let headings = vec![root.to_owned()];
    if !root.is_empty() {
        out.push(
            BlockKind::Heading,
            &format!("# {root}"),
            Layout::under(&headings),
        )?;
    }
    let mut paragraph = String::new();
    for element in elements {
        let line = element
            .text
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if !paragraph.is_empty() && paragraph.len() + line.len() > limits.block_bytes {
            out.push(BlockKind::Paragraph, &paragraph, Layout::under(&headings))?;
            paragraph.clear();
        }
        if !paragraph.is_empty() {
            paragraph.push('\n');
        }
        paragraph.push_str(&line);
    }
    out.push(BlockKind::Paragraph, &paragraph, Layout::under(&headings))?;
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_feeds_read_as_sections() {
        let sample = std::fs::read_to_string(crate::tests::sample("test_rss.xml")).unwrap();
        let doc = extract(&sample, &Limits::default()).unwrap();
        let text = doc.text();
        assert!(text.starts_with("# The Official Microsoft Blog"), "{text}");
        assert!(text.contains(
            "## Ignite 2024: Why nearly 70% of the Fortune 500 now use Microsoft 365 Copilot"
        ));
        assert!(text.contains(
            "In the case of AI, it is absolutely true that the industry is moving incredibly fast"
        ));
        assert!(!text.contains("<rss") && !text.contains("<p>"), "{text}");
    }

    #[test]
    fn atom_entries_and_generic_xml() {
        let atom = r#"<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><title>Notes</title>
            <entry><title>First &amp; best</title><updated>2024-01-01</updated>
            <content type="html">&lt;p&gt;Hello &lt;b&gt;world&lt;/b&gt;&lt;/p&gt;</content></entry></feed>"#;
        let text = extract(atom, &Limits::default()).unwrap().text();
        assert!(
            text.contains("# Notes") && text.contains("## First & best"),
            "{text}"
        );
        assert!(text.contains("Hello world"), "{text}");

        let plain =
            "<catalog><book id='1'><title>Dune</title><author>Herbert</author></book></catalog>";
        let doc = extract(plain, &Limits::default()).unwrap();
        assert_eq!(doc.text(), "# catalog\n\nDune\nHerbert");
    }

    #[test]
    fn entities_from_a_dtd_expand_to_nothing() {
        let laughs = r#"<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]><lolz>&lol2; kept</lolz>"#;
        let doc = extract(laughs, &Limits::default()).unwrap();
        assert_eq!(doc.text(), "# lolz\n\nkept");
        let deep = "<a>".repeat(5_000);
        assert!(matches!(
            extract(&deep, &Limits::default()),
            Err(ParseError::Corrupt(_))
        ));
        assert!(matches!(
            extract("<a><b></a>", &Limits::default()),
            Err(ParseError::Corrupt(_))
        ));
    }
}
