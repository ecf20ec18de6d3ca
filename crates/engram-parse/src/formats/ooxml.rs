//! Office Open XML: Word (`.docx`) and PowerPoint (`.pptx`), read from their XML parts with
//! quick-xml inside a bounded ZIP reader. Relationships are read only to find parts inside the
//! package; external targets (linked files, URLs) are never opened.
//!
//! - Word: paragraphs in order; headings from paragraph styles (`Heading1`…, `Title`, or any
//!   style named "heading N" in `styles.xml`) with their path in `layout.headings`; automatic
//!   numbering (`numbering`); list items; tables as Markdown tables; equations (OMML) as `$…$`
//!   in LaTeX's notation; charts as tables where they are anchored (`chart`); then footnotes,
//!   endnotes and comments, each under its own heading.
//! - PowerPoint: slides in presentation order, `layout.slide` numbered from 1; the title as a
//!   heading, text frames, tables, picture descriptions (alt text), charts as tables, comments
//!   (legacy and modern, replies included, with their authors) and speaker notes.
//! - Excel (with `sheets`): charts, then notes and threaded comments as `Sheet!B2 (author)`.
//! - Both, and Excel workbooks: the document's properties (title, author, dates) last.

use std::collections::HashMap;

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use crate::document::{BlockKind, Builder, Layout};
use crate::formats::numbering::{Label, Numbering};
use crate::formats::table;
use crate::formats::zipped::Container;
use crate::{Document, Limits, ParseError};

fn corrupt(part: &str, e: impl std::fmt::Display) -> ParseError {
    ParseError::Corrupt(format!("{part}: {e}"))
}

/// Whether an element (local name) is a MathML token: an identifier, number, operator or text,
/// each read as a word of its own (HTML and EPUB equations, ODF formula objects).
pub(crate) fn is_mathml_token(name: &[u8]) -> bool {
    matches!(name, b"mi" | b"mn" | b"mo" | b"mtext" | b"ms")
}

pub(crate) fn local(name: &[u8]) -> &[u8] {
    match name.iter().rposition(|b| *b == b':') {
        Some(i) => &name[i + 1..],
        None => name,
    }
}

/// The value of the attribute whose local name is `key`.
pub(crate) fn attr(start: &BytesStart<'_>, key: &[u8]) -> Option<String> {
    start.attributes().flatten().find_map(|a| {
        (local(a.key.as_ref()) == key).then(|| {
            let raw = String::from_utf8_lossy(&a.value);
            quick_xml::escape::unescape(&raw)
                .map(|v| v.into_owned())
                .unwrap_or_else(|_| raw.into_owned())
        })
    })
}

/// The `r:id` of an element (a prefixed `id`; the plain `id` is a number).
fn relationship_id(start: &BytesStart<'_>) -> Option<String> {
    start.attributes().flatten().find_map(|a| {
        let key = a.key.as_ref();
        (key != b"id" && local(key) == b"id")
            .then(|| String::from_utf8_lossy(&a.value).into_owned())
    })
}

/// Text of a text event: entities resolved where valid.
pub(crate) fn text_of(event: &quick_xml::events::BytesText<'_>) -> String {
    let raw = event.decode().map(|c| c.into_owned()).unwrap_or_default();
    quick_xml::escape::unescape(&raw)
        .map(|c| c.into_owned())
        .unwrap_or(raw)
}

pub(crate) fn reference_text(reference: &quick_xml::events::BytesRef<'_>) -> String {
    let name = String::from_utf8_lossy(reference).into_owned();
    quick_xml::escape::unescape(&format!("&{name};"))
        .map(|c| c.into_owned())
        .unwrap_or_default()
}

