//! Bytes to text: the one place that knows text encodings, and the test for "is this text".

use std::borrow::Cow;

use crate::Unsupported;

/// Decodes text: UTF-8 with or without a byte-order mark, UTF-16 and UTF-32 (either byte order)
/// with one, and otherwise the legacy encoding the bytes most likely are (Shift-JIS, EUC-KR,
/// GBK, Big5, Windows-1252/Latin-1, Cyrillic…), guessed by `chardetng` as browsers do and
/// decoded by `encoding_rs`. A sequence invalid in the guessed encoding is `Unsupported`.
pub fn decode(bytes: &[u8]) -> Result<Cow<'_, str>, Unsupported> {
    let invalid = |encoding: &'static str| {
        Unsupported::new(format!("text that is not valid {encoding}"), None)
    };
    // UTF-32 LE's mark begins with UTF-16 LE's, so it goes first.
    if let Some(rest) = bytes.strip_prefix(&[0xFF, 0xFE, 0, 0]) {
        return utf32(rest, u32::from_le_bytes)
            .map(Cow::Owned)
            .ok_or_else(|| invalid("UTF-32"));
    }
    if let Some(rest) = bytes.strip_prefix(&[0, 0, 0xFE, 0xFF]) {
        return utf32(rest, u32::from_be_bytes)
            .map(Cow::Owned)
            .ok_or_else(|| invalid("UTF-32"));
    }
    if let Some(rest) = bytes.strip_prefix(&[0xFF, 0xFE]) {
        return utf16(rest, u16::from_le_bytes)
            .map(Cow::Owned)
            .ok_or_else(|| invalid("UTF-16"));
    }
    if let Some(rest) = bytes.strip_prefix(&[0xFE, 0xFF]) {
        return utf16(rest, u16::from_be_bytes)
            .map(Cow::Owned)
            .ok_or_else(|| invalid("UTF-16"));
    }
    let rest = bytes.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(bytes);
    match std::str::from_utf8(rest) {
        Ok(text) => Ok(Cow::Borrowed(text)),
        Err(_) => legacy(rest).map(Cow::Owned).ok_or_else(|| {
            invalid("UTF-8, nor UTF-16 with a byte-order mark, nor a legacy encoding")
        }),
    }
}

/// Bytes in the legacy encoding they most likely are; `None` when they are not valid in it.
fn legacy(bytes: &[u8]) -> Option<String> {
    let mut detector = chardetng::EncodingDetector::new();
    detector.feed(bytes, true);
    let encoding = detector.guess(None, true);
    if encoding == encoding_rs::UTF_8 {
        return None;
    }
    encoding
        .decode_without_bom_handling_and_without_replacement(bytes)
        .map(Cow::into_owned)
}

fn utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> Option<String> {
    let pairs = bytes.chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return None;
    }
    let units = pairs.map(|pair| unit([pair[0], pair[1]]));
    char::decode_utf16(units)
        .collect::<Result<String, _>>()
        .ok()
}

fn utf32(bytes: &[u8], unit: fn([u8; 4]) -> u32) -> Option<String> {
    let quads = bytes.chunks_exact(4);
    if !quads.remainder().is_empty() {
        return None;
    }
    quads
        .map(|q| char::from_u32(unit([q[0], q[1], q[2], q[3]])))
        .collect()
}

/// How much of the text the control-character test looks at.
const SAMPLE_BYTES: usize = 64 * 1024;

