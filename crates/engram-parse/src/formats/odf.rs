//! OpenDocument text (`.odt`) and presentations (`.odp`) from their `content.xml` (spreadsheets
//! go through calamine): headings by outline level with their path, paragraphs, list items,
//! tables as Markdown tables; in presentations one section per `draw:page`, numbered in
//! `layout.slide`.

use quick_xml::events::Event;
use quick_xml::Reader;

use crate::document::{BlockKind, Builder, Layout};
use crate::formats::ooxml::{attr, local};
use crate::formats::table;
use crate::formats::zipped::Container;
use crate::{Document, Limits, ParseError};

/// "Heading_20_2" / "Heading 2" → 2, "Title" → 1.
fn style_level(style: &str) -> Option<usize> {
    let name = style.replace("_20_", " ").to_ascii_lowercase();
    if name == "title" {
        return Some(1);
    }
    let level: usize = name.strip_prefix("heading ")?.trim().parse().ok()?;
    (1..=9).contains(&level).then_some(level)
}

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<Document, ParseError> {
    let mut zip = Container::open(bytes, limits)?;
    let xml = zip
        .text("content.xml")?
        .ok_or_else(|| ParseError::Corrupt("an OpenDocument file without content.xml".into()))?;
    read_content(&xml, &mut zip, limits, true)
}

/// An object embedded in the package (`draw:object xlink:href="./Object 1"`: a spreadsheet, a
/// chart and its data table, a text frame) read as a document of its own; objects inside it
/// are not followed. `None` when the package has no such object.
fn embedded(
    zip: &mut Container<'_>,
    href: &str,
    limits: &Limits,
) -> Result<Option<Document>, ParseError> {
    let folder = href.trim_start_matches("./").trim_end_matches('/');
    if folder.is_empty() || folder.contains("..") || folder.contains(':') {
        return Ok(None);
    }
    let Some(xml) = zip.text(&format!("{folder}/content.xml"))? else {
        return Ok(None);
    };
    if let Some(formula) = formula_text(&xml) {
        let mut out = Builder::new(limits);
        out.push(BlockKind::Paragraph, &formula, Layout::default())?;
        return Ok(out.finish().ok());
    }
    match read_content(&xml, zip, limits, false) {
        Ok(document) => Ok(Some(document)),
        // An object past the budget is left out; the document around it still reads.
        Err(ParseError::NoText | ParseError::Corrupt(_) | ParseError::TooLarge { .. }) => Ok(None),
        Err(err) => Err(err),
    }
}

