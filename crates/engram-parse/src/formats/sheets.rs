//! Spreadsheets (XLSX, XLS, ODS) through calamine: each sheet is a heading with the sheet name,
//! then its used range as Markdown tables whose first non-empty row is the header, repeated in
//! every block, with `layout.sheet` and the spreadsheet's own row numbers in `row_range`.

use std::io::Cursor;

use calamine::{Data, Reader};

use crate::document::{BlockKind, Builder, Layout};
use crate::formats::table;
use crate::{Document, Format, Limits, ParseError};

fn cell_text(cell: &Data) -> String {
    match cell {
        Data::Empty => String::new(),
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        other => other.to_string(),
    }
}

pub(crate) fn extract(
    bytes: &[u8],
    format: Format,
    limits: &Limits,
) -> Result<Document, ParseError> {
    let corrupt =
        |e: calamine::Error| ParseError::Corrupt(format!("unreadable {}: {e}", format.name()));
    let mut workbook = match format {
        Format::Xls => calamine::Sheets::Xls(
            calamine::Xls::new(Cursor::new(bytes)).map_err(|e| corrupt(e.into()))?,
        ),
        Format::Ods => calamine::Sheets::Ods(
            calamine::Ods::new(Cursor::new(bytes)).map_err(|e| corrupt(e.into()))?,
        ),
        _ => calamine::Sheets::Xlsx(
            calamine::Xlsx::new(Cursor::new(bytes)).map_err(|e| corrupt(e.into()))?,
        ),
    };
    let mut out = Builder::new(limits);
    for name in workbook.sheet_names() {
        let range = workbook.worksheet_range(&name).map_err(corrupt)?;
        let first_row = range.start().map_or(1, |(row, _)| row + 1);
        let mut rows: Vec<(u32, Vec<String>)> = Vec::new();
        let mut text_bytes = 0usize;
        for (i, row) in range.rows().enumerate() {
            let cells: Vec<String> = row.iter().map(cell_text).collect();
            if cells.iter().all(|c| c.trim().is_empty()) {
                continue;
            }
            text_bytes += cells.iter().map(String::len).sum::<usize>();
            if text_bytes > limits.max_text_bytes {
                return Err(ParseError::TooLarge {
                    what: "extracted text bytes",
                    limit: limits.max_text_bytes,
                });
            }
            rows.push((first_row + u32::try_from(i).unwrap_or(u32::MAX), cells));
        }
        if rows.is_empty() {
            continue;
        }
        let layout = Layout {
            sheet: Some(name.clone()),
            headings: vec![name.clone()],
            ..Layout::default()
        };
        out.push(BlockKind::Heading, &format!("## {name}"), layout.clone())?;
        let header_number = rows[0].0;
        // Row numbers of data rows follow the sheet, blank rows skipped.
        let mut blocks = table::TableBlocks::new(table::header_lines(&rows[0].1), layout);
        let width = rows.iter().map(|(_, r)| r.len()).max().unwrap_or(0);
        for (number, mut cells) in rows.into_iter().skip(1) {
            cells.resize(width, String::new());
            blocks.push(&mut out, &table::row_line(&cells), Some(number))?;
        }
        let _ = header_number;
        blocks.finish(&mut out)?;
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::sample;

    #[test]
    fn workbooks_by_sheet() {
        for (name, format) in [("test.xlsx", Format::Xlsx), ("test.xls", Format::Xls)] {
            let doc = extract(
                &std::fs::read(sample(name)).unwrap(),
                format,
                &Limits::default(),
            )
            .unwrap();
            let text = doc.text();
            for s in [
                "09060124-b5e7-4717-9d07-3c046eb",
                "6ff4173b-42a5-4784-9b19-f49caff4d93d",
                "affc7dad-52dc-4b98-9b5d-51e65d8a8ad0",
            ] {
                assert!(text.contains(s), "{name}: {s}");
            }
            let table = doc
                .blocks
                .iter()
                .find(|b| b.kind == BlockKind::Table)
                .unwrap();
            assert!(
                table.layout.sheet.is_some() && table.layout.row_range.is_some(),
                "{table:?}"
            );
            assert!(table.text.lines().nth(1).unwrap().starts_with("| ---"));
        }
        assert!(extract(b"PK\x03\x04broken", Format::Xlsx, &Limits::default()).is_err());
    }
}
