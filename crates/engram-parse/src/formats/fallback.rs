//! The plain reading of a format, for a file its own reader failed on: the character data of a
//! package's XML parts (Word, PowerPoint, Excel, OpenDocument, EPUB), or the text of an HTML
//! page, paragraph by paragraph. It keeps no structure but loses no words, so a reader's bug
//! never costs a user the file: each block says `layout.reader = "plain"`, and the item is
//! indexed rather than errored. Files refused for their size, hostile shape or a password are
//! refused here too (the same bounded ZIP reader and limits).

use html5gum::{Token, Tokenizer};
use quick_xml::events::Event;
use quick_xml::Reader;

use crate::document::{BlockKind, Builder, Layout};
use crate::formats::ooxml::{local, reference_text, text_of};
use crate::formats::zipped::Container;
use crate::{Document, Format, Limits, ParseError};

/// What the blocks of a plain reading say in `layout.reader`.
pub(crate) const PLAIN: &str = "plain";

/// Whether `format` has a plain reading to fall back on.
pub(crate) fn covers(format: Format) -> bool {
    matches!(
        format,
        Format::Docx
            | Format::Pptx
            | Format::Xlsx
            | Format::Odt
            | Format::Odp
            | Format::Ods
            | Format::Epub
            | Format::Html
    )
}

/// The plain reading of `bytes` (one of the formats [`covers`] accepts).
pub(crate) fn extract(
    bytes: &[u8],
    format: Format,
    limits: &Limits,
) -> Result<Document, ParseError> {
    let mut lines = Vec::new();
    if format == Format::Html {
        let text = crate::text(bytes)?;
        html_lines(&text, &mut lines);
    } else {
        let mut zip = Container::open(bytes, limits)?;
        let mut parts: Vec<String> = zip.names().into_iter().filter(|n| wanted(n)).collect();
        parts.sort_by_cached_key(|name| (rank(name), natural(name)));
        for part in parts {
            limits.interrupt.check()?;
            if let Some(xml) = zip.text(&part)? {
                xml_lines(&xml, &mut lines);
            }
        }
    }
    let mut out = Builder::new(limits);
    let layout = Layout {
        reader: Some(PLAIN.to_owned()),
        ..Layout::default()
    };
    for line in lines {
        out.push(BlockKind::Paragraph, &line, layout.clone())?;
    }
    out.finish()
}

/// XML parts that hold a document's words (not its styles, themes, settings or relationships).
fn wanted(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    let text_part = [".xml", ".xhtml", ".html", ".htm"]
        .iter()
        .any(|ext| lower.ends_with(ext));
    const SKIP: [&str; 23] = [
        "[content_types]",
        ".rels",
        "theme",
        "fonttable",
        "settings",
        "websettings",
        "styles",
        "numbering",
        "customxml",
        "presprops",
        "viewprops",
        "tablestyles",
        "slidemasters",
        "slidelayouts",
        "notesmasters",
        "handoutmasters",
        "manifest.xml",
        "meta.xml",
        "docprops/app.xml",
        "docprops/custom.xml",
        "calcchain",
        "charts/style",
        "charts/colors",
    ];
    // Of the package's properties only the core ones (title, author…) are words of it.
    let properties = lower.starts_with("docprops/") && lower != "docprops/core.xml";
    text_part && !properties && !SKIP.iter().any(|s| lower.contains(s))
}

/// The main content first (the body, the slides, the shared strings and sheets), then the rest.
fn rank(name: &str) -> u8 {
    const ORDER: [&str; 8] = [
        "word/document.xml",
        "ppt/slides/",
        "xl/sharedstrings.xml",
        "xl/worksheets/",
        "content.xml",
        "word/",
        "ppt/notesslides/",
        "docprops/core.xml",
    ];
    let lower = name.to_ascii_lowercase();
    ORDER
        .iter()
        .position(|p| lower.starts_with(p) || lower == *p)
        .map_or(ORDER.len() as u8, |i| i as u8)
}

/// A name with its numbers compared as numbers (`slide2` before `slide10`).
fn natural(name: &str) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut digits = String::new();
    for c in name.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            if !digits.is_empty() {
                out.push((
                    std::mem::take(&mut text),
                    digits.parse().unwrap_or(u64::MAX),
                ));
                digits.clear();
            }
            text.push(c);
        }
    }
    out.push((text, digits.parse().unwrap_or(0)));
    out
}

