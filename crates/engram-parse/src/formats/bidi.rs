//! Right-to-left PDF text in reading order. Poppler's reading-order text keeps right-to-left
//! lines but scrambles a line mixing directions (an English sentence quoting an Arabic word)
//! and wraps runs in invisible embedding marks. Its word boxes (`pdftotext -bbox-layout`) are
//! plain visual order instead: words left to right, the letters of a right-to-left word
//! reversed. This module turns those boxes back into logical text: each right-to-left word's
//! letters reversed, then the words of a line ordered by the line's direction (its runs of
//! the other direction kept in their own order), lines of a block joined, blocks as paragraphs.
//!
//! Word boxes lose one thing: which letters one glyph drew. A ligature (Arabic lam-alef) maps
//! to its letters in logical order inside the visual string, so reversing the word's letters
//! turns `لا` into `ال`; a vowel mark drawn before its letter lands on the wrong one. MuPDF's
//! structured text (`mutool draw -F stext`) places every character: the letters after the
//! first of one glyph have no width at its right edge, and a mark has no width inside its
//! letter. When `mutool` is installed its reading groups them into glyphs (`glyph_pages`), and
//! a right-to-left word reverses glyphs, not letters.

use quick_xml::events::Event;
use quick_xml::Reader;
use unicode_normalization::char::is_combining_mark;

use crate::formats::ooxml::{attr, local, text_of};

/// Whether `c` is a letter of a right-to-left script (Hebrew, Arabic, Syriac, Thaana, N'Ko,
/// and their presentation forms).
pub(crate) fn is_rtl(c: char) -> bool {
    matches!(c as u32, 0x0590..=0x08FF | 0xFB1D..=0xFDFF | 0xFE70..=0xFEFF)
}

/// Whether `c` is a letter of a left-to-right script (a strong left-to-right character).
fn is_ltr(c: char) -> bool {
    c.is_alphabetic() && !is_rtl(c)
}

/// The invisible marks of bidirectional embedding (LRE, RLE, PDF, LRO, RLO, isolates, marks).
pub(crate) fn is_bidi_control(c: char) -> bool {
    matches!(c as u32, 0x200E | 0x200F | 0x202A..=0x202E | 0x2066..=0x2069)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Ltr,
    Rtl,
    Neutral,
}

fn direction(word: &str) -> Direction {
    let rtl = word.chars().filter(|c| is_rtl(*c)).count();
    let ltr = word.chars().filter(|c| is_ltr(*c)).count();
    match (rtl, ltr) {
        (0, 0) => Direction::Neutral,
        (r, l) if r >= l => Direction::Rtl,
        _ => Direction::Ltr,
    }
}

/// A word as drawn: its glyphs left to right, each the letters it stands for in logical order.
type Glyphs = Vec<String>;

/// Whether a glyph is part of a number: digits (European, Arabic-Indic, Persian) and the
/// separators between them.
fn numeric(glyph: &str) -> bool {
    glyph
        .chars()
        .all(|c| c.is_numeric() || matches!(c, '.' | ',' | '٫' | '٬'))
}

/// A right-to-left word drawn left to right, in logical order: its glyphs reversed, except
/// that a number within it (a list's `2` before a heading, a date's digits) reads left to
/// right as numbers do in right-to-left text.
fn right_to_left(glyphs: &[String]) -> String {
    let mut runs: Vec<(bool, Vec<&str>)> = Vec::new();
    for glyph in glyphs {
        let number = numeric(glyph) && glyph.chars().any(char::is_numeric);
        match runs.last_mut() {
            Some((run, items)) if *run == number => items.push(glyph),
            _ => runs.push((number, vec![glyph])),
        }
    }
    runs.iter()
        .rev()
        .flat_map(|(number, items)| {
            let items: Vec<&str> = if *number {
                items.clone()
            } else {
                items.iter().rev().copied().collect()
            };
            items
        })
        .collect()
}

