//! Markdown: one block per top-level element (a list gives one block per item), each the
//! element's own source, so tables stay Markdown tables and code blocks stay whole; headings
//! are written `# Title` and kept as the heading path of what follows.

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

use super::table::TableBlocks;
use crate::document::{BlockKind, Builder, Layout};
use crate::{Document, Limits, ParseError};

pub(crate) fn extract(text: &str, limits: &Limits) -> Result<Document, ParseError> {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_YAML_STYLE_METADATA_BLOCKS;
    let mut out = Builder::new(limits);
    let mut headings = Headings::default();
    // The top-level element being read: what it is and where its source is.
    let mut current: Option<(Top, Range<usize>)> = None;
    let mut depth = 0usize;
    let mut inline = String::new();
    for (event, range) in Parser::new_ext(text, options).into_offset_iter() {
        match event {
            Event::Start(tag) => {
                if depth == 0 {
                    inline.clear();
                    current = Some((Top::of(&tag), range));
                } else if depth == 1
                    && matches!(tag, Tag::Item)
                    && matches!(current, Some((Top::List, _)))
                {
                    out.push(BlockKind::ListItem, &text[range], headings.layout())?;
                }
                depth += 1;
            }
            Event::End(end) => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    if let Some((top, range)) = current.take() {
                        finish(&mut out, &mut headings, top, end, &text[range], &inline)?;
                    }
                }
            }
            Event::Text(t) | Event::Code(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                inline.push_str(&t)
            }
            Event::SoftBreak | Event::HardBreak => inline.push(' '),
            _ => {}
        }
    }
    out.finish()
}

/// What a top-level element becomes.
#[derive(Clone, Copy)]
enum Top {
    Heading(usize),
    List,
    Table,
    FencedCode,
    IndentedCode,
    Quote,
    Html,
    Other,
}

impl Top {
    fn of(tag: &Tag<'_>) -> Self {
        match tag {
            Tag::Heading { level, .. } => Self::Heading(*level as usize),
            Tag::List(_) => Self::List,
            Tag::Table(_) => Self::Table,
            Tag::CodeBlock(CodeBlockKind::Fenced(_)) => Self::FencedCode,
            Tag::CodeBlock(CodeBlockKind::Indented) => Self::IndentedCode,
            Tag::BlockQuote(_) => Self::Quote,
            Tag::HtmlBlock => Self::Html,
            _ => Self::Other,
        }
    }
}

fn finish(
    out: &mut Builder<'_>,
    headings: &mut Headings,
    top: Top,
    end: TagEnd,
    source: &str,
    inline: &str,
) -> Result<(), ParseError> {
    match top {
        Top::Heading(level) => {
            let title = inline.split_whitespace().collect::<Vec<_>>().join(" ");
            if !title.is_empty() {
                headings.enter(level, title.clone());
                out.push(
                    BlockKind::Heading,
                    &format!("{} {title}", "#".repeat(level)),
                    headings.layout(),
                )?;
            }
        }
        Top::List => {}
        Top::Table => table(out, source, headings.layout())?,
        Top::FencedCode => out.push(BlockKind::Code, source, headings.layout())?,
        // Indented code becomes fenced, so every code block reads alike.
        Top::IndentedCode => out.push(
            BlockKind::Code,
            &format!("```\n{}\n```", inline.trim_end()),
            headings.layout(),
        )?,
        Top::Quote => out.push(BlockKind::Quote, source, headings.layout())?,
        Top::Html => out.push(
            BlockKind::Paragraph,
            &super::html::fragment_text(source),
            headings.layout(),
        )?,
        Top::Other if matches!(end, TagEnd::MetadataBlock(_)) => {
            out.push(BlockKind::Code, source, headings.layout())?
        }
        Top::Other => out.push(BlockKind::Paragraph, source, headings.layout())?,
    }
    Ok(())
}

/// A table's source split into blocks of rows under its header and delimiter lines.
fn table(out: &mut Builder<'_>, source: &str, layout: Layout) -> Result<(), ParseError> {
    let mut lines = source.trim().lines();
    let header = match (lines.next(), lines.next()) {
        (Some(head), Some(delimiter)) => format!("{}\n{}", head.trim(), delimiter.trim()),
        _ => return out.push(BlockKind::Table, source, layout),
    };
    let mut blocks = TableBlocks::new(header, layout);
    for line in lines {
        blocks.push(out, line.trim(), None)?;
    }
    blocks.finish(out)
}

