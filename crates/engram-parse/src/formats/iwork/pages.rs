//! Pages: the body text storage of `TP.DocumentArchive` (field 4) in order, headings from
//! paragraph style names with their path, and what is anchored in the text (tables as Markdown
//! tables, text boxes and groups as paragraphs); then tables and text boxes that float on the
//! pages, which the body does not reach.

use std::collections::HashSet;

use super::iwa::Objects;
use super::text::{self, STORAGE};
use super::{drawables, PAGES_DOCUMENT};
use crate::document::{BlockKind, Builder, Layout};
use crate::{Document, Limits, ParseError};

/// `KindType` of the body storage.
const BODY: u64 = 0;

pub(crate) fn extract(objects: &Objects, limits: &Limits) -> Result<Document, ParseError> {
    let document = objects
        .ids_of(&[PAGES_DOCUMENT])
        .first()
        .and_then(|&id| objects.typed(id, &[PAGES_DOCUMENT]));
    let mut bodies: Vec<u64> = document
        .and_then(|d| d.reference(4))
        .filter(|&id| text::storage(objects, id).is_some())
        .into_iter()
        .collect();
    if bodies.is_empty() {
        // Without the document's reference, every body storage in order.
        bodies = objects
            .ids_of(STORAGE)
            .into_iter()
            .filter(|&id| text::storage(objects, id).is_some_and(|s| s.uint(1) == Some(BODY)))
            .collect();
    }
    let mut out = Builder::new(limits);
    let mut seen = HashSet::new();
    let mut headings: Vec<(usize, String)> = Vec::new();
    for body in bodies {
        seen.insert(body);
        let Some(storage) = text::storage(objects, body) else {
            continue;
        };
        for paragraph in text::paragraphs(objects, storage) {
            let text = paragraph.text.trim();
            let path = |headings: &[(usize, String)]| {
                Layout::under(&headings.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>())
            };
            if !text.is_empty() {
                match paragraph.level {
                    Some(level) => {
                        let title = text.replace('\n', " ");
                        headings.retain(|(l, _)| *l < level);
                        headings.push((level, title.clone()));
                        let heading = format!("{} {title}", "#".repeat(level));
                        out.push(BlockKind::Heading, &heading, path(&headings))?;
                    }
                    None => out.push(BlockKind::Paragraph, text, path(&headings))?,
                }
            }
            for object in paragraph.objects {
                drawables::write(
                    objects,
                    object,
                    &mut seen,
                    &mut out,
                    &path(&headings),
                    false,
                )?;
            }
        }
    }
    // Tables and text boxes not anchored in the body text.
    let layout = Layout::under(&[]);
    for id in objects.ids_of(&drawables::FLOATING) {
        if !seen.contains(&id) {
            drawables::write(objects, id, &mut seen, &mut out, &layout, false)?;
        }
    }
    out.finish()
}
