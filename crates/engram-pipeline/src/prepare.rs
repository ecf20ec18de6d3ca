//! Turning one claimed item into chunks: CPU-bound, run on the blocking pool.

use crate::chunk::{Chunk, Chunker};
use engram_parse::{Format, Limits};
use engram_store::{ClaimedItem, ItemOrigin};
use engram_types::ItemErrorCode;

/// An item ready to embed, or why it cannot be indexed (always terminal).
#[derive(Debug, Clone, PartialEq)]
pub enum Prepared {
    Chunks {
        /// The extracted text of a file, to store with the item.
        extracted_text: Option<String>,
        chunks: Vec<Chunk>,
    },
    Failed {
        code: ItemErrorCode,
        message: String,
    },
}

fn no_text(what: &str) -> Prepared {
    Prepared::Failed {
        code: ItemErrorCode::NoText,
        message: format!("no text could be extracted from {what}"),
    }
}

fn over_budget(what: &str, limit: usize, setting: &str) -> Prepared {
    Prepared::Failed {
        code: ItemErrorCode::OverBudget,
        message: format!("{what} over the limit of {limit} (budgets.{setting})"),
    }
}

/// Parses (files) and chunks one item, within `limits` (text, rows, time) and `max_chunks`.
/// Never panics on input; a parser panic is caught by the caller.
pub fn prepare(
    item: &ClaimedItem,
    chunker: &Chunker<'_>,
    limits: &Limits,
    max_chunks: usize,
) -> Prepared {
    let prepared = chunks_of(item, chunker, limits);
    // Chunking stops early on the interrupt: its partial result is not the item's.
    if let Err(stop) = limits.interrupt.check() {
        let whose = if item.filename.is_empty() {
            "the item"
        } else {
            &item.filename
        };
        return Prepared::Failed {
            code: stop.item_code(),
            message: format!("{whose}: {stop}"),
        };
    }
    if let Prepared::Chunks { chunks, .. } = &prepared {
        if chunks.len() > max_chunks {
            return over_budget(
                &format!("the item makes {} chunks,", chunks.len()),
                max_chunks,
                "chunks",
            );
        }
    }
    prepared
}

fn chunks_of(item: &ClaimedItem, chunker: &Chunker<'_>, limits: &Limits) -> Prepared {
    match item.origin {
        ItemOrigin::File => {
            let Some(bytes) = item.payload.as_deref() else {
                return Prepared::Failed {
                    code: ItemErrorCode::NoText,
                    message: "the uploaded file is missing".into(),
                };
            };
            let Some(format) = Format::from_media_type(&item.media_type) else {
                return Prepared::Failed {
                    code: ItemErrorCode::UnsupportedFormat,
                    message: format!("unsupported file format `{}`", item.media_type),
                };
            };
            match engram_parse::extract(bytes, format, limits) {
                Ok(document) => {
                    let chunks = chunker.chunk_blocks(&document.blocks);
                    if chunks.is_empty() {
                        return no_text(&item.filename);
                    }
                    Prepared::Chunks {
                        extracted_text: Some(document.text()),
                        chunks,
                    }
                }
                Err(err) => Prepared::Failed {
                    code: err.item_code(),
                    message: format!("{}: {err}", item.filename),
                },
            }
        }
        ItemOrigin::App | ItemOrigin::Memory => {
            let text = item.text.as_deref().unwrap_or_default();
            if text.len() > limits.max_text_bytes {
                return over_budget(
                    &format!("the text has {} bytes,", text.len()),
                    limits.max_text_bytes,
                    "text_bytes",
                );
            }
            let chunks = chunker.chunk_text(text);
            if chunks.is_empty() {
                return no_text(if item.origin == ItemOrigin::App {
                    "the app content"
                } else {
                    "the memory"
                });
            }
            Prepared::Chunks {
                extracted_text: None,
                chunks,
            }
        }
    }
}
