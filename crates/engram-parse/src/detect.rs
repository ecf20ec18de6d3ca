//! Which format a file is: by its content first, then by its name and declared type.
//!
//! 1. Signatures that are certain (PDF, ZIP and what is inside it, OLE2, images, archives,
//!    executables…). Each names a family that is `Unsupported` for now; the later issue that
//!    brings a family turns its arm into `Ok(Format::…)`.
//! 2. Otherwise the bytes must decode as text and not look binary; binary data is named by
//!    `infer` where it knows the type.
//! 3. Text: the file-name extension, else the declared media type, picks Markdown, CSV, TSV,
//!    JSON or HTML; else HTML and JSON are recognized by content; else plain text.
//!
//! The name never makes binary data text, nor text binary: a `.pdf` holding text is text, a
//! `.txt` holding a PNG is refused.

use std::borrow::Cow;

use memchr::memmem;
use serde::de::IgnoredAny;

use crate::formats::{iwork, json};
use crate::{decode, Format, Unsupported};

/// The format of a file, or why it is not supported. Linear in the file's size (UTF-8
/// validation, and a JSON syntax check for JSON candidates); call it off the async runtime for
/// large files.
pub fn detect(
    bytes: &[u8],
    filename: &str,
    declared_media_type: Option<&str>,
) -> Result<Format, Unsupported> {
    let extension = extension(filename);
    if let Some(format) = binary_format(bytes, &extension) {
        return Ok(format);
    }
    if let Some(found) = signature(bytes, &extension) {
        return Err(found);
    }
    let text = match decode::decode(bytes) {
        Ok(text) => text,
        Err(not_text) => {
            let binary =
                || mostly_control_bytes(bytes).then(|| Unsupported::new("binary data", None));
            return Err(name_binary(bytes).or_else(binary).unwrap_or(not_text));
        }
    };
    if let Some(reason) = decode::binary_reason(&text) {
        return Err(name_binary(bytes).unwrap_or_else(|| Unsupported::new(reason, None)));
    }
    if is_svg(&text) {
        return Err(found("SVG image", "image/svg+xml"));
    }
    Ok(text_format(&text, &extension, declared_media_type))
}

/// The lower-cased extension of the last path component, or "".
fn extension(filename: &str) -> String {
    let name = filename.rsplit(['/', '\\']).next().unwrap_or_default();
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => String::new(),
    }
}

fn text_format(text: &str, extension: &str, declared: Option<&str>) -> Format {
    // `.txt` and `text/plain` say only "text": they do not stop the other signs.
    let specific = |format: &Format| *format != Format::PlainText && format.is_text();
    let named = Format::from_extension(extension)
        .filter(specific)
        .or_else(|| declared.and_then(Format::from_media_type).filter(specific));
    match named {
        Some(Format::Json) if !looks_like_json(text, true) => Format::PlainText,
        Some(format) => format,
        _ if looks_like_html(text) => Format::Html,
        _ if looks_like_json(text, false) => Format::Json,
        _ if looks_like_xml(text) => Format::Xml,
        _ if looks_like_email(text) => Format::Eml,
        _ => Format::PlainText,
    }
}

/// Markup whose first element, after any XML declaration, comments and doctype, is `<svg>`.
fn is_svg(text: &str) -> bool {
    let mut rest = text.trim_start();
    loop {
        let skip = if rest.starts_with("<?") {
            rest.find("?>").map(|i| i + 2)
        } else if rest.starts_with("<!--") {
            rest.find("-->").map(|i| i + 3)
        } else if rest.starts_with("<!") {
            rest.find('>').map(|i| i + 1)
        } else {
            break;
        };
        match skip {
            Some(i) => rest = rest[i..].trim_start(),
            None => return false,
        }
    }
    let open = rest
        .get(..4)
        .is_some_and(|tag| tag.eq_ignore_ascii_case("<svg"));
    open && matches!(
        rest.as_bytes().get(4),
        Some(b' ' | b'>' | b'\n' | b'\t' | b'\r' | b'/')
    )
}

