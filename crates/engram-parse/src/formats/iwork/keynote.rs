//! Keynote: one section per slide in presentation order (the show's slide tree), numbered from 1
//! in `layout.slide` as PowerPoint and OpenDocument slides are: a `## Slide N: title` heading
//! from the title placeholder, the body placeholder, the slide's other text boxes and tables in
//! their stacking order, then the presenter notes. Template (master) slides are not read.

use std::collections::HashSet;

use super::drawables::{self, PLACEHOLDER};
use super::iwa::Objects;
use super::proto::Message;
use super::{text, DOCUMENT, SHOW_OR_SHEET};
use crate::document::{BlockKind, Builder, Layout};
use crate::{Document, Limits, ParseError};

const SLIDE_NODE: u32 = 4;
const SLIDE: &[u32] = &[5, 6];
const NOTE: u32 = 15;
/// `KN.PlaceholderArchive.Kind` of the slide number.
const SLIDE_NUMBER_PLACEHOLDER: u64 = 1;
/// Most slide nodes visited in an old-style slide tree.
const MAX_NODES: usize = 100_000;

/// The show: `KN.DocumentArchive` field 2.
fn show(objects: &Objects) -> Option<Message<'_>> {
    objects.ids_of(&[DOCUMENT]).into_iter().find_map(|id| {
        let show = objects.typed(id, &[DOCUMENT])?.reference(2)?;
        objects.typed(show, &[SHOW_OR_SHEET])
    })
}

/// Slide archives in presentation order: the slide tree's list of slide nodes, or, in older
/// documents, its root node's children depth first.
fn slides(objects: &Objects, show: Message<'_>) -> Vec<u64> {
    let Some(tree) = show.message(3) else {
        return Vec::new();
    };
    let mut nodes: Vec<u64> = tree.references(2).collect();
    if nodes.is_empty() {
        let mut seen = HashSet::new();
        let mut stack: Vec<u64> = tree.reference(1).into_iter().collect();
        while let Some(id) = stack.pop() {
            if seen.len() >= MAX_NODES || !seen.insert(id) {
                continue;
            }
            let Some(node) = objects.typed(id, &[SLIDE_NODE]) else {
                continue;
            };
            nodes.push(id);
            let children: Vec<u64> = node.references(1).collect();
            stack.extend(children.into_iter().rev());
        }
    }
    // Each slide once, where it first comes.
    let mut seen = HashSet::new();
    nodes
        .into_iter()
        .filter_map(|id| objects.typed(id, &[SLIDE_NODE])?.reference(2))
        .filter(|&slide| objects.typed(slide, SLIDE).is_some() && seen.insert(slide))
        .collect()
}

fn placeholder_kind(objects: &Objects, id: u64) -> Option<u64> {
    objects.typed(id, PLACEHOLDER)?.uint(2)
}

pub(crate) fn extract(objects: &Objects, limits: &Limits) -> Result<Document, ParseError> {
    let show = show(objects)
        .ok_or_else(|| ParseError::Corrupt("a Keynote document without its show".into()))?;
    let mut out = Builder::new(limits);
    // Objects are written once in the whole deck: slides own their drawables.
    let mut seen = HashSet::new();
    for (index, slide_id) in slides(objects, show).into_iter().enumerate() {
        let Some(slide) = objects.typed(slide_id, SLIDE) else {
            continue;
        };
        let number = u32::try_from(index + 1).unwrap_or(u32::MAX);
        // What is on the slide, back to front; placeholders not in it are hidden.
        let mut order: Vec<u64> = slide.references(42).collect();
        if order.is_empty() {
            order = slide.references(7).collect();
        }
        let shown = |id: &u64| order.is_empty() || order.contains(id);
        let title_placeholder = slide.reference(5).filter(shown);
        let title = title_placeholder
            .and_then(|id| drawables::shape_storage(objects, id))
            .and_then(|s| text::storage(objects, s))
            .map(|s| text::plain(objects, s).replace('\n', " "))
            .filter(|t| !t.trim().is_empty());
        if title.is_some() {
            seen.extend(title_placeholder);
        }
        let heading = format!(
            "Slide {number}{}",
            title
                .as_ref()
                .map(|t| format!(": {}", t.trim()))
                .unwrap_or_default()
        );
        let layout = Layout {
            slide: Some(number),
            headings: vec![heading.clone()],
            ..Layout::default()
        };
        out.push(BlockKind::Heading, &format!("## {heading}"), layout.clone())?;
        let body = slide.reference(6).filter(shown);
        for id in body.into_iter().chain(order.iter().copied()) {
            if placeholder_kind(objects, id) == Some(SLIDE_NUMBER_PLACEHOLDER) {
                continue;
            }
            drawables::write(objects, id, &mut seen, &mut out, &layout, false)?;
        }
        let notes = slide
            .reference(27)
            .and_then(|n| objects.typed(n, &[NOTE])?.reference(1))
            .and_then(|s| text::storage(objects, s))
            .map(|s| text::plain(objects, s))
            .filter(|t| !t.trim().is_empty());
        if let Some(notes) = notes {
            out.push(
                BlockKind::Paragraph,
                &format!("Notes: {notes}"),
                layout.clone(),
            )?;
        }
    }
    out.finish()
}
