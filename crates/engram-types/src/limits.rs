//! Limits of the spec and of engram itself, in one place.

/// Longest database (tenant) name.
pub const DATABASE_NAME_MAX: usize = 25;
/// Longest collection (sub-tenant) name.
pub const COLLECTION_NAME_MAX: usize = 64;
/// Longest organization id.
pub const ORG_ID_MAX: usize = 64;
/// Most fields a database metadata schema may declare.
pub const SCHEMA_FIELDS_MAX: usize = 64;
/// Longest metadata field name.
pub const SCHEMA_FIELD_NAME_MAX: usize = 64;
/// Largest `max_length` a VARCHAR schema field may declare.
pub const SCHEMA_VARCHAR_MAX_LENGTH: u32 = 65_535;
/// Default embedding dimension (all-MiniLM-L6-v2).
pub const DEFAULT_EMBEDDING_DIMENSION: u32 = 384;
/// Accepted range of `embeddings_dimension`.
pub const EMBEDDING_DIMENSION_RANGE: std::ops::RangeInclusive<u32> = 1..=4096;
/// Largest JSON request body accepted.
pub const JSON_BODY_MAX_BYTES: usize = 16 * 1024 * 1024;
/// Shortest webhook signing secret a client may set.
pub const SIGNING_SECRET_MIN_CHARS: usize = 16;
/// Longest item id; ids hold no control characters and no `,` (ids are polled as a
/// comma-separated list).
pub const ITEM_ID_MAX_CHARS: usize = 256;
/// Most sources one item may link to (`relations.ids`).
pub const ITEM_LINKS_MAX: usize = 100;
/// Longest item title.
pub const TITLE_MAX_CHARS: usize = 1024;
/// Most keys an item's `metadata` or `additional_metadata` object may hold (each).
pub const ITEM_METADATA_KEYS_MAX: usize = 256;
/// Largest serialized `metadata` plus `additional_metadata` of one item.
pub const ITEM_METADATA_MAX_BYTES: usize = 64 * 1024;
/// Most items (files, app content and memories together) one ingest request may carry.
pub const ITEMS_PER_REQUEST_MAX: usize = 1000;
/// Most filter keys one query or listing may give (all filter objects together).
pub const FILTER_KEYS_MAX: usize = 256;
/// Most values all of a query's or listing's filter lists may hold together.
pub const FILTER_VALUES_MAX: usize = 1024;
/// Longest webhook URL.
pub const WEBHOOK_URL_MAX_CHARS: usize = 2048;
/// Longest custom ingestion instructions (a database's, a collection's, an item's), as for
/// connectors in the spec.
pub const INSTRUCTIONS_MAX_CHARS: usize = 4000;
/// Most collections one instructions update may name.
pub const INSTRUCTION_COLLECTIONS_MAX: usize = 256;
/// Lifetime of a source download link when the caller names none, and the longest allowed.
pub const DOWNLOAD_LINK_DEFAULT_SECS: u64 = 3600;
pub const DOWNLOAD_LINK_MAX_SECS: u64 = 7 * 24 * 3600;
/// Longest feedback comment and ground-truth answer; most ground-truth source ids and
/// metadata entries of one feedback.
pub const FEEDBACK_TEXT_MAX_CHARS: usize = 10_000;
pub const FEEDBACK_LIST_MAX: usize = 100;
/// Longest API key label (`name`).
pub const KEY_NAME_MAX_CHARS: usize = 200;
/// Most databases one API key may be restricted to.
pub const KEY_DATABASES_MAX: usize = 100;
/// Longest lifetime an API key may be given (`expires_in`): ten years.
pub const KEY_EXPIRES_IN_MAX_SECS: u64 = 10 * 365 * 24 * 3600;
/// Longest `extra_context` of a question (`/recall/qna`), in characters.
pub const EXTRA_CONTEXT_MAX_CHARS: usize = 4_000;
