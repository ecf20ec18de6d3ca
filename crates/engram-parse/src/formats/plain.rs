//! Plain text: paragraphs are runs of non-blank lines.

use crate::document::{BlockKind, Builder, Layout};
use crate::{Document, Limits, ParseError};

pub(crate) fn extract(text: &str, limits: &Limits) -> Result<Document, ParseError> {
    let mut out = Builder::new(limits);
    paragraphs(text, &mut out, &Layout::default())?;
    out.finish()
}

/// Pushes each paragraph of `text` as it is, lines kept, each with `layout`.
pub(crate) fn paragraphs(
    text: &str,
    out: &mut Builder<'_>,
    layout: &Layout,
) -> Result<(), ParseError> {
    let mut start = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        match (line.trim().is_empty(), start) {
            (true, Some(s)) => {
                out.push(BlockKind::Paragraph, &text[s..offset], layout.clone())?;
                start = None;
            }
            (false, None) => start = Some(offset),
            _ => {}
        }
        offset += line.len();
    }
    if let Some(s) = start {
        out.push(BlockKind::Paragraph, &text[s..], layout.clone())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<String> {
        extract(text, &Limits::default())
            .unwrap()
            .blocks
            .into_iter()
            .map(|b| b.text)
            .collect()
    }

    #[test]
    fn paragraphs_split_on_blank_lines() {
        assert_eq!(
            texts("one\nstill one\n\n \t\ntwo\n\n\n  three  "),
            ["one\nstill one", "two", "three"]
        );
        assert_eq!(texts("single"), ["single"]);
    }

    #[test]
    fn blank_text_has_no_text() {
        assert_eq!(
            extract(" \n\n\t ", &Limits::default()),
            Err(ParseError::NoText)
        );
        assert_eq!(extract("", &Limits::default()), Err(ParseError::NoText));
    }
}
