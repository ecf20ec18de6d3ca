//! iWork '09: one XML document per file, `index.xml` (Pages `sl:document`, Numbers
//! `ls:document`) or `index.apxl` (Keynote `key:presentation`), read in one pass with quick-xml
//! (linear, no entity expansion).
//!
//! - Text is what `sf:p` paragraphs hold; headings come from paragraph style names ("Heading 1",
//!   "Title"), resolved through their parent styles.
//! - Tables (`sf:tabular-model`): the cells of `sf:datasource` are listed in order, each one
//!   position after the previous or, with an `sf:ct` attribute, that many positions later in a
//!   grid 256 columns wide; text, numbers, dates, booleans and formula results are read.
//! - Keynote: each `key:slide` of the slide list is a section (`layout.slide`), its title
//!   placeholder in the heading, notes last; master slides are not read.
//! - Numbers: each `ls:workspace` is a sheet (`layout.sheet`).

use std::collections::{BTreeMap, HashMap};

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use super::tables::{self, Grid, Table};
use super::text::heading_level;
use crate::document::{BlockKind, Builder, Layout};
use crate::formats::ooxml::{attr, reference_text, text_of};
use crate::{Document, Format, Limits, ParseError};

/// Deepest element nesting read.
const MAX_DEPTH: usize = 1_000;
/// Most table cells read in one document.
const MAX_CELLS: usize = 4_000_000;
/// Columns of the grid cell positions count in.
const GRID_WIDTH: u64 = 256;

/// The application of an iWork '09 document, from its name and root element.
pub(crate) fn app_of(name: &str, xml: &[u8]) -> Option<Format> {
    if name.contains("index.apxl") {
        return Some(Format::Keynote);
    }
    let mut reader = Reader::from_reader(xml);
    let mut buf = Vec::new();
    loop {
        match reader.read_event_into(&mut buf).ok()? {
            Event::Start(e) | Event::Empty(e) => {
                return match e.name().as_ref() {
                    b"sl:document" => Some(Format::Pages),
                    b"ls:document" => Some(Format::Numbers),
                    b"key:presentation" => Some(Format::Keynote),
                    _ => None,
                };
            }
            Event::Eof => return None,
            _ => buf.clear(),
        }
    }
}

/// A paragraph style: its name, or the identifier of the style it derives from.
struct Style {
    name: Option<String>,
    parent: Option<String>,
}

/// A table being read.
struct TableState {
    name: String,
    name_shown: bool,
    cells: BTreeMap<(u64, u64), String>,
    /// Depth of `sf:datasource`, while in it.
    datasource: Option<usize>,
    position: Option<u64>,
    /// The cell being read: its position, element name and value so far.
    cell: Option<(u64, Vec<u8>, String)>,
}

/// A Keynote slide being read.
#[derive(Default)]
struct Slide {
    title: Vec<String>,
    body: Vec<(BlockKind, String)>,
    notes: Vec<String>,
}

/// Where paragraph text goes.
#[derive(Clone, Copy, PartialEq)]
enum Region {
    Body,
    Title,
    Notes,
}

struct State<'l> {
    app: Format,
    out: Builder<'l>,
    styles: HashMap<String, Style>,
    /// Named styles by identifier (`sf:ident`).
    idents: HashMap<String, String>,
    headings: Vec<(usize, String)>,
    /// Open paragraphs (they may nest through attachments): heading level and text.
    paragraphs: Vec<(Option<usize>, String)>,
    tables: Vec<TableState>,
    cells: usize,
    sheet: Option<String>,
    sheet_started: bool,
    slide: Option<Slide>,
    slides: u32,
    region: Vec<(usize, Region)>,
}

