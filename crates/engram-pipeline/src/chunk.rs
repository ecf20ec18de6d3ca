//! Structure-aware chunking by token count.

pub(crate) use engram_embed::TokenCounter;
use engram_parse::{Block, BlockKind, Interrupt, Layout};
use serde_json::Value;
use text_splitter::{ChunkConfig, ChunkSizer, TextSplitter};

/// Adapts a [`TokenCounter`] to text-splitter's sizing of the pieces of `text`. The splitter
/// sizes many overlapping candidate pieces, each a slice of `text`: they are counted from one
/// tokenization of the whole (the tokens a piece overlaps), not by tokenizing each (chunking
/// took 8% of ingestion's CPU that way). A piece cut inside a word may count a token or two
/// fewer than it would alone; the splitter cuts inside words only when a word is longer than a
/// chunk.
struct Sizer<'a> {
    counter: &'a dyn TokenCounter,
    text: &'a str,
    spans: Option<Vec<(usize, usize)>>,
}

impl<'a> Sizer<'a> {
    fn new(counter: &'a dyn TokenCounter, text: &'a str) -> Self {
        Self {
            counter,
            text,
            spans: counter.token_spans(text),
        }
    }

    /// Where `piece` lies in the text, if it is a slice of it.
    fn range_of(&self, piece: &str) -> Option<(usize, usize)> {
        let base = self.text.as_ptr() as usize;
        let start = (piece.as_ptr() as usize).checked_sub(base)?;
        let end = start + piece.len();
        (end <= self.text.len()).then_some((start, end))
    }
}

impl ChunkSizer for Sizer<'_> {
    fn size(&self, chunk: &str) -> usize {
        match (&self.spans, self.range_of(chunk)) {
            (Some(spans), Some((start, end))) => engram_embed::tokens_in(spans, start, end),
            _ => self.counter.count_tokens(chunk),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkerOptions {
    /// Most tokens in a chunk (the model's window less its special tokens).
    pub max_tokens: usize,
    /// A heading starts a new chunk once the current one has at least this many tokens.
    pub min_tokens: usize,
    /// Tokens repeated between the pieces of a block too long for one chunk.
    pub overlap_tokens: usize,
}

impl Default for ChunkerOptions {
    fn default() -> Self {
        Self {
            max_tokens: 200,
            min_tokens: 48,
            overlap_tokens: 24,
        }
    }
}

/// One chunk: text and where it sits in its source.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub text: String,
    pub layout: Value,
}

/// Splits documents into chunks.
pub struct Chunker<'a> {
    counter: &'a dyn TokenCounter,
    options: ChunkerOptions,
    interrupt: Option<&'a Interrupt>,
}

/// A block too long for one chunk is cut at line (or word) boundaries into segments of at most
/// this size (a few chunks each) before the token-aware splitter sees it: the splitter sizes
/// candidate pieces by tokenizing them, so its cost grows with the text it is given, and one
/// multi-megabyte paragraph took minutes and a gigabyte.
const SEGMENT_BYTES: usize = 4 * 1024;

/// A block longer than this is over the window whatever its words: it is not tokenized whole.
const SURELY_LONG_BYTES: usize = 32 * 1024;

/// `text` in segments of at most `most` bytes, cut after a newline where one falls in the
/// second half of the window, else after whitespace, else at a character boundary.
fn segments(text: &str, most: usize) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        if rest.len() <= most {
            return Some(std::mem::take(&mut rest));
        }
        let mut cut = most.max(1);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let window = &rest[..cut];
        let after = |pred: fn(char) -> bool| {
            window
                .char_indices()
                .rev()
                .find(|&(_, c)| pred(c))
                .map(|(i, c)| i + c.len_utf8())
                .filter(|&at| at > most / 2)
        };
        let at = after(|c| c == '\n')
            .or_else(|| after(char::is_whitespace))
            .unwrap_or(cut);
        let at = if at == 0 { rest.len() } else { at };
        let (head, tail) = rest.split_at(at);
        rest = tail;
        Some(head)
    })
}

