//! JSON: a Jupyter notebook (an object with `nbformat` and `cells`) is read as the Markdown of
//! its cells (code cells fenced with the kernel's language); other JSON is flattened to
//! `path.to.key: value` lines (arrays indexed, `items[0].name: …`), grouped
//! into blocks. A top-level array or a stream of values (JSON Lines) is a list of records:
//! blocks hold whole records where they fit and carry the records' range.

use serde_json::Value;

use crate::document::{BlockKind, Builder, Layout};
use crate::{Document, Limits, ParseError};

/// The deepest nesting serde_json parses into a `Value` (its recursion limit); deeper input is
/// `Corrupt`, never a stack overflow.
pub(crate) const MAX_DEPTH: usize = 127;

/// Whether no array or object in `text` nests deeper than `MAX_DEPTH`, so that `extract` can
/// parse it; linear, without allocating. (Syntax is checked elsewhere.)
pub(crate) fn within_depth(text: &str) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text.as_bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return false;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    true
}

/// A Jupyter notebook's cells as one Markdown text: Markdown and raw cells as they are, code
/// cells fenced (outputs are left out). `None` when `value` is not a notebook.
fn notebook_markdown(value: &Value) -> Option<String> {
    let notebook = value.as_object()?;
    notebook.get("nbformat")?;
    let cells = notebook.get("cells")?.as_array()?;
    let metadata = notebook.get("metadata");
    let language = metadata
        .and_then(|m| m.pointer("/kernelspec/language"))
        .or_else(|| metadata.and_then(|m| m.pointer("/language_info/name")))
        .and_then(Value::as_str)
        .filter(|l| {
            l.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-_.".contains(c))
        })
        .unwrap_or("");
    let mut markdown = String::new();
    for cell in cells {
        let source = match cell.get("source") {
            Some(Value::String(source)) => source.clone(),
            Some(Value::Array(lines)) => lines.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        match cell.get("cell_type").and_then(Value::as_str) {
            Some("markdown" | "raw") => markdown.push_str(&source),
            Some("code") => {
                // A fence longer than any backtick run inside the code.
                let longest = source.split(|c| c != '`').map(str::len).max().unwrap_or(0);
                let fence = "`".repeat(longest.max(2) + 1);
                markdown.push_str(&format!(
                    "{fence}{language}\n{}\n{fence}",
                    source.trim_end()
                ));
            }
            _ => continue,
        }
        markdown.push_str("\n\n");
    }
    Some(markdown)
}

pub(crate) fn extract(text: &str, limits: &Limits) -> Result<Document, ParseError> {
    let mut values = Vec::new();
    for value in serde_json::Deserializer::from_str(text).into_iter::<Value>() {
        values.push(value.map_err(|e| ParseError::Corrupt(format!("invalid json: {e}")))?);
    }
    if let [value] = values.as_slice() {
        if let Some(markdown) = notebook_markdown(value) {
            return super::markdown::extract(&markdown, limits);
        }
    }
    let mut out = Builder::new(limits);
    let mut lines = Lines::default();
    let mut path = String::new();
    match values.as_slice() {
        [Value::Object(map)] => {
            for (key, value) in map {
                push_key(&mut path, key);
                lines.walk(&mut out, value, &mut path)?;
                path.clear();
                lines.end_record(&mut out)?;
            }
        }
        [Value::Array(items)] => {
            for (i, item) in items.iter().enumerate() {
                path.clear();
                path.push_str(&format!("[{i}]"));
                lines.current = Some(number(i));
                lines.walk(&mut out, item, &mut path)?;
                lines.end_record(&mut out)?;
            }
        }
        stream => {
            for (i, value) in stream.iter().enumerate() {
                path.clear();
                lines.current = (stream.len() > 1).then(|| number(i));
                lines.walk(&mut out, value, &mut path)?;
                lines.end_record(&mut out)?;
            }
        }
    }
    lines.flush(&mut out)?;
    out.finish()
}

fn number(index: usize) -> u32 {
    u32::try_from(index).map_or(u32::MAX, |i| i.saturating_add(1))
}

/// `.key`, or `["odd key"]` for keys that would read ambiguously.
fn push_key(path: &mut String, key: &str) {
    let plain =
        !key.is_empty() && key.trim() == key && !key.contains(['.', '[', ']', ':', '"', '\n']);
    if plain {
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
    } else {
        path.push('[');
        path.push_str(&serde_json::to_string(key).unwrap_or_default());
        path.push(']');
    }
}

#[derive(Default)]
struct Lines {
    text: String,
    /// Records ended in `text`.
    records: usize,
    /// The 1-based number of the record being written, in a list of records.
    current: Option<u32>,
    range: Option<(u32, u32)>,
}

impl Lines {
    fn walk(
        &mut self,
        out: &mut Builder<'_>,
        value: &Value,
        path: &mut String,
    ) -> Result<(), ParseError> {
        let scalar = match value {
            Value::Object(map) if !map.is_empty() => {
                for (key, child) in map {
                    let len = path.len();
                    push_key(path, key);
                    self.walk(out, child, path)?;
                    path.truncate(len);
                }
                return Ok(());
            }
            Value::Array(items) if !items.is_empty() => {
                for (i, child) in items.iter().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    self.walk(out, child, path)?;
                    path.truncate(len);
                }
                return Ok(());
            }
            Value::Object(_) => "{}".to_owned(),
            Value::Array(_) => "[]".to_owned(),
            Value::String(s) => s.trim_end().to_owned(),
            other => other.to_string(),
        };
        let line_len = path.len() + 2 + scalar.len();
        if !self.text.trim().is_empty() && self.text.len() + 1 + line_len > out.limits().block_bytes
        {
            self.flush(out)?;
        }
        if let Some(n) = self.current {
            self.range = Some(self.range.map_or((n, n), |(first, _)| (first, n)));
        }
        if !self.text.is_empty() {
            self.text.push('\n');
        }
        if !path.is_empty() {
            self.text.push_str(path);
            self.text.push_str(": ");
        }
        self.text.push_str(&scalar);
        Ok(())
    }

    /// Closes a record; records of a list are separated by a blank line.
    fn end_record(&mut self, out: &mut Builder<'_>) -> Result<(), ParseError> {
        if self.current.take().is_some() && !self.text.is_empty() {
            self.text.push('\n');
        }
        self.records += 1;
        if self.records >= out.limits().rows_per_block.max(1) {
            self.flush(out)?;
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut Builder<'_>) -> Result<(), ParseError> {
        let layout = Layout {
            row_range: self.range.take(),
            ..Layout::default()
        };
        out.push(BlockKind::Paragraph, &self.text, layout)?;
        self.text.clear();
        self.records = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(json: &str) -> Vec<String> {
        extract(json, &Limits::default())
            .unwrap()
            .blocks
            .into_iter()
            .map(|b| b.text)
            .collect()
    }

    #[test]
    fn notebooks_read_as_their_cells() {
        let sample = std::fs::read_to_string(crate::tests::sample("test_notebook.ipynb")).unwrap();
        let doc = extract(&sample, &Limits::default()).unwrap();
        let text = doc.text();
        assert!(text.contains("# Test Notebook"), "{text}");
        assert!(
            text.contains("```python\nprint(\"markitdown\")\n```"),
            "{text}"
        );
        assert!(!text.contains("nbformat"), "{text}");
        let code = doc
            .blocks
            .iter()
            .find(|b| b.kind == BlockKind::Code)
            .unwrap();
        assert_eq!(
            code.layout.headings.first().map(String::as_str),
            Some("Test Notebook")
        );
        let fenced = r#"{"nbformat": 4, "metadata": {}, "cells": [{"cell_type": "code", "source": ["x = '```'\n", "y"]}]}"#;
        assert_eq!(texts(fenced), ["````\nx = '```'\ny\n````"]);
    }

    #[test]
    fn objects_flatten_to_paths() {
        let json = r#"{"title": "Report", "author": {"name": "Ada", "tags": ["x", "y"]}, "empty": {}, "none": [], "n": 1.5, "ok": true, "nil": null, "a.b": 1}"#;
        assert_eq!(
            texts(json),
            ["title: Report\nauthor.name: Ada\nauthor.tags[0]: x\nauthor.tags[1]: y\nempty: {}\nnone: []\nn: 1.5\nok: true\nnil: null\n[\"a.b\"]: 1"]
        );
    }

    #[test]
    fn arrays_and_json_lines_are_records_with_ranges() {
        let limits = Limits {
            rows_per_block: 2,
            ..Limits::default()
        };
        let doc = extract(r#"[{"id": 1}, {"id": 2}, {"id": 3, "x": [true]}]"#, &limits).unwrap();
        let got: Vec<_> = doc
            .blocks
            .iter()
            .map(|b| (b.text.as_str(), b.layout.row_range))
            .collect();
        assert_eq!(
            got,
            [
                ("[0].id: 1\n\n[1].id: 2", Some((1, 2))),
                ("[2].id: 3\n[2].x[0]: true", Some((3, 3)))
            ]
        );
        let doc = extract("{\"id\": 1}\n{\"id\": 2}\n\n{\"id\": 3}\n", &limits).unwrap();
        let got: Vec<_> = doc
            .blocks
            .iter()
            .map(|b| (b.text.as_str(), b.layout.row_range))
            .collect();
        assert_eq!(
            got,
            [("id: 1\n\nid: 2", Some((1, 2))), ("id: 3", Some((3, 3)))]
        );
    }

    #[test]
    fn scalars_and_blank_values() {
        assert_eq!(texts("\"just a string\""), ["just a string"]);
        assert_eq!(extract("{}", &Limits::default()), Err(ParseError::NoText));
        assert_eq!(
            extract(r#"{"a": ""}"#, &Limits::default()).unwrap().blocks[0].text,
            "a:"
        );
    }

    #[test]
    fn large_records_split_by_size() {
        let limits = Limits {
            block_bytes: 64,
            ..Limits::default()
        };
        let items: Vec<String> = (0..20).map(|i| format!("\"value number {i}\"")).collect();
        let doc = extract(&format!("{{\"list\": [{}]}}", items.join(",")), &limits).unwrap();
        assert!(doc.blocks.len() > 3);
        assert!(doc
            .blocks
            .iter()
            .all(|b| b.text.lines().all(|l| l.starts_with("list["))));
    }

    #[test]
    fn invalid_and_too_deep_json_is_corrupt() {
        assert!(matches!(
            extract("{\"a\": 1,}", &Limits::default()),
            Err(ParseError::Corrupt(_))
        ));
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        let err = extract(&deep, &Limits::default()).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }

    #[test]
    fn depth_check_agrees_with_the_parser() {
        for depth in [MAX_DEPTH, MAX_DEPTH + 1] {
            let array = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            let object = format!("{}\"x\"{}", "{\"[{\\\"\":".repeat(depth), "}".repeat(depth));
            for json in [array, object] {
                let parsed = serde_json::from_str::<Value>(&json).is_ok();
                assert_eq!(within_depth(&json), parsed, "{json}");
                assert_eq!(parsed, depth == MAX_DEPTH);
            }
        }
    }

    #[test]
    fn markitdown_test_json() {
        let text = std::fs::read_to_string(crate::tests::sample("test.json")).unwrap();
        let doc = extract(&text, &Limits::default()).unwrap().text();
        for expected in [
            "5b64c88c-b3c3-4510-bcb8-da0b200602d8",
            "9700dc99-6685-40b4-9a3a-5e406dcb37f3",
        ] {
            assert!(doc.contains(expected), "{doc}");
        }
    }
}
