//! Word 97-2003 (`.doc`) and PowerPoint 97-2003 (`.ppt`), from their OLE2 streams (`cfb`).
//!
//! - Word: the text of the document is found through the piece table (the `Clx` in the table
//!   stream named by the FIB): each piece is either 8-bit (Windows-1252) or UTF-16. Paragraphs end
//!   at `\r`; field instructions (between 0x13 and 0x14) are dropped and their results kept;
//!   table cell marks become separators.
//! - PowerPoint: the record tree of the `PowerPoint Document` stream is walked; text atoms
//!   (`TextCharsAtom`, `TextBytesAtom`) are grouped by slide, in slide order (`layout.slide`);
//!   masters and notes are skipped.
//!
//! - Excel: the number formats of cells (`xls_cell_formats`), which calamine does not give: the
//!   workbook globals' `FORMAT` and `XF` records, then each worksheet's number cells (`NUMBER`,
//!   `RK`, `MULRK`, `FORMULA`) by their `XF`.
//!
//! Every offset read from the file is bounds-checked; a malformed file is `Corrupt`.

use std::collections::HashMap;
use std::io::{Cursor, Read};

use crate::document::{BlockKind, Builder, Layout};
use crate::formats::numfmt::{builtin, NumberFormat, SheetFormats};
use crate::{Document, Limits, ParseError};

type Compound<'a> = cfb::CompoundFile<Cursor<&'a [u8]>>;

fn corrupt(what: &str) -> ParseError {
    ParseError::Corrupt(format!("malformed legacy Office file: {what}"))
}

fn open(bytes: &[u8]) -> Result<Compound<'_>, ParseError> {
    cfb::CompoundFile::open(Cursor::new(bytes)).map_err(|e| corrupt(&e.to_string()))
}

