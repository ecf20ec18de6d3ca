//! Word's automatic numbering (`word/numbering.xml`): the label each numbered paragraph shows
//! ("1.2", "b)", "iv."), counted as Word counts it. A paragraph names a list instance (`numId`)
//! and a level (`ilvl`); the instance points at an abstract definition whose levels give the
//! start value, the number format and the label template (`%1.%2.`). Instances of one abstract
//! definition share its counters unless they restart a level (`startOverride`); numbering a
//! level restarts every deeper one.

use std::collections::{HashMap, HashSet};

use quick_xml::events::Event;
use quick_xml::Reader;

use crate::formats::ooxml::{attr, local};
use crate::ParseError;

/// Levels Word defines per list.
const LEVELS: usize = 9;

#[derive(Debug, Clone, Default)]
struct Level {
    start: u32,
    format: String,
    template: String,
}

/// What a numbered paragraph shows before its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Label {
    /// A bullet: the paragraph is a plain list item.
    Bullet,
    /// A number as the document shows it (`1.2`, `a)`, `IV.`); may be empty (format `none`).
    Number(String),
}

/// The numbering definitions of a document and the counters of the lists read so far.
#[derive(Debug, Default)]
pub(crate) struct Numbering {
    abstracts: HashMap<String, Vec<Level>>,
    /// List instance → its abstract definition and the levels it restarts (level, start).
    instances: HashMap<String, (String, Vec<(usize, u32)>)>,
    counters: HashMap<String, [Option<u32>; LEVELS]>,
    begun: HashSet<String>,
}

fn level_index(value: Option<String>) -> Option<usize> {
    value
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|l| *l < LEVELS)
}

impl Numbering {
    pub(crate) fn parse(xml: &str) -> Result<Self, ParseError> {
        let mut out = Self::default();
        let mut reader = Reader::from_str(xml);
        let (mut abstract_id, mut instance, mut level): (
            Option<String>,
            Option<String>,
            Option<usize>,
        ) = (None, None, None);
        let mut override_level: Option<usize> = None;
        loop {
            let event = reader
                .read_event()
                .map_err(|e| ParseError::Corrupt(format!("numbering: {e}")))?;
            let empty = matches!(event, Event::Empty(_));
            match event {
                Event::Start(e) | Event::Empty(e) => match local(e.name().as_ref()) {
                    b"abstractNum" if !empty => {
                        abstract_id = attr(&e, b"abstractNumId");
                        if let Some(id) = &abstract_id {
                            out.abstracts
                                .insert(id.clone(), vec![Level::default(); LEVELS]);
                        }
                    }
                    b"num" if !empty => instance = attr(&e, b"numId"),
                    b"lvlOverride" if !empty => override_level = level_index(attr(&e, b"ilvl")),
                    b"lvl" if !empty => level = level_index(attr(&e, b"ilvl")),
                    b"abstractNumId" => {
                        if let (Some(num), Some(target)) = (&instance, attr(&e, b"val")) {
                            out.instances
                                .entry(num.clone())
                                .or_default()
                                .0
                                .clone_from(&target);
                        }
                    }
                    b"startOverride" => {
                        if let (Some(num), Some(l), Some(start)) = (
                            &instance,
                            override_level,
                            attr(&e, b"val").and_then(|v| v.parse().ok()),
                        ) {
                            out.instances
                                .entry(num.clone())
                                .or_default()
                                .1
                                .push((l, start));
                        }
                    }
                    name @ (b"start" | b"numFmt" | b"lvlText") if instance.is_none() => {
                        let slot = abstract_id
                            .as_ref()
                            .zip(level)
                            .and_then(|(id, l)| out.abstracts.get_mut(id)?.get_mut(l));
                        if let (Some(slot), Some(value)) = (slot, attr(&e, b"val")) {
                            match name {
                                b"start" => slot.start = value.parse().unwrap_or(1),
                                b"numFmt" => slot.format = value,
                                _ => slot.template = value,
                            }
                        }
                    }
                    _ => {}
                },
                Event::End(e) => match local(e.name().as_ref()) {
                    b"abstractNum" => abstract_id = None,
                    b"num" => instance = None,
                    b"lvlOverride" => override_level = None,
                    b"lvl" => level = None,
                    _ => {}
                },
                Event::Eof => break,
                _ => {}
            }
        }
        Ok(out)
    }