/// Elements whose end ends a line (paragraphs, headings, rows, list items, shared strings).
fn breaks_line(name: &[u8]) -> bool {
    matches!(
        name,
        b"p" | b"h"
            | b"h1"
            | b"h2"
            | b"h3"
            | b"h4"
            | b"h5"
            | b"h6"
            | b"li"
            | b"tr"
            | b"row"
            | b"table-row"
            | b"si"
            | b"div"
            | b"title"
            | b"br"
            | b"list-item"
            | b"section"
            | b"dt"
            | b"dd"
            | b"blockquote"
            | b"article"
            | b"header"
            | b"footer"
            | b"main"
            | b"nav"
            | b"aside"
            | b"figure"
            | b"figcaption"
            | b"address"
            | b"summary"
            | b"details"
            | b"caption"
            | b"option"
            | b"legend"
    )
}

/// Elements within a word: runs and their text (Word splits words across runs), spans, links.
/// The end of any other element separates words.
fn inline(name: &[u8]) -> bool {
    matches!(
        name,
        b"t" | b"r"
            | b"span"
            | b"a"
            | b"hyperlink"
            | b"ins"
            | b"smartTag"
            | b"fldSimple"
            | b"rPr"
            | b"b"
            | b"i"
            | b"u"
            | b"em"
            | b"strong"
            | b"sub"
            | b"sup"
    )
}

fn end_line(line: &mut String, lines: &mut Vec<String>) {
    let collapsed = line.split_whitespace().collect::<Vec<_>>().join(" ");
    if !collapsed.is_empty() {
        lines.push(collapsed);
    }
    line.clear();
}

/// Elements whose text is bookkeeping, not words of the document: formulas and number formats
/// (charts, sheets; an equation's `m:f` is a fraction, and kept), revision counters, extension
/// lists, table style ids.
fn bookkeeping(qualified: &[u8]) -> bool {
    match local(qualified) {
        b"f" => !qualified.starts_with(b"m:"),
        name => matches!(
            name,
            b"formatCode" | b"revision" | b"extLst" | b"tableStyleId" | b"lastPrinted"
        ),
    }
}

/// The character data of one XML part, a line per paragraph-like element. A malformed part
/// gives what was read before the fault.
pub(crate) fn xml_lines(xml: &str, lines: &mut Vec<String>) {
    let mut reader = Reader::from_str(xml);
    let mut line = String::new();
    let mut skipped = 0usize;
    // A sheet cell of type `s` holds an index into the shared strings, not a value.
    let mut string_cell = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e))
                if skipped > 0
                    || bookkeeping(e.name().as_ref())
                    || (string_cell && local(e.name().as_ref()) == b"v") =>
            {
                skipped += 1;
            }
            Ok(Event::Start(e)) if local(e.name().as_ref()) == b"c" => {
                string_cell = crate::formats::ooxml::attr(&e, b"t").as_deref() == Some("s");
            }
            Ok(Event::End(_)) if skipped > 0 => skipped -= 1,
            Ok(Event::Text(_) | Event::CData(_) | Event::GeneralRef(_)) if skipped > 0 => {}
            Ok(Event::Text(t)) => {
                // Indentation between elements of a pretty-printed part is not text: it
                // would split a word whose runs it separates.
                let text = text_of(&t);
                if !(text.contains('\n') && text.trim().is_empty()) {
                    line.push_str(&text);
                }
            }
            Ok(Event::CData(t)) => line.push_str(&String::from_utf8_lossy(&t)),
            Ok(Event::GeneralRef(r)) => line.push_str(&reference_text(&r)),
            Ok(Event::End(e)) => {
                let name = e.name();
                let name = local(name.as_ref());
                if breaks_line(name) {
                    end_line(&mut line, lines);
                } else if !inline(name) {
                    line.push(' ');
                }
            }
            Ok(Event::Empty(e)) => {
                let name = e.name();
                let name = local(name.as_ref());
                if matches!(name, b"br" | b"cr") {
                    end_line(&mut line, lines);
                } else if matches!(name, b"tab" | b"s") {
                    line.push(' ');
                }
            }
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    end_line(&mut line, lines);
}