/// Relationship targets of a part by id, resolved against `base` (the part's folder); only
/// internal targets.
fn relationships(
    zip: &mut Container<'_>,
    rels: &str,
    base: &str,
) -> Result<HashMap<String, String>, ParseError> {
    let mut out = HashMap::new();
    let Some(xml) = zip.text(rels)? else {
        return Ok(out);
    };
    let mut reader = Reader::from_str(&xml);
    loop {
        match reader.read_event().map_err(|e| corrupt(rels, e))? {
            Event::Start(e) | Event::Empty(e) if local(e.name().as_ref()) == b"Relationship" => {
                if attr(&e, b"TargetMode").is_some_and(|m| m == "External") {
                    continue;
                }
                if let (Some(id), Some(target)) = (attr(&e, b"Id"), attr(&e, b"Target")) {
                    out.insert(id, resolve(base, &target));
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

/// The charts among a part's relationships (`rels`), as text (see `chart::chart_text`), by
/// relationship id.
fn linked_charts(
    zip: &mut Container<'_>,
    rels: &HashMap<String, String>,
) -> Result<HashMap<String, String>, ParseError> {
    let mut out = HashMap::new();
    for (id, target) in rels {
        if !target.contains("charts/chart") {
            continue;
        }
        if let Some(text) = zip
            .text(target)?
            .and_then(|xml| crate::formats::chart::chart_text(&xml))
        {
            out.insert(id.clone(), text);
        }
    }
    Ok(out)
}

/// The text of the diagrams (SmartArt) among a part's relationships: each diagram's data part,
/// a line per node, as `Diagram: a; b; c`.
fn linked_diagrams(
    zip: &mut Container<'_>,
    rels: &HashMap<String, String>,
) -> Result<Vec<String>, ParseError> {
    let mut targets: Vec<&String> = rels
        .values()
        .filter(|t| t.contains("diagrams/data"))
        .collect();
    targets.sort();
    let mut out = Vec::new();
    for target in targets {
        if let Some(xml) = zip.text(target)? {
            let mut lines = Vec::new();
            crate::formats::fallback::xml_lines(&xml, &mut lines);
            if !lines.is_empty() {
                out.push(format!("Diagram: {}", lines.join("; ")));
            }
        }
    }
    Ok(out)
}

/// Every chart part of the package (`xl/charts/chart1.xml`, …) in natural order, as text: the
/// charts of a workbook, on its sheets or chart sheets.
pub(crate) fn package_charts(
    zip: &mut Container<'_>,
    folder: &str,
) -> Result<Vec<String>, ParseError> {
    let mut parts: Vec<String> = zip
        .names()
        .into_iter()
        .filter(|n| {
            n.starts_with(folder) && n.ends_with(".xml") && n[folder.len()..].starts_with("chart")
        })
        .collect();
    parts.sort_by_key(|n| {
        let digits: String = n.chars().filter(char::is_ascii_digit).collect();
        (digits.len(), digits)
    });
    let mut out = Vec::new();
    for part in parts {
        if let Some(text) = zip
            .text(&part)?
            .and_then(|xml| crate::formats::chart::chart_text(&xml))
        {
            out.push(text);
        }
    }
    Ok(out)
}

/// A workbook's comments, notes and threads, sheet by sheet: `Sheet!B2 (Ana): text`. A note
/// Excel keeps only as the legacy copy of a thread (`[Threaded comment]…`) is left out.
pub(crate) fn workbook_comments(zip: &mut Container<'_>) -> Result<Vec<String>, ParseError> {
    let named = workbook_sheets(zip)?;
    let people = match zip.text("xl/persons/person.xml")? {
        Some(xml) => crate::formats::comments::authors(&xml),
        None => HashMap::new(),
    };
    let mut out = Vec::new();
    for (name, target) in named {
        let (folder, file) = target.rsplit_once('/').unwrap_or(("", target.as_str()));
        let rels = relationships(zip, &format!("{folder}/_rels/{file}.rels"), folder)?;
        let mut parts: Vec<&String> = rels
            .values()
            .filter(|t| t.contains("comments") || t.contains("threadedComment"))
            .collect();
        // Threads first: their legacy copies are then recognized and skipped.
        parts.sort_by_key(|t| (!t.contains("threadedComment"), (*t).clone()));
        for part in parts {
            let Some(xml) = zip.text(part)? else {
                continue;
            };
            let mut authors = crate::formats::comments::authors(&xml);
            authors.extend(people.clone());
            for comment in crate::formats::comments::comments(&xml, &authors) {
                if comment.text.starts_with("[Threaded comment]") {
                    continue;
                }
                out.push(format!("{name}!{}", comment.line()));
            }
        }
    }
    Ok(out)
}

/// A workbook's sheets in order: (name, worksheet part).
pub(crate) fn workbook_sheets(
    zip: &mut Container<'_>,
) -> Result<Vec<(String, String)>, ParseError> {
    let sheets = relationships(zip, "xl/_rels/workbook.xml.rels", "xl")?;
    let Some(xml) = zip.text("xl/workbook.xml")? else {
        return Ok(Vec::new());
    };
    let mut named: Vec<(String, String)> = Vec::new();
    let mut reader = Reader::from_str(&xml);
    loop {
        match reader.read_event().map_err(|e| corrupt("workbook", e))? {
            Event::Start(e) | Event::Empty(e) if local(e.name().as_ref()) == b"sheet" => {
                if let (Some(name), Some(target)) = (
                    attr(&e, b"name"),
                    relationship_id(&e).and_then(|id| sheets.get(&id)),
                ) {
                    named.push((name, target.clone()));
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(named)
}

/// `target` relative to the folder `base` (`ppt/slides` + `../media/x` = `ppt/media/x`).
fn resolve(base: &str, target: &str) -> String {
    if let Some(absolute) = target.strip_prefix('/') {
        return absolute.to_owned();
    }
    let mut parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for piece in target.split('/') {
        match piece {
            ".." => {
                parts.pop();
            }
            "." | "" => {}
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// The package's core properties (`docProps/core.xml`: title, subject, author, keywords,
/// description, category, who last changed it, when it was made and changed), a line each.
pub(crate) fn document_properties(zip: &mut Container<'_>) -> Result<Vec<String>, ParseError> {
    let Some(xml) = zip.text("docProps/core.xml")? else {
        return Ok(Vec::new());
    };
    const SHOWN: [(&[u8], &str); 13] = [
        (b"title", "Title"),
        (b"subject", "Subject"),
        (b"creator", "Author"),
        (b"keywords", "Keywords"),
        (b"description", "Description"),
        (b"category", "Category"),
        (b"lastModifiedBy", "Last modified by"),
        (b"created", "Created"),
        (b"modified", "Modified"),
        (b"language", "Language"),
        (b"contentStatus", "Status"),
        (b"identifier", "Identifier"),
        (b"version", "Version"),
    ];
    let mut values: Vec<(usize, String)> = Vec::new();
    let mut reader = Reader::from_str(&xml);
    let mut current: Option<usize> = None;
    loop {
        // Properties are a courtesy: a malformed part gives what was read before the fault.
        match reader.read_event() {
            Ok(Event::Start(e)) => {
                current = SHOWN
                    .iter()
                    .position(|(n, _)| *n == local(e.name().as_ref()));
            }
            Ok(Event::Text(t)) => {
                if let Some(i) = current {
                    let text = text_of(&t);
                    let text = text.trim();
                    if !text.is_empty() {
                        values.push((i, text.to_owned()));
                    }
                }
            }
            Ok(Event::End(_)) => current = None,
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    values.sort_by_key(|(i, _)| *i);
    Ok(values
        .into_iter()
        .map(|(i, v)| format!("{}: {v}", SHOWN[i].1))
        .collect())
}

/// Appends the document's properties as a last section.
pub(crate) fn push_properties(lines: &[String], out: &mut Builder<'_>) -> Result<(), ParseError> {
    let text: Vec<String> = (!lines.is_empty())
        .then(|| lines.join("\n"))
        .into_iter()
        .collect();
    out.section(1, "Document properties", BlockKind::Paragraph, &text)
}

// ------------------------------------------------------------------------------------------
// Word

/// What paragraph styles say, from `styles.xml`: heading levels ("heading 1" → 1, "Title" → 1)
/// and the numbering a style carries (numbered headings), by style id.
#[derive(Debug, Default)]
struct Styles {
    headings: HashMap<String, usize>,
    numbering: HashMap<String, (String, usize)>,
}

fn paragraph_styles(zip: &mut Container<'_>) -> Result<Styles, ParseError> {
    let mut out = Styles::default();
    let Some(xml) = zip.text("word/styles.xml")? else {
        return Ok(out);
    };
    let mut reader = Reader::from_str(&xml);
    let mut current: Option<String> = None;
    loop {
        match reader.read_event().map_err(|e| corrupt("styles", e))? {
            Event::Start(e) if local(e.name().as_ref()) == b"style" => {
                current = attr(&e, b"styleId")
            }
            Event::End(e) if local(e.name().as_ref()) == b"style" => current = None,
            Event::Start(e) | Event::Empty(e) if local(e.name().as_ref()) == b"name" => {
                if let (Some(id), Some(name)) = (&current, attr(&e, b"val")) {
                    if let Some(level) = heading_level(&name) {
                        out.headings.insert(id.clone(), level);
                    }
                }
            }
            Event::Start(e) | Event::Empty(e)
                if matches!(local(e.name().as_ref()), b"numId" | b"ilvl") =>
            {
                if let (Some(id), Some(value)) = (&current, attr(&e, b"val")) {
                    let entry = out.numbering.entry(id.clone()).or_default();
                    if local(e.name().as_ref()) == b"numId" {
                        entry.0 = value;
                    } else {
                        entry.1 = value.parse().unwrap_or(0);
                    }
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

/// What an OMML element opens with: fractions, scripts, radicals and arguments in LaTeX's
/// notation, so `m/a` and `10^{-6}` do not read as `ma` and `10-6`.
fn math_open(name: &[u8]) -> &'static str {
    match name {
        b"f" => "\\frac",
        b"rad" => "\\sqrt",
        b"num" | b"den" | b"e" => "{",
        b"sup" => "^{",
        b"sub" => "_{",
        b"deg" => "[",
        _ => "",
    }
}

/// What an OMML element closes with (see [`math_open`]).
fn math_close(name: &[u8]) -> &'static str {
    match name {
        b"num" | b"den" | b"e" | b"sup" | b"sub" => "}",
        b"deg" => "]",
        _ => "",
    }
}

/// "heading 2", "Heading2" → 2; "Title" → 1.
fn heading_level(style: &str) -> Option<usize> {
    let lower = style.to_ascii_lowercase().replace(' ', "");
    if lower == "title" {
        return Some(1);
    }
    let level: usize = lower.strip_prefix("heading")?.parse().ok()?;
    (1..=9).contains(&level).then_some(level)
}

/// Reads one Word XML part (body, footnotes, endnotes or comments) into blocks.
struct WordReader<'s> {
    styles: &'s Styles,
    numbering: &'s mut Numbering,
    /// The part's charts as text, by relationship id.
    charts: &'s HashMap<String, String>,
    headings: Vec<(usize, String)>,
}

impl WordReader<'_> {
    fn path(&self) -> Vec<String> {
        self.headings.iter().map(|(_, t)| t.clone()).collect()
    }

    fn read(&mut self, xml: &str, part: &str, out: &mut Builder<'_>) -> Result<(), ParseError> {
        let mut reader = Reader::from_str(xml);
        // An end tag naming another element is let pass, as Word and pandoc let it: some writers
        // leave a space in an empty element (`<w:i/ >`), read as an element never closed.
        reader.config_mut().check_end_names = false;
        let (mut para, mut level, mut list, mut in_text) = (String::new(), None, false, false);
        // Inside an equation (OMML), whose structure is written as LaTeX-like text.
        let mut math = 0usize;
        // The paragraph's style and its own numbering (list instance, level).
        let (mut style, mut num_id, mut ilvl): (Option<String>, Option<String>, Option<usize>) =
            (None, None, None);
        let mut tables = table::Tables::default();
        // Charts anchored in the paragraph, written after it.
        let mut charts: Vec<&str> = Vec::new();
        loop {
            let event = reader.read_event().map_err(|e| corrupt(part, e))?;
            if let Event::Start(e) | Event::Empty(e) = &event {
                match local(e.name().as_ref()) {
                    b"chart" => {
                        if let Some(chart) = relationship_id(e).and_then(|id| self.charts.get(&id))
                        {
                            charts.push(chart);
                        }
                    }
                    // A picture's description (alt text) is part of the text where it stands.
                    b"docPr" => {
                        if let Some(descr) = attr(e, b"descr").filter(|d| !d.trim().is_empty()) {
                            para.push(' ');
                            para.push_str(descr.trim());
                            para.push(' ');
                        }
                    }
                    _ => {}
                }
            }
            match event {
                Event::Start(e) => match local(e.name().as_ref()) {
                    b"p" => {
                        para.clear();
                        level = None;
                        list = false;
                        (style, num_id, ilvl) = (None, None, None);
                    }
                    b"t" => in_text = true,
                    b"oMath" => {
                        math += 1;
                        para.push('$');
                    }
                    name if math > 0 => para.push_str(math_open(name)),
                    b"tbl" => tables.open(),
                    b"tr" => tables.start_row(),
                    b"tc" => tables.start_cell(),
                    _ => {}
                },
                Event::Empty(e) => match local(e.name().as_ref()) {
                    b"pStyle" => {
                        style = attr(&e, b"val");
                        level = style.as_ref().and_then(|v| {
                            self.styles
                                .headings
                                .get(v)
                                .copied()
                                .or_else(|| heading_level(v))
                        });
                    }
                    b"numPr" => list = true,
                    b"numId" => num_id = attr(&e, b"val"),
                    b"ilvl" => ilvl = attr(&e, b"val").and_then(|v| v.parse().ok()),
                    b"tab" => para.push('\t'),
                    b"br" | b"cr" => para.push('\n'),
                    _ => {}
                },
                Event::Text(t) if in_text => para.push_str(&text_of(&t)),
                Event::GeneralRef(r) if in_text => para.push_str(&reference_text(&r)),
                Event::End(e) => match local(e.name().as_ref()) {
                    b"t" => in_text = false,
                    b"oMath" => {
                        math = math.saturating_sub(1);
                        para.push('$');
                    }
                    name if math > 0 => para.push_str(math_close(name)),
                    b"numPr" => list = true,
                    b"p" => {
                        let label = self.label(style.as_deref(), num_id.take(), ilvl.take());
                        let mut text = para.trim().to_owned();
                        para.clear();
                        match &label {
                            Some(Label::Number(n)) if !n.is_empty() && !text.is_empty() => {
                                text = format!("{n} {text}");
                            }
                            _ => {}
                        }
                        if !tables.text(&text) {
                            self.paragraph(&text, level, list || label.is_some(), label, out)?;
                        }
                        for chart in charts.drain(..) {
                            out.push(BlockKind::Table, chart, Layout::under(&self.path()))?;
                        }
                    }
                    b"tc" => tables.end_cell(),
                    b"tr" => tables.end_row(),
                    b"tbl" => {
                        if let Some(rows) = tables.close() {
                            table::write_rows(out, &rows, Layout::under(&self.path()), None)?;
                        }
                    }
                    _ => {}
                },
                Event::Eof => break,
                _ => {}
            }
        }
        Ok(())
    }

    /// The numbering label of a paragraph: its own numbering, else its style's; counted.
    fn label(
        &mut self,
        style: Option<&str>,
        num_id: Option<String>,
        ilvl: Option<usize>,
    ) -> Option<Label> {
        let styled = style.and_then(|s| self.styles.numbering.get(s));
        let (num_id, ilvl) = match (num_id, styled) {
            (Some(id), styled) => (id, ilvl.or(styled.map(|s| s.1)).unwrap_or(0)),
            (None, Some((id, l))) => (id.clone(), ilvl.unwrap_or(*l)),
            (None, None) => return None,
        };
        if num_id == "0" {
            return None;
        }
        self.numbering.next(&num_id, ilvl)
    }

    fn paragraph(
        &mut self,
        text: &str,
        level: Option<usize>,
        list: bool,
        label: Option<Label>,
        out: &mut Builder<'_>,
    ) -> Result<(), ParseError> {
        if text.is_empty() {
            return Ok(());
        }
        if let Some(level) = level {
            self.headings.retain(|(l, _)| *l < level);
            self.headings.push((level, text.to_owned()));
            let heading = format!("{} {}", "#".repeat(level), text.replace('\n', " "));
            return out.push(BlockKind::Heading, &heading, Layout::under(&self.path()));
        }
        if list {
            // A numbered item shows its number (already before the text); others a dash.
            let item = match label {
                Some(Label::Number(n)) if !n.is_empty() => text.to_owned(),
                _ => format!("- {text}"),
            };
            return out.push(BlockKind::ListItem, &item, Layout::under(&self.path()));
        }
        out.push(BlockKind::Paragraph, text, Layout::under(&self.path()))
    }
}

/// The package's main document part, as its root relationships name it (`word/document.xml`
/// unless they say otherwise).
fn main_document(zip: &mut Container<'_>) -> Result<String, ParseError> {
    const DEFAULT: &str = "word/document.xml";
    let Some(xml) = zip.text("_rels/.rels")? else {
        return Ok(DEFAULT.to_owned());
    };
    let mut reader = Reader::from_str(&xml);
    loop {
        match reader.read_event().map_err(|e| corrupt("_rels/.rels", e))? {
            Event::Start(e) | Event::Empty(e) if local(e.name().as_ref()) == b"Relationship" => {
                let main = attr(&e, b"Type").is_some_and(|t| t.ends_with("/officeDocument"));
                if let (true, Some(target)) = (main, attr(&e, b"Target")) {
                    return Ok(resolve("", &target));
                }
            }
            Event::Eof => return Ok(DEFAULT.to_owned()),
            _ => {}
        }
    }
}

pub(crate) fn extract_docx(bytes: &[u8], limits: &Limits) -> Result<Document, ParseError> {
    let mut zip = Container::open(bytes, limits)?;
    let styles = paragraph_styles(&mut zip)?;
    // Numbering the document cannot define is left out, never a reason to lose the document.
    let mut numbering = match zip.text("word/numbering.xml")? {
        Some(xml) => Numbering::parse(&xml).unwrap_or_default(),
        None => Numbering::default(),
    };
    let main = main_document(&mut zip)?;
    let body = zip
        .text(&main)?
        .ok_or_else(|| ParseError::Corrupt(format!("a Word document without {main}")))?;
    let (folder, name) = main.rsplit_once('/').unwrap_or(("", &main));
    let body_rels = relationships(&mut zip, &format!("{folder}/_rels/{name}.rels"), folder)?;
    let charts = linked_charts(&mut zip, &body_rels)?;
    let diagrams = linked_diagrams(&mut zip, &body_rels)?;
    let none = HashMap::new();
    let mut out = Builder::new(limits);
    let mut reader = WordReader {
        styles: &styles,
        numbering: &mut numbering,
        charts: &charts,
        headings: Vec::new(),
    };
    reader.read(&body, "document", &mut out)?;
    // Page headers and footers (each part once, a line repeated across parts once).
    let mut margins: Vec<String> = zip
        .names()
        .into_iter()
        .filter(|n| {
            let n = n.strip_prefix("word/").unwrap_or_default();
            (n.starts_with("header") || n.starts_with("footer")) && n.ends_with(".xml")
        })
        .collect();
    margins.sort_by_key(|n| (n.contains("footer"), n.len(), n.clone()));
    let sections: Vec<(Vec<String>, &str)> = [
        ("word/footnotes.xml", "Footnotes"),
        ("word/endnotes.xml", "Endnotes"),
        ("word/comments.xml", "Comments"),
    ]
    .into_iter()
    .map(|(part, title)| (vec![part.to_owned()], title))
    .chain(std::iter::once((margins, "Headers and footers")))
    .collect();
    for (parts, title) in sections {
        let mut section = Builder::new(limits);
        let mut seen = std::collections::HashSet::new();
        for part in &parts {
            let Some(xml) = zip.text(part)? else {
                continue;
            };
            let mut part_out = Builder::new(limits);
            let mut notes = WordReader {
                styles: &styles,
                numbering: &mut numbering,
                charts: &none,
                headings: vec![(1, title.to_owned())],
            };
            notes.read(&xml, part, &mut part_out)?;
            for block in part_out.finish().map(|d| d.blocks).unwrap_or_default() {
                if seen.insert(block.text.clone()) {
                    section.push(block.kind, &block.text, block.layout)?;
                }
            }
        }
        if let Ok(doc) = section.finish() {
            out.push(
                BlockKind::Heading,
                &format!("# {title}"),
                Layout::under(&[title.to_owned()]),
            )?;
            for block in doc.blocks {
                out.push(block.kind, &block.text, block.layout)?;
            }
        }
    }
    out.section(1, "Diagrams", BlockKind::Paragraph, &diagrams)?;
    push_properties(&document_properties(&mut zip)?, &mut out)?;
    out.finish()
}

// ------------------------------------------------------------------------------------------
// PowerPoint

/// Slide part names in presentation order.
fn slide_order(zip: &mut Container<'_>) -> Result<Vec<String>, ParseError> {
    let rels = relationships(zip, "ppt/_rels/presentation.xml.rels", "ppt")?;
    let xml = zip
        .text("ppt/presentation.xml")?
        .ok_or_else(|| ParseError::Corrupt("a presentation without ppt/presentation.xml".into()))?;
    let mut reader = Reader::from_str(&xml);
    let mut slides = Vec::new();
    loop {
        match reader
            .read_event()
            .map_err(|e| corrupt("presentation", e))?
        {
            Event::Start(e) | Event::Empty(e) if local(e.name().as_ref()) == b"sldId" => {
                if let Some(target) = relationship_id(&e).and_then(|id| rels.get(&id)) {
                    slides.push(target.clone());
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(slides)
}

/// Text of one slide-like part: (title, blocks as (kind, text)).
fn slide_text(
    xml: &str,
    part: &str,
    out: &mut Vec<(BlockKind, String)>,
) -> Result<Option<String>, ParseError> {
    let mut reader = Reader::from_str(xml);
    let (mut para, mut in_text, mut is_title, mut title) = (String::new(), false, false, None);
    let mut shape_title = false;
    let mut tables = table::Tables::default();
    loop {
        match reader.read_event().map_err(|e| corrupt(part, e))? {
            Event::Start(e) => match local(e.name().as_ref()) {
                b"sp" => {
                    shape_title = false;
                }
                b"t" | b"v" => in_text = true,
                b"tbl" => tables.open(),
                b"tr" => tables.start_row(),
                b"tc" => tables.start_cell(),
                b"cNvPr" => push_descr(&e, out),
                // Line breaks and placeholders may hold children (run properties, extensions).
                b"br" => para.push('\n'),
                b"ph" => {
                    shape_title =
                        attr(&e, b"type").is_some_and(|t| t == "title" || t == "ctrTitle");
                    is_title = shape_title;
                }
                _ => {}
            },
            Event::Empty(e) => match local(e.name().as_ref()) {
                b"ph" => {
                    shape_title =
                        attr(&e, b"type").is_some_and(|t| t == "title" || t == "ctrTitle");
                    is_title = shape_title;
                }
                b"cNvPr" => push_descr(&e, out),
                b"br" => para.push('\n'),
                _ => {}
            },
            Event::Text(t) if in_text => para.push_str(&text_of(&t)),
            Event::GeneralRef(r) if in_text => para.push_str(&reference_text(&r)),
            Event::End(e) => match local(e.name().as_ref()) {
                b"t" => in_text = false,
                b"v" => {
                    in_text = false;
                    para.push(' ');
                }
                b"p" | b"ser" | b"cat" => {
                    let text = para.trim().to_owned();
                    para.clear();
                    if text.is_empty() {
                        continue;
                    }
                    if tables.text(&text) {
                        continue;
                    } else if is_title && shape_title && title.is_none() {
                        title = Some(text);
                    } else {
                        out.push((BlockKind::Paragraph, text));
                    }
                }
                b"sp" => is_title = false,
                b"tc" => tables.end_cell(),
                b"tr" => tables.end_row(),
                b"tbl" => {
                    if let Some(rows) = tables.close() {
                        out.push((BlockKind::Table, table::markdown(&rows)));
                    }
                }
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(title)
}

/// A picture's or shape's description (alt text) as its own paragraph.
fn push_descr(e: &BytesStart<'_>, out: &mut Vec<(BlockKind, String)>) {
    if let Some(descr) = attr(e, b"descr").filter(|d| !d.trim().is_empty()) {
        out.push((BlockKind::Paragraph, format!("Image: {}", descr.trim())));
    }
}

pub(crate) fn extract_pptx(bytes: &[u8], limits: &Limits) -> Result<Document, ParseError> {
    let mut zip = Container::open(bytes, limits)?;
    let slides = slide_order(&mut zip)?;
    // Comment authors, legacy and modern.
    let mut authors = HashMap::new();
    for part in ["ppt/commentAuthors.xml", "ppt/authors.xml"] {
        if let Some(xml) = zip.text(part)? {
            authors.extend(crate::formats::comments::authors(&xml));
        }
    }
    let mut out = Builder::new(limits);
    for (index, part) in slides.iter().enumerate() {
        let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
        let Some(xml) = zip.text(part)? else { continue };
        let mut blocks = Vec::new();
        let title = slide_text(&xml, part, &mut blocks)?;
        // Charts and notes linked from the slide.
        let (folder, file) = part.rsplit_once('/').unwrap_or(("", part.as_str()));
        let rels = relationships(&mut zip, &format!("{folder}/_rels/{file}.rels"), folder)?;
        for diagram in linked_diagrams(&mut zip, &rels)? {
            blocks.push((BlockKind::Paragraph, diagram));
        }
        let mut linked: Vec<&String> = rels
            .values()
            .filter(|t| {
                t.contains("charts/chart") || t.contains("notesSlide") || t.contains("comments/")
            })
            .collect();
        linked.sort();
        for target in linked {
            let Some(xml) = zip.text(target)? else {
                continue;
            };
            if target.contains("charts/chart") {
                if let Some(chart) = crate::formats::chart::chart_text(&xml) {
                    blocks.push((BlockKind::Table, chart));
                }
                continue;
            }
            if target.contains("comments/") {
                for comment in crate::formats::comments::comments(&xml, &authors) {
                    blocks.push((BlockKind::Paragraph, format!("Comment {}", comment.line())));
                }
                continue;
            }
            let mut more = Vec::new();
            slide_text(&xml, target, &mut more)?;
            let text: Vec<String> = more.into_iter().map(|(_, t)| t).collect();
            if !text.is_empty() {
                blocks.push((BlockKind::Paragraph, format!("Notes: {}", text.join("\n"))));
            }
        }
        let heading = format!(
            "Slide {number}{}",
            title.as_ref().map(|t| format!(": {t}")).unwrap_or_default()
        );
        let layout = Layout {
            slide: Some(number),
            headings: vec![heading.clone()],
            ..Layout::default()
        };
        out.push(BlockKind::Heading, &format!("## {heading}"), layout.clone())?;
        for (kind, text) in blocks {
            out.push(kind, &text, layout.clone())?;
        }
    }
    push_properties(&document_properties(&mut zip)?, &mut out)?;
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::sample;

    fn contains_all(text: &str, name: &str) {
        let expected: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(sample("expected.json")).unwrap())
                .unwrap();
        let vector = expected["vectors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["file"] == name)
            .unwrap();
        let text = text.replace('\\', "");
        for s in vector["must_contain_text"].as_array().unwrap() {
            assert!(
                text.contains(s.as_str().unwrap()),
                "{name}: {s} missing from\n{text}"
            );
        }
        for s in vector["must_not_contain"].as_array().unwrap() {
            assert!(!text.contains(s.as_str().unwrap()), "{name}: {s} present");
        }
    }

    fn package(parts: &[(&str, &str)]) -> Vec<u8> {
        use std::io::Write as _;
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        for (name, body) in parts {
            zip.start_file(*name, zip::write::SimpleFileOptions::default())
                .unwrap();
            zip.write_all(body.as_bytes()).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    /// Found in pandoc's test documents: a main part where the root relationships say (not
    /// `word/document.xml`), an empty element written with a space (`<w:i/ >`, which Word
    /// opens), and pictures whose descriptions are part of the text.
    #[test]
    fn word_documents_as_their_writers_wrote_them() {
        let w = r#"xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#;
        let body = format!(
            r#"<w:document {w} xmlns:wp="wp"><w:body>
            <w:p><w:r><w:rPr><w:i/ ></w:rPr><w:t>These are</w:t></w:r><w:r><w:t> fonts.</w:t></w:r></w:p>
            <w:p><w:r><w:t xml:space="preserve">This picture </w:t></w:r><w:r><w:drawing><wp:inline>
            <wp:docPr id="1" name="Picture 1" descr="a green face"/></wp:inline></w:drawing></w:r>
            <w:r><w:t>is an identicon.</w:t></w:r></w:p></w:body></w:document>"#
        );
        let docx = package(&[
            (
                "_rels/.rels",
                r#"<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="/word/document2.xml"/></Relationships>"#,
            ),
            ("word/document2.xml", &body),
        ]);
        let text = extract_docx(&docx, &Limits::default()).unwrap().text();
        assert!(text.contains("These are fonts."), "{text}");
        assert!(
            text.contains("This picture  a green face is an identicon."),
            "{text}"
        );
    }

    #[test]
    fn word_documents() {
        for name in [
            "test.docx",
            "test_with_comment.docx",
            "equations.docx",
            "rlink.docx",
        ] {
            let doc =
                extract_docx(&std::fs::read(sample(name)).unwrap(), &Limits::default()).unwrap();
            contains_all(&doc.text(), name);
        }
        let doc = extract_docx(
            &std::fs::read(sample("test.docx")).unwrap(),
            &Limits::default(),
        )
        .unwrap();
        let heading = doc
            .blocks
            .iter()
            .find(|b| b.kind == BlockKind::Heading)
            .unwrap();
        assert!(heading.text.starts_with('#'));
        assert!(doc.blocks.iter().any(|b| b.kind == BlockKind::Table));
    }

    #[test]
    fn presentations_by_slide() {
        let doc = extract_pptx(
            &std::fs::read(sample("test.pptx")).unwrap(),
            &Limits::default(),
        )
        .unwrap();
        contains_all(&doc.text(), "test.pptx");
        let slides: Vec<u32> = doc.blocks.iter().filter_map(|b| b.layout.slide).collect();
        assert_eq!(slides.first(), Some(&1));
        assert_eq!(slides.iter().max(), Some(&6));
        // The bar chart PowerPoint drew, as a table of what it plots.
        let chart = doc
            .blocks
            .iter()
            .find(|b| b.kind == BlockKind::Table && b.text.starts_with("Chart: "))
            .expect("the chart");
        assert!(
            chart
                .text
                .contains("| Category | Series 1 |\n| --- | --- |\n| 2000 | 2000 |"),
            "{}",
            chart.text
        );
        assert!(chart.layout.slide.is_some());
    }

    #[test]
    fn corrupt_packages_fail_cleanly() {
        let bytes = std::fs::read(sample("test.docx")).unwrap();
        assert!(extract_docx(&bytes[..bytes.len() / 2], &Limits::default()).is_err());
        assert!(extract_pptx(b"PK\x03\x04broken", &Limits::default()).is_err());
    }
}