impl State<'_> {
    fn level(&self, style: &str) -> Option<usize> {
        let mut current = self.styles.get(style)?;
        for _ in 0..8 {
            if let Some(name) = &current.name {
                return heading_level(name);
            }
            let parent = current.parent.as_ref()?;
            if let Some(name) = self.idents.get(parent) {
                return heading_level(name);
            }
            current = self.styles.get(parent)?;
        }
        None
    }

    fn layout(&self) -> Layout {
        let mut layout = Layout::under(
            &self
                .headings
                .iter()
                .map(|(_, t)| t.clone())
                .collect::<Vec<_>>(),
        );
        if let Some(sheet) = &self.sheet {
            layout.sheet = Some(sheet.clone());
            layout.headings.insert(0, sheet.clone());
        }
        layout
    }

    /// Writes the sheet heading before the sheet's first block.
    fn start_sheet(&mut self) -> Result<(), ParseError> {
        if let (Some(sheet), false) = (&self.sheet, self.sheet_started) {
            self.sheet_started = true;
            let layout = Layout {
                sheet: Some(sheet.clone()),
                headings: vec![sheet.clone()],
                ..Layout::default()
            };
            self.out
                .push(BlockKind::Heading, &format!("## {sheet}"), layout)?;
        }
        Ok(())
    }

    /// Text outside the content: Keynote masters and themes, Numbers table templates.
    fn outside(&self) -> bool {
        match self.app {
            Format::Keynote => self.slide.is_none(),
            Format::Numbers => self.sheet.is_none(),
            _ => false,
        }
    }

    fn region(&self) -> Region {
        self.region.last().map_or(Region::Body, |(_, r)| *r)
    }

    fn paragraph(&mut self, level: Option<usize>, text: String) -> Result<(), ParseError> {
        let text = text.trim().to_owned();
        if text.is_empty() {
            return Ok(());
        }
        if let Some((_, _, value)) = self.tables.last_mut().and_then(|t| t.cell.as_mut()) {
            if !value.is_empty() {
                value.push(' ');
            }
            value.push_str(&text);
            return Ok(());
        }
        let region = self.region();
        if let Some(slide) = self.slide.as_mut() {
            match region {
                Region::Title => slide.title.push(text),
                Region::Notes => slide.notes.push(text),
                Region::Body => slide.body.push((BlockKind::Paragraph, text)),
            }
            return Ok(());
        }
        if self.outside() {
            return Ok(());
        }
        self.start_sheet()?;
        match level {
            Some(level) if self.sheet.is_none() => {
                let title = text.replace('\n', " ");
                self.headings.retain(|(l, _)| *l < level);
                self.headings.push((level, title.clone()));
                let heading = format!("{} {title}", "#".repeat(level));
                let layout = self.layout();
                self.out.push(BlockKind::Heading, &heading, layout)
            }
            _ => {
                let layout = self.layout();
                self.out.push(BlockKind::Paragraph, &text, layout)
            }
        }
    }

    fn end_table(&mut self) -> Result<(), ParseError> {
        let Some(table) = self.tables.pop() else {
            return Ok(());
        };
        let mut grid = Grid::default();
        for ((row, column), value) in table.cells {
            grid.put(row, usize::try_from(column).unwrap_or(0), value)?;
        }
        let table = Table {
            name: table.name,
            name_shown: table.name_shown,
            rows: grid.rows(),
        };
        if table.rows.is_empty() {
            return Ok(());
        }
        if let Some(slide) = self.slide.as_mut() {
            slide.body.push((BlockKind::Table, table_markdown(&table)));
            return Ok(());
        }
        if self.outside() {
            return Ok(());
        }
        self.start_sheet()?;
        let mut layout = self.layout();
        if self.sheet.is_some() && table.name_shown && !table.name.trim().is_empty() {
            layout.headings.push(table.name.trim().to_owned());
            let heading = format!("### {}", table.name.trim());
            self.out
                .push(BlockKind::Heading, &heading, layout.clone())?;
        }
        tables::write(&mut self.out, &table, layout)
    }

    fn end_slide(&mut self) -> Result<(), ParseError> {
        let Some(slide) = self.slide.take() else {
            return Ok(());
        };
        self.slides += 1;
        let number = self.slides;
        let title = slide.title.join(" ");
        let heading = if title.is_empty() {
            format!("Slide {number}")
        } else {
            format!("Slide {number}: {title}")
        };
        let layout = Layout {
            slide: Some(number),
            headings: vec![heading.clone()],
            ..Layout::default()
        };
        self.out
            .push(BlockKind::Heading, &format!("## {heading}"), layout.clone())?;
        for (kind, text) in slide.body {
            self.out.push(kind, &text, layout.clone())?;
        }
        if !slide.notes.is_empty() {
            let notes = format!("Notes: {}", slide.notes.join("\n"));
            self.out.push(BlockKind::Paragraph, &notes, layout)?;
        }
        Ok(())
    }

    /// A table cell's own value, from its attributes.
    fn start_cell(&mut self, e: &BytesStart<'_>, depth: usize) -> Result<bool, ParseError> {
        let Some(table) = self.tables.last_mut() else {
            return Ok(false);
        };
        if table.datasource.map(|d| d + 1) != Some(depth) {
            return Ok(false);
        }
        self.cells += 1;
        if self.cells > MAX_CELLS {
            return Err(ParseError::TooLarge {
                what: "table cells",
                limit: MAX_CELLS,
            });
        }
        let step: Option<u64> = attr(e, b"ct").and_then(|c| c.parse().ok());
        let position = match table.position {
            None => step.unwrap_or(0),
            Some(p) => p.saturating_add(step.unwrap_or(1)),
        };
        table.position = Some(position);
        let name = e.local_name().as_ref().to_vec();
        let value = cell_value(&name, e).unwrap_or_default();
        table.cell = Some((position, name, value));
        Ok(true)
    }

    fn end_cell(&mut self) {
        let Some(table) = self.tables.last_mut() else {
            return;
        };
        if let Some((position, _, value)) = table.cell.take() {
            let value = value.trim().to_owned();
            if !value.is_empty() {
                table
                    .cells
                    .insert((position / GRID_WIDTH, position % GRID_WIDTH), value);
            }
        }
    }
}

