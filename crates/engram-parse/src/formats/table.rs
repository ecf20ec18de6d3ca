//! Markdown tables split into blocks of rows, each repeating the header, shared by every format
//! with tables (CSV, TSV, HTML, Markdown; spreadsheets later).

use crate::document::{BlockKind, Builder, Layout};
use crate::ParseError;

/// One row as a Markdown table line: cells trimmed, inner whitespace collapsed, `|` escaped.
pub(crate) fn row_line<S: AsRef<str>>(cells: &[S]) -> String {
    let mut line = String::from("|");
    for cell in cells {
        line.push(' ');
        for (i, word) in cell.as_ref().split_whitespace().enumerate() {
            if i > 0 {
                line.push(' ');
            }
            line.push_str(&word.replace('|', "\\|"));
        }
        line.push_str(" |");
    }
    line
}

/// The header row and the delimiter row under it.
pub(crate) fn header_lines<S: AsRef<str>>(cells: &[S]) -> String {
    let mut lines = row_line(cells);
    lines.push_str("\n|");
    lines.push_str(&" --- |".repeat(cells.len().max(1)));
    lines
}

/// Writes table blocks: the header, then rows up to `rows_per_block` rows and `block_bytes`
/// bytes, then a new block with the header again.
pub(crate) struct TableBlocks {
    header: String,
    layout: Layout,
    body: String,
    rows: usize,
    range: Option<(u32, u32)>,
    wrote_any: bool,
}

impl TableBlocks {
    /// `header` as made by `header_lines`; `layout` is copied to every block (its row range is
    /// set per block when rows carry numbers).
    pub(crate) fn new(header: String, layout: Layout) -> Self {
        Self {
            header,
            layout,
            body: String::new(),
            rows: 0,
            range: None,
            wrote_any: false,
        }
    }

    /// Adds one row line; `number` is its row number in the source, if it has one.
    pub(crate) fn push(
        &mut self,
        out: &mut Builder<'_>,
        line: &str,
        number: Option<u32>,
    ) -> Result<(), ParseError> {
        out.count_row()?;
        let limits = out.limits();
        if self.rows > 0
            && self.header.len() + self.body.len() + 1 + line.len() > limits.block_bytes
        {
            self.flush(out)?;
        }
        self.body.push('\n');
        self.body.push_str(line);
        self.rows += 1;
        if let Some(n) = number {
            self.range = Some(self.range.map_or((n, n), |(first, _)| (first, n)));
        }
        if self.rows >= limits.rows_per_block.max(1) {
            self.flush(out)?;
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut Builder<'_>) -> Result<(), ParseError> {
        let mut text = String::with_capacity(self.header.len() + self.body.len());
        text.push_str(&self.header);
        text.push_str(&self.body);
        let layout = Layout {
            row_range: self.range.take(),
            ..self.layout.clone()
        };
        out.push(BlockKind::Table, &text, layout)?;
        self.body.clear();
        self.rows = 0;
        self.wrote_any = true;
        Ok(())
    }

    /// Writes the last rows; a table without rows still gives one block with its header.
    pub(crate) fn finish(mut self, out: &mut Builder<'_>) -> Result<(), ParseError> {
        if self.rows > 0 || !self.wrote_any {
            self.flush(out)?;
        }
        Ok(())
    }
}

/// Tables being read from markup (Word, slides, OpenDocument): a stack, because tables nest.
#[derive(Default)]
pub(crate) struct Tables {
    stack: Vec<Grid>,
}

#[derive(Default)]
struct Grid {
    rows: Vec<Vec<String>>,
    row: Vec<String>,
    cell: String,
}

impl Tables {
    pub(crate) fn open(&mut self) {
        self.stack.push(Grid::default());
    }

    pub(crate) fn start_row(&mut self) {
        if let Some(grid) = self.stack.last_mut() {
            grid.row.clear();
        }
    }

    pub(crate) fn start_cell(&mut self) {
        if let Some(grid) = self.stack.last_mut() {
            grid.cell.clear();
        }
    }