/// Blocks that may share a chunk: same page, sheet and slide.
fn same_region(a: &Layout, b: &Layout) -> bool {
    a.page == b.page && a.sheet == b.sheet && a.slide == b.slide
}

fn layout_json(layout: &Layout) -> Value {
    serde_json::to_value(layout).unwrap_or(Value::Object(serde_json::Map::new()))
}

struct Pending {
    text: String,
    tokens: usize,
    layout: Layout,
}

impl<'a> Chunker<'a> {
    pub fn new(counter: &'a dyn TokenCounter, options: ChunkerOptions) -> Self {
        Self {
            counter,
            options,
            interrupt: None,
        }
    }

    /// Stops chunking early (between blocks and pieces) once `interrupt` fires; the caller
    /// checks it and drops the partial result.
    pub fn with_interrupt(mut self, interrupt: &'a Interrupt) -> Self {
        self.interrupt = Some(interrupt);
        self
    }

    fn interrupted(&self) -> bool {
        self.interrupt.is_some_and(|i| i.check().is_err())
    }

    /// Chunks a document's blocks in order.
    pub fn chunk_blocks(&self, blocks: &[Block]) -> Vec<Chunk> {
        let mut chunks = Vec::new();
        let mut pending: Option<Pending> = None;
        for block in blocks {
            if self.interrupted() {
                return chunks;
            }
            // A block this long is always over the window: it is not tokenized whole.
            let tokens = if block.text.len() > SURELY_LONG_BYTES {
                usize::MAX
            } else {
                self.counter.count_tokens(&block.text)
            };
            if let Some(current) = pending.take() {
                let fits = current.tokens.saturating_add(tokens) < self.options.max_tokens;
                let heading_break =
                    block.kind == BlockKind::Heading && current.tokens >= self.options.min_tokens;
                if fits && !heading_break && same_region(&current.layout, &block.layout) {
                    pending = Some(merge(current, block, tokens));
                    continue;
                }
                chunks.push(finish(current));
            }
            if tokens > self.options.max_tokens {
                self.split_long(block, &mut chunks);
            } else {
                pending = Some(Pending {
                    text: block.text.clone(),
                    tokens,
                    layout: block.layout.clone(),
                });
            }
        }
        chunks.extend(pending.map(finish));
        chunks
    }

    /// Chunks plain text (memories, app content): paragraphs merged up to the token limit.
    pub fn chunk_text(&self, text: &str) -> Vec<Chunk> {
        let blocks: Vec<Block> = text
            .split("\n\n")
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| Block {
                text: p.to_owned(),
                kind: BlockKind::Paragraph,
                layout: Layout::default(),
            })
            .collect();
        self.chunk_blocks(&blocks)
    }

    fn split_long(&self, block: &Block, chunks: &mut Vec<Chunk>) {
        let overlap = self.options.overlap_tokens.min(self.options.max_tokens / 2);
        let layout = layout_json(&block.layout);
        for segment in segments(&block.text, SEGMENT_BYTES) {
            let config = ChunkConfig::new(self.options.max_tokens)
                .with_overlap(overlap)
                .unwrap_or_else(|_| ChunkConfig::new(self.options.max_tokens))
                .with_sizer(Sizer::new(self.counter, segment));
            let splitter = TextSplitter::new(config);
            for piece in splitter.chunks(segment) {
                if self.interrupted() {
                    return;
                }
                chunks.push(Chunk {
                    text: piece.to_owned(),
                    layout: layout.clone(),
                });
            }
        }
    }
}

