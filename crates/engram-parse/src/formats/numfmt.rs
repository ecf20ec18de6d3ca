//! Excel number formats, so a cell reads as the sheet shows it: `12.5%` rather than `0.125`,
//! `$1,234.50` rather than `1234.5`, `1,234,567` rather than `1234567`. Formats come from
//! `xl/styles.xml` (custom `numFmt`s and the built-in ids) through each cell's style (`s`) in
//! the sheet's XML (XLS: `office97::xls_cell_formats`). Dates and times are told apart by
//! calamine (see `sheets`) and shown by their format's own layout (`29-Mar-1940`, `3/14/24
//! 9:05 PM`); a built-in or system-dependent date format reads as ISO 8601. Text and `General`
//! cells are left as they are. Only percent, decimals, thousands grouping and literal prefixes
//! and suffixes (currency symbols, units) are rendered: colours, conditions and fractions are
//! not.

use std::collections::HashMap;

use quick_xml::events::Event;
use quick_xml::Reader;

use crate::formats::ooxml::{attr, local};
use crate::formats::zipped::Container;
use crate::ParseError;

/// How a cell's number is shown: as a number, or as a date or time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NumberFormat {
    Number(Digits),
    Date(Vec<DatePart>),
}

/// A number's digits, sign and decorations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Digits {
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
    /// The format of a code's first section; `None` for `General`, text, and what is shown as
    /// stored.
    pub(crate) fn parse(code: &str) -> Option<Self> {
        Digits::parse(code).map(Self::Number).or_else(|| {
            date_parts(code)
                .filter(|parts| !shown_as_iso(parts))
                .map(Self::Date)
        })
    }

    /// A number as the format shows it; `None` for a date format.
    pub(crate) fn render_number(&self, value: f64) -> Option<String> {
        match self {
            Self::Number(digits) => Some(digits.render(value)),
            Self::Date(_) => None,
        }
    }

    /// A date or time as the format lays it out; `None` for a number format.
    pub(crate) fn render_date(&self, at: &time::PrimitiveDateTime) -> Option<String> {
        let Self::Date(parts) = self else {
            return None;
        };
        const MONTHS: [&str; 12] = [
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ];
        let twelve = parts.iter().any(|p| matches!(p, DatePart::AmPm(_)));
        let month = usize::from(u8::from(at.month())) - 1;
        let weekday = at.weekday().to_string();
        let mut out = String::new();
        for part in parts {
            match part {
                DatePart::Literal(text) => out.push_str(text),
                DatePart::Year(2) => out.push_str(&format!("{:02}", at.year().rem_euclid(100))),
                DatePart::Year(_) => out.push_str(&format!("{:04}", at.year())),
                DatePart::Month(1) => out.push_str(&(month + 1).to_string()),
                DatePart::Month(2) => out.push_str(&format!("{:02}", month + 1)),
                DatePart::Month(3) => out.push_str(&MONTHS[month][..3]),
                DatePart::Month(4) => out.push_str(MONTHS[month]),
                DatePart::Month(_) => out.push_str(&MONTHS[month][..1]),
                DatePart::Day(1) => out.push_str(&at.day().to_string()),
                DatePart::Day(2) => out.push_str(&format!("{:02}", at.day())),
                DatePart::Day(3) => out.push_str(&weekday[..3]),
                DatePart::Day(_) => out.push_str(&weekday),
                DatePart::Hour(width) => {
                    let hour = if twelve {
                        (at.hour() + 11) % 12 + 1
                    } else {
                        at.hour()
                    };
                    out.push_str(&format!("{hour:0width$}", width = usize::from(*width)));
                }
                DatePart::Minute(width) => out.push_str(&format!(
                    "{:0width$}",
                    at.minute(),
                    width = usize::from(*width)
                )),
                DatePart::Second(width) => out.push_str(&format!(
                    "{:0width$}",
                    at.second(),
                    width = usize::from(*width)
                )),
                DatePart::AmPm(short) => {
                    let pm = at.hour() >= 12;
                    out.push_str(match (pm, short) {
                        (false, false) => "AM",
                        (true, false) => "PM",
                        (false, true) => "A",
                        (true, true) => "P",
                    });
                }
            }
        }
        Some(out)
    }
}

