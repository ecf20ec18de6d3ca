//! One module per format family. Text formats (this issue) share decoding; binary families
//! (PDF, Office, iWork, images, EPUB, e-mail) come as sibling modules taking the raw bytes.

pub(crate) mod archive;
pub(crate) mod bidi;
pub(crate) mod chart;
pub(crate) mod comments;
pub(crate) mod delimited;
pub(crate) mod eml;
pub(crate) mod epub;
pub(crate) mod fallback;
pub(crate) mod html;
pub(crate) mod image;
pub(crate) mod iwork;
pub(crate) mod json;
pub(crate) mod markdown;
pub(crate) mod msg;
pub(crate) mod numbering;
pub(crate) mod numfmt;
pub(crate) mod odf;
pub(crate) mod office97;
pub(crate) mod ooxml;
pub(crate) mod pdf;
pub(crate) mod pdf_table;
pub(crate) mod plain;
pub(crate) mod sheets;
pub(crate) mod table;
pub(crate) mod tools;
pub(crate) mod xml;
pub(crate) mod zipped;