/// The value an element of a cell carries in its attributes: numbers and booleans (`sf:v`),
/// dates (`sf:cell-date`), strings (`sfa:s` of `sf:ct`).
fn cell_value(name: &[u8], e: &BytesStart<'_>) -> Option<String> {
    match name {
        b"b" | b"rb" => attr(e, b"v").map(|v| {
            if v == "1" || v.eq_ignore_ascii_case("true") {
                "TRUE".to_owned()
            } else {
                "FALSE".to_owned()
            }
        }),
        b"n" | b"rn" | b"du" | b"rdu" => attr(e, b"v"),
        b"d" | b"rd" => attr(e, b"cell-date").map(|d| {
            let d = d.trim_end_matches('Z');
            match d.split_once('T') {
                Some((day, "00:00:00")) => day.to_owned(),
                Some((day, time)) => format!("{day} {}", time.get(..8).unwrap_or(time)),
                None => d.to_owned(),
            }
        }),
        b"ct" => attr(e, b"s"),
        _ => None,
    }
}

/// A small table (on a slide) as one Markdown block.
fn table_markdown(table: &Table) -> String {
    let width = table.rows.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
    let rows: Vec<Vec<String>> = table
        .rows
        .iter()
        .map(|(_, cells)| {
            let mut cells = cells.clone();
            cells.resize(width, String::new());
            cells
        })
        .collect();
    crate::formats::table::markdown(&rows)
}

