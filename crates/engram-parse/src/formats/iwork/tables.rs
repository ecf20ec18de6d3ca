//! Tables (`TST.TableModelArchive`), shared by the three applications: cells live in tiles of
//! rows (`TST.Tile`, 256 rows each by default), each row a buffer of cell records and a table of
//! 16-bit offsets into it, one per column (-1 for an empty cell). A record starts with its
//! storage version and cell type, then flags saying which fields follow. Numbers 10 and later
//! write version 5 records (`cell_storage_buffer`); earlier versions wrote version 4 ones
//! (`cell_storage_buffer_pre_bnc`), read here for their text, numbers, dates and booleans.
//! Strings and rich text are keys into the table's data lists.

use std::collections::{BTreeMap, HashMap, HashSet};

use time::macros::{datetime, format_description};

use super::iwa::Objects;
use super::proto::Message;
use super::text;
use crate::document::{Builder, Layout};
use crate::formats::table::{header_lines, row_line, TableBlocks};
use crate::ParseError;

/// Type of `TST.TableInfoArchive`, the drawable holding a table.
pub(crate) const TABLE_INFO: u32 = 6000;
/// Type of `TST.TableModelArchive`.
const TABLE_MODEL: u32 = 6001;
const TILE: u32 = 6002;
/// Types of `TST.TableDataList` and of the segments of a long one.
const DATA_LIST: &[u32] = &[6005, 6201];
const DATA_LIST_SEGMENT: u32 = 6011;
/// Type of `TST.RichTextPayloadArchive`.
const RICH_TEXT_PAYLOAD: &[u32] = &[6218];
/// Most columns read per row.
const MAX_COLUMNS: usize = 16_384;

/// Most cells, empty ones between filled ones included, held for one table.
const MAX_CELLS: usize = 4_000_000;

/// A table's cells, row by row.
pub(crate) struct Table {
    /// The table's name ("Table 1"), and whether the application shows it.
    pub(crate) name: String,
    pub(crate) name_shown: bool,
    /// Non-empty rows: their 1-based number in the table and their cells.
    pub(crate) rows: Vec<(u32, Vec<String>)>,
}

/// Rows of cells being filled in, sparse input made dense (within `MAX_CELLS`).
#[derive(Default)]
pub(crate) struct Grid {
    rows: BTreeMap<u64, Vec<String>>,
    cells: usize,
}

impl Grid {
    /// Puts `text` at (`row`, `column`), both from 0.
    pub(crate) fn put(&mut self, row: u64, column: usize, text: String) -> Result<(), ParseError> {
        let cells = self.rows.entry(row).or_default();
        if cells.len() <= column {
            self.cells += column + 1 - cells.len();
            if self.cells > MAX_CELLS {
                return Err(ParseError::TooLarge {
                    what: "table cells",
                    limit: MAX_CELLS,
                });
            }
            cells.resize(column + 1, String::new());
        }
        cells[column] = text;
        Ok(())
    }

    /// The table's rows, numbered from 1.
    pub(crate) fn rows(self) -> Vec<(u32, Vec<String>)> {
        self.rows
            .into_iter()
            .map(|(n, cells)| (u32::try_from(n + 1).unwrap_or(u32::MAX), cells))
            .collect()
    }
}

/// A table model's data list: entries by key (rich text read once per key).
struct DataList<'a> {
    entries: HashMap<u64, Message<'a>>,
    rich: HashMap<u32, String>,
}

impl<'a> DataList<'a> {
    fn load(objects: &'a Objects, id: Option<u64>) -> Self {
        let mut entries = HashMap::new();
        if let Some(list) = id.and_then(|id| objects.typed(id, DATA_LIST)) {
            let mut segments: Vec<u64> = list.references(4).collect();
            segments.sort_unstable();
            segments.dedup();
            let segments = segments
                .into_iter()
                .filter_map(|s| objects.typed(s, &[DATA_LIST_SEGMENT]));
            for entry in std::iter::once(list)
                .chain(segments)
                .flat_map(|m| m.messages(3))
            {
                if let Some(key) = entry.uint(1) {
                    entries.entry(key).or_insert(entry);
                }
            }
        }
        Self {
            entries,
            rich: HashMap::new(),
        }
    }

    fn string(&self, key: u32) -> Option<String> {
        self.entries.get(&u64::from(key))?.string(3)
    }

    /// A rich-text entry: its payload's storage, as plain text.
    fn rich(&mut self, objects: &Objects, key: u32) -> String {
        if let Some(text) = self.rich.get(&key) {
            return text.clone();
        }
        let text = self
            .entries
            .get(&u64::from(key))
            .and_then(|entry| entry.reference(9))
            .and_then(|payload| objects.typed(payload, RICH_TEXT_PAYLOAD)?.reference(1))
            .and_then(|storage| text::storage(objects, storage))
            .map(|storage| text::plain(objects, storage))
            .unwrap_or_default();
        self.rich.insert(key, text.clone());
        text
    }
}

