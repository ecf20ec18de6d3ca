//! The walk over the token stream: regions (dropped, main), headings, lists, tables, `pre`.

use html5gum::{DefaultEmitter, Token, Tokenizer};

use super::rules::{self, attr, heading_level, Attrs, BLOCKS, VOID};
use super::{collapse, push_collapsed};
use crate::document::{BlockKind, Builder, Layout};
use crate::formats::table::{header_lines, row_line, TableBlocks};
use crate::ParseError;

#[derive(Clone, Copy, PartialEq, Eq)]
enum RegionKind {
    Skip,
    Main,
    Article,
}

/// An element whose end matters: counts the open elements of its name inside it, so its own
/// end tag is recognized.
struct Region {
    name: Vec<u8>,
    open: u32,
    kind: RegionKind,
}

struct List {
    ordered: bool,
    next: u64,
    /// The marker of the open item, until its first text is written.
    marker: Option<String>,
    item_open: bool,
}

#[derive(Default)]
struct Table {
    rows: Vec<Vec<String>>,
    row: Option<Vec<String>>,
    cell: Option<String>,
    caption: String,
}

impl Table {
    /// Separates words at the start or end of `name`: structure inside a cell (nested tables,
    /// paragraphs, headings) separates its words only, and text outside cells (a browser moves
    /// it before the table) ends at the table's own structure.
    fn separate(&mut self, name: &[u8]) {
        if let Some(cell) = self.cell.as_mut() {
            if BLOCKS.contains(&name)
                || heading_level(name).is_some()
                || matches!(name, b"li" | b"table" | b"pre")
            {
                push_collapsed(cell, " ");
            }
        }
        if matches!(name, b"table" | b"tr" | b"td" | b"th") && !self.caption.is_empty() {
            push_collapsed(&mut self.caption, " ");
        }
    }

    fn close_cell(&mut self) {
        if let Some(cell) = self.cell.take() {
            self.row
                .get_or_insert_with(Vec::new)
                .push(cell.trim().to_owned());
        }
    }

    fn close_row(&mut self) {
        self.close_cell();
        if let Some(row) = self.row.take() {
            if row.iter().any(|c| !c.is_empty()) {
                self.rows.push(row);
            }
        }
    }
}

pub(super) struct Walker {
    only_main: bool,
    regions: Vec<Region>,
    title: String,
    in_title: bool,
    title_done: bool,
    buf: String,
    heading: Option<usize>,
    headings: Vec<(usize, String)>,
    pre: usize,
    pre_buf: String,
    /// No text read yet in the open `pre`.
    pre_fresh: bool,
    lists: Vec<List>,
    table: Option<Table>,
    table_depth: usize,
    /// A tag came since the last text: the next text may begin a new word (see `text`).
    after_tag: bool,
}

impl Walker {
    pub(super) fn new(only_main: bool) -> Self {
        Self {
            only_main,
            regions: Vec::new(),
            title: String::new(),
            in_title: false,
            title_done: false,
            buf: String::new(),
            heading: None,
            headings: Vec::new(),
            pre: 0,
            pre_buf: String::new(),
            pre_fresh: false,
            lists: Vec::new(),
            table: None,
            table_depth: 0,
            after_tag: false,
        }
    }

    /// Reads the page into `out`; returns its `<title>`.
    pub(super) fn run(mut self, text: &str, out: &mut Builder<'_>) -> Result<String, ParseError> {
        let mut emitter = DefaultEmitter::<()>::default();
        emitter.naively_switch_states(true);
        for token in Tokenizer::new_with_emitter(text, emitter) {
            let token = match token {
                Ok(token) => token,
                Err(never) => match never {},
            };
            match token {
                Token::StartTag(tag) => {
                    self.after_tag = true;
                    self.start(&tag.name, &tag.attributes, tag.self_closing, out)?
                }
                Token::EndTag(tag) => {
                    self.after_tag = true;
                    self.end(&tag.name, out)?
                }
                Token::String(s) => self.text(&String::from_utf8_lossy(&s.value)),
                _ => {}
            }
        }
        self.end_heading(out)?;
        self.end_pre(out)?;
        self.end_table(out)?;
        self.flush(out)?;
        Ok(self.title)
    }