/// Arabic presentation forms (the contextual shapes and ligatures a PDF's fonts map their
/// glyphs to, `ﺑﺴﻢ` for `بسم`) as the letters they draw, which is what a reader types; other
/// characters as they are.
pub(crate) fn base_letters(text: &str) -> std::borrow::Cow<'_, str> {
    use unicode_normalization::UnicodeNormalization;
    let presentation = |c: char| matches!(c as u32, 0xFB50..=0xFDFF | 0xFE70..=0xFEFE);
    if !text.chars().any(presentation) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if presentation(c) {
            out.extend(std::iter::once(c).nfkc());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// One line's words, given left to right as drawn, in logical order.
fn logical_line(visual: &[Glyphs]) -> String {
    let words: Vec<(Direction, String)> = visual
        .iter()
        .map(|glyphs| {
            let word = glyphs.concat();
            let d = direction(&word);
            let text = if d == Direction::Rtl {
                right_to_left(glyphs)
            } else {
                word
            };
            (d, text)
        })
        .collect();
    let rtl = words.iter().filter(|(d, _)| *d == Direction::Rtl).count();
    let ltr = words.iter().filter(|(d, _)| *d == Direction::Ltr).count();
    let base = if rtl > ltr {
        Direction::Rtl
    } else {
        Direction::Ltr
    };
    // Runs of words of one direction; neutral words (numbers, punctuation) join the run they
    // stand in, or start one of the line's own direction.
    let mut runs: Vec<(Direction, Vec<String>)> = Vec::new();
    for (d, text) in words {
        let d = if d == Direction::Neutral {
            runs.last().map_or(base, |(run, _)| *run)
        } else {
            d
        };
        match runs.last_mut() {
            Some((run, texts)) if *run == d => texts.push(text),
            _ => runs.push((d, vec![text])),
        }
    }
    // Within a run of the other direction than the line's, words keep that run's order: a
    // right-to-left run was drawn right to left, so its words reverse.
    let mut ordered: Vec<Vec<String>> = runs
        .into_iter()
        .map(|(d, mut texts)| {
            if d == Direction::Rtl {
                texts.reverse();
            }
            texts
        })
        .collect();
    if base == Direction::Rtl {
        ordered.reverse();
    }
    ordered.into_iter().flatten().collect::<Vec<_>>().join(" ")
}

/// The pages of `pdftotext -bbox-layout` output, each a list of blocks (paragraphs) in logical
/// text.
pub(crate) fn pages(xhtml: &str) -> Vec<Vec<String>> {
    let mut reader = Reader::from_str(xhtml);
    let mut out = Paragraphs::default();
    let (mut line, mut word): (Vec<Glyphs>, Option<String>) = (Vec::new(), None);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => match local(e.name().as_ref()) {
                b"page" => out.pages.push(Vec::new()),
                b"word" => word = Some(String::new()),
                _ => {}
            },
            Ok(Event::Text(t)) => {
                if let Some(w) = word.as_mut() {
                    w.push_str(&text_of(&t));
                }
            }
            Ok(Event::GeneralRef(r)) => {
                if let Some(w) = word.as_mut() {
                    w.push_str(&crate::formats::ooxml::reference_text(&r));
                }
            }
            Ok(Event::End(e)) => match local(e.name().as_ref()) {
                b"word" => {
                    if let Some(w) = word.take().filter(|w| !w.trim().is_empty()) {
                        // Poppler's boxes are per word: each letter counts as a glyph.
                        line.push(w.trim().chars().map(String::from).collect());
                    }
                }
                b"line" => out.line(&std::mem::take(&mut line)),
                b"block" => out.block(),
                _ => {}
            },
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    out.pages
}

/// Pages of paragraphs as lines end (in logical order) and blocks end.
#[derive(Default)]
struct Paragraphs {
    pages: Vec<Vec<String>>,
    block: Vec<String>,
}

impl Paragraphs {
    fn line(&mut self, words: &[Glyphs]) {
        if !words.is_empty() {
            self.block.push(logical_line(words));
        }
    }

    fn block(&mut self) {
        if let (false, Some(page)) = (self.block.is_empty(), self.pages.last_mut()) {
            page.push(self.block.join("\n"));
        }
        self.block.clear();
    }
}

/// One character of MuPDF's structured text: its left and right edge on the line, and the
/// letters it stands for.
struct Placed {
    left: f64,
    right: f64,
    /// The font's size (points): how wide a gap between words is.
    size: f64,
    text: String,
}

/// A gap between two glyphs wider than this share of the font size parts two words: TeX and
/// other typesetters draw no space glyph between words, only a gap (a quarter of an em and
/// more), while the letters of a word touch or nearly (side bearings).
const WORD_GAP_EM: f64 = 0.15;

/// Widths below this (points) are none: continuation letters and marks.
const NO_WIDTH: f64 = 0.01;

/// A line's characters, in the order drawn, as words of glyphs left to right. A letter
/// without width that starts at the right edge of the glyph drawn just before it is that
/// glyph's next letter (a ligature). Any other character without width is a mark, which
/// belongs to a neighbour in drawing order, not to the glyph its box falls in (marks overhang
/// into the letter beside them). Shapers draw a right-to-left run left to right with each
/// mark before its letter, and anything else (left-to-right text, a run drawn in logical
/// order) with each mark after its letter.
fn line_words(chars: Vec<Placed>) -> Vec<Glyphs> {
    enum Drawn {
        Glyph(usize),
        Mark(String),
    }
    // Glyphs as (left edge, letters, marks, right edge, font size).
    let mut glyphs: Vec<(f64, String, String, f64, f64)> = Vec::new();
    let mut drawn: Vec<Drawn> = Vec::new();
    let mut right_edge = f64::NAN;
    for c in chars {
        let ligature = matches!(drawn.last(), Some(Drawn::Glyph(_)))
            && (c.left - right_edge).abs() < NO_WIDTH
            && !c.text.trim().is_empty()
            && !c.text.chars().any(is_combining_mark);
        if c.right - c.left >= NO_WIDTH {
            drawn.push(Drawn::Glyph(glyphs.len()));
            glyphs.push((c.left, c.text, String::new(), c.right, c.size));
            right_edge = c.right;
        } else if ligature {
            if let Some(last) = glyphs.last_mut() {
                last.1.push_str(&c.text);
            }
        } else {
            drawn.push(Drawn::Mark(c.text));
        }
    }
    let left_to_right = glyphs.windows(2).filter(|w| w[1].0 >= w[0].0).count()
        >= glyphs.windows(2).filter(|w| w[1].0 < w[0].0).count();
    // The glyph drawn last before each position and first after it, in two linear passes.
    let mut before = Vec::with_capacity(drawn.len());
    let mut last = None;
    for d in &drawn {
        before.push(last);
        if let Drawn::Glyph(g) = d {
            last = Some(*g);
        }
    }
    let mut after = vec![None; drawn.len()];
    let mut next = None;
    for (at, d) in drawn.iter().enumerate().rev() {
        after[at] = next;
        if let Drawn::Glyph(g) = d {
            next = Some(*g);
        }
    }
    let mut owners = Vec::new();
    for (at, d) in drawn.iter().enumerate() {
        if let Drawn::Mark(text) = d {
            let owner = if left_to_right && text.chars().any(is_rtl) {
                after[at].or(before[at])
            } else {
                before[at].or(after[at])
            };
            owners.push((owner, text.clone()));
        }
    }
    for (owner, text) in owners {
        match owner {
            Some(g) => glyphs[g].2.push_str(&text),
            None => glyphs.push((f64::INFINITY, text, String::new(), f64::INFINITY, 0.0)),
        }
    }
    glyphs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut words: Vec<Glyphs> = Vec::new();
    let mut word: Glyphs = Vec::new();
    let mut last_right = f64::NAN;
    for (left, letters, marks, right, size) in glyphs {
        let gap = left - last_right > WORD_GAP_EM * size;
        if (letters.trim().is_empty() || gap) && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if !letters.trim().is_empty() {
            word.push(letters + &marks);
            last_right = right;
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// The left and right edge of a `quad` attribute (`ulx uly urx ury llx lly lrx lry`).
fn edges(quad: &str) -> Option<(f64, f64)> {
    let numbers: Vec<f64> = quad
        .split_ascii_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    match numbers[..] {
        [ulx, _, urx, _, llx, _, lrx, _] => Some((ulx.min(llx), urx.max(lrx))),
        _ => None,
    }
}

/// The pages of `mutool draw -F stext` output, each a list of blocks (paragraphs) in logical
/// text, glyphs kept whole.
pub(crate) fn glyph_pages(stext: &str) -> Vec<Vec<String>> {
    let mut reader = Reader::from_str(stext);
    let mut out = Paragraphs::default();
    let mut line: Vec<Placed> = Vec::new();
    let mut size = 0.0;
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) if local(e.name().as_ref()) == b"page" => {
                out.pages.push(Vec::new());
            }
            Ok(Event::Start(e)) if local(e.name().as_ref()) == b"font" => {
                size = attr(&e, b"size")
                    .and_then(|s| s.parse().ok())
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .unwrap_or(0.0);
            }
            Ok(Event::Empty(e) | Event::Start(e)) if local(e.name().as_ref()) == b"char" => {
                let quad = attr(&e, b"quad").and_then(|q| edges(&q));
                let text = attr(&e, b"c");
                if let (Some((left, right)), Some(text)) = (quad, text) {
                    line.push(Placed {
                        left,
                        right,
                        // Without a size, only space glyphs part words.
                        size: if size > 0.0 { size } else { f64::INFINITY },
                        text,
                    });
                }
            }
            Ok(Event::End(e)) => match local(e.name().as_ref()) {
                b"line" => out.line(&line_words(std::mem::take(&mut line))),
                b"block" => out.block(),
                _ => {}
            },
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    out.pages
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visual(words: &[&str]) -> Vec<Glyphs> {
        words
            .iter()
            .map(|w| w.chars().map(String::from).collect())
            .collect()
    }

    #[test]
    fn right_to_left_and_mixed_lines_read_in_logical_order() {
        // As Poppler draws them: left to right, right-to-left letters reversed.
        assert_eq!(
            logical_line(&visual(&["ةبتكملا", "يف", "مكب", "ابحرم"])),
            "مرحبا بكم في المكتبة"
        );
        assert_eq!(
            logical_line(&visual(&["הקידב", "ךמסמ", "והז", ",םלוע", "םולש"])),
            "שלום עולם, זהו מסמך בדיקה"
        );
        assert_eq!(
            logical_line(&visual(&[
                "Mixed:", "the", "word", "باتك", "means", "book."
            ])),
            "Mixed: the word كتاب means book."
        );
        assert_eq!(
            logical_line(&visual(&["Release", "2.4", "notes"])),
            "Release 2.4 notes"
        );
    }

    #[test]
    fn boxes_give_pages_of_paragraphs() {
        let xhtml = r#"<html><body><doc><page width="595" height="842"><flow><block>
          <line><word>ةبتكملا</word></line><line><word>ابحرم</word></line></block>
          <block><line><word>Hello</word><word>&amp;</word><word>bye</word></line></block></flow></page>
          <page><flow><block><line><word>two</word></line></block></flow></page></doc></body></html>"#;
        assert_eq!(
            pages(xhtml),
            [
                vec!["المكتبة\nمرحبا".to_owned(), "Hello & bye".to_owned()],
                vec!["two".to_owned()]
            ]
        );
    }

    #[test]
    fn mupdf_characters_read_as_whole_glyphs() {
        // "السلام لا": the word drawn left to right as meem, lam-alef (one glyph: alef has no
        // width at its right edge), seen, lam, alef; a space; then "لا" as one glyph.
        let stext = r#"<document><page id="page1"><block><line dir="1 0"><font>
          <char quad="10 0 17 0 10 12 17 12" c="&#x644;"/>
          <char quad="17 0 17 0 17 12 17 12" c="&#x627;"/>
          <char quad="17 0 21 0 17 12 21 12" c=" "/>
          <char quad="21 0 28 0 21 12 28 12" c="&#x645;"/>
          <char quad="28 0 35 0 28 12 35 12" c="&#x644;"/>
          <char quad="35 0 35 0 35 12 35 12" c="&#x627;"/>
          <char quad="35 0 45 0 35 12 45 12" c="&#x633;"/>
          <char quad="45 0 48 0 45 12 48 12" c="&#x644;"/>
          <char quad="48 0 51 0 48 12 51 12" c="&#x627;"/>
        </font></line></block></page>
        <page id="page3"><block><line dir="1 0"><font>
          <char quad="3 0 3 0 3 12 3 12" c="&#x64e;"/>
          <char quad="1 0 9 0 1 12 9 12" c="&#x628;"/>
          <char quad="8 0 8 0 8 12 8 12" c="&#x64e;"/>
          <char quad="9 0 14 0 9 12 14 12" c="&#x62a;"/>
          <char quad="14 0 14 0 14 12 14 12" c="&#x64e;"/>
          <char quad="14 0 24 0 14 12 24 12" c="&#x643;"/>
        </font></line><line><font>
          <char quad="1 0 5 0 1 12 5 12" c="e"/><char quad="2 0 2 0 2 12 2 12" c="&#x301;"/>
        </font></line><line><font>
          <char quad="1 0 5 0 1 12 5 12" c="&lt;"/><char quad="5 0 9 0 5 12 9 12" c="b"/>
        </font></line></block><block><line><font>
          <char quad="1 0 1 0 1 12 1 12" c="x"/>
        </font></line></block></page></document>"#;
        assert_eq!(
            glyph_pages(stext),
            [
                vec!["السلام لا".to_owned()],
                // Each right-to-left mark drawn before its letter, even in the box of the
                // letter beside it or at the right edge of the one before it; a left-to-right
                // mark after its letter.
                vec!["كَتَبَ\ne\u{301}\n<b".to_owned(), "x".to_owned()]
            ]
        );
        assert_eq!(edges("1 2 3"), None);
        // XeTeX draws no space glyph: a gap of a quarter em parts words, and a number keeps
        // its digits left to right inside right-to-left text ("بسم ١٩ ٢سب", drawn as
        // presentation forms, reads as the letters they draw).
        let tex = r#"<document><page><block><line dir="1 0"><font size="10">
          <char quad="0 0 5 0 0 12 5 12" c="&#x628;"/><char quad="5 0 10 0 5 12 10 12" c="&#x633;"/>
          <char quad="10 0 14 0 10 12 14 12" c="&#x662;"/>
          <char quad="17 0 21 0 17 12 21 12" c="&#x661;"/><char quad="21 0 25 0 21 12 25 12" c="&#x669;"/>
          <char quad="28 0 33 0 28 12 33 12" c="&#xfee2;"/><char quad="33 0 38 0 33 12 38 12" c="&#xfeb4;"/>
          <char quad="38 0 42 0 38 12 42 12" c="&#xfe91;"/>
        </font></line></block></page></document>"#;
        let read: Vec<String> = glyph_pages(tex)[0]
            .iter()
            .map(|p| base_letters(p).into_owned())
            .collect();
        assert_eq!(read, ["بسم ١٩ ٢سب"]);
        assert!(matches!(
            base_letters("plain"),
            std::borrow::Cow::Borrowed("plain")
        ));
        assert!(glyph_pages("<document><page><line><char c=\"x\"/>").len() == 1);
    }
}
