//! Shared vocabulary of engram: identifier newtypes, the error-code registry (code, HTTP status),
//! the field types of a database metadata schema, the limits of the spec and the dates a text names
//! (`temporal`, shared by graph extraction and retrieval). No I/O, no async.

pub mod backoff;
pub mod clock;
pub mod codes;
pub mod ids;
pub mod limits;
pub mod schema;
pub mod scopes;
pub mod status;
pub mod temporal;

pub use backoff::Backoff;
pub use clock::{millis, Clock, SystemClock, UnixMs};
pub use codes::{ErrorCode, FailureCode};
pub use ids::{ApiKeyPrefix, CollectionName, DatabaseId, DatabaseName, OrgId};
pub use scopes::{Scope, Scopes};
pub use status::{DeliveryStatus, IndexingStatus, ItemErrorCode, ItemKind};
