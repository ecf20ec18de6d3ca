//! The console's operations pages.

use axum::Router;
use engram_app::App;

/// The operations routes (signed in: merged under the session's guard).
pub(super) fn routes() -> Router<App> {
    Router::new()
}
