//! Outlook messages (`.msg`, an OLE2 compound file) through the `cfb` crate: the subject as a
//! heading, sender, recipients and date, then the plain-text body (or the HTML body through the
//! HTML extractor). Properties are the MAPI streams `__substg1.0_<tag><type>` (type 001F:
//! UTF-16LE, 001E: 8-bit).

use std::io::{Cursor, Read};

use crate::document::{Builder, Layout};
use crate::formats::plain;
use crate::{Document, Limits, ParseError};

/// Largest property stream read.
const MAX_STREAM: u64 = 32 * 1024 * 1024;

type Compound<'a> = cfb::CompoundFile<Cursor<&'a [u8]>>;

fn stream(file: &mut Compound<'_>, path: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    file.open_stream(path)
        .ok()?
        .take(MAX_STREAM)
        .read_to_end(&mut out)
        .ok()?;
    Some(out)
}

/// A string property under `folder` (root "" or a recipient folder), by its tag.
fn property(file: &mut Compound<'_>, folder: &str, tag: &str) -> Option<String> {
    if let Some(bytes) = stream(file, &format!("{folder}/__substg1.0_{tag}001F")) {
        let units: Vec<u16> = bytes
            .chunks_exact(2)
            .map(|p| u16::from_le_bytes([p[0], p[1]]))
            .collect();
        return Some(
            String::from_utf16_lossy(&units)
                .trim_end_matches('\0')
                .to_owned(),
        );
    }
    let bytes = stream(file, &format!("{folder}/__substg1.0_{tag}001E"))?;
    Some(
        String::from_utf8(bytes.clone())
            .unwrap_or_else(|_| encoding_rs::WINDOWS_1252.decode(&bytes).0.into_owned())
            .trim_end_matches('\0')
            .to_owned(),
    )
}

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<Document, ParseError> {
    let mut file = cfb::CompoundFile::open(Cursor::new(bytes))
        .map_err(|e| ParseError::Corrupt(format!("unreadable Outlook message: {e}")))?;
    let subject = property(&mut file, "", "0037").unwrap_or_default();
    let sender_name = property(&mut file, "", "0C1A").unwrap_or_default();
    let sender = property(&mut file, "", "0C1F")
        .or_else(|| property(&mut file, "", "5D01"))
        .unwrap_or_default();
    let recipient_folders: Vec<String> = file
        .read_root_storage()
        .filter(|e| e.is_storage() && e.name().starts_with("__recip_version1.0_"))
        .map(|e| format!("/{}", e.name()))
        .collect();
    let mut recipients = Vec::new();
    for folder in recipient_folders {
        let name = property(&mut file, &folder, "3001").unwrap_or_default();
        let address = property(&mut file, &folder, "39FE")
            .or_else(|| property(&mut file, &folder, "3003"))
            .unwrap_or_default();
        recipients.push(super::eml::contact(&name, &address));
    }
    let to = property(&mut file, "", "0E04").unwrap_or_default();
    let mut out = Builder::new(limits);
    let to = if recipients.is_empty() {
        to
    } else {
        recipients.join(", ")
    };
    let from = super::eml::contact(&sender_name, &sender);
    let headings = super::eml::head(
        &mut out,
        &subject,
        &[("From", from), ("To", to), ("Subject", subject.clone())],
    )?;
    match property(&mut file, "", "1000").filter(|b| !b.trim().is_empty()) {
        Some(body) => plain::paragraphs(
            &crate::decode::normalize(&body),
            &mut out,
            &Layout::under(&headings),
        )?,
        None => {
            if let Some(html) = stream(&mut file, "/__substg1.0_10130102")
                .map(|b| String::from_utf8_lossy(&b).into_owned())
            {
                if let Ok(doc) = super::html::extract(&html, limits) {
                    for block in doc.blocks {
                        out.push(block.kind, &block.text, Layout::under(&headings))?;
                    }
                }
            }
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outlook_messages() {
        let bytes = std::fs::read(crate::tests::sample("test_outlook_msg.msg")).unwrap();
        let text = extract(&bytes, &Limits::default()).unwrap().text();
        for s in [
            "test.sender@example.com",
            "test.recipient@example.com",
            "Test Email Message",
            "This is the body of the test email message",
        ] {
            assert!(text.contains(s), "{s} missing from {text}");
        }
        // A truncated message reads what it can or fails: never a panic.
        let _ = extract(&bytes[..bytes.len() / 2], &Limits::default());
        assert!(extract(
            b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1garbage",
            &Limits::default()
        )
        .is_err());
    }
}