/// The text of an HTML page outside scripts and styles, a line per block element; image alt
/// text kept.
fn html_lines(html: &str, lines: &mut Vec<String>) {
    let mut line = String::new();
    let mut hidden = 0usize;
    for token in Tokenizer::new(html).flatten() {
        match token {
            Token::StartTag(tag) => {
                let name = tag.name.as_slice().to_ascii_lowercase();
                if matches!(name.as_slice(), b"script" | b"style" | b"template")
                    && !tag.self_closing
                {
                    hidden += 1;
                }
                if name.as_slice() == b"img" {
                    if let Some(alt) = tag.attributes.get(b"alt".as_slice()) {
                        line.push(' ');
                        line.push_str(&String::from_utf8_lossy(alt));
                        line.push(' ');
                    }
                }
                if breaks_line(&name) || matches!(name.as_slice(), b"td" | b"th") {
                    line.push(' ');
                }
            }
            Token::EndTag(tag) => {
                let name = tag.name.as_slice().to_ascii_lowercase();
                if matches!(name.as_slice(), b"script" | b"style" | b"template") {
                    hidden = hidden.saturating_sub(1);
                } else if breaks_line(&name)
                    || matches!(name.as_slice(), b"pre" | b"table" | b"ul" | b"ol")
                {
                    end_line(&mut line, lines);
                } else if matches!(name.as_slice(), b"td" | b"th") {
                    line.push(' ');
                }
            }
            Token::String(text) if hidden == 0 => line.push_str(&String::from_utf8_lossy(&text)),
            _ => {}
        }
    }
    end_line(&mut line, lines);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xml_parts_give_their_words_a_line_per_paragraph() {
        let mut lines = Vec::new();
        xml_lines(
            r#"<w:document xmlns:w="w"><w:body><w:p><w:r><w:t>Light</w:t></w:r><w:r><w:t>house &amp; lamp</w:t></w:r></w:p>
               <w:tbl><w:tr><w:tc><w:p><w:r><w:t>North</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>1200</w:t></w:r></w:p></w:tc></w:tr></w:tbl>
               <w:p><w:r><w:t>broken"#,
            &mut lines,
        );
        assert_eq!(lines, ["Lighthouse & lamp", "North", "1200", "broken"]);
        let mut lines = Vec::new();
        xml_lines(
            "<w:p xmlns:w=\"w\">\n  <w:r>\n    <w:t>Base Parag</w:t>\n  </w:r>\n  <w:bookmarkEnd/>\n  <w:r><w:t>raph.</w:t></w:r><w:r><w:t xml:space=\"preserve\"> </w:t></w:r><w:r><w:t>Next</w:t></w:r>\n</w:p>",
            &mut lines,
        );
        assert_eq!(lines, ["Base Paragraph. Next"], "indentation is not text");
    }

    #[test]
    fn html_gives_its_text_outside_scripts_with_alt_text() {
        let mut lines = Vec::new();
        html_lines(
            "<html><head><style>p{}</style><script>var x = 1;</script></head><body>\
             <section><a href=a><section><h2>Deep <a href=b>link</a></h2></section></a></section>\
             <table><tr><td><ul><li>one</li><li>two</li></ul></td><td><img alt='a chart of sales'></td></tr></table>\
             <pre><code>let y = 2;</code></pre></body></html>",
            &mut lines,
        );
        assert_eq!(
            lines,
            ["Deep link", "one", "two", "a chart of sales", "let y = 2;"]
        );
    }

    #[test]
    fn parts_are_read_body_first_in_natural_order() {
        let mut names = vec![
            "ppt/slides/slide10.xml",
            "docProps/core.xml",
            "ppt/slides/slide2.xml",
            "ppt/theme/theme1.xml",
            "ppt/notesSlides/notesSlide1.xml",
        ];
        names.retain(|n| wanted(n));
        names.sort_by_cached_key(|n| (rank(n), natural(n)));
        assert_eq!(
            names,
            [
                "ppt/slides/slide2.xml",
                "ppt/slides/slide10.xml",
                "ppt/notesSlides/notesSlide1.xml",
                "docProps/core.xml"
            ]
        );
    }
}
