//! Excel number formats, so a cell reads as the sheet shows it: `12.5%` rather than `0.125`,
//! `$1,234.50` rather than `1234.5`, `1,234,567` rather than `1234567`. Formats come from
//! `xl/styles.xml` (custom `numFmt`s and the built-in ids) through each cell's style (`s`) in
//! the sheet's XML (XLS: `office97::xls_cell_formats`). Dates and times are calamine's (see `sheets`); text and `General` cells are
//! left as they are. Only percent, decimals, thousands grouping and literal prefixes and
//! suffixes (currency symbols, units) are rendered: colours, conditions and fractions are not.

use std::collections::HashMap;

use quick_xml::events::Event;
use quick_xml::Reader;

use crate::formats::ooxml::{attr, local};
use crate::formats::zipped::Container;
use crate::ParseError;

/// How a number is shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NumberFormat {
    percent: bool,
    decimals: usize,
    thousands: bool,
    prefix: String,
    suffix: String,
}

/// The code of a built-in number format id that is not a date.
pub(crate) fn builtin(id: u32) -> Option<&'static str> {
    Some(match id {
        1 => "0",
        2 => "0.00",
        3 | 37 | 38 => "#,##0",
        4 | 39 | 40 => "#,##0.00",
        9 => "0%",
        10 => "0.00%",
        _ => return None,
    })
}

impl NumberFormat {
    /// The format of a code's first section; `None` for `General`, text and dates or times.
    pub(crate) fn parse(code: &str) -> Option<Self> {
        let section = code.split(';').next().unwrap_or_default();
        let (mut prefix, mut suffix) = (String::new(), String::new());
        let (mut digits, mut after_point, mut decimals) = (false, false, 0usize);
        let (mut percent, mut thousands) = (false, false);
        let mut chars = section.chars().peekable();
        let literal = |c: &str, digits: bool, prefix: &mut String, suffix: &mut String| {
            if digits {
                suffix.push_str(c);
            } else {
                prefix.push_str(c);
            }
        };
        while let Some(c) = chars.next() {
            match c {
                '"' => {
                    let mut text = String::new();
                    for q in chars.by_ref() {
                        if q == '"' {
                            break;
                        }
                        text.push(q);
                    }
                    literal(&text, digits, &mut prefix, &mut suffix);
                }
                '\\' => {
                    if let Some(next) = chars.next() {
                        literal(&next.to_string(), digits, &mut prefix, &mut suffix);
                    }
                }
                '[' => {
                    let mut inner = String::new();
                    for b in chars.by_ref() {
                        if b == ']' {
                            break;
                        }
                        inner.push(b);
                    }
                    // `[$€-407]`: a currency symbol; other brackets (colours, conditions) show
                    // nothing.
                    if let Some(symbol) = inner.strip_prefix('$') {
                        let symbol = symbol.split('-').next().unwrap_or_default();
                        literal(symbol, digits, &mut prefix, &mut suffix);
                    }
                }
                '0' | '#' | '?' => {
                    digits = true;
                    if after_point {
                        decimals += 1;
                    }
                }
                '.' => after_point = true,
                ',' if !after_point => thousands = true,
                '%' => percent = true,
                // Padding and alignment take the next character: not shown.
                '_' | '*' => {
                    chars.next();
                }
                ' ' => literal(" ", digits, &mut prefix, &mut suffix),
                'E' | 'e' | '/' | '@' => return None,
                c if c.is_alphabetic() => {
                    // Date and time letters (y, m, d, h, s) are calamine's; `General` too.
                    return None;
                }
                other => literal(&other.to_string(), digits, &mut prefix, &mut suffix),
            }
        }
        let plain = !percent && !thousands && prefix.trim().is_empty() && suffix.trim().is_empty();
        if !digits || (plain && decimals == 0) {
            return None;
        }
        Some(Self {
            percent,
            decimals: decimals.min(15),
            thousands,
            prefix,
            suffix,
        })
    }

    /// `value` as the format shows it.
    pub(crate) fn render(&self, value: f64) -> String {
        let shown = if self.percent { value * 100.0 } else { value };
        let text = format!("{:.*}", self.decimals, shown.abs());
        let (whole, fraction) = text.split_once('.').unwrap_or((text.as_str(), ""));
        let mut grouped = String::new();
        for (i, digit) in whole.chars().enumerate() {
            if self.thousands && i > 0 && (whole.len() - i) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(digit);
        }
        let sign = if shown < 0.0 && text.chars().any(|c| c != '0' && c != '.') {
            "-"
        } else {
            ""
        };
        let point = if fraction.is_empty() { "" } else { "." };
        let percent = if self.percent { "%" } else { "" };
        format!(
            "{sign}{}{grouped}{point}{fraction}{percent}{}",
            self.prefix, self.suffix
        )
    }
}