/// Markup that opens with an XML declaration, or whose first element is closed again at the
/// end of the text (`<catalog>…</catalog>`).
fn looks_like_xml(text: &str) -> bool {
    let start = text.trim_start();
    if start.starts_with("<?xml") {
        return true;
    }
    let Some(name) = start.strip_prefix('<').map(|rest| {
        rest.split([' ', '>', '/', '\n', '\t', '\r'])
            .next()
            .unwrap_or_default()
    }) else {
        return false;
    };
    let is_name = name
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
        && name
            .chars()
            .all(|c| c.is_alphanumeric() || "_-.:".contains(c));
    // HTML fragments (`<b>…</b>`, `<div>…</div>`) are not XML documents.
    const HTML: &[&str] = &[
        "a",
        "b",
        "i",
        "u",
        "p",
        "em",
        "strong",
        "span",
        "div",
        "section",
        "article",
        "ul",
        "ol",
        "li",
        "table",
        "tr",
        "td",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "body",
        "head",
        "pre",
        "code",
        "blockquote",
        "main",
        "nav",
        "header",
        "footer",
        "form",
        "small",
        "br",
        "img",
    ];
    is_name
        && !HTML.contains(&name.to_ascii_lowercase().as_str())
        && text.trim_end().ends_with(&format!("</{name}>"))
}

/// A header block of RFC 822 fields (`Name: value` lines up to the first blank line) with at
/// least three of the fields every message has.
fn looks_like_email(text: &str) -> bool {
    const FIELDS: &[&str] = &[
        "from",
        "to",
        "subject",
        "date",
        "message-id",
        "mime-version",
        "received",
        "return-path",
        "content-type",
        "cc",
        "reply-to",
        "delivered-to",
    ];
    let head = decode::head(text, 16 * 1024);
    let mut known = 0;
    for line in head.lines() {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            continue; // a folded continuation
        }
        let Some((name, _)) = line.split_once(':') else {
            return false;
        };
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return false;
        }
        known += usize::from(FIELDS.contains(&name.to_ascii_lowercase().as_str()));
    }
    known >= 3
}

/// Markup whose first KiB opens a `<!doctype html>` or an `<html>` element.
fn looks_like_html(text: &str) -> bool {
    text.trim_start().starts_with('<')
        && (starts_with_tag(text, "<!doctype html") || starts_with_tag(text, "<html"))
}

/// Whether `tag` (lower case, with its `<`) opens within the first KiB of markup.
fn starts_with_tag(text: &str, tag: &str) -> bool {
    let start = text.trim_start();
    if !start.starts_with('<') {
        return false;
    }
    let lower = decode::head(start, 1024).to_ascii_lowercase();
    lower.match_indices(tag).any(|(i, _)| {
        matches!(
            lower.as_bytes().get(i + tag.len()),
            Some(b' ' | b'>' | b'\n' | b'\t' | b'\r')
        )
    })
}

/// One JSON value or a stream of them (JSON Lines) spanning the whole text, no deeper than
/// `extract` parses. Scalars count only when the name or declared type said JSON.
fn looks_like_json(text: &str, named: bool) -> bool {
    let start = text.trim_start();
    if start.is_empty() || (!named && !start.starts_with(['{', '['])) {
        return false;
    }
    // Ignoring values checks syntax without allocating (and without a depth limit).
    json::within_depth(start)
        && serde_json::Deserializer::from_str(start)
            .into_iter::<IgnoredAny>()
            .all(|value| value.is_ok())
}

type Media = Option<Cow<'static, str>>;

fn found(label: &'static str, media_type: &'static str) -> Unsupported {
    Unsupported::new(label, Some(Cow::Borrowed(media_type)))
}

