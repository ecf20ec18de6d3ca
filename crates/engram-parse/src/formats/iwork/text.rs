//! Text storages (`TSWP.StorageArchive`): the text of a Pages body, a text box, a Keynote
//! placeholder or notes, or a rich table cell. The text is field 3 (repeated strings); tables of
//! (character index, object) pairs attach paragraph styles (field 5) and inline objects such as
//! tables, shapes and images (field 9, at U+FFFC characters). Character indices count UTF-16
//! code units.

use std::collections::HashMap;

use super::iwa::Objects;
use super::proto::Message;

/// Types of `TSWP.StorageArchive`.
pub(crate) const STORAGE: &[u32] = &[2001, 2005];
/// Type of `TSWP.ParagraphStyleArchive`.
const PARAGRAPH_STYLE: u32 = 2022;
/// Most parents followed from a style to a named one.
const MAX_STYLE_DEPTH: usize = 16;

/// One paragraph of a storage.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Paragraph {
    /// The text, attachments removed, line breaks as `\n`.
    pub(crate) text: String,
    /// The heading level its paragraph style names ("Title", "Heading", "Heading 2"…).
    pub(crate) level: Option<usize>,
    /// Objects attached inline in this paragraph (drawable attachments), in order.
    pub(crate) objects: Vec<u64>,
}

/// An `ObjectAttributeTable`: (character index, object) entries in order.
fn attribute_table(table: Option<Message<'_>>) -> Vec<(u64, Option<u64>)> {
    table
        .map(|t| {
            t.messages(1)
                .map(|entry| (entry.uint(1).unwrap_or(0), entry.reference(2)))
                .collect()
        })
        .unwrap_or_default()
}

/// The heading level of a paragraph style name.
pub(crate) fn heading_level(name: &str) -> Option<usize> {
    let name = name.trim().to_ascii_lowercase();
    if name == "title" || name == "heading" {
        return Some(1);
    }
    let level: usize = name.strip_prefix("heading ")?.trim().parse().ok()?;
    (1..=6).contains(&level).then_some(level)
}

/// The heading level of paragraph style `id`, from its own name or its nearest named parent.
fn style_level(
    objects: &Objects,
    id: u64,
    cache: &mut HashMap<u64, Option<usize>>,
) -> Option<usize> {
    if let Some(level) = cache.get(&id) {
        return *level;
    }
    let mut current = Some(id);
    let mut level = None;
    for _ in 0..MAX_STYLE_DEPTH {
        let Some(style) = current.and_then(|id| objects.typed(id, &[PARAGRAPH_STYLE])) else {
            break;
        };
        let Some(base) = style.message(1) else { break };
        if let Some(name) = base.string(1).filter(|n| !n.trim().is_empty()) {
            level = heading_level(&name);
            break;
        }
        current = base.reference(3);
    }
    cache.insert(id, level);
    level
}

/// The paragraphs of a storage, in order; blank ones without attachments are left out.
pub(crate) fn paragraphs(objects: &Objects, storage: Message<'_>) -> Vec<Paragraph> {
    let styles = attribute_table(storage.message(5));
    let attachments: HashMap<u64, u64> = attribute_table(storage.message(9))
        .into_iter()
        .filter_map(|(index, object)| Some((index, object?)))
        .collect();
    let mut cache = HashMap::new();
    let mut out = Vec::new();
    let mut current = Paragraph::default();
    let mut start = 0u64;
    let mut index = 0u64;
    let mut finish = |current: &mut Paragraph, start: u64| {
        let mut paragraph = std::mem::take(current);
        if paragraph.text.trim().is_empty() && paragraph.objects.is_empty() {
            return;
        }
        // The style in force at the paragraph's first character.
        let at = styles.partition_point(|(i, _)| *i <= start);
        paragraph.level = at
            .checked_sub(1)
            .and_then(|i| styles[i].1)
            .and_then(|id| style_level(objects, id, &mut cache));
        out.push(paragraph);
    };
    for text in storage.strings(3) {
        for c in text.chars() {
            let width = c.len_utf16() as u64;
            match c {
                // Paragraph, page, section and column breaks.
                '\n' | '\r' | '\u{2029}' | '\u{0C}' | '\u{04}' | '\u{0E}' => {
                    finish(&mut current, start);
                    start = index + width;
                }
                '\u{2028}' | '\u{0B}' => current.text.push('\n'),
                '\u{FFFC}' => {
                    if let Some(&object) = attachments.get(&index) {
                        current.objects.push(object);
                    }
                }
                '\t' => current.text.push('\t'),
                c if c.is_control() => {}
                c => current.text.push(c),
            }
            index += width;
        }
    }
    finish(&mut current, start);
    out
}

/// A storage's text as lines, attachments and styles left out.
pub(crate) fn plain(objects: &Objects, storage: Message<'_>) -> String {
    let lines: Vec<String> = paragraphs(objects, storage)
        .into_iter()
        .map(|p| p.text.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    lines.join("\n")
}

/// The text of storage object `id`, if it is one.
pub(crate) fn storage(objects: &Objects, id: u64) -> Option<Message<'_>> {
    objects.typed(id, STORAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heading_levels_from_style_names() {
        assert_eq!(heading_level("Title"), Some(1));
        assert_eq!(heading_level("Heading"), Some(1));
        assert_eq!(heading_level("Heading 3"), Some(3));
        assert_eq!(heading_level("Body"), None);
        assert_eq!(heading_level("Heading 12"), None);
    }
}