/// Whether a layout shows what the ISO 8601 reading of a date shows (`yyyy-mm-dd`,
/// `yyyy-mm-dd hh:mm`, `hh:mm`, as LibreOffice writes imported dates): such cells need no
/// format of their own, which spares reading every sheet a second time for them (it halved a
/// workbook's rows per second).
fn shown_as_iso(parts: &[DatePart]) -> bool {
    ["yyyy-mm-dd", "yyyy-mm-dd hh:mm", "hh:mm"]
        .iter()
        .any(|iso| date_parts(iso).as_deref() == Some(parts))
}

/// A piece of a date or time format, with its width (`mmm`: 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DatePart {
    Literal(String),
    Year(u8),
    Month(u8),
    Day(u8),
    Hour(u8),
    Minute(u8),
    Second(u8),
    /// `AM/PM` (false) or `A/P` (true).
    AmPm(bool),
}

/// The layout of a date or time format's first section; `None` when it shows no date or time,
/// or shows what a layout cannot (elapsed time `[h]`, fractions of a second, the system's own
/// date format `[$-F800]`, other calendars).
fn date_parts(code: &str) -> Option<Vec<DatePart>> {
    let section = code.split(';').next().unwrap_or_default();
    let mut parts: Vec<DatePart> = Vec::new();
    let mut chars = section.chars().peekable();
    let literal = |parts: &mut Vec<DatePart>, text: &str| match parts.last_mut() {
        Some(DatePart::Literal(last)) => last.push_str(text),
        _ => parts.push(DatePart::Literal(text.to_owned())),
    };
    while let Some(c) = chars.next() {
        let lower = c.to_ascii_lowercase();
        let mut run = 1u8;
        if matches!(lower, 'y' | 'm' | 'd' | 'h' | 's' | 'e') {
            while chars
                .peek()
                .is_some_and(|n| n.to_ascii_lowercase() == lower)
            {
                chars.next();
                run = run.saturating_add(1);
            }
        }
        match lower {
            '"' => {
                let text: String = chars.by_ref().take_while(|q| *q != '"').collect();
                literal(&mut parts, &text);
            }
            '\\' => {
                if let Some(next) = chars.next() {
                    literal(&mut parts, &next.to_string());
                }
            }
            '[' => {
                let inner: String = chars.by_ref().take_while(|b| *b != ']').collect();
                // A locale (`[$-409]`) or a colour shows nothing; elapsed time and the
                // system's own formats are not laid out here.
                let system = inner.to_ascii_uppercase().starts_with("$-F");
                let elapsed = inner
                    .chars()
                    .all(|i| matches!(i.to_ascii_lowercase(), 'h' | 'm' | 's'));
                if system || elapsed {
                    return None;
                }
                if let Some(symbol) = inner.strip_prefix('$') {
                    literal(&mut parts, symbol.split('-').next().unwrap_or_default());
                }
            }
            'y' | 'e' => parts.push(DatePart::Year(if run <= 2 && lower == 'y' { 2 } else { 4 })),
            'd' => parts.push(DatePart::Day(run.min(4))),
            'h' => parts.push(DatePart::Hour(run.min(2))),
            's' => parts.push(DatePart::Second(run.min(2))),
            'm' => {
                // Minutes right after an hour or right before seconds; a month otherwise.
                let after_hour = parts
                    .iter()
                    .rev()
                    .find(|p| !matches!(p, DatePart::Literal(_)))
                    .is_some_and(|p| matches!(p, DatePart::Hour(_)));
                let mut ahead = chars.clone();
                let before_second = loop {
                    match ahead.next().map(|n| n.to_ascii_lowercase()) {
                        Some('s') => break true,
                        Some(n) if n.is_alphanumeric() || n == '"' || n == '[' => break false,
                        Some(_) => {}
                        None => break false,
                    }
                };
                if run <= 2 && (after_hour || before_second) {
                    parts.push(DatePart::Minute(run));
                } else {
                    parts.push(DatePart::Month(run.min(5)));
                }
            }
            'a' => {
                let rest: String = std::iter::once(c).chain(chars.clone().take(4)).collect();
                if rest.eq_ignore_ascii_case("AM/PM") {
                    chars.nth(3);
                    parts.push(DatePart::AmPm(false));
                } else if rest.get(..3).is_some_and(|r| r.eq_ignore_ascii_case("A/P")) {
                    chars.nth(1);
                    parts.push(DatePart::AmPm(true));
                } else {
                    return None;
                }
            }
            // Padding takes the next character; fractions of a second, digits, text and other
            // calendars are not a date layout.
            '_' | '*' => {
                chars.next();
            }
            '0' | '#' | '?' | '@' | 'g' | 'b' => return None,
            c if c.is_alphabetic() => return None,
            other => literal(&mut parts, &other.to_string()),
        }
    }
    parts
        .iter()
        .any(|p| !matches!(p, DatePart::Literal(_) | DatePart::AmPm(_)))
        .then_some(parts)
}

