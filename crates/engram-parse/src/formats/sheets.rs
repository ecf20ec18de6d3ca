//! Spreadsheets (XLSX, XLS, ODS) through calamine: each sheet is a heading with the sheet name,
//! then its used range as Markdown tables whose first non-empty row is the header, repeated in
//! every block, with `layout.sheet` and the spreadsheet's own row numbers in `row_range`.

use std::io::Cursor;

use calamine::{Data, Reader};

use crate::formats::numfmt::NumberFormat;

use crate::document::{BlockKind, Builder, Layout};
use crate::formats::table;
use crate::{Document, Format, Limits, ParseError};

fn cell_text(cell: &Data, format: Option<&NumberFormat>) -> String {
    let number = match cell {
        Data::Float(f) => Some(*f),
        Data::Int(i) => Some(*i as f64),
        _ => None,
    };
    if let Some(shown) = number.zip(format).and_then(|(n, f)| f.render_number(n)) {
        return shown;
    }
    match cell {
        Data::Empty => String::new(),
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        Data::DateTime(d) => date_text(d, format),
        other => other.to_string(),
    }
}

/// A cell formatted as a date, time or duration, as its format lays it out (`29-Mar-1940`),
/// else as a reader expects to see it (ISO 8601: `2024-01-01`, `2024-01-01 09:30`, `09:30:15`,
/// a duration `36:00:00`), never the serial number the file stores.
fn date_text(value: &calamine::ExcelDateTime, format: Option<&NumberFormat>) -> String {
    let serial = value.as_f64();
    if !(0.0..=2_958_465.0).contains(&serial) {
        return serial.to_string();
    }
    let clock = |h: u64, m: u64, s: u64| {
        if s == 0 {
            format!("{h:02}:{m:02}")
        } else {
            format!("{h:02}:{m:02}:{s:02}")
        }
    };
    if value.is_duration() {
        let seconds = (serial * 86_400.0).round() as u64;
        return clock(seconds / 3600, seconds / 60 % 60, seconds % 60);
    }
    // The stored serial is a float: 09:30 may read as 09:29:59.999, so it is rounded to the
    // second (carrying into the day).
    let (year, month, day, hour, minute, second, milli) = value.to_ymd_hms_milli();
    let Some(at) = time::Month::try_from(month)
        .ok()
        .and_then(|m| time::Date::from_calendar_date(i32::from(year), m, day).ok())
        .and_then(|d| d.with_hms(hour, minute, second).ok())
        .map(|at| {
            if milli >= 500 {
                at.saturating_add(time::Duration::SECOND)
            } else {
                at
            }
        })
    else {
        return serial.to_string();
    };
    if let Some(shown) = format.and_then(|f| f.render_date(&at)) {
        return shown;
    }
    let time = clock(
        u64::from(at.hour()),
        u64::from(at.minute()),
        u64::from(at.second()),
    );
    let date = format!(
        "{:04}-{:02}-{:02}",
        at.year(),
        u8::from(at.month()),
        at.day()
    );
    if serial < 1.0 {
        time
    } else if at.hour() == 0 && at.minute() == 0 && at.second() == 0 {
        date
    } else {
        format!("{date} {time}")
    }
}

pub(crate) fn extract(
    bytes: &[u8],
    format: Format,
    limits: &Limits,
) -> Result<Document, ParseError> {
    let corrupt =
        |e: calamine::Error| ParseError::Corrupt(format!("unreadable {}: {e}", format.name()));
    // The package of an Excel workbook, opened once for its formats, charts, comments and
    // properties. An Excel binary workbook (XLSB) is the same package with binary sheet parts.
    let mut package = match format {
        Format::Xlsx => Some(crate::formats::zipped::Container::open(bytes, limits)?),
        _ => None,
    };
    let binary = package
        .as_ref()
        .is_some_and(|zip| zip.names().iter().any(|n| n == "xl/workbook.bin"));
    let mut workbook = match format {
        Format::Xls => calamine::Sheets::Xls(
            calamine::Xls::new(Cursor::new(bytes)).map_err(|e| corrupt(e.into()))?,
        ),
        Format::Ods => calamine::Sheets::Ods(
            calamine::Ods::new(Cursor::new(bytes)).map_err(|e| corrupt(e.into()))?,
        ),
        _ if binary => calamine::Sheets::Xlsb(
            calamine::Xlsb::new(Cursor::new(bytes)).map_err(|e| corrupt(e.into()))?,
        ),
        _ => calamine::Sheets::Xlsx(
            calamine::Xlsx::new(Cursor::new(bytes)).map_err(|e| corrupt(e.into()))?,
        ),
    };
    // Number formats (percent, currency, grouping) of cells, read from the package (XLSX) or
    // the workbook's records (XLS); an XLSB's cells keep their values.
    let formats = match (format, package.as_mut()) {
        (Format::Xlsx, Some(zip)) if !binary => {
            let sheets = crate::formats::ooxml::workbook_sheets(zip)?;
            crate::formats::numfmt::cell_formats(zip, &sheets)?
        }
        (Format::Xls, _) => crate::formats::office97::xls_cell_formats(bytes, limits)?,
        _ => std::collections::HashMap::new(),
    };
    let mut out = Builder::new(limits);
    for name in workbook.sheet_names() {
        let range = workbook.worksheet_range(&name).map_err(corrupt)?;
        let first_row = range.start().map_or(1, |(row, _)| row + 1);
        let (top, left) = range.start().unwrap_or((0, 0));
        let sheet_formats = formats.get(&name);
        let mut rows: Vec<(u32, Vec<String>)> = Vec::new();
        let mut text_bytes = 0usize;
        for (i, row) in range.rows().enumerate() {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(j, cell)| {
                    let at = (
                        top + u32::try_from(i).unwrap_or(u32::MAX),
                        left + u32::try_from(j).unwrap_or(u32::MAX),
                    );
                    cell_text(cell, sheet_formats.and_then(|f| f.get(&at)))
                })
                .collect();
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
    if let Some(zip) = package.as_mut() {
        let charts = crate::formats::ooxml::package_charts(zip, "xl/charts/")?;
        out.section(2, "Charts", BlockKind::Table, &charts)?;
        if !binary {
            let comments = crate::formats::ooxml::workbook_comments(zip)?;
            out.section(2, "Comments", BlockKind::Paragraph, &comments)?;
        }
        let lines = crate::formats::ooxml::document_properties(zip)?;
        crate::formats::ooxml::push_properties(&lines, &mut out)?;
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::sample;

    /// An Excel binary workbook (the XLSX package with binary sheet parts) reads as one.
    #[test]
    fn binary_workbooks_read_their_cells() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/calamine/base.xlsb");
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(crate::detect(&bytes, "base.xlsb", None), Ok(Format::Xlsx));
        let doc = extract(&bytes, Format::Xlsx, &Limits::default()).unwrap();
        let text = doc.text();
        for expected in [
            "## Sheet1",
            "| String | 1 | 1.1 | true |",
            "2010-10-10 10:10:10",
            "line3",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from\n{text}");
        }
        assert!(doc.blocks.iter().all(|b| b.layout.reader.is_none()));
    }

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