    /// Adds a paragraph of text to the current cell; false when no table is open.
    pub(crate) fn text(&mut self, text: &str) -> bool {
        let Some(grid) = self.stack.last_mut() else {
            return false;
        };
        if !text.is_empty() {
            if !grid.cell.is_empty() {
                grid.cell.push(' ');
            }
            grid.cell.push_str(text);
        }
        true
    }

    /// Ends a cell.
    pub(crate) fn end_cell(&mut self) {
        if let Some(grid) = self.stack.last_mut() {
            let cell = std::mem::take(&mut grid.cell);
            grid.row.push(cell);
        }
    }

    pub(crate) fn end_row(&mut self) {
        if let Some(grid) = self.stack.last_mut() {
            let row = std::mem::take(&mut grid.row);
            grid.rows.push(row);
        }
    }

    /// Closes the innermost table. A nested table's rows become text of the cell around it;
    /// an outermost table's rows are returned, without rows or trailing columns that hold
    /// nothing (a sheet's repeated blank cells).
    pub(crate) fn close(&mut self) -> Option<Vec<Vec<String>>> {
        let done = self.stack.pop()?;
        if self.stack.is_empty() {
            let mut rows: Vec<Vec<String>> = done
                .rows
                .into_iter()
                .filter(|row| row.iter().any(|c| !c.trim().is_empty()))
                .collect();
            let width = rows
                .iter()
                .filter_map(|row| row.iter().rposition(|c| !c.trim().is_empty()))
                .max()
                .map_or(0, |last| last + 1);
            for row in &mut rows {
                row.truncate(width);
            }
            return Some(rows);
        }
        for row in done.rows {
            self.text(&row.join(" "));
        }
        None
    }
}

/// A table's rows as Markdown, the first row as the header (one block, for small tables).
pub(crate) fn markdown(rows: &[Vec<String>]) -> String {
    let Some((header, body)) = rows.split_first() else {
        return String::new();
    };
    let mut text = header_lines(header);
    for row in body {
        text.push('\n');
        text.push_str(&row_line(row));
    }
    text
}

/// Writes a whole table whose first row is the header. `first_number` is the source row number
/// of the header (spreadsheets), so data rows carry theirs in `row_range`.
pub(crate) fn write_rows(
    out: &mut Builder<'_>,
    rows: &[Vec<String>],
    layout: Layout,
    first_number: Option<u32>,
) -> Result<(), ParseError> {
    let Some((header, body)) = rows.split_first() else {
        return Ok(());
    };
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let pad = |row: &Vec<String>| {
        let mut row = row.clone();
        row.resize(width, String::new());
        row
    };
    let mut table = TableBlocks::new(header_lines(&pad(header)), layout);
    for (i, row) in body.iter().enumerate() {
        let number =
            first_number.map(|n| n.saturating_add(u32::try_from(i + 1).unwrap_or(u32::MAX)));
        table.push(out, &row_line(&pad(row)), number)?;
    }
    table.finish(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;

    #[test]
    fn rows_are_escaped_and_blocks_repeat_the_header() {
        assert_eq!(
            row_line(&["a|b", " two\n lines ", ""]),
            "| a\\|b | two lines |  |"
        );
        let limits = Limits {
            rows_per_block: 2,
            ..Limits::default()
        };
        let mut out = Builder::new(&limits);
        let mut table = TableBlocks::new(header_lines(&["h1", "h2"]), Layout::default());
        for n in 2..=6 {
            table
                .push(&mut out, &row_line(&[n.to_string(), "x".into()]), Some(n))
                .unwrap();
        }
        table.finish(&mut out).unwrap();
        let blocks = out.finish().unwrap().blocks;
        assert_eq!(blocks.len(), 3);
        assert_eq!(
            blocks[0].text,
            "| h1 | h2 |\n| --- | --- |\n| 2 | x |\n| 3 | x |"
        );
        assert_eq!(blocks[2].text, "| h1 | h2 |\n| --- | --- |\n| 6 | x |");
        assert_eq!(
            blocks
                .iter()
                .map(|b| b.layout.row_range)
                .collect::<Vec<_>>(),
            [Some((2, 3)), Some((4, 5)), Some((6, 6))]
        );
    }
}