/// What a cell record holds.
#[derive(Debug, PartialEq)]
enum Value {
    Empty,
    Text(u32),
    Rich(u32),
    /// A number, already as decimal text.
    Number(String),
    /// Seconds since 2001-01-01.
    Date(f64),
    Bool(bool),
    /// Seconds.
    Duration(f64),
}

/// Reads little-endian fields from a cell record.
struct Record<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Record<'a> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let bytes = self.bytes.get(self.at..self.at.checked_add(N)?)?;
        self.at += N;
        bytes.try_into().ok()
    }

    fn u32(&mut self) -> Option<u32> {
        self.take::<4>().map(u32::from_le_bytes)
    }

    fn f64(&mut self) -> Option<f64> {
        self.take::<8>().map(f64::from_le_bytes)
    }

    /// A field the flags say is there (`Some(Some(value))`), absent (`Some(None)`), or
    /// truncated (`None`).
    fn read_if<T>(
        &mut self,
        present: bool,
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        if present {
            read(self).map(Some)
        } else {
            Some(None)
        }
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        self.take_slice(n).map(|_| ())
    }

    fn take_slice(&mut self, n: usize) -> Option<&'a [u8]> {
        let bytes = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(bytes)
    }
}

/// A version 5 record: version, type, 6 reserved bytes, 32-bit flags, then the flagged fields.
fn cell_v5(bytes: &[u8]) -> Option<Value> {
    let flags = u32::from_le_bytes(bytes.get(8..12)?.try_into().ok()?);
    let mut record = Record { bytes, at: 12 };
    let decimal = record.read_if(flags & 0x1 != 0, |r| r.take::<16>().map(decimal128))?;
    let double = record.read_if(flags & 0x2 != 0, Record::f64)?;
    let seconds = record.read_if(flags & 0x4 != 0, Record::f64)?;
    let string = record.read_if(flags & 0x8 != 0, Record::u32)?;
    let rich = record.read_if(flags & 0x10 != 0, Record::u32)?;
    let number = || decimal.clone().or_else(|| double.map(format_double));
    Some(match bytes[1] {
        2 | 10 => Value::Number(number()?),
        3 => Value::Text(string?),
        5 => Value::Date(seconds?),
        6 => Value::Bool(double? > 0.0),
        7 => Value::Duration(double?),
        9 => Value::Rich(rich?),
        _ => Value::Empty,
    })
}

/// A version 4 record: version, type, 2 reserved bytes, 16-bit flags, 6 more bytes, then the
/// flagged fields in their own order.
fn cell_v4(bytes: &[u8]) -> Option<Value> {
    let flags = u16::from_le_bytes(bytes.get(4..6)?.try_into().ok()?);
    let mut record = Record { bytes, at: 12 };
    for flag in [0x2, 0x80, 0x400, 0x800, 0x4, 0x8, 0x1000] {
        if flags & flag != 0 {
            record.skip(4)?;
        }
    }
    let string = record.read_if(flags & 0x10 != 0, Record::u32)?;
    let number = record.read_if(flags & 0x20 != 0, Record::f64)?;
    let date = record.read_if(flags & 0x40 != 0, Record::f64)?;
    let rich = record.read_if(flags & 0x200 != 0, Record::u32)?;
    Some(match bytes[1] {
        2 | 10 => Value::Number(format_double(number?)),
        3 => Value::Text(string?),
        5 => Value::Date(date?),
        6 => Value::Bool(number? > 0.0),
        7 => Value::Duration(number?),
        9 => rich.map_or(Value::Text(string?), Value::Rich),
        _ => Value::Empty,
    })
}

/// An IEEE 754 decimal128 with a binary integer significand, as Numbers stores numbers: exact.
fn decimal128(b: [u8; 16]) -> String {
    let exponent = i32::from(u16::from(b[15] & 0x7F) << 7 | u16::from(b[14] >> 1)) - 0x1820;
    let mantissa = b[..14]
        .iter()
        .rev()
        .fold(u128::from(b[14] & 1), |m, &byte| m << 8 | u128::from(byte));
    let sign = if b[15] & 0x80 != 0 && mantissa != 0 {
        "-"
    } else {
        ""
    };
    let digits = mantissa.to_string();
    let text = match usize::try_from(-exponent) {
        _ if mantissa == 0 => "0".to_owned(),
        // A whole number, written out unless absurdly long.
        Err(_) if exponent <= 20 => {
            format!("{digits}{}", "0".repeat(exponent.unsigned_abs() as usize))
        }
        Ok(shift) if shift <= 40 => {
            let padded = format!(
                "{}{digits}",
                "0".repeat((shift + 1).saturating_sub(digits.len()))
            );
            let (whole, fraction) = padded.split_at(padded.len() - shift);
            let fraction = fraction.trim_end_matches('0');
            if fraction.is_empty() {
                whole.to_owned()
            } else {
                format!("{whole}.{fraction}")
            }
        }
        _ => format!("{digits}e{exponent}"),
    };
    format!("{sign}{text}")
}

