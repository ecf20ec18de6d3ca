//! CSV and TSV: the first non-empty record is the header; the rest become Markdown-table blocks
//! that repeat it, each with the range of rows it holds.

use super::table::{header_lines, row_line, TableBlocks};
use crate::document::{Builder, Layout};
use crate::{Document, Limits, ParseError};

/// `delimiter` is `b','` (with RFC 4180 quoting) or `b'\t'` (no quoting: TSV has none, and a
/// stray quote must not swallow the rest of the file).
pub(crate) fn extract(text: &str, delimiter: u8, limits: &Limits) -> Result<Document, ParseError> {
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .delimiter(delimiter)
        .quoting(delimiter != b'\t')
        .from_reader(text.as_bytes());
    let mut out = Builder::new(limits);
    let mut table: Option<TableBlocks> = None;
    let mut record = csv::StringRecord::new();
    let mut number: u32 = 0;
    loop {
        match reader.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                return Err(ParseError::Corrupt(format!(
                    "invalid {}: {e}",
                    if delimiter == b'\t' { "tsv" } else { "csv" }
                )))
            }
        }
        number = number.saturating_add(1);
        if record.iter().all(|cell| cell.trim().is_empty()) {
            continue;
        }
        let cells: Vec<&str> = record.iter().collect();
        match table.as_mut() {
            None => table = Some(TableBlocks::new(header_lines(&cells), Layout::default())),
            Some(table) => table.push(&mut out, &row_line(&cells), Some(number))?,
        }
    }
    if let Some(table) = table {
        table.finish(&mut out)?;
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_blocks_repeat_the_header_with_row_ranges() {
        let mut csv = String::from("name,age,\"city, country\"\n");
        for i in 1..=45 {
            csv.push_str(&format!("person {i},{i},\"Paris, FR\"\r\n"));
        }
        let doc = extract(&csv, b',', &Limits::default()).unwrap();
        assert_eq!(doc.blocks.len(), 3);
        for block in &doc.blocks {
            assert!(
                block
                    .text
                    .starts_with("| name | age | city, country |\n| --- | --- | --- |\n"),
                "{}",
                block.text
            );
        }
        assert!(doc.blocks[0]
            .text
            .contains("\n| person 1 | 1 | Paris, FR |\n"));
        let ranges: Vec<_> = doc.blocks.iter().map(|b| b.layout.row_range).collect();
        assert_eq!(ranges, [Some((2, 21)), Some((22, 41)), Some((42, 46))]);
        let json = serde_json::to_value(&doc.blocks[0]).unwrap();
        assert_eq!(json["kind"], "table");
        assert_eq!(json["layout"], serde_json::json!({"row_range": [2, 21]}));
    }

    #[test]
    fn quoted_newlines_ragged_rows_and_pipes() {
        let csv = "a,b\n\"multi\nline\",x|y\nonly one\n,,\n1,2,3\n";
        let doc = extract(csv, b',', &Limits::default()).unwrap();
        assert_eq!(doc.blocks.len(), 1);
        assert_eq!(
            doc.blocks[0].text,
            "| a | b |\n| --- | --- |\n| multi line | x\\|y |\n| only one |\n| 1 | 2 | 3 |"
        );
        assert_eq!(doc.blocks[0].layout.row_range, Some((2, 5)));
    }

    #[test]
    fn tsv_has_no_quoting() {
        let doc = extract(
            "h1\th2\n\"open\tquote\nnext\trow\n",
            b'\t',
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(
            doc.blocks[0].text,
            "| h1 | h2 |\n| --- | --- |\n| \"open | quote |\n| next | row |"
        );
    }

    #[test]
    fn header_only_and_empty() {
        let doc = extract("just,a,header\n", b',', &Limits::default()).unwrap();
        assert_eq!(
            doc.blocks[0].text,
            "| just | a | header |\n| --- | --- | --- |"
        );
        assert_eq!(doc.blocks[0].layout.row_range, None);
        assert_eq!(
            extract(",,\n\n", b',', &Limits::default()),
            Err(ParseError::NoText)
        );
    }

    #[test]
    fn wide_rows_close_blocks_by_size() {
        let limits = Limits {
            block_bytes: 100,
            ..Limits::default()
        };
        let long = "x".repeat(60);
        let csv = format!("h\n{long}\n{long}\n{long}\n");
        let doc = extract(&csv, b',', &limits).unwrap();
        assert_eq!(doc.blocks.len(), 3);
    }
}