impl Digits {
    /// The format of a code's first section; `None` for `General`, text and dates or times.
    fn parse(code: &str) -> Option<Self> {
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
    fn render(&self, value: f64) -> String {
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
        NumberFormat::parse(code)?.render_number(value)
    }

    fn laid_out(code: &str, at: (i32, u8, u8, u8, u8, u8)) -> Option<String> {
        let (year, month, day, hour, minute, second) = at;
        let at = time::Date::from_calendar_date(year, time::Month::try_from(month).unwrap(), day)
            .unwrap()
            .with_hms(hour, minute, second)
            .unwrap();
        NumberFormat::parse(code)?.render_date(&at)
    }

    /// xlsx2csv's `junk-small.xlsx` shows `29-Mar-1940`, `25-Jul-2008`, `08-07-25`.
    #[test]
    fn dates_read_as_the_sheet_lays_them_out() {
        let day = (1940, 3, 29, 0, 0, 0);
        assert_eq!(laid_out("d-mmm-yyyy", day).as_deref(), Some("29-Mar-1940"));
        assert_eq!(laid_out("dd\\-mmm\\-yy", day).as_deref(), Some("29-Mar-40"));
        assert_eq!(
            laid_out("yy-mm-dd", (2008, 7, 25, 0, 0, 0)).as_deref(),
            Some("08-07-25")
        );
        assert_eq!(
            laid_out("dddd, mmmm d, yyyy", day).as_deref(),
            Some("Friday, March 29, 1940")
        );
        let evening = (2024, 3, 14, 21, 5, 9);
        assert_eq!(
            laid_out("m/d/yy h:mm AM/PM", evening).as_deref(),
            Some("3/14/24 9:05 PM")
        );
        assert_eq!(laid_out("hh:mm:ss", evening).as_deref(), Some("21:05:09"));
        assert_eq!(laid_out("mm:ss", evening).as_deref(), Some("05:09"));
        assert_eq!(
            laid_out("[$-409]mmm\" \"yyyy;@", evening).as_deref(),
            Some("Mar 2024")
        );
        // A layout that shows what ISO 8601 shows is left to the ISO reading.
        for iso in ["yyyy-mm-dd", "YYYY\\-MM\\-DD", "hh:mm"] {
            assert_eq!(NumberFormat::parse(iso), None, "{iso}");
        }
        // What a layout cannot show reads as ISO 8601 (see `sheets`): elapsed time, the
        // system's own long date, fractions of a second; numbers are not dates.
        for none in [
            "[h]:mm:ss",
            "[$-F800]dddd, mmmm dd, yyyy",
            "hh:mm:ss.000",
            "0.00",
            "General",
        ] {
            assert_eq!(laid_out(none, evening), None, "{none}");
        }
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
