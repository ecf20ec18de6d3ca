//! Right-to-left PDF text in reading order. Poppler's reading-order text keeps right-to-left
//! lines but scrambles a line mixing directions (an English sentence quoting an Arabic word)
//! and wraps runs in invisible embedding marks. Its word boxes (`pdftotext -bbox-layout`) are
//! plain visual order instead: words left to right, the letters of a right-to-left word
//! reversed. This module turns those boxes back into logical text: each right-to-left word's
//! letters reversed, then the words of a line ordered by the line's direction (its runs of
//! the other direction kept in their own order), lines of a block joined, blocks as paragraphs.

use quick_xml::events::Event;
use quick_xml::Reader;

use crate::formats::ooxml::{local, text_of};

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

/// One line's words, given left to right as drawn, in logical order.
fn logical_line(visual: &[String]) -> String {
    let words: Vec<(Direction, String)> = visual
        .iter()
        .map(|w| {
            let d = direction(w);
            let text = if d == Direction::Rtl {
                w.chars().rev().collect()
            } else {
                w.clone()
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
    let mut pages: Vec<Vec<String>> = Vec::new();
    let (mut block, mut line, mut word): (Vec<String>, Vec<String>, Option<String>) =
        (Vec::new(), Vec::new(), None);
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => match local(e.name().as_ref()) {
                b"page" => pages.push(Vec::new()),
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
                        line.push(w.trim().to_owned());
                    }
                }
                b"line" if !line.is_empty() => {
                    block.push(logical_line(&line));
                    line.clear();
                }
                b"block" if !block.is_empty() => {
                    if let Some(page) = pages.last_mut() {
                        page.push(block.join("\n"));
                    }
                    block.clear();
                }
                _ => {}
            },
            Ok(Event::Eof) | Err(_) => break,
            Ok(_) => {}
        }
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visual(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
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
}