fn stream(file: &mut Compound<'_>, name: &str, limits: &Limits) -> Result<Vec<u8>, ParseError> {
    let mut out = Vec::new();
    file.open_stream(name)
        .map_err(|_| corrupt(&format!("no {name} stream")))?
        .take(u64::try_from(limits.max_bytes).unwrap_or(u64::MAX))
        .read_to_end(&mut out)
        .map_err(|e| corrupt(&e.to_string()))?;
    Ok(out)
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn cp1252(bytes: &[u8]) -> String {
    encoding_rs::WINDOWS_1252.decode(bytes).0.into_owned()
}

fn utf16(bytes: &[u8]) -> String {
    let units: Vec<u16> = bytes
        .chunks_exact(2)
        .map(|p| u16::from_le_bytes([p[0], p[1]]))
        .collect();
    String::from_utf16_lossy(&units)
}

/// The document text of a Word 97-2003 file, through its piece table.
fn word_text(bytes: &[u8], limits: &Limits) -> Result<String, ParseError> {
    let mut file = open(bytes)?;
    let word = stream(&mut file, "/WordDocument", limits)?;
    if u16_at(&word, 0) != Some(0xA5EC) {
        return Err(corrupt("not a Word binary document"));
    }
    let flags = u16_at(&word, 0x000A).ok_or_else(|| corrupt("short FIB"))?;
    if flags & 0x0100 != 0 {
        return Err(ParseError::Corrupt("the document is encrypted".into()));
    }
    let table_name = if flags & 0x0200 != 0 {
        "/1Table"
    } else {
        "/0Table"
    };
    let table = stream(&mut file, table_name, limits)?;
    let fc_clx = u32_at(&word, 0x01A2).ok_or_else(|| corrupt("short FIB"))? as usize;
    let lcb_clx = u32_at(&word, 0x01A6).ok_or_else(|| corrupt("short FIB"))? as usize;
    let clx = table
        .get(fc_clx..fc_clx.saturating_add(lcb_clx))
        .ok_or_else(|| corrupt("piece table out of bounds"))?;
    // Skip property runs (0x01), find the piece table (0x02).
    let mut at = 0;
    let plc = loop {
        match clx.get(at) {
            Some(0x01) => {
                let size = u16_at(clx, at + 1).ok_or_else(|| corrupt("clx"))? as usize;
                at += 3 + size;
            }
            Some(0x02) => {
                let size = u32_at(clx, at + 1).ok_or_else(|| corrupt("clx"))? as usize;
                break clx
                    .get(at + 5..at + 5 + size)
                    .ok_or_else(|| corrupt("piece table"))?;
            }
            _ => return Err(corrupt("no piece table")),
        }
    };
    // n+1 character positions, then n piece descriptors of 8 bytes.
    let pieces = plc.len().saturating_sub(4) / 12;
    let mut text = String::new();
    for i in 0..pieces {
        let start = u32_at(plc, i * 4).ok_or_else(|| corrupt("cp"))? as usize;
        let end = u32_at(plc, (i + 1) * 4).ok_or_else(|| corrupt("cp"))? as usize;
        let fc = u32_at(plc, (pieces + 1) * 4 + i * 8 + 2).ok_or_else(|| corrupt("pcd"))?;
        let chars = end.saturating_sub(start);
        if fc & 0x4000_0000 != 0 {
            let offset = (fc & 0x3FFF_FFFF) as usize / 2;
            let piece = word
                .get(offset..offset.saturating_add(chars))
                .ok_or_else(|| corrupt("piece out of bounds"))?;
            text.push_str(&cp1252(piece));
        } else {
            let offset = fc as usize;
            let piece = word
                .get(offset..offset.saturating_add(chars * 2))
                .ok_or_else(|| corrupt("piece out of bounds"))?;
            text.push_str(&utf16(piece));
        }
        if text.len() > limits.max_text_bytes {
            return Err(ParseError::TooLarge {
                what: "extracted text bytes",
                limit: limits.max_text_bytes,
            });
        }
    }
    Ok(clean_word(&text))
}

/// Word's control characters: paragraphs, cells, fields.
fn clean_word(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut field_depth = 0usize;
    let mut in_instruction = Vec::new();
    for c in text.chars() {
        match c {
            '\u{13}' => {
                field_depth += 1;
                in_instruction.push(true);
            }
            '\u{14}' => {
                if let Some(top) = in_instruction.last_mut() {
                    *top = false;
                }
            }
            '\u{15}' => {
                field_depth = field_depth.saturating_sub(1);
                in_instruction.pop();
            }
            _ if in_instruction.last() == Some(&true) => {}
            '\r' => out.push_str("\n\n"),
            '\u{7}' => out.push_str(" | "),
            '\u{b}' => out.push('\n'),
            '\u{c}' => out.push_str("\n\n"),
            c if c.is_control() && c != '\t' && c != '\n' => {}
            c => out.push(c),
        }
    }
    let _ = field_depth;
    out
}

pub(crate) fn extract_doc(bytes: &[u8], limits: &Limits) -> Result<Document, ParseError> {
    let text = word_text(bytes, limits)?;
    let mut out = Builder::new(limits);
    super::plain::paragraphs(&text, &mut out, &Layout::default())?;
    out.finish()
}

const CONTAINER: u16 = 0xF;
const SLIDE: u16 = 0x03EE;
const NOTES: u16 = 0x03F0;
const MAIN_MASTER: u16 = 0x03F8;
const SLIDE_LIST_WITH_TEXT: u16 = 0x0FF0;
const SLIDE_PERSIST_ATOM: u16 = 0x03F3;
const TEXT_CHARS_ATOM: u16 = 0x0FA0;
const TEXT_BYTES_ATOM: u16 = 0x0FA8;

/// Walks the records of `data`, collecting text by slide. `slide` is the current slide number
/// (0 before the first).
fn walk(
    data: &[u8],
    depth: usize,
    slide: &mut u32,
    in_slide_list: bool,
    slides: &mut Vec<(u32, String)>,
) -> Result<(), ParseError> {
    if depth > 64 {
        return Err(corrupt("records nested too deep"));
    }
    let mut at = 0;
    while at + 8 <= data.len() {
        let ver_instance = u16_at(data, at).unwrap_or(0);
        let kind = u16_at(data, at + 2).unwrap_or(0);
        let len = u32_at(data, at + 4).unwrap_or(0) as usize;
        let body = data
            .get(at + 8..(at + 8).saturating_add(len))
            .ok_or_else(|| corrupt("record out of bounds"))?;
        at += 8 + len;
        if ver_instance & 0xF == CONTAINER {
            match kind {
                MAIN_MASTER | NOTES => continue,
                SLIDE => {
                    *slide += 1;
                    walk(body, depth + 1, slide, false, slides)?;
                }
                SLIDE_LIST_WITH_TEXT => {
                    // Instance 0 lists the slides; 1 masters, 2 notes.
                    if ver_instance >> 4 == 0 {
                        let mut listed = 0;
                        walk(body, depth + 1, &mut listed, true, slides)?;
                    }
                }
                _ => walk(body, depth + 1, slide, in_slide_list, slides)?,
            }
            continue;
        }
        match kind {
            SLIDE_PERSIST_ATOM if in_slide_list => *slide += 1,
            TEXT_CHARS_ATOM | TEXT_BYTES_ATOM if *slide > 0 => {
                let text = if kind == TEXT_CHARS_ATOM {
                    utf16(body)
                } else {
                    cp1252(body)
                };
                let text = text.replace(['\r', '\u{b}'], "\n");
                if !text.trim().is_empty()
                    && !slides.iter().any(|(s, t)| *s == *slide && *t == text)
                {
                    slides.push((*slide, text));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

pub(crate) fn extract_ppt(bytes: &[u8], limits: &Limits) -> Result<Document, ParseError> {
    let mut file = open(bytes)?;
    let data = stream(&mut file, "/PowerPoint Document", limits)?;
    let mut slides = Vec::new();
    let mut slide = 0;
    walk(&data, 0, &mut slide, false, &mut slides)?;
    // Text listed in SlideListWithText and again in the slide's drawing is kept once per slide.
    slides.sort_by_key(|(s, _)| *s);
    let mut out = Builder::new(limits);
    let mut current = 0;
    for (number, text) in slides {
        let layout = Layout {
            slide: Some(number),
            headings: vec![format!("Slide {number}")],
            ..Layout::default()
        };
        if number != current {
            current = number;
            out.push(
                BlockKind::Heading,
                &format!("## Slide {number}"),
                layout.clone(),
            )?;
        }
        out.push(BlockKind::Paragraph, &text, layout)?;
    }
    out.finish()
}

/// The number formats of an Excel 97-2003 workbook's cells that show numbers other than as
/// stored, by sheet name and (row, column) from 0, like `numfmt::cell_formats` for XLSX. Empty
/// for an encrypted workbook (its records cannot be read) and when no cell style has such a
/// format.
pub(crate) fn xls_cell_formats(bytes: &[u8], limits: &Limits) -> Result<SheetFormats, ParseError> {
    const BOF: u16 = 0x0809;
    const EOF: u16 = 0x000A;
    const FILEPASS: u16 = 0x002F;
    const FORMAT: u16 = 0x041E;
    const XF: u16 = 0x00E0;
    const BOUNDSHEET: u16 = 0x0085;
    const NUMBER: u16 = 0x0203;
    const RK: u16 = 0x027E;
    const MULRK: u16 = 0x00BD;
    const FORMULA: u16 = 0x0006;
    let mut out = SheetFormats::new();
    let mut file = open(bytes)?;
    let book = match stream(&mut file, "Workbook", limits) {
        Ok(book) => book,
        Err(_) => stream(&mut file, "Book", limits)?,
    };
    // Records from `at`: (type, body, offset of the next).
    let record = |at: usize| -> Option<(u16, &[u8], usize)> {
        let kind = u16_at(&book, at)?;
        let len = usize::from(u16_at(&book, at + 2)?);
        let body = book.get(at + 4..at + 4 + len)?;
        Some((kind, body, at + 4 + len))
    };
    let mut custom: HashMap<u16, String> = HashMap::new();
    let mut xf_formats: Vec<u16> = Vec::new();
    let mut sheets: Vec<(String, usize)> = Vec::new();
    let mut at = 0;
    while let Some((kind, body, next)) = record(at) {
        match kind {
            FILEPASS => return Ok(out),
            FORMAT => {
                if let (Some(id), Some(code)) = (
                    u16_at(body, 0),
                    body.get(2..).and_then(|b| biff_string(b, 2)),
                ) {
                    custom.insert(id, code);
                }
            }
            XF => xf_formats.push(u16_at(body, 2).unwrap_or(0)),
            BOUNDSHEET => {
                // Worksheets only (dt 0), by where their substream starts.
                if let (Some(position), Some(0), Some(name)) = (
                    u32_at(body, 0),
                    body.get(5).copied(),
                    body.get(6..).and_then(|b| biff_string(b, 1)),
                ) {
                    sheets.push((name, usize::try_from(position).unwrap_or(usize::MAX)));
                }
            }
            EOF => break,
            _ => {}
        }
        at = next;
    }
    let by_xf: Vec<Option<NumberFormat>> = xf_formats
        .iter()
        .map(|id| {
            let code = custom
                .get(id)
                .map(String::as_str)
                .or(builtin(u32::from(*id)));
            code.and_then(NumberFormat::parse)
        })
        .collect();
    if by_xf.iter().all(Option::is_none) {
        return Ok(out);
    }
    let format_of = |xf: Option<u16>| xf.and_then(|x| by_xf.get(usize::from(x)).cloned().flatten());
    // A substream ends at its EOF or at the next BOF, and each start is read once: every record
    // is read at most once however the sheet records point (hostile files included).
    let mut started = std::collections::HashSet::new();
    for (name, start) in sheets {
        if !started.insert(start) {
            continue;
        }
        let mut cells = HashMap::new();
        let mut at = start;
        match record(at) {
            Some((BOF, _, next)) => at = next,
            _ => continue,
        }
        while let Some((kind, body, next)) = record(at) {
            let place = || Some((u32::from(u16_at(body, 0)?), u32::from(u16_at(body, 2)?)));
            match kind {
                NUMBER | RK | FORMULA => {
                    if let (Some(at), Some(format)) = (place(), format_of(u16_at(body, 4))) {
                        cells.insert(at, format);
                    }
                }
                MULRK => {
                    // rw, colFirst, then (ixfe, rk) per column, then colLast.
                    if let Some((row, first)) = place() {
                        let count = body.len().saturating_sub(6) / 6;
                        for k in 0..count {
                            if let Some(format) = format_of(u16_at(body, 4 + k * 6)) {
                                cells.insert((row, first + k as u32), format);
                            }
                        }
                    }
                }
                EOF | BOF => break,
                _ => {}
            }
            at = next;
        }
        if !cells.is_empty() {
            out.insert(name, cells);
        }
    }
    Ok(out)
}

/// A BIFF8 string: its character count (`count_bytes` wide), a flags byte (bit 0: UTF-16,
/// else compressed Latin-1), then the characters (rich text and phonetic runs come after them
/// and are not read).
fn biff_string(bytes: &[u8], count_bytes: usize) -> Option<String> {
    let count = match count_bytes {
        1 => usize::from(*bytes.first()?),
        _ => usize::from(u16_at(bytes, 0)?),
    };
    let flags = *bytes.get(count_bytes)?;
    let chars = bytes.get(count_bytes + 1..)?;
    Some(if flags & 1 == 1 {
        utf16(chars.get(..count * 2)?)
    } else {
        chars.get(..count)?.iter().map(|&b| char::from(b)).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Short or cut strings and records read as nothing, never out of bounds; a workbook whose
    /// cells all show numbers as stored has no formats to apply.
    #[test]
    fn biff_records_are_read_within_bounds() {
        assert_eq!(
            biff_string(&[3, 0, b'a', b'b', b'c'], 1).as_deref(),
            Some("abc")
        );
        assert_eq!(
            biff_string(&[2, 0, 1, b'h', 0, b'i', 0], 2).as_deref(),
            Some("hi")
        );
        assert_eq!(biff_string(&[9, 0, b'a'], 1), None);
        assert_eq!(biff_string(&[5, 0, 1, b'h', 0], 2), None);
        assert_eq!(biff_string(&[], 2), None);
        let book = std::fs::read(crate::tests::sample("test.xls")).unwrap();
        assert!(xls_cell_formats(&book, &Limits::default()).is_ok());
        assert!(xls_cell_formats(&book[..book.len() / 2], &Limits::default()).is_err());
    }

    #[test]
    fn malformed_files_fail_cleanly() {
        let limits = Limits::default();
        assert!(extract_doc(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1garbage", &limits).is_err());
        assert!(extract_ppt(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1garbage", &limits).is_err());
        // A real compound file without the streams (an Outlook message).
        let msg = std::fs::read(crate::tests::sample("test_outlook_msg.msg")).unwrap();
        assert!(matches!(
            extract_doc(&msg, &limits),
            Err(ParseError::Corrupt(_))
        ));
        assert!(matches!(
            extract_ppt(&msg, &limits),
            Err(ParseError::Corrupt(_))
        ));
        // Records that claim more bytes than they have.
        let mut slides = Vec::new();
        let record = [0x0F, 0x00, 0xEE, 0x03, 0xFF, 0xFF, 0xFF, 0x7F];
        assert!(walk(&record, 0, &mut 0, false, &mut slides).is_err());
        assert_eq!(
            clean_word("a\u{13} HYPERLINK x \u{14}link\u{15}\rb"),
            "alink\n\nb"
        );
    }
}