/// Why decoded text is really binary data, if it is: any NUL, or more than 1 in 50 characters
/// of its first 64 KiB being control characters other than tab, newlines, form feed and escape.
pub(crate) fn binary_reason(text: &str) -> Option<&'static str> {
    if memchr::memchr(0, text.as_bytes()).is_some() {
        return Some("binary data (NUL bytes)");
    }
    let (mut chars, mut controls) = (0usize, 0usize);
    for c in head(text, SAMPLE_BYTES).chars() {
        chars += 1;
        if is_stray_control(c) && c != '\u{1b}' {
            controls += 1;
        }
    }
    (controls * 50 > chars).then_some("binary data (control characters)")
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub(crate) fn head(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn is_stray_control(c: char) -> bool {
    c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\u{c}')
}

/// Line ends to `\n` (CRLF, CR, and the Unicode separators), a form feed to a paragraph break,
/// other control characters (and stray byte-order marks) removed.
pub(crate) fn normalize(text: &str) -> Cow<'_, str> {
    let clean = |c: char| match c {
        '\t' | '\n' => true,
        '\u{2028}' | '\u{2029}' | '\u{feff}' => false,
        c => !c.is_control(),
    };
    if text.chars().all(clean) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                chars.next_if_eq(&'\n');
                out.push('\n');
            }
            '\u{2028}' => out.push('\n'),
            '\u{c}' | '\u{2029}' => out.push_str("\n\n"),
            c if clean(c) => out.push(c),
            _ => {}
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utf16le(s: &str) -> Vec<u8> {
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend(s.encode_utf16().flat_map(u16::to_le_bytes));
        bytes
    }

    #[test]
    fn decodes_utf8_and_byte_order_marks() {
        assert_eq!(decode(b"plain").unwrap(), "plain");
        assert_eq!(decode(b"\xEF\xBB\xBFbom").unwrap(), "bom");
        assert_eq!(
            decode(&utf16le("h\u{e9}llo \u{1F600}")).unwrap(),
            "h\u{e9}llo \u{1F600}"
        );
        let mut be = vec![0xFE, 0xFF];
        be.extend("caf\u{e9}".encode_utf16().flat_map(u16::to_be_bytes));
        assert_eq!(decode(&be).unwrap(), "caf\u{e9}");
        let mut utf32 = vec![0xFF, 0xFE, 0, 0];
        utf32.extend("hi".chars().flat_map(|c| (c as u32).to_le_bytes()));
        assert_eq!(decode(&utf32).unwrap(), "hi");
    }

    #[test]
    fn legacy_encodings_are_guessed() {
        assert_eq!(
            decode(b"caf\xE9 cr\xE8me br\xFBl\xE9e").unwrap(),
            "café crème brûlée"
        );
        // Shift-JIS, as a Japanese Windows writes CSV.
        let (sjis, _, _) = encoding_rs::SHIFT_JIS.encode("名前,年齢,住所\n佐藤太郎,30,東京\n");
        assert_eq!(decode(&sjis).unwrap(), "名前,年齢,住所\n佐藤太郎,30,東京\n");
        let sample = std::fs::read(crate::tests::sample("test_mskanji.csv")).unwrap();
        assert!(decode(&sample).unwrap().contains("髙橋淳"));
    }

    #[test]
    fn invalid_sequences_are_unsupported() {
        assert!(decode(&[0xFF, 0xFE, b'a'])
            .unwrap_err()
            .to_string()
            .contains("UTF-16"));
        // An unpaired surrogate.
        assert!(decode(&[0xFF, 0xFE, 0x00, 0xD8, b'a', 0]).is_err());
    }

    #[test]
    fn binary_reasons() {
        assert_eq!(binary_reason("text\twith\ttabs\r\n\u{c}\u{1b}[0m"), None);
        assert_eq!(binary_reason("a\0b"), Some("binary data (NUL bytes)"));
        assert_eq!(
            binary_reason("\u{1}\u{2}\u{3}abc"),
            Some("binary data (control characters)")
        );
        assert_eq!(binary_reason(""), None);
    }

    #[test]
    fn normalizes_line_ends_and_controls() {
        assert_eq!(normalize("a\r\nb\rc\u{b}d\u{c}e\u{feff}"), "a\nb\ncd\n\ne");
        assert!(matches!(normalize("clean\ttext\n"), Cow::Borrowed(_)));
    }
}
