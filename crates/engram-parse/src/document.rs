//! What extraction produces: a document of blocks, each with its place in the source, and the
//! limits that bound it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::ParseError;

/// The text of one file, in reading order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    pub blocks: Vec<Block>,
}

impl Document {
    /// All blocks' text, separated by blank lines.
    pub fn text(&self) -> String {
        let mut text = String::with_capacity(self.blocks.iter().map(|b| b.text.len() + 2).sum());
        for block in &self.blocks {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&block.text);
        }
        text
    }
}

/// One unit of structure: a paragraph, a heading, a table (or a run of its rows), a code block, a
/// list item. Text is never empty and has no leading or trailing whitespace (code keeps its
/// indentation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Block {
    pub text: String,
    pub kind: BlockKind,
    #[serde(default, skip_serializing_if = "Layout::is_empty")]
    pub layout: Layout,
}

/// What a block is. Headings are written `# Title` (one `#` per level), tables as Markdown
/// tables, code fenced with three backticks, list items with their marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum BlockKind {
    Paragraph,
    Heading,
    Table,
    Code,
    ListItem,
    Quote,
}

/// Where a block sits in its source. Stored as the chunk's `layout` JSON; empty fields are left
/// out. Numbers are 1-based.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Layout {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sheet: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slide: Option<u32>,
    /// The heading path in force, outermost first; a heading block's path ends with itself.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headings: Vec<String>,
    /// The first and last row (inclusive) of a table block or of JSON records. For CSV and TSV
    /// the header is row 1, as a spreadsheet numbers them; for JSON arrays and JSON Lines, the
    /// first element is 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub row_range: Option<(u32, u32)>,
    /// `plain` when the format's own reader failed and the block comes from the plain reading
    /// of the file (its words without structure); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reader: Option<String>,
}

impl Layout {
    pub fn is_empty(&self) -> bool {
        self.page.is_none()
            && self.sheet.is_none()
            && self.slide.is_none()
            && self.headings.is_empty()
            && self.row_range.is_none()
            && self.reader.is_none()
    }

    pub(crate) fn under(headings: &[String]) -> Self {
        Self {
            headings: headings.to_vec(),
            ..Self::default()
        }
    }
}

/// Bounds on one extraction. Exceeding `max_bytes`, `max_blocks` or `max_text_bytes` is
/// `ParseError::TooLarge`; `rows_per_block` and `block_bytes` shape table and JSON blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Most table rows (CSV, TSV, spreadsheet sheets, tables in documents) one file may have.
    pub max_rows: usize,
    /// Most pages of a PDF without a text layer (read by OCR, seconds each).
    pub max_ocr_pages: usize,
    /// When to stop before finishing: the item's time budget, or its deletion.
    pub interrupt: Interrupt,
    /// Largest input accepted, in bytes.
    pub max_bytes: usize,
    /// Most blocks one document may have.
    pub max_blocks: usize,
    /// Most text (all blocks together, in bytes) one document may expand to. Table headers are
    /// repeated in every block and JSON paths on every line, so this can exceed `max_bytes`.
    pub max_text_bytes: usize,
    /// Most data rows (or JSON records) in one table (or JSON) block.
    pub rows_per_block: usize,
    /// A table or JSON block closes before a row (or line) that would take its text past this
    /// many bytes, even before `rows_per_block`; a single longer row still makes one block.
    pub block_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_rows: 200_000,
            max_ocr_pages: 200,
            interrupt: Interrupt::default(),
            max_bytes: 64 * 1024 * 1024,
            max_blocks: 100_000,
            max_text_bytes: 128 * 1024 * 1024,
            rows_per_block: 20,
            block_bytes: 4 * 1024,
        }
    }
}

/// When extraction must stop before it finishes: the item's time budget runs out, or the item
/// is deleted meanwhile (a flag its worker sets). Checked for every block and row, between
/// pages, and while an external tool runs (which is then killed).
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    deadline: Option<(Instant, Duration)>,
    cancelled: Option<Arc<AtomicBool>>,
    /// The working memory the reading thread may hold while metered (`engram_alloc::meter`).
    memory: Option<usize>,
}

impl PartialEq for Interrupt {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline
            && self.memory == other.memory
            && match (&self.cancelled, &other.cancelled) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                _ => false,
            }
    }
}

impl Eq for Interrupt {}

impl Interrupt {
    /// Stops `budget` from now, or as soon as `cancelled` is set.
    pub fn new(budget: Option<Duration>, cancelled: Option<Arc<AtomicBool>>) -> Self {
        Self {
            deadline: budget.map(|b| (Instant::now() + b, b)),
            cancelled,
            memory: None,
        }
    }

    /// Also stops once the thread checking holds more than `bytes` since its metering began
    /// (`engram_alloc::meter`).
    pub fn with_memory(mut self, bytes: usize) -> Self {
        self.memory = Some(bytes);
        self
    }

    /// `Err` once extraction must stop.
    pub fn check(&self) -> Result<(), ParseError> {
        if let (Some(limit), Some(live)) = (self.memory, engram_alloc::live()) {
            if live > isize::try_from(limit).unwrap_or(isize::MAX) {
                return Err(ParseError::OverMemory { limit });
            }
        }
        if self
            .cancelled
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            return Err(ParseError::Cancelled);
        }
        match self.deadline {
            Some((at, budget)) if Instant::now() >= at => Err(ParseError::TimedOut { budget }),
            _ => Ok(()),
        }
    }
}

/// Collects blocks, cleaning their text and enforcing the limits.
pub(crate) struct Builder<'l> {
    limits: &'l Limits,
    blocks: Vec<Block>,
    text_bytes: usize,
    rows: usize,
}