/// A formula object's text (its `content.xml` is MathML): each token (identifier, number,
/// operator, text) a word of its own, the editor's own annotation (StarMath) left out. `None`
/// when the part is not MathML or holds no token.
fn formula_text(xml: &str) -> Option<String> {
    let mut reader = Reader::from_str(xml);
    let (mut math, mut token, mut annotation) = (false, false, 0usize);
    let mut words: Vec<String> = Vec::new();
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) => match local(e.name().as_ref()) {
                b"math" => math = true,
                _ if !math => return None,
                b"annotation" | b"annotation-xml" => annotation += 1,
                name if crate::formats::ooxml::is_mathml_token(name) => token = true,
                _ => {}
            },
            Event::Empty(e) if !math && local(e.name().as_ref()) != b"math" => return None,
            Event::End(e) => match local(e.name().as_ref()) {
                b"annotation" | b"annotation-xml" => annotation = annotation.saturating_sub(1),
                name if crate::formats::ooxml::is_mathml_token(name) => token = false,
                _ => {}
            },
            Event::Text(t) if token && annotation == 0 => {
                let text = t.decode().ok()?;
                if !text.trim().is_empty() {
                    words.push(text.trim().to_owned());
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    (!words.is_empty()).then(|| words.join(" "))
}

/// The blocks of one `content.xml`; `objects` says whether embedded objects are read in place.
fn read_content(
    xml: &str,
    zip: &mut Container<'_>,
    limits: &Limits,
    objects: bool,
) -> Result<Document, ParseError> {
    let corrupt = |e: quick_xml::Error| ParseError::Corrupt(format!("content.xml: {e}"));
    let mut reader = Reader::from_str(xml);
    let mut out = Builder::new(limits);
    let mut headings: Vec<(usize, String)> = Vec::new();
    let mut slide: Option<(u32, String)> = None;
    let mut slides = 0u32;
    // Open paragraph-like elements, innermost last: (level if a heading, list item?, text). A
    // paragraph inside another (a note's body, a caption in a frame) is written after the
    // paragraph holding it, which goes on after it.
    // Each open one notes where its own inner paragraphs go in `inner`, so that they keep
    // document order however deep they nest.
    let mut paras: Vec<(Option<usize>, bool, String, usize)> = Vec::new();
    let mut inner: Vec<(Option<usize>, bool, String)> = Vec::new();
    let mut read_objects: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut list_depth = 0usize;
    let mut tables = table::Tables::default();
    // Heading levels of automatic paragraph styles (a heading written as `text:p` whose style
    // derives from "Heading N" or "Title").
    let mut style_levels: std::collections::HashMap<String, usize> =
        std::collections::HashMap::new();
    let layout = |headings: &[(usize, String)], slide: &Option<(u32, String)>| {
        let mut path: Vec<String> = slide.iter().map(|(_, name)| name.clone()).collect();
        path.extend(headings.iter().map(|(_, t)| t.clone()));
        Layout {
            slide: slide.as_ref().map(|(n, _)| *n),
            headings: path,
            ..Layout::default()
        }
    };
    loop {
        match reader.read_event().map_err(corrupt)? {
            Event::Start(e) | Event::Empty(e) if local(e.name().as_ref()) == b"style" => {
                let level = attr(&e, b"default-outline-level")
                    .and_then(|l| l.parse().ok())
                    .or_else(|| {
                        attr(&e, b"parent-style-name")
                            .as_deref()
                            .and_then(style_level)
                    });
                if let (Some(name), Some(level)) = (attr(&e, b"name"), level) {
                    style_levels.insert(name, level);
                }
            }
            Event::Start(e) | Event::Empty(e)
                if objects && local(e.name().as_ref()) == b"object" =>
            {
                // Each object once, however many frames show it.
                let Some(document) = attr(&e, b"href")
                    .filter(|href| read_objects.insert(href.clone()))
                    .map(|href| embedded(zip, &href, limits))
                    .transpose()?
                    .flatten()
                else {
                    continue;
                };
                for block in document.blocks {
                    let mut at = layout(&headings, &slide);
                    at.headings.extend(block.layout.headings);
                    at.row_range = block.layout.row_range;
                    out.push(block.kind, &block.text, at)?;
                }
            }
            Event::Start(e) => match local(e.name().as_ref()) {
                b"h" => {
                    let level = attr(&e, b"outline-level")
                        .and_then(|l| l.parse().ok())
                        .unwrap_or(1usize)
                        .clamp(1, 9);
                    paras.push((Some(level), false, String::new(), inner.len()));
                }
                b"p" => {
                    let level = attr(&e, b"style-name")
                        .and_then(|s| style_levels.get(&s).copied().or_else(|| style_level(&s)));
                    paras.push((level, list_depth > 0, String::new(), inner.len()));
                }
                // A note's mark ("1", "i") where it is cited, apart from the words beside it.
                b"note-citation" => {
                    if let Some((_, _, text, _)) = paras.last_mut() {
                        text.push('[');
                    }
                }
                b"list-item" => list_depth += 1,
                b"page" => {
                    slides += 1;
                    let name = attr(&e, b"name").unwrap_or_default();
                    let title = format!("Slide {slides}");
                    let title = if name.is_empty() || name.starts_with("page") {
                        title
                    } else {
                        format!("{title}: {name}")
                    };
                    slide = Some((slides, title.clone()));
                    headings.clear();
                    out.push(
                        BlockKind::Heading,
                        &format!("## {title}"),
                        layout(&headings, &slide),
                    )?;
                }
                b"table" => tables.open(),
                b"table-row" => tables.start_row(),
                b"table-cell" => tables.start_cell(),
                _ => {}
            },
            Event::Empty(e) => match local(e.name().as_ref()) {
                b"s" => {
                    if let Some((_, _, text, _)) = paras.last_mut() {
                        text.push(' ');
                    }
                }
                b"tab" => {
                    if let Some((_, _, text, _)) = paras.last_mut() {
                        text.push('\t');
                    }
                }
                b"line-break" => {
                    if let Some((_, _, text, _)) = paras.last_mut() {
                        text.push('\n');
                    }
                }
                b"table-cell" => {
                    tables.start_cell();
                    tables.end_cell();
                }
                _ => {}
            },
            Event::Text(t) => {
                if let Some((_, _, text, _)) = paras.last_mut() {
                    let raw = t.decode().map(|c| c.into_owned()).unwrap_or_default();
                    text.push_str(&raw);
                }
            }
            Event::GeneralRef(r) => {
                if let Some((_, _, text, _)) = paras.last_mut() {
                    let name = String::from_utf8_lossy(&r).into_owned();
                    text.push_str(
                        &quick_xml::escape::unescape(&format!("&{name};"))
                            .map(|c| c.into_owned())
                            .unwrap_or_default(),
                    );
                }
            }
            Event::End(e) => match local(e.name().as_ref()) {
                b"note-citation" => {
                    if let Some((_, _, text, _)) = paras.last_mut() {
                        text.push(']');
                    }
                }
                b"h" | b"p" => {
                    let Some((level, list, text, at)) = paras.pop() else {
                        continue;
                    };
                    if !paras.is_empty() {
                        inner.insert(at.min(inner.len()), (level, list, text));
                        continue;
                    }
                    let closed = (level, list, text);
                    for (level, list, text) in std::iter::once(closed).chain(inner.drain(..)) {
                        let text = text.trim().to_owned();
                        if text.is_empty() || tables.text(&text) {
                            continue;
                        } else if let Some(level) = level {
                            headings.retain(|(l, _)| *l < level);
                            headings.push((level, text.clone()));
                            let heading =
                                format!("{} {}", "#".repeat(level), text.replace('\n', " "));
                            out.push(BlockKind::Heading, &heading, layout(&headings, &slide))?;
                        } else if list {
                            out.push(
                                BlockKind::ListItem,
                                &format!("- {text}"),
                                layout(&headings, &slide),
                            )?;
                        } else {
                            out.push(BlockKind::Paragraph, &text, layout(&headings, &slide))?;
                        }
                    }
                }
                b"list-item" => list_depth = list_depth.saturating_sub(1),
                b"table-cell" => tables.end_cell(),
                b"table-row" => tables.end_row(),
                b"table" => {
                    if let Some(rows) = tables.close() {
                        table::write_rows(&mut out, &rows, layout(&headings, &slide), None)?;
                    }
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A formula embedded as an object (pandoc's `formula.odt`: the document is the formula
    /// alone) reads as its tokens, without the editor's StarMath annotation.
    #[test]
    fn a_formula_object_reads_as_its_tokens() {
        use std::io::Write as _;
        let options = zip::write::SimpleFileOptions::default();
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, body) in [
            ("mimetype", "application/vnd.oasis.opendocument.text"),
            (
                "content.xml",
                r#"<office:document-content xmlns:office="o" xmlns:text="t" xmlns:draw="d" xmlns:xlink="x"><office:body><office:text><text:p><draw:frame><draw:object xlink:href="./Object 1"/></draw:frame></text:p></office:text></office:body></office:document-content>"#,
            ),
            (
                "Object 1/content.xml",
                r#"<math xmlns="http://www.w3.org/1998/Math/MathML"><semantics><mrow><mi>E</mi><mo>=</mo><mi>m</mi><mo>⋅</mo><msup><mi>c</mi><mn>2</mn></msup></mrow><annotation encoding="StarMath 5.0">E = m cdot c^2</annotation></semantics></math>"#,
            ),
        ] {
            zip.start_file(name, options).unwrap();
            zip.write_all(body.as_bytes()).unwrap();
        }
        let odt = zip.finish().unwrap().into_inner();
        let document = extract(&odt, &Limits::default()).unwrap();
        assert_eq!(document.text().trim(), "E = m ⋅ c 2");
        assert_eq!(formula_text("<office:document-content/>"), None);
    }
}