/// Binary formats engram reads, by their certain signatures.
fn binary_format(bytes: &[u8], extension: &str) -> Option<Format> {
    if bytes.starts_with(b"%PDF-") {
        return Some(Format::Pdf);
    }
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some(Format::Png);
    }
    if bytes.starts_with(b"\xFF\xD8\xFF") {
        return Some(Format::Jpeg);
    }
    if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        return Some(Format::Tiff);
    }
    if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        return Some(Format::Webp);
    }
    if bytes.starts_with(b"PK\x03\x04") {
        return match zip(bytes, extension).media_type() {
            Some(media) => Format::from_media_type(media).filter(|f| !f.is_text()),
            None => None,
        };
    }
    if bytes.starts_with(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1") {
        return ole2(bytes)
            .media_type()
            .and_then(Format::from_media_type)
            .filter(|f| !f.is_text());
    }
    None
}

/// Certain signatures at the start of the file.
fn signature(bytes: &[u8], extension: &str) -> Option<Unsupported> {
    const TABLE: &[(&[u8], &str, &str)] = &[
        (b"%PDF-", "PDF document", "application/pdf"),
        (b"\x89PNG\r\n\x1a\n", "PNG image", "image/png"),
        (b"\xFF\xD8\xFF", "JPEG image", "image/jpeg"),
        (b"GIF87a", "GIF image", "image/gif"),
        (b"GIF89a", "GIF image", "image/gif"),
        (b"II*\0", "TIFF image", "image/tiff"),
        (b"MM\0*", "TIFF image", "image/tiff"),
        (b"\x1F\x8B", "gzip archive", "application/gzip"),
        (b"\x7FELF", "ELF executable", "application/x-executable"),
        (b"{\\rtf", "RTF document", "application/rtf"),
        (b"%!PS", "PostScript document", "application/postscript"),
        (
            b"7z\xBC\xAF\x27\x1C",
            "7-Zip archive",
            "application/x-7z-compressed",
        ),
        (b"Rar!\x1A\x07", "RAR archive", "application/vnd.rar"),
        (b"\xFD7zXZ\0", "xz archive", "application/x-xz"),
        (b"\x28\xB5\x2F\xFD", "zstd archive", "application/zstd"),
        (
            b"SQLite format 3\0",
            "SQLite database",
            "application/vnd.sqlite3",
        ),
        (b"\0asm", "WebAssembly module", "application/wasm"),
        (b"OggS\0", "Ogg media", "audio/ogg"),
        (b"fLaC", "FLAC audio", "audio/flac"),
        (b"\x1A\x45\xDF\xA3", "Matroska or WebM video", "video/webm"),
    ];
    if let Some(&(_, label, media_type)) =
        TABLE.iter().find(|(magic, _, _)| bytes.starts_with(magic))
    {
        return Some(found(label, media_type));
    }
    if bytes.starts_with(b"PK\x03\x04")
        || bytes.starts_with(b"PK\x05\x06")
        || bytes.starts_with(b"PK\x07\x08")
    {
        return Some(zip(bytes, extension));
    }
    if bytes.starts_with(b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1") {
        return Some(ole2(bytes));
    }
    if bytes.len() >= 12 && bytes.starts_with(b"RIFF") {
        return match &bytes[8..12] {
            b"WEBP" => Some(found("WebP image", "image/webp")),
            b"WAVE" => Some(found("WAV audio", "audio/wav")),
            b"AVI " => Some(found("AVI video", "video/x-msvideo")),
            _ => None,
        };
    }
    if bytes.len() >= 12 && &bytes[4..8] == b"ftyp" {
        return Some(match &bytes[8..12] {
            b"heic" | b"heix" | b"mif1" | b"msf1" | b"hevc" => found("HEIC image", "image/heic"),
            b"avif" | b"avis" => found("AVIF image", "image/avif"),
            b"qt  " => found("QuickTime video", "video/quicktime"),
            b"M4A " => found("MPEG-4 audio", "audio/mp4"),
            _ => found("MPEG-4 media", "video/mp4"),
        });
    }
    None
}

