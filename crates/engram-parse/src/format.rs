//! The formats `extract` understands, and their media types.

use std::fmt;

/// A format engram extracts text from. Each family has a module under `formats/`; the families
/// that come later (PDF, Office, iWork, images through OCR, EPUB, e-mail) add variants here, a
/// module there, and turn their signature in `detect` from `Unsupported` into `Ok`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Text without markup: paragraphs split on blank lines.
    PlainText,
    /// CommonMark with GitHub tables, footnotes, task lists and front matter.
    Markdown,
    /// Comma-separated values (RFC 4180 quoting).
    Csv,
    /// Tab-separated values (no quoting).
    Tsv,
    /// One JSON value, or a stream of them (JSON Lines).
    Json,
    /// HTML or XHTML.
    Html,
    /// XML: RSS and Atom feeds as sections, other documents as their elements' text.
    Xml,
    /// PDF: the text layer by page, scanned pages through OCR.
    Pdf,
    /// Images, read by OCR (with their descriptive metadata).
    Png,
    Jpeg,
    Tiff,
    Webp,
    /// Word (Office Open XML).
    Docx,
    /// PowerPoint (Office Open XML).
    Pptx,
    /// Spreadsheets: Excel (Office Open XML and 97-2003) and OpenDocument, read by calamine.
    Xlsx,
    Xls,
    Ods,
    /// EPUB books.
    Epub,
    /// ZIP archives: each entry engram reads.
    Zip,
    /// Outlook messages.
    Msg,
    /// OpenDocument text and presentations.
    Odt,
    Odp,
    /// E-mail messages (RFC 822 / MIME).
    Eml,
    /// Word and PowerPoint 97-2003.
    Doc,
    Ppt,
    /// Apple iWork: Pages documents, Numbers spreadsheets and Keynote presentations (2013 and
    /// later, and iWork '09).
    Pages,
    Numbers,
    Keynote,
}