impl<'l> Builder<'l> {
    pub(crate) fn new(limits: &'l Limits) -> Self {
        Self {
            limits,
            blocks: Vec::new(),
            text_bytes: 0,
            rows: 0,
        }
    }

    /// Counts one table row against `max_rows` (and checks the interrupt).
    pub(crate) fn count_row(&mut self) -> Result<(), ParseError> {
        self.rows += 1;
        if self.rows > self.limits.max_rows {
            return Err(ParseError::TooLarge {
                what: "table rows",
                limit: self.limits.max_rows,
            });
        }
        self.limits.interrupt.check()
    }

    pub(crate) fn limits(&self) -> &'l Limits {
        self.limits
    }

    /// Adds a block unless its text is blank.
    pub(crate) fn push(
        &mut self,
        kind: BlockKind,
        text: &str,
        layout: Layout,
    ) -> Result<(), ParseError> {
        let text = match kind {
            BlockKind::Code => text.trim_start_matches(['\n', '\r']).trim_end(),
            _ => text.trim(),
        };
        if text.is_empty() {
            return Ok(());
        }
        self.check(text.len())?;
        self.text_bytes += text.len();
        self.blocks.push(Block {
            text: text.to_owned(),
            kind,
            layout,
        });
        Ok(())
    }

    /// Puts a heading in front of every block and under it all their heading paths.
    /// A closing section of the document: a heading of `level` named `title`, then each of
    /// `texts` as a block of `kind` under it; nothing when `texts` is empty.
    pub(crate) fn section(
        &mut self,
        level: usize,
        title: &str,
        kind: BlockKind,
        texts: &[String],
    ) -> Result<(), ParseError> {
        if texts.is_empty() {
            return Ok(());
        }
        let layout = Layout::under(&[title.to_owned()]);
        self.push(
            BlockKind::Heading,
            &format!("{} {title}", "#".repeat(level)),
            layout.clone(),
        )?;
        for text in texts {
            self.push(kind, text, layout.clone())?;
        }
        Ok(())
    }

    /// Puts a paragraph before every block (a page's title beside its own first heading).
    pub(crate) fn prepend_paragraph(&mut self, text: &str) -> Result<(), ParseError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        self.check(text.len())?;
        self.text_bytes += text.len();
        self.blocks.insert(
            0,
            Block {
                text: text.to_owned(),
                kind: BlockKind::Paragraph,
                layout: Layout::default(),
            },
        );
        Ok(())
    }

    pub(crate) fn prepend_heading(&mut self, title: &str) -> Result<(), ParseError> {
        let title = title.trim();
        if title.is_empty() {
            return Ok(());
        }
        let text = format!("# {title}");
        self.check(text.len())?;
        for block in &mut self.blocks {
            block.layout.headings.insert(0, title.to_owned());
        }
        self.text_bytes += text.len();
        let layout = Layout::under(&[title.to_owned()]);
        self.blocks.insert(
            0,
            Block {
                text,
                kind: BlockKind::Heading,
                layout,
            },
        );
        Ok(())
    }

    pub(crate) fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The blocks so far, without the check `finish` makes.
    pub(crate) fn into_blocks(self) -> Vec<Block> {
        self.blocks
    }

    fn check(&self, more_text: usize) -> Result<(), ParseError> {
        self.limits.interrupt.check()?;
        if self.blocks.len() >= self.limits.max_blocks {
            return Err(ParseError::TooLarge {
                what: "blocks",
                limit: self.limits.max_blocks,
            });
        }
        if self.text_bytes.saturating_add(more_text) > self.limits.max_text_bytes {
            return Err(ParseError::TooLarge {
                what: "extracted text bytes",
                limit: self.limits.max_text_bytes,
            });
        }
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<Document, ParseError> {
        if self.blocks.is_empty() {
            return Err(ParseError::NoText);
        }
        Ok(Document {
            blocks: self.blocks,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_json_leaves_out_empty_fields() {
        assert_eq!(serde_json::to_string(&Layout::default()).unwrap(), "{}");
        let layout = Layout {
            headings: vec!["A".into(), "B".into()],
            row_range: Some((2, 21)),
            ..Layout::default()
        };
        let json = serde_json::to_string(&layout).unwrap();
        assert_eq!(json, r#"{"headings":["A","B"],"row_range":[2,21]}"#);
        assert_eq!(serde_json::from_str::<Layout>(&json).unwrap(), layout);
        let block = Block {
            text: "x".into(),
            kind: BlockKind::ListItem,
            layout: Layout::default(),
        };
        assert_eq!(
            serde_json::to_string(&block).unwrap(),
            r#"{"text":"x","kind":"list_item"}"#
        );
    }

    #[test]
    fn builder_skips_blank_blocks_and_enforces_limits() {
        let limits = Limits {
            max_blocks: 2,
            max_text_bytes: 13,
            ..Limits::default()
        };
        let mut builder = Builder::new(&limits);
        builder
            .push(BlockKind::Paragraph, "  \n ", Layout::default())
            .unwrap();
        builder
            .push(BlockKind::Paragraph, " abc ", Layout::default())
            .unwrap();
        assert_eq!(builder.blocks()[0].text, "abc");
        assert!(matches!(
            builder.push(BlockKind::Paragraph, "12345678901", Layout::default()),
            Err(ParseError::TooLarge {
                what: "extracted text bytes",
                ..
            })
        ));
        builder
            .push(BlockKind::Code, "\n  indented\n", Layout::default())
            .unwrap();
        assert_eq!(builder.blocks()[1].text, "  indented");
        assert!(matches!(
            builder.push(BlockKind::Paragraph, "x", Layout::default()),
            Err(ParseError::TooLarge { what: "blocks", .. })
        ));
        assert!(matches!(
            Builder::new(&limits).finish(),
            Err(ParseError::NoText)
        ));
    }
}
