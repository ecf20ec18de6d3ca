//! Numbers: each sheet of `TN.DocumentArchive` (field 1) in order, as spreadsheets are read: a
//! `## Sheet` heading, `layout.sheet` on every block, then the sheet's tables as Markdown tables
//! (first non-empty row as the header, repeated in every block, the table's own row numbers in
//! `row_range`), each under a heading with its name when Numbers shows it, and the sheet's text
//! boxes.

use std::collections::HashSet;

use super::drawables;
use super::iwa::Objects;
use super::{DOCUMENT, SHOW_OR_SHEET};
use crate::document::{BlockKind, Builder, Layout};
use crate::{Document, Limits, ParseError};

pub(crate) fn extract(objects: &Objects, limits: &Limits) -> Result<Document, ParseError> {
    let sheets: Vec<u64> = objects
        .ids_of(&[DOCUMENT])
        .into_iter()
        .filter_map(|id| objects.typed(id, &[DOCUMENT]))
        .map(|document| document.references(1).collect::<Vec<_>>())
        .find(|sheets| !sheets.is_empty())
        .ok_or_else(|| ParseError::Corrupt("a Numbers document without sheets".into()))?;
    let mut out = Builder::new(limits);
    let mut seen = HashSet::new();
    let mut sheet_ids = HashSet::new();
    let sheets = sheets.into_iter().filter(|id| sheet_ids.insert(*id));
    for (index, id) in sheets.enumerate() {
        let Some(sheet) = objects.typed(id, &[SHOW_OR_SHEET]) else {
            continue;
        };
        let name = sheet
            .string(1)
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("Sheet {}", index + 1));
        let name = name.as_str();
        let layout = Layout {
            sheet: Some(name.to_owned()),
            headings: vec![name.to_owned()],
            ..Layout::default()
        };
        // The sheet's heading goes in front of its content, if it has any.
        let mut sheet_out = Builder::new(limits);
        for drawable in sheet.references(2) {
            drawables::write(objects, drawable, &mut seen, &mut sheet_out, &layout, true)?;
        }
        if sheet_out.blocks().is_empty() {
            continue;
        }
        out.push(BlockKind::Heading, &format!("## {name}"), layout.clone())?;
        for block in sheet_out.into_blocks() {
            out.push(block.kind, &block.text, block.layout)?;
        }
    }
    out.finish()
}
