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