pub(crate) fn extract(name: &str, xml: &[u8], limits: &Limits) -> Result<Document, ParseError> {
    let app = app_of(name, xml)
        .ok_or_else(|| ParseError::Corrupt(format!("{name} is not an iWork '09 document")))?;
    let corrupt = |e: &dyn std::fmt::Display| ParseError::Corrupt(format!("{name}: {e}"));
    let mut reader = Reader::from_reader(xml);
    let mut buf = Vec::new();
    let mut state = State {
        app,
        out: Builder::new(limits),
        styles: HashMap::new(),
        idents: HashMap::new(),
        headings: Vec::new(),
        paragraphs: Vec::new(),
        tables: Vec::new(),
        cells: 0,
        sheet: None,
        sheet_started: false,
        slide: None,
        slides: 0,
        region: Vec::new(),
    };
    let mut depth = 0usize;
    let mut in_slide_list = 0usize;
    let mut text_bytes = 0usize;
    loop {
        let event = reader.read_event_into(&mut buf).map_err(|e| corrupt(&e))?;
        let empty = matches!(event, Event::Empty(_));
        match event {
            Event::Start(ref e) | Event::Empty(ref e) => {
                if !empty {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(corrupt(&format!("nested deeper than {MAX_DEPTH} elements")));
                    }
                }
                let qname = e.name();
                let local = e.local_name();
                match qname.as_ref() {
                    b"sf:paragraphstyle" => {
                        let name = attr(e, b"name");
                        if let (Some(ident), Some(name)) = (attr(e, b"ident"), &name) {
                            state.idents.insert(ident, name.clone());
                        }
                        if let Some(id) = attr(e, b"ID") {
                            let parent = attr(e, b"parent-ident");
                            state.styles.insert(id, Style { name, parent });
                        }
                    }
                    b"sf:p" if !empty => {
                        let level = attr(e, b"style").and_then(|s| state.level(&s));
                        state.paragraphs.push((level, String::new()));
                    }
                    b"sf:br" | b"sf:lnbr" | b"sf:crbr" | b"sf:pgbr" | b"sf:sectbr" => {
                        if let Some((_, text)) = state.paragraphs.last_mut() {
                            text.push('\n');
                        }
                    }
                    b"sf:tab" => {
                        if let Some((_, text)) = state.paragraphs.last_mut() {
                            text.push('\t');
                        }
                    }
                    b"sf:tabular-model" if !empty => state.tables.push(TableState {
                        name: attr(e, b"name").unwrap_or_default(),
                        name_shown: attr(e, b"name-is-visible").as_deref() == Some("true"),
                        cells: BTreeMap::new(),
                        datasource: None,
                        position: None,
                        cell: None,
                    }),
                    b"sf:datasource" if !empty => {
                        if let Some(table) = state.tables.last_mut() {
                            table.datasource = Some(depth);
                        }
                    }
                    b"ls:workspace" if !empty => {
                        state.sheet = Some(
                            attr(e, b"workspace-name")
                                .map(|n| n.trim().to_owned())
                                .filter(|n| !n.is_empty())
                                .unwrap_or_else(|| "Sheet".to_owned()),
                        );
                        state.sheet_started = false;
                    }
                    b"key:slide-list" if !empty => in_slide_list += 1,
                    b"key:slide" if !empty && in_slide_list > 0 => {
                        state.end_slide()?;
                        state.slide = Some(Slide::default());
                    }
                    b"key:title-placeholder" if !empty => state.region.push((depth, Region::Title)),
                    b"key:notes" if !empty => state.region.push((depth, Region::Notes)),
                    b"key:body-placeholder" if !empty => state.region.push((depth, Region::Body)),
                    _ => {
                        let cell_depth = if empty { depth + 1 } else { depth };
                        if state.start_cell(e, cell_depth)? {
                            if empty {
                                state.end_cell();
                            }
                        } else if let Some((_, _, value)) =
                            state.tables.last_mut().and_then(|t| t.cell.as_mut())
                        {
                            // A formula's result, or a text cell's string.
                            if value.is_empty() {
                                *value = cell_value(local.as_ref(), e).unwrap_or_default();
                            }
                        }
                    }
                }
            }
            Event::Text(ref t) => {
                if let Some((_, text)) = state.paragraphs.last_mut() {
                    let piece = text_of(t);
                    text_bytes += piece.len();
                    text.push_str(&piece);
                }
            }
            Event::GeneralRef(ref r) => {
                if let Some((_, text)) = state.paragraphs.last_mut() {
                    text.push_str(&reference_text(r));
                }
            }
            Event::End(ref e) => {
                match e.name().as_ref() {
                    b"sf:p" => {
                        if let Some((level, text)) = state.paragraphs.pop() {
                            state.paragraph(level, text)?;
                        }
                    }
                    b"sf:tabular-model" => state.end_table()?,
                    b"sf:datasource" => {
                        if let Some(table) = state.tables.last_mut() {
                            table.datasource = None;
                        }
                    }
                    b"ls:workspace" => {
                        state.sheet = None;
                        state.sheet_started = false;
                    }
                    b"key:slide-list" => in_slide_list = in_slide_list.saturating_sub(1),
                    b"key:slide" if in_slide_list > 0 => state.end_slide()?,
                    _ => {
                        let is_cell = state
                            .tables
                            .last()
                            .is_some_and(|t| t.datasource.map(|d| d + 1) == Some(depth));
                        if is_cell {
                            state.end_cell();
                        }
                    }
                }
                if state.region.last().is_some_and(|(d, _)| *d == depth) {
                    state.region.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Event::Eof => break,
            _ => {}
        }
        if text_bytes > limits.max_text_bytes {
            return Err(ParseError::TooLarge {
                what: "extracted text bytes",
                limit: limits.max_text_bytes,
            });
        }
        buf.clear();
    }
    state.end_slide()?;
    state.out.finish()
}