    fn has(&self, kind: RegionKind) -> bool {
        self.regions.iter().any(|r| r.kind == kind)
    }

    fn emitting(&self) -> bool {
        !self.has(RegionKind::Skip) && (!self.only_main || self.has(RegionKind::Main))
    }

    fn layout(&self) -> Layout {
        Layout {
            headings: self.headings.iter().map(|(_, t)| t.clone()).collect(),
            ..Layout::default()
        }
    }

    fn start(
        &mut self,
        name: &[u8],
        attrs: &Attrs,
        self_closing: bool,
        out: &mut Builder<'_>,
    ) -> Result<(), ParseError> {
        if VOID.contains(&name) {
            if self.emitting() {
                match name {
                    b"br" => self.line_break(),
                    b"hr" => self.flush(out)?,
                    // An image's description is part of the text where the image stands.
                    b"img" => {
                        if let Some(alt) = attr(attrs, "alt").filter(|a| !a.trim_ascii().is_empty())
                        {
                            let alt = String::from_utf8_lossy(alt);
                            self.text(&format!(" {alt} "));
                        }
                    }
                    _ => {}
                }
            }
            return Ok(());
        }
        for region in self.regions.iter_mut().filter(|r| r.name == name) {
            region.open = region.open.saturating_add(1);
        }
        if self.has(RegionKind::Skip) {
            return Ok(());
        }
        if name == b"title" {
            self.in_title = !self.title_done;
            return Ok(());
        }
        let in_content = self.has(RegionKind::Main) || self.has(RegionKind::Article);
        if rules::dropped(name, attrs, self_closing, in_content) {
            self.regions.push(Region {
                name: name.to_vec(),
                open: 1,
                kind: RegionKind::Skip,
            });
            return Ok(());
        }
        let is_main =
            name == b"main" || attr(attrs, "role").is_some_and(|v| v.eq_ignore_ascii_case(b"main"));
        if is_main && !self.has(RegionKind::Main) {
            self.flush(out)?;
            self.regions.push(Region {
                name: name.to_vec(),
                open: 1,
                kind: RegionKind::Main,
            });
        } else if name == b"article" && !self.has(RegionKind::Article) {
            self.regions.push(Region {
                name: name.to_vec(),
                open: 1,
                kind: RegionKind::Article,
            });
        }
        if !self.emitting() {
            return Ok(());
        }
        if self.table.is_some() {
            return self.start_in_table(name);
        }
        if let Some(level) = heading_level(name) {
            self.end_heading(out)?;
            self.flush(out)?;
            self.heading = Some(level);
            return Ok(());
        }
        match name {
            b"pre" => {
                self.flush(out)?;
                if self.pre == 0 {
                    self.pre_buf.clear();
                    self.pre_fresh = true;
                }
                self.pre += 1;
            }
            b"ul" | b"ol" | b"menu" => {
                self.flush(out)?;
                let next = attr(attrs, "start")
                    .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse().ok())
                    .unwrap_or(1);
                self.lists.push(List {
                    ordered: name == b"ol",
                    next,
                    marker: None,
                    item_open: false,
                });
            }
            b"li" => {
                self.flush(out)?;
                if let Some(list) = self.lists.last_mut() {
                    // An item's `value` renumbers it and the items after it.
                    if let Some(value) = attr(attrs, "value")
                        .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse().ok())
                    {
                        list.next = value;
                    }
                    let marker = if list.ordered {
                        format!("{}. ", list.next)
                    } else {
                        "- ".to_owned()
                    };
                    list.next = list.next.saturating_add(1);
                    list.marker = Some(marker);
                    list.item_open = true;
                }
            }
            b"table" => {
                self.flush(out)?;
                self.table = Some(Table::default());
                self.table_depth = 1;
            }
            _ if BLOCKS.contains(&name) => self.flush(out)?,
            _ => {}
        }
        Ok(())
    }

    fn start_in_table(&mut self, name: &[u8]) -> Result<(), ParseError> {
        let Some(table) = self.table.as_mut() else {
            return Ok(());
        };
        table.separate(name);
        match name {
            b"table" => self.table_depth += 1,
            b"tr" if self.table_depth == 1 => {
                table.close_row();
                table.row = Some(Vec::new());
            }
            b"td" | b"th" if self.table_depth == 1 => {
                table.close_cell();
                table.cell = Some(String::new());
            }
            _ => {}
        }
        Ok(())
    }

    fn end(&mut self, name: &[u8], out: &mut Builder<'_>) -> Result<(), ParseError> {
        if name == b"title" && self.in_title {
            self.in_title = false;
            self.title_done = true;
            return Ok(());
        }
        // The outermost region this tag closes; regions inside it close with it.
        let mut closes = None;
        for (i, region) in self.regions.iter_mut().enumerate() {
            if region.name == name {
                region.open = region.open.saturating_sub(1);
                if region.open == 0 && closes.is_none() {
                    closes = Some(i);
                }
            }
        }
        let was_skipping = self.has(RegionKind::Skip);
        if let Some(i) = closes {
            if self.regions[i..].iter().any(|r| r.kind == RegionKind::Main) && self.emitting() {
                self.end_heading(out)?;
                self.end_pre(out)?;
                self.end_table(out)?;
                self.flush(out)?;
            }
            self.regions.truncate(i);
        }
        if was_skipping || !self.emitting() {
            return Ok(());
        }
        // MathML's tokens (identifiers, numbers, operators, text) are words of their own: a
        // long division's 435.3 and 1306 are not 435.31306.
        if crate::formats::ooxml::is_mathml_token(name) {
            self.text(" ");
        }
        if self.table.is_some() {
            return self.end_in_table(name, out);
        }
        if heading_level(name).is_some() {
            return self.end_heading(out);
        }
        match name {
            b"pre" => {
                self.pre = self.pre.saturating_sub(1);
                if self.pre == 0 {
                    self.end_pre(out)?;
                }
            }
            b"ul" | b"ol" | b"menu" => {
                self.flush(out)?;
                self.lists.pop();
            }
            b"li" => {
                self.flush(out)?;
                if let Some(list) = self.lists.last_mut() {
                    list.item_open = false;
                    list.marker = None;
                }
            }
            _ if BLOCKS.contains(&name) => self.flush(out)?,
            _ => {}
        }
        Ok(())
    }

    fn end_in_table(&mut self, name: &[u8], out: &mut Builder<'_>) -> Result<(), ParseError> {
        let Some(table) = self.table.as_mut() else {
            return Ok(());
        };
        table.separate(name);
        match name {
            b"table" if self.table_depth > 1 => self.table_depth -= 1,
            b"table" => return self.end_table(out),
            b"tr" if self.table_depth == 1 => table.close_row(),
            b"td" | b"th" if self.table_depth == 1 => table.close_cell(),
            _ => {}
        }
        Ok(())
    }

    fn text(&mut self, text: &str) {
        if self.has(RegionKind::Skip) {
            return;
        }
        // Digits and letters on either side of a tag are two words: a line number or a test
        // id in a span of its own beside the text (`ascended<span class="lnum">90</span>`,
        // `<span>mathml-024</span>Horizontal`), set apart by style sheets on screen.
        let spaced;
        let text = if std::mem::take(&mut self.after_tag) && self.pre == 0 {
            let last = match self.table.as_ref() {
                Some(table) => table.cell.as_deref().unwrap_or(&table.caption),
                None => &self.buf,
            }
            .chars()
            .next_back();
            match (last, text.chars().next()) {
                (Some(a), Some(b))
                    if (a.is_alphabetic() && b.is_ascii_digit())
                        || (a.is_ascii_digit() && b.is_alphabetic()) =>
                {
                    spaced = format!(" {text}");
                    &spaced
                }
                _ => text,
            }
        } else {
            text
        };
        if self.in_title {
            push_collapsed(&mut self.title, text);
            return;
        }
        if !self.emitting() {
            return;
        }
        if let Some(table) = self.table.as_mut() {
            match table.cell.as_mut() {
                Some(cell) => push_collapsed(cell, text),
                None if !text.trim().is_empty() => push_collapsed(&mut table.caption, text),
                None => {}
            }
        } else if self.pre > 0 {
            // A newline right after `<pre>` is not content.
            let text = if std::mem::take(&mut self.pre_fresh) {
                text.strip_prefix('\n').unwrap_or(text)
            } else {
                text
            };
            self.pre_buf.push_str(text);
        } else {
            push_collapsed(&mut self.buf, text);
        }
    }

    fn line_break(&mut self) {
        if let Some(table) = self.table.as_mut() {
            if let Some(cell) = table.cell.as_mut() {
                push_collapsed(cell, " ");
            }
        } else if self.pre > 0 {
            self.pre_buf.push('\n');
        } else if !self.buf.is_empty() {
            while self.buf.ends_with(' ') {
                self.buf.pop();
            }
            self.buf.push('\n');
        }
    }

    /// Ends the paragraph or list item being written (inside a heading, only separates words).
    fn flush(&mut self, out: &mut Builder<'_>) -> Result<(), ParseError> {
        if self.heading.is_some() {
            push_collapsed(&mut self.buf, " ");
            return Ok(());
        }
        if self.buf.trim().is_empty() {
            self.buf.clear();
            return Ok(());
        }
        let layout = self.layout();
        let mut text = std::mem::take(&mut self.buf);
        match self.lists.last_mut().filter(|l| l.item_open) {
            Some(list) => {
                if let Some(marker) = list.marker.take() {
                    text.insert_str(0, &marker);
                }
                out.push(BlockKind::ListItem, &text, layout)
            }
            None => out.push(BlockKind::Paragraph, &text, layout),
        }
    }

    fn end_heading(&mut self, out: &mut Builder<'_>) -> Result<(), ParseError> {
        let Some(level) = self.heading.take() else {
            return Ok(());
        };
        let title = collapse(&std::mem::take(&mut self.buf));
        if title.is_empty() {
            return Ok(());
        }
        while self.headings.last().is_some_and(|(l, _)| *l >= level) {
            self.headings.pop();
        }
        self.headings.push((level, title.clone()));
        out.push(
            BlockKind::Heading,
            &format!("{} {title}", "#".repeat(level)),
            self.layout(),
        )
    }

    fn end_pre(&mut self, out: &mut Builder<'_>) -> Result<(), ParseError> {
        self.pre = 0;
        let code = std::mem::take(&mut self.pre_buf);
        if code.trim().is_empty() {
            return Ok(());
        }
        out.push(
            BlockKind::Code,
            &format!("```\n{}\n```", code.trim_end()),
            self.layout(),
        )
    }

    fn end_table(&mut self, out: &mut Builder<'_>) -> Result<(), ParseError> {
        let Some(mut table) = self.table.take() else {
            return Ok(());
        };
        self.table_depth = 0;
        table.close_row();
        let layout = self.layout();
        out.push(BlockKind::Paragraph, &table.caption, layout.clone())?;
        let width = table.rows.iter().map(Vec::len).max().unwrap_or(0);
        let mut rows = table.rows.into_iter();
        if width <= 1 {
            // A one-column table lays out text; it is not data.
            for row in rows {
                out.push(BlockKind::Paragraph, &row.concat(), layout.clone())?;
            }
            return Ok(());
        }
        let Some(mut header) = rows.next() else {
            return Ok(());
        };
        // A first row spanning the table (a caption in a cell) still heads every column.
        header.resize(width, String::new());
        let mut blocks = TableBlocks::new(header_lines(&header), layout);
        for row in rows {
            blocks.push(out, &row_line(&row), None)?;
        }
        blocks.finish(out)
    }
}