/// Formats by sheet name, then by cell (row, column).
pub(crate) type SheetFormats = HashMap<String, HashMap<(u32, u32), NumberFormat>>;

/// The number formats of a workbook's cells that show numbers other than as stored, by sheet
/// name and (row, column), both from 0. Empty when no cell style has such a format, which
/// spares reading the sheets again.
pub(crate) fn cell_formats(
    zip: &mut Container<'_>,
    sheets: &[(String, String)],
) -> Result<SheetFormats, ParseError> {
    let mut out = HashMap::new();
    let Some(styles) = zip.text("xl/styles.xml")? else {
        return Ok(out);
    };
    let mut custom: HashMap<u32, String> = HashMap::new();
    let mut by_style: Vec<Option<NumberFormat>> = Vec::new();
    let mut reader = Reader::from_str(&styles);
    let mut in_cell_xfs = false;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e) | Event::Empty(e)) => match local(e.name().as_ref()) {
                b"numFmt" => {
                    if let (Some(id), Some(code)) = (
                        attr(&e, b"numFmtId").and_then(|i| i.parse().ok()),
                        attr(&e, b"formatCode"),
                    ) {
                        custom.insert(id, code);
                    }
                }
                b"cellXfs" => in_cell_xfs = true,
                b"xf" if in_cell_xfs => {
                    let id: u32 = attr(&e, b"numFmtId")
                        .and_then(|i| i.parse().ok())
                        .unwrap_or(0);
                    let code = custom.get(&id).map(String::as_str).or(builtin(id));
                    by_style.push(code.and_then(NumberFormat::parse));
                }
                _ => {}
            },
            Ok(Event::End(e)) if local(e.name().as_ref()) == b"cellXfs" => in_cell_xfs = false,
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    if by_style.iter().all(Option::is_none) {
        return Ok(out);
    }
    for (name, target) in sheets {
        let Some(xml) = zip.text(target)? else {
            continue;
        };
        let mut cells = HashMap::new();
        let mut reader = Reader::from_str(&xml);
        loop {
            match reader.read_event() {
                Ok(Event::Start(e) | Event::Empty(e)) if local(e.name().as_ref()) == b"c" => {
                    let format = attr(&e, b"s")
                        .and_then(|s| s.parse::<usize>().ok())
                        .and_then(|s| by_style.get(s).cloned().flatten());
                    if let (Some(format), Some(at)) =
                        (format, attr(&e, b"r").as_deref().and_then(cell_position))
                    {
                        cells.insert(at, format);
                    }
                }
                Ok(Event::Eof) | Err(_) => break,
                Ok(_) => {}
            }
        }
        if !cells.is_empty() {
            out.insert(name.clone(), cells);
        }
    }
    Ok(out)
}

/// `B12` as (row 11, column 1).
fn cell_position(reference: &str) -> Option<(u32, u32)> {
    let letters: String = reference
        .chars()
        .take_while(char::is_ascii_alphabetic)
        .collect();
    let row: u32 = reference[letters.len()..].parse().ok()?;
    let mut column = 0u32;
    for c in letters.chars() {
        column = column
            .checked_mul(26)?
            .checked_add(u32::from(c.to_ascii_uppercase() as u8 - b'A') + 1)?;
    }
    Some((row.checked_sub(1)?, column.checked_sub(1)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(code: &str, value: f64) -> Option<String> {
        NumberFormat::parse(code).map(|f| f.render(value))
    }

    #[test]
    fn numbers_read_as_the_sheet_shows_them() {
        assert_eq!(shown("0.0%", 0.125).as_deref(), Some("12.5%"));
        assert_eq!(shown("0%", 0.5).as_deref(), Some("50%"));
        assert_eq!(shown("[$$]#,##0.00", 1234.5).as_deref(), Some("$1,234.50"));
        assert_eq!(shown("#,##0", 1234567.0).as_deref(), Some("1,234,567"));
        assert_eq!(
            shown("#,##0.00\" EUR\"", -9876.5).as_deref(),
            Some("-9,876.50 EUR")
        );
        assert_eq!(shown("[$€-407] #,##0.00", 12.0).as_deref(), Some("€ 12.00"));
        assert_eq!(shown("0.00", 2.0).as_deref(), Some("2.00"));
        assert_eq!(
            shown("#,##0_);[Red](#,##0)", 1000.0).as_deref(),
            Some("1,000")
        );
        for none in ["General", "0", "@", "yyyy-mm-dd", "0.00E+00", "# ?/?"] {
            assert_eq!(shown(none, 1.0), None, "{none}");
        }
    }

    #[test]
    fn cell_references_are_rows_and_columns() {
        assert_eq!(cell_position("A1"), Some((0, 0)));
        assert_eq!(cell_position("B12"), Some((11, 1)));
        assert_eq!(cell_position("AA3"), Some((2, 26)));
        assert_eq!(cell_position("3"), None);
    }
}