/// The open headings, outermost first.
#[derive(Default)]
struct Headings(Vec<(usize, String)>);

impl Headings {
    fn enter(&mut self, level: usize, title: String) {
        while self.0.last().is_some_and(|(l, _)| *l >= level) {
            self.0.pop();
        }
        self.0.push((level, title));
    }

    fn layout(&self) -> Layout {
        Layout {
            headings: self.0.iter().map(|(_, t)| t.clone()).collect(),
            ..Layout::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(md: &str) -> Vec<(BlockKind, String, Vec<String>)> {
        extract(md, &Limits::default())
            .unwrap()
            .blocks
            .into_iter()
            .map(|b| (b.kind, b.text, b.layout.headings))
            .collect()
    }

    const SAMPLE: &str = "---
title: Notes
---

# Guide

Intro *text*
over two lines.

## Install

- one
- two
  - nested

1. first

2. second

```rust
fn main() {

    println!(\"hi\");
}
```

| a | b |
|---|---|
| 1 | 2 |

Setext
======

> quoted
> text

    indented code

<div align=\"center\"><b>html</b> block</div>

### Deep

text
";

    #[test]
    fn blocks_follow_structure_with_heading_paths() {
        let got = blocks(SAMPLE);
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let expected = vec![
            (
                BlockKind::Code,
                "---\ntitle: Notes\n---".to_owned(),
                path(&[]),
            ),
            (BlockKind::Heading, "# Guide".to_owned(), path(&["Guide"])),
            (
                BlockKind::Paragraph,
                "Intro *text*\nover two lines.".to_owned(),
                path(&["Guide"]),
            ),
            (
                BlockKind::Heading,
                "## Install".to_owned(),
                path(&["Guide", "Install"]),
            ),
            (
                BlockKind::ListItem,
                "- one".to_owned(),
                path(&["Guide", "Install"]),
            ),
            (
                BlockKind::ListItem,
                "- two\n  - nested".to_owned(),
                path(&["Guide", "Install"]),
            ),
            (
                BlockKind::ListItem,
                "1. first".to_owned(),
                path(&["Guide", "Install"]),
            ),
            (
                BlockKind::ListItem,
                "2. second".to_owned(),
                path(&["Guide", "Install"]),
            ),
            (
                BlockKind::Code,
                "```rust\nfn main() {\n\n    println!(\"hi\");\n}\n```".to_owned(),
                path(&["Guide", "Install"]),
            ),
            (
                BlockKind::Table,
                "| a | b |\n|---|---|\n| 1 | 2 |".to_owned(),
                path(&["Guide", "Install"]),
            ),
            (BlockKind::Heading, "# Setext".to_owned(), path(&["Setext"])),
            (
                BlockKind::Quote,
                "> quoted\n> text".to_owned(),
                path(&["Setext"]),
            ),
            (
                BlockKind::Code,
                "```\nindented code\n```".to_owned(),
                path(&["Setext"]),
            ),
            (
                BlockKind::Paragraph,
                "html block".to_owned(),
                path(&["Setext"]),
            ),
            (
                BlockKind::Heading,
                "### Deep".to_owned(),
                path(&["Setext", "Deep"]),
            ),
            (
                BlockKind::Paragraph,
                "text".to_owned(),
                path(&["Setext", "Deep"]),
            ),
        ];
        assert_eq!(got, expected);
    }

    #[test]
    fn long_tables_split_repeating_the_header() {
        let mut md = String::from("# T\n\n| n | sq |\n| -: | -- |\n");
        for i in 0..45 {
            md.push_str(&format!("| {i} | {} |\n", i * i));
        }
        let doc = extract(&md, &Limits::default()).unwrap();
        let tables: Vec<_> = doc
            .blocks
            .iter()
            .filter(|b| b.kind == BlockKind::Table)
            .collect();
        assert_eq!(tables.len(), 3);
        assert!(tables
            .iter()
            .all(|t| t.text.starts_with("| n | sq |\n| -: | -- |\n")));
        assert!(tables[2].text.ends_with("| 44 | 1936 |"));
        assert_eq!(tables[0].layout.headings, ["T"]);
    }

    #[test]
    fn hostile_markdown_is_linear() {
        crate::tests::assert_linear(40_000, |n| {
            for unit in [">", "[", "*a", "- ", "`a", "<div>", "# "] {
                let _ = extract(&unit.repeat(n), &Limits::default());
            }
        });
    }
}
