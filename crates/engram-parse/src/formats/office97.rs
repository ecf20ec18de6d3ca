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
//! Every offset read from the file is bounds-checked; a malformed file is `Corrupt`.

use std::io::{Cursor, Read};

use crate::document::{BlockKind, Builder, Layout};
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

#[cfg(test)]
mod tests {
    use super::*;

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
