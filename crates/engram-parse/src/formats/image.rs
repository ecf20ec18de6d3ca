//! Images (PNG, JPEG, TIFF, WebP): the text in them by Tesseract OCR, after their descriptive
//! metadata (XMP title, description and author; EXIF description, artist and dates) when they
//! carry any. The size is read from the header first: an image past `MAX_PIXELS` is refused
//! before anything decodes it. An image with neither text nor metadata is `NoText`.

use memchr::memmem;

use crate::document::{BlockKind, Builder, Layout};
use crate::formats::{plain, tools, xml};
use crate::{Document, Limits, ParseError};

/// Largest image read (100 megapixels: a 10000 x 10000 scan).
pub(crate) const MAX_PIXELS: u64 = 100_000_000;

pub(crate) fn extract(
    bytes: &[u8],
    extension: &str,
    limits: &Limits,
) -> Result<Document, ParseError> {
    let size = imagesize::blob_size(bytes)
        .map_err(|e| ParseError::Corrupt(format!("unreadable image header: {e}")))?;
    let pixels = (size.width as u64).saturating_mul(size.height as u64);
    if pixels > MAX_PIXELS {
        return Err(ParseError::TooLarge {
            what: "image pixels",
            limit: usize::try_from(MAX_PIXELS).unwrap_or(usize::MAX),
        });
    }
    let mut out = Builder::new(limits);
    let metadata = metadata(bytes);
    if !metadata.is_empty() {
        let mut lines = metadata;
        lines.push(format!("Image size: {}x{}", size.width, size.height));
        out.push(BlockKind::Paragraph, &lines.join("\n"), Layout::default())?;
    }
    let dir = tempfile::tempdir().map_err(|e| ParseError::Corrupt(format!("temp dir: {e}")))?;
    let input = dir.path().join(format!("in.{extension}"));
    std::fs::write(&input, bytes).map_err(|e| ParseError::Corrupt(format!("temp file: {e}")))?;
    let text = tools::ocr(&input, dir.path(), limits.max_text_bytes, &limits.interrupt)?;
    plain::paragraphs(
        &crate::decode::normalize(&text),
        &mut out,
        &Layout::default(),
    )?;
    out.finish()
}

/// Descriptive metadata as `Name: value` lines: XMP (Dublin Core title, description, creator,
/// PDF author) and EXIF (description, artist, copyright, original date).
fn metadata(bytes: &[u8]) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(start) = memmem::find(bytes, b"<x:xmpmeta") {
        let rest = &bytes[start..];
        if let Some(end) = memmem::find(rest, b"</x:xmpmeta>") {
            let packet = String::from_utf8_lossy(&rest[..end + "</x:xmpmeta>".len()]);
            if let Ok(elements) = xml::elements(&packet) {
                for element in elements {
                    let label = match (element.parent(), element.name()) {
                        (_, "Author") => "Author",
                        ("Alt" | "Seq" | "Bag", "li") => {
                            match element.path.iter().rev().nth(2).map(String::as_str) {
                                Some("title") => "Title",
                                Some("description") => "Description",
                                Some("creator") => "Creator",
                                Some("subject") => "Subject",
                                _ => continue,
                            }
                        }
                        _ => continue,
                    };
                    lines.push(format!("{label}: {}", element.text.trim()));
                }
            }
        }
    }
    if let Ok(exif) = exif::Reader::new().read_from_container(&mut std::io::Cursor::new(bytes)) {
        for (tag, label) in [
            (exif::Tag::ImageDescription, "Description"),
            (exif::Tag::Artist, "Artist"),
            (exif::Tag::Copyright, "Copyright"),
            (exif::Tag::DateTimeOriginal, "Date taken"),
            (exif::Tag::DateTime, "Date"),
        ] {
            if let Some(field) = exif.get_field(tag, exif::In::PRIMARY) {
                let value = match &field.value {
                    exif::Value::Ascii(parts) => parts
                        .iter()
                        .map(|p| String::from_utf8_lossy(p).trim().to_owned())
                        .collect::<Vec<_>>()
                        .join(" "),
                    other => other.display_as(tag).to_string(),
                };
                if !value.is_empty() && !lines.iter().any(|l| l.ends_with(&value)) {
                    lines.push(format!("{label}: {value}"));
                }
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::sample;

    #[test]
    fn metadata_and_ocr_text() {
        let photo = std::fs::read(sample("test.jpg")).unwrap();
        let text = extract(&photo, "jpg", &Limits::default()).unwrap().text();
        for expected in [
            "AutoGen Authors",
            "AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation",
            "1615x1967",
            "2024:03:14 22:10:00",
        ] {
            assert!(text.contains(expected), "{expected} missing from {text}");
        }
        let shot = std::fs::read(sample("test_llm.jpg")).unwrap();
        let text = extract(&shot, "jpg", &Limits::default()).unwrap().text();
        assert!(text.contains("5bda1dd6"), "{text}");
    }

    #[test]
    fn tiff_pages_rendered_by_poppler() {
        // A real TIFF, made by pdftoppm from a page with known text.
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("page");
        let made = std::process::Command::new("pdftoppm")
            .args(["-r", "200", "-f", "1", "-l", "1", "-tiff", "-singlefile"])
            .arg(sample("REPAIR-2022-INV-001_multipage.pdf"))
            .arg(&prefix)
            .status()
            .unwrap();
        assert!(made.success());
        let tiff = std::fs::read(prefix.with_extension("tif")).unwrap();
        assert_eq!(crate::detect(&tiff, "page", None), Ok(crate::Format::Tiff));
        let text = extract(&tiff, "tiff", &Limits::default()).unwrap().text();
        assert!(text.contains("Gabriel Diaz"), "{text}");
    }

    #[test]
    fn huge_and_blank_images() {
        // A PNG header claiming 100000 x 100000 pixels: refused before any decoding.
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend(100_000u32.to_be_bytes());
        png.extend(100_000u32.to_be_bytes());
        png.extend([8, 2, 0, 0, 0, 0, 0, 0, 0]);
        assert!(matches!(
            extract(&png, "png", &Limits::default()),
            Err(ParseError::TooLarge { .. })
        ));
        // A real blank image (made by pdftoppm from an empty page is overkill: a 1x1 PNG).
        let blank: &[u8] = &[
            0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n', 0, 0, 0, 0x0d, b'I', b'H', b'D',
            b'R', 0, 0, 0, 1, 0, 0, 0, 1, 8, 6, 0, 0, 0, 0x1f, 0x15, 0xc4, 0x89, 0, 0, 0, 0x0a,
            b'I', b'D', b'A', b'T', 0x78, 0x9c, 0x63, 0, 1, 0, 0, 5, 0, 1, 0x0d, 0x0a, 0x2d, 0xb4,
            0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xae, 0x42, 0x60, 0x82,
        ];
        assert!(matches!(
            extract(blank, "png", &Limits::default()),
            Err(ParseError::NoText | ParseError::Corrupt(_))
        ));
    }
}
