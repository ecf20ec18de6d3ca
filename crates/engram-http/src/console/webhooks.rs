//! The console's webhooks pages.

use axum::Router;
use engram_app::App;

/// The webhooks routes (signed in: merged under the session's guard).
pub(super) fn routes() -> Router<App> {
    Router::new()
}
