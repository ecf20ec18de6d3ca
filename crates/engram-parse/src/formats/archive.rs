//! ZIP archives: every entry that engram reads (detected by content, as an upload would be) is
//! extracted under a heading with its path; nested archives are opened one level deep. Entries
//! engram does not read are skipped. The shared ZIP reader bounds the inflated bytes.

use crate::document::{BlockKind, Builder, Layout};
use crate::formats::zipped::Container;
use crate::{detect, Document, Format, Limits, ParseError};

/// Archives inside archives are opened to this depth.
const MAX_DEPTH: u32 = 2;

pub(crate) fn extract(bytes: &[u8], limits: &Limits, depth: u32) -> Result<Document, ParseError> {
    let mut zip = Container::open(bytes, limits)?;
    let mut out = Builder::new(limits);
    for name in zip.names() {
        if name.ends_with('/') || name.starts_with("__MACOSX/") {
            continue;
        }
        let Some(entry) = zip.read(&name)? else {
            continue;
        };
        let Ok(format) = detect(&entry, &name, None) else {
            continue;
        };
        let document = match format {
            Format::Zip if depth + 1 >= MAX_DEPTH => continue,
            Format::Zip => extract(&entry, limits, depth + 1),
            other => crate::extract(&entry, other, limits),
        };
        let Ok(document) = document else { continue };
        let heading = vec![name.clone()];
        out.push(
            BlockKind::Heading,
            &format!("# {name}"),
            Layout::under(&heading),
        )?;
        for mut block in document.blocks {
            block.layout.headings.insert(0, name.clone());
            out.push(block.kind, &block.text, block.layout)?;
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_readable_entry_under_its_name() {
        let bytes = std::fs::read(crate::tests::sample("test_files.zip")).unwrap();
        let doc = extract(&bytes, &Limits::default(), 0).unwrap();
        let text = doc.text();
        for s in [
            "314b0a30-5b04-470b-b9f7-eed2c2bec74a",
            "2cdda5c8-e50e-4db4-b5f0-9722a649f455",
            "affc7dad-52dc-4b98-9b5d-51e65d8a8ad0",
            "Microsoft was founded by Bill Gates",
        ] {
            assert!(text.contains(s), "{s}");
        }
        assert!(doc.blocks.iter().all(|b| !b.layout.headings.is_empty()));
    }
}
