//! What sits on a page, slide or sheet, or is anchored in text: tables, text boxes (shapes with
//! a text storage, Keynote placeholders) and groups of them. Each object is written once (a
//! `seen` set), so reference cycles and shared objects end; nesting is bounded too.

use std::collections::HashSet;

use super::iwa::Objects;
use super::tables::{self, TABLE_INFO};
use super::text;
use crate::document::{BlockKind, Builder, Layout};
use crate::ParseError;

/// Type of `TSWP.ShapeInfoArchive` (a text box or shape).
pub(crate) const SHAPE_INFO: u32 = 2011;
/// Types of `KN.PlaceholderArchive` (its field 1 is a shape).
pub(crate) const PLACEHOLDER: &[u32] = &[7, 12];
/// Type of `TSWP.DrawableAttachmentArchive`, an object anchored in text.
const DRAWABLE_ATTACHMENT: u32 = 2003;
/// Type of `TSD.GroupArchive`.
const GROUP: u32 = 3008;
/// Drawables that may float outside any text: tables and text boxes.
pub(crate) const FLOATING: [u32; 2] = [TABLE_INFO, SHAPE_INFO];
/// Deepest nesting of groups and anchored objects followed.
const MAX_DEPTH: usize = 32;

/// The text storage of a shape (`owned_storage`, or the older `deprecated_storage`).
pub(crate) fn shape_storage(objects: &Objects, id: u64) -> Option<u64> {
    let (kind, message) = objects.get(id)?;
    let shape = match kind {
        SHAPE_INFO => message,
        k if PLACEHOLDER.contains(&k) => message.message(1)?,
        _ => return None,
    };
    shape
        .reference(4)
        .or_else(|| shape.reference(2))
        .filter(|&s| text::storage(objects, s).is_some())
}

/// Writes drawable `id` (and what it holds) under `layout`; tables get a heading with their
/// name when `table_titles` and the application shows the name.
pub(crate) fn write(
    objects: &Objects,
    id: u64,
    seen: &mut HashSet<u64>,
    out: &mut Builder<'_>,
    layout: &Layout,
    table_titles: bool,
) -> Result<(), ParseError> {
    write_at(objects, id, seen, out, layout, table_titles, 0)
}

fn write_at(
    objects: &Objects,
    id: u64,
    seen: &mut HashSet<u64>,
    out: &mut Builder<'_>,
    layout: &Layout,
    table_titles: bool,
    depth: usize,
) -> Result<(), ParseError> {
    if depth > MAX_DEPTH || !seen.insert(id) {
        return Ok(());
    }
    let Some((kind, message)) = objects.get(id) else {
        return Ok(());
    };
    let next = |id: u64, seen: &mut HashSet<u64>, out: &mut Builder<'_>| {
        write_at(objects, id, seen, out, layout, table_titles, depth + 1)
    };
    match kind {
        DRAWABLE_ATTACHMENT => {
            if let Some(drawable) = message.reference(1) {
                next(drawable, seen, out)?;
            }
        }
        GROUP => {
            for child in message.references(2) {
                next(child, seen, out)?;
            }
        }
        TABLE_INFO => {
            // Each table model is read once, whatever points to it.
            let Some(model) = tables::model_of(objects, id).filter(|&m| seen.insert(m)) else {
                return Ok(());
            };
            let limit = out.limits().max_text_bytes;
            let Some(table) = tables::read(objects, model, limit)? else {
                return Ok(());
            };
            let mut layout = layout.clone();
            let titled = table_titles && table.name_shown && !table.name.trim().is_empty();
            if titled && !table.rows.is_empty() {
                let name = table.name.trim().to_owned();
                layout.headings.push(name.clone());
                let heading = format!("{} {name}", "#".repeat(layout.headings.len() + 1));
                out.push(BlockKind::Heading, &heading, layout.clone())?;
            }
            tables::write(out, &table, layout)?;
        }
        _ => {
            let Some(storage) = shape_storage(objects, id) else {
                return Ok(());
            };
            if !seen.insert(storage) {
                return Ok(());
            }
            let Some(storage) = text::storage(objects, storage) else {
                return Ok(());
            };
            for paragraph in text::paragraphs(objects, storage) {
                out.push(BlockKind::Paragraph, &paragraph.text, layout.clone())?;
                for object in paragraph.objects {
                    next(object, seen, out)?;
                }
            }
        }
    }
    Ok(())
}