/// A double as the shortest decimal that reads back the same, whole numbers without `.0`.
fn format_double(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

/// A date: the day, with the time of day when it is not midnight.
fn format_date(seconds: f64) -> String {
    if !seconds.is_finite() || seconds.abs() > 1e11 {
        return String::new();
    }
    let epoch = datetime!(2001-01-01 0:00);
    let Some(at) = epoch.checked_add(time::Duration::seconds(seconds.round() as i64)) else {
        return String::new();
    };
    let format = if at.time() == time::Time::MIDNIGHT {
        at.format(format_description!("[year]-[month]-[day]"))
    } else {
        at.format(format_description!(
            "[year]-[month]-[day] [hour]:[minute]:[second]"
        ))
    };
    format.unwrap_or_default()
}

/// A duration as `[D days, ]H:MM:SS[.fff]`.
fn format_duration(seconds: f64) -> String {
    if !seconds.is_finite() || seconds.abs() > 1e12 {
        return String::new();
    }
    let millis = (seconds * 1000.0).round() as i64;
    let (sign, millis) = if millis < 0 {
        ("-", -millis)
    } else {
        ("", millis)
    };
    let (total, fraction) = (millis / 1000, millis % 1000);
    let (days, rest) = (total / 86_400, total % 86_400);
    let mut clock = format!("{}:{:02}:{:02}", rest / 3600, rest / 60 % 60, rest % 60);
    if fraction != 0 {
        clock.push_str(format!(".{fraction:03}").trim_end_matches('0'));
    }
    match days {
        0 => format!("{sign}{clock}"),
        1 => format!("{sign}1 day, {clock}"),
        n => format!("{sign}{n} days, {clock}"),
    }
}

/// The cell records of one row: (column, record) for each non-empty column.
fn row_cells<'a>(buffer: &'a [u8], offsets: &[u8], wide: bool) -> Vec<(usize, &'a [u8])> {
    let starts: Vec<(usize, usize)> = offsets
        .chunks_exact(2)
        .take(MAX_COLUMNS)
        .enumerate()
        .filter_map(|(column, o)| {
            let offset = i16::from_le_bytes([o[0], o[1]]);
            let offset = usize::try_from(offset).ok()?;
            Some((column, if wide { offset * 4 } else { offset }))
        })
        .collect();
    let mut cells = Vec::with_capacity(starts.len());
    for (i, &(column, start)) in starts.iter().enumerate() {
        let end = starts
            .get(i + 1)
            .map_or(buffer.len(), |&(_, next)| next)
            .min(buffer.len());
        if let Some(record) = buffer.get(start..end).filter(|r| r.len() >= 12) {
            cells.push((column, record));
        }
    }
    cells
}

/// Reads the table of `TST.TableModelArchive` `id`; its cells may hold no more than `limit`
/// bytes of text.
pub(crate) fn read(objects: &Objects, id: u64, limit: usize) -> Result<Option<Table>, ParseError> {
    let Some(model) = objects.typed(id, &[TABLE_MODEL]) else {
        return Ok(None);
    };
    let Some((store, tiles)) = model.message(4).and_then(|s| Some((s, s.message(3)?))) else {
        return Ok(None);
    };
    let strings = DataList::load(objects, store.reference(4));
    let mut rich = DataList::load(objects, store.reference(17));
    let tile_size = u64::from(tiles.uint32(2).unwrap_or(256));
    let mut grid = Grid::default();
    let mut text_bytes = 0usize;
    let mut seen = HashSet::new();
    for tile_ref in tiles.messages(1) {
        let base = tile_ref.uint(1).unwrap_or(0).saturating_mul(tile_size);
        let Some(tile) = tile_ref
            .reference(2)
            .filter(|&t| seen.insert(t))
            .and_then(|t| objects.typed(t, &[TILE]))
        else {
            continue;
        };
        for row in tile.messages(5) {
            let number = base.saturating_add(row.uint(1).unwrap_or(0));
            let (buffer, offsets, wide, version5) = match (row.bytes(6), row.bytes(7)) {
                (Some(buffer), Some(offsets)) => {
                    (buffer, offsets, row.bool(8).unwrap_or(false), true)
                }
                _ => match (row.bytes(3), row.bytes(4)) {
                    (Some(buffer), Some(offsets)) => (buffer, offsets, false, false),
                    _ => continue,
                },
            };
            for (column, record) in row_cells(buffer, offsets, wide) {
                let value = match (record[0], version5) {
                    (5, true) => cell_v5(record),
                    (4, false) => cell_v4(record),
                    _ => None,
                };
                let text = match value.unwrap_or(Value::Empty) {
                    Value::Empty => continue,
                    Value::Text(key) => strings.string(key).unwrap_or_default(),
                    Value::Rich(key) => rich.rich(objects, key),
                    Value::Number(n) => n,
                    Value::Date(seconds) => format_date(seconds),
                    Value::Bool(b) => if b { "TRUE" } else { "FALSE" }.to_owned(),
                    Value::Duration(seconds) => format_duration(seconds),
                };
                if text.trim().is_empty() {
                    continue;
                }
                text_bytes += text.len();
                if text_bytes > limit {
                    return Err(ParseError::TooLarge {
                        what: "extracted text bytes",
                        limit,
                    });
                }
                grid.put(number, column, text)?;
            }
        }
    }
    Ok(Some(Table {
        name: model.string(8).unwrap_or_default(),
        name_shown: model.bool(22).unwrap_or(false),
        rows: grid.rows(),
    }))
}

