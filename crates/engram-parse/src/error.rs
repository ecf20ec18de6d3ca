//! Errors of detection and extraction, and the item code each one maps to.

use std::borrow::Cow;

use engram_types::ItemErrorCode;

/// Why `detect` refused a file. Its `Display` names what was found ("PDF document
/// (application/pdf)", "binary data (NUL bytes)") and is shown to the client after `E1002`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{label}{}", media_type.as_ref().map(|m| format!(" ({m})")).unwrap_or_default())]
pub struct Unsupported {
    label: Cow<'static, str>,
    media_type: Option<Cow<'static, str>>,
}

impl Unsupported {
    pub(crate) fn new(
        label: impl Into<Cow<'static, str>>,
        media_type: Option<Cow<'static, str>>,
    ) -> Self {
        Self {
            label: label.into(),
            media_type,
        }
    }

    /// What was found, without the media type.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The media type of what was found, when it was recognized.
    pub fn media_type(&self) -> Option<&str> {
        self.media_type.as_deref()
    }

    /// Always `E1002`: refused at upload, never queued.
    pub fn item_code(&self) -> ItemErrorCode {
        ItemErrorCode::UnsupportedFormat
    }
}

/// Why `extract` produced no document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Nothing but whitespace was left after extraction.
    #[error("no text could be extracted")]
    NoText,
    /// The content does not follow its format (invalid JSON, bytes that are not text).
    #[error("corrupt file: {0}")]
    Corrupt(String),
    /// The file, or what it expands to, is past one of the `Limits`.
    #[error("file too large: {what} over the limit of {limit}")]
    TooLarge { what: &'static str, limit: usize },
    /// Reading the item held more working memory than its budget.
    #[error("reading the item took more than its working memory budget of {limit} bytes (budgets.memory_bytes)")]
    OverMemory { limit: usize },
    /// Extraction ran past the item's time budget.
    #[error("extraction took longer than the item's time budget of {budget:?} (budgets.time_ms)")]
    TimedOut { budget: std::time::Duration },
    /// The item was deleted (or replaced) while it was being read.
    #[error("the item was deleted while it was being read")]
    Cancelled,
    /// A tool this format is read with is not installed.
    #[error(
        "reading this file needs `{tool}`, which is not installed (Debian package `{package}`)"
    )]
    ToolMissing {
        tool: &'static str,
        package: &'static str,
    },
}

impl ParseError {
    /// The item code reported in the item's status; all are terminal (the same file gives the
    /// same result). The spec's `E2002` ("no text could be extracted") covers empty, corrupt and
    /// unreadable files, the message says which; a file over a budget is engram's `E2003`, one
    /// past its time budget `E2004`. A cancelled item reports nothing (it is gone).
    pub fn item_code(&self) -> ItemErrorCode {
        match self {
            Self::NoText | Self::Corrupt(_) | Self::ToolMissing { .. } | Self::Cancelled => {
                ItemErrorCode::NoText
            }
            Self::TooLarge { .. } | Self::OverMemory { .. } => ItemErrorCode::OverBudget,
            Self::TimedOut { .. } => ItemErrorCode::TimedOut,
        }
    }
}

/// The `E####` code of an extraction error (see `ParseError::item_code`).
pub fn error_code(error: &ParseError) -> &'static str {
    error.item_code().as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_messages() {
        assert_eq!(error_code(&ParseError::NoText), "E2002");
        assert_eq!(error_code(&ParseError::Corrupt("x".into())), "E2002");
        assert_eq!(
            error_code(&ParseError::TooLarge {
                what: "blocks",
                limit: 1
            }),
            "E2003"
        );
        assert_eq!(
            error_code(&ParseError::TimedOut {
                budget: std::time::Duration::from_secs(1)
            }),
            "E2004"
        );
        let unsupported = Unsupported::new("PDF document", Some("application/pdf".into()));
        assert_eq!(unsupported.to_string(), "PDF document (application/pdf)");
        assert_eq!(unsupported.item_code().as_str(), "E1002");
        assert_eq!(
            Unsupported::new("binary data (NUL bytes)", None).to_string(),
            "binary data (NUL bytes)"
        );
    }
}
