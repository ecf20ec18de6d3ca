//! Reading ZIP containers (Office Open XML, OpenDocument, EPUB, plain archives) safely: a bound
//! on the number of entries, on every entry's and all entries' inflated bytes (read through
//! `take`, so a header that lies about sizes cannot exceed it), so a zip bomb fails with
//! `TooLarge` after bounded work.

use std::io::{Cursor, Read};

use zip::ZipArchive;

use crate::{Limits, ParseError};

/// Most entries a container may list.
const MAX_ENTRIES: usize = 20_000;

pub(crate) struct Container<'a> {
    zip: ZipArchive<Cursor<&'a [u8]>>,
    /// Inflated bytes still allowed.
    budget: usize,
}

impl<'a> Container<'a> {
    pub(crate) fn open(bytes: &'a [u8], limits: &Limits) -> Result<Self, ParseError> {
        Self::with_budget(
            bytes,
            limits.max_text_bytes.max(limits.max_bytes),
            "zip container",
        )
    }

    /// A container held in an entry of this one (iWork's `Index.zip`): it may inflate no more
    /// than what this one still may.
    pub(crate) fn nested<'b>(&self, bytes: &'b [u8]) -> Result<Container<'b>, ParseError> {
        Container::with_budget(bytes, self.budget, "inner zip container")
    }

    fn with_budget(bytes: &'a [u8], budget: usize, what: &str) -> Result<Self, ParseError> {
        let zip = ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| ParseError::Corrupt(format!("unreadable {what}: {e}")))?;
        if zip.len() > MAX_ENTRIES {
            return Err(ParseError::TooLarge {
                what: "zip entries",
                limit: MAX_ENTRIES,
            });
        }
        Ok(Self { zip, budget })
    }

    /// Inflated bytes still allowed.
    pub(crate) fn budget(&self) -> usize {
        self.budget
    }

    /// The extra field of entry `name`, read without inflating the entry.
    pub(crate) fn extra_field(&mut self, name: &str) -> Option<Vec<u8>> {
        let index = self.zip.index_for_name(name)?;
        let entry = self.zip.by_index_raw(index).ok()?;
        entry.extra_data().map(<[u8]>::to_vec)
    }

    /// Entry names, in the archive's order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.zip.file_names().map(str::to_owned).collect()
    }

    /// The inflated bytes of `name`, or `None` when there is no such entry.
    pub(crate) fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, ParseError> {
        let mut entry = match self.zip.by_name(name) {
            Ok(entry) => entry,
            Err(zip::result::ZipError::FileNotFound) => return Ok(None),
            Err(zip::result::ZipError::UnsupportedArchive(
                zip::result::ZipError::PASSWORD_REQUIRED,
            )) => {
                return Err(ParseError::Corrupt(
                    "the document is password-protected".into(),
                ))
            }
            Err(e) => return Err(ParseError::Corrupt(format!("zip entry {name}: {e}"))),
        };
        if entry.is_dir() {
            return Ok(None);
        }
        let cap = u64::try_from(self.budget)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let mut out = Vec::new();
        (&mut entry)
            .take(cap)
            .read_to_end(&mut out)
            .map_err(|e| ParseError::Corrupt(format!("zip entry {name}: {e}")))?;
        if out.len() > self.budget {
            return Err(ParseError::TooLarge {
                what: "inflated zip bytes",
                limit: self.budget,
            });
        }
        self.budget -= out.len();
        Ok(Some(out))
    }

    /// The entry as text (UTF-8, lossy), or `None`.
    pub(crate) fn text(&mut self, name: &str) -> Result<Option<String>, ParseError> {
        Ok(self
            .read(name)?
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn zip_bombs_stop_at_the_budget() {
        let mut buffer = Cursor::new(Vec::new());
        {
            let mut writer = zip::ZipWriter::new(&mut buffer);
            let options = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Deflated);
            writer.start_file("zeros.xml", options).unwrap();
            let block = vec![0u8; 1 << 20];
            for _ in 0..300 {
                writer.write_all(&block).unwrap();
            }
            writer.finish().unwrap();
        }
        let bytes = buffer.into_inner();
        assert!(
            bytes.len() < 2 << 20,
            "300 MB of zeros deflate to {} bytes",
            bytes.len()
        );
        let mut zip = Container::open(&bytes, &Limits::default()).unwrap();
        assert!(matches!(
            zip.read("zeros.xml"),
            Err(ParseError::TooLarge { .. })
        ));
        assert!(Container::open(b"PK\x03\x04 not a zip", &Limits::default()).is_err());
    }
}
