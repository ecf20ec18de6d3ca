//! Time for the application.

pub use engram_types::clock::format_ms;
pub use engram_types::{Clock, SystemClock, UnixMs};
