//! E-mail messages (RFC 822 / MIME, `.eml`) through `mail-parser`: the subject as a heading,
//! From, To, Cc and Date, then the text body (or the HTML body through the HTML extractor), then
//! the names of attachments.

use mail_parser::{Address, MessageParser, MimeHeaders};

use crate::document::{BlockKind, Builder, Layout};
use crate::formats::plain;
use crate::{Document, Limits, ParseError};

/// "Name <address>", or whichever of the two is known.
pub(crate) fn contact(name: &str, address: &str) -> String {
    match (name.trim(), address.trim()) {
        ("", address) => address.to_owned(),
        (name, "") => name.to_owned(),
        (name, address) if name == address => address.to_owned(),
        (name, address) => format!("{name} <{address}>"),
    }
}

/// Pushes a message's subject as the top heading and its header fields (those with a value) as
/// one paragraph; returns the heading path for the body.
pub(crate) fn head(
    out: &mut Builder<'_>,
    subject: &str,
    fields: &[(&str, String)],
) -> Result<Vec<String>, ParseError> {
    let headings: Vec<String> = (!subject.is_empty())
        .then(|| subject.to_owned())
        .into_iter()
        .collect();
    if !subject.is_empty() {
        out.push(
            BlockKind::Heading,
            &format!("# {subject}"),
            Layout::under(&headings),
        )?;
    }
    let header: Vec<String> = fields
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(label, value)| format!("{label}: {value}"))
        .collect();
    out.push(
        BlockKind::Paragraph,
        &header.join("\n"),
        Layout::under(&headings),
    )?;
    Ok(headings)
}

fn addresses(address: Option<&Address<'_>>) -> String {
    let Some(address) = address else {
        return String::new();
    };
    address
        .iter()
        .map(|a| {
            contact(
                a.name().unwrap_or_default(),
                a.address().unwrap_or_default(),
            )
        })
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) fn extract(bytes: &[u8], limits: &Limits) -> Result<Document, ParseError> {
    let message = MessageParser::default()
        .parse(bytes)
        .ok_or_else(|| ParseError::Corrupt("not an e-mail message".into()))?;
    let mut out = Builder::new(limits);
    let subject = message.subject().unwrap_or_default().trim().to_owned();
    let headings = head(
        &mut out,
        &subject,
        &[
            ("From", addresses(message.from())),
            ("To", addresses(message.to())),
            ("Cc", addresses(message.cc())),
            (
                "Date",
                message.date().map(|d| d.to_rfc3339()).unwrap_or_default(),
            ),
        ],
    )?;
    if let Some(text) = message.body_text(0).filter(|t| !t.trim().is_empty()) {
        plain::paragraphs(
            &crate::decode::normalize(&text),
            &mut out,
            &Layout::under(&headings),
        )?;
    } else if let Some(html) = message.body_html(0) {
        if let Ok(doc) = super::html::extract(&html, limits) {
            for block in doc.blocks {
                out.push(block.kind, &block.text, Layout::under(&headings))?;
            }
        }
    }
    let attachments: Vec<String> = message
        .attachments()
        .filter_map(|a| a.attachment_name().map(str::to_owned))
        .collect();
    if !attachments.is_empty() {
        out.push(
            BlockKind::Paragraph,
            &format!("Attachments: {}", attachments.join(", ")),
            Layout::under(&headings),
        )?;
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIL: &str = "From: Ada Lovelace <ada@example.com>\r\nTo: Charles <charles@example.com>\r\n\
Subject: =?UTF-8?Q?Engine_notes_=E2=9C=93?=\r\nDate: Mon, 1 Jan 2024 10:00:00 +0000\r\n\
MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\n\
Content-Type: text/plain; charset=utf-8\r\n\r\nThe analytical engine can compose music.\r\n\r\nSecond paragraph.\r\n\
--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"notes.pdf\"\r\n\
Content-Transfer-Encoding: base64\r\n\r\nJVBERi0=\r\n--b--\r\n";

    #[test]
    fn messages_read_as_header_and_body() {
        let doc = extract(MAIL.as_bytes(), &Limits::default()).unwrap();
        let text = doc.text();
        assert!(text.starts_with("# Engine notes ✓"), "{text}");
        assert!(
            text.contains("From: Ada Lovelace <ada@example.com>"),
            "{text}"
        );
        assert!(
            text.contains("The analytical engine can compose music."),
            "{text}"
        );
        assert!(text.contains("Attachments: notes.pdf"), "{text}");
        assert_eq!(doc.blocks[2].layout.headings, ["Engine notes ✓"]);
    }
}