    /// The label of the next paragraph of list `num_id` at `level`, counting it; `None` when
    /// the list is unknown (or `numId` 0, which means "not numbered").
    pub(crate) fn next(&mut self, num_id: &str, level: usize) -> Option<Label> {
        let (abstract_id, restarts) = self.instances.get(num_id)?;
        let levels = self.abstracts.get(abstract_id)?;
        let this = levels.get(level)?;
        let counters = self.counters.entry(abstract_id.clone()).or_default();
        if self.begun.insert(num_id.to_owned()) {
            for (l, start) in restarts {
                counters[*l] = Some(start.saturating_sub(1));
            }
        }
        counters[level] = Some(counters[level].map_or(this.start, |c| c.saturating_add(1)));
        for deeper in counters.iter_mut().skip(level + 1) {
            *deeper = None;
        }
        match this.format.as_str() {
            "bullet" => return Some(Label::Bullet),
            "none" => return Some(Label::Number(String::new())),
            _ => {}
        }
        let mut label = this.template.clone();
        for (l, def) in levels.iter().enumerate().take(level + 1).rev() {
            let value = counters[l].unwrap_or(def.start);
            label = label.replace(&format!("%{}", l + 1), &render(value, &def.format));
        }
        Some(Label::Number(label.trim().to_owned()))
    }
}

/// `value` in a Word number format; formats without a rendering here read as decimals.
fn render(value: u32, format: &str) -> String {
    match format {
        "lowerLetter" => letters(value).to_lowercase(),
        "upperLetter" => letters(value),
        "lowerRoman" => roman(value).to_lowercase(),
        "upperRoman" => roman(value),
        "decimalZero" if value < 10 => format!("0{value}"),
        _ => value.to_string(),
    }
}

/// Word's letters: A…Z, then AA…ZZ, AAA… (the letter repeated).
fn letters(value: u32) -> String {
    if value == 0 {
        return "0".into();
    }
    let index = (value - 1) % 26;
    let times = (value - 1) / 26 + 1;
    let letter = char::from(b'A' + index as u8);
    std::iter::repeat_n(letter, times.min(10) as usize).collect()
}

fn roman(mut value: u32) -> String {
    if value == 0 || value >= 4000 {
        return value.to_string();
    }
    let mut out = String::new();
    for (n, digits) in [
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ] {
        while value >= n {
            out.push_str(digits);
            value -= n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const XML: &str = r#"<w:numbering xmlns:w="w">
      <w:abstractNum w:abstractNumId="0">
        <w:lvl w:ilvl="0"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1."/></w:lvl>
        <w:lvl w:ilvl="1"><w:start w:val="1"/><w:numFmt w:val="decimal"/><w:lvlText w:val="%1.%2."/></w:lvl>
        <w:lvl w:ilvl="2"><w:start w:val="1"/><w:numFmt w:val="lowerLetter"/><w:lvlText w:val="%3)"/></w:lvl>
      </w:abstractNum>
      <w:abstractNum w:abstractNumId="1">
        <w:lvl w:ilvl="0"><w:start w:val="3"/><w:numFmt w:val="upperRoman"/><w:lvlText w:val="%1."/></w:lvl>
      </w:abstractNum>
      <w:abstractNum w:abstractNumId="2">
        <w:lvl w:ilvl="0"><w:numFmt w:val="bullet"/><w:lvlText w:val="•"/></w:lvl>
      </w:abstractNum>
      <w:num w:numId="1"><w:abstractNumId w:val="0"/></w:num>
      <w:num w:numId="2"><w:abstractNumId w:val="1"/></w:num>
      <w:num w:numId="3"><w:abstractNumId w:val="2"/></w:num>
      <w:num w:numId="4"><w:abstractNumId w:val="0"/>
        <w:lvlOverride w:ilvl="0"><w:startOverride w:val="1"/></w:lvlOverride></w:num>
    </w:numbering>"#;

    fn number(n: &mut Numbering, id: &str, level: usize) -> String {
        match n.next(id, level) {
            Some(Label::Number(s)) => s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn levels_count_restart_and_render_their_formats() {
        let mut n = Numbering::parse(XML).unwrap();
        assert_eq!(number(&mut n, "1", 0), "1.");
        assert_eq!(number(&mut n, "1", 1), "1.1.");
        assert_eq!(number(&mut n, "1", 1), "1.2.");
        assert_eq!(number(&mut n, "1", 2), "a)");
        assert_eq!(number(&mut n, "1", 2), "b)");
        assert_eq!(number(&mut n, "1", 0), "2.");
        assert_eq!(number(&mut n, "1", 1), "2.1.", "a deeper level restarts");
        assert_eq!(number(&mut n, "2", 0), "III.");
        assert_eq!(number(&mut n, "2", 0), "IV.");
        assert_eq!(n.next("3", 0), Some(Label::Bullet));
        assert_eq!(
            number(&mut n, "4", 0),
            "1.",
            "an instance restarting the list"
        );
        assert_eq!(number(&mut n, "4", 0), "2.");
        assert_eq!(n.next("0", 0), None);
        assert_eq!(n.next("9", 0), None);
    }

    #[test]
    fn letters_and_roman_numerals() {
        assert_eq!(letters(1), "A");
        assert_eq!(letters(26), "Z");
        assert_eq!(letters(27), "AA");
        assert_eq!(roman(1994), "MCMXCIV");
        assert_eq!(render(4, "lowerRoman"), "iv");
        assert_eq!(render(7, "decimalZero"), "07");
    }
}