fn merge(mut current: Pending, block: &Block, tokens: usize) -> Pending {
    current.text.push_str("\n\n");
    current.text.push_str(&block.text);
    current.tokens += tokens + 1;
    current.layout.row_range = match (current.layout.row_range, block.layout.row_range) {
        (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
        (range, None) | (None, range) => range,
    };
    if current.layout.headings.is_empty() {
        current.layout.headings.clone_from(&block.layout.headings);
    }
    current
}

fn finish(pending: Pending) -> Chunk {
    Chunk {
        layout: layout_json(&pending.layout),
        text: pending.text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per whitespace-separated word: enough to test the rules.
    struct Words;

    impl TokenCounter for Words {
        fn count_tokens(&self, text: &str) -> usize {
            text.split_whitespace().count()
        }
    }

    /// [`Words`] that also gives each word's byte range, so pieces are sized from one pass.
    struct SpannedWords;

    impl TokenCounter for SpannedWords {
        fn count_tokens(&self, text: &str) -> usize {
            Words.count_tokens(text)
        }

        fn token_spans(&self, text: &str) -> Option<Vec<(usize, usize)>> {
            let base = text.as_ptr() as usize;
            Some(
                text.split_whitespace()
                    .map(|w| {
                        let start = w.as_ptr() as usize - base;
                        (start, start + w.len())
                    })
                    .collect(),
            )
        }
    }

    fn block(text: &str, kind: BlockKind, layout: Layout) -> Block {
        Block {
            text: text.into(),
            kind,
            layout,
        }
    }

    fn words(n: usize) -> String {
        (0..n)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    const SMALL: ChunkerOptions = ChunkerOptions {
        max_tokens: 10,
        min_tokens: 4,
        overlap_tokens: 2,
    };

    proptest::proptest! {
        /// Any text of words and paragraph breaks: every chunk fits the window and every word
        /// survives, in order.
        #[test]
        fn chunks_fit_the_window_and_lose_nothing(
            paragraphs in proptest::collection::vec(proptest::collection::vec("[a-z]{1,8}", 0..40), 1..8)
        ) {
            let text = paragraphs
                .iter()
                .map(|p| p.join(" "))
                .collect::<Vec<_>>()
                .join("\n\n");
            let chunker = Chunker::new(&Words, SMALL);
            let chunks = chunker.chunk_text(&text);
            for chunk in &chunks {
                proptest::prop_assert!(Words.count_tokens(&chunk.text) <= SMALL.max_tokens, "{chunk:?}");
            }
            // Sized from one pass over the text, the chunks are the same.
            let spanned = Chunker::new(&SpannedWords, SMALL).chunk_text(&text);
            proptest::prop_assert_eq!(&spanned, &chunks);
            let mut remaining = text.split_whitespace().peekable();
            for chunk in &chunks {
                for word in chunk.text.split_whitespace() {
                    if remaining.peek() == Some(&word) {
                        remaining.next();
                    }
                }
            }
            proptest::prop_assert!(remaining.peek().is_none(), "lost from {:?}", remaining.collect::<Vec<_>>());
        }
    }

    #[test]
    fn paragraphs_merge_up_to_the_limit() {
        let chunker = Chunker::new(&Words, SMALL);
        let chunks = chunker.chunk_text(&format!("{}\n\n{}\n\n{}", words(3), words(4), words(5)));
        assert_eq!(chunks.len(), 2);
        assert!(chunks
            .iter()
            .all(|c| Words.count_tokens(&c.text) <= SMALL.max_tokens));
        assert_eq!(chunks[0].text, format!("{}\n\n{}", words(3), words(4)));
    }

    #[test]
    fn long_blocks_are_split_within_the_limit_and_nothing_is_lost() {
        let chunker = Chunker::new(&Words, SMALL);
        let text = words(37);
        let chunks = chunker.chunk_text(&text);
        assert!(chunks.len() >= 4);
        for chunk in &chunks {
            assert!(
                Words.count_tokens(&chunk.text) <= SMALL.max_tokens,
                "{}",
                chunk.text
            );
        }
        for w in text.split_whitespace() {
            assert!(
                chunks
                    .iter()
                    .any(|c| c.text.split_whitespace().any(|x| x == w)),
                "{w} lost"
            );
        }
    }

    #[test]
    fn pages_never_share_a_chunk_and_headings_start_chunks() {
        let chunker = Chunker::new(&Words, SMALL);
        let page = |n| Layout {
            page: Some(n),
            ..Layout::default()
        };
        let blocks = [
            block("a b", BlockKind::Paragraph, page(1)),
            block("c d", BlockKind::Paragraph, page(2)),
            block("e f g h", BlockKind::Paragraph, page(2)),
            block(
                "# Title",
                BlockKind::Heading,
                Layout {
                    page: Some(2),
                    headings: vec!["Title".into()],
                    ..Layout::default()
                },
            ),
            block(
                "i j",
                BlockKind::Paragraph,
                Layout {
                    page: Some(2),
                    headings: vec!["Title".into()],
                    ..Layout::default()
                },
            ),
        ];
        let chunks = chunker.chunk_blocks(&blocks);
        let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, ["a b", "c d\n\ne f g h", "# Title\n\ni j"]);
        assert_eq!(chunks[0].layout["page"], 1);
        assert_eq!(chunks[2].layout["headings"], serde_json::json!(["Title"]));
    }

    #[test]
    fn table_row_ranges_merge() {
        let chunker = Chunker::new(&Words, SMALL);
        let rows = |a, b| Layout {
            sheet: Some("S".into()),
            row_range: Some((a, b)),
            ..Layout::default()
        };
        let blocks = [
            block("r1 r2", BlockKind::Table, rows(1, 3)),
            block("r3 r4", BlockKind::Table, rows(4, 6)),
        ];
        let chunks = chunker.chunk_blocks(&blocks);
        assert_eq!(chunks.len(), 1);
        assert_eq!(chunks[0].layout["row_range"], serde_json::json!([1, 6]));
        assert_eq!(chunks[0].layout["sheet"], "S");
    }

    #[test]
    fn empty_input_gives_no_chunks() {
        let chunker = Chunker::new(&Words, SMALL);
        assert!(chunker.chunk_text("  \n\n ").is_empty());
        assert!(chunker.chunk_blocks(&[]).is_empty());
    }

    #[test]
    fn long_blocks_are_cut_at_lines_then_words_and_lose_nothing() {
        let lines: String = (0..2000).map(|i| format!("line {i} ends here\n")).collect();
        let pieces: Vec<&str> = segments(&lines, 1000).collect();
        assert!(pieces.iter().all(|p| p.len() <= 1000 && p.ends_with('\n')));
        assert_eq!(pieces.concat(), lines);
        let words = "mot ".repeat(1000);
        let pieces: Vec<&str> = segments(&words, 101).collect();
        assert!(pieces.iter().all(|p| p.len() <= 101 && p.ends_with(' ')));
        assert_eq!(pieces.concat(), words);
        let unbroken = "é".repeat(1000);
        let pieces: Vec<&str> = segments(&unbroken, 101).collect();
        assert!(pieces.iter().all(|p| p.len() <= 101));
        assert_eq!(pieces.concat(), unbroken);
        let spaced = "\u{3000}".repeat(100);
        assert_eq!(segments(&spaced, 10).collect::<String>(), spaced);
    }

    #[test]
    fn a_long_block_is_chunked_within_the_window() {
        let text: String = (0..20_000).map(|i| format!("word{i} ")).collect();
        let chunker = Chunker::new(&Words, SMALL);
        let chunks = chunker.chunk_text(&text);
        assert!(chunks
            .iter()
            .all(|c| Words.count_tokens(&c.text) <= SMALL.max_tokens));
        let first: Vec<&str> = chunks
            .iter()
            .flat_map(|c| c.text.split_whitespace())
            .collect();
        assert!(first.contains(&"word19999"));
    }

    #[test]
    fn an_interrupt_stops_chunking() {
        let text: String = (0..20_000).map(|i| format!("word{i} ")).collect();
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let interrupt = Interrupt::new(None, Some(flag));
        let chunker = Chunker::new(&Words, SMALL).with_interrupt(&interrupt);
        assert!(chunker.chunk_text(&text).is_empty());
    }
}