impl Format {
    /// Every format, in declaration order.
    pub const ALL: &'static [Format] = &[
        Self::PlainText,
        Self::Markdown,
        Self::Csv,
        Self::Tsv,
        Self::Json,
        Self::Html,
        Self::Xml,
        Self::Pdf,
        Self::Png,
        Self::Jpeg,
        Self::Tiff,
        Self::Webp,
        Self::Docx,
        Self::Pptx,
        Self::Xlsx,
        Self::Xls,
        Self::Ods,
        Self::Epub,
        Self::Zip,
        Self::Msg,
        Self::Odt,
        Self::Odp,
        Self::Eml,
        Self::Doc,
        Self::Ppt,
        Self::Pages,
        Self::Numbers,
        Self::Keynote,
    ];

    /// The canonical media type, stored with the item; `from_media_type` reads it back.
    pub fn media_type(self) -> &'static str {
        match self {
            Self::PlainText => "text/plain",
            Self::Markdown => "text/markdown",
            Self::Csv => "text/csv",
            Self::Tsv => "text/tab-separated-values",
            Self::Json => "application/json",
            Self::Html => "text/html",
            Self::Xml => "application/xml",
            Self::Pdf => "application/pdf",
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::Tiff => "image/tiff",
            Self::Webp => "image/webp",
            Self::Docx => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            Self::Pptx => {
                "application/vnd.openxmlformats-officedocument.presentationml.presentation"
            }
            Self::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
            Self::Xls => "application/vnd.ms-excel",
            Self::Ods => "application/vnd.oasis.opendocument.spreadsheet",
            Self::Epub => "application/epub+zip",
            Self::Zip => "application/zip",
            Self::Msg => "application/vnd.ms-outlook",
            Self::Odt => "application/vnd.oasis.opendocument.text",
            Self::Odp => "application/vnd.oasis.opendocument.presentation",
            Self::Eml => "message/rfc822",
            Self::Doc => "application/msword",
            Self::Ppt => "application/vnd.ms-powerpoint",
            Self::Pages => "application/vnd.apple.pages",
            Self::Numbers => "application/vnd.apple.numbers",
            Self::Keynote => "application/vnd.apple.keynote",
        }
    }

    /// Whether the format is text (decoded first); binary formats are known only by content.
    pub fn is_text(self) -> bool {
        matches!(
            self,
            Self::PlainText
                | Self::Markdown
                | Self::Csv
                | Self::Tsv
                | Self::Json
                | Self::Html
                | Self::Xml
                | Self::Eml
        )
    }

    /// A short lower-case name, for logs and messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::PlainText => "plain text",
            Self::Markdown => "markdown",
            Self::Csv => "csv",
            Self::Tsv => "tsv",
            Self::Json => "json",
            Self::Html => "html",
            Self::Xml => "xml",
            Self::Pdf => "pdf",
            Self::Png => "png",
            Self::Jpeg => "jpeg",
            Self::Tiff => "tiff",
            Self::Webp => "webp",
            Self::Docx => "docx",
            Self::Pptx => "pptx",
            Self::Xlsx => "xlsx",
            Self::Xls => "xls",
            Self::Ods => "ods",
            Self::Epub => "epub",
            Self::Zip => "zip",
            Self::Msg => "msg",
            Self::Odt => "odt",
            Self::Odp => "odp",
            Self::Eml => "eml",
            Self::Doc => "doc",
            Self::Ppt => "ppt",
            Self::Pages => "pages",
            Self::Numbers => "numbers",
            Self::Keynote => "keynote",
        }
    }

    /// The format of a media type: the canonical one of each format and the common aliases.
    /// Parameters (`; charset=utf-8`) and case are ignored.
    pub fn from_media_type(media_type: &str) -> Option<Format> {
        let essence = media_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        Some(match essence.as_str() {
            "text/plain" => Self::PlainText,
            "text/markdown" | "text/x-markdown" => Self::Markdown,
            "text/csv" | "application/csv" | "text/comma-separated-values" => Self::Csv,
            "text/tab-separated-values" | "text/tsv" => Self::Tsv,
            "application/json"
            | "text/json"
            | "application/x-ndjson"
            | "application/jsonl"
            | "application/x-jsonlines" => Self::Json,
            "text/html" | "application/xhtml+xml" => Self::Html,
            "application/xml"
            | "text/xml"
            | "application/rss+xml"
            | "application/atom+xml"
            | "application/rdf+xml" => Self::Xml,
            "application/pdf" => Self::Pdf,
            "image/png" => Self::Png,
            "image/jpeg" | "image/jpg" => Self::Jpeg,
            "image/tiff" => Self::Tiff,
            "image/webp" => Self::Webp,
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document" => Self::Docx,
            "application/vnd.openxmlformats-officedocument.presentationml.presentation" => {
                Self::Pptx
            }
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" => Self::Xlsx,
            "application/vnd.ms-excel" => Self::Xls,
            "application/vnd.oasis.opendocument.spreadsheet" => Self::Ods,
            "application/epub+zip" => Self::Epub,
            "application/zip" | "application/x-zip-compressed" => Self::Zip,
            "application/vnd.ms-outlook" => Self::Msg,
            "application/vnd.oasis.opendocument.text" => Self::Odt,
            "application/vnd.oasis.opendocument.presentation" => Self::Odp,
            "message/rfc822" => Self::Eml,
            "application/msword" => Self::Doc,
            "application/vnd.ms-powerpoint" => Self::Ppt,
            "application/vnd.apple.pages" | "application/x-iwork-pages-sffpages" => Self::Pages,
            "application/vnd.apple.numbers" | "application/x-iwork-numbers-sffnumbers" => {
                Self::Numbers
            }
            "application/vnd.apple.keynote" | "application/x-iwork-keynote-sffkey" => Self::Keynote,
            other if other.starts_with("application/") && other.ends_with("+json") => Self::Json,
            _ => return None,
        })
    }

    /// The format a file-name extension (without the dot, any case) names, if it names one.
    pub fn from_extension(extension: &str) -> Option<Format> {
        Some(match extension.to_ascii_lowercase().as_str() {
            "txt" | "text" => Self::PlainText,
            "md" | "markdown" | "mdown" | "mkd" | "mkdn" | "mdwn" => Self::Markdown,
            "csv" => Self::Csv,
            "tsv" | "tab" => Self::Tsv,
            "json" | "jsonl" | "ndjson" | "geojson" => Self::Json,
            "html" | "htm" | "xhtml" => Self::Html,
            "xml" | "rss" | "atom" | "rdf" => Self::Xml,
            "eml" => Self::Eml,
            _ => return None,
        })
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_round_trip() {
        for &format in Format::ALL {
            assert_eq!(Format::from_media_type(format.media_type()), Some(format));
        }
        assert_eq!(
            Format::from_media_type("Text/HTML; charset=UTF-8"),
            Some(Format::Html)
        );
        assert_eq!(
            Format::from_media_type("application/ld+json"),
            Some(Format::Json)
        );
        assert_eq!(Format::from_media_type("application/x-tar"), None);
        assert_eq!(Format::from_media_type(""), None);
    }

    #[test]
    fn extensions() {
        assert_eq!(Format::from_extension("MD"), Some(Format::Markdown));
        assert_eq!(Format::from_extension("jsonl"), Some(Format::Json));
        assert_eq!(
            Format::from_extension("pdf"),
            None,
            "binary formats are known by content"
        );
    }
}