/// The table model of a `TST.TableInfoArchive`.
pub(crate) fn model_of(objects: &Objects, info: u64) -> Option<u64> {
    objects.typed(info, &[TABLE_INFO])?.reference(2)
}

/// Writes a table as Markdown blocks, its first row the header (repeated in every block), the
/// table's own row numbers in `row_range`. Columns past the last non-empty one are dropped.
pub(crate) fn write(
    out: &mut Builder<'_>,
    table: &Table,
    layout: Layout,
) -> Result<(), ParseError> {
    let Some(((_, header), body)) = table.rows.split_first() else {
        return Ok(());
    };
    let width = table
        .rows
        .iter()
        .map(|(_, cells)| cells.len())
        .max()
        .unwrap_or(0);
    let pad = |cells: &Vec<String>| {
        let mut cells = cells.clone();
        cells.resize(width, String::new());
        cells
    };
    let mut blocks = TableBlocks::new(header_lines(&pad(header)), layout);
    for (number, cells) in body {
        blocks.push(out, &row_line(&pad(cells)), Some(*number))?;
    }
    blocks.finish(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d128(negative: bool, mantissa: u128, exponent: i32) -> [u8; 16] {
        let mut b = mantissa.to_le_bytes();
        let biased = u16::try_from(exponent + 0x1820).unwrap();
        b[14] = (b[14] & 1) | u8::try_from((biased & 0x7F) << 1).unwrap();
        b[15] = u8::try_from(biased >> 7).unwrap() | if negative { 0x80 } else { 0 };
        b
    }

    #[test]
    fn decimals_are_exact() {
        assert_eq!(decimal128(d128(false, 12, 0)), "12");
        assert_eq!(decimal128(d128(false, 35_000_000_000_000_000, -16)), "3.5");
        assert_eq!(decimal128(d128(true, 125, -3)), "-0.125");
        assert_eq!(decimal128(d128(false, 7, 3)), "7000");
        assert_eq!(decimal128(d128(false, 0, 5)), "0");
        assert_eq!(decimal128(d128(false, 1, 6000)), "1e6000");
        assert_eq!(decimal128(d128(false, 1, -6000)), "1e-6000");
    }

    #[test]
    fn dates_and_durations() {
        assert_eq!(format_date(0.0), "2001-01-01");
        assert_eq!(
            format_date(86_400.0 * 366.0 + 3_600.0 * 14.5),
            "2002-01-02 14:30:00"
        );
        assert_eq!(format_date(f64::NAN), "");
        assert_eq!(format_duration(3_725.0), "1:02:05");
        assert_eq!(format_duration(90_000.0), "1 day, 1:00:00");
        assert_eq!(format_duration(1.25), "0:00:01.25");
    }

    #[test]
    fn records_are_bounds_checked() {
        // Version 5, a number flagged but cut short.
        let number = d128(false, 42, 0);
        let mut record = vec![5, 2, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0];
        record.extend_from_slice(&number[..8]);
        assert_eq!(cell_v5(&record), None);
        record.extend_from_slice(&number[8..]);
        assert_eq!(cell_v5(&record), Some(Value::Number("42".into())));
        // Version 4 text: a format key, then the string key.
        let v4 = [
            4, 3, 0, 0, 0x14, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0,
        ];
        assert_eq!(cell_v4(&v4), Some(Value::Text(9)));
        assert_eq!(cell_v4(&v4[..16]), None);
        // Offsets past the buffer give no cell; -1 is an empty column.
        let offsets = [0u8, 0, 0xFF, 0xFF, 0xE8, 0x03];
        let cells = row_cells(&v4, &offsets, false);
        assert_eq!(cells, [(0, &v4[..])]);
    }
}