/// ZIP containers: OpenDocument and EPUB by their `mimetype` entry, Office Open XML and iWork by
/// their entry names (the central directory at the end lists every name uncompressed).
fn zip(bytes: &[u8], extension: &str) -> Unsupported {
    let archive = ::zip::ZipArchive::new(std::io::Cursor::new(bytes)).ok();
    // The `mimetype` entry comes first, stored, in a package made to the specifications; some
    // writers put it elsewhere (pandoc's test ODTs), where the directory finds it.
    let mimetype = if bytes.get(30..38) == Some(b"mimetype") {
        // The entry is stored uncompressed, right after its name; its size is at offset 18.
        let size = bytes
            .get(18..22)
            .map_or(0, |s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
            .min(100);
        Some(bytes.get(38..38 + size).unwrap_or_default().to_vec())
    } else {
        archive.clone().and_then(|mut z| {
            use std::io::Read;
            let mut value = Vec::new();
            z.by_name("mimetype")
                .ok()?
                .take(100)
                .read_to_end(&mut value)
                .ok()?;
            Some(value).filter(|v| v.starts_with(b"application/"))
        })
    };
    if let Some(value) = mimetype {
        let media: Media = std::str::from_utf8(&value)
            .ok()
            .map(str::trim)
            .filter(|m| m.contains('/'))
            .map(|m| Cow::Owned(m.to_owned()));
        let label = match media.as_deref() {
            Some("application/epub+zip") => "EPUB book",
            Some("application/vnd.oasis.opendocument.text") => "OpenDocument text",
            Some("application/vnd.oasis.opendocument.spreadsheet") => "OpenDocument spreadsheet",
            Some("application/vnd.oasis.opendocument.presentation") => "OpenDocument presentation",
            Some(m) if m.starts_with("application/vnd.oasis.opendocument.") => "OpenDocument file",
            _ => "ZIP archive",
        };
        return Unsupported::new(label, media.or(Some(Cow::Borrowed("application/zip"))));
    }
    let has = |name: &[u8]| memmem::find(bytes, name).is_some();
    // Office Open XML by the package's own entries: a deck or a document embedding a workbook
    // holds `xl/workbook.xml` inside one of its entries, which a search of the bytes would find
    // (a PowerPoint deck with a chart read as a workbook). Only a file whose directory cannot be
    // read falls back to that search.
    // Some writers separate folders with backslashes (`xl\workbook.xml`; Excel opens them).
    let entries: Option<Vec<String>> = archive
        .as_ref()
        .map(|z| z.file_names().map(|n| n.replace('\\', "/")).collect());
    let main_part = |part: &str, folder: &str| match &entries {
        Some(names) => names.iter().any(|n| n == part || n.starts_with(folder)),
        None => has(part.as_bytes()) || has(folder.as_bytes()),
    };
    let (word, excel, powerpoint) = (
        main_part("word/document.xml", "word/_rels/"),
        main_part("xl/workbook.xml", "xl/_rels/"),
        main_part("ppt/presentation.xml", "ppt/_rels/"),
    );
    if word {
        return found(
            "Word document",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        );
    }
    if excel {
        return found(
            "Excel workbook",
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        );
    }
    if powerpoint {
        return found(
            "PowerPoint presentation",
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        );
    }
    // iWork 2013+ (`Index/*.iwa`, or an `Index.zip`) and iWork '09 (`index.apxl`, or
    // `index.xml` beside its `buildVersionHistory.plist`, "B" in later versions); the
    // application from the name, else from the content.
    let iwork = has(b"Index/Document.iwa")
        || has(b"Index.zip")
        || has(b"index.apxl")
        || (has(b"index.xml") && has(b"uildVersionHistory.plist"));
    if iwork || matches!(extension, "pages" | "numbers" | "key") {
        let app = match extension {
            "numbers" => Some(Format::Numbers),
            "key" => Some(Format::Keynote),
            "pages" => Some(Format::Pages),
            _ => iwork::sniff(bytes),
        };
        return match app {
            Some(Format::Numbers) => found("Numbers spreadsheet", "application/vnd.apple.numbers"),
            Some(Format::Keynote) => found("Keynote presentation", "application/vnd.apple.keynote"),
            Some(Format::Pages) => found("Pages document", "application/vnd.apple.pages"),
            _ => found("iWork document", "application/vnd.apple.iwork"),
        };
    }
    match infer::get(bytes) {
        Some(kind) if kind.mime_type() != "application/zip" => Unsupported::new(
            format!("ZIP-based {} file", kind.extension()),
            Some(Cow::Borrowed(kind.mime_type())),
        ),
        _ => found("ZIP archive", "application/zip"),
    }
}

/// OLE2 compound files, told apart by the UTF-16 names of their streams.
fn ole2(bytes: &[u8]) -> Unsupported {
    let has = |name: &str| {
        let utf16: Vec<u8> = name.encode_utf16().flat_map(u16::to_le_bytes).collect();
        memmem::find(bytes, &utf16).is_some()
    };
    if has("EncryptedPackage") {
        // Office 2007+ encrypts a password-protected document into an OLE2 file holding the
        // package as one encrypted stream: not readable without the password.
        found(
            "password-protected (encrypted) Office document: remove its password and upload it again",
            "application/x-ole-storage",
        )
    } else if has("__substg1.0_") {
        found("Outlook message", "application/vnd.ms-outlook")
    } else if has("WordDocument") {
        found("Word 97-2003 document", "application/msword")
    } else if has("Workbook") || has("Book") {
        found("Excel 97-2003 workbook", "application/vnd.ms-excel")
    } else if has("PowerPoint Document") {
        found(
            "PowerPoint 97-2003 presentation",
            "application/vnd.ms-powerpoint",
        )
    } else {
        found(
            "OLE2 compound document (doc, xls, ppt or msg)",
            "application/x-ole-storage",
        )
    }
}

/// More than 1 in 50 of the first 64 KiB are control bytes: binary data rather than text in
/// an encoding we do not read yet.
fn mostly_control_bytes(bytes: &[u8]) -> bool {
    let sample = &bytes[..bytes.len().min(64 * 1024)];
    let controls = sample
        .iter()
        .filter(|&&b| (b < 0x20 && !b"\t\n\r\x0c\x1b".contains(&b)) || b == 0x7F)
        .count();
    controls * 50 > sample.len()
}

/// A name for binary data that no certain signature matched, from `infer`'s wider table. Only
/// used on data that is not text: several of its signatures are two ordinary letters.
fn name_binary(bytes: &[u8]) -> Option<Unsupported> {
    let pdf_later =
        bytes.len() > 5 && memmem::find(&bytes[..bytes.len().min(1024)], b"%PDF-").is_some();
    if pdf_later {
        return Some(found("PDF document", "application/pdf"));
    }
    infer::get(bytes).map(|kind| {
        let family = format!("{:?}", kind.matcher_type()).to_ascii_lowercase();
        Unsupported::new(
            format!("{family} file ({})", kind.extension()),
            Some(Cow::Borrowed(kind.mime_type())),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(bytes: &[u8], name: &str) -> String {
        detect(bytes, name, None).expect_err(name).to_string()
    }

    #[test]
    fn real_leading_bytes_are_refused_whatever_the_name() {
        // First bytes of the files in shared/eval/parsing/markitdown/test_files.
        let pdf = b"%PDF-1.4\n%\xC7\xEC\x8F\xA2\n5 0 obj\n<</Length 6 0 R/Filter /FlateDecode>>\nstream\n";
        assert_eq!(detect(pdf, "report.txt", None), Ok(Format::Pdf));
        let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\x01\0\0\0\x01\0\x08\x06\0\0\0";
        assert_eq!(detect(png, "notes.txt", None), Ok(Format::Png));
        assert_eq!(
            detect(b"\xFF\xD8\xFF\xE0\0\x10JFIF\0\x01", "a.md", None),
            Ok(Format::Jpeg)
        );
        assert_eq!(
            refused(b"GIF89a\x01\0\x01\0\x80\0\0", "a.csv"),
            "GIF image (image/gif)"
        );
        assert_eq!(detect(b"II*\0\x08\0\0\0", "scan", None), Ok(Format::Tiff));
        assert_eq!(
            detect(b"RIFF\x24\x08\0\0WEBPVP8 ", "x", None),
            Ok(Format::Webp)
        );
        assert_eq!(
            refused(b"\x1F\x8B\x08\0\0\0\0\0", "x.json"),
            "gzip archive (application/gzip)"
        );
        assert!(
            refused(b"\x7FELF\x02\x01\x01\0\0\0\0\0\0\0\0\0", "x").starts_with("ELF executable")
        );
        let zip = b"PK\x03\x04\x14\0\0\0\x08\0\0\0!\0";
        assert_eq!(detect(zip, "a.txt", None), Ok(Format::Zip));
        let ole = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1\0\0\0\0\0\0\0\0";
        assert!(refused(ole, "a.txt").starts_with("OLE2 compound document"));
        assert!(refused(b"{\\rtf1\\ansi\\deff0 hello}", "a.txt").starts_with("RTF document"));
        let svg = b"<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"><path d=\"M0 0\"/></svg>";
        assert_eq!(refused(svg, "logo.svg"), "SVG image (image/svg+xml)");
        let inline = b"<div><svg viewBox=\"0 0 1 1\"></svg> icon</div>";
        assert_eq!(detect(inline, "page.html", None), Ok(Format::Html));
    }

    #[test]
    fn zip_and_ole_families() {
        let mut odt =
            b"PK\x03\x04\x14\0\0\0\0\0\0\0\0\0\0\0\0\0\x27\0\0\0\x27\0\0\0\x08\0\0\0mimetype"
                .to_vec();
        odt.extend_from_slice(b"application/vnd.oasis.opendocument.textPK\x03\x04");
        assert_eq!(detect(&odt, "a.odt", None), Ok(Format::Odt));
        let mut docx = b"PK\x03\x04\x14\0\x06\0\x08\0\0\0!\0".to_vec();
        docx.extend_from_slice(b"....[Content_Types].xml....word/document.xml....");
        assert_eq!(detect(&docx, "a", None), Ok(Format::Docx));
        // A deck embedding a workbook (a chart's data) stored as is: its bytes hold
        // `xl/workbook.xml`, its directory says PowerPoint.
        let deck = {
            use std::io::Write as _;
            let stored = ::zip::write::SimpleFileOptions::default()
                .compression_method(::zip::CompressionMethod::Stored);
            let mut inner = ::zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            inner.start_file("xl/workbook.xml", stored).unwrap();
            inner.write_all(b"<workbook/>").unwrap();
            let workbook = inner.finish().unwrap().into_inner();
            let mut outer = ::zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            outer
                .start_file("ppt/embeddings/Sheet1.xlsx", stored)
                .unwrap();
            outer.write_all(&workbook).unwrap();
            outer.start_file("ppt/presentation.xml", stored).unwrap();
            outer.write_all(b"<p:presentation/>").unwrap();
            outer.finish().unwrap().into_inner()
        };
        assert_eq!(detect(&deck, "deck.pptx", None), Ok(Format::Pptx));
        // An OpenDocument package whose `mimetype` is not its first entry (pandoc's test ODTs):
        // the directory finds it.
        let late = {
            use std::io::Write as _;
            let options = ::zip::write::SimpleFileOptions::default();
            let mut zip = ::zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
            zip.start_file("content.xml", options).unwrap();
            zip.write_all(b"<office:document-content/>").unwrap();
            zip.start_file("mimetype", options).unwrap();
            zip.write_all(b"application/vnd.oasis.opendocument.text")
                .unwrap();
            zip.finish().unwrap().into_inner()
        };
        assert_eq!(detect(&late, "upload", None), Ok(Format::Odt));
        let keynote = b"PK\x03\x04\x14\0\0\0\x08\0Index/Metadata.iwa";
        assert_eq!(detect(keynote, "deck.key", None), Ok(Format::Keynote));
        let unknown = b"PK\x03\x04\x14\0\0\0\x08\0Index/Document.iwa";
        assert!(refused(unknown, "upload").starts_with("iWork document"));
        let mut msg = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1".to_vec();
        msg.extend(
            "__substg1.0_0037001F"
                .encode_utf16()
                .flat_map(u16::to_le_bytes),
        );
        assert_eq!(detect(&msg, "mail.msg", None), Ok(Format::Msg));
        let mut encrypted = b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1".to_vec();
        for stream in ["EncryptionInfo", "EncryptedPackage"] {
            encrypted.extend(stream.encode_utf16().flat_map(u16::to_le_bytes));
        }
        assert!(refused(&encrypted, "report.docx").starts_with("password-protected"));
    }

    #[test]
    fn text_is_text_whatever_the_name() {
        assert_eq!(
            detect(
                b"Quarterly report\n\nAll good.",
                "report.pdf",
                Some("application/pdf")
            ),
            Ok(Format::PlainText)
        );
        // Signatures of two ordinary letters do not make text binary.
        assert_eq!(
            detect(b"MZ is a fine prefix", "a.txt", None),
            Ok(Format::PlainText)
        );
        assert_eq!(detect(b"BC Hydro minutes", "", None), Ok(Format::PlainText));
        assert_eq!(
            detect(b"ID3 tags explained", "", None),
            Ok(Format::PlainText)
        );
        assert_eq!(detect(b"", "empty.txt", None), Ok(Format::PlainText));
    }

    #[test]
    fn binary_data_is_refused() {
        assert_eq!(refused(b"abc\0def", "a.txt"), "binary data (NUL bytes)");
        let random = std::fs::read(crate::tests::sample("random.bin")).unwrap();
        assert!(refused(&random, "random.txt").starts_with("binary data"));
        // Text in UTF-16 without a byte-order mark is all NULs to us, for now.
        let utf16: Vec<u8> = "hello".encode_utf16().flat_map(u16::to_le_bytes).collect();
        assert!(detect(&utf16, "a.txt", None).is_err());
        // Binary data without a certain signature is named by infer where it can be.
        assert!(refused(b"ID3\x03\0\0\0\0\x0f\x76\xff\xfb\x90\x00", "song").contains("audio/mpeg"));
    }

    #[test]
    fn legacy_encodings_are_text() {
        assert_eq!(
            detect(b"caf\xE9 cr\xE8me", "a.txt", None),
            Ok(Format::PlainText)
        );
        let kanji = std::fs::read(crate::tests::sample("test_mskanji.csv")).unwrap();
        assert_eq!(detect(&kanji, "test_mskanji.csv", None), Ok(Format::Csv));
    }

    #[test]
    fn utf16_with_a_byte_order_mark_is_text() {
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend("# Title\n\nbody".encode_utf16().flat_map(u16::to_le_bytes));
        assert_eq!(detect(&bytes, "notes.md", None), Ok(Format::Markdown));
        assert_eq!(detect(&bytes, "notes", None), Ok(Format::PlainText));
    }

    #[test]
    fn names_and_declared_types_pick_text_formats() {
        assert_eq!(detect(b"# Title", "README.MD", None), Ok(Format::Markdown));
        assert_eq!(detect(b"a,b\n1,2", "dir/data.csv", None), Ok(Format::Csv));
        assert_eq!(detect(b"a\tb\n1\t2", "data.tsv", None), Ok(Format::Tsv));
        assert_eq!(
            detect(b"a,b\n1,2", "upload", Some("text/csv; charset=utf-8")),
            Ok(Format::Csv)
        );
        assert_eq!(
            detect(b"# T", "notes.txt", Some("text/markdown")),
            Ok(Format::Markdown)
        );
        assert_eq!(
            detect(b"# T", "notes.csv", Some("text/markdown")),
            Ok(Format::Csv)
        );
        assert_eq!(detect(b"<p>hi</p>", "page.htm", None), Ok(Format::Html));
        assert_eq!(
            detect(b"  <!DOCTYPE html><title>x</title>", "page.txt", None),
            Ok(Format::Html)
        );
        assert_eq!(
            detect(
                b"<html lang=en><body>x",
                "",
                Some("application/octet-stream")
            ),
            Ok(Format::Html)
        );
        assert_eq!(
            detect(b"<b>not a page</b>", "", None),
            Ok(Format::PlainText)
        );
        assert_eq!(
            detect(b"<catalog><book>Dune</book></catalog>", "", None),
            Ok(Format::Xml)
        );
        let mail = b"Received: by mx\r\nFrom: a@example.com\r\nTo: b@example.com\r\nSubject: hi\r\n\r\nbody";
        assert_eq!(detect(mail, "message", None), Ok(Format::Eml));
        assert_eq!(
            detect(b"Note: one\nTodo: two\nFrom: three\n\nbody", "", None),
            Ok(Format::PlainText)
        );
        assert_eq!(
            detect(b"<?xml version='1.0'?><a>x</a>", "notes.txt", None),
            Ok(Format::Xml)
        );
        // Only the first KiB is looked at, cut on a character boundary.
        let late = format!("<!-- {} --><html>", "\u{e9}".repeat(600));
        assert_eq!(detect(late.as_bytes(), "", None), Ok(Format::PlainText));
        assert_eq!(detect(b"{\"a\": [1, 2]}", "data", None), Ok(Format::Json));
        assert_eq!(
            detect(b"{\"a\":1}\n{\"a\":2}\n", "rows.jsonl", None),
            Ok(Format::Json)
        );
        assert_eq!(
            detect(b"{\"a\":1}\n{\"a\":2}\n", "", None),
            Ok(Format::Json)
        );
        assert_eq!(detect(b"42", "n.json", None), Ok(Format::Json));
        assert_eq!(detect(b"42", "n", None), Ok(Format::PlainText));
        assert_eq!(
            detect(b"[1] Introduction", "paper", None),
            Ok(Format::PlainText)
        );
        // A .json file that is not JSON is still text.
        assert_eq!(
            detect(b"{\"a\": 1,}", "bad.json", None),
            Ok(Format::PlainText)
        );
        assert_eq!(detect(b"just words", ".json", None), Ok(Format::PlainText));
    }

    #[test]
    fn markitdown_samples() {
        let cases = [
            ("test.pdf", Ok(Format::Pdf)),
            ("test.docx", Ok(Format::Docx)),
            ("test.xlsx", Ok(Format::Xlsx)),
            ("test.pptx", Ok(Format::Pptx)),
            ("test.xls", Ok(Format::Xls)),
            ("test_outlook_msg.msg", Ok(Format::Msg)),
            ("test.epub", Ok(Format::Epub)),
            ("test.jpg", Ok(Format::Jpeg)),
            ("test_files.zip", Ok(Format::Zip)),
            ("test.json", Ok(Format::Json)),
            ("test_notebook.ipynb", Ok(Format::Json)),
            ("test_blog.html", Ok(Format::Html)),
            ("test_wikipedia.html", Ok(Format::Html)),
            ("test_rss.xml", Ok(Format::Xml)),
        ];
        for (file, expected) in cases {
            let bytes = std::fs::read(crate::tests::sample(file)).unwrap();
            let got = detect(&bytes, file, None).map_err(|e| e.to_string());
            assert_eq!(got, expected.map_err(str::to_owned), "{file}");
        }
    }
}
