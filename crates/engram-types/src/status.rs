//! States of ingested items.

use serde::{Deserialize, Serialize};

/// Indexing state of an ingested item. `completed` and `errored` are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexingStatus {
    Queued,
    Processing,
    GraphCreation,
    Completed,
    Errored,
}

impl IndexingStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Processing => "processing",
            Self::GraphCreation => "graph_creation",
            Self::Completed => "completed",
            Self::Errored => "errored",
        }
    }

    /// Parses a stored or requested state; `success` is the legacy alias of `completed`.
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "queued" => Self::Queued,
            "processing" => Self::Processing,
            "graph_creation" => Self::GraphCreation,
            "completed" | "success" => Self::Completed,
            "errored" => Self::Errored,
            _ => return None,
        })
    }

    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Errored)
    }
}

/// Which class of content an item is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemKind {
    Knowledge,
    Memory,
}

impl ItemKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Knowledge => "knowledge",
            Self::Memory => "memory",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "knowledge" => Some(Self::Knowledge),
            "memory" => Some(Self::Memory),
            _ => None,
        }
    }
}

/// Asynchronous failure codes of ingested items (`E####`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ItemErrorCode {
    /// Unsupported file format; answered at upload, never queued.
    UnsupportedFormat,
    /// No text could be extracted.
    NoText,
    /// The item is over one of its budgets (file bytes, extracted text, chunks, table rows);
    /// the message names the limit. engram's own code; terminal.
    OverBudget,
    /// The item's indexing took longer than its time budget. engram's own code; terminal.
    TimedOut,
    /// Storage or indexing failure while persisting; retried.
    Transient,
}

impl ItemErrorCode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnsupportedFormat => "E1002",
            Self::NoText => "E2002",
            Self::OverBudget => "E2003",
            Self::TimedOut => "E2004",
            Self::Transient => "E6001",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn success_is_the_legacy_alias_of_completed() {
        assert_eq!(
            IndexingStatus::parse("success"),
            Some(IndexingStatus::Completed)
        );
        for s in [
            IndexingStatus::Queued,
            IndexingStatus::Processing,
            IndexingStatus::GraphCreation,
            IndexingStatus::Completed,
            IndexingStatus::Errored,
        ] {
            assert_eq!(IndexingStatus::parse(s.as_str()), Some(s));
        }
        assert!(
            IndexingStatus::Errored.is_terminal() && !IndexingStatus::GraphCreation.is_terminal()
        );
    }
}

/// State of one webhook delivery. `delivered` and `permanently_failed` are final unless a
/// manual retry queues the delivery again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Created with the terminal indexing state; the first send is due or under way.
    Pending,
    /// Claimed by the background sweep for a retry (or recovered after a crash).
    Sweeping,
    Delivered,
    /// An attempt failed; another is scheduled.
    Failed,
    /// Every automatic attempt failed.
    PermanentlyFailed,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 5] = [
        Self::Pending,
        Self::Sweeping,
        Self::Delivered,
        Self::Failed,
        Self::PermanentlyFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Sweeping => "sweeping",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
            Self::PermanentlyFailed => "permanently_failed",
        }
    }

    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == value)
    }

    /// Whether a manual retry may queue the delivery again.
    pub fn is_retryable(self) -> bool {
        matches!(self, Self::Failed | Self::PermanentlyFailed)
    }
}
